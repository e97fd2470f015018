"""What the service answers, as small typed objects.

Each object keeps the fields a Python user reaches for as attributes (ids, status, budget
amounts, results as numpy arrays) and the whole JSON answer as ``raw``, so nothing the
contract (``openapi/openapi.json``) adds later is lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

TERMINAL = frozenset({"succeeded", "failed", "cancelled"})


@dataclass(frozen=True)
class PrivacyAmount:
    """An amount of privacy as zCDP ``rho`` and as (``epsilon``, ``delta``) (``PrivacyAmount``)."""

    rho: float
    delta: float
    epsilon: float
    epsilon_at_delta: float
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> PrivacyAmount:
        return cls(
            rho=float(raw["rho"]),
            delta=float(raw["delta"]),
            epsilon=float(raw["epsilon"]),
            epsilon_at_delta=float(raw["epsilon_at_delta"]),
            raw=raw,
        )


def _amount(raw: dict[str, Any] | None) -> PrivacyAmount | None:
    return None if raw is None else PrivacyAmount.parse(raw)


@dataclass(frozen=True)
class Budget:
    """A dataset's budget state (``BudgetView``): ``total``, ``spent`` and ``remaining``."""

    stated: dict[str, Any]
    total: PrivacyAmount
    spent: PrivacyAmount
    remaining: PrivacyAmount
    rule: str
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Budget:
        return cls(
            stated=raw["stated"],
            total=PrivacyAmount.parse(raw["total"]),
            spent=PrivacyAmount.parse(raw["spent"]),
            remaining=PrivacyAmount.parse(raw["remaining"]),
            rule=str(raw["rule"]),
            raw=raw,
        )


@dataclass(frozen=True)
class Dataset:
    """A dataset's metadata and budget state (``DatasetView``); ``budget`` is ``None`` on
    public datasets."""

    id: str
    name: str
    kind: str
    relation: str
    public: bool
    status: str
    n_samples: int | None
    n_features: int | None
    row_norm_bound: float | None
    budget: Budget | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Dataset:
        budget = raw.get("budget")
        return cls(
            id=str(raw["id"]),
            name=str(raw["name"]),
            kind=str(raw["kind"]),
            relation=str(raw["relation"]),
            public=bool(raw["public"]),
            status=str(raw["status"]),
            n_samples=raw.get("n_samples"),
            n_features=raw.get("n_features"),
            row_norm_bound=raw.get("row_norm_bound"),
            budget=None if budget is None else Budget.parse(budget),
            raw=raw,
        )


@dataclass(frozen=True)
class LedgerEntry:
    """One charge or refund (``LedgerEntryView``)."""

    id: int
    entry: str
    rho: float
    delta: float
    job_id: str | None
    algorithm: str | None
    created_at: str
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> LedgerEntry:
        return cls(
            id=int(raw["id"]),
            entry=str(raw["entry"]),
            rho=float(raw["rho"]),
            delta=float(raw["delta"]),
            job_id=raw.get("job_id"),
            algorithm=raw.get("algorithm"),
            created_at=str(raw["created_at"]),
            raw=raw,
        )


@dataclass(frozen=True)
class Ledger:
    """A dataset's ledger (``LedgerView``)."""

    dataset_id: str
    entries: list[LedgerEntry]
    budget: Budget | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Ledger:
        budget = raw.get("budget")
        return cls(
            dataset_id=str(raw["dataset_id"]),
            entries=[LedgerEntry.parse(e) for e in raw["entries"]],
            budget=None if budget is None else Budget.parse(budget),
            raw=raw,
        )


@dataclass(frozen=True)
class Progress:
    done: int
    total: int


def _progress(raw: dict[str, Any] | None) -> Progress | None:
    return None if raw is None else Progress(done=int(raw["done"]), total=int(raw["total"]))


@dataclass(frozen=True)
class Job:
    """A job (``JobView``). ``finished`` is true once its status is terminal."""

    id: str
    dataset_id: str
    algorithm: str
    status: str
    cost: PrivacyAmount
    progress: Progress | None
    error: str | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Job:
        return cls(
            id=str(raw["id"]),
            dataset_id=str(raw["dataset_id"]),
            algorithm=str(raw["algorithm"]),
            status=str(raw["status"]),
            cost=PrivacyAmount.parse(raw["cost"]),
            progress=_progress(raw.get("progress")),
            error=raw.get("error"),
            raw=raw,
        )


def _eigenvalues(raw: dict[str, Any]) -> FloatArray | None:
    values = raw.get("eigenvalues")
    return None if values is None else np.asarray(values, dtype=np.float64)


@dataclass(frozen=True)
class JobResult:
    """A succeeded job's result (``JobResultView``).

    ``basis`` is d × k with orthonormal columns, as the service releases it (most important
    first); ``components`` is the same as k × d rows, scikit-learn's orientation.
    """

    job_id: str
    basis: FloatArray
    eigenvalues: FloatArray | None
    cost: PrivacyAmount
    released: dict[str, Any] | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def components(self) -> FloatArray:
        return self.basis.T

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> JobResult:
        return cls(
            job_id=str(raw["job_id"]),
            basis=_basis(raw),
            eigenvalues=_eigenvalues(raw),
            cost=PrivacyAmount.parse(raw["cost"]),
            released=raw.get("released"),
            raw=raw,
        )


def _basis(raw: dict[str, Any]) -> FloatArray:
    """The JSON basis (k columns of d numbers) as a d × k array."""
    columns = np.asarray(raw["basis"], dtype=np.float64).reshape(int(raw["n_components"]), int(raw["n_features"]))
    return np.ascontiguousarray(columns.T)


@dataclass(frozen=True)
class Study:
    """A study (``StudyView``)."""

    id: str
    name: str
    algorithm: str
    status: str
    cost: PrivacyAmount
    progress: Progress | None
    error: str | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Study:
        return cls(
            id=str(raw["id"]),
            name=str(raw["name"]),
            algorithm=str(raw["algorithm"]),
            status=str(raw["status"]),
            cost=PrivacyAmount.parse(raw["cost"]),
            progress=_progress(raw.get("progress")),
            error=raw.get("error"),
            raw=raw,
        )


@dataclass(frozen=True)
class StudyCreated:
    """A new study and its sites' tokens (``StudyCreated``), ``{site name: token}``; the
    tokens are shown once."""

    study: Study
    tokens: dict[str, str]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def id(self) -> str:
        return self.study.id

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> StudyCreated:
        return cls(
            study=Study.parse(raw["study"]),
            tokens={str(s["name"]): str(s["token"]) for s in raw["sites"]},
            raw=raw,
        )


@dataclass(frozen=True)
class StudyResult:
    """A succeeded study's result (``StudyResultView``), oriented as :class:`JobResult`."""

    study_id: str
    basis: FloatArray
    eigenvalues: FloatArray | None
    cost: PrivacyAmount
    survivors: list[str]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def components(self) -> FloatArray:
        return self.basis.T

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> StudyResult:
        return cls(
            study_id=str(raw["study_id"]),
            basis=_basis(raw),
            eigenvalues=_eigenvalues(raw),
            cost=PrivacyAmount.parse(raw["cost"]),
            survivors=[str(s) for s in raw["survivors"]],
            raw=raw,
        )


@dataclass(frozen=True)
class Plan:
    """What a job would cost and how noisy it would be (``PlanView``)."""

    requested: PrivacyAmount
    cost: PrivacyAmount | None
    remaining: PrivacyAmount | None
    fits_budget: bool | None
    noise: list[dict[str, Any]]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Plan:
        return cls(
            requested=PrivacyAmount.parse(raw["requested"]),
            cost=_amount(raw.get("cost")),
            remaining=_amount(raw.get("remaining")),
            fits_budget=raw.get("fits_budget"),
            noise=list(raw.get("noise", [])),
            raw=raw,
        )
