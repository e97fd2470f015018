//! One error type for the HTTP layer, rendered as RFC 9457 problem documents
//! (`application/problem+json`) with a stable `type` per kind of error. Server errors are
//! logged with their cause and answered with a generic message: internals are never echoed.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

pub use crate::app::error::{AppError as ApiError, ErrorKind as ProblemKind};

/// The one mapping from a domain error kind to an HTTP status.
pub fn status(kind: ProblemKind) -> StatusCode {
    use ProblemKind as K;
    match kind {
        K::Malformed => StatusCode::BAD_REQUEST,
        K::Validation => StatusCode::UNPROCESSABLE_ENTITY,
        K::Unauthorized => StatusCode::UNAUTHORIZED,
        K::Forbidden => StatusCode::FORBIDDEN,
        K::NotFound => StatusCode::NOT_FOUND,
        K::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        K::NotAcceptable => StatusCode::NOT_ACCEPTABLE,
        K::OverBudget | K::Conflict | K::IdempotencyMismatch | K::AlreadyReceived | K::LogTampered => {
            StatusCode::CONFLICT
        }
        K::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        K::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        K::QueueFull | K::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        K::RateLimited => StatusCode::TOO_MANY_REQUESTS,
        K::Timeout => StatusCode::REQUEST_TIMEOUT,
        K::Internal => StatusCode::INTERNAL_SERVER_ERROR,
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

/// The problem document of an error.
pub fn document(error: &ApiError) -> ProblemDocument {
    ProblemDocument {
        type_: format!("urn:privpca:problem:{}", error.kind.slug()),
        title: error.kind.title().to_string(),
        status: status(error.kind).as_u16(),
        detail: error.detail.clone(),
        field: error.field.clone(),
        extra: error.extra.clone(),
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&document(&self)).unwrap_or_default();
        let mut response = (status(self.kind), body).into_response();
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
                let field = detail
                    .split_once(": ")
                    .map(|(f, _)| f.to_string())
                    .filter(|f| !f.contains(' '))
                    .or_else(|| named_field(&detail));
                let mut err = ApiError::new(ProblemKind::Validation, detail);
                err.field = field;
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

/// The field serde names in a top-level "missing field `x`" or "unknown field `x`" (which
/// carry no path prefix).
fn named_field(detail: &str) -> Option<String> {
    let rest = detail
        .strip_prefix("missing field `")
        .or_else(|| detail.strip_prefix("unknown field `"))?;
    let name = rest.split_once('`')?.0;
    (!name.is_empty() && !name.contains(' ')).then(|| name.to_string())
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
                let inner = e.inner().to_string();
                // A missing or unknown field is named by serde in the message, not the path.
                let named = named_field(&inner);
                let mut err = ApiError::new(ProblemKind::Validation, format!("{path}: {inner}"));
                if path != "." {
                    err.field = Some(match named {
                        Some(name) if inner.starts_with("missing field") => format!("{path}.{name}"),
                        _ => path,
                    });
                } else {
                    err.field = named;
                    err.detail = inner;
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
