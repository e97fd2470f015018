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
use super::error::{ApiError, Json, Path, ProblemDocument, Query};
use super::privacy_input::{BudgetInput, DEFAULT_DISPLAY_DELTA, PrivacyAmount};
use super::rate_limit::{Limited, Uploads};
use crate::app::datasets::{self as use_case, Budget, DatasetSpec, StatedBudget, UploadRequest};
use crate::dataset::{Kind, Relation};
use crate::ingest::Format;
use crate::privacy::admission::Rule;
use crate::privacy::units::{DeltaUnits, RhoUnits};
use crate::state::AppState;
use crate::store::{DatasetRecord, DatasetStatus, LedgerEntry, LedgerEntryKind};

/// Create a dataset: its kind, unit of privacy, public bounds and budget. All immutable.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateDataset {
    /// A name for people: 1 to 200 characters, not only white space, no NUL character (stored trimmed).
    #[schema(min_length = 1, max_length = 200, pattern = r"^[^\u0000]*\S[^\u0000]*$")]
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
    /// The budget in the units the owner stated it: ρ for a zCDP budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rho: Option<f64>,
    /// The budget in the units the owner stated it: ε and δ for an (ε, δ) budget (the
    /// admission rule keeps every spending within them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epsilon: Option<f64>,
    /// The δ of an (ε, δ) budget, as stated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delta: Option<f64>,
    /// The ρ ceiling under the admission rule now in force: the budget (zCDP), or for an (ε, δ)
    /// budget the most the dataset's spending may total (docs/design/privacy.md §2.6: the exact
    /// Gaussian curve at δ/2 while only Gaussian mechanisms were charged, CKS afterwards), so
    /// that `remaining = total − spent`. For an (ε, δ) budget its `epsilon` and
    /// `epsilon_at_delta` are the stated ε and δ, and `epsilon_converted` the CKS conversion
    /// of its ρ.
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
    /// The matrix is stored sparse (uploaded as Matrix Market): only the algorithms that run on
    /// sparse data accept it (`GET /v1/algorithms`, `sparse`).
    pub sparse: bool,
    /// Stored entries of a sparse matrix, both triangles; shown on public datasets only (on a
    /// private one it is a statistic of the data).
    pub nnz: Option<i64>,
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
                let mut total =
                    amount(r.rho_ceiling_units().unwrap_or(total_rho), total_delta).gaussian_only(true);
                if let Some((epsilon, delta)) = r.budget_epsilon_delta {
                    total = total.stated(epsilon, delta);
                }
                let (rho, epsilon, delta) = match r.budget_epsilon_delta {
                    Some((epsilon, delta)) => (None, Some(epsilon), Some(delta)),
                    None => (
                        stated
                            .get("rho")
                            .and_then(serde_json::Value::as_f64)
                            .or(Some(total_rho.to_real())),
                        None,
                        None,
                    ),
                };
                Some(BudgetView {
                    stated,
                    rho,
                    epsilon,
                    delta,
                    total,
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
            sparse: r.nnz.is_some(),
            nnz: if r.public { r.nnz } else { None },
            budget,
            created_at: r.created_at,
            deleted_at: r.deleted_at,
        }
    }
}

impl From<CreateDataset> for DatasetSpec<BudgetInput> {
    fn from(body: CreateDataset) -> Self {
        DatasetSpec {
            name: body.name,
            kind: body.kind,
            relation: body.relation,
            row_norm_bound: body.row_norm_bound,
            row_l1_bound: body.row_l1_bound,
            entry_bound: body.entry_bound,
            budget: body.budget,
            public: body.public,
        }
    }
}

/// A budget as stated in a request: parsed into ledger units, and kept as stated (`null`
/// members dropped) with the δ at which its ρ amounts are shown.
impl StatedBudget for BudgetInput {
    fn parse_budget(&self) -> Result<Budget, ApiError> {
        let parsed = self.parse()?;
        let mut stated = serde_json::to_value(self).unwrap_or_default();
        if let Some(map) = stated.as_object_mut() {
            map.retain(|_, v| !v.is_null());
            map.insert("display_delta".into(), parsed.display_delta.into());
        }
        Ok(Budget {
            rho_units: parsed.rho_units,
            delta_units: parsed.delta_units,
            epsilon_delta: parsed.epsilon_delta,
            stated,
        })
    }
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
    let record = use_case::create(&state, auth.tenant_id, body.into()).await?;
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
    let records = use_case::list(&state, auth.tenant_id).await?;
    Ok(Json(records.iter().map(DatasetView::from).collect()))
}

/// The tenant's dataset `id`, or 404.
pub(crate) async fn load_dataset(
    state: &AppState,
    tenant: Uuid,
    id: Uuid,
) -> Result<DatasetRecord, ApiError> {
    use_case::get(state, tenant, id).await
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
    let record = use_case::delete(&state, auth.tenant_id, id).await?;
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
    let (record, entries) = use_case::ledger(&state, auth.tenant_id, id).await?;
    Ok(Json(LedgerView {
        dataset_id: id,
        entries: entries.iter().map(LedgerEntryView::from).collect(),
        budget: DatasetView::from(&record).budget,
    }))
}

/// How an upload names its format when its `Content-Type` does not (`application/octet-stream`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum UploadFormat {
    Csv,
    Json,
    Npy,
    /// Matrix Market coordinate (matrix datasets; stored sparse).
    Mtx,
}

impl From<UploadFormat> for Format {
    fn from(f: UploadFormat) -> Self {
        match f {
            UploadFormat::Csv => Format::Csv,
            UploadFormat::Json => Format::Json,
            UploadFormat::Npy => Format::Npy,
            UploadFormat::Mtx => Format::Mtx,
        }
    }
}

/// Query of an upload.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct UploadQuery {
    /// The body's format when it is sent as `application/octet-stream`: `csv`, `json`, `npy`
    /// or `mtx`.
    /// Without it such a body must be `.npy` or Matrix Market (recognised by their magic). With a
    /// specific `Content-Type` it must agree with it.
    pub format: Option<UploadFormat>,
}

/// Upload the data, once. The body is a file: `application/octet-stream` (what generated
/// clients send; `.npy` and Matrix Market are recognised by their magic, other formats are named
/// with `?format=csv|json|mtx`), or `text/csv` (header optional), `application/json` (an array
/// of rows), `application/x-npy` (float64/32, integer or bool; C or Fortran order) or `application/x-matrix-market` (a sparse
/// symmetric matrix in Matrix Market coordinate format, `symmetric` or `general` with symmetric
/// content, as `scipy.io.mmwrite` writes; matrix datasets only; stored sparse, limited by its
/// number of stored entries instead of the dense side limit). Streamed and validated; records
/// are clipped to the declared bounds. A symmetric matrix is checked for shape and symmetry;
/// errors name the row, column or input line. While the
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
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap_or("(not text)"));
    let declared_bytes = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let request = UploadRequest {
        content_type,
        format: query.format.map(Format::from),
        declared_bytes,
        body: body.into_data_stream().map_err(std::io::Error::other),
    };
    let record = use_case::upload(&state, auth.tenant_id, id, request).await?;
    Ok(Json(DatasetView::from(&record)))
}
