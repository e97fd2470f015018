//! The job use cases: submit (priced, then charged in the transaction that queues it), read,
//! list, cancel and fetch the result. A job's ρ goes from the client's target
//! (`app/targets.rs`) through pricing (`app/pricing.rs`) to the ledger's atomic
//! check-and-charge (`store::Store::submit_job`), and the runner draws the noise it was
//! calibrated to.

use std::collections::HashMap;

use serde_json::Value;
use uuid::Uuid;

use super::error::{AppError, ErrorKind};
use super::pricing::{Resolved, find_algorithm, resolve};
use super::targets::PrivacyInput;
use crate::algorithms;
use crate::metrics::RefusalReason;
use crate::privacy::units::{DeltaUnits, RhoUnits};
use crate::state::AppState;
use crate::store::{
    CancelOutcome, DatasetRecord, DatasetStatus, Idempotency, JobRecord, JobResult, JobStatus, NewJob,
    SubmitOutcome,
};

/// A job to submit, parsed from the request.
pub struct SubmitRequest {
    pub dataset_id: Uuid,
    /// An algorithm name or `auto`.
    pub algorithm: String,
    pub params: Value,
    pub privacy: Option<PrivacyInput>,
    pub seed: Option<u64>,
    pub idempotency: Option<Idempotency>,
}

/// A job as its owner may see it.
pub struct Job {
    pub record: JobRecord,
    /// Whether its timings may be shown (see [`timings_public`]).
    pub timings_public: bool,
}

/// A submitted job, and whether it is the answer to an earlier request with the same
/// idempotency key (then nothing was charged).
pub struct Submitted {
    pub job: Job,
    pub replayed: bool,
}

/// What cancelling did.
pub enum Cancellation {
    /// The job was queued: cancelled and refunded.
    Refunded(Job),
    /// The job is running: asked to stop; its charge stands.
    Requested(Job),
}

/// Whether a job's timings may be shown: they grow with the number of records n, so they are
/// withheld exactly where n is private (`add_remove` datasets; docs/design/privacy.md §3), and
/// on private sparse matrices, whose run time grows with their number of stored entries:
/// `started_at`, `finished_at`, `queued_ms` and `run_ms` are all withheld there, since any of
/// them with `created_at` gives the run time. The moment the status changes stays observable
/// to a client that polls; it is not padded (privacy.md §3 names this limitation).
pub fn timings_public(dataset: &DatasetRecord) -> bool {
    crate::context::run_time_is_public(dataset)
}

/// The dataset's data must be uploaded before a job can be priced on it.
pub fn require_ready(dataset: &DatasetRecord) -> Result<(), AppError> {
    match dataset.status {
        DatasetStatus::Ready => Ok(()),
        DatasetStatus::Empty => Err(AppError::conflict("the dataset has no data yet; upload it first")),
        DatasetStatus::Uploading => Err(AppError::conflict(
            "the dataset has no data yet; its upload is in progress",
        )),
        DatasetStatus::Deleted => Err(AppError::conflict("the dataset has been deleted")),
    }
}

async fn require_queue_room(state: &AppState) -> Result<(), AppError> {
    let counts = state.store.job_counts().await?;
    let queued = counts
        .iter()
        .find(|(s, _)| *s == JobStatus::Queued)
        .map_or(0, |(_, n)| *n);
    if queued >= state.config.max_queue {
        return Err(
            AppError::new(ErrorKind::QueueFull, "the job queue is full; retry later").retry_after(10),
        );
    }
    Ok(())
}

/// Submit a job: price it on the dataset's public facts, then charge and queue it in one
/// transaction. Over budget is refused with the remaining and requested amounts.
pub async fn submit(state: &AppState, tenant: Uuid, request: SubmitRequest) -> Result<Submitted, AppError> {
    if request.algorithm != algorithms::auto::AUTO {
        find_algorithm(&request.algorithm)?;
    }
    let dataset = super::datasets::get(state, tenant, request.dataset_id).await?;
    require_ready(&dataset)?;
    if request.seed.is_some() && !dataset.public {
        return Err(AppError::validation(
            "seed",
            "seeds are accepted only on public datasets; private jobs draw noise from a fresh OS-seeded generator",
        ));
    }
    let resolved = resolve(
        &request.algorithm,
        &dataset,
        &request.params,
        request.privacy.as_ref(),
    )?;
    charge_and_queue(state, tenant, &dataset, request, resolved).await
}

/// Submits the forecast's paid private spectrum ([`algorithms::spectrum`]) at `privacy` on the
/// tenant's dataset (`None` on a public dataset: its exact spectrum, free, for a forecast's
/// proxy): priced, charged and queued exactly as a job, so it is on the ledger, the dataset's
/// log and its receipt like any other. Not reachable through `POST /v1/jobs`, which
/// offers PCA algorithms only.
pub async fn submit_spectrum(
    state: &AppState,
    tenant: Uuid,
    dataset: &DatasetRecord,
    privacy: Option<PrivacyInput>,
) -> Result<Submitted, AppError> {
    require_ready(dataset)?;
    let params = Value::Object(Default::default());
    let priced = super::pricing::price(
        &algorithms::spectrum::Spectrum,
        dataset,
        params.clone(),
        privacy.as_ref(),
    )?;
    let resolved = Resolved {
        name: algorithms::spectrum::NAME,
        priced,
        selection: None,
    };
    let request = SubmitRequest {
        dataset_id: dataset.id,
        algorithm: algorithms::spectrum::NAME.to_string(),
        params,
        privacy,
        seed: None,
        idempotency: None,
    };
    charge_and_queue(state, tenant, dataset, request, resolved).await
}

/// Charges and queues a priced job in one transaction (the store's atomic check-and-charge).
async fn charge_and_queue(
    state: &AppState,
    tenant: Uuid,
    dataset: &DatasetRecord,
    request: SubmitRequest,
    resolved: Resolved,
) -> Result<Submitted, AppError> {
    require_queue_room(state).await?;
    let algorithm = resolved.name;
    let new = new_job(dataset, request, resolved)?;
    let (record, replayed) = match state.store.submit_job(tenant, new).await? {
        SubmitOutcome::Created(job) => (job, false),
        SubmitOutcome::Replayed(job) => (job, true),
        refused => return Err(refusal(state, dataset.id, algorithm, refused)),
    };
    if !replayed {
        state.jobs.wake();
    }
    let timings_public = timings_public(dataset);
    Ok(Submitted {
        job: Job {
            record,
            timings_public,
        },
        replayed,
    })
}

fn new_job(dataset: &DatasetRecord, request: SubmitRequest, resolved: Resolved) -> Result<NewJob, AppError> {
    let Resolved {
        name,
        priced,
        selection,
    } = resolved;
    let privacy = serde_json::to_value(&priced.privacy).map_err(AppError::internal)?;
    Ok(NewJob {
        dataset_id: dataset.id,
        algorithm: name.to_string(),
        params: request.params,
        config: priced.prepared.config,
        privacy: strip_nulls(privacy),
        cost: priced.charge,
        selection,
        seed: request.seed,
        idempotency: request.idempotency,
    })
}

/// The object without its `null` members.
pub fn strip_nulls(mut value: Value) -> Value {
    if let Some(map) = value.as_object_mut() {
        map.retain(|_, v| !v.is_null());
    }
    value
}

/// The error for a submission the store refused.
fn refusal(state: &AppState, dataset: Uuid, algorithm: &str, outcome: SubmitOutcome) -> AppError {
    match outcome {
        SubmitOutcome::OverBudget {
            remaining_rho_units,
            requested_rho_units,
            remaining_delta_units,
            requested_delta_units,
        } => over_budget(
            state,
            dataset,
            algorithm,
            (remaining_rho_units, remaining_delta_units),
            (requested_rho_units, requested_delta_units),
        ),
        SubmitOutcome::IdempotencyMismatch => AppError::new(
            ErrorKind::IdempotencyMismatch,
            "this Idempotency-Key was used with a different request body",
        ),
        SubmitOutcome::DatasetNotFound => AppError::not_found("dataset", dataset),
        SubmitOutcome::DatasetNotReady(status) => {
            AppError::conflict(format!("the dataset is {}", status.as_str()))
        }
        SubmitOutcome::Created(_) | SubmitOutcome::Replayed(_) => {
            AppError::internal("a submission that was accepted was reported as refused")
        }
    }
}

/// Over budget: counted by the resource that ran short, answered with both amounts. The
/// amounts are `(ρ units, δ units)`.
fn over_budget(
    state: &AppState,
    dataset: Uuid,
    algorithm: &str,
    (remaining_rho, remaining_delta): (RhoUnits, DeltaUnits),
    (requested_rho, requested_delta): (RhoUnits, DeltaUnits),
) -> AppError {
    let short_of_rho = requested_rho > remaining_rho;
    let reason = if short_of_rho {
        RefusalReason::Rho
    } else {
        RefusalReason::Delta
    };
    state.metrics.budget_refusal(algorithm, reason);
    let remaining_rho = remaining_rho.to_real();
    let requested_rho = requested_rho.to_real();
    let remaining_delta = remaining_delta.to_real();
    let requested_delta = requested_delta.to_real();
    let detail = if short_of_rho {
        format!("dataset {dataset} has ρ = {remaining_rho:e} left; this job needs ρ = {requested_rho:e}")
    } else {
        format!("dataset {dataset} has δ = {remaining_delta:e} left; this job needs δ = {requested_delta:e}")
    };
    AppError::new(ErrorKind::OverBudget, detail)
        .with("dataset_id", dataset.to_string())
        .with("remaining_rho", remaining_rho)
        .with("requested_rho", requested_rho)
        .with("remaining_delta", remaining_delta)
        .with("requested_delta", requested_delta)
}

/// The job with its timings' visibility (withheld when its dataset cannot be read).
async fn seen(state: &AppState, tenant: Uuid, record: JobRecord) -> Result<Job, AppError> {
    let timings_public = state
        .store
        .get_dataset(tenant, record.dataset_id)
        .await?
        .is_some_and(|d| timings_public(&d));
    Ok(Job {
        record,
        timings_public,
    })
}

async fn load_job(state: &AppState, tenant: Uuid, id: Uuid) -> Result<JobRecord, AppError> {
    AppError::found(state.store.get_job(tenant, id).await?, "job", id)
}

/// One of the tenant's jobs, read with its dataset's facts in one query (status reads are the
/// service's most frequent request).
pub async fn get(state: &AppState, tenant: Uuid, id: Uuid) -> Result<Job, AppError> {
    let (record, facts) = AppError::found(
        state.store.get_job_with_dataset_facts(tenant, id).await?,
        "job",
        id,
    )?;
    Ok(Job {
        record,
        timings_public: facts.is_some_and(|f| crate::context::run_time_is_public_by(&f)),
    })
}

/// The tenant's jobs (on one dataset, if given), newest first.
pub async fn list(state: &AppState, tenant: Uuid, dataset: Option<Uuid>) -> Result<Vec<Job>, AppError> {
    let records = state.store.list_jobs(tenant, dataset).await?;
    let public: HashMap<Uuid, bool> = state
        .store
        .list_datasets(tenant)
        .await?
        .iter()
        .map(|d| (d.id, timings_public(d)))
        .collect();
    Ok(records
        .into_iter()
        .map(|record| Job {
            timings_public: public.get(&record.dataset_id).copied().unwrap_or(false),
            record,
        })
        .collect())
}

/// Cancel a job: a queued one is cancelled and refunded; a running one is asked to stop at
/// its next progress report and keeps its charge (noise has been drawn); a finished one is a
/// conflict.
pub async fn cancel(state: &AppState, tenant: Uuid, id: Uuid) -> Result<Cancellation, AppError> {
    match state.store.cancel_job(tenant, id).await? {
        CancelOutcome::Refunded(job) => Ok(Cancellation::Refunded(seen(state, tenant, job).await?)),
        CancelOutcome::CancelRequested(job) => {
            state.jobs.request_cancel(job.id);
            Ok(Cancellation::Requested(seen(state, tenant, job).await?))
        }
        CancelOutcome::AlreadyFinished(job) => Err(AppError::conflict(format!(
            "the job has already finished ({})",
            job.status.as_str()
        ))),
        CancelOutcome::NotFound => Err(AppError::not_found("job", id)),
    }
}

/// The result of a succeeded job, with the job; any other status is a conflict naming it.
pub async fn result(state: &AppState, tenant: Uuid, id: Uuid) -> Result<(JobRecord, JobResult), AppError> {
    let job = load_job(state, tenant, id).await?;
    match job.status {
        JobStatus::Succeeded => {}
        JobStatus::Failed => {
            return Err(AppError::conflict(format!(
                "the job failed: {}",
                job.error.as_deref().unwrap_or("no reason recorded")
            )));
        }
        other => {
            return Err(AppError::conflict(format!(
                "the job has no result: it is {}",
                other.as_str()
            )));
        }
    }
    let result = state
        .store
        .job_result(tenant, id)
        .await?
        .ok_or_else(|| AppError::internal("succeeded job without result"))?;
    Ok((job, result))
}
