//! The application layer's error: what went wrong in domain terms, with no HTTP types. The
//! HTTP layer maps each [`ErrorKind`] to one status and renders the error as an RFC 9457
//! problem document (`http/error.rs`); nothing else chooses a status.

use serde_json::{Map, Value};

/// Stable problem types. The `type` member is `urn:privpca:problem:<slug>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request body or query is not well-formed JSON/CSV/etc.
    Malformed,
    /// A field has an invalid value.
    Validation,
    Unauthorized,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    NotAcceptable,
    /// The job would spend more than the dataset's remaining budget.
    OverBudget,
    /// The request conflicts with the resource's state.
    Conflict,
    /// Same Idempotency-Key, different request.
    IdempotencyMismatch,
    /// A dataset's transparency log does not match its ledger (a stored row or leaf was
    /// edited): the service refuses to serve or sign it (docs/design/ledger.md).
    LogTampered,
    /// A site message that already arrived (a retry); the client may treat it as success.
    AlreadyReceived,
    PayloadTooLarge,
    UnsupportedMediaType,
    QueueFull,
    /// The tenant is over its rate limit for this kind of request (429, with Retry-After).
    RateLimited,
    Timeout,
    Unavailable,
    Internal,
}

impl ErrorKind {
    pub fn slug(self) -> &'static str {
        match self {
            Self::Malformed => "malformed-request",
            Self::Validation => "validation-error",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::NotFound => "not-found",
            Self::MethodNotAllowed => "method-not-allowed",
            Self::NotAcceptable => "not-acceptable",
            Self::OverBudget => "over-budget",
            Self::Conflict => "conflict",
            Self::IdempotencyMismatch => "idempotency-key-reused",
            Self::LogTampered => "ledger-log-tampered",
            Self::AlreadyReceived => "already-received",
            Self::PayloadTooLarge => "payload-too-large",
            Self::UnsupportedMediaType => "unsupported-media-type",
            Self::QueueFull => "queue-full",
            Self::RateLimited => "rate-limited",
            Self::Timeout => "timeout",
            Self::Unavailable => "unavailable",
            Self::Internal => "internal-error",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Self::Malformed => "Malformed request",
            Self::Validation => "Invalid value",
            Self::Unauthorized => "Missing or invalid API key",
            Self::Forbidden => "Not allowed",
            Self::NotFound => "Not found",
            Self::MethodNotAllowed => "Method not allowed",
            Self::NotAcceptable => "No acceptable representation",
            Self::OverBudget => "Privacy budget exceeded",
            Self::Conflict => "Conflict with the resource's state",
            Self::IdempotencyMismatch => "Idempotency-Key reused with a different request",
            Self::LogTampered => "The ledger's transparency log was tampered with",
            Self::AlreadyReceived => "Already received",
            Self::PayloadTooLarge => "Payload too large",
            Self::UnsupportedMediaType => "Unsupported media type",
            Self::QueueFull => "Job queue is full",
            Self::RateLimited => "Too many requests",
            Self::Timeout => "Request took too long",
            Self::Unavailable => "Service unavailable",
            Self::Internal => "Internal server error",
        }
    }
}

/// The error every use case returns: a kind, a plain-words detail, the offending field and
/// extension members. The HTTP layer renders it as a problem document (`http/error.rs`), the
/// one place that maps kinds to statuses.
#[derive(Debug)]
pub struct AppError {
    pub kind: ErrorKind,
    pub detail: String,
    pub field: Option<String>,
    pub extra: Map<String, Value>,
    pub retry_after: Option<u64>,
}

impl AppError {
    pub fn new(kind: ErrorKind, detail: impl Into<String>) -> Self {
        Self {
            kind,
            detail: detail.into(),
            field: None,
            extra: Map::new(),
            retry_after: None,
        }
    }

    pub fn validation(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Validation, detail).with_field(field)
    }

    pub fn not_found(what: &str, id: impl std::fmt::Display) -> Self {
        Self::new(ErrorKind::NotFound, format!("no {what} with id {id}"))
    }

    /// `record`, the result of looking up the `what` with id `id`, or not found when it is absent.
    pub fn found<T>(record: Option<T>, what: &str, id: impl std::fmt::Display) -> Result<T, Self> {
        record.ok_or_else(|| Self::not_found(what, id))
    }

    pub fn conflict(detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, detail)
    }

    /// A server-side failure: logged with its cause, answered with a generic detail.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "internal error");
        Self::new(
            ErrorKind::Internal,
            "the server failed to handle this request; it has been logged",
        )
    }

    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.extra.insert(key.to_string(), value.into());
        self
    }

    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }
}

impl std::fmt::Display for AppError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind.slug(), self.detail)
    }
}

impl From<crate::store::StoreError> for AppError {
    fn from(e: crate::store::StoreError) -> Self {
        if e.is_busy() {
            tracing::warn!(error = %e, "database busy");
            return AppError::new(ErrorKind::Unavailable, "the database is busy; retry shortly")
                .retry_after(1);
        }
        if let crate::store::StoreError::LogTampered { log, reason } = &e {
            tracing::error!(log = %log, reason = %reason, "transparency log does not match the ledger");
            return AppError::new(
                ErrorKind::LogTampered,
                format!("the transparency log {log} does not match the ledger ({reason}); it is not served or signed"),
            )
            .with("log", log.clone());
        }
        if let crate::store::StoreError::UnloggableEvent(reason) = &e {
            return AppError::validation("params", format!("{e}; nothing was charged"))
                .with("reason", reason.clone());
        }
        if let crate::store::StoreError::NulInText(field) = e {
            return AppError::validation(field, e.to_string());
        }
        AppError::internal(e)
    }
}

/// An algorithm's configuration error, mapped the same way wherever it arises (jobs, plans and
/// studies): a bad parameter names its field; an algorithm that cannot serve this dataset or
/// study is a bad `algorithm`; an algorithm reserved for public data is not allowed (403).
impl From<crate::algorithms::ConfigError> for AppError {
    fn from(e: crate::algorithms::ConfigError) -> Self {
        use crate::algorithms::ConfigError;
        match e {
            ConfigError::Invalid { field, message } => AppError::validation(field, message),
            ConfigError::Unsupported(message) => AppError::validation("algorithm", message),
            ConfigError::PublicOnly(message) => AppError::new(ErrorKind::Forbidden, message),
        }
    }
}
