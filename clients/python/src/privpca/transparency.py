"""Checking the service's transparency log: receipts, signed checkpoints and consistency proofs.

Every ledger event of a dataset (a budget, a charge, a refund, a deletion) is a leaf of an
append-only Merkle log, one log per dataset and one per study; the service signs the log's
head (a *checkpoint*) with its Ed25519 key. Everything here follows the published formats
(docs/design/ledger.md, "The transparency log"), so the service's own code is not trusted:

- the tree: RFC 6962 §2.1 over SHA-256, leaf hash SHA-256(0x00 ‖ leaf), node hash
  SHA-256(0x01 ‖ left ‖ right); inclusion proofs checked by RFC 9162 §2.1.3.2, consistency
  proofs by RFC 9162 §2.1.4.2;
- signed notes (C2SP signed-note): the text, a blank line, and lines
  ``— <key name> <base64(key ID ‖ Ed25519 signature)>``, the key ID being
  SHA-256(name ‖ 0x0A ‖ 0x01 ‖ public key)[:4]; verifier keys are
  ``<name>+<8 hex key ID>+<base64(0x01 ‖ public key)>`` (``GET /v1/ledger-key``);
- checkpoints (C2SP tlog-checkpoint): ``<origin>\\n<decimal tree size>\\n<base64 root>\\n``.

A failed check raises :class:`~privpca.ReceiptError` saying why.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .errors import LogRewrittenError, ReceiptError

#: The root hash of the empty tree: SHA-256 of nothing (RFC 6962 §2.1).
EMPTY_ROOT = hashlib.sha256(b"").digest()

_EM_DASH = "\u2014"
_ED25519 = 0x01
_MAX_SIGNATURES = 100


# -- the tree ------------------------------------------------------------------------------


def leaf_hash(leaf: bytes) -> bytes:
    """SHA-256(0x00 ‖ leaf) (RFC 6962 §2.1)."""
    return hashlib.sha256(b"\x00" + leaf).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 ‖ left ‖ right) (RFC 6962 §2.1)."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def verify_inclusion(index: int, size: int, leaf_digest: bytes, proof: Sequence[bytes], root: bytes) -> None:
    """Checks that the leaf with hash ``leaf_digest`` is at ``index`` of the tree of ``size``
    leaves whose root is ``root`` (RFC 9162 §2.1.3.2); raises :class:`ReceiptError` if not."""
    if not 0 <= index < size:
        raise ReceiptError(f"the leaf index {index} is not below the tree size {size}")
    fn, sn, r = index, size - 1, leaf_digest
    for p in proof:
        if sn == 0:
            raise ReceiptError("the inclusion proof is too long")
        if fn & 1 == 1 or fn == sn:
            r = node_hash(p, r)
            if fn & 1 == 0:
                while fn & 1 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ReceiptError("the inclusion proof is too short")
    if r != root:
        raise ReceiptError("the inclusion proof does not lead to the checkpoint's root hash")


def verify_consistency(first: int, second: int, first_root: bytes, second_root: bytes, proof: Sequence[bytes]) -> None:
    """Checks that the tree of ``second`` leaves with root ``second_root`` extends the tree of
    ``first`` leaves with root ``first_root``: the first ``first`` leaves are the same
    (RFC 9162 §2.1.4.2; RFC 6962 §2.1.2 has empty proofs for ``first == second`` and for
    ``first == 0``). Raises :class:`LogRewrittenError` if not."""
    if first < 0 or first > second:
        raise LogRewrittenError(f"the old tree size {first} is above the new one {second}")
    if first == second or first == 0:
        if proof:
            raise LogRewrittenError("the consistency proof should be empty")
        if first == second and first_root != second_root:
            raise LogRewrittenError(f"two checkpoints of the same size {first} have different root hashes")
        if first == 0 and first_root != EMPTY_ROOT:
            raise LogRewrittenError("an empty tree's root hash is not SHA-256 of nothing")
        return
    path = list(proof)
    if not path:
        raise LogRewrittenError("the consistency proof is empty")
    if first & (first - 1) == 0:  # first is an exact power of 2
        path.insert(0, first_root)
    fn, sn = first - 1, second - 1
    while fn & 1 == 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise LogRewrittenError("the consistency proof is too long")
        if fn & 1 == 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if fn & 1 == 0:
                while fn & 1 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise LogRewrittenError("the consistency proof is too short")
    if fr != first_root:
        raise LogRewrittenError("the consistency proof does not lead to the old checkpoint's root hash")
    if sr != second_root:
        raise LogRewrittenError("the consistency proof does not lead to the new checkpoint's root hash")


# -- signed notes and checkpoints ------------------------------------------------------------


def b64decode(text: str | bytes, what: str) -> bytes:
    """Standard base64 with padding (RFC 4648 §4), canonical; bytes pass unchanged."""
    if isinstance(text, bytes):
        return text
    if not isinstance(text, str):
        raise ReceiptError(f"{what} is not a string")
    try:
        data = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as e:
        raise ReceiptError(f"{what} is not standard base64 ({e})") from None
    if base64.b64encode(data).decode("ascii") != text:
        raise ReceiptError(f"{what} is not canonical base64")
    return data


def _valid_name(name: str) -> bool:
    return name != "" and "+" not in name and not any(c.isspace() for c in name)


def _key_id(name: str, public: bytes) -> int:
    digest = hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([_ED25519]) + public).digest()
    return int.from_bytes(digest[:4], "big")


@dataclass(frozen=True)
class VerifierKey:
    """A C2SP signed-note verifier key, ``<name>+<8 hex key ID>+<base64(0x01 ‖ Ed25519 key)>``,
    as ``GET /v1/ledger-key`` serves it and the service prints at start."""

    name: str
    key_id: int
    public_key: bytes

    @classmethod
    def parse(cls, text: str) -> VerifierKey:
        """Reads a verifier key string; :class:`ReceiptError` if it is not one (wrong form, not
        Ed25519, or a key ID that does not match the name and key)."""
        if not isinstance(text, str):
            raise ReceiptError("the verifier key is not a string")
        parts = text.strip().split("+", 2)
        if len(parts) != 3:
            raise ReceiptError("the verifier key is not <name>+<key ID>+<key>")
        name, id_hex, key64 = parts
        if not _valid_name(name):
            raise ReceiptError(f"the verifier key's name {name!r} is not valid")
        if len(id_hex) != 8 or any(c not in "0123456789abcdefABCDEF" for c in id_hex):
            raise ReceiptError("the verifier key's ID is not 8 hex digits")
        data = b64decode(key64, "the verifier key")
        if len(data) != 33 or data[0] != _ED25519:
            raise ReceiptError("the verifier key is not an Ed25519 key (0x01 and 32 bytes)")
        public = data[1:]
        if _key_id(name, public) != int(id_hex, 16):
            raise ReceiptError("the verifier key's ID does not match its name and key")
        return cls(name=name, key_id=int(id_hex, 16), public_key=public)

    def __str__(self) -> str:
        encoded = base64.b64encode(bytes([_ED25519]) + self.public_key).decode("ascii")
        return f"{self.name}+{self.key_id:08x}+{encoded}"

    def open(self, note: str) -> str:
        """The text of a signed note that this key signed (C2SP signed-note). Signatures by
        other keys are ignored, as the specification requires; :class:`ReceiptError` if the
        note is malformed, carries no signature by this key, or its signature does not verify."""
        if not isinstance(note, str):
            raise ReceiptError("the signed note is not a string")
        if any(ord(c) < 0x20 and c != "\n" for c in note):
            raise ReceiptError("the signed note contains a control character")
        split = note.rfind("\n\n")
        if split < 0:
            raise ReceiptError("the signed note has no blank line before its signatures")
        text, signatures = note[: split + 1], note[split + 2 :]
        if not signatures.endswith("\n"):
            raise ReceiptError("the signed note has no signature line, or one without its newline")
        lines = signatures[:-1].split("\n")
        if len(lines) > _MAX_SIGNATURES:
            raise ReceiptError("the signed note has too many signatures")
        verifier = Ed25519PublicKey.from_public_bytes(self.public_key)
        verified = False
        for line in lines:
            if not line.startswith(_EM_DASH + " "):
                raise ReceiptError("a signature line of the note does not begin with an em dash")
            name, sep, sig64 = line[2:].partition(" ")
            if not sep or not _valid_name(name):
                raise ReceiptError("a signature line of the note is malformed")
            signature = b64decode(sig64, "a note signature")
            if len(signature) < 5:
                raise ReceiptError("a note signature is too short")
            if name != self.name or int.from_bytes(signature[:4], "big") != self.key_id:
                continue
            try:
                verifier.verify(signature[4:], text.encode("utf-8"))
            except InvalidSignature:
                raise ReceiptError(f"the note's signature by {self.name}+{self.key_id:08x} does not verify") from None
            verified = True
        if not verified:
            raise ReceiptError(f"the note carries no signature by {self.name}+{self.key_id:08x}")
        return text


def verifier_key(key: str | VerifierKey) -> VerifierKey:
    """``key`` as a :class:`VerifierKey` (a string is parsed)."""
    return key if isinstance(key, VerifierKey) else VerifierKey.parse(key)


@dataclass(frozen=True)
class Checkpoint:
    """A verified checkpoint (C2SP tlog-checkpoint): the log's ``origin`` (its name,
    ``<service>/datasets/<id>`` or ``<service>/studies/<id>``), its tree ``size``, its
    ``root`` hash, and the signed ``note`` it was read from."""

    origin: str
    size: int
    root: bytes = field(repr=False)
    note: str = field(repr=False)

    @classmethod
    def verify(cls, note: str, public_key: str | VerifierKey, *, origin: str | None = None) -> Checkpoint:
        """Checks the note's signature with ``public_key`` and reads the checkpoint it signs;
        with ``origin``, checks that it is that log's. :class:`ReceiptError` if anything fails."""
        checkpoint = cls.parse(verifier_key(public_key).open(note), note)
        if origin is not None and checkpoint.origin != origin:
            raise ReceiptError(f"the checkpoint is of the log {checkpoint.origin!r}, not {origin!r}")
        return checkpoint

    @classmethod
    def parse(cls, text: str, note: str | None = None) -> Checkpoint:
        """Reads a checkpoint's note text (without checking any signature)."""
        if not text.endswith("\n"):
            raise ReceiptError("the checkpoint does not end with a newline")
        lines = text[:-1].split("\n")
        if len(lines) < 3:
            raise ReceiptError("the checkpoint has fewer than three lines")
        origin, size, root64 = lines[0], lines[1], lines[2]
        if origin == "":
            raise ReceiptError("the checkpoint's origin is empty")
        if not (size.isascii() and size.isdigit()) or (len(size) > 1 and size[0] == "0"):
            raise ReceiptError("the checkpoint's tree size is not a decimal number")
        if int(size) >= 2**64:
            raise ReceiptError("the checkpoint's tree size is too large")
        root = b64decode(root64, "the checkpoint's root hash")
        if len(root) != 32:
            raise ReceiptError("the checkpoint's root hash is not 32 bytes")
        if any(line == "" for line in lines[3:]):
            raise ReceiptError("the checkpoint has an empty extension line")
        return cls(origin=origin, size=int(size), root=root, note=text if note is None else note)


def _hashes(value: Any, what: str) -> list[bytes]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ReceiptError(f"{what} is not a list")
    hashes = [b64decode(h, what) for h in value]
    if any(len(h) != 32 for h in hashes):
        raise ReceiptError(f"{what} holds a hash that is not 32 bytes")
    return hashes


def verify_extension(old: Checkpoint, new: Checkpoint, proof: Sequence[str | bytes]) -> None:
    """Checks that ``new`` is an append-only extension of ``old``: the same log (origin), no
    smaller, and joined by the consistency ``proof`` (base64 strings as the service sends them,
    or bytes). Raises :class:`LogRewrittenError` if not."""
    if old.origin != new.origin:
        raise LogRewrittenError(f"the checkpoints are of different logs: {old.origin!r} and {new.origin!r}")
    if new.size < old.size:
        raise LogRewrittenError(f"the log shrank: size {new.size} now, {old.size} before")
    try:
        hashes = _hashes(proof, "the consistency proof")
    except ReceiptError as e:
        raise LogRewrittenError(str(e)) from None
    verify_consistency(old.size, new.size, old.root, new.root, hashes)


# -- receipts --------------------------------------------------------------------------------


@dataclass(frozen=True)
class VerifiedReceipt:
    """What a verified receipt proves: the log (``origin``) of ``size`` leaves with root hash
    ``root``, signed by the service's key, has the ``event`` (the leaf's JSON, a dict) at
    ``leaf_index``. ``checkpoint`` is the verified head."""

    event: dict[str, Any]
    origin: str
    size: int
    root: bytes = field(repr=False)
    leaf_index: int
    leaf: bytes = field(repr=False)
    checkpoint: Checkpoint = field(repr=False)

    @property
    def kind(self) -> str | None:
        """The event's kind: ``budget_set``, ``charge``, ``refund`` or ``deletion``."""
        kind = self.event.get("kind")
        return None if kind is None else str(kind)

    @property
    def job_id(self) -> str | None:
        """The job the event names, if any."""
        job = self.event.get("job")
        return None if job is None else str(job)


@dataclass(frozen=True)
class Receipt:
    """The receipt of a ledger event, as job and study views and results carry it:
    ``{"leaf", "leaf_index", "inclusion_proof", "checkpoint"}``. ``leaf`` is the event's
    bytes (the RFC 8785 canonical JSON), or their base64 as the API sends them; the proof's
    hashes likewise; ``checkpoint`` is the signed note of the tree the proof is in.

    :meth:`verify` checks it offline with the service's verifier key."""

    leaf: bytes | str = field(repr=False)
    leaf_index: int
    inclusion_proof: tuple[bytes | str, ...] = field(repr=False)
    checkpoint: str

    def __init__(
        self, leaf: bytes | str, leaf_index: int, inclusion_proof: Sequence[bytes | str], checkpoint: str
    ) -> None:
        object.__setattr__(self, "leaf", leaf)
        object.__setattr__(self, "leaf_index", leaf_index)
        # A proof that is not a list is kept as it is, for verify to refuse.
        proof = tuple(inclusion_proof) if isinstance(inclusion_proof, (list, tuple)) else inclusion_proof
        object.__setattr__(self, "inclusion_proof", proof)
        object.__setattr__(self, "checkpoint", checkpoint)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Receipt:
        """A receipt from its JSON object; :class:`ReceiptError` if a member is missing or of
        the wrong type."""
        if not isinstance(raw, Mapping):
            raise ReceiptError("the receipt is not a JSON object")
        for name, kind in (("leaf", str), ("leaf_index", int), ("inclusion_proof", list), ("checkpoint", str)):
            value = raw.get(name)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise ReceiptError(f"the receipt's {name} is missing or not a {kind.__name__}")
        return cls(raw["leaf"], raw["leaf_index"], raw["inclusion_proof"], raw["checkpoint"])

    def to_json(self) -> dict[str, Any]:
        """The receipt as the API sends it (base64 leaf and hashes): what ``privpca verify`` and
        ``scripts/receipt_verifier.py`` read from a file."""

        def encode(value: bytes | str) -> str:
            return base64.b64encode(value).decode("ascii") if isinstance(value, bytes) else value

        return {
            "leaf": encode(self.leaf),
            "leaf_index": self.leaf_index,
            "inclusion_proof": [encode(h) for h in self.inclusion_proof],
            "checkpoint": self.checkpoint,
        }

    def verify(self, public_key: str | VerifierKey, *, origin: str | None = None) -> VerifiedReceipt:
        """Checks the receipt with the service's verifier key (``Client.ledger_key()``, or the
        string the service prints at start): the checkpoint's Ed25519 signature (C2SP signed
        note), the checkpoint's form (C2SP tlog-checkpoint), and that the leaf, hashed as RFC
        6962 does, is at ``leaf_index`` of that tree (RFC 9162 §2.1.3.2). With ``origin``, also
        that the log is that one (``<service>/datasets/<id>``). Returns the parsed event;
        :class:`~privpca.ReceiptError` says what failed otherwise.

        A valid receipt proves that the holder of the key committed to a log in which this
        event has this place; it does not prove the log complete (see
        :meth:`Client.witness <privpca.Client.witness>`, which checks that the log only grows)."""
        if not isinstance(self.leaf_index, int) or isinstance(self.leaf_index, bool) or self.leaf_index < 0:
            raise ReceiptError(f"the leaf index {self.leaf_index!r} is not a non-negative integer")
        checkpoint = Checkpoint.verify(self.checkpoint, public_key, origin=origin)
        leaf = b64decode(self.leaf, "the leaf")
        proof = _hashes(self.inclusion_proof, "the inclusion proof")
        verify_inclusion(self.leaf_index, checkpoint.size, leaf_hash(leaf), proof, checkpoint.root)
        try:
            event = json.loads(leaf.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise ReceiptError("the leaf is not UTF-8 JSON") from None
        if not isinstance(event, dict):
            raise ReceiptError("the leaf is not a JSON object")
        return VerifiedReceipt(
            event=event,
            origin=checkpoint.origin,
            size=checkpoint.size,
            root=checkpoint.root,
            leaf_index=self.leaf_index,
            leaf=leaf,
            checkpoint=checkpoint,
        )


def receipt_or_none(raw: Any) -> Receipt | None:
    """The ``receipt`` member of an answer, or ``None`` when there is none (lists leave it out).

    Lenient: a malformed receipt does not stop the answer being read; its members are kept as
    they came, and :meth:`Receipt.verify` refuses them."""
    if raw is None:
        return None
    members: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}

    def member(name: str) -> Any:
        return members.get(name)

    return Receipt(member("leaf"), member("leaf_index"), member("inclusion_proof"), member("checkpoint"))
