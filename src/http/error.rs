//! One error type for the HTTP layer, rendered as RFC 9457 problem documents
//! (`application/problem+json`) with a stable `type` per kind of error. Server errors are
//! logged with their cause and answered with a generic message: internals are never echoed.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

/// Stable problem types. The `type` member is `urn:privpca:problem:<slug>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProblemKind {
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

impl ProblemKind {
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

    pub fn status(self) -> StatusCode {
        match self {
            Self::Malformed => StatusCode::BAD_REQUEST,
            Self::Validation => StatusCode::UNPROCESSABLE_ENTITY,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Forbidden => StatusCode::FORBIDDEN,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::NotAcceptable => StatusCode::NOT_ACCEPTABLE,
            Self::OverBudget | Self::Conflict | Self::IdempotencyMismatch | Self::AlreadyReceived => {
                StatusCode::CONFLICT
            }
            Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::QueueFull | Self::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            Self::Timeout => StatusCode::REQUEST_TIMEOUT,
            Self::Internal => StatusCode::INTERNAL_SERVER_ERROR,
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

/// An RFC 9457 problem document.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ProblemDocument {
    /// Stable identifier of the kind of problem, `urn:privpca:problem:<slug>`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Short summary of the kind of problem.
    pub title: String,
    /// HTTP status code.
    pub status: u16,
    /// What went wrong in this request, in plain words.
    pub detail: String,
    /// The offending field (dotted path), when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// Extension members (e.g. `remaining_rho` and `requested_rho` on `over-budget`).
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub extra: Map<String, Value>,
}

/// The error every handler returns.
#[derive(Debug)]
pub struct ApiError {
    pub kind: ProblemKind,
    pub detail: String,
    pub field: Option<String>,
    pub extra: Map<String, Value>,
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(kind: ProblemKind, detail: impl Into<String>) -> Self {
        Self {
            kind,
            detail: detail.into(),
            field: None,
            extra: Map::new(),
            retry_after: None,
        }
    }

    pub fn validation(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(ProblemKind::Validation, detail).with_field(field)
    }

    pub fn not_found(what: &str, id: impl std::fmt::Display) -> Self {
        Self::new(ProblemKind::NotFound, format!("no {what} with id {id}"))
    }

    pub fn conflict(detail: impl Into<String>) -> Self {
        Self::new(ProblemKind::Conflict, detail)
    }

    /// A server-side failure: logged with its cause, answered with a generic detail.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "internal error");
        Self::new(
            ProblemKind::Internal,
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

    pub fn document(&self) -> ProblemDocument {
        ProblemDocument {
            type_: format!("urn:privpca:problem:{}", self.kind.slug()),
            title: self.kind.title().to_string(),
            status: self.kind.status().as_u16(),
            detail: self.detail.clone(),
            field: self.field.clone(),
            extra: self.extra.clone(),
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind.slug(), self.detail)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&self.document()).unwrap_or_default();
        let mut response = (self.kind.status(), body).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if let Some(seconds) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

impl From<crate::store::StoreError> for ApiError {
    fn from(e: crate::store::StoreError) -> Self {
        if e.is_busy() {
            tracing::warn!(error = %e, "database busy");
            return ApiError::new(ProblemKind::Unavailable, "the database is busy; retry shortly")
                .retry_after(1);
        }
        if let crate::store::StoreError::NulInText(field) = e {
            return ApiError::validation(field, e.to_string());
        }
        ApiError::internal(e)
    }
}

impl From<axum::extract::rejection::JsonRejection> for ApiError {
    fn from(rejection: axum::extract::rejection::JsonRejection) -> Self {
        use axum::extract::rejection::JsonRejection as J;
        match rejection {
            J::MissingJsonContentType(_) => ApiError::new(
                ProblemKind::UnsupportedMediaType,
                "expected `Content-Type: application/json`",
            ),
            J::JsonDataError(e) => {
                // "Failed to deserialize the JSON body into the target type: field: message"
                let text = e.body_text();
                let detail = text
                    .split_once(": ")
                    .map(|(_, rest)| rest.to_string())
                    .unwrap_or(text);
                let field = detail.split_once(": ").map(|(f, _)| f.to_string());
                let mut err = ApiError::new(ProblemKind::Validation, detail);
                err.field = field.filter(|f| !f.contains(' '));
                err
            }
            J::JsonSyntaxError(e) => ApiError::new(ProblemKind::Malformed, e.body_text()),
            J::BytesRejection(e) => {
                if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::new(
                        ProblemKind::PayloadTooLarge,
                        "request body is larger than the configured limit",
                    )
                } else {
                    ApiError::new(ProblemKind::Malformed, e.body_text())
                }
            }
            other => ApiError::new(ProblemKind::Malformed, other.body_text()),
        }
    }
}

impl From<axum::extract::rejection::PathRejection> for ApiError {
    fn from(rejection: axum::extract::rejection::PathRejection) -> Self {
        ApiError::new(
            ProblemKind::NotFound,
            format!("no such resource: {}", rejection.body_text()),
        )
    }
}

impl From<axum::extract::rejection::QueryRejection> for ApiError {
    fn from(rejection: axum::extract::rejection::QueryRejection) -> Self {
        ApiError::new(ProblemKind::Validation, rejection.body_text())
    }
}

/// `Json<T>` whose rejections are problem documents. A number written with a zero fraction
/// (`3.0`) is read as the integer it is, as JSON Schema's `integer` type counts it (so a value
/// valid by the published schema is never refused for being spelled `3.0`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Json<T>(pub T);

impl<T: serde::de::DeserializeOwned, S: Send + Sync> axum::extract::FromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(request: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        let axum::Json(mut value) = axum::Json::<Value>::from_request(request, state).await?;
        integral_floats_as_integers(&mut value);
        match serde_path_to_error::deserialize(value) {
            Ok(parsed) => Ok(Json(parsed)),
            Err(e) => {
                let path = e.path().to_string();
                let mut err = ApiError::new(ProblemKind::Validation, format!("{path}: {}", e.inner()));
                if path != "." {
                    err.field = Some(path);
                } else {
                    err.detail = e.inner().to_string();
                }
                Err(err)
            }
        }
    }
}

/// 2⁶³, exactly representable: `i64` holds [−2⁶³, 2⁶³), `u64` holds [0, 2⁶⁴).
const TWO_POW_63_F64: f64 = 9_223_372_036_854_775_808.0;

/// Rewrites every float with a zero fraction that an `i64` or `u64` holds exactly as that integer.
pub fn integral_floats_as_integers(value: &mut Value) {
    match value {
        Value::Number(n) if n.is_f64() => {
            let Some(f) = n.as_f64() else { return };
            if f.fract() == 0.0 {
                if (-TWO_POW_63_F64..TWO_POW_63_F64).contains(&f) {
                    *value = Value::from(f as i64);
                } else if (0.0..2.0 * TWO_POW_63_F64).contains(&f) {
                    *value = Value::from(f as u64);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_floats_as_integers),
        Value::Object(map) => map.values_mut().for_each(integral_floats_as_integers),
        _ => {}
    }
}

impl<T: Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}

/// `Path<T>` whose rejections are problem documents.
#[derive(Debug, Clone, Copy, axum::extract::FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct Path<T>(pub T);

/// `Query<T>` whose rejections are problem documents.
#[derive(Debug, Clone, Copy, axum::extract::FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct Query<T>(pub T);
