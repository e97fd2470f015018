//! `/v1/datasets`: create, upload data, read, list, delete, ledger.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use chrono::{DateTime, Utc};
use futures_util::TryStreamExt;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::auth::TenantAuth;
use super::error::{ApiError, Json, Path, ProblemDocument, ProblemKind, Query};
use super::privacy_input::{BudgetInput, DEFAULT_DISPLAY_DELTA, PrivacyAmount};
use super::rate_limit::{Limited, Uploads};
use crate::dataset::{Kind, Relation};
use crate::ingest::{self, Format, IngestError, Limits, Shape};
use crate::privacy::admission::Rule;
use crate::privacy::units::{DeltaUnits, RhoUnits};
use crate::state::AppState;
use crate::store::{
    DatasetRecord, DatasetStatus, LedgerEntry, LedgerEntryKind, NewDataset, UploadClaimOutcome,
};

/// Create a dataset: its kind, unit of privacy, public bounds and budget. All immutable.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateDataset {
    /// A name for people: 1 to 200 characters, not only white space (stored trimmed).
    #[schema(min_length = 1, max_length = 200, pattern = r"\S")]
    pub name: String,
    /// `records` (one row per individual) or `matrix` (symmetric m×m).
    pub kind: Kind,
    /// Neighbouring relation: `replace_one` (default) or `add_remove` for records, `entry`
    /// (the default and only choice) for matrices.
    pub relation: Option<Relation>,
    /// Records (required there, absent on matrices): L2 bound β > 0; every row is clipped to
    /// it on upload.
    #[schema(exclusive_minimum = 0.0)]
    pub row_norm_bound: Option<f64>,
    /// Records only: optional L1 bound α > 0 (rows are also clipped to it); default √d·β.
    #[schema(exclusive_minimum = 0.0)]
    pub row_l1_bound: Option<f64>,
    /// Matrix only: entry-change bound u > 0 (default 1).
    #[schema(exclusive_minimum = 0.0)]
    pub entry_bound: Option<f64>,
    /// Privacy budget: required unless `public` is true, absent when it is.
    pub budget: Option<BudgetInput>,
    /// Open or synthetic data: no budget, exact PCA and seeds allowed.
    #[serde(default)]
    pub public: bool,
}

/// A dataset's privacy budget state.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BudgetView {
    /// The budget as the owner stated it.
    #[schema(value_type = Object)]
    pub stated: serde_json::Value,
    /// The ρ ceiling: the budget (zCDP), or for an (ε, δ) budget the most that Gaussian-only
    /// spending may reach by the exact curve.
    pub total: PrivacyAmount,
    pub spent: PrivacyAmount,
    /// The part of `spent.rho` not spent by Gaussian mechanisms (Laplace, exponential
    /// mechanism, approximate-DP parts).
    pub spent_other_rho: f64,
    /// What a further Gaussian-only job may spend under the rule now in force.
    pub remaining: PrivacyAmount,
    /// The admission rule now in force: `zcdp` (a ρ budget), `exact_gaussian` (an (ε, δ) budget
    /// with only Gaussian mechanisms charged so far) or `cks` (an (ε, δ) budget after any other
    /// charge). See docs/design/privacy.md §2.
    pub rule: Rule,
}

/// A dataset's metadata and budget state. Never contains statistics of the data; the row
/// count is shown only where it is public (`replace_one`, matrices, public datasets).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DatasetView {
    pub id: Uuid,
    pub name: String,
    pub kind: Kind,
    pub relation: Relation,
    pub row_norm_bound: Option<f64>,
    pub row_l1_bound: Option<f64>,
    pub entry_bound: Option<f64>,
    pub public: bool,
    /// `empty` (awaiting data), `uploading` (an upload is in progress; `empty` again if it
    /// fails), `ready`, or `deleted` (data gone, ledger kept).
    pub status: DatasetStatus,
    /// Number of features d (records) or side m of the matrix; absent until data is uploaded.
    /// Called `d` before 0.2.0.
    pub n_features: Option<i64>,
    /// Number of records n, when it is public (`replace_one`, matrices, public datasets).
    /// Called `n` before 0.2.0.
    pub n_samples: Option<i64>,
    /// Budget state; absent on public datasets, which carry no budget.
    pub budget: Option<BudgetView>,
    pub created_at: DateTime<Utc>,
    pub deleted_at: Option<DateTime<Utc>>,
}

/// The δ used to display a dataset's ρ amounts as (ε, δ).
pub fn display_delta(record: &DatasetRecord) -> f64 {
    record
        .budget_stated
        .get("display_delta")
        .and_then(|v| v.as_f64())
        .unwrap_or(DEFAULT_DISPLAY_DELTA)
}

impl From<&DatasetRecord> for DatasetView {
    fn from(r: &DatasetRecord) -> Self {
        let shown_delta = display_delta(r);
        let budget = match (r.budget_rho_units, r.budget_delta_units) {
            (Some(total_rho), Some(total_delta)) if !r.public => {
                let amount = |rho: RhoUnits, delta: DeltaUnits| {
                    PrivacyAmount::new(rho.to_real(), delta.to_real(), shown_delta)
                };
                let mut stated = r.budget_stated.clone();
                if let Some(map) = stated.as_object_mut() {
                    map.remove("display_delta");
                }
                let spent = r.spent();
                let rule = match r.budget_epsilon_delta {
                    None => Rule::Zcdp,
                    Some(_) if spent.is_gaussian_only() => Rule::ExactGaussian,
                    Some(_) => Rule::Cks,
                };
                Some(BudgetView {
                    stated,
                    total: amount(total_rho, total_delta).gaussian_only(true),
                    spent: amount(r.spent_rho_units, r.spent_delta_units)
                        .gaussian_only(spent.is_gaussian_only()),
                    spent_other_rho: r.spent_other_rho_units.to_real(),
                    remaining: amount(
                        r.remaining_rho_units().unwrap_or_default(),
                        r.remaining_delta_units().unwrap_or_default(),
                    ),
                    rule,
                })
            }
            _ => None,
        };
        let n_public = crate::context::n_is_public(r);
        DatasetView {
            id: r.id,
            name: r.name.clone(),
            kind: r.kind,
            relation: r.relation,
            row_norm_bound: r.row_norm_bound,
            row_l1_bound: r.row_l1_bound,
            entry_bound: r.entry_bound,
            public: r.public,
            status: r.status,
            n_features: r.d,
            n_samples: if n_public { r.n } else { None },
            budget,
            created_at: r.created_at,
            deleted_at: r.deleted_at,
        }
    }
}

fn positive(field: &str, value: Option<f64>) -> Result<Option<f64>, ApiError> {
    match value {
        Some(v) if !(v > 0.0 && v.is_finite()) => Err(ApiError::validation(
            field,
            format!("{field} must be a finite number > 0 (got {v})"),
        )),
        other => Ok(other),
    }
}

fn validate(body: CreateDataset) -> Result<NewDataset, ApiError> {
    let name = body.name.trim().to_string();
    if name.is_empty() || body.name.chars().count() > 200 {
        return Err(ApiError::validation("name", "name must have 1 to 200 characters"));
    }
    let relation = body.relation.unwrap_or(match body.kind {
        Kind::Records => Relation::ReplaceOne,
        Kind::Matrix => Relation::Entry,
    });
    if !relation.fits(body.kind) {
        return Err(ApiError::validation(
            "relation",
            format!(
                "relation `{}` does not apply to {} datasets (records: replace_one | add_remove; matrix: entry)",
                relation.as_str(),
                body.kind.as_str()
            ),
        ));
    }
    let row_norm_bound = positive("row_norm_bound", body.row_norm_bound)?;
    let row_l1_bound = positive("row_l1_bound", body.row_l1_bound)?;
    let entry_bound = positive("entry_bound", body.entry_bound)?;
    let (row_norm_bound, row_l1_bound, entry_bound) = match body.kind {
        Kind::Records => {
            if entry_bound.is_some() {
                return Err(ApiError::validation(
                    "entry_bound",
                    "entry_bound applies to matrix datasets only",
                ));
            }
            let beta = row_norm_bound.ok_or_else(|| {
                ApiError::validation(
                    "row_norm_bound",
                    "records datasets need row_norm_bound (the L2 bound β)",
                )
            })?;
            (Some(beta), row_l1_bound, None)
        }
        Kind::Matrix => {
            if row_norm_bound.is_some() || row_l1_bound.is_some() {
                return Err(ApiError::validation(
                    "row_norm_bound",
                    "row bounds apply to records datasets only; matrices use entry_bound",
                ));
            }
            (None, None, Some(entry_bound.unwrap_or(1.0)))
        }
    };
    let (budget_rho_units, budget_delta_units, budget_epsilon_delta, budget_stated) =
        match (&body.budget, body.public) {
            (Some(_), true) => {
                return Err(ApiError::validation(
                    "budget",
                    "public datasets carry no budget; omit it",
                ));
            }
            (None, true) => (None, None, None, serde_json::json!({})),
            (None, false) => {
                return Err(ApiError::validation(
                    "budget",
                    "a private dataset needs a budget: {\"rho\": …} or {\"epsilon\": …, \"delta\": …}",
                ));
            }
            (Some(input), false) => {
                let parsed = input.parse()?;
                let mut stated = serde_json::to_value(input).unwrap_or_default();
                if let Some(map) = stated.as_object_mut() {
                    map.retain(|_, v| !v.is_null());
                    map.insert("display_delta".into(), parsed.display_delta.into());
                }
                (
                    Some(parsed.rho_units),
                    Some(parsed.delta_units),
                    parsed.epsilon_delta,
                    stated,
                )
            }
        };
    Ok(NewDataset {
        name,
        kind: body.kind,
        relation,
        row_norm_bound,
        row_l1_bound,
        entry_bound,
        public: body.public,
        budget_rho_units,
        budget_delta_units,
        budget_epsilon_delta,
        budget_stated,
    })
}

/// Create a dataset.
#[utoipa::path(post, operation_id = "create_dataset", path = "/v1/datasets", tag = "datasets", request_body = CreateDataset,
    security(("api_key" = [])),
    responses((status = 201, body = DatasetView), (status = 422, body = ProblemDocument), (status = 401, body = ProblemDocument)))]
pub async fn create(
    State(state): State<AppState>,
    auth: TenantAuth,
    Json(body): Json<CreateDataset>,
) -> Result<impl IntoResponse, ApiError> {
    let new = validate(body)?;
    let record = state.store.create_dataset(auth.tenant_id, new).await?;
    let location = format!("/v1/datasets/{}", record.id);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(DatasetView::from(&record)),
    ))
}

/// List the tenant's datasets (deleted ones included, with status `deleted`).
#[utoipa::path(get, operation_id = "list_datasets", path = "/v1/datasets", tag = "datasets", security(("api_key" = [])),
    responses((status = 200, body = Vec<DatasetView>)))]
pub async fn list(
    State(state): State<AppState>,
    auth: TenantAuth,
) -> Result<Json<Vec<DatasetView>>, ApiError> {
    let records = state.store.list_datasets(auth.tenant_id).await?;
    Ok(Json(records.iter().map(DatasetView::from).collect()))
}

pub(crate) async fn load_dataset(
    state: &AppState,
    tenant: Uuid,
    id: Uuid,
) -> Result<DatasetRecord, ApiError> {
    state
        .store
        .get_dataset(tenant, id)
        .await?
        .ok_or_else(|| ApiError::not_found("dataset", id))
}

/// A dataset's metadata and budget state.
#[utoipa::path(get, operation_id = "get_dataset", path = "/v1/datasets/{id}", tag = "datasets", security(("api_key" = [])),
    params(("id" = Uuid, Path, description = "dataset id")),
    responses((status = 200, body = DatasetView), (status = 404, body = ProblemDocument)))]
pub async fn get(
    State(state): State<AppState>,
    auth: TenantAuth,
    Path(id): Path<Uuid>,
) -> Result<Json<DatasetView>, ApiError> {
    let record = load_dataset(&state, auth.tenant_id, id).await?;
    Ok(Json(DatasetView::from(&record)))
}

/// Delete a dataset's data. The ledger is kept, queued jobs are cancelled and refunded, and the
/// id is never reused.
#[utoipa::path(delete, operation_id = "delete_dataset", path = "/v1/datasets/{id}", tag = "datasets", security(("api_key" = [])),
    params(("id" = Uuid, Path, description = "dataset id")),
    responses((status = 200, body = DatasetView), (status = 404, body = ProblemDocument)))]
pub async fn delete(
    State(state): State<AppState>,
    auth: TenantAuth,
    Path(id): Path<Uuid>,
) -> Result<Json<DatasetView>, ApiError> {
    let record = state
        .store
        .delete_dataset(auth.tenant_id, id)
        .await?
        .ok_or_else(|| ApiError::not_found("dataset", id))?;
    // The store marked this dataset's running jobs for cancellation; stop those running here now.
    for job in state.store.list_jobs(auth.tenant_id, Some(id)).await? {
        if job.status == crate::store::JobStatus::Running {
            state.jobs.request_cancel(job.id);
        }
    }
    Ok(Json(DatasetView::from(&record)))
}

/// One ledger entry.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LedgerEntryView {
    pub id: i64,
    pub job_id: Option<Uuid>,
    /// `charge` or `refund` (a job cancelled before it started).
    pub entry: LedgerEntryKind,
    pub algorithm: Option<String>,
    pub rho: f64,
    pub delta: f64,
    /// The part of `rho` not spent by Gaussian mechanisms.
    pub other_rho: f64,
    /// Which rule admitted a charge: `zcdp`, `exact_gaussian` or `cks` (absent on refunds,
    /// on public datasets and on entries written before the rule was recorded).
    pub rule: Option<Rule>,
    pub created_at: DateTime<Utc>,
}

/// A dataset's ledger: every charge and refund, and the totals.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LedgerView {
    pub dataset_id: Uuid,
    pub entries: Vec<LedgerEntryView>,
    /// Budget totals (absent on public datasets).
    pub budget: Option<BudgetView>,
}

impl From<&LedgerEntry> for LedgerEntryView {
    fn from(e: &LedgerEntry) -> Self {
        Self {
            id: e.id,
            job_id: e.job_id,
            entry: e.entry,
            algorithm: e.algorithm.clone(),
            rho: e.rho_units.to_real(),
            delta: e.delta_units.to_real(),
            other_rho: e.other_rho_units.to_real(),
            rule: e.rule,
            created_at: e.created_at,
        }
    }
}

/// Every charge against a dataset's budget.
#[utoipa::path(get, operation_id = "get_dataset_ledger", path = "/v1/datasets/{id}/ledger", tag = "datasets", security(("api_key" = [])),
    params(("id" = Uuid, Path, description = "dataset id")),
    responses((status = 200, body = LedgerView), (status = 404, body = ProblemDocument)))]
pub async fn ledger(
    State(state): State<AppState>,
    auth: TenantAuth,
    Path(id): Path<Uuid>,
) -> Result<Json<LedgerView>, ApiError> {
    let record = load_dataset(&state, auth.tenant_id, id).await?;
    let entries = state
        .store
        .ledger(auth.tenant_id, id)
        .await?
        .ok_or_else(|| ApiError::not_found("dataset", id))?;
    Ok(Json(LedgerView {
        dataset_id: id,
        entries: entries.iter().map(LedgerEntryView::from).collect(),
        budget: DatasetView::from(&record).budget,
    }))
}

fn ingest_problem(e: IngestError) -> ApiError {
    if matches!(e, IngestError::TooLarge { .. }) {
        return ApiError::new(ProblemKind::PayloadTooLarge, e.to_string());
    }
    if e.is_client_error() {
        ApiError::new(ProblemKind::Validation, format!("data rejected: {e}")).with_field("body")
    } else {
        ApiError::internal(e)
    }
}

/// How an upload names its format when its `Content-Type` does not (`application/octet-stream`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum UploadFormat {
    Csv,
    Json,
    Npy,
}

impl From<UploadFormat> for Format {
    fn from(f: UploadFormat) -> Self {
        match f {
            UploadFormat::Csv => Format::Csv,
            UploadFormat::Json => Format::Json,
            UploadFormat::Npy => Format::Npy,
        }
    }
}

/// Query of an upload.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct UploadQuery {
    /// The body's format when it is sent as `application/octet-stream`: `csv`, `json` or `npy`.
    /// Without it such a body must be a `.npy` file (recognised by its magic string). With a
    /// specific `Content-Type` it must agree with it.
    pub format: Option<UploadFormat>,
}

/// How the body's format will be known: named by the `Content-Type` or the query, or to be
/// sniffed from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FormatSource {
    Named(Format),
    Sniff,
}

const UPLOAD_TYPES: &str = "application/octet-stream (a .npy file, or any format named by ?format=csv|json|npy), text/csv, application/json or application/x-npy";

fn upload_format(content_type: Option<&str>, query: Option<UploadFormat>) -> Result<FormatSource, ApiError> {
    let unsupported = |detail: String| ApiError::new(ProblemKind::UnsupportedMediaType, detail);
    let media_type = content_type
        .map(|ct| ct.split(';').next().unwrap_or_default().trim())
        .unwrap_or_default();
    if media_type.is_empty() || media_type.eq_ignore_ascii_case("application/octet-stream") {
        return Ok(query.map_or(FormatSource::Sniff, |f| FormatSource::Named(f.into())));
    }
    let named = Format::from_content_type(media_type).ok_or_else(|| {
        unsupported(format!(
            "unsupported Content-Type `{media_type}`; use {UPLOAD_TYPES}"
        ))
    })?;
    match query.map(Format::from) {
        Some(other) if other != named => Err(unsupported(format!(
            "Content-Type `{media_type}` and ?format={} disagree; name the format once",
            other.content_type()
        ))),
        _ => Ok(FormatSource::Named(named)),
    }
}

/// Why an upload was refused inside the blocking parse.
enum UploadFailure {
    /// An octet stream that is not `.npy` and names no format.
    Unrecognised,
    Ingest(IngestError),
}

/// Upload the data, once. The body is a file: `application/octet-stream` (what generated
/// clients send; a `.npy` file is recognised by its magic string, other formats are named
/// with `?format=csv|json`), or `text/csv` (header optional), `application/json` (an array of
/// rows) or `application/x-npy` (f64/f32, C order). Streamed and validated; records are clipped
/// to the declared bounds. A symmetric matrix is checked for shape and symmetry. While the
/// body streams the dataset is `uploading`, and another upload to it is refused (409); a
/// failed upload leaves it `empty`.
#[utoipa::path(put, operation_id = "upload_dataset_data", path = "/v1/datasets/{id}/data", tag = "datasets", security(("api_key" = [])),
    params(("id" = Uuid, Path, description = "dataset id"), UploadQuery),
    responses((status = 200, body = DatasetView), (status = 404, body = ProblemDocument), (status = 409, body = ProblemDocument),
        (status = 413, body = ProblemDocument), (status = 415, body = ProblemDocument), (status = 422, body = ProblemDocument)))]
pub async fn upload(
    State(state): State<AppState>,
    Limited(auth, _): Limited<Uploads>,
    Path(id): Path<Uuid>,
    Query(query): Query<UploadQuery>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<DatasetView>, ApiError> {
    let record = load_dataset(&state, auth.tenant_id, id).await?;
    // An `uploading` dataset may be held by a replica that died; the claim below decides.
    if !matches!(record.status, DatasetStatus::Empty | DatasetStatus::Uploading) {
        return Err(not_uploadable(record.status));
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap_or("(not text)"));
    let source = upload_format(content_type, query.format)?;
    let limits = Limits {
        max_bytes: state.config.max_upload_bytes,
        max_rows: state.config.max_rows,
        max_d: state.config.max_d,
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > limits.max_bytes) {
        return Err(ApiError::new(
            ProblemKind::PayloadTooLarge,
            format!("upload is larger than the limit of {} bytes", limits.max_bytes),
        ));
    }
    let shape = match record.kind {
        Kind::Records => Shape::Records {
            beta: record
                .row_norm_bound
                .ok_or_else(|| ApiError::internal("records dataset without row bound"))?,
            alpha: record.row_l1_bound,
        },
        Kind::Matrix => Shape::SymmetricMatrix,
    };
    // The dataset is held in the database before any data is read, so a second upload on
    // any replica is refused at once; the hold gives it back if this upload fails.
    let held = match state.store.claim_upload(auth.tenant_id, id).await? {
        UploadClaimOutcome::Claimed(claim) => state.store.hold_upload(claim),
        UploadClaimOutcome::Refused(status) => return Err(not_uploadable(status)),
        UploadClaimOutcome::NotFound => return Err(ApiError::not_found("dataset", id)),
    };

    let temp = state.store.upload_temp_path(id);
    let stream = body.into_data_stream().map_err(std::io::Error::other);
    let reader = tokio_util::io::SyncIoBridge::new(tokio_util::io::StreamReader::new(stream));
    let temp_for_task = temp.clone();
    let outcome = tokio::task::spawn_blocking(move || -> Result<ingest::Ingested, UploadFailure> {
        let (format, reader): (Format, Box<dyn std::io::Read>) = match source {
            FormatSource::Named(format) => (format, Box::new(reader)),
            FormatSource::Sniff => {
                let (format, reader) =
                    ingest::sniff::sniff(reader).map_err(|e| UploadFailure::Ingest(IngestError::Read(e)))?;
                (format.ok_or(UploadFailure::Unrecognised)?, Box::new(reader))
            }
        };
        let written = write_upload(reader, format, shape, &limits, &temp_for_task);
        if written.is_err() {
            // Here rather than in the handler, which is gone if the client hung up.
            let _ = std::fs::remove_file(&temp_for_task);
        }
        written.map_err(UploadFailure::Ingest)
    })
    .await
    .map_err(ApiError::internal)?;
    let ingested = match outcome {
        Ok(ingested) => ingested,
        Err(failure) => {
            held.release().await;
            return Err(match failure {
                UploadFailure::Ingest(e) => ingest_problem(e),
                UploadFailure::Unrecognised => ApiError::new(
                    ProblemKind::UnsupportedMediaType,
                    format!(
                        "this application/octet-stream body is not a .npy file (no \\x93NUMPY magic); name its format with ?format=csv or ?format=json, or send it as {UPLOAD_TYPES}"
                    ),
                ),
            });
        }
    };
    // The store moves the file into place and marks the dataset ready in one step, if this
    // upload's claim still holds the dataset (else it removes the file).
    match held.attach(&temp, ingested.n, ingested.d).await? {
        Some(record) => {
            if record.kind == Kind::Records {
                keep_statistics(&state, &record);
            }
            Ok(Json(DatasetView::from(&record)))
        }
        None => Err(ApiError::conflict(
            "the dataset was deleted during the upload, or this upload stalled past its lease and another upload took the dataset over",
        )),
    }
}

/// Computes a records dataset's statistics (XᵀX, Xᵀ1, n; `ingest::stats_file`) in the
/// background right after its upload, so that its first job reads them instead of passing over
/// the records. Nothing is returned to anyone: the file sits beside the data and goes with it.
/// If this has not finished (or failed) when a job starts, the job builds them itself; two
/// builders write through distinct temporary names and the last rename wins, both whole.
fn keep_statistics(state: &AppState, record: &DatasetRecord) {
    let (Some(n), Some(d)) = (record.n, record.d) else {
        return;
    };
    let (n, d) = (n as usize, d as usize);
    let id = record.id;
    let data = state.store.data_path(id);
    let stats = state.store.stats_path(id);
    let temp = state.store.upload_temp_path(id);
    tokio::task::spawn_blocking(move || {
        if ingest::stats_file::read(&stats, d, n).is_some() {
            return;
        }
        let opened = match ingest::open(&data, n, d) {
            Ok(opened) => opened,
            // Deleted already, most likely; a job would report a real read error.
            Err(e) => {
                tracing::debug!(dataset = %id, error = %e, "statistics not kept after the upload");
                return;
            }
        };
        let (_, error) = ingest::stats_file::build_and_keep(&stats, &temp, opened.records());
        if let Some(e) = error {
            tracing::warn!(dataset = %id, error = %e, "could not keep the dataset's statistics; its first job computes them");
        }
        drop(opened);
        // A delete that removed the data while this ran: the statistics go with the data (a
        // delete after this check removes them itself).
        if !data.exists() {
            let _ = std::fs::remove_file(&stats);
        }
    });
}

/// Parses an upload into its temporary file, synced to disk.
fn write_upload(
    reader: Box<dyn std::io::Read>,
    format: Format,
    shape: Shape,
    limits: &Limits,
    temp: &std::path::Path,
) -> Result<ingest::Ingested, IngestError> {
    let file = std::fs::File::create(temp).map_err(IngestError::Io)?;
    let mut writer = std::io::BufWriter::with_capacity(1 << 20, file);
    let ingested = ingest::ingest(reader, format, shape, limits, &mut writer)?;
    let file = writer.into_inner().map_err(|e| IngestError::Io(e.into_error()))?;
    file.sync_all().map_err(IngestError::Io)?;
    Ok(ingested)
}

/// Why a dataset in this status takes no upload.
fn not_uploadable(status: DatasetStatus) -> ApiError {
    match status {
        DatasetStatus::Ready => ApiError::conflict(
            "this dataset already has data; datasets are immutable, create a new dataset to upload other data",
        ),
        DatasetStatus::Deleted => ApiError::conflict("this dataset has been deleted"),
        DatasetStatus::Empty | DatasetStatus::Uploading => {
            ApiError::conflict("an upload to this dataset is already in progress")
        }
    }
}
