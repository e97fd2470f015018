//! The rate-limit extractor: the per-tenant buckets (`src/rate_limits.rs`) checked after
//! authentication, since the limit is per tenant, and before the handler reads the body or
//! prices anything, so a refused request never reaches the ledger. Over the limit: 429 with
//! `Retry-After`.

use std::marker::PhantomData;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use super::auth::TenantAuth;
use super::error::ApiError;
use crate::rate_limits::Action;
use crate::state::AppState;

/// Marks which bucket a handler's [`Limited`] extractor draws from.
pub trait Limit {
    const ACTION: Action;
}

/// Job submissions and study creations.
pub enum Submissions {}
impl Limit for Submissions {
    const ACTION: Action = Action::Submission;
}

/// Uploads.
pub enum Uploads {}
impl Limit for Uploads {
    const ACTION: Action = Action::Upload;
}

/// An authenticated tenant that had a token left for `L`'s action. As an extractor it runs
/// before the body is read, so a refused request costs neither a parse nor a charge.
pub struct Limited<L>(pub TenantAuth, pub PhantomData<L>);

impl<L: Limit> FromRequestParts<AppState> for Limited<L> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let auth = TenantAuth::from_request_parts(parts, state).await?;
        if let Err(refusal) = state.rate_limits.check(L::ACTION, auth.tenant_id) {
            state.metrics.rate_limited(L::ACTION.as_str());
            return Err(refusal);
        }
        Ok(Limited(auth, PhantomData))
    }
}
