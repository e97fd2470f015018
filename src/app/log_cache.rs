//! The last checked and signed tree of each transparency log, which serves receipts for
//! [`FRESH_FOR`] (`app::ledger_log` explains why a receipt from a slightly older tree is as
//! valid). Held by the application state; apart from the use cases so that the state does not
//! import them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::store::ledger_log::VerifiedLog;

/// How long a checked and signed tree serves receipts before the log is checked again.
pub const FRESH_FOR: Duration = Duration::from_secs(10);

/// At most this many logs' trees are kept; past it the cache starts over.
const MOST_LOGS: usize = 1024;

/// A log as last checked, with its signed checkpoint.
#[derive(Debug)]
pub struct SignedTree {
    pub(super) log: VerifiedLog,
    pub(super) checkpoint: String,
    pub(super) at: Instant,
}

/// The last checked tree of each log, by log name (module documentation).
#[derive(Debug, Default)]
pub struct LogCache {
    trees: Mutex<HashMap<String, Arc<SignedTree>>>,
}

impl LogCache {
    pub(super) fn fresh(&self, log: &str) -> Option<Arc<SignedTree>> {
        let trees = self.trees.lock().unwrap_or_else(|e| e.into_inner());
        trees.get(log).filter(|t| t.at.elapsed() < FRESH_FOR).cloned()
    }

    pub(super) fn keep(&self, name: String, tree: Arc<SignedTree>) {
        let mut trees = self.trees.lock().unwrap_or_else(|e| e.into_inner());
        if trees.len() >= MOST_LOGS {
            trees.clear();
        }
        trees.insert(name, tree);
    }

    pub(super) fn forget(&self, log: &str) {
        let mut trees = self.trees.lock().unwrap_or_else(|e| e.into_inner());
        trees.remove(log);
    }
}
