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
use super::error::{ApiError, Json, Path, ProblemDocument};
use super::jobs::{ProgressView, basis_columns, npy_response, strip_nulls, wants_npy};
use super::privacy_input::{DEFAULT_DISPLAY_DELTA, PrivacyAmount, PrivacyInput};
use super::rate_limit::{Limited, Submissions};
use crate::app::studies::{self as app, SiteRequest, StudyOutcome, StudyPrivacy, StudyRequest};
use crate::dataset::Relation;
use crate::protocols::StudyAlgorithm;
use crate::state::AppState;
use crate::store::{SiteStatus, StudyRecord, StudySiteRecord, StudyStatus};

/// A study's relation when the request names none: `replace_one`, as for a records dataset.
fn replace_one() -> Relation {
    Relation::ReplaceOne
}

/// The relations a study (records held at the sites) can have.
fn study_relation_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    privpca_core::names::enum_schema(
        "`replace_one` (n is public; sites report their n) or `add_remove` (n stays private).",
        &[Relation::ReplaceOne.as_str(), Relation::AddRemove.as_str()],
    )
}

/// One site to invite.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateStudySite {
    /// A name for people, unique in the study: 1 to 100 characters, not only white space, no NUL character.
    #[schema(min_length = 1, max_length = 100, pattern = r"^[^\u0000]*\S[^\u0000]*$")]
    pub name: String,
    /// The coordinator-side budget of this site (ρ): the study is refused if it costs more.
    /// The site's own ledger (`privpca site --budget-rho`) is what the site enforces.
    #[schema(exclusive_minimum = 0.0, maximum = 1e6)]
    pub budget_rho: Option<f64>,
    /// `gossip_power` only (and required there): the number of features this site's agent
    /// holds. Blocks are in site order and sum to the study's `n_features`; the site's data has
    /// exactly these columns, for the same records in the same order at every site.
    #[schema(minimum = 1, maximum = 10000)]
    pub n_features: Option<usize>,
}

/// Create a study.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateStudy {
    /// A name for people: 1 to 200 characters, not only white space, no NUL character (stored trimmed).
    #[schema(min_length = 1, max_length = 200, pattern = r"^[^\u0000]*\S[^\u0000]*$")]
    pub name: String,
    /// `federated_power`, `cape_pca`, `cape_agn` or `gossip_power`.
    #[schema(schema_with = super::params::study_algorithm_schema)]
    pub algorithm: String,
    /// Number of features d every site's data has: at most the server's `--max-d` (the
    /// published maximum is its default).
    #[schema(minimum = 1, maximum = 10000)]
    pub n_features: usize,
    /// `replace_one` (the default, as for a dataset of records: n is public; sites report
    /// their n) or `add_remove` (n stays private).
    #[serde(default = "replace_one")]
    #[schema(schema_with = study_relation_schema)]
    pub relation: Relation,
    /// L2 bound β > 0: every site clips its rows to it.
    #[schema(exclusive_minimum = 0.0)]
    pub row_norm_bound: f64,
    /// Optional L1 bound α > 0 (default √d·β).
    #[schema(exclusive_minimum = 0.0)]
    pub row_l1_bound: Option<f64>,
    /// Algorithm parameters, as for jobs (`k`, `p`, `iterations`, `sensitivity`,
    /// `fraction_bits`, `max_site_samples`, `clip`; `center` and `center_share` in
    /// `federated_power`, `cape_pca` and `gossip_power` studies).
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

fn site_view(site: &StudySiteRecord, shown: f64) -> StudySiteView {
    StudySiteView {
        index: site.index,
        name: site.name.clone(),
        status: site.status,
        n_samples: site.n_samples,
        charged: site.charged_at.map(|_| {
            PrivacyAmount::new(
                site.charged_rho_units.to_real(),
                site.charged_delta_units.to_real(),
                shown,
            )
        }),
        dropped_round: site.dropped_round,
    }
}

/// The total record count, when every participating site's n is public.
fn total_samples(relation: Relation, sites: &[StudySiteView]) -> Option<i64> {
    let counted: Vec<&StudySiteView> = sites
        .iter()
        .filter(|s| !matches!(s.status, SiteStatus::Dropped | SiteStatus::Invited))
        .collect();
    if relation == Relation::ReplaceOne && !counted.is_empty() {
        counted.iter().map(|s| s.n_samples).sum::<Option<i64>>()
    } else {
        None
    }
}

fn study_view(study: &StudyRecord, sites: &[StudySiteRecord]) -> StudyView {
    let shown = display_delta(&study.privacy);
    let sites: Vec<StudySiteView> = sites.iter().map(|s| site_view(s, shown)).collect();
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
            study.cost_rho_units.to_real(),
            study.cost_delta_units.to_real(),
            shown,
        ),
        join_deadline: study.join_deadline,
        round_timeout_seconds: study.round_timeout_ms as f64 / 1000.0,
        n_samples: total_samples(study.relation, &sites),
        sites,
        error: study.error.clone(),
        created_at: study.created_at,
        started_at: study.started_at,
        finished_at: study.finished_at,
        result_url: (study.status == StudyStatus::Succeeded)
            .then(|| format!("/v1/studies/{}/result", study.id)),
    }
}

impl CreateStudy {
    /// The use case's request, and the privacy as stated and parsed (a bad amount is reported
    /// after the study's other terms are checked).
    fn into_request(self) -> Result<(StudyRequest, StudyPrivacy), ApiError> {
        let stated = serde_json::to_value(&self.privacy).map_err(ApiError::internal)?;
        let privacy = StudyPrivacy {
            target: self.privacy.parse("privacy"),
            stated: strip_nulls(stated),
        };
        let request = StudyRequest {
            name: self.name,
            algorithm: self.algorithm,
            n_features: self.n_features,
            relation: self.relation,
            row_norm_bound: self.row_norm_bound,
            row_l1_bound: self.row_l1_bound,
            params: self.params,
            threshold: self.threshold,
            sites: self
                .sites
                .into_iter()
                .map(|s| SiteRequest {
                    name: s.name,
                    budget_rho: s.budget_rho,
                    n_features: s.n_features,
                })
                .collect(),
            join_timeout_seconds: self.join_timeout_seconds,
            round_timeout_seconds: self.round_timeout_seconds,
        };
        Ok((request, privacy))
    }
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
    let (request, privacy) = body.into_request()?;
    let created = app::create(&state, auth.tenant_id, request, privacy).await?;
    let (study, sites) = (&created.study, &created.sites);
    let answer = StudyCreated {
        id: study.id,
        status: study.status,
        sites: sites
            .iter()
            .zip(created.tokens)
            .map(|(s, token)| SiteToken {
                index: s.index,
                name: s.name.clone(),
                token,
            })
            .collect(),
        study: study_view(study, sites),
    };
    let location = format!("/v1/studies/{}", study.id);
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], Json(answer)).into_response())
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
    let (study, sites) = app::get(&state, auth.tenant_id, id).await?;
    Ok(Json(study_view(&study, &sites)))
}

/// The tenant's studies, oldest first (without their sites; read one study for those).
#[utoipa::path(get, operation_id = "list_studies", path = "/v1/studies", tag = "studies", security(("api_key" = [])),
    responses((status = 200, body = Vec<StudyView>)))]
pub async fn list(State(state): State<AppState>, auth: TenantAuth) -> Result<Json<Vec<StudyView>>, ApiError> {
    let studies = app::list(&state, auth.tenant_id).await?;
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
    let (study, sites) = app::cancel(&state, auth.tenant_id, id).await?;
    Ok(Json(study_view(&study, &sites)))
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
    /// The study's private clip (`clip` other than `"none"`): `clip_norm`, the c the rows were
    /// clipped at, `quantile`, and `steps`, each step's c and noisy count (DP releases).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub clip: Option<serde_json::Value>,
    /// The centre μ̂ the sites' rows were mapped by before the power rounds (`center`
    /// `"private"`: a DP release of the pooled mean; a given centre: that vector), d numbers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub center: Option<Vec<f64>>,
    /// The receipt of the charge of the study's roster in the study's transparency log,
    /// checkable offline with `GET /v1/ledger-key`'s key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt: Option<super::ledger_log::ReceiptView>,
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
    let outcome = app::outcome(&state, auth.tenant_id, id).await?;
    if npy {
        let result = &outcome.result;
        return Ok(npy_response(result.d, result.k, &result.basis));
    }
    let receipt = crate::app::ledger_log::study_receipt(&state, auth.tenant_id, id).await?;
    Ok(Json(StudyResultView {
        receipt: receipt.map(super::ledger_log::ReceiptView::from),
        ..result_view(outcome)
    })
    .into_response())
}

/// The names of the sites whose indices `indices` lists (`site <i>` for an unknown index).
fn site_names(sites: &[StudySiteRecord], indices: Option<&serde_json::Value>) -> Vec<String> {
    let name = |i: u64| -> String {
        sites
            .iter()
            .find(|s| u64::from(s.index) == i)
            .map_or_else(|| format!("site {i}"), |s| s.name.clone())
    };
    indices
        .and_then(|v| v.as_array())
        .map(|a| a.iter().filter_map(|x| x.as_u64()).map(name).collect())
        .unwrap_or_default()
}

/// Every round of a `federated_power` report, with its sites named.
fn round_views(sites: &[StudySiteRecord], report: &serde_json::Value) -> Vec<StudyRoundView> {
    let round = |r: &serde_json::Value| StudyRoundView {
        round: r.get("round").and_then(|v| v.as_u64()).unwrap_or(0) as u32,
        survivors: site_names(sites, r.get("survivors")),
        dropped: site_names(sites, r.get("dropped")),
        achieved_multiplier: r
            .get("achieved_multiplier")
            .and_then(|v| v.as_f64())
            .unwrap_or(0.0),
    };
    report
        .get("rounds")
        .and_then(|r| r.as_array())
        .map(|rounds| rounds.iter().map(round).collect())
        .unwrap_or_default()
}

fn result_view(outcome: StudyOutcome) -> StudyResultView {
    let StudyOutcome { study, sites, result } = outcome;
    let report = result.report.unwrap_or_default();
    let rounds = round_views(&sites, &report);
    let view = study_view(&study, &sites);
    StudyResultView {
        study_id: study.id,
        n_features: result.d,
        n_components: result.k,
        basis: basis_columns(result.d, &result.basis),
        eigenvalues: result.eigenvalues,
        cost: view.cost,
        survivors: match rounds.last() {
            Some(r) => r.survivors.clone(),
            None => site_names(&sites, report.get("survivors")),
        },
        target_multiplier: report.get("target_multiplier").and_then(|v| v.as_f64()),
        achieved_multiplier: report.get("achieved_multiplier").and_then(|v| v.as_f64()),
        rounds,
        noise: StudyAlgorithm::from_name(&study.algorithm)
            .is_some_and(StudyAlgorithm::reports_noise)
            .then(|| report.clone()),
        clip: report.get("clip").cloned(),
        center: report
            .get("center")
            .and_then(|v| serde_json::from_value(v.clone()).ok()),
        receipt: None,
    }
}
