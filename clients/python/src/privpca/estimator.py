"""``PrivatePCA``: a scikit-learn estimator whose ``fit`` is a job on the privpca service.

The service releases the components; ``transform`` and ``inverse_transform`` are local
post-processing of that release and cost nothing. Needs scikit-learn
(``pip install ./clients/python[sklearn]``).

A private release of the same people twice is a deliberate act, never a side effect: see
``fit`` and the README's "Cross-validation and the privacy budget".
"""

from __future__ import annotations

import datetime
import json
import sys
import uuid
import warnings
from collections.abc import Hashable, Mapping
from typing import Any, overload

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from . import _validation
from ._releases import REGISTRY, Release, digest, fingerprints
from ._forecast import DataShape, ScenarioLike, TargetLike
from .client import Client, privacy_input
from .errors import InvalidInput, JobFailed, NotFound, PrivacySpendWarning, PrivpcaError, RepeatedFitError
from .models import Dataset, FloatArray, Forecast, Needed, PrivacyAmount

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data as _validate_data
except ImportError:  # pragma: no cover - older scikit-learn
    _validate_data = None

ON_OVERLAP = ("raise", "warn")

#: The modules whose frames, on the call stack, mean a fit is one of many model-selection fits
#: of the same data (cross_val_score, cross_validate, GridSearchCV, learning_curve, …).
MODEL_SELECTION = "sklearn.model_selection"


class PrivatePCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):  # type: ignore[misc]
    """Differentially private PCA, fitted by a privpca service.

    Parameters
    ----------
    n_components : the number of components k (the job's ``params.k``).
    algorithm : an algorithm of ``GET /v1/algorithms``, or ``"auto"`` (the service picks).
    rho, epsilon, delta : what the fit may spend: ``rho`` (zCDP, optionally with ``delta``) or
        ``epsilon`` and ``delta``. May be left out on a public ``dataset``.
    client : a :class:`privpca.Client`.
    dataset : a dataset id (or :class:`privpca.Dataset`) already on the service. ``fit()``
        fits all of its rows, spending from its ledger; ``fit(X)`` then requires X to be
        exactly those rows (checked before anything is spent). Without ``dataset``,
        ``fit(X)`` uploads X as a new private dataset whose budget is exactly this fit's target.
    row_norm_bound : the L2 bound every row is clipped to, for ``fit(X)`` uploads.
    params : extra job parameters (``center``, ``clip``, ``iterations``, …).
    verbose : show the job's progress (one line for a fast job, a bar for a slow one).
    on_overlap : ``"raise"`` (default) or ``"warn"``: what ``fit(X)`` does when it would
        release people this process already released (rows shared with an earlier
        ``fit(X)`` under other settings), or runs inside scikit-learn's model selection
        (``cross_val_score``, ``GridSearchCV``, …), where every fold would be a new dataset
        with a fresh budget. ``"raise"`` refuses with :class:`privpca.RepeatedFitError`
        before anything is uploaded; ``"warn"`` releases them again and says what their total
        spend now is (:class:`privpca.PrivacySpendWarning`). Fitting exactly the same rows
        with the same settings again reuses the earlier release and spends nothing.

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
        on_overlap: str = "raise",
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
        self.on_overlap = on_overlap

    # -- scikit-learn plumbing -----------------------------------------------------------

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        # Differential privacy: each release draws fresh noise, and the service takes no seed
        # on private data.
        tags.non_deterministic = True
        tags.input_tags.sparse = False
        tags.input_tags.allow_nan = False
        return tags

    def _more_tags(self) -> dict[str, Any]:  # scikit-learn < 1.6
        return {"non_deterministic": True, "allow_nan": False}

    def __enter__(self) -> PrivatePCA:
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete()

    # -- fit ------------------------------------------------------------------------------

    def fit(self, X: Any = None, y: Any = None) -> PrivatePCA:
        """Release the top ``n_components`` directions privately.

        - With ``dataset``: one job on that dataset, charged to its ledger. X, if given, must
          be that dataset's rows (any order) and only names the features: checked against
          the fingerprints of this process's upload, or else the public row count.
        - Without: X is uploaded as a new private dataset (named uniquely) whose budget is
          exactly this fit's target, unless X shares rows with an earlier private release of
          this process or the fit runs inside scikit-learn's model selection (``on_overlap``).
          The same rows with the same settings again reuse the earlier release.

        Every input is checked (scikit-learn's rules and wording) before any request.
        """
        client = self._client()
        privacy = privacy_input(self.rho, self.epsilon, self.delta)
        k = self._n_components()
        if self.on_overlap not in ON_OVERLAP:
            raise InvalidInput(f"on_overlap must be one of {ON_OVERLAP}, got {self.on_overlap!r}", field="on_overlap")
        matrix = None if X is None else self._validate(X, reset=True)
        if matrix is not None and k > matrix.shape[1]:
            raise InvalidInput(
                f"n_components={k} must be between 1 and n_features={matrix.shape[1]}", field="n_components"
            )
        params = {**dict(self.params or {}), "k": k}
        if self.dataset is not None:
            dataset_id = self._check_dataset(client, matrix)
            self._release(client, dataset_id, params)
            if matrix is None:
                self.n_features_in_ = self.components_.shape[1]
                if hasattr(self, "feature_names_in_"):
                    del self.feature_names_in_
            return self
        if matrix is None:
            raise InvalidInput("fit() needs X, or a dataset= on the service", field="X")
        if privacy is None:
            raise InvalidInput("fitting on X uploads it as a private dataset: give rho or epsilon/delta", field="rho")
        if self.row_norm_bound is None:
            raise InvalidInput("fitting on X uploads it as a private dataset: give row_norm_bound", field="row_norm_bound")
        bound = _validation.positive(self.row_norm_bound, "row_norm_bound")
        self._fit_upload(client, matrix, privacy, params, bound)
        return self

    def _fit_upload(
        self, client: Client, matrix: FloatArray, privacy: dict[str, float], params: dict[str, Any], bound: float
    ) -> None:
        prints = fingerprints(matrix)
        key = self._release_key(client, digest(prints, matrix.shape[1]), privacy, params, bound)
        same, earlier, release = REGISTRY.reserve(key, prints)
        if same is not None:
            # The same rows with the same settings were released already: their release is
            # reused (post-processing is free), so a refit spends nothing.
            self._adopt(same.state)
            return
        created: str | None = None
        try:
            self._refuse_or_warn(prints, earlier, privacy)
            budget = self._budget(client, privacy)
            release.rho = budget["rho"]
            stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            dataset = client.create_dataset(
                matrix,
                name=f"PrivatePCA fit {stamp} {uuid.uuid4().hex[:12]}",
                row_norm_bound=bound,
                budget=budget,
            )
            created = release.dataset_id = dataset.id
            self._owned().append(created)
            self._release(client, created, params)
        except JobFailed:
            # Nothing was released: the rows are not spent, and the dataset (its budget was
            # exactly this fit's target) has no further use.
            REGISTRY.cancel(release)
            if created is not None:
                self._delete_quietly(client, created)
            raise
        except BaseException:
            if created is not None and self.__dict__.get("dataset_id_") == created:
                # The job was accepted and may still release (an interrupted wait, a lost
                # answer): the rows stay counted as released, and the dataset stays.
                release.job_id = self.job_id_
            else:
                # Refused, or failed before a job was accepted: nothing was released.
                REGISTRY.cancel(release)
                if created is not None:
                    self._delete_quietly(client, created)
            raise
        release.job_id, release.rho = self.job_id_, self.cost_.rho
        release.state = self._state()
        REGISTRY.finish(release)

    def _release(self, client: Client, dataset_id: str, params: dict[str, Any]) -> None:
        """One job on the dataset: its result becomes the fitted attributes."""
        for name in ("components_", "job_id_", "dataset_id_", "cost_"):
            if hasattr(self, name):
                delattr(self, name)
        job = client.submit_job(dataset_id, self.algorithm, params, rho=self.rho, epsilon=self.epsilon, delta=self.delta)
        self.job_id_ = job.id
        self.dataset_id_ = dataset_id
        client.wait(job.id, progress=self.verbose)
        result = client.result(job.id)
        center = params.get("center")
        is_public_center = isinstance(center, (list, tuple, np.ndarray))
        n_features = result.basis.shape[0]
        self._adopt(
            {
                "components": _flip_signs(result.components),
                "explained_variance": result.eigenvalues,
                "mean": np.asarray(center, dtype=np.float64) if is_public_center else np.zeros(n_features),
                "job_id": job.id,
                "dataset_id": dataset_id,
                "cost": result.cost,
            }
        )

    def _adopt(self, state: Mapping[str, Any]) -> None:
        self.components_ = np.array(state["components"], dtype=np.float64)
        if state["explained_variance"] is not None:
            self.explained_variance_ = np.array(state["explained_variance"], dtype=np.float64)
        elif hasattr(self, "explained_variance_"):
            del self.explained_variance_
        self.mean_ = np.array(state["mean"], dtype=np.float64)
        self._n_features_out = self.components_.shape[0]
        self.job_id_ = str(state["job_id"])
        self.dataset_id_ = str(state["dataset_id"])
        self.cost_: PrivacyAmount = state["cost"]

    def _state(self) -> dict[str, Any]:
        return {
            "components": self.components_.copy(),
            "explained_variance": getattr(self, "explained_variance_", None),
            "mean": self.mean_.copy(),
            "job_id": self.job_id_,
            "dataset_id": self.dataset_id_,
            "cost": self.cost_,
        }

    def _release_key(
        self, client: Client, rows: str, privacy: dict[str, float], params: dict[str, Any], bound: float
    ) -> Hashable:
        settings = json.dumps(
            {"algorithm": self.algorithm, "privacy": privacy, "params": params, "row_norm_bound": bound},
            sort_keys=True,
            default=_jsonable,
        )
        return (client.base_url, rows, settings)

    def _refuse_or_warn(self, prints: Any, earlier: list[Release], privacy: dict[str, float]) -> None:
        """Refuses (or, with ``on_overlap="warn"``, warns about) a second release of the same
        people: rows shared with an earlier release, or a fit inside model selection."""
        target = _stated(privacy)
        caller = _model_selection_caller()
        if caller is not None:
            example = f" (rho = {4 * privacy['rho']:g} for k = 5)" if "rho" in privacy else ""
            why = (
                f"PrivatePCA.fit(X) was called by scikit-learn's model selection ({caller}). Each fold's "
                f"fit would upload its rows as a new private dataset with a fresh budget of {target}, and "
                "every person is in all training folds but one: k-fold cross-validation would spend "
                f"(k - 1) times {target} on each of them{example}, as zCDP adds up, while each dataset's "
                f"ledger shows only {target}. A preprocessing step fitted per fold (e.g. StandardScaler) "
                "changes the rows, so their fingerprints cannot catch this."
            )
            if self.on_overlap == "raise":
                raise RepeatedFitError(f"{why} Nothing was uploaded. {_ALTERNATIVES}")
            warnings.warn(f"{why} Releasing this fold anyway (on_overlap='warn').", PrivacySpendWarning, stacklevel=4)
        if not earlier:
            return
        shared = len(prints) - int(np.count_nonzero(~np.isin(prints, _union(earlier))))
        before = sum(r.rho for r in earlier)
        listed = "; ".join(f"job {r.job_id or '(running)'} on dataset {r.dataset_id or '(pending)'}, rho = {r.rho:g}" for r in earlier)
        total = f"rho = {before + privacy['rho']:g}" if "rho" in privacy else f"rho = {before:g} plus {target}"
        why = (
            f"{shared} of X's {len(prints)} rows were already in {len(earlier)} private release(s) by this "
            f"process ({listed}). This fit would upload them as a new dataset with a fresh budget and "
            f"release them again at {target}: those people's privacy loss would add up to {total}, "
            "more than any one ledger shows."
        )
        if self.on_overlap == "raise":
            raise RepeatedFitError(
                f"{why} Nothing was uploaded. {_ALTERNATIVES}",
                overlap=shared,
                previous=tuple((r.dataset_id, r.job_id, r.rho) for r in earlier),
            )
        warnings.warn(f"{why} Releasing them again (on_overlap='warn').", PrivacySpendWarning, stacklevel=4)

    def _budget(self, client: Client, privacy: dict[str, float]) -> dict[str, float]:
        """The budget of a dataset uploaded for one fit: what the fit's target is charged.

        A ρ target is the budget as it is. An (ε, δ) target is charged, on a Gaussian-only
        job, the most ρ the exact Gaussian curve allows at (ε, δ); an (ε, δ) budget cannot
        admit that, as the service's admission rule splits δ between its exact-curve and CKS
        parts (docs/design/privacy.md §2.6). So the budget is that ρ as a zCDP budget, with δ as
        the cap for approximate parts.
        """
        if "epsilon" not in privacy:
            return privacy
        conversions = client.plan(epsilon=privacy["epsilon"], delta=privacy["delta"]).raw["conversions"]
        return {"rho": float(conversions["rho_exact_gaussian"]), "delta": privacy["delta"]}

    def _check_dataset(self, client: Client, matrix: FloatArray | None) -> str:
        """The dataset's id, after checking that X (when given) is that dataset's rows: a fit
        on a dataset fits all of its rows, so an X that is not them (a fold, a subset) is
        refused before anything is spent."""
        assert self.dataset is not None
        dataset_id = self.dataset.id if isinstance(self.dataset, Dataset) else str(self.dataset)
        if matrix is None:
            return dataset_id
        info = client.get_dataset(dataset_id)
        n, d = matrix.shape
        if info.n_features is not None and d != info.n_features:
            raise InvalidInput(f"X has {d} features, but dataset {dataset_id} has {info.n_features} features.", field="X")
        fits_all = (
            f"fit() on dataset= fits all the rows of dataset {dataset_id}, so X must be exactly those rows "
            "(in any order). Call fit() without X to fit the dataset, or fit(X) without dataset= to "
            "fit X as a dataset of its own."
        )
        upload = REGISTRY.upload(dataset_id)
        if upload is not None:
            if upload.n_samples != n or upload.digest != digest(fingerprints(matrix), d):
                raise InvalidInput(
                    f"X ({n} rows) is not the {upload.n_samples} rows this process uploaded to dataset "
                    f"{dataset_id}. {fits_all}",
                    field="X",
                )
        elif info.n_samples is not None:
            if n != info.n_samples:
                raise InvalidInput(f"X has {n} rows, but dataset {dataset_id} has {info.n_samples}. {fits_all}", field="X")
        else:
            raise InvalidInput(
                f"X cannot be checked against dataset {dataset_id}: this process did not upload it and "
                f"its row count is private ({info.relation}). {fits_all}",
                field="X",
            )
        return dataset_id

    # -- forecast -------------------------------------------------------------------------

    @overload
    def forecast(
        self,
        *,
        scenario: ScenarioLike,
        n_samples: int | None = None,
        n_features: int | None = None,
        target: None = None,
    ) -> Forecast: ...

    @overload
    def forecast(
        self,
        *,
        scenario: ScenarioLike,
        n_samples: int | None = None,
        n_features: int | None = None,
        target: TargetLike,
    ) -> tuple[Forecast, Needed]: ...

    def forecast(
        self,
        *,
        scenario: ScenarioLike,
        n_samples: int | None = None,
        n_features: int | None = None,
        target: TargetLike | None = None,
    ) -> Forecast | tuple[Forecast, Needed]:
        """What ``fit`` would capture, forecast by the service before anything is uploaded or
        spent (``POST /v1/privacy/plan`` with a scenario; free).

        The job is this estimator's: ``algorithm``, ``params`` with ``k = n_components``, and
        the privacy ``rho`` or ``epsilon``/``delta``, run on records drawn from ``scenario`` (a
        :class:`privpca.Scenario` or ``{"eigenvalues": [...], "noise_floor": f}``) and clipped
        as the upload would clip them:

        - without ``dataset``: on the shape ``fit(X)`` would upload, ``n_samples`` ×
          ``n_features`` rows clipped to ``row_norm_bound`` (``replace_one``, as ``fit(X)``
          uploads); all three are needed, and so is the privacy;
        - with ``dataset``: on that dataset's public shape and bound (its n must be public,
          ``replace_one``); leave ``n_samples`` and ``n_features`` out. A job over its
          remaining budget forecasts 0 with the reason.

        Returns the :class:`privpca.Forecast` (``captured_energy``, ``interval``, the
        ``algorithm`` that would run, and a ``reason`` when the job would be refused or fail).
        With ``target`` (a captured energy in (0, 1), or ``{"captured_energy": y}``), returns
        the pair ``(forecast, needed)``, ``needed`` a :class:`privpca.Needed`: the least ρ (and
        ε at ``delta``, default 1e-6) reaching the target, per algorithm tried (this one, or
        ``auto``'s candidates)::

            fc = pca.forecast(n_samples=10_000, n_features=20, scenario=Scenario([4, 2], 0.1))
            fc, needed = pca.forecast(n_samples=10_000, n_features=20, scenario=..., target=0.9)
        """
        client = self._client()
        k = self._n_components()
        privacy = privacy_input(self.rho, self.epsilon, self.delta)
        params = {**dict(self.params or {}), "k": k}
        dataset_id: str | None = None
        data: DataShape | None = None
        if self.dataset is not None:
            dataset_id = self.dataset.id if isinstance(self.dataset, Dataset) else str(self.dataset)
            given = [name for name, v in (("n_samples", n_samples), ("n_features", n_features)) if v is not None]
            if given:
                raise InvalidInput(
                    f"this estimator fits dataset= {dataset_id}: the forecast uses its public shape, "
                    f"so leave {' and '.join(given)} out",
                    field=given[0],
                )
        else:
            if n_samples is None or n_features is None:
                missing = [name for name, v in (("n_samples", n_samples), ("n_features", n_features)) if v is None]
                raise InvalidInput(
                    f"forecasting the upload fit(X) would make needs its shape: give {' and '.join(missing)}",
                    field=missing[0],
                )
            if privacy is None:
                raise InvalidInput("fit(X) uploads X as a private dataset: give rho or epsilon/delta", field="rho")
            if self.row_norm_bound is None:
                raise InvalidInput("fit(X) uploads X as a private dataset: give row_norm_bound", field="row_norm_bound")
            data = DataShape(n_samples, n_features, _validation.positive(self.row_norm_bound, "row_norm_bound"))
        plan = client.plan(
            dataset_id=dataset_id,
            data=data,
            algorithm=self.algorithm,
            params=params,
            rho=self.rho,
            epsilon=self.epsilon,
            delta=self.delta,
            scenario=scenario,
            target=target,
        )
        if plan.forecast is None:
            raise PrivpcaError("the service answered a plan with a scenario without its forecast")
        if target is None:
            return plan.forecast
        if plan.needed is None:
            raise PrivpcaError("the service answered a plan with a target without what it needs")
        return plan.forecast, plan.needed

    # -- transform ------------------------------------------------------------------------

    def transform(self, X: Any) -> FloatArray:
        """Project X on the components: ``(X - mean_) @ components_.T``, shape (n, k)."""
        check_is_fitted(self, "components_")
        matrix = self._validate(X, reset=False)
        projected: FloatArray = (matrix - self.mean_) @ self.components_.T
        return projected

    def inverse_transform(self, X: Any) -> FloatArray:
        """Back to feature space: ``X @ components_ + mean_``, shape (n, d)."""
        check_is_fitted(self, "components_")
        scores = _validation.check_matrix(X, estimator=self)
        k = self.components_.shape[0]
        if scores.shape[1] != k:
            raise InvalidInput(f"X has {scores.shape[1]} features, but PrivatePCA has {k} components.", field="X")
        restored: FloatArray = scores @ self.components_ + self.mean_
        return restored

    # -- clean-up -------------------------------------------------------------------------

    def delete(self) -> list[str]:
        """Delete the datasets this estimator's ``fit(X)`` uploaded (their data; each ledger
        stays readable) and return their ids. Datasets given as ``dataset=`` are never
        touched. The fitted attributes stay usable: ``transform`` is local. ``with
        PrivatePCA(...) as pca:`` calls this on exit."""
        owned = self._owned()
        if not owned:
            return []
        client = self._client()
        deleted = []
        while owned:
            dataset_id = owned[0]
            try:
                client.delete_dataset(dataset_id)
            except NotFound:
                pass  # deleted already
            owned.pop(0)
            deleted.append(dataset_id)
        return deleted

    def _owned(self) -> list[str]:
        owned: list[str] | None = self.__dict__.get("_owned_datasets")
        if owned is None:
            owned = []
            self._owned_datasets = owned
        return owned

    def _delete_quietly(self, client: Client, dataset_id: str) -> None:
        try:
            client.delete_dataset(dataset_id)
        except Exception:  # noqa: BLE001 - the fit's own error is the one to raise
            return
        if dataset_id in self._owned():
            self._owned().remove(dataset_id)

    # -- helpers --------------------------------------------------------------------------

    def _client(self) -> Client:
        if self.client is None:
            raise InvalidInput("PrivatePCA needs a client=privpca.Client(base_url, api_key)", field="client")
        return self.client

    def _n_components(self) -> int:
        k = self.n_components
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise InvalidInput(f"n_components must be an integer >= 1, got {k!r}", field="n_components")
        return int(k)

    def _validate(self, X: Any, *, reset: bool) -> FloatArray:
        """X checked as scikit-learn's own estimators check it (``validate_data``: shape,
        dtype, finiteness, feature count and names), refusals as :class:`InvalidInput`."""
        _validation.check_index_column(X)
        finite = "ensure_all_finite" if _validate_data is not None else "force_all_finite"
        options: dict[str, Any] = {"accept_sparse": False, "dtype": np.float64, "ensure_min_samples": 1, finite: True}
        try:
            if _validate_data is not None:
                checked = _validate_data(self, X, reset=reset, **options)
            else:  # pragma: no cover - older scikit-learn
                checked = self._validate_data(X, reset=reset, **options)
        except InvalidInput:
            raise
        except ValueError as error:
            raise InvalidInput(str(error), field="X") from error
        matrix: FloatArray = np.asarray(checked, dtype=np.float64)
        return matrix


_ALTERNATIVES = (
    "Instead: fit PrivatePCA once on all the rows you mean to release (pca = PrivatePCA(...).fit(X)) "
    "and cross-validate the rest of the pipeline with that fit frozen, "
    "Pipeline([('pca', FrozenEstimator(pca)), ('clf', ...)]) (sklearn.frozen); or upload the rows once "
    "with Client.create_dataset and spend from its one ledger with PrivatePCA(dataset=ds.id).fit(); "
    "or, to release the same people again on purpose, pass on_overlap='warn'."
)


def _model_selection_caller() -> str | None:
    """The scikit-learn model-selection function this fit runs under, if any."""
    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if isinstance(module, str) and (module == MODEL_SELECTION or module.startswith(MODEL_SELECTION + ".")):
            return f"{module}.{frame.f_code.co_name}"
        frame = frame.f_back  # type: ignore[assignment]
    return None


def _union(releases: list[Release]) -> Any:
    return np.concatenate([r.prints for r in releases]) if releases else np.empty(0, dtype=np.uint64)


def _stated(privacy: Mapping[str, float]) -> str:
    if "epsilon" in privacy:
        return f"(epsilon = {privacy['epsilon']:g}, delta = {privacy['delta']:g})"
    return f"rho = {privacy['rho']:g}"


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    return repr(value)


def _flip_signs(components: FloatArray) -> FloatArray:
    """Each row's largest entry (in absolute value) made positive (scikit-learn's ``svd_flip``
    convention); post-processing that changes no subspace."""
    rows = np.array(components, dtype=np.float64)
    largest = np.argmax(np.abs(rows), axis=1)
    signs = np.sign(rows[np.arange(rows.shape[0]), largest])
    signs[signs == 0] = 1.0
    flipped: FloatArray = rows * signs[:, None]
    return flipped
