//! Tenants and their API keys (admin only): create a tenant with its first key, rotate a key
//! (also the way back for a tenant whose key was revoked), revoke one.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::error::AppError;
use crate::state::AppState;
use crate::store::Tenant;

/// A new tenant named `name` (at most 200 characters, not blank; stored trimmed) and its API
/// key, shown once.
pub async fn create(state: &AppState, name: &str) -> Result<(Tenant, String), AppError> {
    let trimmed = name.trim();
    if trimmed.is_empty() || name.chars().count() > 200 {
        return Err(AppError::validation("name", "name must have 1 to 200 characters"));
    }
    Ok(state.store.create_tenant(trimmed).await?)
}

/// A new API key for `tenant` (its current one, if any, is revoked) and when it was issued.
pub async fn rotate_key(state: &AppState, tenant: Uuid) -> Result<(String, DateTime<Utc>), AppError> {
    AppError::found(state.store.rotate_api_key(tenant).await?, "tenant", tenant)
}

/// Revokes `tenant`'s API key; revoking a revoked key changes nothing.
pub async fn revoke_key(state: &AppState, tenant: Uuid) -> Result<(), AppError> {
    if state.store.revoke_api_key(tenant).await? {
        Ok(())
    } else {
        Err(AppError::not_found("tenant", tenant))
    }
}
