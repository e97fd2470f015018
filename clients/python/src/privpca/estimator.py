"""``PrivatePCA``: a scikit-learn estimator whose ``fit`` is a job on the privpca service.

The service releases the components; ``transform`` and ``inverse_transform`` are local
post-processing of that release and cost nothing. Needs scikit-learn
(``pip install ./clients/python[sklearn]``).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from .client import Client, as_matrix, privacy_input
from .models import Dataset, FloatArray


class PrivatePCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):  # type: ignore[misc]
    """Differentially private PCA, fitted by a privpca service.

    Parameters
    ----------
    n_components : the number of components k (the job's ``params.k``).
    algorithm : an algorithm of ``GET /v1/algorithms``, or ``"auto"`` (the service picks).
    rho, epsilon, delta : what the fit may spend: ``rho`` (zCDP, optionally with ``delta``) or
        ``epsilon`` and ``delta``. May be left out on a public ``dataset``.
    client : a :class:`privpca.Client`.
    dataset : a dataset id (or :class:`privpca.Dataset`) already on the service. Without it,
        ``fit(X)`` uploads X as a new private dataset whose budget is exactly this fit's target.
    row_norm_bound : the L2 bound every row is clipped to, for ``fit(X)`` uploads.
    params : extra job parameters (``center``, ``clip``, ``iterations``, …).
    verbose : show a progress bar while the job runs.

    Attributes
    ----------
    components_ : (k, d) array, rows orthonormal, most important first; each row's largest
        entry (in absolute value) is made positive, as scikit-learn's PCA does.
    explained_variance_ : the (k,) eigenvalue estimates of the matrix the service decomposed
        (XᵀX, or the centred one), when the job released them; absent otherwise.
    mean_ : the centre ``transform`` subtracts: the public centre of ``params["center"]`` when
        one was given, zeros otherwise (a private mean is used by the service, not released).
    n_features_in_, feature_names_in_ (DataFrames with string column names only),
    job_id_, dataset_id_, cost_ (a :class:`privpca.PrivacyAmount`).
    """

    def __init__(
        self,
        n_components: int = 2,
        *,
        algorithm: str = "auto",
        rho: float | None = None,
        epsilon: float | None = None,
        delta: float | None = None,
        client: Client | None = None,
        dataset: str | Dataset | None = None,
        row_norm_bound: float | None = None,
        params: Mapping[str, Any] | None = None,
        verbose: bool = False,
    ) -> None:
        self.n_components = n_components
        self.algorithm = algorithm
        self.rho = rho
        self.epsilon = epsilon
        self.delta = delta
        self.client = client
        self.dataset = dataset
        self.row_norm_bound = row_norm_bound
        self.params = params
        self.verbose = verbose

    def fit(self, X: Any = None, y: Any = None) -> PrivatePCA:
        """Run one job: on ``dataset`` when it is set (X, if given, only names the features
        and is checked against the dataset's width), else on X uploaded as a new private
        dataset. Spends this estimator's target once per call."""
        if self.client is None:
            raise ValueError("PrivatePCA needs a client=privpca.Client(base_url, api_key)")
        privacy = privacy_input(self.rho, self.epsilon, self.delta)
        matrix = None if X is None else as_matrix(X)
        dataset_id = self._dataset_id(matrix, privacy)
        params = {**dict(self.params or {}), "k": int(self.n_components)}
        job = self.client.submit_job(dataset_id, self.algorithm, params, rho=self.rho, epsilon=self.epsilon, delta=self.delta)
        self.client.wait(job.id, progress=self.verbose)
        result = self.client.result(job.id)
        n_features = result.basis.shape[0]

        self.components_ = _flip_signs(result.components)
        if result.eigenvalues is not None:
            self.explained_variance_ = result.eigenvalues
        elif hasattr(self, "explained_variance_"):
            del self.explained_variance_
        center = params.get("center")
        is_public_center = isinstance(center, (list, tuple, np.ndarray))
        self.mean_ = np.asarray(center, dtype=np.float64) if is_public_center else np.zeros(n_features)
        self.n_features_in_ = n_features
        self._set_feature_names(X)
        self._n_features_out = self.components_.shape[0]
        self.job_id_ = job.id
        self.dataset_id_ = dataset_id
        self.cost_ = result.cost
        return self

    def transform(self, X: Any) -> FloatArray:
        """Project X on the components: ``(X - mean_) @ components_.T``, shape (n, k)."""
        matrix = self._checked(X)
        projected: FloatArray = (matrix - self.mean_) @ self.components_.T
        return projected

    def inverse_transform(self, X: Any) -> FloatArray:
        """Back to feature space: ``X @ components_ + mean_``, shape (n, d)."""
        check_is_fitted(self, "components_")
        scores = np.asarray(X, dtype=np.float64)
        restored: FloatArray = scores @ self.components_ + self.mean_
        return restored

    def _dataset_id(self, matrix: FloatArray | None, privacy: dict[str, float] | None) -> str:
        assert self.client is not None
        if self.dataset is not None:
            dataset_id = self.dataset.id if isinstance(self.dataset, Dataset) else str(self.dataset)
            if matrix is not None:
                # Checked before the job is submitted, so a wrong X spends nothing.
                width = self.client.get_dataset(dataset_id).n_features
                if matrix.shape[1] != width:
                    raise ValueError(f"X has {matrix.shape[1]} features; dataset {dataset_id} has {width}")
            return dataset_id
        if matrix is None:
            raise ValueError("fit() needs X, or a dataset= on the service")
        if privacy is None:
            raise ValueError("fitting on X uploads it as a private dataset: give rho or epsilon/delta")
        if self.row_norm_bound is None:
            raise ValueError("fitting on X uploads it as a private dataset: give row_norm_bound")
        stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        created = self.client.create_dataset(
            matrix, name=f"PrivatePCA fit {stamp}", row_norm_bound=self.row_norm_bound, budget=self._budget(privacy)
        )
        return created.id

    def _budget(self, privacy: dict[str, float]) -> dict[str, float]:
        """The budget of a dataset uploaded for one fit: what the fit's target is charged.

        A ρ target is the budget as it is. An (ε, δ) target is charged, on a Gaussian-only
        job, the most ρ the exact Gaussian curve allows at (ε, δ); an (ε, δ) budget cannot
        admit that, as the service's admission rule splits δ between its exact-curve and CKS
        parts (docs/design/privacy.md §2.6). So the budget is that ρ as a zCDP budget, with δ as
        the cap for approximate parts.
        """
        assert self.client is not None
        if "epsilon" not in privacy:
            return privacy
        conversions = self.client.plan(epsilon=privacy["epsilon"], delta=privacy["delta"]).raw["conversions"]
        return {"rho": float(conversions["rho_exact_gaussian"]), "delta": privacy["delta"]}

    def _set_feature_names(self, X: Any) -> None:
        columns = getattr(X, "columns", None)
        names = None if columns is None else [c for c in columns]
        if names is not None and all(isinstance(c, str) for c in names):
            self.feature_names_in_ = np.asarray(names, dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_

    def _checked(self, X: Any) -> FloatArray:
        check_is_fitted(self, "components_")
        names = getattr(self, "feature_names_in_", None)
        columns = getattr(X, "columns", None)
        if names is not None and columns is not None and list(columns) != list(names):
            raise ValueError(f"X has columns {list(columns)}; the fit had {list(names)}")
        matrix = as_matrix(X)
        if matrix.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {matrix.shape[1]} features; PrivatePCA was fitted with {self.n_features_in_}")
        return matrix


def _flip_signs(components: FloatArray) -> FloatArray:
    """Each row's largest entry (in absolute value) made positive (scikit-learn's ``svd_flip``
    convention); post-processing that changes no subspace."""
    rows = np.array(components, dtype=np.float64)
    largest = np.argmax(np.abs(rows), axis=1)
    signs = np.sign(rows[np.arange(rows.shape[0]), largest])
    signs[signs == 0] = 1.0
    flipped: FloatArray = rows * signs[:, None]
    return flipped
