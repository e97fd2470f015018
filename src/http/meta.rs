//! Open endpoints: health and readiness. Metrics are for operators only, on their own listener
//! (`operator.rs`).

use axum::extract::State;
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
