//! The operator listener: Prometheus metrics, on an address of their own (`--metrics-bind`,
//! off by default), never on the API router.
//!
//! The metrics are about every tenant at once (the queue, refusals by algorithm) and carry run
//! times; differences of a duration histogram's sum give one job's run time, which grows with
//! the row count n. So they are not for tenants: the API port answers `/metrics` with 404, and
//! the operator binds this router to loopback or an internal network that only the monitoring
//! system reaches (docs/deployment.md, "Metrics"). Jobs on datasets whose n is private are
//! counted without a duration even here (`crate::metrics`).

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::IntoResponse;
use axum::routing::get;

use super::error::{ApiError, ProblemKind};
use crate::state::AppState;

/// The operator's router: `GET /metrics`, and 404 problem documents for anything else.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .fallback(|| async { ApiError::new(ProblemKind::NotFound, "no such route") })
        .with_state(state)
}

/// The media type of the exposition: OpenMetrics, unless the client accepts only plain text
/// (`Accept: text/plain`, which Prometheus' classic parser reads as well: the OpenMetrics text
/// is a superset whose `# EOF` line is a comment there).
fn metrics_media_type(headers: &HeaderMap) -> &'static str {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if accept.contains("text/plain") && !accept.contains("application/openmetrics-text") {
        "text/plain; version=0.0.4; charset=utf-8"
    } else {
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    }
}

/// Prometheus metrics in text format, with the per-state job gauge read from the database.
async fn metrics(State(state): State<AppState>, headers: HeaderMap) -> Result<impl IntoResponse, ApiError> {
    let counts = state.store.job_counts().await?;
    let counts: Vec<(String, i64)> = counts
        .into_iter()
        .map(|(s, n)| (s.as_str().to_string(), n))
        .collect();
    Ok((
        [(header::CONTENT_TYPE, metrics_media_type(&headers))],
        state.metrics.render(&counts),
    ))
}
