"""The inputs of a utility forecast (``POST /v1/privacy/plan`` with a ``scenario``).

- :class:`DataShape`: the public facts of a records dataset that does not exist yet (the
  request's ``data``), so a forecast needs no upload;
- :class:`Scenario`: the spectrum the records are drawn from (``scenario``);
- a target: the captured energy to reach (``target``), a number or ``{"captured_energy": y}``.

The client turns numbers into JSON numbers (numpy scalars and arrays included) and refuses
what is not a finite number (:class:`~privpca.InvalidInput`); the ranges (n_features up to
1000, or 500 with a target; eigenvalues ≥ 0; a target in (0, 1); …) are the service's to
check, and a refusal comes back as :class:`~privpca.ValidationError` (422) naming the field.
A forecast is free: nothing is created, read or charged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, TypeVar

import numpy as np

from .errors import InvalidInput

@dataclass(frozen=True)
class DataShape:
    """The public shape a job would run on, before any upload (the plan's ``data``).

    ``n_samples`` n and ``n_features`` d, the L2 bound ``row_norm_bound`` every record is
    clipped to at upload, and the neighbouring ``relation``: ``"replace_one"`` (the default;
    n is public) or ``"add_remove"``. ``kind`` is ``"records"``, the kind forecasts are made for.
    """

    n_samples: int
    n_features: int
    row_norm_bound: float
    relation: str = "replace_one"
    kind: str = "records"

    def __post_init__(self) -> None:
        object.__setattr__(self, "n_samples", _integer(self.n_samples, "data.n_samples"))
        object.__setattr__(self, "n_features", _integer(self.n_features, "data.n_features"))
        object.__setattr__(self, "row_norm_bound", _real(self.row_norm_bound, "data.row_norm_bound"))
        for name in ("relation", "kind"):
            if not isinstance(getattr(self, name), str):
                raise InvalidInput(f"data.{name} must be a string, got {getattr(self, name)!r}", field=f"data.{name}")

    def to_json(self) -> dict[str, Any]:
        """The ``PlanDataInput`` object of the request."""
        return asdict(self)


@dataclass(frozen=True)
class Scenario:
    """A spectrum scenario: records drawn from N(0, U·diag(λ)·Uᵀ), U a random rotation, with
    the top ``eigenvalues`` λ₁, λ₂, … of their covariance (1 to min(d, 100) of them) and every
    other direction at ``noise_floor``; clipped to ``row_norm_bound`` as uploads are.

    ``eigenvalues`` is any sequence or 1-D array of numbers, kept as a tuple of floats.
    """

    eigenvalues: Sequence[float]
    noise_floor: float = 0.0

    def __post_init__(self) -> None:
        values: Any = self.eigenvalues
        if isinstance(values, np.ndarray):
            if values.ndim != 1:
                raise InvalidInput(
                    f"scenario.eigenvalues must be one list of numbers, got an array of shape {values.shape}",
                    field="scenario.eigenvalues",
                )
            values = values.tolist()
        if isinstance(values, (str, bytes, Mapping)) or not hasattr(values, "__iter__"):
            raise InvalidInput(
                f"scenario.eigenvalues must be a sequence of numbers, got {values!r}", field="scenario.eigenvalues"
            )
        eigenvalues = tuple(_real(v, "scenario.eigenvalues") for v in values)
        object.__setattr__(self, "eigenvalues", eigenvalues)
        object.__setattr__(self, "noise_floor", _real(self.noise_floor, "scenario.noise_floor"))

    def to_json(self) -> dict[str, Any]:
        """The ``ScenarioInput`` object of the request."""
        return {"eigenvalues": list(self.eigenvalues), "noise_floor": self.noise_floor}


DataLike = DataShape | Mapping[str, Any]
ScenarioLike = Scenario | Mapping[str, Any]
TargetLike = float | Mapping[str, float]
Built = TypeVar("Built", DataShape, Scenario)


def data_input(data: DataLike) -> dict[str, Any]:
    """``data`` as the request's ``PlanDataInput``: a :class:`DataShape`, or a mapping of its
    fields (``kind`` defaults to ``"records"``, ``relation`` to ``"replace_one"``)."""
    return _build(DataShape, data, "data").to_json()


def scenario_input(scenario: ScenarioLike) -> dict[str, Any]:
    """``scenario`` as the request's ``ScenarioInput``: a :class:`Scenario`, a mapping with
    ``eigenvalues`` and optionally ``noise_floor``, or a mapping with ``decay`` (a decay model,
    passed as given; the service checks it) and optionally ``noise_floor``."""
    if isinstance(scenario, Mapping) and "decay" in scenario:
        extra = sorted(set(scenario) - {"decay", "noise_floor"})
        if extra:
            raise InvalidInput(f"a decay scenario takes decay and noise_floor, not {extra}", field="scenario")
        decay = scenario["decay"]
        if not isinstance(decay, Mapping):
            raise InvalidInput(f"scenario.decay must be a mapping, got {decay!r}", field="scenario.decay")
        out: dict[str, Any] = {"decay": dict(decay)}
        if "noise_floor" in scenario:
            out["noise_floor"] = _real(scenario["noise_floor"], "scenario.noise_floor")
        return out
    return _build(Scenario, scenario, "scenario").to_json()


def target_input(target: TargetLike) -> dict[str, float]:
    """``target`` as the request's ``TargetInput``: a number is the captured energy to reach;
    a mapping is ``{"captured_energy": y}``."""
    if isinstance(target, Mapping):
        keys = set(target)
        if keys != {"captured_energy"}:
            raise InvalidInput(f"a target is {{'captured_energy': y}}, got keys {sorted(keys)}", field="target")
        target = target["captured_energy"]
    return {"captured_energy": _real(target, "target.captured_energy")}


def _build(cls: type[Built], value: Built | Mapping[str, Any], field: str) -> Built:
    if isinstance(value, cls):
        return value
    if not isinstance(value, Mapping):
        raise InvalidInput(f"{field} must be a {cls.__name__} or a mapping of its fields, got {value!r}", field=field)
    try:
        return cls(**dict(value))
    except TypeError as error:
        names = [f.name for f in fields(cls)]
        raise InvalidInput(f"{field} takes the fields {names}, got {sorted(value)} ({error})", field=field) from None


def _real(value: Any, field: str) -> float:
    """A finite real number (numpy scalars included), as a float."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InvalidInput(f"{field} must be a number, got {value!r}", field=field)
    number = float(value)
    if not math.isfinite(number):
        raise InvalidInput(f"{field} must be a finite number, got {value!r}", field=field)
    return number


def _integer(value: Any, field: str) -> int:
    """A whole number (an int, a numpy integer, or a float with no fraction), as an int."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer():
        return int(value)
    raise InvalidInput(f"{field} must be a whole number, got {value!r}", field=field)
