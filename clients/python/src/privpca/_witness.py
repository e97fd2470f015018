"""The witness's local state: the last verified checkpoint of each log, and the service's
verifier key pinned on first use, in one JSON file (``~/.privpca/witness.json`` unless told
otherwise)::

    {"format": "privpca-witness/1",
     "services": {"<base URL>": {"verifier_key": "<name>+<id>+<key>",
                                 "logs": {"datasets/<id>": "<signed checkpoint note>", ...}}}}

The checkpoints are kept as the signed notes the service sent, so each is checked again with
the pinned key when it is read back, and can be handed to any other verifier
(``privpca verify --checkpoint``, ``scripts/receipt_verifier.py consistency``).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ReceiptError

FORMAT = "privpca-witness/1"
#: Where :meth:`privpca.Client.witness` keeps its state unless given a file (or the
#: ``PRIVPCA_WITNESS_FILE`` environment variable names one).
DEFAULT_STATE_FILE = Path("~/.privpca/witness.json")


@dataclass(frozen=True)
class Witnessed:
    """What :meth:`privpca.Client.witness` verified: the log's ``origin``, its tree ``size``
    and ``root`` hash now, the size it had at the checkpoint this witness saved before
    (``previous_size``, ``None`` on the first visit), the new signed ``checkpoint`` note (now
    saved) and the ``state_file`` it is saved in."""

    log: str
    origin: str
    size: int
    root: bytes = field(repr=False)
    previous_size: int | None = None
    checkpoint: str = field(default="", repr=False)
    state_file: Path = field(default=Path(), repr=False)

    @property
    def first_visit(self) -> bool:
        """True when there was no earlier checkpoint of this log to check against."""
        return self.previous_size is None


def state_path(state_file: str | os.PathLike[str] | None) -> Path:
    """The state file: ``state_file``, else ``$PRIVPCA_WITNESS_FILE``, else the default."""
    if state_file is None:
        state_file = os.environ.get("PRIVPCA_WITNESS_FILE") or DEFAULT_STATE_FILE
    return Path(state_file).expanduser()


def load(path: Path) -> dict[str, Any]:
    """The state in ``path`` (an empty one if the file does not exist)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {"format": FORMAT, "services": {}}
    try:
        state = json.loads(text)
    except ValueError as e:
        raise ReceiptError(f"the witness state file {path} is not JSON ({e}); move it aside to start over") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT or not isinstance(state.get("services"), dict):
        raise ReceiptError(f"the witness state file {path} is not a {FORMAT} file; move it aside to start over")
    return state


def service(state: dict[str, Any], base_url: str) -> dict[str, Any]:
    """The state's entry for one service (read-only view: empty if there is none)."""
    entry = state["services"].get(base_url)
    if entry is None:
        return {}
    if not isinstance(entry, dict) or not isinstance(entry.get("logs", {}), dict):
        raise ReceiptError(f"the witness state's entry for {base_url} is malformed")
    return entry


def save(path: Path, base_url: str, verifier_key: str, log: str, checkpoint: str) -> None:
    """Records ``checkpoint`` as the last verified head of ``log`` (and pins the key), written
    atomically: a temporary file in the same directory, flushed, then renamed over the old one,
    so a crash leaves the old state or the new, never half of one. The file is read again just
    before, so that other logs' entries written meanwhile are kept."""
    path.parent.mkdir(parents=True, exist_ok=True)
    state = load(path)
    entry = state["services"].setdefault(base_url, {})
    entry["verifier_key"] = verifier_key
    entry.setdefault("logs", {})[log] = checkpoint
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(state, f, indent=2, sort_keys=True, ensure_ascii=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except FileNotFoundError:
            pass
        raise
