"""privpca: a Python client for the privpca service (private PCA as a service).

``privpca.Client`` covers the whole API (datasets, jobs, the ledger and its transparency log,
``plan`` with its free utility forecast, studies), ``privpca.Receipt.verify`` checks a
release's receipt offline, ``privpca.PrivatePCA`` is a scikit-learn estimator backed by it
(needs the ``sklearn`` extra), and ``privpca.plot_forecast`` draws forecasts against ε (needs
matplotlib, in the ``examples`` extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._forecast import DataShape, Scenario
from ._plot import plot_forecast
from ._witness import Witnessed
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
    LedgerLogTampered,
    LogRewrittenError,
    MalformedRequest,
    MethodNotAllowed,
    NotAcceptable,
    NotFound,
    PayloadTooLarge,
    PrivacySpendWarning,
    PrivpcaError,
    QueueFull,
    RateLimited,
    ReceiptError,
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
    Forecast,
    Job,
    JobResult,
    Ledger,
    LedgerEntry,
    Needed,
    NeededByAlgorithm,
    Plan,
    PrivacyAmount,
    Progress,
    SpectrumRelease,
    Study,
    StudyCreated,
    StudyResult,
)
from .transparency import Checkpoint, Receipt, VerifiedReceipt, VerifierKey

if TYPE_CHECKING:
    from .estimator import PrivatePCA

__version__ = "0.1.0"

__all__ = [
    "AlreadyReceived",
    "ApiError",
    "Budget",
    "BudgetExceeded",
    "Checkpoint",
    "Client",
    "Conflict",
    "DataShape",
    "Dataset",
    "Forbidden",
    "Forecast",
    "IdempotencyKeyReused",
    "InternalError",
    "InvalidInput",
    "Job",
    "JobFailed",
    "JobResult",
    "Ledger",
    "LedgerEntry",
    "LedgerLogTampered",
    "LogRewrittenError",
    "MalformedRequest",
    "MethodNotAllowed",
    "Needed",
    "NeededByAlgorithm",
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
    "Receipt",
    "ReceiptError",
    "SpectrumRelease",
    "RepeatedFitError",
    "RequestTimeout",
    "Scenario",
    "Study",
    "StudyCreated",
    "StudyResult",
    "Unauthorized",
    "Unavailable",
    "UnsupportedMediaType",
    "ValidationError",
    "VerifiedReceipt",
    "VerifierKey",
    "WaitTimeout",
    "Witnessed",
    "plot_forecast",
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
