//! `/v1/site/*`: what a site's client (`privpca site`) calls, authenticated by its site token.
//! A token names exactly one study and one site, so no path names either: a token can act
//! only on its own study as its own site (docs/design/federation.md).

use std::time::Duration;

use axum::extract::{FromRequestParts, State};
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use serde::Deserialize;
use utoipa::IntoParams;

use super::error::{ApiError, Json, Path, ProblemDocument, ProblemKind, Query};
use crate::algorithms::federated_power::DEFAULT_MAX_SITE_SAMPLES;
use crate::federation::messages::{
    CapeReleaseRequest, ContributionRequest, JoinRequest, SharesRequest, SiteStudyView, SiteTask,
    UnmaskRequest,
};
use crate::state::AppState;
use crate::store::{SiteStatus, StudyRecord, StudySiteRecord, StudyStatus};
use crate::studies::HubError;
use crate::studies::live::LiveError;

/// Longest long-poll of `GET /v1/site/task`.
const MAX_WAIT_MS: u64 = 25_000;

/// The study and site a site token belongs to.
pub struct SiteAuth {
    pub study: StudyRecord,
    pub site: StudySiteRecord,
}

impl FromRequestParts<AppState> for SiteAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let unauthorized = |why: &str| ApiError::new(ProblemKind::Unauthorized, why.to_string());
        let value = parts
            .headers
            .get(AUTHORIZATION)
            .ok_or_else(|| unauthorized("missing `Authorization: Bearer <site token>` header"))?;
        let text = value
            .to_str()
            .map_err(|_| unauthorized("Authorization header is not valid text"))?;
        let token = match text.split_once(' ') {
            Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() => {
                token.trim()
            }
            _ => return Err(unauthorized("expected `Authorization: Bearer <site token>`")),
        };
        match state.store.site_by_token(token).await? {
            Some((study, site)) => Ok(SiteAuth { study, site }),
            None => Err(unauthorized("unknown site token")),
        }
    }
}

fn hub_problem(e: HubError) -> ApiError {
    match e {
        HubError::Live(LiveError::Conflict(m)) => ApiError::conflict(m),
        HubError::Live(LiveError::AlreadyReceived(m)) => ApiError::new(ProblemKind::AlreadyReceived, m),
        HubError::Live(LiveError::Invalid(m)) => ApiError::validation("body", m),
        HubError::NotLive => ApiError::conflict(
            "the study is not running in this coordinator (it has finished, or the coordinator restarted)",
        ),
        HubError::Store(e) => e.into(),
    }
}

/// The fixed-point bits and the largest site size of a study's configuration: those of
/// `federated_power`, or 0 bits and the default bound for CAPE (no fixed-point encoding).
fn study_limits(config: &serde_json::Value) -> (u32, u64) {
    let bits = config
        .get("fraction_bits")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    let max = config
        .get("max_site_samples")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(DEFAULT_MAX_SITE_SAMPLES);
    (u32::try_from(bits).unwrap_or(0), max)
}

fn site_view(auth: &SiteAuth) -> Result<SiteStudyView, ApiError> {
    let study = &auth.study;
    let (fraction_bits, max_site_samples) = study_limits(&study.config);
    Ok(SiteStudyView {
        study_id: study.id,
        study_name: study.name.clone(),
        algorithm: study.algorithm.clone(),
        site_name: auth.site.name.clone(),
        site_index: auth.site.index,
        n_sites: u32::try_from(study.n_sites).unwrap_or(0),
        threshold: u32::try_from(study.threshold).unwrap_or(0),
        n_features: usize::try_from(study.n_features).unwrap_or(0),
        relation: study.relation.as_str().to_string(),
        row_norm_bound: study.row_norm_bound,
        row_l1_bound: study
            .row_l1_bound
            .unwrap_or_else(|| (study.n_features as f64).sqrt() * study.row_norm_bound),
        fraction_bits,
        max_site_samples,
        config: study.config.clone(),
        cost_rho: study.cost_rho_units.to_real(),
        cost_delta: study.cost_delta_units.to_real(),
        status: study.status.as_str().to_string(),
        site_status: auth.site.status.as_str().to_string(),
    })
}

/// What this site's study asks of it: the algorithm, the public bounds, the cost to this site.
#[utoipa::path(get, operation_id = "get_site_study", path = "/v1/site/study", tag = "sites", security(("site_token" = [])),
    responses((status = 200, body = SiteStudyView), (status = 401, body = ProblemDocument)))]
pub async fn study(auth: SiteAuth) -> Result<Json<SiteStudyView>, ApiError> {
    Ok(Json(site_view(&auth)?))
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
    if auth.study.status != StudyStatus::Enrolling {
        return Err(ApiError::conflict(format!(
            "the study is {}, not enrolling",
            auth.study.status.as_str()
        )));
    }
    if auth.site.status != SiteStatus::Invited {
        return Err(ApiError::conflict(format!(
            "this site has already joined (it is {})",
            auth.site.status.as_str()
        )));
    }
    let (_, max_site_samples) = study_limits(&auth.study.config);
    let n_samples = match (auth.study.relation, body.n_samples) {
        (crate::dataset::Relation::ReplaceOne, Some(n)) if n >= 1 && n <= max_site_samples => {
            Some(i64::try_from(n).map_err(ApiError::internal)?)
        }
        (crate::dataset::Relation::ReplaceOne, Some(_)) => {
            return Err(ApiError::validation(
                "n_samples",
                format!("must lie in 1..={max_site_samples} (the study's max_site_samples)"),
            ));
        }
        (crate::dataset::Relation::ReplaceOne, None) => {
            return Err(ApiError::validation(
                "n_samples",
                "is required under replace_one (n is public there)",
            ));
        }
        (_, Some(_)) => {
            return Err(ApiError::validation(
                "n_samples",
                "must be absent under add_remove (n is private there)",
            ));
        }
        (_, None) => None,
    };
    state
        .studies
        .join(auth.study.id, auth.site.index, n_samples, body)
        .await
        .map_err(hub_problem)?;
    let (study, site) = state
        .store
        .get_study_any(auth.study.id)
        .await?
        .and_then(|(study, sites)| {
            sites
                .into_iter()
                .find(|s| s.index == auth.site.index)
                .map(|s| (study, s))
        })
        .ok_or_else(|| ApiError::internal("a joined site vanished"))?;
    Ok(Json(site_view(&SiteAuth { study, site })?))
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
    auth: SiteAuth,
    Query(query): Query<TaskQuery>,
) -> Result<Json<SiteTask>, ApiError> {
    if auth.study.status.is_terminal() {
        let live = state
            .studies
            .task(auth.study.id, auth.site.index, Duration::ZERO)
            .await;
        if let Ok(task) = live {
            return Ok(Json(task));
        }
        return Ok(Json(SiteTask::Finished {
            status: auth.study.status.as_str().to_string(),
            reason: auth.study.error.clone(),
        }));
    }
    let wait = Duration::from_millis(query.wait_ms.unwrap_or(20_000).min(MAX_WAIT_MS));
    let task = state
        .studies
        .task(auth.study.id, auth.site.index, wait)
        .await
        .map_err(hub_problem)?;
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
    state
        .studies
        .shares(auth.study.id, auth.site.index, body.boxes)
        .await
        .map_err(hub_problem)?;
    Ok(StatusCode::NO_CONTENT)
}

/// This site's masked contribution to `round`.
#[utoipa::path(post, operation_id = "submit_site_contribution", path = "/v1/site/rounds/{round}/contribution", tag = "sites", security(("site_token" = [])),
    params(("round" = u32, Path, description = "round number, 1-based")), request_body = ContributionRequest,
    responses((status = 204), (status = 401, body = ProblemDocument), (status = 409, body = ProblemDocument),
        (status = 422, body = ProblemDocument)))]
pub async fn contribution(
    State(state): State<AppState>,
    auth: SiteAuth,
    Path(round): Path<u32>,
    Json(body): Json<ContributionRequest>,
) -> Result<StatusCode, ApiError> {
    state
        .studies
        .contribute(auth.study.id, auth.site.index, round, body.masked)
        .await
        .map_err(hub_problem)?;
    Ok(StatusCode::NO_CONTENT)
}

/// This site's unmasking shares for `round`.
#[utoipa::path(post, operation_id = "submit_site_unmask", path = "/v1/site/rounds/{round}/unmask", tag = "sites", security(("site_token" = [])),
    params(("round" = u32, Path, description = "round number, 1-based")), request_body = UnmaskRequest,
    responses((status = 204), (status = 401, body = ProblemDocument), (status = 409, body = ProblemDocument),
        (status = 422, body = ProblemDocument)))]
pub async fn unmask(
    State(state): State<AppState>,
    auth: SiteAuth,
    Path(round): Path<u32>,
    Json(body): Json<UnmaskRequest>,
) -> Result<StatusCode, ApiError> {
    state
        .studies
        .unmask(auth.study.id, auth.site.index, round, body)
        .await
        .map_err(hub_problem)?;
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
    state
        .studies
        .cape_release(auth.study.id, auth.site.index, stage, body.values)
        .await
        .map_err(hub_problem)?;
    Ok(StatusCode::NO_CONTENT)
}
