//! The use cases of the transparency log (docs/design/ledger.md, "The transparency log"): a
//! dataset's signed checkpoint, a consistency proof between two of its sizes, and a job's
//! receipt. Each reads the log through `Store::dataset_log`, which checks every leaf against
//! the ledger first and refuses a log that does not match (`LogTampered`, 409), so nothing is
//! signed over an edited ledger. Checkpoints are signed at request time for the log's current
//! size (one Ed25519 signature); nothing signed is stored.
//!
//! **Receipts from a recently checked log.** A job's view is read often (clients poll it), and
//! checking a log is linear in its length, so a receipt is built from the last checked and
//! signed tree of the dataset's log ([`super::log_cache::LogCache`]) when that tree is under
//! [`FRESH_FOR`] old and already holds the job's charge; otherwise the log is checked again.
//! Any tree that holds the leaf proves its inclusion, so a receipt from a slightly older tree
//! is as valid as one from the newest. Checkpoints and consistency proofs are always made from
//! a freshly checked log, so a witness sees tampering at once, and a job view within
//! [`FRESH_FOR`] of it (and at once after a restart, which starts with no cache).

use std::sync::Arc;
use std::time::Instant;

use uuid::Uuid;

use super::error::{AppError, ErrorKind};
pub use super::log_cache::FRESH_FOR;
use super::log_cache::SignedTree;
use crate::state::AppState;
use crate::store::JobRecord;
use crate::store::ledger_log::{VerifiedLog, dataset_log};
use crate::store::study_log::{self, study_log};
use crate::transparency::merkle;
use crate::transparency::{Checkpoint, ConsistencyProof, Receipt};

/// Whose log: a dataset's or a study's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogOf {
    Dataset(Uuid),
    Study(Uuid),
}

impl LogOf {
    /// The log's name in the store, which its origin ends with.
    fn name(self) -> String {
        match self {
            LogOf::Dataset(dataset) => dataset_log(dataset),
            LogOf::Study(study) => study_log(study),
        }
    }
}

/// The checked log; not found when the tenant has no such dataset or study. A log that fails
/// its check is dropped from the cache too.
async fn verified(state: &AppState, tenant: Uuid, of: LogOf) -> Result<VerifiedLog, AppError> {
    let checked = match of {
        LogOf::Dataset(dataset) => state.store.dataset_log(tenant, dataset).await,
        LogOf::Study(study) => state.store.study_log(tenant, study).await,
    };
    if checked.is_err() {
        state.log_cache.forget(&of.name());
    }
    match of {
        LogOf::Dataset(dataset) => AppError::found(checked?, "dataset", dataset),
        LogOf::Study(study) => AppError::found(checked?, "study", study),
    }
}

/// The log checked now and signed, kept for later receipts.
async fn check_and_sign(state: &AppState, tenant: Uuid, of: LogOf) -> Result<Arc<SignedTree>, AppError> {
    let log = verified(state, tenant, of).await?;
    let checkpoint = sign(state, of, &log)?;
    let tree = Arc::new(SignedTree {
        log,
        checkpoint,
        at: Instant::now(),
    });
    state.log_cache.keep(of.name(), tree.clone());
    Ok(tree)
}

/// The signed checkpoint (C2SP signed note) of the log as it is now.
fn sign(state: &AppState, of: LogOf, log: &VerifiedLog) -> Result<String, AppError> {
    let origin = state.ledger_key.log_origin(&of.name());
    let checkpoint = Checkpoint::new(&origin, log.hashes.len() as u64, merkle::root(&log.hashes))
        .map_err(AppError::internal)?;
    checkpoint
        .sign(&state.ledger_key.signer)
        .map_err(AppError::internal)
}

/// The current signed checkpoint of the tenant's dataset's or study's log.
pub async fn checkpoint(state: &AppState, tenant: Uuid, of: LogOf) -> Result<String, AppError> {
    Ok(check_and_sign(state, tenant, of).await?.checkpoint.clone())
}

/// The consistency proof from the log's tree of size `from` to its tree of size `to`
/// (RFC 6962 §2.1.2); `from ≤ to ≤` the current size, else a conflict with the log's state
/// (409): the sizes are well-formed numbers, but this log has no such pair of trees (a witness
/// whose saved head is ahead of the log is told so, not that it asked badly).
pub async fn consistency(
    state: &AppState,
    tenant: Uuid,
    of: LogOf,
    from: u64,
    to: u64,
) -> Result<ConsistencyProof, AppError> {
    let tree = check_and_sign(state, tenant, of).await?;
    let log = &tree.log;
    let size = log.hashes.len() as u64;
    if from > to {
        return Err(AppError::new(
            ErrorKind::Conflict,
            format!("from ({from}) is above to ({to}): a log only grows"),
        )
        .with_field("from"));
    }
    if to > size {
        return Err(AppError::new(
            ErrorKind::Conflict,
            format!("to ({to}) is above the log's size ({size}): there is no such tree yet"),
        )
        .with_field("to"));
    }
    let prefix = &log.hashes[..to as usize];
    let proof = merkle::consistency_proof(from, prefix).map_err(AppError::internal)?;
    Ok(ConsistencyProof::new(&proof))
}

/// The receipt of the leaf that `find` picks in a recently checked tree of the log that holds
/// it, with that tree's signed checkpoint (module documentation); `None` when no leaf fits.
async fn receipt(
    state: &AppState,
    tenant: Uuid,
    of: LogOf,
    find: impl Fn(&VerifiedLog) -> Option<u64>,
) -> Result<Option<Receipt>, AppError> {
    let cached = state
        .log_cache
        .fresh(&of.name())
        .filter(|t| find(&t.log).is_some());
    let tree = match cached {
        Some(tree) => tree,
        None => check_and_sign(state, tenant, of).await?,
    };
    let Some(index) = find(&tree.log) else {
        return Ok(None);
    };
    let proof = merkle::inclusion_proof(index, &tree.log.hashes).map_err(AppError::internal)?;
    Ok(Some(Receipt::new(
        &tree.log.leaves[index as usize],
        index,
        &proof,
        &tree.checkpoint,
    )))
}

/// The receipt of `job`'s charge in its dataset's log; `None` when the log holds no charge of
/// this job.
pub async fn job_receipt(state: &AppState, job: &JobRecord) -> Result<Option<Receipt>, AppError> {
    let of = LogOf::Dataset(job.dataset_id);
    receipt(state, job.tenant_id, of, |log| log.charge_of(job.id)).await
}

/// The receipt of a study's charge in its log; `None` before its roster is charged.
pub async fn study_receipt(state: &AppState, tenant: Uuid, study: Uuid) -> Result<Option<Receipt>, AppError> {
    receipt(state, tenant, LogOf::Study(study), study_log::charge_index).await
}
