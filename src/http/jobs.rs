//! `/v1/jobs`: submit (atomic with the budget charge), status, result, cancel, list.

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::auth::TenantAuth;
use super::datasets::load_dataset;
use super::error::{ApiError, Json, Path, ProblemDocument, ProblemKind, Query};
use super::privacy_input::{DEFAULT_DISPLAY_DELTA, PrivacyAmount, PrivacyInput};
use super::rate_limit::{Limited, Submissions};
use crate::algorithms::{self, ConfigError, DynAlgorithm};
use crate::context::data_context;
use crate::metrics::RefusalReason;
use crate::privacy::admission::Spending;
use crate::privacy::target::within;
use crate::state::AppState;
use crate::store::{
    CancelOutcome, DatasetRecord, DatasetStatus, Idempotency, JobRecord, JobStatus, NewJob, SubmitOutcome,
};

/// Submit a private PCA job.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitJob {
    pub dataset_id: Uuid,
    /// Algorithm name, see `GET /v1/algorithms`, or `auto`: the service picks one from public
    /// facts (kind, d, whether the dataset is public) by the rule in docs/utility.md, and the
    /// job records which ran.
    #[schema(schema_with = super::params::job_algorithm_schema)]
    pub algorithm: String,
    /// Algorithm parameters (the algorithm's schema is in `GET /v1/algorithms` and in this
    /// document as `<algorithm>Params`); defaults fill the rest. `auto` takes `k` and the
    /// options every algorithm shares.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub params: serde_json::Value,
    /// What the job may spend: `{"rho": …}` or `{"epsilon": …, "delta": …}`. Required on
    /// private datasets; on public ones it may be omitted (the job then runs at the public
    /// default target ρ = 1e6, δ = 1e-5, i.e. practically without noise, and records that).
    pub privacy: Option<PrivacyInput>,
    /// Seed for reproducible experiments: public datasets only (refused on private ones).
    pub seed: Option<u64>,
}

/// Progress of a running job: step `done` of `total` (e.g. power iteration l of L).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ProgressView {
    pub done: i64,
    pub total: i64,
}

/// A job.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct JobView {
    pub id: Uuid,
    pub dataset_id: Uuid,
    /// The algorithm that runs (for `auto`, the one chosen).
    pub algorithm: String,
    /// How the algorithm was chosen when `auto` was requested: `requested`, `chose`, `because`.
    #[schema(value_type = Option<Object>)]
    pub selection: Option<serde_json::Value>,
    /// `queued`, `running`, `succeeded`, `failed` or `cancelled`.
    pub status: JobStatus,
    /// Parameters as submitted.
    #[schema(value_type = Object)]
    pub params: serde_json::Value,
    /// The full configuration that runs: defaults filled in, noise calibrated.
    #[schema(value_type = Object)]
    pub config: serde_json::Value,
    /// Privacy as submitted.
    #[schema(value_type = Object)]
    pub privacy: serde_json::Value,
    /// What the ledger charged for this job (refunded if it was cancelled before starting).
    pub cost: PrivacyAmount,
    /// True when the charge was given back: the job was cancelled before it started, so no
    /// noise was drawn for it. A job that started keeps its charge whatever happens.
    pub refunded: bool,
    pub progress: Option<ProgressView>,
    /// Why the job failed, when it did.
    pub error: Option<String>,
    pub cancel_requested: bool,
    pub seed: Option<u64>,
    pub created_at: DateTime<Utc>,
    /// When the job started running. Withheld (null) on private `add_remove` datasets, where
    /// it would give away the running time (see `run_ms`).
    pub started_at: Option<DateTime<Utc>>,
    /// When the job ended. Withheld (null) on private `add_remove` datasets too: on an idle
    /// queue `finished_at − created_at` is the running time.
    pub finished_at: Option<DateTime<Utc>>,
    /// Milliseconds spent waiting in the queue (null where `started_at` is withheld).
    pub queued_ms: Option<i64>,
    /// Milliseconds spent running. Withheld (null) on private `add_remove` datasets: the running
    /// time grows with the number of records, which is private under that relation.
    pub run_ms: Option<i64>,
    /// Where the result is, once the job succeeded.
    pub result_url: Option<String>,
}

/// Whether a job's timings may be shown: they grow with the number of records n, so they are
/// withheld exactly where n is private (`add_remove` datasets; docs/design/privacy.md §3):
/// `started_at`, `finished_at`, `queued_ms` and `run_ms` are all null there, since any of them
/// with `created_at` gives the run time. The moment the status changes stays observable to a
/// client that polls; it is not padded (privacy.md §3 names this limitation).
pub(crate) fn timings_public(dataset: &DatasetRecord) -> bool {
    crate::context::n_is_public(dataset)
}

fn job_view(state: &AppState, job: &JobRecord, timings_public: bool) -> JobView {
    let display_delta = job
        .privacy
        .get("delta")
        .and_then(|v| v.as_f64())
        .unwrap_or(DEFAULT_DISPLAY_DELTA);
    let live = state.jobs.progress(job.id);
    let progress = match (job.status, live) {
        (JobStatus::Running, Some((done, total))) => Some(ProgressView {
            done: done.into(),
            total: total.into(),
        }),
        (JobStatus::Queued, _) => None,
        _ if job.progress_total > 0 => Some(ProgressView {
            done: job.progress_done,
            total: job.progress_total,
        }),
        _ => None,
    };
    let started_at = job.started_at.filter(|_| timings_public);
    let finished_at = job.finished_at.filter(|_| timings_public);
    let queued_ms = started_at.map(|s| (s - job.created_at).num_milliseconds());
    let run_ms = match (started_at, finished_at) {
        (Some(s), Some(f)) => Some((f - s).num_milliseconds()),
        (Some(s), None) => Some((Utc::now() - s).num_milliseconds()),
        _ => None,
    };
    JobView {
        id: job.id,
        dataset_id: job.dataset_id,
        algorithm: job.algorithm.clone(),
        selection: job.selection.clone(),
        status: job.status,
        params: job.params.clone(),
        config: job.config.clone(),
        privacy: job.privacy.clone(),
        cost: PrivacyAmount::new(
            job.cost.rho_units.to_real(),
            job.cost.delta_units.to_real(),
            display_delta,
        )
        .gaussian_only(job.cost.is_gaussian_only())
        .achieved(&charged_cost(job), display_delta),
        refunded: job.status == JobStatus::Cancelled && job.started_at.is_none(),
        progress,
        error: job.error.clone(),
        cancel_requested: job.cancel_requested,
        seed: job.seed,
        created_at: job.created_at,
        started_at,
        finished_at,
        queued_ms,
        run_ms,
        result_url: (job.status == JobStatus::Succeeded).then(|| format!("/v1/jobs/{}/result", job.id)),
    }
}

/// The cost the ledger charged for a job, from its units.
fn charged_cost(job: &JobRecord) -> crate::privacy::Cost {
    crate::privacy::Cost {
        rho: job.cost.rho_units.to_real(),
        delta: job.cost.delta_units.to_real(),
        other_rho: job.cost.other_rho_units.to_real(),
    }
}

fn config_problem(e: ConfigError) -> ApiError {
    ApiError::from(e)
}

fn find_algorithm(name: &str) -> Result<&'static dyn DynAlgorithm, ApiError> {
    algorithms::find(name).ok_or_else(|| {
        let known: Vec<&str> = algorithms::registry().iter().map(|a| a.info().name).collect();
        ApiError::validation(
            "algorithm",
            format!("unknown algorithm `{name}`; known: auto, {}", known.join(", ")),
        )
    })
}

/// A job priced under the algorithm that will run, and how it was chosen when the client
/// asked for `auto`.
pub(crate) struct Resolved {
    pub name: &'static str,
    pub priced: Priced,
    pub selection: Option<serde_json::Value>,
}

/// Prices `name` on `dataset`; for `auto`, the first candidate of
/// [`algorithms::auto::candidates`] that accepts the parameters (public facts only), or a 422
/// naming why each was not eligible.
pub(crate) fn resolve(
    name: &str,
    dataset: &DatasetRecord,
    params: &serde_json::Value,
    privacy: Option<&PrivacyInput>,
) -> Result<Resolved, ApiError> {
    if name != algorithms::auto::AUTO {
        let algorithm = find_algorithm(name)?;
        let priced = price(algorithm, dataset, params.clone(), privacy)?;
        return Ok(Resolved {
            name: algorithm.info().name,
            priced,
            selection: None,
        });
    }
    // A malformed target is the client's privacy field, not something a candidate refused.
    if let Some(privacy) = privacy {
        privacy.parse("privacy")?;
    }
    let ctx = data_context(dataset).ok_or_else(|| ApiError::conflict("the dataset has no data yet"))?;
    let mut refusals = Vec::new();
    for (candidate, because) in algorithms::auto::candidates(&ctx) {
        let algorithm = find_algorithm(candidate)?;
        match price(algorithm, dataset, params.clone(), privacy) {
            Ok(priced) => {
                return Ok(Resolved {
                    name: algorithm.info().name,
                    priced,
                    selection: Some(serde_json::json!({
                        "requested": algorithms::auto::AUTO,
                        "chose": candidate,
                        "because": because,
                    })),
                });
            }
            Err(e) => refusals.push(format!("{candidate}: {}", e.detail)),
        }
    }
    Err(ApiError::validation(
        "algorithm",
        format!(
            "auto: no algorithm is eligible for this job ({})",
            refusals.join("; ")
        ),
    ))
}

fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    let key = value.as_bytes();
    if !(1..=255).contains(&key.len()) || !key.iter().all(|b| (0x21..=0x7e).contains(b)) {
        return Err(ApiError::validation(
            "Idempotency-Key",
            "must have 1 to 255 visible ASCII characters (no spaces)",
        ));
    }
    let key = String::from_utf8_lossy(key);
    Ok(Some(key.to_string()))
}

/// Everything needed to price a job on a dataset, shared by submission and planning.
pub(crate) struct Priced {
    pub prepared: algorithms::Prepared,
    /// The job's charge in ledger units.
    pub cost: Spending,
    /// The privacy the job runs at, as stored with it.
    pub privacy: PrivacyInput,
}

/// The target of a job on a public dataset that states none: ρ = 1e6 (the ledger's largest
/// amount), δ = 1e-5 for approximate parts. Public data need no protection (docs/design/privacy.md §3);
/// this runs every algorithm at its practically noise-free limit, which is what comparing
/// algorithms on open data needs, and `exact` ignores it.
pub const PUBLIC_DEFAULT_PRIVACY: PrivacyInput = PrivacyInput {
    rho: Some(crate::privacy::units::MAX_RHO),
    epsilon: None,
    delta: Some(1e-5),
};

/// The privacy a job states, or the public default; a private dataset needs one.
pub(crate) fn job_privacy(
    dataset: &DatasetRecord,
    privacy: Option<&PrivacyInput>,
) -> Result<PrivacyInput, ApiError> {
    match privacy {
        Some(p) => Ok(p.clone()),
        None if dataset.public => Ok(PUBLIC_DEFAULT_PRIVACY),
        None => Err(ApiError::validation(
            "privacy",
            "a job on a private dataset needs a privacy target: {\"rho\": …} or {\"epsilon\": …, \"delta\": …}",
        )),
    }
}

pub(crate) fn price(
    algorithm: &dyn DynAlgorithm,
    dataset: &DatasetRecord,
    params: serde_json::Value,
    privacy: Option<&PrivacyInput>,
) -> Result<Priced, ApiError> {
    let privacy = job_privacy(dataset, privacy)?;
    let target = privacy.parse("privacy")?;
    let ctx = data_context(dataset).ok_or_else(|| ApiError::conflict("the dataset has no data yet"))?;
    let prepared = algorithm.prepare(params, &ctx, &target).map_err(config_problem)?;
    let cost = prepared.cost.check().map_err(|e| {
        ApiError::internal(format!(
            "algorithm {} produced an invalid cost: {e}",
            algorithm.info().name
        ))
    })?;
    // Calibration is each algorithm's contract; a cost above the target is a bug, never charged
    // silently. An (ε, δ) target must hold for the whole job (docs/design/privacy.md §2.4).
    let allowed_delta = target.delta.unwrap_or(0.0);
    let fits = match (target.epsilon, target.delta) {
        (Some(epsilon), Some(delta)) => within(&cost, epsilon, delta),
        _ => cost.rho <= target.rho * (1.0 + 1e-9) && cost.delta <= allowed_delta * (1.0 + 1e-9),
    };
    if !fits {
        if target.epsilon.is_none() && cost.delta > allowed_delta {
            return Err(ApiError::validation(
                "privacy.delta",
                format!(
                    "this algorithm spends δ = {:e}; give at least that as privacy.delta",
                    cost.delta
                ),
            ));
        }
        return Err(ApiError::internal(format!(
            "algorithm {} calibrated to cost {:?} above target {:?}",
            algorithm.info().name,
            cost,
            target
        )));
    }
    Ok(Priced {
        cost: Spending::of_cost(&cost),
        prepared,
        privacy,
    })
}

fn require_ready(dataset: &DatasetRecord) -> Result<(), ApiError> {
    match dataset.status {
        DatasetStatus::Ready => Ok(()),
        DatasetStatus::Empty => Err(ApiError::conflict("the dataset has no data yet; upload it first")),
        DatasetStatus::Uploading => Err(ApiError::conflict(
            "the dataset has no data yet; its upload is in progress",
        )),
        DatasetStatus::Deleted => Err(ApiError::conflict("the dataset has been deleted")),
    }
}

/// Submit a job. The privacy cost is computed from the parameters alone and charged in the same
/// transaction that queues the job; over budget is a 409 naming remaining and requested ρ.
/// An `Idempotency-Key` header makes retries safe: the same key and body return the same job.
#[utoipa::path(post, operation_id = "submit_job", path = "/v1/jobs", tag = "jobs", request_body = SubmitJob, security(("api_key" = [])),
    params(("Idempotency-Key" = Option<String>, Header, min_length = 1, max_length = 255, pattern = "^[!-~]+$",
        description = "1 to 255 visible ASCII characters: same key and body → same job, no new charge")),
    responses((status = 202, body = JobView, headers(("Location" = String))),
        (status = 403, body = ProblemDocument), (status = 404, body = ProblemDocument),
        (status = 409, body = ProblemDocument), (status = 422, body = ProblemDocument), (status = 503, body = ProblemDocument)))]
pub async fn submit(
    State(state): State<AppState>,
    Limited(auth, _): Limited<Submissions>,
    headers: HeaderMap,
    Json(body): Json<SubmitJob>,
) -> Result<Response, ApiError> {
    let idempotency = idempotency_key(&headers)?;
    if body.algorithm != algorithms::auto::AUTO {
        find_algorithm(&body.algorithm)?;
    }
    let dataset = load_dataset(&state, auth.tenant_id, body.dataset_id).await?;
    require_ready(&dataset)?;
    if body.seed.is_some() && !dataset.public {
        return Err(ApiError::validation(
            "seed",
            "seeds are accepted only on public datasets; private jobs draw noise from a fresh OS-seeded generator",
        ));
    }
    let Resolved {
        name: algorithm_name,
        priced,
        selection,
    } = resolve(&body.algorithm, &dataset, &body.params, body.privacy.as_ref())?;
    let queued = state.store.job_counts().await?;
    let queued = queued
        .iter()
        .find(|(s, _)| *s == JobStatus::Queued)
        .map_or(0, |(_, n)| *n);
    if queued >= state.config.max_queue {
        return Err(
            ApiError::new(ProblemKind::QueueFull, "the job queue is full; retry later").retry_after(10),
        );
    }
    let request = serde_json::to_value(&body).map_err(ApiError::internal)?;
    let idempotency = idempotency.map(|key| Idempotency {
        key,
        request_hash: hex::encode(Sha256::digest(request.to_string())),
    });
    let privacy = serde_json::to_value(&priced.privacy).map_err(ApiError::internal)?;
    let new = NewJob {
        dataset_id: dataset.id,
        algorithm: algorithm_name.to_string(),
        params: body.params.clone(),
        config: priced.prepared.config,
        privacy: strip_nulls(privacy),
        cost: priced.cost,
        selection,
        seed: body.seed,
        idempotency,
    };
    let (job, replayed) = match state.store.submit_job(auth.tenant_id, new).await? {
        SubmitOutcome::Created(job) => (job, false),
        SubmitOutcome::Replayed(job) => (job, true),
        SubmitOutcome::OverBudget {
            remaining_rho_units,
            requested_rho_units,
            remaining_delta_units,
            requested_delta_units,
        } => {
            let short_of_rho = requested_rho_units > remaining_rho_units;
            let reason = if short_of_rho {
                RefusalReason::Rho
            } else {
                RefusalReason::Delta
            };
            state.metrics.budget_refusal(algorithm_name, reason);
            let remaining_rho = remaining_rho_units.to_real();
            let requested_rho = requested_rho_units.to_real();
            let detail = if short_of_rho {
                format!(
                    "dataset {} has ρ = {remaining_rho:e} left; this job needs ρ = {requested_rho:e}",
                    dataset.id
                )
            } else {
                format!(
                    "dataset {} has δ = {:e} left; this job needs δ = {:e}",
                    dataset.id,
                    remaining_delta_units.to_real(),
                    requested_delta_units.to_real()
                )
            };
            return Err(ApiError::new(ProblemKind::OverBudget, detail)
                .with("dataset_id", dataset.id.to_string())
                .with("remaining_rho", remaining_rho)
                .with("requested_rho", requested_rho)
                .with("remaining_delta", remaining_delta_units.to_real())
                .with("requested_delta", requested_delta_units.to_real()));
        }
        SubmitOutcome::IdempotencyMismatch => {
            return Err(ApiError::new(
                ProblemKind::IdempotencyMismatch,
                "this Idempotency-Key was used with a different request body",
            ));
        }
        SubmitOutcome::DatasetNotFound => return Err(ApiError::not_found("dataset", body.dataset_id)),
        SubmitOutcome::DatasetNotReady(status) => {
            return Err(ApiError::conflict(format!("the dataset is {}", status.as_str())));
        }
    };
    if !replayed {
        state.jobs.wake();
    }
    let location = format!("/v1/jobs/{}", job.id);
    let mut response = (
        StatusCode::ACCEPTED,
        [(header::LOCATION, location)],
        Json(job_view(&state, &job, timings_public(&dataset))),
    )
        .into_response();
    if replayed {
        response
            .headers_mut()
            .insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    Ok(response)
}

pub(crate) fn strip_nulls(mut value: serde_json::Value) -> serde_json::Value {
    if let Some(map) = value.as_object_mut() {
        map.retain(|_, v| !v.is_null());
    }
    value
}

/// [`timings_public`] for a job's dataset (withheld when the dataset cannot be read).
async fn job_timings_public(state: &AppState, tenant: Uuid, job: &JobRecord) -> Result<bool, ApiError> {
    Ok(state
        .store
        .get_dataset(tenant, job.dataset_id)
        .await?
        .is_some_and(|d| timings_public(&d)))
}

async fn load_job(state: &AppState, tenant: Uuid, id: Uuid) -> Result<JobRecord, ApiError> {
    state
        .store
        .get_job(tenant, id)
        .await?
        .ok_or_else(|| ApiError::not_found("job", id))
}

/// A job's status, progress while running, cost and timings.
#[utoipa::path(get, operation_id = "get_job", path = "/v1/jobs/{id}", tag = "jobs", security(("api_key" = [])),
    params(("id" = Uuid, Path, description = "job id")),
    responses((status = 200, body = JobView), (status = 404, body = ProblemDocument)))]
pub async fn get(
    State(state): State<AppState>,
    auth: TenantAuth,
    Path(id): Path<Uuid>,
) -> Result<Json<JobView>, ApiError> {
    let job = load_job(&state, auth.tenant_id, id).await?;
    let public = job_timings_public(&state, auth.tenant_id, &job).await?;
    Ok(Json(job_view(&state, &job, public)))
}

/// Filter for the job list.
#[derive(Debug, Deserialize, IntoParams)]
pub struct JobFilter {
    /// Only jobs on this dataset.
    pub dataset_id: Option<Uuid>,
}

/// The tenant's jobs, newest first.
#[utoipa::path(get, operation_id = "list_jobs", path = "/v1/jobs", tag = "jobs", security(("api_key" = [])), params(JobFilter),
    responses((status = 200, body = Vec<JobView>)))]
pub async fn list(
    State(state): State<AppState>,
    auth: TenantAuth,
    Query(filter): Query<JobFilter>,
) -> Result<Json<Vec<JobView>>, ApiError> {
    let jobs = state.store.list_jobs(auth.tenant_id, filter.dataset_id).await?;
    let public: std::collections::HashMap<Uuid, bool> = state
        .store
        .list_datasets(auth.tenant_id)
        .await?
        .iter()
        .map(|d| (d.id, timings_public(d)))
        .collect();
    Ok(Json(
        jobs.iter()
            .map(|j| job_view(&state, j, public.get(&j.dataset_id).copied().unwrap_or(false)))
            .collect(),
    ))
}

/// Cancel a job. Queued: cancelled and refunded (200). Running: cancellation requested, the
/// charge stands because noise has been drawn (202); the job stops at its next progress report,
/// so one in its last step may still end `succeeded`. Finished: 409.
#[utoipa::path(delete, operation_id = "cancel_job", path = "/v1/jobs/{id}", tag = "jobs", security(("api_key" = [])),
    params(("id" = Uuid, Path, description = "job id")),
    responses((status = 200, body = JobView), (status = 202, body = JobView),
        (status = 404, body = ProblemDocument), (status = 409, body = ProblemDocument)))]
pub async fn cancel(
    State(state): State<AppState>,
    auth: TenantAuth,
    Path(id): Path<Uuid>,
) -> Result<Response, ApiError> {
    match state.store.cancel_job(auth.tenant_id, id).await? {
        CancelOutcome::Refunded(job) => {
            let public = job_timings_public(&state, auth.tenant_id, &job).await?;
            Ok((StatusCode::OK, Json(job_view(&state, &job, public))).into_response())
        }
        CancelOutcome::CancelRequested(job) => {
            state.jobs.request_cancel(job.id);
            let public = job_timings_public(&state, auth.tenant_id, &job).await?;
            Ok((StatusCode::ACCEPTED, Json(job_view(&state, &job, public))).into_response())
        }
        CancelOutcome::AlreadyFinished(job) => Err(ApiError::conflict(format!(
            "the job has already finished ({})",
            job.status.as_str()
        ))),
        CancelOutcome::NotFound => Err(ApiError::not_found("job", id)),
    }
}

/// The result of a succeeded job.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct JobResultView {
    pub job_id: Uuid,
    /// Number of features d: the length of each basis column (called `d` before 0.2.0).
    pub n_features: usize,
    /// Number of components k: the number of basis columns (called `k` before 0.2.0).
    pub n_components: usize,
    /// k columns of d numbers each: orthonormal, ordered by decreasing (noisy) importance.
    pub basis: Vec<Vec<f64>>,
    /// Private eigenvalue estimates (post-processing of DP releases), when the algorithm gives them.
    pub eigenvalues: Option<Vec<f64>>,
    /// Other DP releases of the run, when there are any: `clip_norm`, the row-norm bound c the
    /// adaptive clip released and the algorithm was calibrated to.
    #[schema(value_type = Option<Object>)]
    pub released: Option<serde_json::Value>,
    pub cost: PrivacyAmount,
}

/// The header of a `.npy` file holding a rows×cols f64 little-endian array in C order.
pub fn npy_header(rows: usize, cols: usize) -> Vec<u8> {
    let mut header = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
    // Magic (6) + version (2) + header length (2) + header + '\n' is a multiple of 64.
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out
}

/// The d×k basis as `.npy` bytes (f64 little-endian, C order) from its column-major values.
pub fn npy_bytes(d: usize, k: usize, column_major: &[f64]) -> Vec<u8> {
    let mut out = npy_header(d, k);
    out.reserve(8 * d * k);
    for i in 0..d {
        for j in 0..k {
            out.extend_from_slice(&column_major[j * d + i].to_le_bytes());
        }
    }
    out
}

pub(crate) fn wants_npy(headers: &HeaderMap) -> Result<bool, ApiError> {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return Ok(false);
    };
    let types: Vec<&str> = accept
        .split(',')
        .map(|t| t.split(';').next().unwrap_or("").trim())
        .collect();
    if types
        .iter()
        .any(|t| *t == "application/x-npy" || *t == "application/octet-stream")
    {
        return Ok(true);
    }
    if accept.trim().is_empty()
        || types
            .iter()
            .any(|t| matches!(*t, "application/json" | "application/*" | "*/*"))
    {
        return Ok(false);
    }
    Err(ApiError::new(
        ProblemKind::NotAcceptable,
        "results are available as application/json or application/x-npy",
    ))
}

/// The basis of a succeeded job: JSON by default, `.npy` with `Accept: application/x-npy`.
#[utoipa::path(get, operation_id = "get_job_result", path = "/v1/jobs/{id}/result", tag = "jobs", security(("api_key" = [])),
    params(("id" = Uuid, Path, description = "job id")),
    responses((status = 200, body = JobResultView, description = "The basis as JSON, or with `Accept: application/x-npy` as a d×k f64 `.npy` matrix"),
        (status = 404, body = ProblemDocument), (status = 406, body = ProblemDocument), (status = 409, body = ProblemDocument)))]
pub async fn result(
    State(state): State<AppState>,
    auth: TenantAuth,
    Path(id): Path<Uuid>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let npy = wants_npy(&headers)?;
    let job = load_job(&state, auth.tenant_id, id).await?;
    match job.status {
        JobStatus::Succeeded => {}
        JobStatus::Failed => {
            return Err(ApiError::conflict(format!(
                "the job failed: {}",
                job.error.as_deref().unwrap_or("no reason recorded")
            )));
        }
        other => {
            return Err(ApiError::conflict(format!(
                "the job has no result: it is {}",
                other.as_str()
            )));
        }
    }
    let result = state
        .store
        .job_result(auth.tenant_id, id)
        .await?
        .ok_or_else(|| ApiError::internal("succeeded job without result"))?;
    if npy {
        let bytes = npy_bytes(result.d, result.k, &result.basis);
        return Ok(([(header::CONTENT_TYPE, "application/x-npy")], bytes).into_response());
    }
    let view = job_view(&state, &job, false);
    Ok(Json(JobResultView {
        job_id: id,
        n_features: result.d,
        n_components: result.k,
        basis: result
            .basis
            .chunks(result.d.max(1))
            .map(<[f64]>::to_vec)
            .collect(),
        eigenvalues: result.eigenvalues,
        released: result.released,
        cost: view.cost,
    })
    .into_response())
}
