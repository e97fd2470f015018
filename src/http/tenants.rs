//! `/v1/tenants`: the admin creates tenants and their API keys.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::auth::AdminAuth;
use super::error::{ApiError, Json, ProblemDocument};
use crate::app;
use crate::state::AppState;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTenant {
    /// A name for people: 1 to 200 characters, not only white space, no NUL character (stored trimmed).
    #[schema(min_length = 1, max_length = 200, pattern = r"^[^\u0000]*\S[^\u0000]*$")]
    pub name: String,
}

/// A new tenant. `api_key` is shown once: only its hash is stored.
#[derive(Debug, Serialize, ToSchema)]
pub struct TenantCreated {
    pub id: Uuid,
    pub name: String,
    pub api_key: String,
    pub created_at: DateTime<Utc>,
}

/// Create a tenant and its API key (admin key required).
#[utoipa::path(post, operation_id = "create_tenant", path = "/v1/tenants", tag = "tenants", request_body = CreateTenant,
    security(("admin_key" = [])),
    responses((status = 201, body = TenantCreated), (status = 401, body = ProblemDocument),
        (status = 403, body = ProblemDocument), (status = 422, body = ProblemDocument)))]
pub async fn create(
    State(state): State<AppState>,
    _admin: AdminAuth,
    Json(body): Json<CreateTenant>,
) -> Result<impl IntoResponse, ApiError> {
    let (tenant, api_key) = app::tenants::create(&state, &body.name).await?;
    Ok((
        StatusCode::CREATED,
        Json(TenantCreated {
            id: tenant.id,
            name: tenant.name,
            api_key,
            created_at: tenant.created_at,
        }),
    ))
}
