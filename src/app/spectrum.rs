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
    /// The exact spectrum of a public dataset of the same d used as a proxy: free.
    Proxy(Uuid),
}

/// The public dataset a forecast used as its proxy, and the scenario its spectrum states.
#[derive(Debug, Clone)]
pub struct ProxyUse {
    pub dataset_id: Uuid,
    /// The free spectrum job on it (no noise: the dataset is public).
    pub job_id: Uuid,
    pub scenario: Scenario,
}

fn proxy_refused(message: impl Into<String>) -> AppError {
    AppError::validation("scenario.proxy_dataset", message)
}

/// The scenario a public dataset of this tenant states (issue 41: "a public dataset used as a
/// proxy"): the exact sorted spectrum of its C = XᵀX/n, by a free `spectrum` job with no
/// noise (the dataset is public, so nothing about it is private; no ledger is touched), read
/// as [`Scenario::from_private_spectrum`] reads a paid one with noise 0: the top positive
/// eigenvalues listed (at most 100), the mean of the rest as the floor. The proxy must have the
/// forecast's d; its records were clipped to its own β, so the forecast treats the spectrum as
/// that of clipped records (as a paid spectrum's), which fits best when the β's agree.
pub async fn proxy(state: &AppState, tenant: Uuid, proxy_id: Uuid, d: usize) -> Result<ProxyUse, AppError> {
    let dataset = state
        .store
        .get_dataset(tenant, proxy_id)
        .await?
        .ok_or_else(|| proxy_refused(format!("no dataset {proxy_id} of yours")))?;
    if !dataset.public {
        return Err(proxy_refused(
            "a proxy must be a public dataset (reading a private one's spectrum would spend its budget: use private_spectrum)",
        ));
    }
    if dataset.kind != crate::dataset::Kind::Records || dataset.nnz.is_some() {
        return Err(proxy_refused("a proxy must be a dense records dataset"));
    }
    if dataset.d != Some(d as i64) {
        return Err(proxy_refused(format!(
            "the proxy has {} features, the forecast {d}",
            dataset.d.map_or("no".to_string(), |v| v.to_string())
        )));
    }
    let submitted = submit_spectrum(state, tenant, &dataset, None).await?;
    let job = wait(state, tenant, submitted.job.record).await?;
    let n = dataset.n.filter(|n| *n > 0).unwrap_or(0) as f64;
    let released = match job.status {
        JobStatus::Succeeded => state
            .store
            .job_result(tenant, job.id)
            .await?
            .and_then(|r| r.eigenvalues),
        _ => None,
    };
    let Some(values) = released.filter(|_| n > 0.0) else {
        return Err(AppError::conflict(format!(
            "the proxy's spectrum (job {}) is not ready (status {}): ask again",
            job.id,
            job.status.as_str()
        )));
    };
    let values: Vec<f64> = values.iter().map(|v| v / n).collect();
    let scenario = Scenario::from_private_spectrum(&values, 0.0)
        .map_err(|e| proxy_refused(format!("the proxy's spectrum states no scenario: {}", e.message)))?;
    Ok(ProxyUse {
        dataset_id: dataset.id,
        job_id: job.id,
        scenario,
    })
}

/// Polls `job` until it ends or [`WAIT`] has passed.
async fn wait(state: &AppState, tenant: Uuid, mut job: JobRecord) -> Result<JobRecord, AppError> {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !job.status.is_terminal() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(POLL).await;
        job = state
            .store
            .get_job(tenant, job.id)
            .await?
            .ok_or_else(|| AppError::internal("the spectrum job vanished"))?;
    }
    Ok(job)
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
    let privacy = PrivacyInput {
        rho: Some(share * target.rho),
        epsilon: None,
        delta: None,
    };
    let submitted = submit_spectrum(state, tenant, dataset, Some(privacy)).await?;
    let job = wait(state, tenant, submitted.job.record).await?;
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
