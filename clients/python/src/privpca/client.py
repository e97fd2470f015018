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
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import httpx
import numpy as np
import numpy.typing as npt

from . import _validation, _witness
from ._forecast import DataLike, ScenarioLike, TargetLike, data_input, scenario_input, target_input
from ._releases import REGISTRY
from ._witness import Witnessed
from .errors import ApiError, InvalidInput, JobFailed, LogRewrittenError, ReceiptError, WaitTimeout, from_problem
from .models import Dataset, Job, JobResult, Ledger, Plan, Study, StudyCreated, StudyResult
from .transparency import Checkpoint, VerifierKey, verify_extension

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
        self._api_key = api_key
        self._timeout = timeout
        self._transport = transport
        self._lock = threading.Lock()
        self._connection: httpx.Client | None = None
        self._ledger_key: str | None = None

    @property
    def _http(self) -> httpx.Client:
        """The connection pool, opened on first use (again after :meth:`close` or unpickling)."""
        with self._lock:
            if self._connection is None or self._connection.is_closed:
                headers = {"User-Agent": "privpca-python"}
                if self._api_key is not None:
                    headers["Authorization"] = f"Bearer {self._api_key}"
                self._connection = httpx.Client(
                    base_url=self.base_url, headers=headers, timeout=self._timeout, transport=self._transport
                )
            return self._connection

    def close(self) -> None:
        """Close the connection pool; a later call opens a new one."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

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

    # Pickled (joblib.dump of a fitted estimator, joblib workers) as its settings: the base
    # URL, the API key, timeouts and retries. No socket, lock or custom transport: the copy
    # opens its own pool on first use. The pickle holds the API key: keep it as private as the key.
    def __getstate__(self) -> dict[str, Any]:
        return {
            "base_url": self.base_url,
            "api_key": self._api_key,
            "timeout": self._timeout,
            "max_retries": self.max_retries,
            "max_retry_wait": self.max_retry_wait,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(  # type: ignore[misc]
            state["base_url"],
            state["api_key"],
            timeout=state["timeout"],
            max_retries=state["max_retries"],
            max_retry_wait=state["max_retry_wait"],
        )

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

        ``X`` is a 2-D numpy array or pandas DataFrame (uploaded as ``.npy``, never with an
        index column). ``budget`` is a ρ (a number), ``(epsilon, delta)``, or a
        ``BudgetInput`` mapping such as ``{"rho": 0.1, "delta": 1e-8}``; it is required unless
        ``public`` is true. The returned :class:`Dataset` has its ``id`` and budget state.

        Everything is checked before anything is created: a bad ``X`` (1-D, empty, NaN,
        infinity, complex, strings, a pandas index column) or setting raises
        :class:`~privpca.InvalidInput` (a ``ValueError``) and the service holds nothing new. If
        the upload fails after the dataset was created, the dataset is deleted and the upload's
        exception is raised with ``dataset_id`` and ``dataset_deleted`` set and its message
        saying which (the id to delete by hand when the deletion failed too).
        """
        body = dataset_body(
            name=name,
            row_norm_bound=row_norm_bound,
            budget=budget,
            public=public,
            relation=relation,
            kind=kind,
            row_l1_bound=row_l1_bound,
            entry_bound=entry_bound,
        )
        matrix = None if X is None else _validation.check_matrix(X)
        dataset = Dataset.parse(self._json("POST", "/v1/datasets", json=body))
        if matrix is None:
            return dataset
        try:
            return self._upload_checked(dataset.id, matrix)
        except BaseException as error:
            self._discard(dataset.id, error)
            raise

    def _discard(self, dataset_id: str, error: BaseException) -> None:
        """Deletes a dataset whose upload failed and says so in the upload's exception."""
        try:
            self.delete_dataset(dataset_id)
        except Exception as failed:  # noqa: BLE001 - reported in the message instead
            outcome = f"dataset {dataset_id} was created but could not be deleted ({failed}): delete it with Client.delete_dataset({dataset_id!r})"
            deleted = False
        else:
            outcome = f"the dataset it created ({dataset_id}) was deleted, so nothing is left on the service"
            deleted = True
        setattr(error, "dataset_id", dataset_id)
        setattr(error, "dataset_deleted", deleted)
        message = f"{error.args[0] if error.args else error}; upload failed: {outcome}"
        error.args = (message, *error.args[1:])

    def upload(self, dataset_id: str, X: Any) -> Dataset:
        """``PUT /v1/datasets/{id}/data``: upload ``X`` (array or DataFrame) as ``.npy``.
        ``X`` is checked first, as :meth:`create_dataset` does."""
        return self._upload_checked(dataset_id, _validation.check_matrix(X))

    def _upload_checked(self, dataset_id: str, matrix: npt.NDArray[np.float64]) -> Dataset:
        headers = {"Content-Type": "application/x-npy"}
        raw = self._json("PUT", f"/v1/datasets/{dataset_id}/data", content=_npy(matrix), headers=headers)
        REGISTRY.uploaded(dataset_id, matrix)
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

    # -- the transparency log -------------------------------------------------------------

    def ledger_key(self) -> str:
        """``GET /v1/ledger-key``: the service's verifier key (a C2SP signed-note key,
        ``<name>+<key ID>+<base64 Ed25519 key>``), the same string it prints at start.
        Fetched once per client. Check receipts with it (``job.receipt.verify(key)``); compare
        it out of band with the one the operator publishes, since a key fetched from the
        service itself only proves what that service says."""
        if self._ledger_key is None:
            key = self._json("GET", "/v1/ledger-key")["verifier_key"]
            VerifierKey.parse(key)
            self._ledger_key = str(key)
        return self._ledger_key

    def witness(
        self,
        dataset_id: str,
        state_file: str | os.PathLike[str] | None = None,
        *,
        public_key: str | None = None,
    ) -> Witnessed:
        """Witness a dataset's transparency log: check that it only grew since the last time.

        Fetches the log's signed checkpoint (``GET /v1/datasets/{id}/ledger/checkpoint``) and
        checks its Ed25519 signature and that it is this dataset's log. If ``state_file``
        (default ``$PRIVPCA_WITNESS_FILE`` or ``~/.privpca/witness.json``) holds a checkpoint
        this witness verified before for this service (base URL) and dataset, fetches the
        consistency proof between the two (``…/ledger/consistency?from=OLD&to=NEW``) and checks
        it (RFC 9162 §2.1.4.2): every earlier entry is still there, unchanged and in order.
        Only then is the new checkpoint saved (atomically), and returned with the previous size.

        **Trust on first use.** The verifier key is ``public_key`` when given; otherwise the one
        pinned in the state file for this service; otherwise (the first use) the one the
        service serves at ``GET /v1/ledger-key``, which is then pinned. A service that lies
        from that first answer on is not caught by the key: pass ``public_key`` as the operator
        published it, or compare the pinned one out of band. A pinned key that differs from
        ``public_key``, or a checkpoint not signed by the pinned key (say after a key
        rotation), raises :class:`~privpca.ReceiptError`: check the new key, then edit or move
        the state file.

        Raises :class:`~privpca.LogRewrittenError` if the consistency proof fails, the log
        shrank, its origin changed, or the service refuses the log as tampered (a 409
        ``ledger-log-tampered``, :class:`~privpca.LedgerLogTampered`, also a
        ``LogRewrittenError``); :class:`~privpca.ReceiptError` for a signature that does not
        verify, or a saved checkpoint that no longer does (the state file was edited). The
        saved checkpoint is left as it was whenever anything fails. Two witnesses writing one
        state file at the same moment may lose one of their updates (never corrupt the file)."""
        return self._witness(f"datasets/{dataset_id}", f"/v1/datasets/{dataset_id}/ledger", state_file, public_key)

    def witness_study(
        self,
        study_id: str,
        state_file: str | os.PathLike[str] | None = None,
        *,
        public_key: str | None = None,
    ) -> Witnessed:
        """:meth:`witness` for a study's log (``/v1/studies/{id}/ledger/checkpoint`` and
        ``…/consistency``), kept in the same state file."""
        return self._witness(f"studies/{study_id}", f"/v1/studies/{study_id}/ledger", state_file, public_key)

    def _witness(
        self, log: str, prefix: str, state_file: str | os.PathLike[str] | None, public_key: str | None
    ) -> Witnessed:
        path = _witness.state_path(state_file)
        saved = _witness.service(_witness.load(path), self.base_url)
        pinned = saved.get("verifier_key")
        if public_key is not None and pinned is not None and VerifierKey.parse(pinned) != VerifierKey.parse(public_key):
            raise ReceiptError(
                f"{path} pins the verifier key {pinned!r} for {self.base_url}, not {public_key!r}: "
                "check the new key with the operator, then remove the old one from the file"
            )
        key_text = public_key or (str(pinned) if pinned is not None else self.ledger_key())
        key = VerifierKey.parse(key_text)

        note = self._json("GET", f"{prefix}/checkpoint")["checkpoint"]
        try:
            new = Checkpoint.verify(note, key)
        except ReceiptError as e:
            hint = " (the pinned key: if the operator rotated it, check the new one and update the state file)" if pinned is not None else ""
            raise ReceiptError(f"the checkpoint of {log} does not verify with {key.name}+{key.key_id:08x}{hint}: {e}") from None
        if not new.origin.endswith(f"/{log}"):
            raise ReceiptError(f"asked for the log {log}, the service signed a checkpoint of {new.origin!r}")

        previous_note = saved.get("logs", {}).get(log)
        previous: Checkpoint | None = None
        if previous_note is not None:
            try:
                previous = Checkpoint.verify(previous_note, key)
            except ReceiptError as e:
                raise ReceiptError(
                    f"the checkpoint of {log} saved in {path} does not verify with the pinned key ({e}): "
                    "the state file was edited or damaged; nothing was checked and it was left as it is"
                ) from None
            if previous.origin != new.origin:
                raise LogRewrittenError(
                    f"the log's origin changed: {previous.origin!r} when this witness saw it last, {new.origin!r} now"
                )
            if new.size < previous.size:
                raise LogRewrittenError(
                    f"the log {new.origin} shrank: size {new.size} now, {previous.size} when this witness saw it last"
                )
            proof: list[str] = []
            if new.size > previous.size:
                query = {"from": previous.size, "to": new.size}
                proof = self._json("GET", f"{prefix}/consistency", params=query)["proof"]
            try:
                verify_extension(previous, new, proof)
            except LogRewrittenError as e:
                raise LogRewrittenError(
                    f"the log {new.origin} at size {new.size} does not extend the checkpoint of size "
                    f"{previous.size} this witness saw last ({path}): {e}"
                ) from None

        _witness.save(path, self.base_url, str(key), log, note)
        return Witnessed(
            log=log,
            origin=new.origin,
            size=new.size,
            root=new.root,
            previous_size=None if previous is None else previous.size,
            checkpoint=note,
            state_file=path,
        )

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
        data: DataLike | None = None,
        scenario: ScenarioLike | None = None,
        target: TargetLike | None = None,
        private_spectrum: float | None = None,
        spectrum_job: str | None = None,
        proxy_dataset: str | None = None,
    ) -> Plan:
        """``POST /v1/privacy/plan``: the requested privacy under both conversions and, with
        ``algorithm`` and ``dataset_id`` (or ``data``), what the job would cost and whether it
        fits. Reads no data and spends nothing.

        **Forecast.** With ``scenario`` (a :class:`~privpca.Scenario` or a mapping with
        ``eigenvalues`` and ``noise_floor``), the answer's ``forecast`` (a
        :class:`~privpca.Forecast`) is what the job (``algorithm``, default ``"auto"``;
        ``params`` such as ``{"k": 2}``; the privacy given) would capture on records drawn from
        that spectrum. It runs on ``data`` (a :class:`~privpca.DataShape` or a mapping of its
        fields: ``n_samples``, ``n_features``, ``row_norm_bound``, ``relation``), the public
        facts of a dataset not uploaded yet, or on ``dataset_id`` when that dataset's n is
        public. A job that would be refused or fail forecasts 0, with the reason. With
        ``target`` (the captured energy to reach, in (0, 1), or ``{"captured_energy": y}``),
        ``needed`` (a :class:`~privpca.Needed`) holds the least ρ (and ε at the plan's δ) that
        reaches it, per algorithm tried. Free: a forecast reads and charges nothing.

        **Paid private spectrum.** Instead of ``scenario``, on a ``dataset_id`` whose n is
        public: ``private_spectrum=0.05`` spends that share of the job's ρ (charged on the
        dataset's ledger as a job) on the dataset's noisy eigenvalues and forecasts from them;
        the answer's ``spectrum`` (a :class:`~privpca.SpectrumRelease`) says what was paid.
        ``spectrum_job=<its job_id>`` forecasts again from that release for free.

        **Other scenarios, free.** ``scenario`` may also be a mapping with ``decay`` (``{"model":
        "geometric" | "power_law", "top": λ₁, "rate": r, "count": m}``) and ``noise_floor``;
        ``proxy_dataset=<id>`` forecasts from the exact spectrum of one of your public records
        datasets with the same number of features (``plan.raw["proxy"]`` names what it read).

        Values the service refuses (an eigenvalue < 0, too many features, a target outside
        (0, 1), a target without a scenario, …) raise :class:`~privpca.ValidationError` (422)
        with ``field`` naming them; what is not a number at all is refused before any request
        (:class:`~privpca.InvalidInput`).
        """
        optional = {
            "dataset_id": dataset_id,
            "algorithm": algorithm,
            "params": None if params is None else dict(params),
            "privacy": privacy_input(rho, epsilon, delta),
            "display_delta": display_delta,
            "data": None if data is None else data_input(data),
            "scenario": _scenario_of(scenario, private_spectrum, spectrum_job, proxy_dataset),
            "target": None if target is None else target_input(target),
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


def dataset_body(
    *,
    name: str,
    row_norm_bound: float | None,
    budget: BudgetLike | None,
    public: bool,
    relation: str | None,
    kind: str,
    row_l1_bound: float | None,
    entry_bound: float | None,
) -> dict[str, Any]:
    """A ``CreateDataset`` body, checked as the service would check it (so a refusal comes
    before anything is created)."""
    body: dict[str, Any] = {"name": _validation.check_name(name), "kind": kind, "public": bool(public)}
    if kind not in _validation.KINDS:
        raise InvalidInput(f"kind must be one of {sorted(_validation.KINDS)}, got {kind!r}", field="kind")
    if relation is not None:
        if relation not in _validation.KINDS[kind]:
            raise InvalidInput(f"relation of a {kind} dataset must be one of {list(_validation.KINDS[kind])}, got {relation!r}", field="relation")
        body["relation"] = relation
    if kind == "records":
        if row_norm_bound is None:
            raise InvalidInput("a records dataset needs row_norm_bound (every row is clipped to this L2 norm)", field="row_norm_bound")
        body["row_norm_bound"] = _validation.positive(row_norm_bound, "row_norm_bound")
        if row_l1_bound is not None:
            body["row_l1_bound"] = _validation.positive(row_l1_bound, "row_l1_bound")
        if entry_bound is not None:
            raise InvalidInput("entry_bound is for matrix datasets only", field="entry_bound")
    else:
        for field, value in (("row_norm_bound", row_norm_bound), ("row_l1_bound", row_l1_bound)):
            if value is not None:
                raise InvalidInput(f"{field} is for records datasets only", field=field)
        if entry_bound is not None:
            body["entry_bound"] = _validation.positive(entry_bound, "entry_bound")
    if public:
        if budget is not None:
            raise InvalidInput("a public dataset has no budget: leave budget out", field="budget")
    elif budget is None:
        raise InvalidInput("a private dataset needs a budget: a rho, (epsilon, delta) or a mapping", field="budget")
    else:
        body["budget"] = budget_input(budget)
    return body


def budget_input(budget: BudgetLike) -> dict[str, float]:
    """A ``BudgetInput``: a number is ρ, a pair is (ε, δ), a mapping passes as it is; checked
    against the contract's ranges."""
    if isinstance(budget, Mapping):
        raw = dict(budget)
    elif isinstance(budget, tuple):
        if len(budget) != 2:
            raise InvalidInput(f"a budget pair is (epsilon, delta), got {budget!r}", field="budget")
        raw = {"epsilon": budget[0], "delta": budget[1]}
    else:
        raw = {"rho": budget}
    keys = set(raw)
    if keys not in ({"rho"}, {"rho", "delta"}, {"epsilon", "delta"}):
        raise InvalidInput(f"a budget is {{'rho'}}, {{'rho', 'delta'}} or {{'epsilon', 'delta'}}, got {sorted(keys)}", field="budget")
    checked = {k: _validation.positive(v, f"budget.{k}") for k, v in raw.items()}
    _within(checked, "rho", 1e-12, 1e6)
    _within(checked, "epsilon", 1e-3, 1e5)
    _within(checked, "delta", 0.0, 0.999999)
    return checked


def _within(values: Mapping[str, float], key: str, low: float, high: float) -> None:
    if key in values and not low <= values[key] <= high:
        raise InvalidInput(f"budget.{key} must be in [{low:g}, {high:g}], got {values[key]!r}", field=f"budget.{key}")


def privacy_input(rho: float | None, epsilon: float | None, delta: float | None) -> dict[str, float] | None:
    """A ``PrivacyInput`` from ``rho`` (with an optional ``delta``) or ``epsilon`` and
    ``delta``; ``None`` when nothing is given."""
    if rho is not None and epsilon is not None:
        raise InvalidInput("give either rho or epsilon/delta, not both", field="rho")
    if epsilon is not None:
        if delta is None:
            raise InvalidInput("epsilon needs delta", field="delta")
        return {"epsilon": _validation.positive(epsilon, "epsilon"), "delta": _validation.delta(delta, "delta")}
    if rho is not None:
        checked = {"rho": _validation.positive(rho, "rho")}
        return checked if delta is None else {**checked, "delta": _validation.delta(delta, "delta")}
    if delta is not None:
        raise InvalidInput("delta alone is not a privacy target: give rho or epsilon too", field="delta")
    return None


def as_matrix(X: Any) -> npt.NDArray[np.float64]:
    """A 2-D, finite, non-empty float64 array from an array-like or a DataFrame; refused in
    scikit-learn's words otherwise (:class:`~privpca.InvalidInput`)."""
    return _validation.check_matrix(X)


def to_npy(X: Any) -> bytes:
    """``X`` (checked as :func:`as_matrix` does) as the bytes of a little-endian float64,
    C-order ``.npy`` file. Only the values: a DataFrame's index is never written."""
    return _npy(as_matrix(X))


def _npy(matrix: npt.NDArray[np.float64]) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(matrix, dtype="<f8"), allow_pickle=False)
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


#: A job still running this long after the first poll gets a progress bar; a faster one gets
#: a single line when it ends (a bar drawn and redrawn within a second shows up twice in logs
#: and narrow terminals).
BAR_AFTER = 0.5


def _poll(get: Callable[[], Polled], timeout: float | None, interval: float, progress: bool, label: str) -> Polled:
    """Calls ``get`` until its answer is finished; raises unless it succeeded. With
    ``progress``, one line for a fast job, a tqdm bar for a slower one."""
    bar: Any = None
    started = time.monotonic()
    deadline = None if timeout is None else started + timeout
    try:
        while True:
            item = get()
            if progress and bar is None and not item.finished and time.monotonic() - started >= BAR_AFTER:
                from tqdm.auto import tqdm

                total = None if item.progress is None else item.progress.total
                bar = tqdm(desc=label, total=total, unit="step", postfix=item.status)
            if bar is not None:
                if item.progress is not None:
                    bar.total = item.progress.total
                    bar.set_postfix_str(item.status, refresh=False)
                    bar.update(item.progress.done - bar.n)
                else:
                    bar.set_postfix_str(item.status, refresh=False)
            if item.finished:
                break
            if deadline is not None and time.monotonic() > deadline:
                raise WaitTimeout(f"{label} still {item.status} after {timeout} s")
            time.sleep(interval)
    finally:
        if bar is not None:
            bar.close()
    if progress and bar is None:
        steps = "" if item.progress is None else f", {item.progress.done}/{item.progress.total} steps"
        print(f"{label}: {item.status}{steps} in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
    if item.status != "succeeded":
        raise JobFailed(item)
    return item


def _scenario_of(
    scenario: ScenarioLike | None,
    private_spectrum: float | None,
    spectrum_job: str | None,
    proxy_dataset: str | None = None,
) -> dict[str, Any] | None:
    """The request's ``scenario``: stated, a paid private spectrum, a reused one, or a public
    proxy dataset (one of them)."""
    given = [x is not None for x in (scenario, private_spectrum, spectrum_job, proxy_dataset)]
    if sum(given) > 1:
        raise InvalidInput(
            "give one of scenario, private_spectrum, spectrum_job and proxy_dataset", field="scenario"
        )
    if proxy_dataset is not None:
        return {"proxy_dataset": str(proxy_dataset)}
    if scenario is not None:
        return scenario_input(scenario)
    if private_spectrum is not None:
        if isinstance(private_spectrum, bool) or not isinstance(private_spectrum, (int, float)):
            raise InvalidInput(
                f"private_spectrum must be a share in (0, 1], got {private_spectrum!r}",
                field="scenario.private_spectrum.share",
            )
        return {"private_spectrum": {"share": float(private_spectrum)}}
    if spectrum_job is not None:
        return {"spectrum_job": str(spectrum_job)}
    return None
