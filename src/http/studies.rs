//! `/v1/studies`: multi-site runs whose data stays at the sites (docs/design/federation.md).
//! Create (one token per site, shown once), read, list, result, cancel.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::auth::TenantAuth;
use super::error::{ApiError, Json, Path, ProblemDocument, ProblemKind};
use super::jobs::{ProgressView, npy_bytes, strip_nulls, wants_npy};
use super::privacy_input::{DEFAULT_DISPLAY_DELTA, PrivacyAmount, PrivacyInput};
use super::rate_limit::{Limited, Submissions};
use crate::algorithms::ConfigError;
use crate::algorithms::cape_agn::{self, CapeAgnParams};
use crate::algorithms::cape_pca::{self, CapePcaParams};
use crate::algorithms::federated_power::{
    self, FederatedPowerParams, MAX_SITES, default_threshold, study_context,
};
use crate::dataset::{Neighbours, Relation};
use crate::privacy::units::{DELTA_UNIT, RHO_UNIT, charge_units, from_units};
use crate::state::AppState;
use crate::store::{
    NewStudy, NewStudySite, SiteStatus, StudyCancel, StudyRecord, StudySiteRecord, StudyStatus,
};
use crate::studies::cape_live::{CapeKind, CapePlan};
use crate::studies::live::Protocol;

/// The relations a study (records held at the sites) can have.
fn study_relation_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    super::names::enum_schema(
        "`replace_one` (n is public; sites report their n) or `add_remove` (n stays private).",
        &[Relation::ReplaceOne.as_str(), Relation::AddRemove.as_str()],
    )
}

/// Default time sites have to join, in seconds.
pub const DEFAULT_JOIN_TIMEOUT_SECS: u64 = 600;
/// Default time a round (and the key exchange) waits for every site before dropping the silent ones.
pub const DEFAULT_ROUND_TIMEOUT_SECS: u64 = 30;

/// One site to invite.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateStudySite {
    /// A name for people, unique in the study: 1 to 100 characters, not only white space.
    #[schema(min_length = 1, max_length = 100, pattern = r"\S")]
    pub name: String,
    /// The coordinator-side budget of this site (ρ): the study is refused if it costs more.
    /// The site's own ledger (`privpca site --budget-rho`) is what the site enforces.
    #[schema(exclusive_minimum = 0.0, maximum = 1e6)]
    pub budget_rho: Option<f64>,
}

/// Create a study.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateStudy {
    /// A name for people: 1 to 200 characters, not only white space (stored trimmed).
    #[schema(min_length = 1, max_length = 200, pattern = r"\S")]
    pub name: String,
    /// `federated_power`, `cape_pca` or `cape_agn`.
    #[schema(schema_with = super::params::study_algorithm_schema)]
    pub algorithm: String,
    /// Number of features d every site's data has: at most the server's `--max-d` (the
    /// published maximum is its default).
    #[schema(minimum = 1, maximum = 10000)]
    pub n_features: usize,
    /// `replace_one` (n is public; sites report their n) or `add_remove` (n stays private).
    #[schema(schema_with = study_relation_schema)]
    pub relation: Relation,
    /// L2 bound β > 0: every site clips its rows to it.
    #[schema(exclusive_minimum = 0.0)]
    pub row_norm_bound: f64,
    /// Optional L1 bound α > 0 (default √d·β).
    #[schema(exclusive_minimum = 0.0)]
    pub row_l1_bound: Option<f64>,
    /// Algorithm parameters, as for jobs (`k`, `p`, `iterations`, `sensitivity`,
    /// `fraction_bits`, `max_site_samples`).
    #[serde(default)]
    #[schema(value_type = Object)]
    pub params: serde_json::Value,
    /// What each site spends: `{"rho": …}` or `{"epsilon": …, "delta": …}`.
    pub privacy: PrivacyInput,
    /// Survivors needed per round t, 2 ≤ t ≤ number of sites; default ⌈2S/3⌉.
    #[schema(minimum = 2, maximum = 64)]
    pub threshold: Option<u32>,
    /// The sites (2 to 64).
    #[schema(min_items = 2, max_items = 64)]
    pub sites: Vec<CreateStudySite>,
    /// Seconds the sites have to join (default 600). After it, the study starts with the sites
    /// present if there are at least t, and fails (nothing charged) otherwise.
    #[schema(minimum = 1, maximum = 604800)]
    pub join_timeout_seconds: Option<u64>,
    /// Seconds a round waits for every site before dropping the silent ones (default 30).
    #[schema(minimum = 1, maximum = 3600)]
    pub round_timeout_seconds: Option<u64>,
}

/// A site of a study.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct StudySiteView {
    pub index: u32,
    pub name: String,
    /// `invited`, `joined`, `contributing`, `dropped` or `done`.
    pub status: SiteStatus,
    /// The site's record count, public under `replace_one` only.
    pub n_samples: Option<i64>,
    /// What the coordinator charged this site (from round 1 on; it stands).
    pub charged: Option<PrivacyAmount>,
    /// The round in which the site dropped out (0: before round 1).
    pub dropped_round: Option<i64>,
}

/// A study.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct StudyView {
    pub id: Uuid,
    pub name: String,
    pub algorithm: String,
    /// `enrolling`, `running`, `succeeded`, `failed` or `cancelled`.
    pub status: StudyStatus,
    /// Rounds done of the total.
    pub progress: ProgressView,
    pub threshold: i64,
    pub n_sites: i64,
    pub n_features: i64,
    pub relation: Relation,
    pub row_norm_bound: f64,
    pub row_l1_bound: Option<f64>,
    #[schema(value_type = Object)]
    pub params: serde_json::Value,
    /// The resolved configuration (noise multiplier, fixed-point bits, ...).
    #[schema(value_type = Object)]
    pub config: serde_json::Value,
    #[schema(value_type = Object)]
    pub privacy: serde_json::Value,
    /// What each participating site is charged.
    pub cost: PrivacyAmount,
    pub join_deadline: DateTime<Utc>,
    pub round_timeout_seconds: f64,
    pub sites: Vec<StudySiteView>,
    /// The total record count, when every participating site's n is public.
    pub n_samples: Option<i64>,
    pub error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub result_url: Option<String>,
}

/// A site's token, shown once.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SiteToken {
    pub index: u32,
    pub name: String,
    /// Give it to the site's operator: `privpca site --token …`. It is stored hashed and
    /// cannot be shown again; it acts only on this study as this site.
    pub token: String,
}

/// The answer to creating a study.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct StudyCreated {
    pub id: Uuid,
    pub status: StudyStatus,
    pub sites: Vec<SiteToken>,
    pub study: StudyView,
}

fn display_delta(privacy: &serde_json::Value) -> f64 {
    privacy
        .get("delta")
        .and_then(|v| v.as_f64())
        .unwrap_or(DEFAULT_DISPLAY_DELTA)
}

fn study_view(study: &StudyRecord, sites: &[StudySiteRecord]) -> StudyView {
    let shown = display_delta(&study.privacy);
    let sites: Vec<StudySiteView> = sites
        .iter()
        .map(|s| StudySiteView {
            index: s.index,
            name: s.name.clone(),
            status: s.status,
            n_samples: s.n_samples,
            charged: s.charged_at.map(|_| {
                PrivacyAmount::new(
                    from_units(s.charged_rho_units, RHO_UNIT),
                    from_units(s.charged_delta_units, DELTA_UNIT),
                    shown,
                )
            }),
            dropped_round: s.dropped_round,
        })
        .collect();
    let counted: Vec<&StudySiteView> = sites
        .iter()
        .filter(|s| !matches!(s.status, SiteStatus::Dropped | SiteStatus::Invited))
        .collect();
    let n_samples = if study.relation == Relation::ReplaceOne && !counted.is_empty() {
        counted.iter().map(|s| s.n_samples).sum::<Option<i64>>()
    } else {
        None
    };
    StudyView {
        id: study.id,
        name: study.name.clone(),
        algorithm: study.algorithm.clone(),
        status: study.status,
        progress: ProgressView {
            done: study.progress_done,
            total: study.progress_total,
        },
        threshold: study.threshold,
        n_sites: study.n_sites,
        n_features: study.n_features,
        relation: study.relation,
        row_norm_bound: study.row_norm_bound,
        row_l1_bound: study.row_l1_bound,
        params: study.params.clone(),
        config: study.config.clone(),
        privacy: study.privacy.clone(),
        cost: PrivacyAmount::new(
            from_units(study.cost_rho_units, RHO_UNIT),
            from_units(study.cost_delta_units, DELTA_UNIT),
            shown,
        ),
        join_deadline: study.join_deadline,
        round_timeout_seconds: study.round_timeout_ms as f64 / 1000.0,
        sites,
        n_samples,
        error: study.error.clone(),
        created_at: study.created_at,
        started_at: study.started_at,
        finished_at: study.finished_at,
        result_url: (study.status == StudyStatus::Succeeded)
            .then(|| format!("/v1/studies/{}/result", study.id)),
    }
}

fn config_problem(e: ConfigError) -> ApiError {
    ApiError::from(e)
}

fn positive_finite(field: &str, v: f64) -> Result<f64, ApiError> {
    if v > 0.0 && v.is_finite() {
        Ok(v)
    } else {
        Err(ApiError::validation(field, "must be a finite number > 0"))
    }
}

/// Everything a valid request resolves to.
struct Resolved {
    /// The resolved configuration, as stored and shown.
    config: serde_json::Value,
    protocol: Protocol,
    rounds: u32,
    threshold: u32,
    rho_units: i64,
    delta_units: i64,
    join_timeout: u64,
    round_timeout: u64,
}

fn check_sites(sites: &[CreateStudySite]) -> Result<(), ApiError> {
    let count = sites.len() as u32;
    if !(2..=MAX_SITES).contains(&count) {
        return Err(ApiError::validation(
            "sites",
            format!("a study needs 2 to {MAX_SITES} sites (got {count})"),
        ));
    }
    let mut names = std::collections::HashSet::new();
    for (i, site) in sites.iter().enumerate() {
        let name = site.name.trim();
        if name.is_empty() || site.name.chars().count() > 100 {
            return Err(ApiError::validation(
                format!("sites[{i}].name"),
                "must have 1 to 100 characters",
            ));
        }
        if !names.insert(name.to_string()) {
            return Err(ApiError::validation(
                format!("sites[{i}].name"),
                format!("`{name}` is used twice"),
            ));
        }
        if let Some(b) = site.budget_rho {
            let field = format!("sites[{i}].budget_rho");
            positive_finite(&field, b)?;
            if !(b <= crate::privacy::units::MAX_RHO) {
                return Err(ApiError::validation(field, "must be at most 1e6"));
            }
        }
    }
    Ok(())
}

fn resolve(body: &CreateStudy, max_d: usize) -> Result<Resolved, ApiError> {
    let name = body.name.trim();
    if name.is_empty() || body.name.chars().count() > 200 {
        return Err(ApiError::validation("name", "must have 1 to 200 characters"));
    }
    let study_algorithms = crate::algorithms::study_algorithms();
    if !study_algorithms.contains(&body.algorithm.as_str()) {
        return Err(ApiError::validation(
            "algorithm",
            format!(
                "unknown study algorithm `{}`; studies run: {}",
                body.algorithm,
                study_algorithms.join(", ")
            ),
        ));
    }
    if !(body.n_features >= 1 && body.n_features <= max_d) {
        return Err(ApiError::validation(
            "n_features",
            format!("must lie in 1..={max_d}"),
        ));
    }
    let beta = positive_finite("row_norm_bound", body.row_norm_bound)?;
    let alpha = match body.row_l1_bound {
        Some(a) => positive_finite("row_l1_bound", a)?,
        None => (body.n_features as f64).sqrt() * beta,
    };
    let neighbours = match body.relation {
        Relation::ReplaceOne => Neighbours::ReplaceOne { beta, alpha },
        Relation::AddRemove => Neighbours::AddRemove { beta, alpha },
        Relation::Entry => {
            return Err(ApiError::validation(
                "relation",
                "a study holds records: replace_one or add_remove",
            ));
        }
    };
    check_sites(&body.sites)?;
    let n_sites = body.sites.len() as u32;
    let threshold = body.threshold.unwrap_or_else(|| default_threshold(n_sites));
    if !(threshold >= 2 && threshold <= n_sites) {
        return Err(ApiError::validation(
            "threshold",
            format!("must satisfy 2 ≤ t ≤ number of sites = {n_sites} (got {threshold})"),
        ));
    }
    let params = if body.params.is_null() {
        serde_json::json!({})
    } else {
        body.params.clone()
    };
    if let Some(map) = params.as_object() {
        for key in ["sites", "threshold", "dropouts", "site_shares"] {
            if map.contains_key(key) {
                return Err(ApiError::validation(
                    format!("params.{key}"),
                    "is a simulate-mode (job) parameter; a study takes `sites` and `threshold` at its top level",
                ));
            }
        }
    }
    let target = body.privacy.parse("privacy")?;
    let ctx = study_context(body.n_features, neighbours);
    let bad_params = |e: serde_path_to_error::Error<serde_json::Error>| {
        let path = e.path().to_string();
        let field = if path == "." {
            "params".to_string()
        } else {
            format!("params.{path}")
        };
        ApiError::validation(field, e.into_inner().to_string())
    };
    let (config, protocol, rounds, cost) = if body.algorithm == "cape_pca" {
        let parsed: CapePcaParams = serde_path_to_error::deserialize(params).map_err(bad_params)?;
        let config = cape_pca::configure_for(parsed.k, parsed.pair_ratio, &ctx, &target, n_sites, "sites")
            .map_err(config_problem)?;
        let cost = config.noise.cost();
        let plan = CapePlan {
            kind: CapeKind::Pca { k: config.k },
            pair_ratio: config.pair_ratio,
            stages: vec![config.noise.sensitivity],
            rho: cost,
        };
        let value = serde_json::to_value(&config).map_err(ApiError::internal)?;
        (value, Protocol::Cape(plan), 1, cost)
    } else if body.algorithm == "cape_agn" {
        let mut parsed: CapeAgnParams = serde_path_to_error::deserialize(params).map_err(bad_params)?;
        parsed.sites = Some(n_sites);
        let pair_ratio = parsed
            .pair_ratio
            .unwrap_or(crate::federation::cape::DEFAULT_PAIR_RATIO);
        let config = cape_agn::configure(parsed, &ctx, &target).map_err(|e| match e {
            ConfigError::Invalid { field, message } if field == "params.sites" => {
                ApiError::validation("sites", message)
            }
            other => config_problem(other),
        })?;
        let cost = config.stage1.cost() + config.stage2.cost();
        let plan = CapePlan {
            kind: CapeKind::Agn(Box::new(config.clone())),
            pair_ratio,
            stages: vec![config.stage1.sensitivity, config.stage2.sensitivity],
            rho: cost,
        };
        let value = serde_json::to_value(&config).map_err(ApiError::internal)?;
        (value, Protocol::Cape(plan), 2, cost)
    } else {
        let parsed: FederatedPowerParams = serde_path_to_error::deserialize(params).map_err(bad_params)?;
        let config = federated_power::configure_for(&parsed, &ctx, &target, n_sites, threshold)
            .map_err(config_problem)?;
        let cost = crate::algorithms::noisy_power::cost_of(config.iterations, config.multiplier);
        let value = serde_json::to_value(&config).map_err(ApiError::internal)?;
        let rounds = config.iterations;
        (value, Protocol::Power(config), rounds, cost)
    };
    let cost = crate::privacy::Cost::gaussian_zcdp(cost)
        .check()
        .map_err(|e| ApiError::validation("privacy", e.to_string()))?;
    let rho_units = charge_units(cost.rho, RHO_UNIT);
    let protocol = match protocol {
        // CAPE stages are calibrated at the ledger's amount, the ρ a site's view states, so that
        // the coordinator and every site derive the same noise (docs/design/cape.md).
        Protocol::Cape(mut plan) => {
            plan.rho = crate::privacy::units::from_units(rho_units, RHO_UNIT);
            Protocol::Cape(plan)
        }
        other => other,
    };
    let join_timeout = body.join_timeout_seconds.unwrap_or(DEFAULT_JOIN_TIMEOUT_SECS);
    if !(1..=7 * 24 * 3600).contains(&join_timeout) {
        return Err(ApiError::validation(
            "join_timeout_seconds",
            "must lie in 1..=604800",
        ));
    }
    let round_timeout = body.round_timeout_seconds.unwrap_or(DEFAULT_ROUND_TIMEOUT_SECS);
    if !(1..=3600).contains(&round_timeout) {
        return Err(ApiError::validation(
            "round_timeout_seconds",
            "must lie in 1..=3600",
        ));
    }
    Ok(Resolved {
        config,
        protocol,
        rounds,
        threshold,
        rho_units,
        delta_units: charge_units(cost.delta, DELTA_UNIT),
        join_timeout,
        round_timeout,
    })
}

/// Create a study: validates the parameters (including that the fixed-point sum cannot wrap),
/// prices it, and returns one token per site, shown once. The study waits for its sites
/// (`privpca site`); it starts when all have joined, or at the join deadline with at least t.
#[utoipa::path(post, operation_id = "create_study", path = "/v1/studies", tag = "studies", request_body = CreateStudy, security(("api_key" = [])),
    responses((status = 201, body = StudyCreated, headers(("Location" = String))),
        (status = 400, body = ProblemDocument), (status = 409, body = ProblemDocument),
        (status = 422, body = ProblemDocument)))]
pub async fn create(
    State(state): State<AppState>,
    Limited(auth, _): Limited<Submissions>,
    Json(body): Json<CreateStudy>,
) -> Result<Response, ApiError> {
    let resolved = resolve(&body, state.config.max_d)?;
    for (i, site) in body.sites.iter().enumerate() {
        if let Some(budget) = site.budget_rho
            && resolved.rho_units > crate::privacy::units::budget_units(budget, RHO_UNIT)
        {
            state
                .metrics
                .budget_refusal(&body.algorithm, crate::metrics::RefusalReason::SiteBudget);
            return Err(ApiError::new(
                ProblemKind::OverBudget,
                format!(
                    "site `{}` has a budget of ρ = {budget:e}; this study costs ρ = {:e}",
                    site.name,
                    from_units(resolved.rho_units, RHO_UNIT)
                ),
            )
            .with_field(format!("sites[{i}].budget_rho")));
        }
    }
    let privacy = serde_json::to_value(&body.privacy).map_err(ApiError::internal)?;
    let new = NewStudy {
        name: body.name.trim().to_string(),
        algorithm: body.algorithm.clone(),
        n_features: body.n_features,
        relation: body.relation,
        row_norm_bound: body.row_norm_bound,
        row_l1_bound: body.row_l1_bound,
        params: if body.params.is_null() {
            serde_json::json!({})
        } else {
            body.params.clone()
        },
        config: resolved.config.clone(),
        privacy: strip_nulls(privacy),
        cost_rho_units: resolved.rho_units,
        cost_delta_units: resolved.delta_units,
        threshold: resolved.threshold,
        join_deadline: Utc::now() + chrono::Duration::seconds(resolved.join_timeout as i64),
        round_timeout_ms: (resolved.round_timeout * 1000) as i64,
        rounds: resolved.rounds,
        sites: body
            .sites
            .iter()
            .map(|s| NewStudySite {
                name: s.name.trim().to_string(),
                budget_rho_units: s
                    .budget_rho
                    .map(|b| crate::privacy::units::budget_units(b, RHO_UNIT)),
            })
            .collect(),
    };
    let (study, sites, tokens) = state.store.create_study(auth.tenant_id, new).await?;
    state.studies.open(&study, &sites, resolved.protocol.clone());
    let created = StudyCreated {
        id: study.id,
        status: study.status,
        sites: sites
            .iter()
            .zip(tokens)
            .map(|(s, token)| SiteToken {
                index: s.index,
                name: s.name.clone(),
                token,
            })
            .collect(),
        study: study_view(&study, &sites),
    };
    let location = format!("/v1/studies/{}", study.id);
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], Json(created)).into_response())
}

async fn load(
    state: &AppState,
    tenant: Uuid,
    id: Uuid,
) -> Result<(StudyRecord, Vec<StudySiteRecord>), ApiError> {
    state
        .store
        .get_study(tenant, id)
        .await?
        .ok_or_else(|| ApiError::not_found("study", id))
}

/// A study: status, rounds done, its sites' statuses and charges.
#[utoipa::path(get, operation_id = "get_study", path = "/v1/studies/{id}", tag = "studies", security(("api_key" = [])),
    params(("id" = Uuid, Path, description = "study id")),
    responses((status = 200, body = StudyView), (status = 404, body = ProblemDocument)))]
pub async fn get(
    State(state): State<AppState>,
    auth: TenantAuth,
    Path(id): Path<Uuid>,
) -> Result<Json<StudyView>, ApiError> {
    let (study, sites) = load(&state, auth.tenant_id, id).await?;
    Ok(Json(study_view(&study, &sites)))
}

/// The tenant's studies, oldest first (without their sites; read one study for those).
#[utoipa::path(get, operation_id = "list_studies", path = "/v1/studies", tag = "studies", security(("api_key" = [])),
    responses((status = 200, body = Vec<StudyView>)))]
pub async fn list(State(state): State<AppState>, auth: TenantAuth) -> Result<Json<Vec<StudyView>>, ApiError> {
    let studies = state.store.list_studies(auth.tenant_id).await?;
    Ok(Json(studies.iter().map(|s| study_view(s, &[])).collect()))
}

/// Cancel a study that has not finished (200). Charges already made stand. Finished: 409.
#[utoipa::path(delete, operation_id = "cancel_study", path = "/v1/studies/{id}", tag = "studies", security(("api_key" = [])),
    params(("id" = Uuid, Path, description = "study id")),
    responses((status = 200, body = StudyView), (status = 404, body = ProblemDocument), (status = 409, body = ProblemDocument)))]
pub async fn cancel(
    State(state): State<AppState>,
    auth: TenantAuth,
    Path(id): Path<Uuid>,
) -> Result<Json<StudyView>, ApiError> {
    match state.store.cancel_study(auth.tenant_id, id).await? {
        StudyCancel::Cancelled(_) => {
            state.studies.cancel(id).await;
            let (study, sites) = load(&state, auth.tenant_id, id).await?;
            Ok(Json(study_view(&study, &sites)))
        }
        StudyCancel::AlreadyFinished(study) => Err(ApiError::conflict(format!(
            "the study has already finished ({})",
            study.status.as_str()
        ))),
        StudyCancel::NotFound => Err(ApiError::not_found("study", id)),
    }
}

/// Per round: which sites were summed, and the noise multiplier the sum achieved.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct StudyRoundView {
    pub round: u32,
    pub survivors: Vec<String>,
    pub dropped: Vec<String>,
    pub achieved_multiplier: f64,
}

/// The result of a succeeded study: the same shape as a job result, plus the survivors and the
/// noise actually achieved.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct StudyResultView {
    pub study_id: Uuid,
    /// Number of features d: the length of each basis column (called `d` before 0.2.0).
    pub n_features: usize,
    /// Number of components k: the number of basis columns (called `k` before 0.2.0).
    pub n_components: usize,
    /// k columns of d numbers each: orthonormal, ordered by decreasing (noisy) importance.
    pub basis: Vec<Vec<f64>>,
    /// Private eigenvalue estimates (singular values of the last noisy release).
    pub eigenvalues: Option<Vec<f64>>,
    /// What each participating site was charged.
    pub cost: PrivacyAmount,
    /// Sites whose contributions are in the last round.
    pub survivors: Vec<String>,
    /// `federated_power`: the central noise multiplier the cost pays for.
    pub target_multiplier: Option<f64>,
    /// `federated_power`: the smallest multiplier a round achieved (≥ the target: any t
    /// survivors reach it).
    pub achieved_multiplier: Option<f64>,
    /// `federated_power`: every round's survivors.
    pub rounds: Vec<StudyRoundView>,
    /// `cape_pca` (for `cape_agn`: `stage1` and `stage2` of these, and `components`, the
    /// mixture components and weights): the noise the aggregate actually carries (`noise_sd`) against the pooled
    /// (`pooled_noise_sd`) and conventional (`conventional_noise_sd`) levels, per entry of
    /// Σ_s X_sᵀX_s, and whether a dropout made it fall back (`fallback`, `note`).
    #[schema(value_type = Option<Object>)]
    pub noise: Option<serde_json::Value>,
}

/// The basis of a succeeded study: JSON by default, `.npy` with `Accept: application/x-npy`.
#[utoipa::path(get, operation_id = "get_study_result", path = "/v1/studies/{id}/result", tag = "studies", security(("api_key" = [])),
    params(("id" = Uuid, Path, description = "study id")),
    responses((status = 200, body = StudyResultView, description = "The basis as JSON, or with `Accept: application/x-npy` as a d×k f64 `.npy` matrix"),
        (status = 404, body = ProblemDocument), (status = 406, body = ProblemDocument), (status = 409, body = ProblemDocument)))]
pub async fn result(
    State(state): State<AppState>,
    auth: TenantAuth,
    Path(id): Path<Uuid>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let npy = wants_npy(&headers)?;
    let (study, sites) = load(&state, auth.tenant_id, id).await?;
    if study.status != StudyStatus::Succeeded {
        return Err(ApiError::conflict(match &study.error {
            Some(e) => format!("the study has no result: it is {} ({e})", study.status.as_str()),
            None => format!("the study has no result: it is {}", study.status.as_str()),
        }));
    }
    let result = state
        .store
        .study_result(auth.tenant_id, id)
        .await?
        .ok_or_else(|| ApiError::internal("succeeded study without result"))?;
    if npy {
        let bytes = npy_bytes(result.d, result.k, &result.basis);
        return Ok(([(header::CONTENT_TYPE, "application/x-npy")], bytes).into_response());
    }
    let name = |i: u64| -> String {
        sites
            .iter()
            .find(|s| u64::from(s.index) == i)
            .map_or_else(|| format!("site {i}"), |s| s.name.clone())
    };
    let names = |v: Option<&serde_json::Value>| -> Vec<String> {
        v.and_then(|v| v.as_array())
            .map(|a| a.iter().filter_map(|x| x.as_u64()).map(name).collect())
            .unwrap_or_default()
    };
    let report = result.report.unwrap_or_default();
    let rounds: Vec<StudyRoundView> = report
        .get("rounds")
        .and_then(|r| r.as_array())
        .map(|rounds| {
            rounds
                .iter()
                .map(|r| StudyRoundView {
                    round: r.get("round").and_then(|v| v.as_u64()).unwrap_or(0) as u32,
                    survivors: names(r.get("survivors")),
                    dropped: names(r.get("dropped")),
                    achieved_multiplier: r
                        .get("achieved_multiplier")
                        .and_then(|v| v.as_f64())
                        .unwrap_or(0.0),
                })
                .collect()
        })
        .unwrap_or_default();
    let view = study_view(&study, &sites);
    Ok(Json(StudyResultView {
        study_id: id,
        n_features: result.d,
        n_components: result.k,
        basis: result
            .basis
            .chunks(result.d.max(1))
            .map(<[f64]>::to_vec)
            .collect(),
        eigenvalues: result.eigenvalues,
        cost: view.cost,
        survivors: match rounds.last() {
            Some(r) => r.survivors.clone(),
            None => names(report.get("survivors")),
        },
        target_multiplier: report.get("target_multiplier").and_then(|v| v.as_f64()),
        achieved_multiplier: report.get("achieved_multiplier").and_then(|v| v.as_f64()),
        rounds,
        noise: study.algorithm.starts_with("cape_").then(|| report.clone()),
    })
    .into_response())
}
