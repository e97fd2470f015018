//! The utility forecast of `POST /v1/privacy/plan` (issue 41, docs/design/forecast.md): on
//! public facts stated in the request (`data`) or read from a dataset's metadata, and a spectrum
//! scenario, what a job would capture, and with a target, the least ρ that reaches it. Draws
//! nothing from private data and charges nothing; the simulation is [`crate::forecast`].

use serde_json::Value;
use tokio::sync::Semaphore;
use uuid::Uuid;

use super::error::AppError;
use super::pricing::{Resolved, find_algorithm, resolve};
use super::targets::PrivacyInput;
use crate::algorithms;
use crate::context::data_context;
use crate::dataset::{Kind, Relation};
use crate::forecast::{self, ForecastError, Outcome, Scenario, Synthetic};
use crate::privacy::units::MAX_RHO;
use crate::privacy::{Delta, rho_to_epsilon};
use crate::store::{DatasetRecord, DatasetStatus};

/// The largest d a forecast simulates: each run's d×d noise and eigendecomposition take about
/// a second at d = 1000 (docs/design/forecast.md).
pub const MAX_FORECAST_D: usize = 1_000;
/// The largest d the inverse search (`target`) runs at: it runs about nine forecasts.
pub const MAX_TARGET_D: usize = 500;
/// The largest n a forecast takes (beyond, the scaled run is the same).
pub const MAX_FORECAST_N: u64 = 1_000_000_000_000;
/// The seed of every forecast: the same request gets the same answer.
const SEED: u64 = 0x0041_f0ec_a570;
/// Repetitions per evaluation of the inverse search at `d`: a quarter of a forecast's (it
/// tries about nine ρ), 3 to 12.
fn search_repetitions(d: usize) -> usize {
    (forecast::repetitions(d) / 4).clamp(3, 12)
}
/// The range the inverse search looks in.
const SEARCH_LOWEST_RHO: f64 = 1e-9;

/// At most two forecasts simulate at once in a process, so they cannot crowd out the jobs.
static RUNNING: Semaphore = Semaphore::const_new(2);

/// The public shape a forecast is stated for, before any upload (`data` of the request).
#[derive(Debug, Clone)]
pub struct PlanData {
    pub kind: Kind,
    pub n_samples: u64,
    pub n_features: u64,
    pub row_norm_bound: f64,
    pub relation: Relation,
}

/// What to forecast: the scenario and, optionally, the captured energy to reach.
#[derive(Debug, Clone)]
pub struct ForecastRequest {
    pub eigenvalues: Vec<f64>,
    pub noise_floor: f64,
    pub target: Option<f64>,
    /// The spectrum is of records already clipped (a private spectrum): simulate the scenario
    /// whose clipped records have it ([`Scenario::matched_to_clip`]), not this one clipped again.
    pub clipped_already: bool,
}

/// Records the clip-matching of a private spectrum draws per round: enough for the listed
/// values to about 1 % at small d, about 2·10⁶ values at large d.
fn match_rows(n: u64, d: usize) -> usize {
    (n.min(20_000) as usize).min((2_000_000 / d.max(1)).max(2_000))
}

/// The forecast of one job.
#[derive(Debug, Clone)]
pub struct JobForecast {
    /// The algorithm that would run (what `auto` would pick).
    pub algorithm: String,
    pub outcome: Outcome,
    /// Records simulated (n, or fewer for a scaled run).
    pub simulated_records: usize,
}

/// The least ρ that reaches the target, per algorithm.
#[derive(Debug, Clone)]
pub struct Needed {
    /// The δ ε is stated at.
    pub delta: f64,
    /// The algorithm that needs the least, with its ρ; `None` if none reaches the target.
    pub best: Option<(&'static str, f64)>,
    pub by_algorithm: Vec<(&'static str, Option<f64>)>,
}

impl Needed {
    /// ε at the answer's δ for `rho` (CKS 2020, the conversion any zCDP job may use: a job
    /// stated at this (ε, δ) gets at least ρ).
    pub fn epsilon(&self, rho: f64) -> f64 {
        Delta::new(self.delta)
            .map(|d| rho_to_epsilon(rho, d))
            .unwrap_or(f64::INFINITY)
    }
}

/// A records dataset with the stated public shape and no budget, for pricing and forecasting.
pub fn stated_dataset(tenant: Uuid, data: &PlanData) -> Result<DatasetRecord, AppError> {
    if data.kind != Kind::Records {
        return Err(AppError::validation(
            "data.kind",
            "forecasts are made for records datasets (kind \"records\")",
        ));
    }
    if data.relation == Relation::Entry {
        return Err(AppError::validation(
            "data.relation",
            "records datasets are replace_one or add_remove",
        ));
    }
    if !(1..=MAX_FORECAST_N).contains(&data.n_samples) {
        return Err(AppError::validation(
            "data.n_samples",
            format!("n_samples must lie in [1, {MAX_FORECAST_N}]"),
        ));
    }
    if !(1..=MAX_FORECAST_D as u64).contains(&data.n_features) {
        return Err(AppError::validation(
            "data.n_features",
            format!("n_features must lie in [1, {MAX_FORECAST_D}] for a forecast"),
        ));
    }
    if !(data.row_norm_bound.is_finite() && data.row_norm_bound > 0.0) {
        return Err(AppError::validation(
            "data.row_norm_bound",
            "row_norm_bound must be a finite number > 0",
        ));
    }
    Ok(DatasetRecord {
        id: Uuid::nil(),
        tenant_id: tenant,
        name: "stated in the plan request".into(),
        kind: Kind::Records,
        relation: data.relation,
        row_norm_bound: Some(data.row_norm_bound),
        row_l1_bound: None,
        entry_bound: None,
        public: false,
        budget_rho_units: None,
        budget_delta_units: None,
        spent_rho_units: Default::default(),
        spent_delta_units: Default::default(),
        spent_other_rho_units: Default::default(),
        budget_epsilon_delta: None,
        budget_stated: Value::Null,
        status: DatasetStatus::Ready,
        n: Some(data.n_samples as i64),
        d: Some(data.n_features as i64),
        nnz: None,
        created_at: chrono::Utc::now(),
        deleted_at: None,
    })
}

/// Everything a forecast reads, owned (it runs on a blocking thread).
pub struct Inputs {
    pub dataset: DatasetRecord,
    /// The n simulated: the stated n, or the dataset's when it is public.
    pub n: u64,
    pub algorithm: String,
    pub params: Value,
    pub privacy: PrivacyInput,
    /// Why the job would be refused before it runs (e.g. over the dataset's budget), if so.
    pub refused: Option<String>,
    pub request: ForecastRequest,
    /// The δ `needed` states ε at.
    pub display_delta: f64,
}

/// The shape a forecast simulates, whether stated or a dataset's: dense records with
/// 1 ≤ d ≤ [`MAX_FORECAST_D`] (a dataset's d is not checked by [`stated_dataset`]; a matrix or
/// sparse dataset, or a wide one, would otherwise run records through an algorithm configured
/// for another kind, or an eigendecomposition far past the forecast's budget).
fn check_shape(dataset: &DatasetRecord) -> Result<(), AppError> {
    if dataset.kind != Kind::Records || dataset.nnz.is_some() {
        return Err(AppError::validation(
            "scenario",
            "forecasts are made for dense records datasets",
        ));
    }
    if !dataset
        .d
        .is_some_and(|d| (1..=MAX_FORECAST_D as i64).contains(&d))
    {
        return Err(AppError::validation(
            "scenario",
            format!("forecasts are made for datasets with 1 to {MAX_FORECAST_D} features"),
        ));
    }
    Ok(())
}

/// What a forecast checks besides its scenario: the shape it simulates, the target, the
/// algorithm's name and the privacy (a paid spectrum is charged only after these pass).
pub fn check(
    dataset: &DatasetRecord,
    target: Option<f64>,
    algorithm: &str,
    privacy: &PrivacyInput,
) -> Result<(), AppError> {
    check_shape(dataset)?;
    if let Some(t) = target {
        if !(t > 0.0 && t < 1.0) {
            return Err(AppError::validation(
                "target.captured_energy",
                "the captured energy to reach must lie in (0, 1)",
            ));
        }
        if dataset.d.unwrap_or(0) > MAX_TARGET_D as i64 {
            return Err(AppError::validation(
                "target",
                format!(
                    "the search for the least ρ runs about nine forecasts and is offered up to n_features = {MAX_TARGET_D}; above, compare forecasts at a few ρ"
                ),
            ));
        }
    }
    if algorithm != algorithms::auto::AUTO {
        find_algorithm(algorithm)?;
    }
    privacy.parse("privacy")?;
    Ok(())
}

/// Forecasts on a blocking thread, at most two at once.
pub async fn run(
    tenant: Uuid,
    state: &crate::state::AppState,
    inputs: Inputs,
) -> Result<(JobForecast, Option<Needed>), AppError> {
    state
        .rate_limits
        .check(crate::rate_limits::Action::Submission, tenant)?;
    check(
        &inputs.dataset,
        inputs.request.target,
        &inputs.algorithm,
        &inputs.privacy,
    )?;
    let scenario = Scenario::new(
        inputs.request.eigenvalues.clone(),
        inputs.request.noise_floor,
        inputs.dataset.d.unwrap_or(0) as usize,
    )
    .map_err(|e| AppError::validation(format!("scenario.{}", e.field), e.message))?;
    let permit = RUNNING
        .acquire()
        .await
        .map_err(|_| AppError::internal("the forecast pool is closed"))?;
    // The permit goes with the work: a request that times out does not free a slot while its
    // simulation still runs.
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        compute(&scenario, &inputs)
    })
    .await
    .map_err(AppError::internal)?
}

fn compute(scenario: &Scenario, inputs: &Inputs) -> Result<(JobForecast, Option<Needed>), AppError> {
    let d = inputs.dataset.d.unwrap_or(0) as usize;
    let beta = inputs.dataset.row_norm_bound.unwrap_or(1.0);
    let matched;
    let scenario = if inputs.request.clipped_already {
        matched = scenario.matched_to_clip(d, match_rows(inputs.n, d), beta, SEED ^ 0x5bec);
        &matched
    } else {
        scenario
    };
    let synthetic = Synthetic::draw(scenario, inputs.n as usize, d, beta, SEED);
    let job = match resolve(
        &inputs.algorithm,
        &inputs.dataset,
        &inputs.params,
        Some(&inputs.privacy),
    ) {
        Ok(resolved) => {
            let outcome = match &inputs.refused {
                Some(why) => Outcome::Nothing(why.clone()),
                None => simulate(
                    &resolved,
                    &inputs.dataset,
                    &inputs.params,
                    &synthetic,
                    forecast::repetitions(d),
                )?,
            };
            JobForecast {
                algorithm: resolved.name.to_string(),
                outcome,
                simulated_records: synthetic.drawn(),
            }
        }
        Err(e) => JobForecast {
            algorithm: inputs.algorithm.clone(),
            outcome: Outcome::Nothing(format!("the job would be refused: {}", e.detail)),
            simulated_records: synthetic.drawn(),
        },
    };
    let needed = match inputs.request.target {
        Some(target) => Some(needed(target, inputs, &synthetic)?),
        None => None,
    };
    Ok((job, needed))
}

/// Runs the priced job's algorithm on the synthetic records, at the target it was priced at
/// (the forecast prepares the same configuration again).
fn simulate(
    resolved: &Resolved,
    dataset: &DatasetRecord,
    params: &Value,
    synthetic: &Synthetic,
    repetitions: usize,
) -> Result<Outcome, AppError> {
    let algorithm = find_algorithm(resolved.name)?;
    let ctx = data_context(dataset).ok_or_else(|| AppError::internal("the stated dataset has no shape"))?;
    let target = resolved.priced.privacy.parse("privacy")?;
    forecast::forecast(algorithm, params, &ctx, &target, synthetic, repetitions, SEED).map_err(too_large)
}

fn too_large(e: ForecastError) -> AppError {
    AppError::validation("data.n_samples", e.to_string())
}

/// The least ρ reaching `target` for the requested algorithm, or for each of `auto`'s
/// candidates.
fn needed(target: f64, inputs: &Inputs, synthetic: &Synthetic) -> Result<Needed, AppError> {
    let candidates: Vec<&'static str> = if inputs.algorithm == algorithms::auto::AUTO {
        let ctx = data_context(&inputs.dataset)
            .ok_or_else(|| AppError::internal("the stated dataset has no shape"))?;
        algorithms::auto::candidates(&ctx)
            .into_iter()
            .map(|(name, _)| name)
            .collect()
    } else {
        vec![find_algorithm(&inputs.algorithm)?.info().name]
    };
    let start = inputs.privacy.parse("privacy")?.rho;
    let mut by_algorithm = Vec::new();
    for name in candidates {
        let mut failure = None;
        let found = forecast::smallest_rho(target, start, (SEARCH_LOWEST_RHO, MAX_RHO), |rho| {
            let privacy = PrivacyInput {
                rho: Some(rho),
                epsilon: None,
                delta: inputs.privacy.delta,
            };
            let Ok(resolved) = resolve(name, &inputs.dataset, &inputs.params, Some(&privacy)) else {
                return 0.0;
            };
            match simulate(
                &resolved,
                &inputs.dataset,
                &inputs.params,
                synthetic,
                search_repetitions(synthetic.d()),
            ) {
                Ok(outcome) => outcome.captured_energy(),
                Err(e) => {
                    failure = Some(e);
                    0.0
                }
            }
        });
        if let Some(e) = failure {
            return Err(e);
        }
        by_algorithm.push((name, found));
    }
    let best = by_algorithm
        .iter()
        .filter_map(|(name, rho)| rho.map(|r| (*name, r)))
        .min_by(|a, b| a.1.total_cmp(&b.1));
    Ok(Needed {
        delta: inputs.display_delta,
        best,
        by_algorithm,
    })
}
