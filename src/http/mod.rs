//! The HTTP API: routes, handlers per resource, problem documents, OpenAPI.

pub mod auth;
pub mod catalog;
pub mod datasets;
pub mod error;
pub mod jobs;
pub mod meta;
pub mod names;
pub mod openapi;
pub mod operator;
pub mod params;
pub mod privacy_input;
pub mod rate_limit;
pub mod site;
pub mod studies;
pub mod tenants;
pub mod ui;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;
use utoipa_swagger_ui::SwaggerUi;

use crate::state::AppState;
use error::{ApiError, ProblemKind};

/// Largest site-protocol request body (a contribution of d·p fixed-point words, base64).
const SITE_BODY_BYTES: usize = 256 * 1024 * 1024;

/// The whole application as a router, so tests can drive it without a socket.
pub fn router(state: AppState) -> Router {
    let config = state.config.clone();
    let api = Router::new()
        .route("/v1/tenants", post(tenants::create))
        .route("/v1/datasets", post(datasets::create).get(datasets::list))
        .route("/v1/datasets/{id}", get(datasets::get).delete(datasets::delete))
        .route("/v1/datasets/{id}/ledger", get(datasets::ledger))
        .route("/v1/jobs", post(jobs::submit).get(jobs::list))
        .route("/v1/jobs/{id}", get(jobs::get).delete(jobs::cancel))
        .route("/v1/jobs/{id}/result", get(jobs::result))
        .route("/v1/studies", post(studies::create).get(studies::list))
        .route("/v1/studies/{id}", get(studies::get).delete(studies::cancel))
        .route("/v1/studies/{id}/result", get(studies::result))
        .route("/v1/algorithms", get(catalog::list))
        .route("/v1/privacy/plan", post(catalog::plan))
        .route("/healthz", get(meta::healthz))
        .route("/readyz", get(meta::readyz))
        // No /metrics here: operators scrape their own listener (operator.rs, --metrics-bind).
        .layer(DefaultBodyLimit::max(config.max_body_bytes))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            config.request_timeout(),
        ));
    // Site protocol: contributions are d·p words in base64, larger than other JSON bodies;
    // the task long-poll waits up to 25 s, inside the request time limit.
    let site = Router::new()
        .route("/v1/site/study", get(site::study))
        .route("/v1/site/join", post(site::join))
        .route("/v1/site/task", get(site::task))
        .route("/v1/site/shares", post(site::shares))
        .route("/v1/site/rounds/{round}/contribution", post(site::contribution))
        .route("/v1/site/rounds/{round}/unmask", post(site::unmask))
        .route("/v1/site/stages/{stage}/release", post(site::cape_release))
        .layer(DefaultBodyLimit::max(config.max_body_bytes.max(SITE_BODY_BYTES)))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            config.request_timeout().max(std::time::Duration::from_secs(35)),
        ));
    let uploads = Router::new()
        .route("/v1/datasets/{id}/data", put(datasets::upload))
        .layer(DefaultBodyLimit::disable())
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            config.upload_timeout(),
        ));
    // The budget dashboard: static, embedded assets; the page itself calls the API above.
    let dashboard = Router::new()
        .route("/ui", get(ui::index))
        .route("/ui/", get(ui::index_slash))
        .route("/ui/{asset}", get(ui::asset));
    Router::new()
        .merge(api)
        .merge(dashboard)
        .merge(uploads)
        .merge(site)
        .merge(SwaggerUi::new("/docs").external_url_unchecked("/openapi.json", openapi::document_value()))
        .fallback(|| async { ApiError::new(ProblemKind::NotFound, "no such route") })
        .layer(middleware::from_fn(problem_for_bare_errors))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// Error responses produced by the framework itself (405, 408 from the timeout layer, 413, ...)
/// carry no body; give them a problem document like every other error.
async fn problem_for_bare_errors(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    let bare = (status.is_client_error() || status.is_server_error())
        && !response.headers().get(header::CONTENT_TYPE).is_some_and(|ct| {
            ct.to_str()
                .is_ok_and(|ct| ct.starts_with("application/problem+json"))
        });
    if !bare {
        return response;
    }
    let kind = match status {
        StatusCode::METHOD_NOT_ALLOWED => ProblemKind::MethodNotAllowed,
        StatusCode::REQUEST_TIMEOUT => ProblemKind::Timeout,
        StatusCode::PAYLOAD_TOO_LARGE => ProblemKind::PayloadTooLarge,
        StatusCode::NOT_FOUND => ProblemKind::NotFound,
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ProblemKind::UnsupportedMediaType,
        s if s.is_server_error() => ProblemKind::Internal,
        _ => ProblemKind::Malformed,
    };
    let detail = match kind {
        ProblemKind::MethodNotAllowed => "this route does not accept that method".to_string(),
        ProblemKind::Timeout => "the request took longer than the configured limit".to_string(),
        ProblemKind::PayloadTooLarge => "the request body is larger than the configured limit".to_string(),
        _ => status.canonical_reason().unwrap_or("error").to_string(),
    };
    let mut problem = ApiError::new(kind, detail).into_response();
    *problem.status_mut() = status;
    if let Some(allow) = response.headers().get(header::ALLOW) {
        problem.headers_mut().insert(header::ALLOW, allow.clone());
    }
    problem
}
