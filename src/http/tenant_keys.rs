//! `/v1/tenants/{id}/api-key`: the admin rotates or revokes a tenant's API key. A tenant has one
//! key at a time; both take effect at once on the replica that answers and within
//! `PRIVPCA_API_KEY_CACHE_MS` on the others (docs/deployment.md, "API keys").

use axum::extract::{FromRequestParts, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::auth::AdminAuth;
use super::error::{ApiError, Json, Path, ProblemDocument};
use crate::app;
use crate::state::AppState;

/// A tenant's new API key, shown once: only its hash is stored. The tenant's previous key no
/// longer authenticates.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApiKeyIssued {
    pub tenant_id: Uuid,
    pub api_key: String,
    pub issued_at: DateTime<Utc>,
}

/// The tenant named by the path (`{id}`) of a request made with the admin key.
pub struct KeyHolder(Uuid);

impl FromRequestParts<AppState> for KeyHolder {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        AdminAuth::from_request_parts(parts, state).await?;
        let Path(tenant) = Path::<Uuid>::from_request_parts(parts, state).await?;
        Ok(KeyHolder(tenant))
    }
}

/// Issue a tenant a new API key and revoke its current one (admin key required). Also gives a
/// tenant whose key was revoked a key again.
#[utoipa::path(post, operation_id = "rotate_tenant_key", path = "/v1/tenants/{id}/api-key", tag = "tenants",
    security(("admin_key" = [])),
    params(("id" = Uuid, Path, description = "tenant id")),
    responses((status = 200, body = ApiKeyIssued), (status = 401, body = ProblemDocument),
        (status = 403, body = ProblemDocument), (status = 404, body = ProblemDocument)))]
pub async fn rotate(
    State(state): State<AppState>,
    KeyHolder(tenant_id): KeyHolder,
) -> Result<Json<ApiKeyIssued>, ApiError> {
    let (api_key, issued_at) = app::tenants::rotate_key(&state, tenant_id).await?;
    Ok(Json(ApiKeyIssued {
        tenant_id,
        api_key,
        issued_at,
    }))
}

/// Revoke a tenant's API key without issuing another (admin key required): the tenant can do
/// nothing until its key is rotated. Revoking a revoked key changes nothing.
#[utoipa::path(delete, operation_id = "revoke_tenant_key", path = "/v1/tenants/{id}/api-key", tag = "tenants",
    security(("admin_key" = [])),
    params(("id" = Uuid, Path, description = "tenant id")),
    responses((status = 204, description = "the key is revoked"), (status = 401, body = ProblemDocument),
        (status = 403, body = ProblemDocument), (status = 404, body = ProblemDocument)))]
pub async fn revoke(
    State(state): State<AppState>,
    KeyHolder(tenant_id): KeyHolder,
) -> Result<StatusCode, ApiError> {
    app::tenants::revoke_key(&state, tenant_id).await?;
    Ok(StatusCode::NO_CONTENT)
}
