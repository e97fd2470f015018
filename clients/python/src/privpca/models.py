"""What the service answers, as small typed objects.

Each object keeps the fields a Python user reaches for as attributes (ids, status, budget
amounts, results as numpy arrays) and the whole JSON answer as ``raw``, so nothing the
contract (``openapi/openapi.json``) adds later is lost. A field takes the JSON member of the
same name; ``_nested`` parses the ones that are objects or arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from .transparency import Receipt, receipt_or_none

FloatArray = npt.NDArray[np.float64]

TERMINAL = frozenset({"succeeded", "failed", "cancelled"})

ModelT = TypeVar("ModelT", bound="_Model")


@dataclass(frozen=True)
class _Model:
    """An answer of the service: its typed fields and the whole JSON as ``raw``."""

    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls: type[ModelT], raw: dict[str, Any]) -> ModelT:
        plain = {f.name: raw.get(f.name) for f in fields(cls) if f.name != "raw"}
        return cls(**{**plain, **cls._nested(raw), "raw": raw})

    @staticmethod
    def _nested(raw: dict[str, Any]) -> dict[str, Any]:
        """The fields that are not plain JSON members, parsed."""
        return {}


@dataclass(frozen=True)
class PrivacyAmount(_Model):
    """An amount of privacy as zCDP ``rho`` and as (``epsilon``, ``delta``) (``PrivacyAmount``)."""

    rho: float
    delta: float
    epsilon: float
    epsilon_at_delta: float


def _amount(raw: dict[str, Any] | None) -> PrivacyAmount | None:
    return None if raw is None else PrivacyAmount.parse(raw)


@dataclass(frozen=True)
class Budget(_Model):
    """A dataset's budget state (``BudgetView``): ``total``, ``spent`` and ``remaining``."""

    stated: dict[str, Any]
    total: PrivacyAmount
    spent: PrivacyAmount
    remaining: PrivacyAmount
    rule: str

    @staticmethod
    def _nested(raw: dict[str, Any]) -> dict[str, Any]:
        return {name: PrivacyAmount.parse(raw[name]) for name in ("total", "spent", "remaining")}


def _budget(raw: dict[str, Any] | None) -> Budget | None:
    return None if raw is None else Budget.parse(raw)


@dataclass(frozen=True)
class Dataset(_Model):
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

    @staticmethod
    def _nested(raw: dict[str, Any]) -> dict[str, Any]:
        return {"budget": _budget(raw.get("budget"))}


@dataclass(frozen=True)
class LedgerEntry(_Model):
    """One charge or refund (``LedgerEntryView``)."""

    id: int
    entry: str
    rho: float
    delta: float
    job_id: str | None
    algorithm: str | None
    created_at: str


@dataclass(frozen=True)
class Ledger(_Model):
    """A dataset's ledger (``LedgerView``)."""

    dataset_id: str
    entries: list[LedgerEntry]
    budget: Budget | None

    @staticmethod
    def _nested(raw: dict[str, Any]) -> dict[str, Any]:
        return {"entries": [LedgerEntry.parse(e) for e in raw["entries"]], "budget": _budget(raw.get("budget"))}


@dataclass(frozen=True)
class Progress:
    done: int
    total: int


@dataclass(frozen=True)
class _Run(_Model):
    """What jobs and studies share: an id, the algorithm, a status, a cost and progress.
    ``receipt`` is the transparency log's receipt of the charge, when the view carries one
    (a job's own view does; lists leave it out): check it with ``receipt.verify(key)``."""

    id: str
    algorithm: str
    status: str
    cost: PrivacyAmount
    progress: Progress | None
    error: str | None
    receipt: Receipt | None = field(default=None, repr=False, compare=False)

    @property
    def finished(self) -> bool:
        """True once the status is terminal (``succeeded``, ``failed`` or ``cancelled``)."""
        return self.status in TERMINAL

    @staticmethod
    def _nested(raw: dict[str, Any]) -> dict[str, Any]:
        progress = raw.get("progress")
        done = None if progress is None else Progress(done=int(progress["done"]), total=int(progress["total"]))
        return {"cost": PrivacyAmount.parse(raw["cost"]), "progress": done, "receipt": receipt_or_none(raw.get("receipt"))}


@dataclass(frozen=True)
class Job(_Run):
    """A job (``JobView``)."""

    dataset_id: str = ""


@dataclass(frozen=True)
class Study(_Run):
    """A study (``StudyView``)."""

    name: str = ""


@dataclass(frozen=True)
class _Release(_Model):
    """What job and study results share. ``basis`` is d × k with orthonormal columns, as the
    service releases it (most important first); ``components`` is the same as k × d rows,
    scikit-learn's orientation. ``receipt`` is the transparency log's receipt of the release's
    charge, when the answer carries one (``receipt.verify(key)`` checks it)."""

    basis: FloatArray
    eigenvalues: FloatArray | None
    cost: PrivacyAmount
    receipt: Receipt | None = field(default=None, repr=False, compare=False)

    @property
    def components(self) -> FloatArray:
        return self.basis.T

    @staticmethod
    def _nested(raw: dict[str, Any]) -> dict[str, Any]:
        # The JSON basis is k columns of d numbers.
        columns = np.asarray(raw["basis"], dtype=np.float64).reshape(int(raw["n_components"]), int(raw["n_features"]))
        values = raw.get("eigenvalues")
        return {
            "basis": np.ascontiguousarray(columns.T),
            "eigenvalues": None if values is None else np.asarray(values, dtype=np.float64),
            "cost": PrivacyAmount.parse(raw["cost"]),
            "receipt": receipt_or_none(raw.get("receipt")),
        }


@dataclass(frozen=True)
class JobResult(_Release):
    """A succeeded job's result (``JobResultView``); ``released`` holds its other DP releases."""

    job_id: str = ""
    released: dict[str, Any] | None = None


@dataclass(frozen=True)
class StudyResult(_Release):
    """A succeeded study's result (``StudyResultView``), with the sites that survived."""

    study_id: str = ""
    survivors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class StudyCreated(_Model):
    """A new study and its sites' tokens (``StudyCreated``), ``{site name: token}``; the
    tokens are shown once."""

    study: Study
    tokens: dict[str, str]

    @property
    def id(self) -> str:
        return self.study.id

    @staticmethod
    def _nested(raw: dict[str, Any]) -> dict[str, Any]:
        return {"study": Study.parse(raw["study"]), "tokens": {str(s["name"]): str(s["token"]) for s in raw["sites"]}}


@dataclass(frozen=True)
class Forecast:
    """What a job would capture under a spectrum scenario (``ForecastView``): simulated by the
    service on records drawn from the scenario, free of charge.

    ``algorithm`` is the algorithm that would run (what ``auto`` picks); ``captured_energy``
    the mean over ``repetitions`` simulated runs of tr(QᵀCQ) / Σ_{i≤k} λ_i(C) (C = XᵀX/n of the
    clipped records, Q the released basis: 1 is the best k-dimensional subspace); ``interval``
    where one job's captured energy falls with probability about 0.9. A job that would be
    refused or fail captures 0, with ``reason`` saying why (``None`` otherwise).
    ``simulated_records`` is how many records were drawn (fewer than n for a run scaled to n);
    ``free`` is true when the request charged nothing, false when it paid for a private
    spectrum (see :class:`SpectrumRelease`).
    """

    algorithm: str
    captured_energy: float
    interval: tuple[float, float]
    reason: str | None
    repetitions: int
    simulated_records: int
    free: bool

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Forecast:
        low, high = raw["interval"]
        reason = raw.get("reason")
        return cls(
            algorithm=str(raw["algorithm"]),
            captured_energy=float(raw["captured_energy"]),
            interval=(float(low), float(high)),
            reason=None if reason is None else str(reason),
            repetitions=int(raw["repetitions"]),
            simulated_records=int(raw["simulated_records"]),
            free=bool(raw["free"]),
        )


@dataclass(frozen=True)
class NeededByAlgorithm:
    """One algorithm's least privacy reaching the target (``NeededByAlgorithm``): ``rho``, and
    ``epsilon`` at the plan's δ; both ``None`` if it does not reach it at any ρ ≤ 10⁶."""

    algorithm: str
    rho: float | None
    epsilon: float | None

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> NeededByAlgorithm:
        return cls(algorithm=str(raw["algorithm"]), rho=_float(raw.get("rho")), epsilon=_float(raw.get("epsilon")))


@dataclass(frozen=True)
class Needed:
    """The least privacy that reaches a target captured energy under the scenario
    (``NeededView``). ``rho`` is the least ρ over the algorithms tried and ``algorithm`` the one
    needing it; ``epsilon`` is that ρ as ε at ``delta`` (CKS 2020: a job stated at this
    (ε, δ) gets at least ρ). All three are ``None`` when no algorithm reaches the target.
    ``by_algorithm`` lists every algorithm tried: the requested one, or ``auto``'s candidates.
    """

    rho: float | None
    epsilon: float | None
    delta: float
    algorithm: str | None
    by_algorithm: tuple[NeededByAlgorithm, ...]

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Needed:
        algorithm = raw.get("algorithm")
        return cls(
            rho=_float(raw.get("rho")),
            epsilon=_float(raw.get("epsilon")),
            delta=float(raw["delta"]),
            algorithm=None if algorithm is None else str(algorithm),
            by_algorithm=tuple(NeededByAlgorithm.parse(a) for a in raw.get("by_algorithm", [])),
        )


@dataclass(frozen=True)
class SpectrumRelease:
    """The **paid** private spectrum a forecast ran on (``SpectrumView``): a job of the
    algorithm ``spectrum`` on the dataset's ledger. ``charged_now`` says whether this request
    paid (``rho``) or reused an earlier release; ``eigenvalues`` are the released estimates of
    the eigenvalues of C = XᵀX/n (entry i the i-th largest; ``None`` until the job succeeded),
    each with noise of sd ``noise_sd``; ``scenario`` the (eigenvalues, noise floor) they state;
    ``note`` says in words what was paid and, while ``status`` is not ``succeeded``, to ask
    again with ``spectrum_job=job_id`` (free)."""

    job_id: str
    status: str
    paid: bool
    charged_now: bool
    rho: float
    eigenvalues: tuple[float, ...] | None
    noise_sd: float
    scenario: tuple[tuple[float, ...], float] | None
    note: str

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> SpectrumRelease:
        values = raw.get("eigenvalues")
        scenario = raw.get("scenario")
        return cls(
            job_id=str(raw["job_id"]),
            status=str(raw["status"]),
            paid=bool(raw["paid"]),
            charged_now=bool(raw["charged_now"]),
            rho=float(raw["rho"]),
            eigenvalues=None if values is None else tuple(float(v) for v in values),
            noise_sd=float(raw["noise_sd"]),
            scenario=None
            if scenario is None
            else (tuple(float(v) for v in scenario["eigenvalues"]), float(scenario["noise_floor"])),
            note=str(raw["note"]),
        )


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True)
class Plan(_Model):
    """What a job would cost and how noisy it would be (``PlanView``). With a scenario,
    ``forecast`` is what the job would capture (a :class:`Forecast`), and with a target too,
    ``needed`` the least privacy that reaches it (a :class:`Needed`); both ``None`` otherwise.
    With a private spectrum, ``spectrum`` is the paid release it ran on (a
    :class:`SpectrumRelease`)."""

    requested: PrivacyAmount
    cost: PrivacyAmount | None
    remaining: PrivacyAmount | None
    fits_budget: bool | None
    noise: list[dict[str, Any]]
    forecast: Forecast | None = None
    needed: Needed | None = None
    spectrum: SpectrumRelease | None = None

    @staticmethod
    def _nested(raw: dict[str, Any]) -> dict[str, Any]:
        forecast = raw.get("forecast")
        needed = raw.get("needed")
        spectrum = raw.get("spectrum")
        return {
            "requested": PrivacyAmount.parse(raw["requested"]),
            "cost": _amount(raw.get("cost")),
            "remaining": _amount(raw.get("remaining")),
            "noise": list(raw.get("noise", [])),
            "forecast": None if forecast is None else Forecast.parse(forecast),
            "needed": None if needed is None else Needed.parse(needed),
            "spectrum": None if spectrum is None else SpectrumRelease.parse(spectrum),
        }
