//! Planning: what a privacy target amounts to, and, on a dataset or on a public shape stated in
//! the request, what a job would cost, whether the ledger would admit it, and with a spectrum
//! scenario what it would capture ([`super::forecast`]). Reads no data and spends nothing.

use serde_json::Value;
use uuid::Uuid;

use super::error::AppError;
use super::forecast::{ForecastRequest, Inputs, JobForecast, Needed, PlanData, stated_dataset};
use super::pricing::{Resolved, job_privacy, resolve};
use super::spectrum::{ProxyUse, ScenarioSource, SpectrumUse};
use super::targets::{MAX_DELTA, PrivacyInput};
use crate::forecast::Outcome;
use crate::privacy::admission::{Spending, admit};
use crate::privacy::{Cost, PrivacyTarget};
use crate::state::AppState;
use crate::store::{DatasetRecord, DatasetStatus};

/// A plan request, parsed.
pub struct PlanRequest {
    /// The privacy a job would spend (optional on a public dataset).
    pub privacy: Option<PrivacyInput>,
    /// The dataset to price on (its metadata and public shape only).
    pub dataset_id: Option<Uuid>,
    /// The algorithm to price (a name or `auto`); needs `dataset_id`.
    pub algorithm: Option<String>,
    pub params: Value,
    /// δ at which to show ρ as ε, when given.
    pub display_delta: Option<f64>,
    /// The public shape to plan on instead of a dataset (before any upload).
    pub data: Option<PlanData>,
    /// A spectrum scenario to forecast the job's captured energy under.
    pub forecast: Option<ForecastAsk>,
}

/// What to forecast under: where the scenario comes from, and the captured energy to reach.
pub struct ForecastAsk {
    pub source: ScenarioSource,
    pub target: Option<f64>,
}

/// What planning found.
pub struct Plan {
    /// The privacy planned for: as stated, or the public default.
    pub privacy: PrivacyInput,
    pub target: PrivacyTarget,
    pub dataset: Option<DatasetRecord>,
    /// With an algorithm: the job priced, and how `auto` chose.
    pub job: Option<Resolved>,
    /// On a dataset: whether the charge fits its remaining budget (public datasets: always).
    pub fits_budget: Option<bool>,
    /// With a scenario: what the job would capture.
    pub forecast: Option<JobForecast>,
    /// With a scenario and a target: the least ρ that reaches it.
    pub needed: Option<Needed>,
    /// With a private spectrum (paid now or reused): the spectrum job and what it released.
    pub spectrum: Option<SpectrumUse>,
    /// With a public proxy dataset: its free spectrum job and the scenario it states.
    pub proxy: Option<ProxyUse>,
}

/// Plans `request` for `tenant`.
pub async fn plan(state: &AppState, tenant: Uuid, mut request: PlanRequest) -> Result<Plan, AppError> {
    let (dataset, privacy) = dataset_and_privacy(state, tenant, &request).await?;
    let target = privacy.parse("privacy")?;
    check_display_delta(request.display_delta)?;
    let mut plan = Plan {
        privacy,
        target,
        dataset: None,
        job: None,
        fits_budget: None,
        forecast: None,
        needed: None,
        spectrum: None,
        proxy: None,
    };
    let Some(dataset) = dataset else {
        check_nothing_to_price(&request)?;
        return Ok(plan);
    };
    let stated = request.data.is_some();
    let ask = request.forecast.take();
    let algorithm = request.algorithm.clone().or_else(|| {
        // A forecast prices the job it forecasts (`auto` unless named), so that its refusal
        // over the remaining budget is the job's, not a Gaussian job's of the requested ρ.
        ask.is_some().then(|| crate::algorithms::auto::AUTO.to_string())
    });
    let (priced, charge) = price(&dataset, algorithm.as_deref(), ask.is_some(), &request, &target)?;
    plan.job = priced;
    if !stated {
        plan.fits_budget = Some(fits_budget(&dataset, charge));
    }
    let dataset = match ask {
        Some(ask) => {
            let job = JobAsk {
                request: &request,
                algorithm: algorithm.unwrap_or_default(),
                charge,
            };
            forecast_on(state, tenant, &mut plan, dataset, ask, job).await?
        }
        None => dataset,
    };
    if !stated {
        plan.dataset = Some(dataset);
    }
    Ok(plan)
}

/// The dataset planned on (by id, or the public shape the request states) and the privacy
/// planned for (as stated, or a public dataset's default).
async fn dataset_and_privacy(
    state: &AppState,
    tenant: Uuid,
    request: &PlanRequest,
) -> Result<(Option<DatasetRecord>, PrivacyInput), AppError> {
    let dataset = match (request.dataset_id, &request.data) {
        (Some(_), Some(_)) => {
            return Err(AppError::validation(
                "data",
                "give dataset_id (plan on a dataset) or data (plan on a stated shape), not both",
            ));
        }
        (Some(id), None) => Some(super::datasets::get(state, tenant, id).await?),
        (None, Some(data)) => Some(stated_dataset(tenant, data)?),
        (None, None) => None,
    };
    let privacy = match (&request.privacy, &dataset) {
        (Some(p), _) => p.clone(),
        (None, Some(d)) => job_privacy(d, None)?,
        (None, None) => {
            return Err(AppError::validation(
                "privacy",
                "give the privacy to convert, or the public dataset to plan on",
            ));
        }
    };
    Ok((dataset, privacy))
}

/// Without a dataset or a stated shape, a plan only converts the privacy: a forecast or an
/// algorithm to price is refused, naming what is missing.
fn check_nothing_to_price(request: &PlanRequest) -> Result<(), AppError> {
    if request.forecast.is_some() {
        return Err(AppError::validation(
            "scenario",
            "a forecast needs the public shape: data (kind, n_samples, n_features, row_norm_bound, relation) or a dataset_id",
        ));
    }
    if request.algorithm.is_some() {
        return Err(AppError::validation(
            "dataset_id",
            "pricing an algorithm needs the dataset it would run on, or data stating its shape",
        ));
    }
    Ok(())
}

/// The job priced on `dataset` (none without an algorithm) and the charge the ledger would
/// meet. A forecast reports a job that would be refused as capturing nothing, with the reason,
/// so its refusal is not an error here.
fn price(
    dataset: &DatasetRecord,
    algorithm: Option<&str>,
    forecasting: bool,
    request: &PlanRequest,
    target: &PrivacyTarget,
) -> Result<(Option<Resolved>, Spending), AppError> {
    let priced = match algorithm {
        Some(name) if forecasting => price_on(dataset, name, &request.params, request.privacy.as_ref()).ok(),
        Some(name) => Some(price_on(
            dataset,
            name,
            &request.params,
            request.privacy.as_ref(),
        )?),
        None => None,
    };
    let charge = match &priced {
        Some(job) => job.priced.charge,
        // Without an algorithm, the requested amount is priced as one Gaussian-only job.
        None => Spending::of_cost(&Cost {
            rho: target.rho,
            delta: target.delta.unwrap_or(0.0),
            other_rho: 0.0,
        }),
    };
    Ok((priced, charge))
}

/// The job a forecast is for.
struct JobAsk<'a> {
    request: &'a PlanRequest,
    algorithm: String,
    charge: Spending,
}

/// The scenario a forecast runs under, or the reason there is none yet.
enum ScenarioFound {
    /// Eigenvalues, noise floor, and whether they are of records already clipped.
    Ready(Vec<f64>, f64, bool),
    /// The plan is answered without a forecast (a spectrum still running, or all noise).
    Answered,
}

/// Forecasts the job under `ask`'s scenario into `plan`; returns the dataset as it stands after
/// a paid spectrum's charge.
async fn forecast_on(
    state: &AppState,
    tenant: Uuid,
    plan: &mut Plan,
    mut dataset: DatasetRecord,
    ask: ForecastAsk,
    job: JobAsk<'_>,
) -> Result<DatasetRecord, AppError> {
    let request = job.request;
    let n = match (
        &request.data,
        crate::context::data_context(&dataset).and_then(|c| c.n),
    ) {
        (Some(data), _) => data.n_samples,
        (None, Some(n)) => n as u64,
        (None, None) => {
            return Err(AppError::validation(
                "scenario",
                "this dataset's n is private (relation add_remove) or not yet known: forecast on data stating an n instead",
            ));
        }
    };
    let found = scenario_of(state, tenant, plan, &mut dataset, &ask, &job).await?;
    let ScenarioFound::Ready(eigenvalues, noise_floor, clipped_already) = found else {
        return Ok(dataset);
    };
    let refused = (plan.fits_budget == Some(false) && plan.job.is_some())
        .then(|| "the job would be refused: its cost is above the dataset's remaining budget".to_string());
    let inputs = Inputs {
        dataset: dataset.clone(),
        n,
        algorithm: job.algorithm,
        params: request.params.clone(),
        privacy: plan.privacy.clone(),
        refused,
        request: ForecastRequest {
            eigenvalues,
            noise_floor,
            target: ask.target,
            clipped_already,
        },
        display_delta: request
            .display_delta
            .or(plan.privacy.delta)
            .unwrap_or(super::targets::DEFAULT_DISPLAY_DELTA),
    };
    let (forecast, needed) = super::forecast::run(tenant, state, inputs).await?;
    plan.forecast = Some(forecast);
    plan.needed = needed;
    Ok(dataset)
}

/// Where `ask`'s scenario comes from: stated, a public proxy's exact spectrum, or a private
/// spectrum (paid now, or reused). A paid spectrum is charged here, after everything the
/// forecast checks, and `dataset` is read again so that the job is judged on what is left.
async fn scenario_of(
    state: &AppState,
    tenant: Uuid,
    plan: &mut Plan,
    dataset: &mut DatasetRecord,
    ask: &ForecastAsk,
    job: &JobAsk<'_>,
) -> Result<ScenarioFound, AppError> {
    let used = match &ask.source {
        ScenarioSource::Stated {
            eigenvalues,
            noise_floor,
        } => return Ok(ScenarioFound::Ready(eigenvalues.clone(), *noise_floor, false)),
        ScenarioSource::Proxy(id) => {
            let used = super::spectrum::proxy(state, tenant, *id, dataset.d.unwrap_or(0) as usize).await?;
            let (eigenvalues, floor) = (used.scenario.eigenvalues().to_vec(), used.scenario.noise_floor());
            plan.proxy = Some(used);
            return Ok(ScenarioFound::Ready(eigenvalues, floor, true));
        }
        _ if job.request.data.is_some() => {
            return Err(AppError::validation(
                "scenario",
                "a private spectrum is read from a dataset: give dataset_id, not data",
            ));
        }
        ScenarioSource::PrivateSpectrum { share } => {
            // Everything the forecast checks, checked before anything is charged.
            super::forecast::check(dataset, ask.target, &job.algorithm, &plan.privacy)?;
            let used = super::spectrum::pay(state, tenant, dataset, *share, &plan.target).await?;
            // The spectrum's charge is spent: the job forecast meets what is left.
            *dataset = super::datasets::get(state, tenant, dataset.id).await?;
            plan.fits_budget = Some(fits_budget(dataset, job.charge));
            used
        }
        ScenarioSource::SpectrumJob(id) => {
            super::forecast::check(dataset, ask.target, &job.algorithm, &plan.privacy)?;
            super::spectrum::reuse(state, tenant, dataset, *id).await?
        }
    };
    let scenario = used.scenario.clone();
    plan.spectrum = Some(used);
    match scenario {
        Some(Ok(s)) => Ok(ScenarioFound::Ready(
            s.eigenvalues().to_vec(),
            s.noise_floor(),
            true,
        )),
        // The spectrum is all noise: the job forecasts nothing, and says why.
        Some(Err(why)) => {
            plan.forecast = Some(JobForecast {
                algorithm: plan
                    .job
                    .as_ref()
                    .map_or(job.algorithm.clone(), |j| j.name.to_string()),
                outcome: Outcome::Nothing(why),
                simulated_records: 0,
            });
            Ok(ScenarioFound::Answered)
        }
        // Not released yet: the answer names the job to forecast from later.
        None => Ok(ScenarioFound::Answered),
    }
}

fn check_display_delta(display_delta: Option<f64>) -> Result<(), AppError> {
    match display_delta {
        Some(d) if !(d > 0.0 && d <= MAX_DELTA) => Err(AppError::validation(
            "display_delta",
            format!("display_delta must lie in (0, {MAX_DELTA}]"),
        )),
        _ => Ok(()),
    }
}

fn price_on(
    dataset: &DatasetRecord,
    algorithm: &str,
    params: &Value,
    // As the job would state it: none on a public dataset prices the job with no privacy.
    privacy: Option<&PrivacyInput>,
) -> Result<Resolved, AppError> {
    if dataset.status != DatasetStatus::Ready {
        return Err(AppError::conflict(
            "the dataset's shape is known only once its data is uploaded",
        ));
    }
    resolve(algorithm, dataset, params, privacy)
}

/// The ledger's own admission rule ([`admit`]), without charging.
fn fits_budget(dataset: &DatasetRecord, charge: Spending) -> bool {
    dataset.public
        || (dataset.status != DatasetStatus::Deleted
            && dataset
                .budget()
                .is_some_and(|budget| admit(&budget, dataset.spent(), charge).is_some()))
}
