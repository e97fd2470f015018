//! The paid private spectrum of a forecast (issue 41, docs/design/forecast.md "A paid private
//! spectrum"): a share of the forecast job's ρ spent, as a job on the ledger, on the dataset's
//! noisy eigenvalues ([`crate::algorithms::spectrum`]), and the scenario they state. Reusing a
//! finished spectrum job (`scenario.spectrum_job`) is post-processing and charges nothing.

use std::time::Duration;

use uuid::Uuid;

use super::error::AppError;
use super::jobs::submit_spectrum;
use super::targets::PrivacyInput;
use crate::algorithms::spectrum::NAME;
use crate::forecast::Scenario;
use crate::privacy::PrivacyTarget;
use crate::state::AppState;
use crate::store::{DatasetRecord, JobRecord, JobStatus};

/// How long a plan request waits for the spectrum job it paid for before answering with the
/// job's id instead (the client then forecasts from it with `scenario.spectrum_job`).
pub const WAIT: Duration = Duration::from_secs(15);
const POLL: Duration = Duration::from_millis(40);

/// Where a forecast's scenario comes from.
#[derive(Debug, Clone)]
pub enum ScenarioSource {
    /// Stated in the request: free.
    Stated { eigenvalues: Vec<f64>, noise_floor: f64 },
    /// A share of the job's ρ spent on the dataset's private spectrum now.
    PrivateSpectrum { share: f64 },
    /// The release of an earlier spectrum job (already paid for): free.
    SpectrumJob(Uuid),
}

/// The spectrum a forecast used or paid for.
#[derive(Debug, Clone)]
pub struct SpectrumUse {
    pub job: JobRecord,
    /// Charged by this request (not an earlier job reused).
    pub charged_now: bool,
    /// ρ the spectrum job was charged.
    pub rho: f64,
    /// The released eigenvalue estimates of C = XᵀX/n (entry i estimates the i-th largest),
    /// once the job is done.
    pub eigenvalues: Option<Vec<f64>>,
    /// The sd of each estimate's noise, on C's scale.
    pub noise_sd: f64,
    /// The scenario they state, once done (or why they state none).
    pub scenario: Option<Result<Scenario, String>>,
}

/// Checks a share of ρ to spend: in (0, 1].
pub fn check_share(share: f64) -> Result<(), AppError> {
    if share > 0.0 && share <= 1.0 {
        Ok(())
    } else {
        Err(AppError::validation(
            "scenario.private_spectrum.share",
            "the share of the job's ρ spent on the spectrum must lie in (0, 1]",
        ))
    }
}

/// Spends `share` of `target`'s ρ on the dataset's private spectrum (a job charged like any
/// other), waits up to [`WAIT`] for it, and reads its release. The caller has checked
/// everything else about the request first, so that nothing is charged for a request that
/// would then be refused.
pub async fn pay(
    state: &AppState,
    tenant: Uuid,
    dataset: &DatasetRecord,
    share: f64,
    target: &PrivacyTarget,
) -> Result<SpectrumUse, AppError> {
    check_share(share)?;
    let mut rho = share * target.rho;
    // Never above the share in floating point.
    while rho > share * target.rho {
        rho = rho.next_down();
    }
    let privacy = PrivacyInput {
        rho: Some(rho),
        epsilon: None,
        delta: None,
    };
    let submitted = submit_spectrum(state, tenant, dataset, privacy).await?;
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut job = submitted.job.record;
    while !job.status.is_terminal() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(POLL).await;
        job = state
            .store
            .get_job(tenant, job.id)
            .await?
            .ok_or_else(|| AppError::internal("the spectrum job vanished"))?;
    }
    read(state, tenant, dataset, job, true).await
}

/// The spectrum of an earlier spectrum job of this tenant on `dataset`.
pub async fn reuse(
    state: &AppState,
    tenant: Uuid,
    dataset: &DatasetRecord,
    job_id: Uuid,
) -> Result<SpectrumUse, AppError> {
    let job = state
        .store
        .get_job(tenant, job_id)
        .await?
        .filter(|j| j.algorithm == NAME)
        .ok_or_else(|| {
            AppError::validation(
                "scenario.spectrum_job",
                format!(
                    "no spectrum job {job_id} of yours (a job a forecast paid for with private_spectrum)"
                ),
            )
        })?;
    if job.dataset_id != dataset.id {
        return Err(AppError::validation(
            "scenario.spectrum_job",
            "the spectrum job was run on another dataset",
        ));
    }
    read(state, tenant, dataset, job, false).await
}

async fn read(
    state: &AppState,
    tenant: Uuid,
    dataset: &DatasetRecord,
    job: JobRecord,
    charged_now: bool,
) -> Result<SpectrumUse, AppError> {
    let n = dataset
        .n
        .filter(|n| *n > 0)
        .ok_or_else(|| AppError::internal("the dataset has no public n"))? as f64;
    let rho = job
        .privacy
        .get("rho")
        .and_then(serde_json::Value::as_f64)
        .unwrap_or(0.0);
    let noise_sd = job
        .config
        .get("noise_sd")
        .and_then(serde_json::Value::as_f64)
        .ok_or_else(|| AppError::internal("the spectrum job has no noise scale"))?
        / n;
    let released = if job.status == JobStatus::Succeeded {
        state
            .store
            .job_result(tenant, job.id)
            .await?
            .and_then(|r| r.eigenvalues)
            .map(|values| values.iter().map(|v| v / n).collect::<Vec<f64>>())
    } else {
        None
    };
    let scenario = released.as_ref().map(|values| {
        Scenario::from_private_spectrum(values, noise_sd)
            .map_err(|e| format!("the private spectrum states no scenario: {}", e.message))
    });
    Ok(SpectrumUse {
        job,
        charged_now,
        rho,
        eigenvalues: released,
        noise_sd,
        scenario,
    })
}
