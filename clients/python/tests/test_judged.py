"""The issue's judged scenario, literally. Needs only `pip install ./clients/python numpy
scikit-learn` (no pandas): scripts/python-client-test.sh runs this file in a fresh venv made
with exactly that, besides the full suite."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone

import privpca
from privpca import Client, PrivatePCA


def test_exact_on_public_data_matches_numpy(base_url, api_key, make_rows):
    X = make_rows(300, 7, 11)
    c = Client(base_url, api_key)
    ds = c.create_dataset(X, name="judged public", row_norm_bound=1.0, public=True)

    pca = PrivatePCA(n_components=3, algorithm="exact", client=c, dataset=ds.id).fit()

    assert pca.components_.shape == (3, X.shape[1])
    eigenvalues, eigenvectors = np.linalg.eigh(X.T @ X)
    top = eigenvectors[:, ::-1][:, :3].T
    for got, want in zip(pca.components_, top):
        assert min(np.abs(got - want).max(), np.abs(got + want).max()) < 1e-6
    np.testing.assert_allclose(pca.explained_variance_, eigenvalues[::-1][:3], rtol=1e-9)


def test_private_dataset_clone_fit_transform_then_budget_exceeded(base_url, api_key, make_rows):
    X = make_rows(2000, 6, 12)
    c = Client(base_url, api_key)
    ds = c.create_dataset(X, name="judged private", row_norm_bound=1.0, budget={"rho": 0.05})
    pca = PrivatePCA(n_components=2, rho=0.04, client=c, dataset=ds.id)

    twin = clone(pca)
    assert twin is not pca
    assert twin.n_components == 2
    assert twin.get_params()["rho"] == 0.04 and twin.client is c

    pca.fit()
    assert pca.transform(X).shape == (X.shape[0], 2)
    C = pca.components_
    np.testing.assert_allclose(C @ C.T, np.eye(2), atol=1e-9)
    assert pca.cost_.rho == pytest.approx(0.04)

    with pytest.raises(privpca.BudgetExceeded) as refused:
        PrivatePCA(n_components=2, rho=0.04, client=c, dataset=ds.id).fit()
    assert refused.value.requested == pytest.approx(0.04)
    assert refused.value.remaining == pytest.approx(0.01)
    assert refused.value.status == 409
