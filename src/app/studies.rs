//! Studies (docs/design/federation.md): create one (validate, plan, price, store, start
//! coordinating), read, list, cancel, and read a succeeded study's result. The protocol each
//! algorithm runs plans itself (`protocols/mod.rs`); this module checks the request's public
//! terms and prices the plan in ledger units.

use chrono::Utc;
use uuid::Uuid;

use super::error::{AppError, ErrorKind};
use crate::algorithms::federated_power::{default_threshold, study_context};
use crate::dataset::{Neighbours, Relation};
use crate::privacy::PrivacyTarget;
use crate::privacy::admission::Spending;
use crate::privacy::units::{DeltaUnits, MAX_RHO, RhoUnits};
use crate::protocols::{PlanError, StudyAlgorithm, StudyTerms};
use crate::state::AppState;
use crate::store::{
    NewStudy, NewStudySite, StudyCancel, StudyRecord, StudyResult, StudySiteRecord, StudyStatus,
};
use crate::studies::live::Protocol;

/// Default time sites have to join, in seconds.
pub const DEFAULT_JOIN_TIMEOUT_SECS: u64 = 600;
/// Default time a round (and the key exchange) waits for every site before dropping the silent ones.
pub const DEFAULT_ROUND_TIMEOUT_SECS: u64 = 30;
/// Longest join timeout, in seconds (a week).
const MAX_JOIN_TIMEOUT_SECS: u64 = 7 * 24 * 3600;
/// Longest round timeout, in seconds.
const MAX_ROUND_TIMEOUT_SECS: u64 = 3600;
/// Parameters that belong to simulate-mode jobs, not to studies.
const SIMULATE_ONLY_PARAMS: [&str; 4] = ["sites", "threshold", "dropouts", "site_shares"];

/// One site to invite.
#[derive(Debug, Clone)]
pub struct SiteRequest {
    pub name: String,
    /// The coordinator-side budget of this site (ρ).
    pub budget_rho: Option<f64>,
    /// `gossip_power`: the number of features this site's agent holds (blocks in site order).
    pub n_features: Option<usize>,
}

/// A request to create a study, as the API received it.
#[derive(Debug)]
pub struct StudyRequest {
    pub name: String,
    pub algorithm: String,
    pub n_features: usize,
    pub relation: Relation,
    pub row_norm_bound: f64,
    pub row_l1_bound: Option<f64>,
    /// The algorithm parameters (`null` reads as `{}`).
    pub params: serde_json::Value,
    pub threshold: Option<u32>,
    pub sites: Vec<SiteRequest>,
    pub join_timeout_seconds: Option<u64>,
    pub round_timeout_seconds: Option<u64>,
}

/// What each site spends, as stated and as parsed.
#[derive(Debug)]
pub struct StudyPrivacy {
    /// The target, or why the stated amount is invalid: reported after the checks of the
    /// study's terms, in the order the API has always checked them.
    pub target: Result<PrivacyTarget, AppError>,
    /// The privacy as stated, stored and shown.
    pub stated: serde_json::Value,
}

/// A created study, with one token per site (shown once).
pub struct CreatedStudy {
    pub study: StudyRecord,
    pub sites: Vec<StudySiteRecord>,
    pub tokens: Vec<String>,
}

/// A succeeded study with its result.
pub struct StudyOutcome {
    pub study: StudyRecord,
    pub sites: Vec<StudySiteRecord>,
    pub result: StudyResult,
}

/// Everything a valid request resolves to.
struct Resolved {
    /// The resolved configuration, as stored and shown.
    config: serde_json::Value,
    protocol: Protocol,
    rounds: u32,
    threshold: u32,
    rho_units: RhoUnits,
    delta_units: DeltaUnits,
    join_timeout: u64,
    round_timeout: u64,
}

fn positive_finite(field: &str, v: f64) -> Result<f64, AppError> {
    if v > 0.0 && v.is_finite() {
        Ok(v)
    } else {
        Err(AppError::validation(field, "must be a finite number > 0"))
    }
}

fn check_sites(sites: &[SiteRequest], max_sites: u32) -> Result<(), AppError> {
    let count = sites.len() as u32;
    if !(2..=max_sites).contains(&count) {
        return Err(AppError::validation(
            "sites",
            format!("a study of this algorithm needs 2 to {max_sites} sites (got {count})"),
        ));
    }
    let mut names = std::collections::HashSet::new();
    for (i, site) in sites.iter().enumerate() {
        let name = site.name.trim();
        if name.is_empty() || site.name.chars().count() > 100 {
            return Err(AppError::validation(
                format!("sites[{i}].name"),
                "must have 1 to 100 characters",
            ));
        }
        if !names.insert(name.to_string()) {
            return Err(AppError::validation(
                format!("sites[{i}].name"),
                format!("`{name}` is used twice"),
            ));
        }
        if let Some(b) = site.budget_rho {
            let field = format!("sites[{i}].budget_rho");
            positive_finite(&field, b)?;
            if !(b <= MAX_RHO) {
                return Err(AppError::validation(field, "must be at most 1e6"));
            }
        }
    }
    Ok(())
}

/// The name, algorithm and d of a request.
fn check_identity(request: &StudyRequest, max_d: usize) -> Result<StudyAlgorithm, AppError> {
    let name = request.name.trim();
    if name.is_empty() || request.name.chars().count() > 200 {
        return Err(AppError::validation("name", "must have 1 to 200 characters"));
    }
    let algorithm = StudyAlgorithm::from_name(&request.algorithm).ok_or_else(|| {
        AppError::validation(
            "algorithm",
            format!(
                "unknown study algorithm `{}`; studies run: federated_power, cape_pca, cape_agn, gossip_power",
                request.algorithm
            ),
        )
    })?;
    if !(request.n_features >= 1 && request.n_features <= max_d) {
        return Err(AppError::validation(
            "n_features",
            format!("must lie in 1..={max_d}"),
        ));
    }
    Ok(algorithm)
}

/// The relation with its bounds (α defaults to √d·β).
fn neighbours(request: &StudyRequest) -> Result<Neighbours, AppError> {
    let beta = positive_finite("row_norm_bound", request.row_norm_bound)?;
    let alpha = match request.row_l1_bound {
        Some(a) => positive_finite("row_l1_bound", a)?,
        None => (request.n_features as f64).sqrt() * beta,
    };
    match request.relation {
        Relation::ReplaceOne => Ok(Neighbours::ReplaceOne { beta, alpha }),
        Relation::AddRemove => Ok(Neighbours::AddRemove { beta, alpha }),
        Relation::Entry => Err(AppError::validation(
            "relation",
            "a study holds records: replace_one or add_remove",
        )),
    }
}

/// The threshold t (default ⌈2S/3⌉), 2 ≤ t ≤ S. A `gossip_power` study needs every agent
/// (t = S), and only its sites state a block of features.
fn threshold(request: &StudyRequest, algorithm: StudyAlgorithm) -> Result<u32, AppError> {
    let n_sites = request.sites.len() as u32;
    if algorithm.splits_features() {
        return match request.threshold {
            Some(t) if t != n_sites => Err(AppError::validation(
                "threshold",
                format!(
                    "a {} study needs every agent in every exchange: t must be the number of sites ({n_sites}) or absent (got {t})",
                    algorithm.info().name
                ),
            )),
            _ => Ok(n_sites),
        };
    }
    if let Some(i) = request.sites.iter().position(|s| s.n_features.is_some()) {
        return Err(AppError::validation(
            format!("sites[{i}].n_features"),
            "only gossip_power studies split the features over the sites; every site of this study holds all n_features",
        ));
    }
    let threshold = request.threshold.unwrap_or_else(|| default_threshold(n_sites));
    if !(threshold >= 2 && threshold <= n_sites) {
        return Err(AppError::validation(
            "threshold",
            format!("must satisfy 2 ≤ t ≤ number of sites = {n_sites} (got {threshold})"),
        ));
    }
    Ok(threshold)
}

/// The parameters as stored (`null` reads as `{}`).
fn stored_params(params: &serde_json::Value) -> serde_json::Value {
    if params.is_null() {
        serde_json::json!({})
    } else {
        params.clone()
    }
}

/// The parameters, refusing those of simulate-mode jobs.
fn study_params(request: &StudyRequest) -> Result<serde_json::Value, AppError> {
    let params = stored_params(&request.params);
    if let Some(map) = params.as_object() {
        for key in SIMULATE_ONLY_PARAMS {
            if map.contains_key(key) {
                return Err(AppError::validation(
                    format!("params.{key}"),
                    "is a simulate-mode (job) parameter; a study takes `sites` and `threshold` at its top level",
                ));
            }
        }
    }
    Ok(params)
}

/// The join and round timeouts in seconds, defaulted and checked.
fn timeouts(request: &StudyRequest) -> Result<(u64, u64), AppError> {
    let join = request.join_timeout_seconds.unwrap_or(DEFAULT_JOIN_TIMEOUT_SECS);
    if !(1..=MAX_JOIN_TIMEOUT_SECS).contains(&join) {
        return Err(AppError::validation(
            "join_timeout_seconds",
            "must lie in 1..=604800",
        ));
    }
    let round = request
        .round_timeout_seconds
        .unwrap_or(DEFAULT_ROUND_TIMEOUT_SECS);
    if !(1..=MAX_ROUND_TIMEOUT_SECS).contains(&round) {
        return Err(AppError::validation(
            "round_timeout_seconds",
            "must lie in 1..=3600",
        ));
    }
    Ok((join, round))
}

impl From<PlanError> for AppError {
    fn from(e: PlanError) -> Self {
        match e {
            PlanError::Config(e) => AppError::from(e),
            PlanError::Encode(e) => AppError::internal(e),
        }
    }
}

/// Checks the request in the documented order, plans the algorithm and prices the plan in
/// ledger units (charges round up).
fn resolve(
    request: &StudyRequest,
    target: Result<PrivacyTarget, AppError>,
    max_d: usize,
) -> Result<Resolved, AppError> {
    let algorithm = check_identity(request, max_d)?;
    let neighbours = neighbours(request)?;
    check_sites(&request.sites, algorithm.max_sites())?;
    let threshold = threshold(request, algorithm)?;
    let params = study_params(request)?;
    let target = target?;
    let context = study_context(request.n_features, neighbours);
    let site_features: Vec<Option<usize>> = request.sites.iter().map(|s| s.n_features).collect();
    let terms = StudyTerms {
        context: &context,
        target: &target,
        sites: request.sites.len() as u32,
        threshold,
        site_features: &site_features,
    };
    let plan = algorithm.plan(params, &terms)?;
    let cost = crate::privacy::Cost::gaussian_zcdp(plan.rho)
        .check()
        .map_err(|e| AppError::validation("privacy", e.to_string()))?;
    let units = Spending::of_cost(&cost);
    let plan = algorithm.at_ledger_rho(plan, units.rho_units.to_real());
    let (join_timeout, round_timeout) = timeouts(request)?;
    Ok(Resolved {
        config: plan.config,
        protocol: plan.protocol,
        rounds: plan.rounds,
        threshold,
        rho_units: units.rho_units,
        delta_units: units.delta_units,
        join_timeout,
        round_timeout,
    })
}

/// Refuses a study that costs more than a site's coordinator-side budget.
fn check_site_budgets(state: &AppState, request: &StudyRequest, rho_units: RhoUnits) -> Result<(), AppError> {
    for (i, site) in request.sites.iter().enumerate() {
        if let Some(budget) = site.budget_rho
            && rho_units > RhoUnits::budget(budget)
        {
            state
                .metrics
                .budget_refusal(&request.algorithm, crate::metrics::RefusalReason::SiteBudget);
            return Err(AppError::new(
                ErrorKind::OverBudget,
                format!(
                    "site `{}` has a budget of ρ = {budget:e}; this study costs ρ = {:e}",
                    site.name,
                    rho_units.to_real()
                ),
            )
            .with_field(format!("sites[{i}].budget_rho")));
        }
    }
    Ok(())
}

fn new_study(request: StudyRequest, privacy: serde_json::Value, resolved: &Resolved) -> NewStudy {
    NewStudy {
        name: request.name.trim().to_string(),
        params: stored_params(&request.params),
        algorithm: request.algorithm,
        n_features: request.n_features,
        relation: request.relation,
        row_norm_bound: request.row_norm_bound,
        row_l1_bound: request.row_l1_bound,
        config: resolved.config.clone(),
        privacy,
        cost_rho_units: resolved.rho_units,
        cost_delta_units: resolved.delta_units,
        threshold: resolved.threshold,
        join_deadline: Utc::now() + chrono::Duration::seconds(resolved.join_timeout as i64),
        round_timeout_ms: (resolved.round_timeout * 1000) as i64,
        rounds: resolved.rounds,
        sites: request
            .sites
            .iter()
            .map(|s| NewStudySite {
                name: s.name.trim().to_string(),
                budget_rho_units: s.budget_rho.map(RhoUnits::budget),
            })
            .collect(),
    }
}

/// Creates a study: validates and prices it, stores it with one token per site, and starts
/// coordinating it. It waits for its sites; it starts when all have joined, or at the join
/// deadline with at least t.
pub async fn create(
    state: &AppState,
    tenant: Uuid,
    request: StudyRequest,
    privacy: StudyPrivacy,
) -> Result<CreatedStudy, AppError> {
    let resolved = resolve(&request, privacy.target, state.config.max_d)?;
    check_site_budgets(state, &request, resolved.rho_units)?;
    let new = new_study(request, privacy.stated, &resolved);
    let (study, sites, tokens) = state.store.create_study(tenant, new).await?;
    state.studies.open(&study, &sites, resolved.protocol);
    Ok(CreatedStudy { study, sites, tokens })
}

/// A study of the tenant, with its sites.
pub async fn get(
    state: &AppState,
    tenant: Uuid,
    id: Uuid,
) -> Result<(StudyRecord, Vec<StudySiteRecord>), AppError> {
    AppError::found(state.store.get_study(tenant, id).await?, "study", id)
}

/// The tenant's studies, oldest first (without their sites).
pub async fn list(state: &AppState, tenant: Uuid) -> Result<Vec<StudyRecord>, AppError> {
    Ok(state.store.list_studies(tenant).await?)
}

/// Cancels a study that has not finished; charges already made stand. A finished study is a
/// conflict.
pub async fn cancel(
    state: &AppState,
    tenant: Uuid,
    id: Uuid,
) -> Result<(StudyRecord, Vec<StudySiteRecord>), AppError> {
    match state.store.cancel_study(tenant, id).await? {
        StudyCancel::Cancelled(_) => {
            state.studies.cancel(id).await;
            get(state, tenant, id).await
        }
        StudyCancel::AlreadyFinished(study) => Err(AppError::conflict(format!(
            "the study has already finished ({})",
            study.status.as_str()
        ))),
        StudyCancel::NotFound => Err(AppError::not_found("study", id)),
    }
}

/// A succeeded study and its result; any other status is a conflict.
pub async fn outcome(state: &AppState, tenant: Uuid, id: Uuid) -> Result<StudyOutcome, AppError> {
    let (study, sites) = get(state, tenant, id).await?;
    if study.status != StudyStatus::Succeeded {
        return Err(AppError::conflict(match &study.error {
            Some(e) => format!("the study has no result: it is {} ({e})", study.status.as_str()),
            None => format!("the study has no result: it is {}", study.status.as_str()),
        }));
    }
    let result = state
        .store
        .study_result(tenant, id)
        .await?
        .ok_or_else(|| AppError::internal("succeeded study without result"))?;
    Ok(StudyOutcome { study, sites, result })
}
