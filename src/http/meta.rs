//! Open endpoints: health, readiness, metrics.

use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::IntoResponse;
use serde::Serialize;
use utoipa::ToSchema;

use super::error::{ApiError, Json, ProblemDocument, ProblemKind};
use crate::state::AppState;

#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok`
    pub status: &'static str,
    pub version: &'static str,
}

/// Liveness: the process answers.
#[utoipa::path(get, operation_id = "get_health", path = "/healthz", tag = "meta", responses((status = 200, body = Health)))]
pub async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok",
        version: env!("CARGO_PKG_VERSION"),
    })
}

/// Readiness: the database answers and its migrations are applied.
#[utoipa::path(get, operation_id = "get_readiness", path = "/readyz", tag = "meta",
    responses((status = 200, body = Health), (status = 503, body = ProblemDocument)))]
pub async fn readyz(State(state): State<AppState>) -> Result<Json<Health>, ApiError> {
    state.store.ping().await.map_err(|e| {
        tracing::warn!(error = %e, "readiness check failed");
        ApiError::new(ProblemKind::Unavailable, "the database is not reachable")
    })?;
    Ok(Json(Health {
        status: "ok",
        version: env!("CARGO_PKG_VERSION"),
    }))
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

/// Prometheus metrics in text format.
#[utoipa::path(get, operation_id = "get_metrics", path = "/metrics", tag = "meta",
    responses((status = 200, description = "Prometheus text exposition (OpenMetrics by default, plain text with `Accept: text/plain`)",
        content((String = "application/openmetrics-text"), (String = "text/plain")))))]
pub async fn metrics(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<impl IntoResponse, ApiError> {
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
