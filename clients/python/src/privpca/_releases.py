"""What this process has uploaded and released, remembered by row fingerprints.

The service sees each upload as new people: two datasets holding the same rows have two
budgets, and nothing on the service links them. Only the client saw both uploads, so the
client keeps, for the life of the process:

- for each dataset it uploaded, a digest of its rows (a multiset: order does not matter), so
  ``PrivatePCA(dataset=id).fit(X)`` can tell whether X is that dataset's rows;
- for each private release ``PrivatePCA.fit(X)`` made, the fingerprints of the rows it
  released, its settings and its result, so a later fit can tell whether it would release the
  same people again (refused, or warned with ``on_overlap="warn"``), or is exactly the same
  fit again (the earlier release is reused: post-processing a release costs nothing).

A row's fingerprint is a 64-bit hash of its float64 values as the client would upload them
(``-0.0`` as ``0.0``). Nothing of it leaves the process. Two different people with identical
rows look like one person: the client then errs on the side of refusing.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

Fingerprints = npt.NDArray[np.uint64]

_MULTIPLIER = np.uint64(0xBF58476D1CE4E5B9)
_SEED = 0x9E3779B97F4A7C15


def fingerprints(matrix: npt.NDArray[np.float64]) -> Fingerprints:
    """One 64-bit hash per row, sorted (a multiset of rows)."""
    n, d = matrix.shape
    bits = np.ascontiguousarray(matrix + 0.0, dtype="<f8").view("<u8")
    hashes = np.full(n, (_SEED ^ d) & 0xFFFFFFFFFFFFFFFF, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for column in range(d):
            hashes ^= bits[:, column]
            hashes *= _MULTIPLIER
            hashes ^= hashes >> np.uint64(31)
    hashes.sort()
    return hashes


def digest(prints: Fingerprints, n_features: int) -> str:
    """The rows as one value: equal for the same rows in any order."""
    return hashlib.sha256(np.int64(n_features).tobytes() + prints.tobytes()).hexdigest()


@dataclass(eq=False)
class Release:
    """A private release by ``PrivatePCA.fit(X)``: the rows it released and what it gave."""

    key: Hashable
    prints: Fingerprints
    dataset_id: str = ""
    job_id: str = ""
    rho: float = 0.0
    state: dict[str, Any] = field(default_factory=dict)
    done: bool = False


@dataclass
class Upload:
    n_samples: int
    n_features: int
    digest: str


class Registry:
    """The process's uploads and releases (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.uploads: dict[str, Upload] = {}
        self.releases: list[Release] = []

    def uploaded(self, dataset_id: str, matrix: npt.NDArray[np.float64]) -> None:
        prints = fingerprints(matrix)
        with self._lock:
            self.uploads[dataset_id] = Upload(matrix.shape[0], matrix.shape[1], digest(prints, matrix.shape[1]))

    def upload(self, dataset_id: str) -> Upload | None:
        with self._lock:
            return self.uploads.get(dataset_id)

    def reserve(self, key: Hashable, prints: Fingerprints) -> tuple[Release | None, list[Release], Release]:
        """Under one lock: the finished release with the same key and rows (or ``None``), the
        releases sharing rows with ``prints``, and a new pending release for them (to
        :meth:`finish` or :meth:`cancel`)."""
        with self._lock:
            same = next((r for r in self.releases if r.done and r.key == key), None)
            overlapping = [r for r in self.releases if _overlap(prints, r.prints) > 0]
            pending = Release(key=key, prints=prints)
            if same is None:
                self.releases.append(pending)
            return same, overlapping, pending

    def finish(self, release: Release) -> None:
        with self._lock:
            release.done = True

    def cancel(self, release: Release) -> None:
        with self._lock:
            if release in self.releases:
                self.releases.remove(release)

    def clear(self) -> None:
        """Forget everything (tests only: a release cannot be taken back)."""
        with self._lock:
            self.uploads.clear()
            self.releases.clear()


def _overlap(a: Fingerprints, b: Fingerprints) -> int:
    return int(np.isin(a, b, assume_unique=False).sum())


def overlap(a: Fingerprints, b: Fingerprints) -> int:
    """How many of a's rows are among b's."""
    return _overlap(a, b)


REGISTRY = Registry()
