"""A thin client over httpx for the privpca service, following ``openapi/openapi.json``.

Every call is one HTTP request (or a poll loop, for the ``wait_*`` methods). Answers become
the typed objects of :mod:`privpca.models`; problem documents become the exceptions of
:mod:`privpca.errors`. 429 and 503 answers are retried, waiting what ``Retry-After`` says.
Job submissions carry an ``Idempotency-Key`` (a fresh one per call unless given), so a retried
submission can never be charged twice.
"""

from __future__ import annotations

import email.utils
import io
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import httpx
import numpy as np
import numpy.typing as npt

from .errors import ApiError, JobFailed, WaitTimeout, from_problem
from .models import Dataset, Job, JobResult, Ledger, Plan, Study, StudyCreated, StudyResult

Polled = TypeVar("Polled", Job, Study)

#: Statuses retried after ``Retry-After`` (or a backoff when the answer has none).
RETRIED = frozenset({429, 503})

BudgetLike = float | Mapping[str, float] | tuple[float, float]


class Client:
    """A connection to one privpca service with one API key.

    ``Client(base_url, api_key)``. ``max_retries`` bounds the retries of a 429 or 503 answer
    and ``max_retry_wait`` the seconds waited before any one of them; past either the typed
    exception (``RateLimited``, ``Unavailable``, ``QueueFull``) is raised. ``transport`` is
    handed to httpx (tests use it to observe or fake the wire).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        max_retries: int = 5,
        max_retry_wait: float = 120.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait
        headers = {"User-Agent": "privpca-python"}
        if api_key is not None:
            headers["Authorization"] = f"Bearer {api_key}"
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # A client is a handle on a connection pool: copies (sklearn's `clone` deep-copies the
    # estimator's parameters) share it rather than duplicating sockets.
    def __copy__(self) -> Client:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Client:
        return self

    def __repr__(self) -> str:
        return f"Client({self.base_url!r})"

    # -- transport -------------------------------------------------------------------------

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request, retried on 429/503; an error answer raises its typed exception."""
        attempt = 0
        while True:
            response = self._http.request(method, path, **kwargs)
            if response.status_code < 400:
                return response
            error = _error(response)
            if response.status_code not in RETRIED or attempt >= self.max_retries:
                raise error
            wait = error.retry_after if error.retry_after is not None else min(0.5 * 2**attempt, 30.0)
            if wait > self.max_retry_wait:
                raise error
            time.sleep(wait)
            attempt += 1

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self.request(method, path, **kwargs).json()

    # -- service -------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """``GET /healthz``."""
        result: dict[str, Any] = self._json("GET", "/healthz")
        return result

    def algorithms(self) -> list[dict[str, Any]]:
        """``GET /v1/algorithms``: every algorithm with its parameter schema and privacy."""
        result: list[dict[str, Any]] = self._json("GET", "/v1/algorithms")
        return result

    def create_tenant(self, name: str) -> dict[str, Any]:
        """``POST /v1/tenants`` (the client's key must be the admin key). The answer holds the
        new tenant's ``api_key``, shown once."""
        result: dict[str, Any] = self._json("POST", "/v1/tenants", json={"name": name})
        return result

    def rotate_tenant_key(self, tenant_id: str) -> dict[str, Any]:
        """``POST /v1/tenants/{id}/api-key`` (admin key): a new ``api_key`` for the tenant, shown
        once; its previous key stops working (on other replicas within the service's key cache
        time, 1 s by default)."""
        result: dict[str, Any] = self._json("POST", f"/v1/tenants/{tenant_id}/api-key")
        return result

    def revoke_tenant_key(self, tenant_id: str) -> None:
        """``DELETE /v1/tenants/{id}/api-key`` (admin key): the tenant's key stops working and
        it has none until :meth:`rotate_tenant_key`."""
        self.request("DELETE", f"/v1/tenants/{tenant_id}/api-key")

    # -- datasets ------------------------------------------------------------------------

    def create_dataset(
        self,
        X: Any = None,
        *,
        name: str,
        row_norm_bound: float | None = None,
        budget: BudgetLike | None = None,
        public: bool = False,
        relation: str | None = None,
        kind: str = "records",
        row_l1_bound: float | None = None,
        entry_bound: float | None = None,
    ) -> Dataset:
        """Create a dataset and, when ``X`` is given, upload it.

        ``X`` is a 2-D numpy array or pandas DataFrame (uploaded as ``.npy``). ``budget`` is a
        ρ (a number), ``(epsilon, delta)``, or a ``BudgetInput`` mapping such as
        ``{"rho": 0.1, "delta": 1e-8}``; it is required unless ``public`` is true. The
        returned :class:`Dataset` has its ``id`` and budget state.
        """
        body: dict[str, Any] = {"name": name, "kind": kind, "public": public}
        optional = {
            "row_norm_bound": row_norm_bound,
            "relation": relation,
            "row_l1_bound": row_l1_bound,
            "entry_bound": entry_bound,
            "budget": None if budget is None else budget_input(budget),
        }
        body.update({k: v for k, v in optional.items() if v is not None})
        dataset = Dataset.parse(self._json("POST", "/v1/datasets", json=body))
        return dataset if X is None else self.upload(dataset.id, X)

    def upload(self, dataset_id: str, X: Any) -> Dataset:
        """``PUT /v1/datasets/{id}/data``: upload ``X`` (array or DataFrame) as ``.npy``."""
        headers = {"Content-Type": "application/x-npy"}
        raw = self._json("PUT", f"/v1/datasets/{dataset_id}/data", content=to_npy(X), headers=headers)
        return Dataset.parse(raw)

    def get_dataset(self, dataset_id: str) -> Dataset:
        """``GET /v1/datasets/{id}``: metadata and budget state (no statistics of the data)."""
        return Dataset.parse(self._json("GET", f"/v1/datasets/{dataset_id}"))

    def list_datasets(self) -> list[Dataset]:
        """``GET /v1/datasets``: this tenant's datasets."""
        return [Dataset.parse(d) for d in self._json("GET", "/v1/datasets")]

    def delete_dataset(self, dataset_id: str) -> Dataset:
        """Delete the data; the ledger stays readable."""
        return Dataset.parse(self._json("DELETE", f"/v1/datasets/{dataset_id}"))

    def ledger(self, dataset_id: str) -> Ledger:
        """``GET /v1/datasets/{id}/ledger``: every charge and refund, and the budget totals."""
        return Ledger.parse(self._json("GET", f"/v1/datasets/{dataset_id}/ledger"))

    # -- jobs ----------------------------------------------------------------------------

    def submit_job(
        self,
        dataset_id: str,
        algorithm: str = "auto",
        params: Mapping[str, Any] | None = None,
        *,
        rho: float | None = None,
        epsilon: float | None = None,
        delta: float | None = None,
        seed: int | None = None,
        idempotency_key: str | None = None,
    ) -> Job:
        """``POST /v1/jobs``. Privacy is ``rho`` (optionally with ``delta``) or
        ``epsilon``/``delta``; on a public dataset it may be left out."""
        body: dict[str, Any] = {"dataset_id": dataset_id, "algorithm": algorithm, "params": dict(params or {})}
        privacy = privacy_input(rho, epsilon, delta)
        if privacy is not None:
            body["privacy"] = privacy
        if seed is not None:
            body["seed"] = seed
        headers = {"Idempotency-Key": idempotency_key or str(uuid.uuid4())}
        return Job.parse(self._json("POST", "/v1/jobs", json=body, headers=headers))

    def get_job(self, job_id: str) -> Job:
        """``GET /v1/jobs/{id}``: status, progress, cost."""
        return Job.parse(self._json("GET", f"/v1/jobs/{job_id}"))

    def list_jobs(self, dataset_id: str | None = None) -> list[Job]:
        """``GET /v1/jobs``: this tenant's jobs, or one dataset's."""
        params = {} if dataset_id is None else {"dataset_id": dataset_id}
        return [Job.parse(j) for j in self._json("GET", "/v1/jobs", params=params)]

    def cancel_job(self, job_id: str) -> Job:
        """Cancel a job; one cancelled before it started is refunded."""
        return Job.parse(self._json("DELETE", f"/v1/jobs/{job_id}"))

    def wait(
        self, job_id: str, *, timeout: float | None = None, poll_interval: float = 0.2, progress: bool = False
    ) -> Job:
        """Poll a job until it is terminal; :class:`~privpca.errors.JobFailed` unless it
        succeeded. ``progress=True`` shows a tqdm bar of the job's steps."""
        return _poll(lambda: self.get_job(job_id), timeout, poll_interval, progress, f"job {job_id[:8]}")

    def result(self, job_id: str) -> JobResult:
        """``GET /v1/jobs/{id}/result``: the basis as a numpy array, eigenvalues, cost."""
        return JobResult.parse(self._json("GET", f"/v1/jobs/{job_id}/result"))

    def run(self, *submit: Any, progress: bool = False, timeout: float | None = None, **options: Any) -> JobResult:
        """Submit a job (:meth:`submit_job`'s arguments), wait for it and fetch its result."""
        job = self.submit_job(*submit, **options)
        self.wait(job.id, progress=progress, timeout=timeout)
        return self.result(job.id)

    def plan(
        self,
        *,
        dataset_id: str | None = None,
        algorithm: str | None = None,
        params: Mapping[str, Any] | None = None,
        rho: float | None = None,
        epsilon: float | None = None,
        delta: float | None = None,
        display_delta: float | None = None,
    ) -> Plan:
        """``POST /v1/privacy/plan``: the requested privacy under both conversions and, with
        ``algorithm`` and ``dataset_id``, what the job would cost and whether it fits."""
        optional = {
            "dataset_id": dataset_id,
            "algorithm": algorithm,
            "params": None if params is None else dict(params),
            "privacy": privacy_input(rho, epsilon, delta),
            "display_delta": display_delta,
        }
        body = {k: v for k, v in optional.items() if v is not None}
        return Plan.parse(self._json("POST", "/v1/privacy/plan", json=body))

    # -- studies -------------------------------------------------------------------------

    def create_study(
        self,
        *,
        name: str,
        algorithm: str,
        n_features: int,
        sites: Sequence[str | Mapping[str, Any]],
        row_norm_bound: float,
        relation: str = "replace_one",
        rho: float | None = None,
        epsilon: float | None = None,
        delta: float | None = None,
        params: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> StudyCreated:
        """``POST /v1/studies``. ``sites`` are names or ``CreateStudySite`` mappings; other
        ``CreateStudy`` members (``threshold``, ``join_timeout_seconds``, …) pass as
        keywords. The answer holds each site's token (shown once)."""
        body: dict[str, Any] = {
            "name": name,
            "algorithm": algorithm,
            "n_features": n_features,
            "relation": relation,
            "row_norm_bound": row_norm_bound,
            "privacy": privacy_input(rho, epsilon, delta),
            "sites": [{"name": s} if isinstance(s, str) else dict(s) for s in sites],
            "params": dict(params or {}),
        }
        body.update({k: v for k, v in options.items() if v is not None})
        return StudyCreated.parse(self._json("POST", "/v1/studies", json=body))

    def get_study(self, study_id: str) -> Study:
        """``GET /v1/studies/{id}``: status, progress (rounds done of the total), cost; the
        sites and rounds are in ``raw``."""
        return Study.parse(self._json("GET", f"/v1/studies/{study_id}"))

    def list_studies(self) -> list[Study]:
        """``GET /v1/studies``: this tenant's studies."""
        return [Study.parse(s) for s in self._json("GET", "/v1/studies")]

    def cancel_study(self, study_id: str) -> Study:
        """``DELETE /v1/studies/{id}``: cancel a study that has not finished."""
        return Study.parse(self._json("DELETE", f"/v1/studies/{study_id}"))

    def wait_study(
        self, study_id: str, *, timeout: float | None = None, poll_interval: float = 0.5, progress: bool = False
    ) -> Study:
        """Poll a study until it is terminal, as :meth:`wait` does for jobs."""
        return _poll(lambda: self.get_study(study_id), timeout, poll_interval, progress, f"study {study_id[:8]}")

    def study_result(self, study_id: str) -> StudyResult:
        """``GET /v1/studies/{id}/result``: the basis, survivors and cost of a succeeded study."""
        return StudyResult.parse(self._json("GET", f"/v1/studies/{study_id}/result"))


def budget_input(budget: BudgetLike) -> dict[str, float]:
    """A ``BudgetInput``: a number is ρ, a pair is (ε, δ), a mapping passes as it is."""
    if isinstance(budget, Mapping):
        return dict(budget)
    if isinstance(budget, tuple):
        epsilon, delta = budget
        return {"epsilon": float(epsilon), "delta": float(delta)}
    return {"rho": float(budget)}


def privacy_input(rho: float | None, epsilon: float | None, delta: float | None) -> dict[str, float] | None:
    """A ``PrivacyInput`` from ``rho`` (with an optional ``delta``) or ``epsilon`` and
    ``delta``; ``None`` when nothing is given."""
    if rho is not None and epsilon is not None:
        raise ValueError("give either rho or epsilon/delta, not both")
    if epsilon is not None:
        if delta is None:
            raise ValueError("epsilon needs delta")
        return {"epsilon": float(epsilon), "delta": float(delta)}
    if rho is not None:
        return {"rho": float(rho)} if delta is None else {"rho": float(rho), "delta": float(delta)}
    if delta is not None:
        raise ValueError("delta alone is not a privacy target: give rho or epsilon too")
    return None


def as_matrix(X: Any) -> npt.NDArray[np.float64]:
    """A 2-D float64 array from an array-like or a DataFrame."""
    matrix = np.asarray(X.to_numpy(dtype=np.float64) if hasattr(X, "to_numpy") else X, dtype=np.float64)
    if matrix.ndim != 2:
        raise ValueError(f"expected a 2-D array (n samples × d features), got {matrix.ndim}-D")
    return matrix


def to_npy(X: Any) -> bytes:
    """``X`` as the bytes of a little-endian float64, C-order ``.npy`` file."""
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(as_matrix(X), dtype="<f8"), allow_pickle=False)
    return buffer.getvalue()


def _error(response: httpx.Response) -> ApiError:
    try:
        problem = response.json()
    except ValueError:
        problem = None
    if not isinstance(problem, dict):
        problem = {"status": response.status_code, "title": response.reason_phrase, "detail": response.text}
    return from_problem(problem, response.status_code, _retry_after(response.headers.get("Retry-After")))


def _retry_after(value: str | None) -> float | None:
    """``Retry-After`` in seconds: delta-seconds or an HTTP date."""
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def _poll(get: Callable[[], Polled], timeout: float | None, interval: float, progress: bool, label: str) -> Polled:
    """Calls ``get`` until its answer is finished; raises unless it succeeded."""
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(desc=label, total=None, unit="step")
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            item = get()
            if bar is not None and item.progress is not None:
                bar.total = item.progress.total
                bar.n = item.progress.done
                bar.set_postfix_str(item.status)
                bar.refresh()
            if item.finished:
                break
            if deadline is not None and time.monotonic() > deadline:
                raise WaitTimeout(f"{label} still {item.status} after {timeout} s")
            time.sleep(interval)
    finally:
        if bar is not None:
            bar.close()
    if item.status != "succeeded":
        raise JobFailed(item)
    return item
