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
use super::error::{ApiError, Json, Path, ProblemDocument, ProblemKind, Query};
use super::ledger_log::ReceiptView;
use super::privacy_input::{DEFAULT_DISPLAY_DELTA, PrivacyAmount, PrivacyInput};
use super::rate_limit::{Limited, Submissions};
pub(crate) use crate::app::jobs::strip_nulls;
use crate::app::jobs::{self as use_case, Cancellation, Job, SubmitRequest};
use crate::ingest::npy_preamble;
use crate::privacy::admission::Spending;
use crate::state::AppState;
use crate::store::{Idempotency, JobRecord, JobStatus};

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
    /// The receipt of the job's charge in its dataset's transparency log, checkable offline
    /// with `GET /v1/ledger-key`'s key (on `GET /v1/jobs/{id}`; absent in lists and when the
    /// log holds no charge of the job).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt: Option<ReceiptView>,
}

fn job_view(state: &AppState, job: &Job) -> JobView {
    let Job {
        record: job,
        timings_public,
    } = job;
    let timings_public = *timings_public;
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
        cost: PrivacyAmount::of_charge(charge(job), display_delta, display_delta),
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
        receipt: None,
    }
}

/// What the ledger charged for a job.
fn charge(job: &JobRecord) -> Spending {
    job.cost
}

/// The `Idempotency-Key` header with the hash of the body it was sent with.
fn idempotency(headers: &HeaderMap, body: &SubmitJob) -> Result<Option<Idempotency>, ApiError> {
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
    let request = serde_json::to_value(body).map_err(ApiError::internal)?;
    Ok(Some(Idempotency {
        key: String::from_utf8_lossy(key).to_string(),
        request_hash: hex::encode(Sha256::digest(request.to_string())),
    }))
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
    let idempotency = idempotency(&headers, &body)?;
    let request = SubmitRequest {
        dataset_id: body.dataset_id,
        algorithm: body.algorithm,
        params: body.params,
        privacy: body.privacy,
        seed: body.seed,
        idempotency,
    };
    let submitted = use_case::submit(&state, auth.tenant_id, request).await?;
    let location = format!("/v1/jobs/{}", submitted.job.record.id);
    let mut response = (
        StatusCode::ACCEPTED,
        [(header::LOCATION, location)],
        Json(job_view(&state, &submitted.job)),
    )
        .into_response();
    if submitted.replayed {
        response
            .headers_mut()
            .insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    Ok(response)
}

/// A job's status, progress while running, cost and timings.
#[utoipa::path(get, operation_id = "get_job", path = "/v1/jobs/{id}", tag = "jobs", security(("api_key" = [])),
    params(("id" = Uuid, Path, description = "job id")),
    responses((status = 200, body = JobView), (status = 404, body = ProblemDocument),
        (status = 409, body = ProblemDocument, description = "The dataset's transparency log does not match its ledger")))]
pub async fn get(
    State(state): State<AppState>,
    auth: TenantAuth,
    Path(id): Path<Uuid>,
) -> Result<Json<JobView>, ApiError> {
    let job = use_case::get(&state, auth.tenant_id, id).await?;
    let receipt = crate::app::ledger_log::job_receipt(&state, &job.record).await?;
    Ok(Json(JobView {
        receipt: receipt.map(ReceiptView::from),
        ..job_view(&state, &job)
    }))
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
    let jobs = use_case::list(&state, auth.tenant_id, filter.dataset_id).await?;
    Ok(Json(jobs.iter().map(|j| job_view(&state, j)).collect()))
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
    Ok(match use_case::cancel(&state, auth.tenant_id, id).await? {
        Cancellation::Refunded(job) => (StatusCode::OK, Json(job_view(&state, &job))).into_response(),
        Cancellation::Requested(job) => (StatusCode::ACCEPTED, Json(job_view(&state, &job))).into_response(),
    })
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
    /// The receipt of the job's charge in its dataset's transparency log (as on the job's view).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt: Option<ReceiptView>,
}

/// The header of a `.npy` file holding a rows×cols f64 little-endian array in C order.
pub fn npy_header(rows: usize, cols: usize) -> Vec<u8> {
    npy_preamble(&format!(
        "{{'descr': '<f8', 'fortran_order': False, 'shape': ({rows}, {cols}), }}"
    ))
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

/// The d×k basis as an `application/x-npy` response (see [`npy_bytes`]).
pub(crate) fn npy_response(d: usize, k: usize, column_major: &[f64]) -> Response {
    let bytes = npy_bytes(d, k, column_major);
    ([(header::CONTENT_TYPE, "application/x-npy")], bytes).into_response()
}

/// The basis as its k columns of d numbers each, from its column-major values.
pub(crate) fn basis_columns(d: usize, column_major: &[f64]) -> Vec<Vec<f64>> {
    column_major.chunks(d.max(1)).map(<[f64]>::to_vec).collect()
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
    let (job, result) = use_case::result(&state, auth.tenant_id, id).await?;
    if npy {
        return Ok(npy_response(result.d, result.k, &result.basis));
    }
    let receipt = crate::app::ledger_log::job_receipt(&state, &job).await?;
    let view = job_view(
        &state,
        &Job {
            record: job,
            timings_public: false,
        },
    );
    Ok(Json(JobResultView {
        job_id: id,
        n_features: result.d,
        n_components: result.k,
        basis: basis_columns(result.d, &result.basis),
        eigenvalues: result.eigenvalues,
        released: result.released,
        cost: view.cost,
        receipt: receipt.map(ReceiptView::from),
    })
    .into_response())
}
