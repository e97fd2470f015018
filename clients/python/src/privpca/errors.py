"""Typed exceptions for the service's problem documents (RFC 9457).

Every error answer of the service is a problem document whose ``type`` is
``urn:privpca:problem:<slug>``; :func:`from_problem` turns it into the exception class named
after that slug (``over-budget`` → :class:`BudgetExceeded`, ``not-found`` → :class:`NotFound`,
…). A slug this client does not know yet becomes a plain :class:`ApiError`.
"""

from __future__ import annotations

from typing import Any

PROBLEM_PREFIX = "urn:privpca:problem:"


class PrivpcaError(Exception):
    """Base class of every error this package raises."""


class ApiError(PrivpcaError):
    """A problem document the service answered with.

    Attributes mirror the document: ``status``, ``type`` (the full URN), ``title``,
    ``detail``, ``field`` (the offending field, when there is one) and ``problem`` (the whole
    document, extension members included). ``retry_after`` is the ``Retry-After`` header in
    seconds, when the answer had one.
    """

    slug: str | None = None

    def __init__(self, problem: dict[str, Any], status: int, retry_after: float | None = None):
        self.problem = problem
        self.status = int(problem.get("status", status))
        self.type = str(problem.get("type", ""))
        self.title = str(problem.get("title", ""))
        self.detail = str(problem.get("detail", ""))
        field = problem.get("field")
        self.field: str | None = None if field is None else str(field)
        self.retry_after = retry_after
        super().__init__(f"{self.status} {self.title}: {self.detail}")


class MalformedRequest(ApiError):
    slug = "malformed-request"


class ValidationError(ApiError, ValueError):
    """A field has an invalid value; ``field`` names it (a dotted path) when the service does.
    Also a ``ValueError``, as scikit-learn expects of a refused input."""

    slug = "validation-error"


class Unauthorized(ApiError):
    slug = "unauthorized"


class Forbidden(ApiError):
    slug = "forbidden"


class NotFound(ApiError):
    slug = "not-found"


class MethodNotAllowed(ApiError):
    slug = "method-not-allowed"


class NotAcceptable(ApiError):
    slug = "not-acceptable"


class BudgetExceeded(ApiError):
    """The job would spend more than the dataset's remaining budget.

    ``remaining`` and ``requested`` are the ρ amounts (``remaining_delta`` and
    ``requested_delta`` the approximate-DP δ ones). A study refused for a site's budget names
    the site in ``field`` and carries no amounts (they are ``None``).
    """

    slug = "over-budget"

    def __init__(self, problem: dict[str, Any], status: int, retry_after: float | None = None):
        super().__init__(problem, status, retry_after)
        self.remaining = _number(problem.get("remaining_rho"))
        self.requested = _number(problem.get("requested_rho"))
        self.remaining_delta = _number(problem.get("remaining_delta"))
        self.requested_delta = _number(problem.get("requested_delta"))
        dataset = problem.get("dataset_id")
        self.dataset_id: str | None = None if dataset is None else str(dataset)


class Conflict(ApiError):
    slug = "conflict"


class IdempotencyKeyReused(ApiError):
    slug = "idempotency-key-reused"


class AlreadyReceived(ApiError):
    slug = "already-received"


class PayloadTooLarge(ApiError):
    slug = "payload-too-large"


class UnsupportedMediaType(ApiError):
    slug = "unsupported-media-type"


class QueueFull(ApiError):
    slug = "queue-full"


class RateLimited(ApiError):
    """Over the tenant's rate limit (429). The client retries these; this is raised when the
    retries ran out."""

    slug = "rate-limited"


class RequestTimeout(ApiError):
    slug = "timeout"


class Unavailable(ApiError):
    slug = "unavailable"


class InternalError(ApiError):
    slug = "internal-error"


class ReceiptError(PrivpcaError):
    """A receipt, signed checkpoint, verifier key or proof of the transparency log does not
    verify; the message says what failed (a signature, the inclusion proof, a malformed
    checkpoint, …). Raised by :meth:`privpca.Receipt.verify` and :meth:`privpca.Client.witness`."""


class LogRewrittenError(ReceiptError):
    """A log is not an append-only extension of the checkpoint a witness saw before: the
    consistency proof fails, the log shrank, its origin changed, or the service itself reported
    the log as tampered (:class:`LedgerLogTampered`). Evidence that the history was rewritten
    (or that the witness was shown a fork); the saved checkpoint is kept."""


class LedgerLogTampered(ApiError, LogRewrittenError):
    """The service refused to serve or sign a log (409, ``ledger-log-tampered``): its ledger
    rows and the log's leaves disagree, e.g. a past charge edited in the database. The problem
    document's ``log`` member names the log (``datasets/<id>``)."""

    slug = "ledger-log-tampered"

    def __init__(self, problem: dict[str, Any], status: int, retry_after: float | None = None):
        super().__init__(problem, status, retry_after)
        log = problem.get("log")
        self.log: str | None = None if log is None else str(log)


class JobFailed(PrivpcaError):
    """A job (or study) ended ``failed`` or ``cancelled``; ``job`` is its last state."""

    def __init__(self, job: Any):
        self.job = job
        super().__init__(f"{job.id} ended {job.status}: {job.error or 'no reason given'}")


class WaitTimeout(PrivpcaError):
    """Waiting for a job or study took longer than the caller allowed."""


class InvalidInput(PrivpcaError, ValueError):
    """An argument refused by the client before any request: a bad matrix (1-D, empty, NaN,
    infinity, complex, strings: scikit-learn's wording when it is installed) or a setting the
    service would refuse. ``field`` names the argument when there is one. Nothing was created
    on the service."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


class RepeatedFitError(PrivpcaError, ValueError):
    """``PrivatePCA.fit(X)`` refused to release the same people a second time.

    Raised before anything is uploaded, when X shares rows with a private release this process
    already made under other settings, or when the fit runs inside scikit-learn's model
    selection (``cross_val_score``, ``GridSearchCV``, …), where every fold would be a new
    dataset with a fresh budget. ``overlap`` is the number of X's rows already released (0 in
    the model-selection case) and ``previous`` the earlier releases' ``(dataset_id, job_id,
    rho)``."""

    def __init__(self, message: str, overlap: int = 0, previous: tuple[tuple[str, str, float], ...] = ()):
        super().__init__(message)
        self.overlap = overlap
        self.previous = previous


class PrivacySpendWarning(UserWarning):
    """A fit released people who were already in an earlier release, because the estimator
    was told to (``on_overlap="warn"``); the message states their total spend."""


_BY_SLUG: dict[str, type[ApiError]] = {
    cls.slug: cls
    for cls in (
        MalformedRequest,
        ValidationError,
        Unauthorized,
        Forbidden,
        NotFound,
        MethodNotAllowed,
        NotAcceptable,
        BudgetExceeded,
        Conflict,
        LedgerLogTampered,
        IdempotencyKeyReused,
        AlreadyReceived,
        PayloadTooLarge,
        UnsupportedMediaType,
        QueueFull,
        RateLimited,
        RequestTimeout,
        Unavailable,
        InternalError,
    )
    if cls.slug is not None
}


def from_problem(problem: dict[str, Any], status: int, retry_after: float | None = None) -> ApiError:
    """The exception for a problem document: the class named after its ``type``."""
    type_ = str(problem.get("type", ""))
    slug = type_[len(PROBLEM_PREFIX) :] if type_.startswith(PROBLEM_PREFIX) else ""
    return _BY_SLUG.get(slug, ApiError)(problem, status, retry_after)


def _number(value: Any) -> float | None:
    return None if value is None else float(value)
