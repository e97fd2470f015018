//! The transparency log's endpoints (docs/design/ledger.md, "The transparency log"; issue 39's
//! fixed interface): `/v1/ledger-key` (public), a dataset's signed checkpoint and consistency
//! proofs, and the receipt DTO that job views carry. Handlers only translate; the use cases are
//! `app::ledger_log`.

use axum::extract::State;
use axum::extract::rejection::QueryRejection;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::auth::TenantAuth;
use super::error::{ApiError, Json, Path, ProblemDocument, ProblemKind};
use crate::app::ledger_log::{self as use_case, LogOf};
use crate::state::AppState;
use crate::transparency::Receipt;

/// The service's verifier key for its transparency logs.
#[derive(Debug, Serialize, ToSchema)]
pub struct LedgerKeyView {
    /// A C2SP signed-note verifier key, `<name>+<8 hex key ID>+<base64(0x01 ‖ Ed25519 key)>`:
    /// checks every checkpoint and receipt this service signs.
    pub verifier_key: String,
}

/// The verifier key of the ledger's transparency logs (public; the same string is printed at start).
#[utoipa::path(get, operation_id = "get_ledger_key", path = "/v1/ledger-key", tag = "meta",
    responses((status = 200, body = LedgerKeyView)))]
pub async fn ledger_key(State(state): State<AppState>) -> Json<LedgerKeyView> {
    Json(LedgerKeyView {
        verifier_key: state.ledger_key.verifier_key(),
    })
}

/// A log's signed tree head.
#[derive(Debug, Serialize, ToSchema)]
pub struct CheckpointView {
    /// C2SP tlog-checkpoint signed note: `<origin>\n<size>\n<base64 root>\n\n— <key name> <signature>\n`.
    pub checkpoint: String,
}

/// The current signed checkpoint of the dataset's transparency log. 409 when the log does not
/// match the ledger (tampered): nothing is signed then.
#[utoipa::path(get, operation_id = "get_dataset_ledger_checkpoint", path = "/v1/datasets/{id}/ledger/checkpoint",
    tag = "datasets", security(("api_key" = [])),
    params(("id" = Uuid, Path, description = "dataset id")),
    responses((status = 200, body = CheckpointView), (status = 404, body = ProblemDocument),
        (status = 409, body = ProblemDocument)))]
pub async fn checkpoint(
    State(state): State<AppState>,
    auth: TenantAuth,
    Path(id): Path<Uuid>,
) -> Result<Json<CheckpointView>, ApiError> {
    let checkpoint = use_case::checkpoint(&state, auth.tenant_id, LogOf::Dataset(id)).await?;
    Ok(Json(CheckpointView { checkpoint }))
}

/// The current signed checkpoint of the study's transparency log (its budget, then the charge
/// of its roster). 409 when the log does not match the study's record.
#[utoipa::path(get, operation_id = "get_study_ledger_checkpoint", path = "/v1/studies/{id}/ledger/checkpoint",
    tag = "studies", security(("api_key" = [])),
    params(("id" = Uuid, Path, description = "study id")),
    responses((status = 200, body = CheckpointView), (status = 404, body = ProblemDocument),
        (status = 409, body = ProblemDocument)))]
pub async fn study_checkpoint(
    State(state): State<AppState>,
    auth: TenantAuth,
    Path(id): Path<Uuid>,
) -> Result<Json<CheckpointView>, ApiError> {
    let checkpoint = use_case::checkpoint(&state, auth.tenant_id, LogOf::Study(id)).await?;
    Ok(Json(CheckpointView { checkpoint }))
}

/// Two sizes of a log.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ConsistencyQuery {
    /// The earlier tree size (a witness's saved checkpoint).
    pub from: u64,
    /// The later tree size, at most the log's current size.
    pub to: u64,
}

/// A consistency proof.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConsistencyView {
    /// RFC 6962 §2.1.2 PROOF(from, D\[to\]): base64 SHA-256 hashes.
    pub proof: Vec<String>,
}

/// The proof that the dataset's log at size `to` extends its log at size `from` (RFC 6962
/// §2.1.2). 400 when `from` or `to` is not a tree size, 409 unless `from ≤ to ≤` the current size.
#[utoipa::path(get, operation_id = "get_dataset_ledger_consistency", path = "/v1/datasets/{id}/ledger/consistency",
    tag = "datasets", security(("api_key" = [])),
    params(("id" = Uuid, Path, description = "dataset id"), ConsistencyQuery),
    responses((status = 200, body = ConsistencyView), (status = 400, body = ProblemDocument),
        (status = 404, body = ProblemDocument), (status = 409, body = ProblemDocument)))]
pub async fn consistency(
    State(state): State<AppState>,
    auth: TenantAuth,
    Path(id): Path<Uuid>,
    query: Result<axum::extract::Query<ConsistencyQuery>, QueryRejection>,
) -> Result<Json<ConsistencyView>, ApiError> {
    consistency_of(&state, auth.tenant_id, LogOf::Dataset(id), query).await
}

/// The proof that the study's log at size `to` extends its log at size `from`.
#[utoipa::path(get, operation_id = "get_study_ledger_consistency", path = "/v1/studies/{id}/ledger/consistency",
    tag = "studies", security(("api_key" = [])),
    params(("id" = Uuid, Path, description = "study id"), ConsistencyQuery),
    responses((status = 200, body = ConsistencyView), (status = 400, body = ProblemDocument),
        (status = 404, body = ProblemDocument), (status = 409, body = ProblemDocument)))]
pub async fn study_consistency(
    State(state): State<AppState>,
    auth: TenantAuth,
    Path(id): Path<Uuid>,
    query: Result<axum::extract::Query<ConsistencyQuery>, QueryRejection>,
) -> Result<Json<ConsistencyView>, ApiError> {
    consistency_of(&state, auth.tenant_id, LogOf::Study(id), query).await
}

/// The consistency proof a request asks of the tenant's log, or a 400 that says what the
/// sizes must be.
pub(super) async fn consistency_of(
    state: &AppState,
    tenant: Uuid,
    of: LogOf,
    query: Result<axum::extract::Query<ConsistencyQuery>, QueryRejection>,
) -> Result<Json<ConsistencyView>, ApiError> {
    let axum::extract::Query(sizes) = query.map_err(|rejection| {
        ApiError::new(
            ProblemKind::Malformed,
            format!(
                "from and to must be tree sizes (integers ≥ 0): {}",
                rejection.body_text()
            ),
        )
    })?;
    let proof = use_case::consistency(state, tenant, of, sizes.from, sizes.to).await?;
    Ok(Json(ConsistencyView { proof: proof.proof }))
}

/// The evidence that a job's charge is in its dataset's transparency log, checkable offline
/// with the service's verifier key (`GET /v1/ledger-key`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ReceiptView {
    /// Base64 of the leaf: the RFC 8785 canonical JSON of the ledger event (it names the job).
    pub leaf: String,
    /// The leaf's index in the log, from 0.
    pub leaf_index: u64,
    /// The RFC 6962 audit path from the leaf to the checkpoint's root: base64 SHA-256 hashes.
    pub inclusion_proof: Vec<String>,
    /// The signed checkpoint (C2SP signed note) of the tree the path leads to.
    pub checkpoint: String,
}

impl From<Receipt> for ReceiptView {
    fn from(r: Receipt) -> Self {
        Self {
            leaf: r.leaf,
            leaf_index: r.leaf_index,
            inclusion_proof: r.inclusion_proof,
            checkpoint: r.checkpoint,
        }
    }
}
