//! Bearer-key authentication. Tenants' keys are stored hashed (see `store`) and their tenants
//! kept in memory for `PRIVPCA_API_KEY_CACHE_MS` (a revoked key is refused on every replica
//! within that time; docs/deployment.md, "API keys"); the admin key comes from configuration
//! and is compared in constant time.

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use subtle::ConstantTimeEq;
use uuid::Uuid;

use super::error::{ApiError, ProblemKind};
use crate::state::AppState;

/// The tenant a request acts for.
#[derive(Debug, Clone)]
pub struct TenantAuth {
    pub tenant_id: Uuid,
}

/// A request made with the admin key.
#[derive(Debug, Clone)]
pub struct AdminAuth;

fn bearer(parts: &Parts) -> Result<&str, ApiError> {
    let value = parts.headers.get(AUTHORIZATION).ok_or_else(|| {
        ApiError::new(
            ProblemKind::Unauthorized,
            "missing `Authorization: Bearer <api key>` header",
        )
    })?;
    let text = value.to_str().map_err(|_| {
        ApiError::new(
            ProblemKind::Unauthorized,
            "Authorization header is not valid text",
        )
    })?;
    let (scheme, key) = text.split_once(' ').ok_or_else(|| {
        ApiError::new(
            ProblemKind::Unauthorized,
            "expected `Authorization: Bearer <api key>`",
        )
    })?;
    if !scheme.eq_ignore_ascii_case("bearer") || key.trim().is_empty() {
        return Err(ApiError::new(
            ProblemKind::Unauthorized,
            "expected `Authorization: Bearer <api key>`",
        ));
    }
    Ok(key.trim())
}

impl FromRequestParts<AppState> for TenantAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let key = bearer(parts)?;
        match state.store.tenant_id_by_api_key(key).await? {
            Some(tenant_id) => Ok(TenantAuth { tenant_id }),
            None => Err(ApiError::new(ProblemKind::Unauthorized, "unknown API key")),
        }
    }
}

impl FromRequestParts<AppState> for AdminAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let key = bearer(parts)?;
        if bool::from(key.as_bytes().ct_eq(state.admin_key.as_bytes())) {
            Ok(AdminAuth)
        } else {
            Err(ApiError::new(
                ProblemKind::Forbidden,
                "this operation needs the admin key",
            ))
        }
    }
}
