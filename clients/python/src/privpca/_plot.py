"""``plot_forecast``: captured energy against ε, one line per algorithm, for notebooks.

matplotlib is imported on the first call only (it is in the ``examples`` extra), so the rest
of the package never needs it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._forecast import DataLike, ScenarioLike
from .errors import InvalidInput
from .models import Forecast

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from .client import Client


def plot_forecast(
    client: Client,
    *,
    epsilons: Sequence[float],
    scenario: ScenarioLike,
    algorithms: Sequence[str] = ("auto",),
    data: DataLike | None = None,
    dataset_id: str | None = None,
    params: Mapping[str, Any] | None = None,
    delta: float = 1e-6,
    ax: Axes | None = None,
) -> Axes:
    """Plot what a job would capture against the ε it is run at, one line per algorithm.

    For each algorithm of ``algorithms`` (names of ``GET /v1/algorithms``, or ``"auto"``) and
    each ε of ``epsilons``, asks :meth:`Client.plan` for the forecast of a job run at
    (ε, ``delta``) with ``params`` (e.g. ``{"k": 2}``) on ``data`` (a
    :class:`~privpca.DataShape` or mapping: the public shape, no upload needed) or on
    ``dataset_id`` (a dataset whose n is public), under ``scenario``; then draws the mean
    captured energy as a line with markers and the interval (where one job falls with
    probability about 0.9) as a shaded band. A job that would be refused or fail is drawn at 0.
    The line of ``"auto"`` names the algorithms it picked. ε is on a log axis when the values
    span a factor of 10 or more.

    Draws on ``ax``, or on a new figure's axes; returns the axes. Every plan is free (nothing
    read or charged), and len(algorithms) × len(epsilons) requests are made. Needs matplotlib
    (``pip install './clients/python[examples]'``).
    """
    try:
        import matplotlib.pyplot as plt
    except ModuleNotFoundError as missing:
        if missing.name is None or not missing.name.startswith("matplotlib"):
            raise
        raise ModuleNotFoundError(
            "privpca.plot_forecast needs matplotlib: pip install './clients/python[examples]' (or pip install matplotlib)",
            name=missing.name,
        ) from missing
    points = [float(e) for e in epsilons]
    if not points:
        raise InvalidInput("epsilons must hold at least one ε", field="epsilons")
    if not algorithms or isinstance(algorithms, str):
        raise InvalidInput(f"algorithms must be a list of algorithm names, got {algorithms!r}", field="algorithms")
    points.sort()
    forecasts: dict[str, list[Forecast]] = {}
    for algorithm in algorithms:
        row = []
        for epsilon in points:
            plan = client.plan(
                algorithm=algorithm,
                params=params,
                epsilon=epsilon,
                delta=delta,
                data=data,
                dataset_id=dataset_id,
                scenario=scenario,
            )
            assert plan.forecast is not None, "the service answered a plan with a scenario without its forecast"
            row.append(plan.forecast)
        forecasts[algorithm] = row

    if ax is None:
        _, ax = plt.subplots()
    for algorithm, row in forecasts.items():
        ran = sorted({f.algorithm for f in row})
        label = algorithm if ran == [algorithm] else f"{algorithm} ({', '.join(ran)})"
        (line,) = ax.plot(points, [f.captured_energy for f in row], marker="o", label=label)
        ax.fill_between(
            points,
            [f.interval[0] for f in row],
            [f.interval[1] for f in row],
            color=line.get_color(),
            alpha=0.2,
            linewidth=0,
        )
    if points[0] > 0 and points[-1] / points[0] >= 10:
        ax.set_xscale("log")
    ax.set_xlabel(f"ε (δ = {delta:g})")
    ax.set_ylabel("captured energy (forecast)")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(True, alpha=0.3)
    ax.legend(title="algorithm")
    return ax
