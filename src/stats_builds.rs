//! Record statistics being built or kept in this process, one builder per dataset at a time
//! (issue 21 §2): an upload registers the build of its dataset's statistics before the dataset
//! becomes ready and holds it until they are kept, and the runner takes the same turn before it
//! opens a records dataset, so a job that arrives meanwhile waits and then reads the kept file
//! instead of building the statistics a second time. Two jobs on a dataset without statistics
//! (after a crash, or from before they were kept) likewise build them once.
//!
//! The registry is per process: a job on another replica does not see this one's build; it finds
//! the kept file, or builds the same bytes itself (`ingest::stats_file`, "Writing").

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::watch;
use uuid::Uuid;

/// Datasets whose statistics some task of this process is building, keeping or opening.
#[derive(Debug, Default)]
pub struct StatsBuilds {
    building: Mutex<HashMap<Uuid, watch::Receiver<()>>>,
}

/// The turn of one task at a dataset's statistics; the next waiting task goes when it drops.
#[derive(Debug)]
pub struct StatsTurn {
    builds: Arc<StatsBuilds>,
    dataset: Uuid,
    /// Dropped with the turn, which wakes the waiters.
    _done: watch::Sender<()>,
}

impl StatsBuilds {
    /// Waits until no other task holds the turn at `dataset`'s statistics, then takes it.
    pub async fn turn(self: &Arc<Self>, dataset: Uuid) -> StatsTurn {
        loop {
            let mut holder = {
                let mut building = self.lock();
                match building.get(&dataset) {
                    Some(holder) => holder.clone(),
                    None => {
                        let (done, holder) = watch::channel(());
                        building.insert(dataset, holder);
                        return StatsTurn {
                            builds: self.clone(),
                            dataset,
                            _done: done,
                        };
                    }
                }
            };
            // Nothing is ever sent: this returns once the holder's turn is dropped.
            while holder.changed().await.is_ok() {}
        }
    }

    /// Whether some task holds the turn at `dataset`'s statistics now.
    pub fn is_busy(&self, dataset: Uuid) -> bool {
        self.lock().contains_key(&dataset)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Uuid, watch::Receiver<()>>> {
        // The map stays consistent even if a holder panicked: entries are only added and removed.
        self.building.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for StatsTurn {
    fn drop(&mut self) {
        self.builds.lock().remove(&self.dataset);
    }
}

#[cfg(test)]
#[path = "stats_builds_tests.rs"]
mod tests;
