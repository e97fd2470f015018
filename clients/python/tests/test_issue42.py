"""Issue 42, the Python items, against a live service: cross-validation never multiplies the
privacy spend, scikit-learn's tags and input checks (before any request), pickling, unique
and deletable datasets, create_dataset's clean-up, check_estimator and the progress line."""

from __future__ import annotations

import io
import pickle
import warnings

import httpx
import joblib
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils import get_tags
from sklearn.utils.estimator_checks import check_estimator

import privpca
from privpca import PrivatePCA

RHO = 0.5


class Recording(httpx.HTTPTransport):
    """The real transport, remembering every request; ``fail`` makes the given methods fail."""

    def __init__(self, fail: set[str] | None = None) -> None:
        super().__init__()
        self.requests: list[tuple[str, str]] = []
        self.fail = fail or set()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append((request.method, request.url.path))
        if request.method in self.fail:
            raise httpx.ConnectError("injected failure", request=request)
        return super().handle_request(request)


@pytest.fixture
def cancer() -> tuple[np.ndarray, np.ndarray]:
    data = load_breast_cancer()
    # Standardised with public-knowledge-free scales for the test's sake; rows of norm ≲ 10.
    X = (data.data - data.data.mean(axis=0)) / data.data.std(axis=0)
    return X, data.target


def _pipeline(client: privpca.Client, **options) -> Pipeline:
    pca = PrivatePCA(n_components=2, rho=RHO, client=client, row_norm_bound=10.0, **options)
    return Pipeline([("pca", pca), ("clf", LogisticRegression())])


# -- 1. cross-validation -------------------------------------------------------------------


@pytest.mark.parametrize("scaled", [False, True])
def test_cross_val_score_refuses_before_uploading_anything(client, cancer, scaled):
    X, y = cancer
    pipe = _pipeline(client)
    if scaled:  # per-fold scaling changes the rows: fingerprints alone could not see it
        pipe.steps.insert(0, ("scale", StandardScaler()))
    with pytest.raises(ValueError, match="All the 5 fits failed") as failed:
        cross_val_score(pipe, X, y, cv=5)
    message = str(failed.value)
    assert "RepeatedFitError" in message and "model selection" in message
    assert "(k - 1)" in message and "FrozenEstimator" in message
    assert client.list_datasets() == [], "a refused cross-validation uploaded something"


def test_cross_val_score_refuses_in_parallel_workers_too(client, cancer):
    # n_jobs=2 pickles the estimator (and its client) to joblib's worker processes, which do
    # not share this process's fingerprints: the model-selection check still holds there.
    X, y = cancer
    with pytest.raises(ValueError, match="All the 4 fits failed"):
        cross_val_score(_pipeline(client), X, y, cv=4, n_jobs=2)
    assert client.list_datasets() == []


def test_cross_val_score_error_score_raise_gives_the_reason(client, cancer):
    X, y = cancer
    with pytest.raises(privpca.RepeatedFitError, match="Nothing was uploaded"):
        cross_val_score(_pipeline(client), X, y, cv=5, error_score="raise")
    with pytest.raises(ValueError, match="All the 4 fits failed"):
        GridSearchCV(_pipeline(client), {"clf__C": [0.1, 1.0]}, cv=2).fit(X, y)
    assert client.list_datasets() == []


def test_the_deliberate_alternative_spends_one_budget_once(client, cancer):
    X, y = cancer
    pca = PrivatePCA(n_components=2, rho=RHO, client=client, row_norm_bound=10.0).fit(X)
    pipe = Pipeline([("pca", FrozenEstimator(pca)), ("clf", LogisticRegression())])
    scores = cross_val_score(pipe, X, y, cv=5)
    assert scores.shape == (5,) and np.isfinite(scores).all()
    datasets = client.list_datasets()
    assert [d.id for d in datasets] == [pca.dataset_id_]
    ledger = client.ledger(pca.dataset_id_)
    assert [e.entry for e in ledger.entries] == ["charge"]
    assert ledger.budget is not None
    assert ledger.budget.spent.rho == pytest.approx(RHO)
    assert ledger.budget.spent.rho <= ledger.budget.total.rho + 1e-12


def test_on_overlap_warn_releases_each_fold_and_says_what_it_costs(client, cancer):
    X, y = cancer
    with pytest.warns(privpca.PrivacySpendWarning, match=r"\(k - 1\)"):
        scores = cross_val_score(_pipeline(client, on_overlap="warn"), X, y, cv=2)
    assert np.isfinite(scores).all()
    assert len(client.list_datasets()) == 2  # deliberate: one dataset and one budget per fold


def test_refitting_released_rows_is_refused_and_the_same_fit_reuses_its_release(client, make_rows):
    X = make_rows(600, 5, 41)
    first = PrivatePCA(n_components=2, rho=0.2, client=client, row_norm_bound=1.0).fit(X[:400])
    # The same rows (in any order) and settings: the release is reused, nothing is spent.
    again = PrivatePCA(n_components=2, rho=0.2, client=client, row_norm_bound=1.0).fit(X[:400][::-1])
    assert again.job_id_ == first.job_id_ and again.dataset_id_ == first.dataset_id_
    np.testing.assert_array_equal(again.components_, first.components_)
    assert len(client.ledger(first.dataset_id_).entries) == 1
    # Overlapping rows, or the same rows under other settings: a second release, refused.
    with pytest.raises(privpca.RepeatedFitError, match="200 of X's 400 rows") as refused:
        PrivatePCA(n_components=2, rho=0.2, client=client, row_norm_bound=1.0).fit(X[200:600])
    assert refused.value.overlap == 200
    assert refused.value.previous == ((first.dataset_id_, first.job_id_, pytest.approx(0.2)),)
    with pytest.raises(privpca.RepeatedFitError, match="add up"):
        PrivatePCA(n_components=2, rho=0.1, client=client, row_norm_bound=1.0).fit(X[:400])
    assert [d.id for d in client.list_datasets()] == [first.dataset_id_]
    # Rows never released are fine.
    PrivatePCA(n_components=2, rho=0.2, client=client, row_norm_bound=1.0).fit(X[400:])
    assert len(client.list_datasets()) == 2


def test_fit_on_a_dataset_never_fits_rows_it_was_not_given(client, make_rows, cancer):
    X = make_rows(500, 4, 42)
    ds = client.create_dataset(X, name="rows", row_norm_bound=1.0, budget=1.0)
    pca = PrivatePCA(n_components=2, rho=0.1, client=client, dataset=ds.id)
    with pytest.raises(ValueError, match="is not the 500 rows"):
        pca.fit(X[:400])
    with pytest.raises(ValueError, match="is not the 500 rows"):
        pca.fit(X + 1e-9)
    assert client.ledger(ds.id).entries == []
    pca.fit(X[::-1])  # the dataset's rows in another order: allowed
    assert pca.dataset_id_ == ds.id and len(client.ledger(ds.id).entries) == 1

    # In cross-validation, every fold is a subset: all refused, nothing spent.
    Xc, y = cancer
    cds = client.create_dataset(Xc, name="cancer", row_norm_bound=10.0, budget=1.0)
    pipe = Pipeline([("pca", PrivatePCA(n_components=2, rho=0.1, client=client, dataset=cds.id)), ("clf", LogisticRegression())])
    with pytest.raises(ValueError, match="All the 5 fits failed"):
        cross_val_score(pipe, Xc, y, cv=5)
    assert client.ledger(cds.id).entries == []


def test_fit_on_a_dataset_uploaded_elsewhere_checks_what_is_public(client, make_rows):
    X = make_rows(300, 3, 43)
    shown = client.create_dataset(X, name="n public", row_norm_bound=1.0, budget=1.0)
    hidden = client.create_dataset(X, name="n private", row_norm_bound=1.0, budget=1.0, relation="add_remove")
    privpca._releases.REGISTRY.clear()  # as if another process had uploaded them
    with pytest.raises(ValueError, match="X has 200 rows, but dataset"):
        PrivatePCA(n_components=1, rho=0.1, client=client, dataset=shown.id).fit(X[:200])
    with pytest.raises(ValueError, match="cannot be checked"):
        PrivatePCA(n_components=1, rho=0.1, client=client, dataset=hidden.id).fit(X)
    assert client.ledger(shown.id).entries == [] and client.ledger(hidden.id).entries == []
    fitted = PrivatePCA(n_components=1, rho=0.1, client=client, dataset=hidden.id).fit()
    assert fitted.n_features_in_ == 3


# -- 2, 3. tags and input checks -------------------------------------------------------------


def test_tags():
    tags = get_tags(PrivatePCA())
    assert tags.non_deterministic is True
    assert tags.input_tags.sparse is False and tags.input_tags.allow_nan is False


BAD = {
    "1-D": (np.ones(5), "Expected 2D array, got 1D array instead"),
    "3-D": (np.ones((2, 3, 4)), "Found array with dim 3"),
    "scalar": (np.float64(1.0), "Expected 2D array, got scalar array"),
    "NaN": (np.array([[1.0, np.nan], [0.0, 1.0]]), "Input X contains NaN"),
    "inf": (np.array([[1.0, np.inf], [0.0, 1.0]]), "Input X contains infinity"),
    "complex": (np.array([[1 + 1j, 0], [0, 1]]), "Complex data not supported"),
    "empty": (np.zeros((0, 3)), r"Found array with 0 sample\(s\) \(shape=\(0, 3\)\) while a minimum of 1 is required"),
    "no features": (np.zeros((3, 0)), r"0 feature\(s\)"),
    "strings": (pd.DataFrame({"a": [1.0, 2.0], "b": ["x", "y"]}), "could not convert string to float"),
    "pandas index": (pd.DataFrame({"Unnamed: 0": [0, 1], "a": [1.0, 2.0]}), "index=False|index_col=0"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_raises_value_error_before_any_request(base_url, api_key, case):
    X, message = BAD[case]
    wire = Recording()
    client = privpca.Client(base_url, api_key, transport=wire)
    with pytest.raises(ValueError, match=message) as refused:
        PrivatePCA(n_components=1, rho=0.1, client=client, row_norm_bound=1.0).fit(X)
    assert isinstance(refused.value, privpca.InvalidInput)
    with pytest.raises(privpca.InvalidInput, match=message):
        client.create_dataset(X, name="bad", row_norm_bound=1.0, budget=1.0)
    assert wire.requests == [], f"{case}: a request went out before the input was checked"
    assert client.list_datasets() == []


def test_sparse_input_is_refused_in_scikit_learn_words(client):
    with pytest.raises(TypeError, match="Sparse data was passed for X, but dense data is required"):
        PrivatePCA(n_components=1, rho=0.1, client=client, row_norm_bound=1.0).fit(sp.csr_matrix(np.eye(3)))
    with pytest.raises(TypeError, match="Sparse data was passed"):
        client.create_dataset(sp.csr_matrix(np.eye(3)), name="sparse", row_norm_bound=1.0, budget=1.0)
    assert client.list_datasets() == []


def test_bad_settings_are_refused_before_anything_is_created(base_url, api_key, make_rows):
    wire = Recording()
    client = privpca.Client(base_url, api_key, transport=wire)
    X = make_rows(20, 3, 44)
    for options in (
        {"name": "", "row_norm_bound": 1.0, "budget": 1.0},
        {"name": "x", "row_norm_bound": 0.0, "budget": 1.0},
        {"name": "x", "row_norm_bound": 1.0},
        {"name": "x", "row_norm_bound": 1.0, "budget": (1.0, 2.0)},
        {"name": "x", "row_norm_bound": 1.0, "budget": 1.0, "public": True},
        {"name": "x", "row_norm_bound": 1.0, "budget": 1.0, "relation": "entry"},
        {"name": "x", "row_norm_bound": 1.0, "budget": {"rho": 1.0, "epsilon": 1.0}},
    ):
        with pytest.raises(privpca.InvalidInput):
            client.create_dataset(X, **options)
    for estimator in (
        PrivatePCA(n_components=0, rho=0.1, client=client, row_norm_bound=1.0),
        PrivatePCA(n_components=4, rho=0.1, client=client, row_norm_bound=1.0),
        PrivatePCA(n_components=1, rho=-1.0, client=client, row_norm_bound=1.0),
        PrivatePCA(n_components=1, rho=0.1, client=client, row_norm_bound=1.0, on_overlap="ignore"),
    ):
        with pytest.raises(ValueError):
            estimator.fit(X)
    assert wire.requests == []


def test_transform_uses_scikit_learns_feature_checks(client, make_rows):
    X = make_rows(300, 4, 45)
    pca = PrivatePCA(n_components=2, rho=0.5, client=client, row_norm_bound=1.0).fit(X)
    with pytest.raises(ValueError, match="X has 3 features, but PrivatePCA is expecting 4 features as input"):
        pca.transform(X[:, :3])
    with pytest.raises(ValueError, match="Input X contains NaN"):
        pca.transform(np.full((2, 4), np.nan))
    frame = pd.DataFrame(X, columns=list("abcd"))
    named = PrivatePCA(n_components=2, rho=0.5, client=client, row_norm_bound=1.0).fit(frame)
    assert named.job_id_ == pca.job_id_  # the same rows and settings: the release is reused
    with pytest.raises(ValueError, match="The feature names should match those that were passed during fit"):
        named.transform(frame[list("dcba")])


# -- 4. pickling -----------------------------------------------------------------------------


def test_a_fitted_estimator_pickles_and_its_client_reconnects(client, make_rows, tmp_path):
    X = make_rows(400, 5, 46)
    pca = PrivatePCA(n_components=2, rho=0.5, client=client, row_norm_bound=1.0).fit(X)
    client.list_datasets()  # the pool is open: pickling must not need it
    for restored in (pickle.loads(pickle.dumps(pca)), _joblib_round_trip(pca, tmp_path)):
        np.testing.assert_array_equal(restored.transform(X), pca.transform(X))
        np.testing.assert_array_equal(restored.inverse_transform(restored.transform(X)), pca.inverse_transform(pca.transform(X)))
        assert restored.client is not client and restored.client.base_url == client.base_url
        assert restored.client.get_dataset(pca.dataset_id_).id == pca.dataset_id_  # reconnects lazily
        assert restored.get_params()["rho"] == 0.5


def _joblib_round_trip(estimator, tmp_path):
    path = tmp_path / "pca.joblib"
    joblib.dump(estimator, path)
    return joblib.load(path)


# -- 5. names, clean-up, create_dataset's clean-up ------------------------------------------


def test_fit_datasets_are_named_uniquely_and_can_be_deleted(client, make_rows):
    first = PrivatePCA(n_components=1, rho=0.1, client=client, row_norm_bound=1.0).fit(make_rows(100, 3, 47))
    with PrivatePCA(n_components=1, rho=0.1, client=client, row_norm_bound=1.0) as second:
        second.fit(make_rows(100, 3, 48))
        names = {d.name for d in client.list_datasets()}
        assert len(names) == 2 and all(n.startswith("PrivatePCA fit ") for n in names)
    assert client.get_dataset(second.dataset_id_).status == "deleted"
    assert second.transform(make_rows(5, 3, 49)).shape == (5, 1)  # still usable: local
    assert first.delete() == [first.dataset_id_]
    assert client.get_dataset(first.dataset_id_).status == "deleted"
    assert client.ledger(first.dataset_id_).entries[0].entry == "charge"  # the ledger stays
    assert first.delete() == []
    ds = client.create_dataset(make_rows(50, 3, 50), name="given", row_norm_bound=1.0, budget=1.0)
    given = PrivatePCA(n_components=1, rho=0.1, client=client, dataset=ds.id).fit()
    assert given.delete() == [] and client.get_dataset(ds.id).status == "ready"


def test_a_failed_upload_deletes_the_dataset_it_created_and_says_so(base_url, api_key, make_rows):
    client = privpca.Client(base_url, api_key, transport=Recording(fail={"PUT"}))
    with pytest.raises(httpx.ConnectError, match="was deleted, so nothing is left") as failed:
        client.create_dataset(make_rows(50, 3, 51), name="lost upload", row_norm_bound=1.0, budget=1.0)
    assert failed.value.dataset_deleted is True
    assert client.get_dataset(failed.value.dataset_id).status == "deleted"

    stuck = privpca.Client(base_url, api_key, transport=Recording(fail={"PUT", "DELETE"}))
    with pytest.raises(httpx.ConnectError, match="could not be deleted") as failed:
        stuck.create_dataset(make_rows(50, 3, 52), name="lost upload", row_norm_bound=1.0, budget=1.0)
    assert failed.value.dataset_deleted is False
    assert failed.value.dataset_id in str(failed.value)
    assert client.get_dataset(failed.value.dataset_id).status == "empty"


def test_a_fit_whose_job_is_refused_deletes_its_dataset(client, make_rows):
    pca = PrivatePCA(n_components=2, algorithm="no-such-algorithm", rho=0.1, client=client, row_norm_bound=1.0)
    with pytest.raises(privpca.ApiError):
        pca.fit(make_rows(100, 3, 53))
    assert [d.status for d in client.list_datasets()] == ["deleted"]
    # Nothing was released, so the same rows may be fitted (nothing counted them).
    PrivatePCA(n_components=2, rho=0.1, client=client, row_norm_bound=1.0).fit(make_rows(100, 3, 53))


# -- 6. check_estimator ----------------------------------------------------------------------


def test_check_estimator_passes(client):
    # check_estimator feeds the same generated rows (subsets, supersets, other n_components) to
    # many fits: re-releases the default on_overlap="raise" refuses. Synthetic rows hold no
    # people, so the check opts in, deliberately.
    estimator = PrivatePCA(n_components=2, rho=1.0, client=client, row_norm_bound=100.0, on_overlap="warn")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", privpca.PrivacySpendWarning)
        results = check_estimator(estimator, on_skip=None, on_fail=None)
    failed = {r["check_name"]: r["exception"] for r in results if r["status"] == "failed"}
    assert failed == {}
    skipped = {r["check_name"]: str(r["exception"]) for r in results if r["status"] == "skipped"}
    # Only what the non_deterministic tag skips (conftest sets SCIPY_ARRAY_API for the array API check).
    assert all("non deterministic" in why for why in skipped.values()), skipped
    assert set(skipped) <= {"check_transformer_general", "check_pipeline_consistency", "check_transformer_data_not_an_array"}
    assert len(results) - len(skipped) >= 40


def test_check_estimator_with_the_default_refuses_only_re_releases(client):
    estimator = PrivatePCA(n_components=2, rho=1.0, client=client, row_norm_bound=100.0)
    results = check_estimator(estimator, on_skip=None, on_fail=None)
    failed = [r["exception"] for r in results if r["status"] == "failed"]
    assert all(isinstance(e, privpca.RepeatedFitError) for e in failed), failed


# -- 8. progress -----------------------------------------------------------------------------


def _job(status: str, done: int) -> dict:
    return {
        "id": "0123456789", "dataset_id": "d", "algorithm": "exact", "status": status, "params": {},
        "config": {}, "privacy": {}, "refunded": False, "cancel_requested": False, "created_at": "now",
        "progress": {"done": done, "total": 5},
        "cost": {"rho": 0.0, "delta": 0.0, "epsilon": 0.0, "epsilon_at_delta": 1e-6},
    }


@pytest.mark.parametrize("answers", [["succeeded"], ["queued", "running", "succeeded"]])
def test_a_fast_job_prints_its_progress_once(faked, capsys, answers):
    client, _ = faked([httpx.Response(200, json=_job(s, 5 if s == "succeeded" else 1)) for s in answers])
    client.wait("0123456789", progress=True, poll_interval=0.01)
    err = capsys.readouterr().err
    assert err.count("job 01234567") == 1, err
    assert "succeeded" in err and err.endswith("\n")


def test_a_slow_job_gets_a_bar(faked, capsys, monkeypatch):
    monkeypatch.setattr(privpca.client, "BAR_AFTER", 0.0)
    client, _ = faked([httpx.Response(200, json=_job(s, d)) for s, d in [("running", 1), ("running", 3), ("succeeded", 5)]])
    client.wait("0123456789", progress=True, poll_interval=0.01)
    err = capsys.readouterr().err
    assert "5/5" in err and "100%" in err


def test_verbose_fit_on_a_live_job_prints_one_line(client, make_rows, capsys):
    PrivatePCA(n_components=1, rho=0.1, client=client, row_norm_bound=1.0, verbose=True).fit(make_rows(50, 3, 54))
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.count("job ") == 1 or "%|" in err, err  # a line, or a bar for a job slower than 0.5 s


def test_dataframe_upload_never_writes_its_index(client):
    frame = pd.DataFrame({"a": [0.1, 0.2, 0.3], "b": [0.3, 0.2, 0.1]}, index=[10, 20, 30])
    ds = client.create_dataset(frame, name="frame", row_norm_bound=1.0, public=True)
    assert ds.n_features == 2
    buffer = io.BytesIO(privpca.client.to_npy(frame))
    np.testing.assert_array_equal(np.load(buffer), frame.to_numpy())


# -- 7. the example runs after `pip install ./clients/python[examples]` ---------------------


def test_the_example_runs(base_url, api_key, tmp_path):
    pytest.importorskip("matplotlib", reason="the [examples] extra is not installed")
    import pathlib
    import subprocess
    import sys

    example = pathlib.Path(__file__).resolve().parents[3] / "docs" / "examples" / "python_pca.py"
    out = tmp_path / "python_pca.png"
    run = subprocess.run(
        [sys.executable, str(example), base_url, api_key, str(out)], capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr
    assert out.stat().st_size > 10_000
    assert "principal angles" in run.stdout
    statuses = {d.status for d in privpca.Client(base_url, api_key).list_datasets()}
    assert statuses == {"deleted"}
