//! Planning: what a privacy target amounts to, and, on a dataset, what a job would cost and
//! whether the ledger would admit it. Reads no data and spends nothing.

use serde_json::Value;
use uuid::Uuid;

use super::error::AppError;
use super::pricing::{Resolved, job_privacy, resolve};
use super::targets::{MAX_DELTA, PrivacyInput};
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
}

/// Plans `request` for `tenant`.
pub async fn plan(state: &AppState, tenant: Uuid, request: PlanRequest) -> Result<Plan, AppError> {
    let dataset = match request.dataset_id {
        Some(id) => Some(super::datasets::get(state, tenant, id).await?),
        None => None,
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
    let target = privacy.parse("privacy")?;
    check_display_delta(request.display_delta)?;
    let mut plan = Plan {
        privacy,
        target,
        dataset: None,
        job: None,
        fits_budget: None,
    };
    let Some(dataset) = dataset else {
        if request.algorithm.is_some() {
            return Err(AppError::validation(
                "dataset_id",
                "pricing an algorithm needs the dataset it would run on",
            ));
        }
        return Ok(plan);
    };
    let charge = match request.algorithm.as_deref() {
        Some(name) => {
            let job = price_on(&dataset, name, &request.params, &plan.privacy)?;
            let charge = job.priced.charge;
            plan.job = Some(job);
            charge
        }
        // Without an algorithm, the requested amount is priced as one Gaussian-only job.
        None => Spending::of_cost(&Cost {
            rho: target.rho,
            delta: target.delta.unwrap_or(0.0),
            other_rho: 0.0,
        }),
    };
    plan.fits_budget = Some(fits_budget(&dataset, charge));
    plan.dataset = Some(dataset);
    Ok(plan)
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
    privacy: &PrivacyInput,
) -> Result<Resolved, AppError> {
    if dataset.status != DatasetStatus::Ready {
        return Err(AppError::conflict(
            "the dataset's shape is known only once its data is uploaded",
        ));
    }
    resolve(algorithm, dataset, params, Some(privacy))
}

/// The ledger's own admission rule ([`admit`]), without charging.
fn fits_budget(dataset: &DatasetRecord, charge: Spending) -> bool {
    dataset.public
        || (dataset.status != DatasetStatus::Deleted
            && dataset
                .budget()
                .is_some_and(|budget| admit(&budget, dataset.spent(), charge).is_some()))
}
