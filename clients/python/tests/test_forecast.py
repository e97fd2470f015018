"""The utility forecast of ``POST /v1/privacy/plan`` (issue 41) through the client: ``Client.plan``
with ``data``, ``scenario`` and ``target``, ``PrivatePCA.forecast`` and ``plot_forecast``,
against a live service (and the request's JSON on a faked wire). Small shapes (d ≤ 20): every
forecast here takes milliseconds."""

from __future__ import annotations

import dataclasses
import json
import sys

import httpx
import numpy as np
import pytest

import privpca
from privpca import DataShape, Forecast, Needed, NeededByAlgorithm, Scenario

DATA = DataShape(n_samples=2000, n_features=10, row_norm_bound=1.0)
SCENARIO = Scenario([1.0, 0.5], noise_floor=0.05)
K2 = {"k": 2}


def test_a_forecast_needs_no_dataset_and_is_free(client):
    plan = client.plan(data=DATA, scenario=SCENARIO, params=K2, epsilon=1.0, delta=1e-6)

    forecast = plan.forecast
    assert isinstance(forecast, Forecast)
    assert forecast.algorithm in {a["name"] for a in client.algorithms()}, "auto names the algorithm it picks"
    low, high = forecast.interval
    assert isinstance(forecast.interval, tuple) and len(forecast.interval) == 2
    assert 0.0 <= low <= forecast.captured_energy <= high <= 1.0
    assert forecast.captured_energy > 0.9, "ε = 1 on 2000 records of a clear spectrum captures nearly all"
    assert forecast.reason is None
    assert forecast.repetitions > 0 and forecast.simulated_records == 2000
    assert forecast.free is True
    assert plan.needed is None
    assert plan.raw["forecast"]["captured_energy"] == forecast.captured_energy
    # Nothing was created, nothing charged.
    assert client.list_datasets() == [] and client.list_jobs() == []
    with pytest.raises(dataclasses.FrozenInstanceError):
        forecast.captured_energy = 1.0  # type: ignore[misc]


def test_mappings_and_numpy_values_are_the_same_request(client):
    by_class = client.plan(data=DATA, scenario=SCENARIO, params=K2, rho=0.05).forecast
    by_mapping = client.plan(
        data={"n_samples": np.int64(2000), "n_features": 10, "row_norm_bound": 1},
        scenario={"eigenvalues": np.array([1.0, 0.5]), "noise_floor": np.float64(0.05)},
        params=K2,
        rho=0.05,
    ).forecast
    # The service seeds every forecast: the same request gets the same answer.
    assert by_mapping == by_class


def test_a_cheaper_job_captures_less(client):
    def energy(epsilon: float) -> float:
        plan = client.plan(
            data=DATA, algorithm="analyze_gauss", scenario=SCENARIO, params=K2, epsilon=epsilon, delta=1e-6
        )
        assert plan.forecast is not None and plan.forecast.algorithm == "analyze_gauss"
        return plan.forecast.captured_energy

    assert energy(0.01) < energy(0.1) < energy(1.0)


def test_a_target_gives_the_least_privacy_that_reaches_it(client):
    plan = client.plan(data=DATA, scenario=SCENARIO, params=K2, epsilon=1.0, delta=1e-6, target=0.9)

    needed = plan.needed
    assert isinstance(needed, Needed)
    assert needed.delta == 1e-6
    assert needed.by_algorithm and all(isinstance(a, NeededByAlgorithm) for a in needed.by_algorithm)
    reached = [a for a in needed.by_algorithm if a.rho is not None]
    assert reached, "some algorithm reaches 0.9 under this scenario"
    best = min(reached, key=lambda a: a.rho or 0.0)
    assert (needed.algorithm, needed.rho, needed.epsilon) == (best.algorithm, best.rho, best.epsilon)
    assert needed.rho is not None and 0 < needed.rho < plan.requested.rho, "ε = 1 is more than 0.9 needs"
    assert needed.epsilon is not None and 0 < needed.epsilon < 1.0
    assert plan.forecast is not None and plan.forecast.captured_energy > 0.9

    # The same target as a mapping is the same request; and the least ρ does reach it.
    assert client.plan(
        data=DATA, scenario=SCENARIO, params=K2, epsilon=1.0, delta=1e-6, target={"captured_energy": 0.9}
    ).needed == needed
    at_needed = client.plan(data=DATA, algorithm=needed.algorithm, scenario=SCENARIO, params=K2, rho=needed.rho)
    assert at_needed.forecast is not None and at_needed.forecast.captured_energy >= 0.85


def test_a_refused_job_forecasts_nothing_with_the_reason(client):
    plan = client.plan(data=DATA, algorithm="noisy_power", scenario=SCENARIO, params={"k": 12}, rho=0.1)
    forecast = plan.forecast
    assert forecast is not None
    assert forecast.captured_energy == 0.0 and forecast.interval == (0.0, 0.0)
    assert forecast.repetitions == 0
    assert forecast.reason is not None and "refused" in forecast.reason and "k" in forecast.reason


def test_a_bad_scenario_is_a_validation_error(client):
    with pytest.raises(privpca.ValidationError) as refused:
        client.plan(data=DATA, scenario=Scenario([1.0, -0.5]), params=K2, rho=0.1)
    assert refused.value.status == 422 and refused.value.field == "scenario.eigenvalues"
    assert isinstance(refused.value, ValueError)

    with pytest.raises(privpca.ValidationError) as no_scenario:
        client.plan(data=DATA, params=K2, rho=0.1, target=0.9)
    assert no_scenario.value.field == "target"
    with pytest.raises(privpca.ValidationError) as unreachable:
        client.plan(data=DATA, scenario=SCENARIO, params=K2, rho=0.1, target=1.5)
    assert unreachable.value.field == "target.captured_energy"
    with pytest.raises(privpca.ValidationError) as shapeless:
        client.plan(scenario=SCENARIO, params=K2, rho=0.1)
    assert shapeless.value.field == "scenario"


def test_what_is_not_a_number_is_refused_before_any_request(faked):
    client, seen = faked([])
    with pytest.raises(privpca.InvalidInput) as text:
        client.plan(data=DATA, scenario={"eigenvalues": ["big"]}, rho=0.1)
    assert text.value.field == "scenario.eigenvalues"
    with pytest.raises(privpca.InvalidInput) as fraction:
        client.plan(data={"n_samples": 10.5, "n_features": 3, "row_norm_bound": 1.0}, scenario=SCENARIO, rho=0.1)
    assert fraction.value.field == "data.n_samples"
    with pytest.raises(privpca.InvalidInput) as unknown:
        client.plan(data=DATA, scenario={"eigenvalues": [1.0], "floor": 0.1}, rho=0.1)
    assert unknown.value.field == "scenario"
    with pytest.raises(privpca.InvalidInput):
        client.plan(data=DATA, scenario=SCENARIO, rho=0.1, target=float("nan"))
    assert seen == []


def test_the_request_carries_data_scenario_and_target(faked):
    answer = {
        "requested": {"rho": 0.1, "delta": 0.0, "epsilon": 2.1, "epsilon_at_delta": 1e-6},
        "conversions": {},
        "noise": [],
        "forecast": {
            "algorithm": "noisy_power", "captured_energy": 0.8, "interval": [0.7, 0.9], "reason": None,
            "repetitions": 12, "simulated_records": 2000, "free": True,
        },
        "needed": {
            "rho": 0.01, "epsilon": 0.5, "delta": 1e-6, "algorithm": "noisy_power",
            "by_algorithm": [{"algorithm": "noisy_power", "rho": 0.01, "epsilon": 0.5}],
        },
    }
    client, seen = faked([httpx.Response(200, json=answer)])
    plan = client.plan(
        data=DataShape(np.int64(2000), 10, 1.0, relation="add_remove"),
        algorithm="noisy_power",
        params=K2,
        rho=0.1,
        scenario=Scenario(np.array([2.0, 1.0]), 0.1),
        target=0.9,
    )
    assert json.loads(seen[0].content) == {
        "algorithm": "noisy_power",
        "params": {"k": 2},
        "privacy": {"rho": 0.1},
        "data": {"kind": "records", "n_samples": 2000, "n_features": 10, "row_norm_bound": 1.0, "relation": "add_remove"},
        "scenario": {"eigenvalues": [2.0, 1.0], "noise_floor": 0.1},
        "target": {"captured_energy": 0.9},
    }
    assert plan.forecast == Forecast("noisy_power", 0.8, (0.7, 0.9), None, 12, 2000, True)
    assert plan.needed == Needed(0.01, 0.5, 1e-6, "noisy_power", (NeededByAlgorithm("noisy_power", 0.01, 0.5),))
    # A plan without a scenario has neither, as before.
    client, _ = faked([httpx.Response(200, json={**answer, "forecast": None, "needed": None})])
    bare = client.plan(rho=0.1)
    assert (bare.forecast, bare.needed) == (None, None)


# -- the estimator --------------------------------------------------------------------------


def test_the_estimator_forecasts_its_own_fit(client):
    pca = privpca.PrivatePCA(
        n_components=2, algorithm="analyze_gauss", epsilon=1.0, delta=1e-6, client=client, row_norm_bound=1.0
    )
    forecast = pca.forecast(n_samples=2000, n_features=10, scenario=SCENARIO)
    assert isinstance(forecast, Forecast)
    direct = client.plan(
        data=DATA, algorithm="analyze_gauss", params=K2, epsilon=1.0, delta=1e-6, scenario=SCENARIO
    ).forecast
    assert forecast == direct

    same, needed = pca.forecast(n_samples=2000, n_features=10, scenario=SCENARIO, target=0.9)
    assert same == forecast
    assert isinstance(needed, Needed) and needed.algorithm == "analyze_gauss"
    assert [a.algorithm for a in needed.by_algorithm] == ["analyze_gauss"]

    # More components than features: the job would be refused, and the forecast says so.
    too_many = privpca.PrivatePCA(n_components=12, epsilon=1.0, delta=1e-6, client=client, row_norm_bound=1.0)
    refused = too_many.forecast(n_samples=2000, n_features=10, scenario=SCENARIO)
    assert refused.captured_energy == 0.0 and refused.reason is not None
    assert client.list_datasets() == []


def test_the_estimator_forecasts_on_its_dataset(client, make_rows):
    ds = client.create_dataset(make_rows(500, 6, 5), name="forecast", row_norm_bound=1.0, budget=0.1)
    pca = privpca.PrivatePCA(n_components=2, algorithm="noisy_power", rho=0.05, client=client, dataset=ds.id)
    forecast = pca.forecast(scenario={"eigenvalues": [1.0, 0.5, 0.2], "noise_floor": 0.01})
    assert forecast.simulated_records == 500 and forecast.reason is None and forecast.captured_energy > 0
    # Over the dataset's remaining budget: the job would be refused.
    greedy = privpca.PrivatePCA(n_components=2, algorithm="noisy_power", rho=0.5, client=client, dataset=ds.id)
    over = greedy.forecast(scenario=SCENARIO)
    assert over.captured_energy == 0.0 and over.reason is not None and "budget" in over.reason
    # Nothing was spent.
    assert client.ledger(ds.id).entries == []
    with pytest.raises(privpca.InvalidInput) as shaped:
        pca.forecast(n_samples=500, scenario=SCENARIO)
    assert shaped.value.field == "n_samples"


def test_the_estimator_needs_what_fit_would_upload(client):
    pca = privpca.PrivatePCA(n_components=2, rho=0.1, client=client)
    with pytest.raises(privpca.InvalidInput) as shape:
        pca.forecast(n_features=10, scenario=SCENARIO)
    assert shape.value.field == "n_samples"
    with pytest.raises(privpca.InvalidInput) as bound:
        pca.forecast(n_samples=100, n_features=10, scenario=SCENARIO)
    assert bound.value.field == "row_norm_bound"
    with pytest.raises(privpca.InvalidInput) as privacy:
        privpca.PrivatePCA(2, client=client, row_norm_bound=1.0).forecast(
            n_samples=100, n_features=10, scenario=SCENARIO
        )
    assert privacy.value.field == "rho"


# -- the plot helper --------------------------------------------------------------------------


def test_plot_forecast_draws_one_line_per_algorithm(client):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epsilons = [0.03, 0.3, 3.0]
    algorithms = ["analyze_gauss", "noisy_power"]
    ax = privpca.plot_forecast(
        client, epsilons=epsilons, algorithms=algorithms, data=DATA, scenario=SCENARIO, params=K2, delta=1e-6
    )
    try:
        assert isinstance(ax, matplotlib.axes.Axes)
        lines = ax.get_lines()
        assert [line.get_label() for line in lines] == algorithms
        assert len(ax.collections) == len(algorithms), "one interval band per algorithm"
        for algorithm, line in zip(algorithms, lines):
            want = [
                client.plan(
                    data=DATA, algorithm=algorithm, params=K2, epsilon=e, delta=1e-6, scenario=SCENARIO
                ).forecast.captured_energy
                for e in epsilons
            ]
            np.testing.assert_allclose(line.get_xdata(), epsilons)
            np.testing.assert_allclose(line.get_ydata(), want)
        assert ax.get_xscale() == "log"
        assert "ε" in ax.get_xlabel()

        # On given axes; "auto" names what it picked.
        fig, given = plt.subplots()
        drawn = privpca.plot_forecast(client, epsilons=[1.0], data=DATA, scenario=SCENARIO, params=K2, ax=given)
        assert drawn is given
        (auto,) = drawn.get_lines()
        assert str(auto.get_label()).startswith("auto (")
    finally:
        plt.close("all")


def test_plot_forecast_without_matplotlib_says_how_to_get_it(faked, monkeypatch):
    client, seen = faked([])
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match=r"needs matplotlib.*\[examples\]"):
        privpca.plot_forecast(client, epsilons=[1.0], data=DATA, scenario=SCENARIO)
    assert seen == []


def test_a_paid_private_spectrum_says_it_is_paid_and_reuse_is_free(client, make_rows):
    ds = client.create_dataset(make_rows(1500, 6, 9), name="spectrum", row_norm_bound=1.0, budget=1.0)
    before = client.get_dataset(ds.id).budget.spent.rho

    plan = client.plan(dataset_id=ds.id, algorithm="analyze_gauss", params=K2, rho=0.01, private_spectrum=0.05)

    spectrum = plan.spectrum
    assert isinstance(spectrum, privpca.SpectrumRelease)
    assert spectrum.paid and spectrum.charged_now and spectrum.status == "succeeded"
    assert spectrum.note.startswith("Paid")
    assert spectrum.eigenvalues is not None and len(spectrum.eigenvalues) == 6
    assert spectrum.scenario is not None
    assert plan.forecast is not None and plan.forecast.free is False
    assert 0.0 < plan.forecast.captured_energy <= 1.0
    spent = client.get_dataset(ds.id).budget.spent.rho
    assert spent - before == pytest.approx(0.05 * 0.01, rel=1e-9)

    again = client.plan(dataset_id=ds.id, algorithm="analyze_gauss", params=K2, rho=0.01, spectrum_job=spectrum.job_id)
    assert again.spectrum is not None and again.spectrum.charged_now is False
    assert again.forecast is not None and again.forecast.free is True
    assert client.get_dataset(ds.id).budget.spent.rho == spent

    with pytest.raises(privpca.InvalidInput):
        client.plan(dataset_id=ds.id, scenario=SCENARIO, private_spectrum=0.05, rho=0.01)


def test_a_decay_model_and_a_public_proxy_are_free_scenarios(client, make_rows):
    decayed = client.plan(
        data=DATA,
        algorithm="analyze_gauss",
        params=K2,
        rho=0.05,
        scenario={"decay": {"model": "geometric", "top": 1.0, "rate": 0.5, "count": 2}, "noise_floor": 0.05},
    ).forecast
    stated = client.plan(data=DATA, algorithm="analyze_gauss", params=K2, rho=0.05, scenario=SCENARIO).forecast
    assert decayed == stated, "λ = (1, 0.5) stated either way"

    proxy = client.create_dataset(make_rows(800, 10, 4), name="proxy", row_norm_bound=1.0, public=True)
    plan = client.plan(data=DATA, algorithm="analyze_gauss", params=K2, rho=0.05, proxy_dataset=proxy.id)
    assert plan.forecast is not None and plan.forecast.free is True
    assert plan.raw["proxy"]["dataset_id"] == proxy.id
    assert plan.spectrum is None
    with pytest.raises(privpca.ValidationError) as refused:
        client.plan(
            data=DATA,
            params=K2,
            rho=0.05,
            scenario={"decay": {"model": "geometric", "top": 1.0, "rate": 2.0, "count": 2}},
        )
    assert refused.value.field == "scenario.decay.rate"
    with pytest.raises(privpca.InvalidInput):
        client.plan(data=DATA, scenario=SCENARIO, proxy_dataset=proxy.id, rho=0.05)
