//! The use cases of the transparency log (docs/design/ledger.md, "The transparency log"): a
//! dataset's signed checkpoint, a consistency proof between two of its sizes, and a job's
//! receipt. Each reads the log through `Store::dataset_log`, which checks every leaf against
//! the ledger first and refuses a log that does not match (`LogTampered`, 409), so nothing is
//! signed over an edited ledger. Checkpoints are signed at request time for the log's current
//! size (one Ed25519 signature); nothing signed is stored.

use uuid::Uuid;

use super::error::{AppError, ErrorKind};
use crate::state::AppState;
use crate::store::JobRecord;
use crate::store::ledger_log::{VerifiedLog, dataset_log};
use crate::transparency::merkle;
use crate::transparency::{Checkpoint, ConsistencyProof, Receipt};

/// The checked log of the tenant's dataset; not found when there is no such dataset.
async fn verified(state: &AppState, tenant: Uuid, dataset: Uuid) -> Result<VerifiedLog, AppError> {
    AppError::found(
        state.store.dataset_log(tenant, dataset).await?,
        "dataset",
        dataset,
    )
}

/// The signed checkpoint (C2SP signed note) of `dataset`'s log as it is now.
fn sign(state: &AppState, dataset: Uuid, log: &VerifiedLog) -> Result<String, AppError> {
    let origin = state.ledger_key.log_origin(&dataset_log(dataset));
    let checkpoint = Checkpoint::new(&origin, log.hashes.len() as u64, merkle::root(&log.hashes))
        .map_err(AppError::internal)?;
    checkpoint
        .sign(&state.ledger_key.signer)
        .map_err(AppError::internal)
}

/// The current signed checkpoint of the tenant's dataset's log.
pub async fn checkpoint(state: &AppState, tenant: Uuid, dataset: Uuid) -> Result<String, AppError> {
    let log = verified(state, tenant, dataset).await?;
    sign(state, dataset, &log)
}

/// The consistency proof from the log's tree of size `from` to its tree of size `to`
/// (RFC 6962 §2.1.2); `from ≤ to ≤` the current size, else a malformed request (400).
pub async fn consistency(
    state: &AppState,
    tenant: Uuid,
    dataset: Uuid,
    from: u64,
    to: u64,
) -> Result<ConsistencyProof, AppError> {
    let log = verified(state, tenant, dataset).await?;
    let size = log.hashes.len() as u64;
    if from > to {
        return Err(
            AppError::new(ErrorKind::Malformed, format!("from ({from}) is above to ({to})"))
                .with_field("from"),
        );
    }
    if to > size {
        return Err(AppError::new(
            ErrorKind::Malformed,
            format!("to ({to}) is above the log's size ({size})"),
        )
        .with_field("to"));
    }
    let prefix = &log.hashes[..to as usize];
    let proof = merkle::consistency_proof(from, prefix).map_err(AppError::internal)?;
    Ok(ConsistencyProof::new(&proof))
}

/// The receipt of `job`'s charge: its leaf, index and audit path in the log's current tree,
/// with that tree's signed checkpoint. `None` when the log holds no charge of this job.
pub async fn job_receipt(state: &AppState, job: &JobRecord) -> Result<Option<Receipt>, AppError> {
    let log = verified(state, job.tenant_id, job.dataset_id).await?;
    let Some(index) = log.charge_of(job.id) else {
        return Ok(None);
    };
    let proof = merkle::inclusion_proof(index, &log.hashes).map_err(AppError::internal)?;
    let checkpoint = sign(state, job.dataset_id, &log)?;
    Ok(Some(Receipt::new(
        &log.leaves[index as usize],
        index,
        &proof,
        &checkpoint,
    )))
}
