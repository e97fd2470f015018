//! The HTTP API: routes, handlers per resource, problem documents, OpenAPI.

pub mod auth;
pub mod catalog;
pub mod datasets;
pub mod error;
pub mod forecast;
pub mod jobs;
pub mod ledger_log;
pub mod meta;
pub mod names;
pub mod openapi;
pub mod operator;
pub mod params;
pub mod privacy_input;
pub mod rate_limit;
pub mod routes;
pub mod site;
pub mod studies;
pub mod tenant_keys;
pub mod tenants;
pub mod ui;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use std::time::Duration;

use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;
use utoipa_axum::router::OpenApiRouter;
use utoipa_swagger_ui::SwaggerUi;

use crate::config::Config;
use crate::state::AppState;
use error::{ApiError, ProblemKind};

/// Largest site-protocol request body (a contribution of d·p fixed-point words, base64).
const SITE_BODY_BYTES: usize = 256 * 1024 * 1024;

/// The whole application as a router, so tests can drive it without a socket.
pub fn router(state: AppState) -> Router {
    let (documented, doc) = with_limits(routes::Groups::new(), &state.config).split_for_parts();
    Router::new()
        .merge(documented)
        .merge(routes::dashboard())
        .merge(SwaggerUi::new("/docs").external_url_unchecked("/openapi.json", openapi::finish(doc)))
        .fallback(|| async { ApiError::new(ProblemKind::NotFound, "no such route") })
        .layer(middleware::from_fn(problem_for_bare_errors))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// Each group of routes with its body limit and request time limit.
fn with_limits(groups: routes::Groups, config: &Config) -> OpenApiRouter<AppState> {
    let routes::Groups { api, site, uploads } = groups;
    let api = api
        .layer(DefaultBodyLimit::max(config.max_body_bytes))
        .layer(timeout(config.request_timeout()));
    // Site protocol: contributions are d·p words in base64, larger than other JSON bodies;
    // the task long-poll waits up to 25 s, inside the request time limit.
    let site = site
        .layer(DefaultBodyLimit::max(config.max_body_bytes.max(SITE_BODY_BYTES)))
        .layer(timeout(config.request_timeout().max(Duration::from_secs(35))));
    let uploads = uploads
        .layer(DefaultBodyLimit::disable())
        .layer(timeout(config.upload_timeout()));
    routes::Groups { api, site, uploads }.merge()
}

/// Answers 408 (a problem document, through [`problem_for_bare_errors`]) after `limit`.
fn timeout(limit: Duration) -> TimeoutLayer {
    TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, limit)
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
