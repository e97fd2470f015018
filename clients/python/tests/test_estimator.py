"""PrivatePCA against a live service: fit on X (a new private dataset), DataFrames and their
column names, transform / inverse_transform, clone and the scikit-learn plumbing."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.pipeline import make_pipeline

import privpca
from privpca import PrivatePCA


def test_fit_on_x_uploads_a_private_dataset_with_exactly_the_target_as_budget(client, make_rows):
    X = make_rows(1500, 5, 21)
    pca = PrivatePCA(n_components=2, algorithm="noisy_power", rho=0.2, client=client, row_norm_bound=1.0).fit(X)
    ds = client.get_dataset(pca.dataset_id_)
    assert not ds.public and ds.n_features == 5
    assert ds.budget is not None
    assert ds.budget.stated == {"rho": 0.2}
    assert ds.budget.remaining.rho == pytest.approx(0.0, abs=1e-12)
    assert pca.cost_.rho == pytest.approx(0.2)
    assert client.get_job(pca.job_id_).dataset_id == ds.id
    assert pca.n_features_in_ == 5 and not hasattr(pca, "feature_names_in_")


def test_fit_on_x_with_an_epsilon_delta_target(client, make_rows):
    X = make_rows(1500, 4, 22)
    pca = PrivatePCA(n_components=2, epsilon=1.0, delta=1e-6, client=client, row_norm_bound=1.0).fit(X)
    # The budget is what the service charges a Gaussian-only job stated at (1, 1e-6): a fresh
    # (1, 1e-6) budget could not admit it (docs/design/privacy.md §2.6 splits its δ).
    charged = client.plan(epsilon=1.0, delta=1e-6).raw["conversions"]["rho_exact_gaussian"]
    budget = client.get_dataset(pca.dataset_id_).budget
    assert budget is not None and budget.stated == {"rho": charged, "delta": 1e-6}
    assert pca.cost_.rho == pytest.approx(charged)
    assert budget.remaining.rho == pytest.approx(0.0, abs=1e-12)
    C = pca.components_
    np.testing.assert_allclose(C @ C.T, np.eye(2), atol=1e-9)


def test_dataframe_column_names(client, make_rows):
    columns = ["alcohol", "malic_acid", "ash", "magnesium"]
    frame = pd.DataFrame(make_rows(800, 4, 23), columns=columns)
    pca = PrivatePCA(n_components=2, rho=0.5, client=client, row_norm_bound=1.0).fit(frame)
    assert list(pca.feature_names_in_) == columns
    assert list(pca.get_feature_names_out()) == ["privatepca0", "privatepca1"]
    assert pca.transform(frame).shape == (800, 2)
    with pytest.raises(ValueError, match="feature names should match"):
        pca.transform(frame[columns[::-1]])
    assert client.get_dataset(pca.dataset_id_).n_features == 4


def test_exact_public_transform_inverse_transform_and_pipeline(client, make_rows):
    X = make_rows(400, 6, 24)
    ds = client.create_dataset(X, name="exact", row_norm_bound=1.0, public=True)
    pca = PrivatePCA(n_components=3, algorithm="exact", client=client, dataset=ds).fit(X)
    V = pca.components_
    np.testing.assert_allclose(V @ V.T, np.eye(3), atol=1e-12)
    # Signs follow scikit-learn's convention: each row's largest entry is positive.
    assert (V[np.arange(3), np.abs(V).argmax(axis=1)] > 0).all()
    np.testing.assert_allclose(pca.transform(X), X @ V.T, atol=1e-12)
    np.testing.assert_allclose(pca.inverse_transform(pca.transform(X)), X @ V.T @ V, atol=1e-12)
    eigenvalues = np.linalg.eigvalsh(X.T @ X)[::-1][:3]
    np.testing.assert_allclose(pca.explained_variance_, eigenvalues, rtol=1e-9)
    pipeline = make_pipeline(clone(pca)).fit(X)
    assert pipeline.transform(X).shape == (400, 3)
    with pytest.raises(ValueError, match="features"):
        pca.transform(X[:, :5])


def test_wrong_width_x_spends_nothing(client, make_rows):
    ds = client.create_dataset(make_rows(300, 4, 25), name="width", row_norm_bound=1.0, budget=1.0)
    with pytest.raises(ValueError, match="features"):
        PrivatePCA(n_components=1, rho=0.1, client=client, dataset=ds.id).fit(make_rows(300, 5, 25))
    assert client.ledger(ds.id).entries == []


def test_clone_get_params_set_params(client):
    pca = PrivatePCA(n_components=4, algorithm="noisy_power", rho=0.1, client=client, params={"iterations": 3})
    params = pca.get_params()
    assert params["n_components"] == 4 and params["params"] == {"iterations": 3}
    twin = clone(pca)
    assert twin.get_params()["n_components"] == 4 and twin.client is client
    assert twin.set_params(n_components=2, rho=0.05) is twin
    assert (twin.n_components, twin.rho, pca.n_components) == (2, 0.05, 4)
    assert not hasattr(twin, "components_")


def test_fit_refuses_incomplete_settings_before_calling_the_service(client, make_rows):
    X = make_rows(50, 3, 26)
    with pytest.raises(ValueError, match="client"):
        PrivatePCA(rho=0.1, row_norm_bound=1.0).fit(X)
    with pytest.raises(ValueError, match="rho or epsilon"):
        PrivatePCA(client=client, row_norm_bound=1.0).fit(X)
    with pytest.raises(ValueError, match="row_norm_bound"):
        PrivatePCA(client=client, rho=0.1).fit(X)
    with pytest.raises(ValueError, match="not both"):
        PrivatePCA(client=client, rho=0.1, epsilon=1.0, delta=1e-6, row_norm_bound=1.0).fit(X)
    assert client.list_datasets() == []
    with pytest.raises(privpca.NotFound):
        PrivatePCA(client=client, rho=0.1, dataset="00000000-0000-0000-0000-000000000000").fit()
