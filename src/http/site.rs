//! `/v1/site/*`: what a site's client (`privpca site`) calls, authenticated by its site token.
//! A token names exactly one study and one site, so no path names either: a token can act
//! only on its own study as its own site (docs/design/federation.md).

use axum::extract::{FromRequestParts, State};
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use serde::Deserialize;
use utoipa::IntoParams;
use uuid::Uuid;

use super::error::{ApiError, Json, Path, ProblemDocument, ProblemKind, Query};
use crate::app::site;
use crate::federation::messages::{
    CapeReleaseRequest, ConfirmRequest, ContributionRequest, GossipPostRequest, JoinRequest,
    SeedRevealRequest, SharesRequest, SiteStudyView, SiteTask, UnmaskRequest,
};
use crate::state::AppState;
use crate::store::{StudyRecord, StudySiteRecord};
use crate::studies::{Delivery, Journaled};

fn unauthorized(why: &str) -> ApiError {
    ApiError::new(ProblemKind::Unauthorized, why.to_string())
}

/// What a site token was found to name; 401 for a token no site has.
fn known<T>(found: Option<T>) -> Result<T, ApiError> {
    found.ok_or_else(|| unauthorized("unknown site token"))
}

/// The site token of `Authorization: Bearer <site token>`.
fn bearer_token(parts: &Parts) -> Result<&str, ApiError> {
    let value = parts
        .headers
        .get(AUTHORIZATION)
        .ok_or_else(|| unauthorized("missing `Authorization: Bearer <site token>` header"))?;
    let text = value
        .to_str()
        .map_err(|_| unauthorized("Authorization header is not valid text"))?;
    match text.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() => {
            Ok(token.trim())
        }
        _ => Err(unauthorized("expected `Authorization: Bearer <site token>`")),
    }
}

/// The study and site a site token belongs to.
pub struct SiteAuth {
    pub study: StudyRecord,
    pub site: StudySiteRecord,
}

impl FromRequestParts<AppState> for SiteAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let (study, site) = known(state.store.site_by_token(bearer_token(parts)?).await?)?;
        Ok(SiteAuth { study, site })
    }
}

/// Only which study and site a site token names ([`Store::site_identity_by_token`]: from
/// memory after the first request), for the requests of a running study, whose state the
/// study hub holds.
///
/// [`Store::site_identity_by_token`]: crate::store::Store::site_identity_by_token
pub struct SiteId {
    pub study: Uuid,
    pub index: u32,
}

impl FromRequestParts<AppState> for SiteId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let token = bearer_token(parts)?;
        let (study, index) = known(state.store.site_identity_by_token(token).await?)?;
        Ok(SiteId { study, index })
    }
}

/// What this site's study asks of it: the algorithm, the public bounds, the cost to this site.
#[utoipa::path(get, operation_id = "get_site_study", path = "/v1/site/study", tag = "sites", security(("site_token" = [])),
    responses((status = 200, body = SiteStudyView), (status = 401, body = ProblemDocument)))]
pub async fn study(auth: SiteAuth) -> Result<Json<SiteStudyView>, ApiError> {
    Ok(Json(site::view(&auth.study, &auth.site)))
}

/// Join the study with this site's public keys (and its n under `replace_one`). Once only.
#[utoipa::path(post, operation_id = "join_study", path = "/v1/site/join", tag = "sites", security(("site_token" = [])), request_body = JoinRequest,
    responses((status = 200, body = SiteStudyView), (status = 401, body = ProblemDocument),
        (status = 409, body = ProblemDocument), (status = 422, body = ProblemDocument)))]
pub async fn join(
    State(state): State<AppState>,
    auth: SiteAuth,
    Json(body): Json<JoinRequest>,
) -> Result<Json<SiteStudyView>, ApiError> {
    let (study, site) = site::join(&state, &auth.study, &auth.site, body).await?;
    Ok(Json(site::view(&study, &site)))
}

/// How long to wait for a task.
#[derive(Debug, Deserialize, IntoParams)]
pub struct TaskQuery {
    /// Milliseconds to wait for something to do (0 to 25 000; default 20 000).
    pub wait_ms: Option<u64>,
}

/// The next thing this site should do (long-poll: answers as soon as there is a task, or with
/// `wait` after `wait_ms`).
#[utoipa::path(get, operation_id = "get_site_task", path = "/v1/site/task", tag = "sites", security(("site_token" = [])), params(TaskQuery),
    responses((status = 200, body = SiteTask), (status = 401, body = ProblemDocument), (status = 409, body = ProblemDocument)))]
pub async fn task(
    State(state): State<AppState>,
    auth: SiteId,
    Query(query): Query<TaskQuery>,
) -> Result<Json<SiteTask>, ApiError> {
    let task = site::task(&state, auth.study, auth.index, query.wait_ms).await?;
    Ok(Json(task))
}

/// This site's share boxes, one per participant (after the roster is fixed).
#[utoipa::path(post, operation_id = "submit_site_shares", path = "/v1/site/shares", tag = "sites", security(("site_token" = [])), request_body = SharesRequest,
    responses((status = 204), (status = 401, body = ProblemDocument), (status = 409, body = ProblemDocument),
        (status = 422, body = ProblemDocument)))]
pub async fn shares(
    State(state): State<AppState>,
    auth: SiteAuth,
    Json(body): Json<SharesRequest>,
) -> Result<StatusCode, ApiError> {
    let entry = Journaled::Shares {
        site: auth.site.index,
        boxes: body.boxes,
    };
    state
        .studies
        .deliver(auth.study.id, Delivery::Journaled(entry))
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// SecAgg+ studies: this site's share of the graph seed, the 32 bytes its join committed to
/// (after the roster is fixed; docs/design/federation.md, "Live SecAgg+").
#[utoipa::path(post, operation_id = "submit_site_seed", path = "/v1/site/seed", tag = "sites", security(("site_token" = [])), request_body = SeedRevealRequest,
    responses((status = 204), (status = 401, body = ProblemDocument), (status = 409, body = ProblemDocument),
        (status = 422, body = ProblemDocument)))]
pub async fn seed(
    State(state): State<AppState>,
    auth: SiteAuth,
    Json(body): Json<SeedRevealRequest>,
) -> Result<StatusCode, ApiError> {
    let entry = Journaled::Reveal {
        site: auth.site.index,
        reveal: body.reveal,
    };
    state
        .studies
        .deliver(auth.study.id, Delivery::Journaled(entry))
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// This site's masked contribution to `round`.
#[utoipa::path(post, operation_id = "submit_site_contribution", path = "/v1/site/rounds/{round}/contribution", tag = "sites", security(("site_token" = [])),
    params(("round" = u32, Path, description = "round number, 1-based")), request_body = ContributionRequest,
    responses((status = 204), (status = 401, body = ProblemDocument), (status = 409, body = ProblemDocument),
        (status = 422, body = ProblemDocument)))]
pub async fn contribution(
    State(state): State<AppState>,
    auth: SiteId,
    Path(round): Path<u32>,
    Json(body): Json<ContributionRequest>,
) -> Result<StatusCode, ApiError> {
    let entry = Journaled::Contribution {
        site: auth.index,
        round,
        masked: body.masked,
        signature: body.signature,
    };
    state
        .studies
        .deliver(auth.study, Delivery::Journaled(entry))
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// This survivor's confirmation of `round`'s transcript (the consistency round).
#[utoipa::path(post, operation_id = "submit_site_confirmation", path = "/v1/site/rounds/{round}/confirm", tag = "sites", security(("site_token" = [])),
    params(("round" = u32, Path, description = "round number, 1-based")), request_body = ConfirmRequest,
    responses((status = 204), (status = 401, body = ProblemDocument), (status = 409, body = ProblemDocument),
        (status = 422, body = ProblemDocument)))]
pub async fn confirm(
    State(state): State<AppState>,
    auth: SiteId,
    Path(round): Path<u32>,
    Json(body): Json<ConfirmRequest>,
) -> Result<StatusCode, ApiError> {
    let entry = Journaled::Confirm {
        site: auth.index,
        round,
        signature: body.signature,
    };
    state
        .studies
        .deliver(auth.study, Delivery::Journaled(entry))
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// This site's unmasking shares for `round`.
#[utoipa::path(post, operation_id = "submit_site_unmask", path = "/v1/site/rounds/{round}/unmask", tag = "sites", security(("site_token" = [])),
    params(("round" = u32, Path, description = "round number, 1-based")), request_body = UnmaskRequest,
    responses((status = 204), (status = 401, body = ProblemDocument), (status = 409, body = ProblemDocument),
        (status = 422, body = ProblemDocument)))]
pub async fn unmask(
    State(state): State<AppState>,
    auth: SiteId,
    Path(round): Path<u32>,
    Json(body): Json<UnmaskRequest>,
) -> Result<StatusCode, ApiError> {
    let entry = Journaled::Unmask {
        site: auth.index,
        round,
        answer: body,
    };
    state
        .studies
        .deliver(auth.study, Delivery::Journaled(entry))
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A CAPE site's confirmation of `stage`'s transcript, or a `gossip_power` agent's of the
/// study's (stage 0): the consistency round.
#[utoipa::path(post, operation_id = "submit_stage_confirmation", path = "/v1/site/stages/{stage}/confirm", tag = "sites", security(("site_token" = [])),
    params(("stage" = u32, Path, description = "protocol stage, 1-based")), request_body = ConfirmRequest,
    responses((status = 204), (status = 401, body = ProblemDocument), (status = 409, body = ProblemDocument),
        (status = 422, body = ProblemDocument)))]
pub async fn stage_confirm(
    State(state): State<AppState>,
    auth: SiteId,
    Path(stage): Path<u32>,
    Json(body): Json<ConfirmRequest>,
) -> Result<StatusCode, ApiError> {
    let delivery = Delivery::StageConfirm {
        site: auth.index,
        stage,
        signature: body.signature,
    };
    state.studies.deliver(auth.study, delivery).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A CAPE site's noisy statistic for `stage` (`cape_pca`: stage 1, the only one).
#[utoipa::path(post, operation_id = "submit_cape_release", path = "/v1/site/stages/{stage}/release", tag = "sites", security(("site_token" = [])),
    params(("stage" = u32, Path, description = "protocol stage, 1-based")), request_body = CapeReleaseRequest,
    responses((status = 204), (status = 401, body = ProblemDocument), (status = 409, body = ProblemDocument),
        (status = 422, body = ProblemDocument)))]
pub async fn cape_release(
    State(state): State<AppState>,
    auth: SiteAuth,
    Path(stage): Path<u32>,
    Json(body): Json<CapeReleaseRequest>,
) -> Result<StatusCode, ApiError> {
    let delivery = Delivery::CapeRelease {
        site: auth.site.index,
        stage,
        values: body.values,
    };
    state.studies.deliver(auth.study.id, delivery).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A `gossip_power` agent's value of exchange `step`: its noisy message or update, or a gossip
/// state mixed from released values (docs/design/federation.md, "Live gossip").
#[utoipa::path(post, operation_id = "submit_gossip_value", path = "/v1/site/gossip/{step}", tag = "sites", security(("site_token" = [])),
    params(("step" = u32, Path, description = "exchange number, 1-based")), request_body = GossipPostRequest,
    responses((status = 204), (status = 401, body = ProblemDocument), (status = 409, body = ProblemDocument),
        (status = 422, body = ProblemDocument)))]
pub async fn gossip_value(
    State(state): State<AppState>,
    auth: SiteAuth,
    Path(step): Path<u32>,
    Json(body): Json<GossipPostRequest>,
) -> Result<StatusCode, ApiError> {
    let delivery = Delivery::GossipPost {
        site: auth.site.index,
        step,
        values: body.values,
    };
    state.studies.deliver(auth.study.id, delivery).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The current signed checkpoint of this site's study's transparency log, for the site to keep
/// beside its own ledger and check at every phase (issue 39). 409 when the log does not match
/// the study's record.
#[utoipa::path(get, operation_id = "get_site_ledger_checkpoint", path = "/v1/site/ledger/checkpoint", tag = "sites",
    security(("site_token" = [])),
    responses((status = 200, body = super::ledger_log::CheckpointView), (status = 401, body = ProblemDocument),
        (status = 409, body = ProblemDocument)))]
pub async fn ledger_checkpoint(
    State(state): State<AppState>,
    auth: SiteAuth,
) -> Result<Json<super::ledger_log::CheckpointView>, ApiError> {
    let of = crate::app::ledger_log::LogOf::Study(auth.study.id);
    let checkpoint = crate::app::ledger_log::checkpoint(&state, auth.study.tenant_id, of).await?;
    Ok(Json(super::ledger_log::CheckpointView { checkpoint }))
}

/// The proof that this site's study's log at size `to` extends its log at size `from`.
#[utoipa::path(get, operation_id = "get_site_ledger_consistency", path = "/v1/site/ledger/consistency", tag = "sites",
    security(("site_token" = [])), params(super::ledger_log::ConsistencyQuery),
    responses((status = 200, body = super::ledger_log::ConsistencyView), (status = 400, body = ProblemDocument),
        (status = 401, body = ProblemDocument), (status = 409, body = ProblemDocument)))]
pub async fn ledger_consistency(
    State(state): State<AppState>,
    auth: SiteAuth,
    query: Result<
        axum::extract::Query<super::ledger_log::ConsistencyQuery>,
        axum::extract::rejection::QueryRejection,
    >,
) -> Result<Json<super::ledger_log::ConsistencyView>, ApiError> {
    let of = crate::app::ledger_log::LogOf::Study(auth.study.id);
    super::ledger_log::consistency_of(&state, auth.study.tenant_id, of, query).await
}
