//! `GET /v1/algorithms` and `POST /v1/privacy/plan`: what can run, and what it would cost,
//! without touching any data.

use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use super::auth::TenantAuth;
use super::datasets::{DatasetView, display_delta};
use super::error::{ApiError, Json, ProblemDocument};
use super::forecast::{
    ForecastView, NeededView, PlanDataInput, ProxyView, ScenarioInput, SpectrumView, TargetInput,
};
use super::privacy_input::{DEFAULT_DISPLAY_DELTA, PrivacyAmount, PrivacyInput};
use crate::algorithms::{self, DynAlgorithm, NoiseScale};
use crate::app::forecast::PlanData;
use crate::app::plan::{self as use_case, Plan};
use crate::dataset::{Kind, Relation};
use crate::state::AppState;

/// An algorithm the service offers.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AlgorithmView {
    pub name: String,
    pub summary: String,
    /// Source paper with algorithm/equation numbers.
    pub source: String,
    /// Dataset kinds it runs on.
    pub kinds: Vec<Kind>,
    /// Neighbouring relations it has a privacy proof for.
    pub relations: Vec<Relation>,
    /// JSON Schema of `params`, with defaults.
    #[schema(value_type = Object)]
    pub parameters: Value,
    /// One line: the guarantee and how it is charged.
    pub privacy: String,
    /// Runs only on `public: true` datasets.
    pub public_only: bool,
    /// Why some dataset kinds or relations are not supported, when some are not.
    pub scope_reason: Option<String>,
    /// Runs on sparse matrix datasets (Matrix Market uploads) through sparse products, never
    /// densifying; the others refuse them (422).
    pub sparse: bool,
}

impl From<&dyn DynAlgorithm> for AlgorithmView {
    fn from(algorithm: &dyn DynAlgorithm) -> Self {
        let info = algorithm.info();
        Self {
            parameters: algorithm.parameters(),
            name: info.name.into(),
            summary: info.summary.into(),
            source: info.source.into(),
            kinds: info.kinds.to_vec(),
            relations: info.relations.to_vec(),
            privacy: info.privacy.into(),
            public_only: info.public_only,
            scope_reason: info.scope_reason.map(str::to_string),
            sparse: info.sparse,
        }
    }
}

/// Every algorithm with its parameter schema, sources and privacy statement.
#[utoipa::path(get, operation_id = "list_algorithms", path = "/v1/algorithms", tag = "algorithms", responses((status = 200, body = Vec<AlgorithmView>)))]
pub async fn list() -> Json<Vec<AlgorithmView>> {
    Json(
        algorithms::registry()
            .iter()
            .map(|a| AlgorithmView::from(*a))
            .collect(),
    )
}

/// Plan a job without running it (no data is read).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanRequest {
    /// The privacy a job would spend (optional on a public dataset, as for jobs).
    pub privacy: Option<PrivacyInput>,
    /// With `algorithm`: price the job on this dataset (its metadata and public shape only).
    pub dataset_id: Option<Uuid>,
    /// With `dataset_id`: the algorithm to price (a name of `GET /v1/algorithms`, or `auto`).
    #[schema(schema_with = super::params::optional_job_algorithm_schema)]
    pub algorithm: Option<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub params: Value,
    /// δ at which to show ρ as ε, in (0, 0.999999] (default: the dataset's, else 1e-6).
    #[schema(exclusive_minimum = 0.0, maximum = 0.999_999)]
    pub display_delta: Option<f64>,
    /// Instead of `dataset_id`: the public shape a job would run on, before any upload.
    pub data: Option<PlanDataInput>,
    /// A spectrum scenario: the answer's `forecast` holds what the job would capture under it
    /// (free: simulated, nothing read or charged). Needs `data`, or a dataset whose n is public.
    pub scenario: Option<ScenarioInput>,
    /// With `scenario`: the captured energy to reach; the answer's `needed` holds the least
    /// privacy that reaches it.
    pub target: Option<TargetInput>,
}

/// One calibrated noise scale.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct NoiseView {
    pub release: String,
    pub distribution: String,
    /// Noise multiplier s: std = s × sensitivity (Gaussian), scale b (Laplace).
    pub multiplier: f64,
    /// Fixed sensitivity bound, if known before running.
    pub sensitivity: Option<f64>,
    pub count: usize,
    pub description: String,
}

impl From<NoiseScale> for NoiseView {
    fn from(n: NoiseScale) -> Self {
        Self {
            release: n.release,
            distribution: n.distribution,
            multiplier: n.multiplier,
            sensitivity: n.sensitivity,
            count: n.count,
            description: n.description,
        }
    }
}

/// Both conversions between ρ and (ε, δ): CKS 2020 (valid for any zCDP mechanism; what
/// budgets with any non-Gaussian charge and (ε, δ) job targets use) and the exact curve of the
/// Gaussian mechanism (valid while every charge is Gaussian; Balle & Wang 2018).
#[derive(Debug, Serialize, ToSchema)]
pub struct Conversions {
    /// The δ of the conversions.
    pub delta: f64,
    /// ρ → ε by CKS 2020 (the tighter of it and Bun–Steinke).
    pub epsilon_cks: f64,
    /// ρ → ε by the exact Gaussian curve, if ρ is spent by Gaussian mechanisms only; null where
    /// the curve has no finite value in floating point (ρ near the ledger's largest, 10⁶).
    pub epsilon_exact_gaussian: Option<f64>,
    /// For a target stated as (ε, δ): the ρ it converts to by CKS (what a job with non-Gaussian
    /// parts and no approximate δ is calibrated to; docs/design/privacy.md §2.4).
    pub rho_cks: Option<f64>,
    /// For a target stated as (ε, δ): the most ρ Gaussian mechanisms may spend by the exact
    /// curve (what a Gaussian-only job is calibrated to).
    pub rho_exact_gaussian: Option<f64>,
}

impl Conversions {
    fn of(target: &crate::privacy::PrivacyTarget, shown: f64) -> Self {
        use crate::privacy::gaussian_curve::{epsilon_for, max_gaussian_rho, mu_of_rho};
        let epsilon_cks = crate::privacy::Delta::new(shown)
            .map(|d| crate::privacy::rho_to_epsilon(target.rho, d))
            .unwrap_or(f64::INFINITY);
        let stated = target.epsilon.zip(target.delta);
        Conversions {
            delta: shown,
            epsilon_cks,
            epsilon_exact_gaussian: Some(epsilon_for(mu_of_rho(target.rho), shown)).filter(|e| e.is_finite()),
            rho_cks: stated.map(|_| target.rho),
            rho_exact_gaussian: stated.map(|(e, d)| max_gaussian_rho(e, d)),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PlanView {
    /// The requested privacy as ρ and (ε, δ).
    pub requested: PrivacyAmount,
    /// The requested privacy under both conversions of docs/design/privacy.md §2.
    pub conversions: Conversions,
    /// What the job would be charged (with `algorithm` and `dataset_id`).
    pub cost: Option<PrivacyAmount>,
    /// The full configuration that would run, noise calibrated.
    #[schema(value_type = Option<Object>)]
    pub config: Option<Value>,
    pub noise: Vec<NoiseView>,
    /// Whether the cost fits the dataset's remaining budget (public datasets: always).
    pub fits_budget: Option<bool>,
    pub remaining: Option<PrivacyAmount>,
    /// With `algorithm: "auto"`: which algorithm would run, and why.
    #[schema(value_type = Option<Object>)]
    pub selection: Option<Value>,
    /// With `scenario`: what the job would capture.
    pub forecast: Option<ForecastView>,
    /// With `scenario` and `target`: the least privacy that reaches the target.
    pub needed: Option<NeededView>,
    /// With `scenario.private_spectrum` or `spectrum_job`: the **paid** private spectrum the
    /// forecast ran on, and its job.
    pub spectrum: Option<SpectrumView>,
    /// With `scenario.proxy_dataset`: the public dataset whose exact spectrum the forecast ran
    /// on (free).
    pub proxy: Option<ProxyView>,
}

/// Convert between ρ and (ε, δ), show the noise a job would use and whether it fits the
/// remaining budget. Touches no data and spends nothing.
#[utoipa::path(post, operation_id = "plan_privacy", path = "/v1/privacy/plan", tag = "privacy", request_body = PlanRequest, security(("api_key" = [])),
    responses((status = 200, body = PlanView), (status = 404, body = ProblemDocument), (status = 422, body = ProblemDocument)))]
pub async fn plan(
    State(state): State<AppState>,
    auth: TenantAuth,
    Json(body): Json<PlanRequest>,
) -> Result<Json<PlanView>, ApiError> {
    let asked = body.display_delta;
    let forecast = super::forecast::ask(body.scenario, body.target)?;
    let request = use_case::PlanRequest {
        privacy: body.privacy,
        dataset_id: body.dataset_id,
        algorithm: body.algorithm,
        params: body.params,
        display_delta: asked,
        data: body.data.map(|d| PlanData {
            kind: d.kind,
            n_samples: d.n_samples,
            n_features: d.n_features,
            row_norm_bound: d.row_norm_bound,
            relation: d.relation.unwrap_or(Relation::ReplaceOne),
        }),
        forecast,
    };
    let plan = use_case::plan(&state, auth.tenant_id, request).await?;
    Ok(Json(PlanView::of(plan, asked)))
}

impl PlanView {
    /// The plan shown at the `asked` display δ, else the stated δ, the dataset's display δ or 1e-6.
    fn of(plan: Plan, asked: Option<f64>) -> Self {
        let Plan {
            privacy,
            target,
            dataset,
            job,
            fits_budget,
            forecast,
            needed,
            spectrum,
            proxy,
        } = plan;
        let charged_now = spectrum.as_ref().is_some_and(|s| s.charged_now);
        let shown = asked
            .or(privacy.delta)
            .or(dataset.as_ref().map(display_delta))
            .unwrap_or(DEFAULT_DISPLAY_DELTA);
        let mut view = PlanView {
            requested: PrivacyAmount::new(target.rho, target.delta.unwrap_or(0.0), shown).gaussian_only(true),
            conversions: Conversions::of(&target, shown),
            cost: None,
            config: None,
            noise: Vec::new(),
            fits_budget,
            remaining: dataset
                .as_ref()
                .and_then(|d| DatasetView::from(d).budget)
                .map(|b| b.remaining),
            selection: None,
            forecast: forecast.map(|f| ForecastView {
                free: !charged_now,
                ..ForecastView::from(f)
            }),
            needed: needed.map(NeededView::from),
            spectrum: spectrum.map(SpectrumView::from),
            proxy: proxy.map(ProxyView::from),
        };
        if let Some(job) = job {
            let priced = job.priced;
            view.cost = Some(PrivacyAmount::of_charge(
                priced.charge,
                shown,
                privacy.delta.unwrap_or(shown),
            ));
            view.config = Some(priced.prepared.config);
            view.noise = priced.prepared.noise.into_iter().map(NoiseView::from).collect();
            view.selection = job.selection;
        }
        view
    }
}
