"""privpca: a Python client for the privpca service (private PCA as a service).

``privpca.Client`` covers the whole API (datasets, jobs, the ledger, ``plan``, studies) and
``privpca.PrivatePCA`` is a scikit-learn estimator backed by it (needs the ``sklearn`` extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .client import Client
from .errors import (
    AlreadyReceived,
    ApiError,
    BudgetExceeded,
    Conflict,
    Forbidden,
    IdempotencyKeyReused,
    InternalError,
    InvalidInput,
    JobFailed,
    MalformedRequest,
    MethodNotAllowed,
    NotAcceptable,
    NotFound,
    PayloadTooLarge,
    PrivacySpendWarning,
    PrivpcaError,
    QueueFull,
    RateLimited,
    RepeatedFitError,
    RequestTimeout,
    Unauthorized,
    Unavailable,
    UnsupportedMediaType,
    ValidationError,
    WaitTimeout,
)
from .models import (
    Budget,
    Dataset,
    Job,
    JobResult,
    Ledger,
    LedgerEntry,
    Plan,
    PrivacyAmount,
    Progress,
    Study,
    StudyCreated,
    StudyResult,
)

if TYPE_CHECKING:
    from .estimator import PrivatePCA

__version__ = "0.1.0"

__all__ = [
    "AlreadyReceived",
    "ApiError",
    "Budget",
    "BudgetExceeded",
    "Client",
    "Conflict",
    "Dataset",
    "Forbidden",
    "IdempotencyKeyReused",
    "InternalError",
    "InvalidInput",
    "Job",
    "JobFailed",
    "JobResult",
    "Ledger",
    "LedgerEntry",
    "MalformedRequest",
    "MethodNotAllowed",
    "NotAcceptable",
    "NotFound",
    "PayloadTooLarge",
    "Plan",
    "PrivacyAmount",
    "PrivacySpendWarning",
    "PrivatePCA",
    "PrivpcaError",
    "Progress",
    "QueueFull",
    "RateLimited",
    "RepeatedFitError",
    "RequestTimeout",
    "Study",
    "StudyCreated",
    "StudyResult",
    "Unauthorized",
    "Unavailable",
    "UnsupportedMediaType",
    "ValidationError",
    "WaitTimeout",
]


def __getattr__(name: str) -> Any:
    # The estimator needs scikit-learn, an optional extra: imported on first use only.
    if name == "PrivatePCA":
        try:
            from .estimator import PrivatePCA
        except ModuleNotFoundError as missing:
            if missing.name is None or not missing.name.startswith("sklearn"):
                raise
            raise ModuleNotFoundError(
                "privpca.PrivatePCA needs scikit-learn: pip install './clients/python[sklearn]'", name=missing.name
            ) from missing
        return PrivatePCA
    raise AttributeError(f"module 'privpca' has no attribute {name!r}")
