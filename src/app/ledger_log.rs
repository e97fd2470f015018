//! The use cases of the transparency log (docs/design/ledger.md, "The transparency log"): a
//! dataset's signed checkpoint, a consistency proof between two of its sizes, and a job's
//! receipt. Each reads the log through `Store::dataset_log`, which checks every leaf against
//! the ledger first and refuses a log that does not match (`LogTampered`, 409), so nothing is
//! signed over an edited ledger. Checkpoints are signed at request time for the log's current
//! size (one Ed25519 signature); nothing signed is stored.
//!
//! **Receipts from a recently checked log.** A job's view is read often (clients poll it), and
//! checking a log is linear in its length, so a receipt is built from the last checked and
//! signed tree of the dataset's log ([`LogCache`]) when that tree is under
//! [`FRESH_FOR`] old and already holds the job's charge; otherwise the log is checked again.
//! Any tree that holds the leaf proves its inclusion, so a receipt from a slightly older tree
//! is as valid as one from the newest. Checkpoints and consistency proofs are always made from
//! a freshly checked log, so a witness sees tampering at once, and a job view within
//! [`FRESH_FOR`] of it (and at once after a restart, which starts with no cache).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use uuid::Uuid;

use super::error::{AppError, ErrorKind};
use crate::state::AppState;
use crate::store::JobRecord;
use crate::store::ledger_log::{VerifiedLog, dataset_log};
use crate::transparency::merkle;
use crate::transparency::{Checkpoint, ConsistencyProof, Receipt};

/// How long a checked and signed tree serves receipts before the log is checked again.
pub const FRESH_FOR: Duration = Duration::from_secs(10);

/// At most this many logs' trees are kept; past it the cache starts over.
const MOST_LOGS: usize = 1024;

/// A log as last checked, with its signed checkpoint.
#[derive(Debug)]
pub struct SignedTree {
    log: VerifiedLog,
    checkpoint: String,
    at: Instant,
}

/// The last checked tree of each log, by log name (module documentation).
#[derive(Debug, Default)]
pub struct LogCache {
    trees: Mutex<HashMap<String, Arc<SignedTree>>>,
}

impl LogCache {
    fn fresh(&self, log: &str) -> Option<Arc<SignedTree>> {
        let trees = self.trees.lock().unwrap_or_else(|e| e.into_inner());
        trees.get(log).filter(|t| t.at.elapsed() < FRESH_FOR).cloned()
    }

    fn keep(&self, name: String, tree: Arc<SignedTree>) {
        let mut trees = self.trees.lock().unwrap_or_else(|e| e.into_inner());
        if trees.len() >= MOST_LOGS {
            trees.clear();
        }
        trees.insert(name, tree);
    }

    fn forget(&self, log: &str) {
        let mut trees = self.trees.lock().unwrap_or_else(|e| e.into_inner());
        trees.remove(log);
    }
}

/// The checked log of the tenant's dataset; not found when there is no such dataset. A log
/// that fails its check is dropped from the cache too.
async fn verified(state: &AppState, tenant: Uuid, dataset: Uuid) -> Result<VerifiedLog, AppError> {
    let checked = state.store.dataset_log(tenant, dataset).await;
    if checked.is_err() {
        state.log_cache.forget(&dataset_log(dataset));
    }
    AppError::found(checked?, "dataset", dataset)
}

/// The dataset's log checked now and signed, kept for later receipts.
async fn check_and_sign(state: &AppState, tenant: Uuid, dataset: Uuid) -> Result<Arc<SignedTree>, AppError> {
    let log = verified(state, tenant, dataset).await?;
    let checkpoint = sign(state, dataset, &log)?;
    let tree = Arc::new(SignedTree {
        log,
        checkpoint,
        at: Instant::now(),
    });
    state.log_cache.keep(dataset_log(dataset), tree.clone());
    Ok(tree)
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
    Ok(check_and_sign(state, tenant, dataset).await?.checkpoint.clone())
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
    let tree = check_and_sign(state, tenant, dataset).await?;
    let log = &tree.log;
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

/// The receipt of `job`'s charge: its leaf, index and audit path in a recently checked tree
/// of the dataset's log that holds it, with that tree's signed checkpoint (module
/// documentation). `None` when the log holds no charge of this job.
pub async fn job_receipt(state: &AppState, job: &JobRecord) -> Result<Option<Receipt>, AppError> {
    let cached = state
        .log_cache
        .fresh(&dataset_log(job.dataset_id))
        .filter(|t| t.log.charge_of(job.id).is_some());
    let tree = match cached {
        Some(tree) => tree,
        None => check_and_sign(state, job.tenant_id, job.dataset_id).await?,
    };
    let Some(index) = tree.log.charge_of(job.id) else {
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
