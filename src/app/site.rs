//! What a study's site does through the coordinator (docs/design/federation.md): read its
//! study, join it, and follow its tasks. The site is already authenticated by its token, which
//! names exactly one study and one site.

use std::time::Duration;

use super::error::{AppError, ErrorKind};
use crate::algorithms::federated_power::DEFAULT_MAX_SITE_SAMPLES;
use crate::dataset::Relation;
use crate::federation::messages::{JoinRequest, SiteStudyView, SiteTask};
use crate::state::AppState;
use crate::store::{SiteStatus, StudyRecord, StudySiteRecord, StudyStatus};
use crate::studies::HubError;
use crate::studies::live::LiveError;
use uuid::Uuid;

/// Longest long-poll of a site's task, in milliseconds.
const MAX_WAIT_MS: u64 = 25_000;
/// The long-poll of a site's task when the site does not say, in milliseconds.
const DEFAULT_WAIT_MS: u64 = 20_000;

/// A site message the coordinator refused.
impl From<HubError> for AppError {
    fn from(e: HubError) -> Self {
        match e {
            HubError::Live(LiveError::Conflict(m)) => AppError::conflict(m),
            HubError::Live(LiveError::AlreadyReceived(m)) => AppError::new(ErrorKind::AlreadyReceived, m),
            HubError::Live(LiveError::Invalid(m)) => AppError::validation("body", m),
            HubError::NotLive => AppError::conflict(
                "the study is not running in this coordinator (it has finished, or the coordinator restarted)",
            ),
            HubError::Reloading => AppError::new(
                ErrorKind::Unavailable,
                "the study's state is being taken up again from the database after a failed write; retry shortly",
            )
            .retry_after(1),
            HubError::HeldElsewhere => AppError::new(
                ErrorKind::Unavailable,
                "the study is driven by another replica; retry (behind a gateway the retry may reach it)",
            )
            .retry_after(1),
            HubError::Store(crate::store::StoreError::StudyLeaseLost(_)) => AppError::new(
                ErrorKind::Unavailable,
                "the study is being taken over by another coordinator; retry shortly",
            )
            .retry_after(1),
            HubError::Store(e) => e.into(),
        }
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

/// What the site learns about its study.
pub fn view(study: &StudyRecord, site: &StudySiteRecord) -> SiteStudyView {
    let (fraction_bits, max_site_samples) = study_limits(&study.config);
    SiteStudyView {
        study_id: study.id,
        study_name: study.name.clone(),
        algorithm: study.algorithm.clone(),
        site_name: site.name.clone(),
        site_index: site.index,
        n_sites: u32::try_from(study.n_sites).unwrap_or(0),
        threshold: u32::try_from(study.threshold).unwrap_or(0),
        n_features: usize::try_from(study.n_features).unwrap_or(0),
        relation: study.relation,
        row_norm_bound: study.row_norm_bound,
        row_l1_bound: study
            .row_l1_bound
            .unwrap_or_else(|| (study.n_features as f64).sqrt() * study.row_norm_bound),
        fraction_bits,
        max_site_samples,
        config: study.config.clone(),
        cost_rho: study.cost_rho_units.to_real(),
        cost_delta: study.cost_delta_units.to_real(),
        status: study.status,
        site_status: site.status,
    }
}

/// The record count a joining site states: required and bounded under `replace_one` (n is
/// public), absent under `add_remove` (n is private).
fn joining_n(study: &StudyRecord, n_samples: Option<u64>) -> Result<Option<i64>, AppError> {
    let (_, max_site_samples) = study_limits(&study.config);
    match (study.relation, n_samples) {
        (Relation::ReplaceOne, Some(n)) if n >= 1 && n <= max_site_samples => {
            Ok(Some(i64::try_from(n).map_err(AppError::internal)?))
        }
        (Relation::ReplaceOne, Some(_)) => Err(AppError::validation(
            "n_samples",
            format!("must lie in 1..={max_site_samples} (the study's max_site_samples)"),
        )),
        (Relation::ReplaceOne, None) => Err(AppError::validation(
            "n_samples",
            "is required under replace_one (n is public there)",
        )),
        (_, Some(_)) => Err(AppError::validation(
            "n_samples",
            "must be absent under add_remove (n is private there)",
        )),
        (_, None) => Ok(None),
    }
}

/// Joins the study with the site's public keys (and its n under `replace_one`), once; returns
/// the study and the site as they now stand.
pub async fn join(
    state: &AppState,
    study: &StudyRecord,
    site: &StudySiteRecord,
    request: JoinRequest,
) -> Result<(StudyRecord, StudySiteRecord), AppError> {
    if study.status != StudyStatus::Enrolling {
        return Err(AppError::conflict(format!(
            "the study is {}, not enrolling",
            study.status.as_str()
        )));
    }
    if site.status != SiteStatus::Invited {
        return Err(AppError::conflict(format!(
            "this site has already joined (it is {})",
            site.status.as_str()
        )));
    }
    let n_samples = joining_n(study, request.n_samples)?;
    state
        .studies
        .join(study.id, site.index, n_samples, request)
        .await?;
    state
        .store
        .get_study_any(study.id)
        .await?
        .and_then(|(study, sites)| {
            sites
                .into_iter()
                .find(|s| s.index == site.index)
                .map(|s| (study, s))
        })
        .ok_or_else(|| AppError::internal("a joined site vanished"))
}

/// The site's next task, waiting up to `wait_ms` (at most 25 s) for one. A finished study
/// answers at once: with the live outcome while the coordinator keeps it, else from the store.
pub async fn task(
    state: &AppState,
    study: Uuid,
    site: u32,
    wait_ms: Option<u64>,
) -> Result<SiteTask, AppError> {
    let wait = Duration::from_millis(wait_ms.unwrap_or(DEFAULT_WAIT_MS).min(MAX_WAIT_MS));
    match state.studies.task(study, site, wait).await {
        // Not live here: a finished study (the hub keeps a finished one a while, then lets
        // go) is told from its record; an unfinished one is a conflict, as before.
        Err(HubError::NotLive) => match state.store.get_study_any(study).await? {
            Some((record, _)) if record.status.is_terminal() => Ok(SiteTask::Finished {
                status: record.status,
                reason: record.error,
            }),
            _ => Err(HubError::NotLive.into()),
        },
        task => Ok(task?),
    }
}
