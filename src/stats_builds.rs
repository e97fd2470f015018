//! Record statistics being built or kept in this process, one builder per dataset at a time
//! (issue 21 §2): an upload registers the build of its dataset's statistics before the dataset
//! becomes ready and holds it until they are kept, and the runner takes the same turn before it
//! opens a records dataset, so a job that arrives meanwhile waits and then reads the kept file
//! instead of building the statistics a second time. Two jobs on a dataset without statistics
//! (after a crash, or from before they were kept) likewise build them once.
//!
//! The registry is per process: a job on another replica does not see this one's build; it finds
//! the kept file, or builds the same bytes itself (`ingest::stats_file`, "Writing").
//!
//! It also keeps, in memory, the statistics the latest jobs decoded ([`KeptStats`], up to
//! [`KEPT_BUDGET_BYTES`], least recently used out first), so a repeated job reads neither the
//! file nor its hash again (60 ms for the 34.6 MB of a 100 000 × 500 dataset with its blocks).
//! Datasets are immutable, so what is kept never goes stale; only complete statistics are kept
//! (with their blocks, or of a shape that has none), so the blocks added after an upload are
//! not hidden by an earlier copy without them. A deleted dataset's are forgotten.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use uuid::Uuid;

use crate::ingest::stats_file::KeptStats;

/// Bytes of decoded statistics kept in memory between jobs.
pub const KEPT_BUDGET_BYTES: usize = 256 << 20;

/// Datasets whose statistics some task of this process is building, keeping or opening, and
/// the statistics of the latest datasets jobs read.
#[derive(Debug, Default)]
pub struct StatsBuilds {
    building: Mutex<HashMap<Uuid, watch::Receiver<()>>>,
    kept: Mutex<Kept>,
    /// Jobs of this process reading each dataset's records now.
    reading: Mutex<HashMap<Uuid, usize>>,
}

/// A job reading a dataset's records, from before it opens them until it ends.
#[derive(Debug)]
pub struct Reading {
    builds: Arc<StatsBuilds>,
    dataset: Uuid,
}

/// Decoded statistics by dataset, with when each was last used.
#[derive(Debug, Default)]
struct Kept {
    entries: HashMap<Uuid, (Arc<KeptStats>, u64)>,
    bytes: usize,
    clock: u64,
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

    /// Marks a job of this process as reading `dataset`'s records until the guard drops, so
    /// that the blocks for clipped jobs are built when no job is (see [`Self::wait_unread`]).
    pub fn reading(self: &Arc<Self>, dataset: Uuid) -> Reading {
        *lock_map(&self.reading).entry(dataset).or_default() += 1;
        Reading {
            builds: self.clone(),
            dataset,
        }
    }

    /// Blocks the calling thread until no job of this process has read `dataset`'s records for
    /// `quiet`, or `limit` has passed. The build of the blocks for clipped jobs (two passes over
    /// the records) waits so, so that the first job after an upload, which typically arrives at
    /// once, has both cores to itself: it makes one pass instead of sharing the cores with two.
    pub fn wait_unread(&self, dataset: Uuid, quiet: Duration, limit: Duration) {
        let start = Instant::now();
        let mut unread_since = Instant::now();
        while start.elapsed() < limit {
            if lock_map(&self.reading).contains_key(&dataset) {
                unread_since = Instant::now();
            } else if unread_since.elapsed() >= quiet {
                return;
            }
            std::thread::sleep(quiet / 4);
        }
    }

    /// The statistics of `dataset` this process keeps in memory, if any.
    pub fn kept(&self, dataset: Uuid) -> Option<Arc<KeptStats>> {
        let mut kept = self.lock_kept();
        kept.clock += 1;
        let now = kept.clock;
        let (stats, used) = kept.entries.get_mut(&dataset)?;
        *used = now;
        Some(stats.clone())
    }

    /// Keeps `stats` of `dataset` in memory if they fit the budget, making room by forgetting
    /// the least recently used; never in place of kept statistics that have their blocks when
    /// these have none (a job that read the file before the blocks were added must not undo the
    /// upload's keeping of them).
    pub fn keep(&self, dataset: Uuid, stats: &Arc<KeptStats>) {
        let size = stats.bytes();
        if size > KEPT_BUDGET_BYTES {
            return;
        }
        let mut kept = self.lock_kept();
        let downgrade = kept
            .entries
            .get(&dataset)
            .is_some_and(|(old, _)| old.blocks.is_some() && stats.blocks.is_none());
        if downgrade {
            return;
        }
        kept.remove(dataset);
        while kept.bytes + size > KEPT_BUDGET_BYTES {
            let Some(oldest) = kept
                .entries
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(id, _)| *id)
            else {
                break;
            };
            kept.remove(oldest);
        }
        kept.clock += 1;
        let now = kept.clock;
        kept.entries.insert(dataset, (stats.clone(), now));
        kept.bytes += size;
    }

    /// Forgets what is kept of every dataset for which `gone` says so (the sweep of
    /// `serve::forget_deleted_statistics`: datasets deleted through another replica).
    pub fn forget_where(&self, gone: impl Fn(Uuid) -> bool) {
        let ids: Vec<Uuid> = self.lock_kept().entries.keys().copied().collect();
        for id in ids.into_iter().filter(|&id| gone(id)) {
            self.forget(id);
        }
    }

    /// The datasets whose statistics this process keeps.
    pub fn datasets(&self) -> Vec<Uuid> {
        self.lock_kept().entries.keys().copied().collect()
    }

    /// Forgets what is kept of `dataset` (deleted).
    pub fn forget(&self, dataset: Uuid) {
        self.lock_kept().remove(dataset);
    }

    fn lock_kept(&self) -> MutexGuard<'_, Kept> {
        lock_map(&self.kept)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Uuid, watch::Receiver<()>>> {
        lock_map(&self.building)
    }
}

impl Drop for Reading {
    fn drop(&mut self) {
        let mut reading = lock_map(&self.builds.reading);
        if let Some(count) = reading.get_mut(&self.dataset) {
            *count -= 1;
            if *count == 0 {
                reading.remove(&self.dataset);
            }
        }
    }
}

/// Locks one of the registry's maps. They stay consistent even if a holder panicked: entries
/// are whole values, only added and removed.
fn lock_map<T>(map: &Mutex<T>) -> MutexGuard<'_, T> {
    map.lock().unwrap_or_else(|e| e.into_inner())
}

impl Kept {
    fn remove(&mut self, dataset: Uuid) {
        if let Some((stats, _)) = self.entries.remove(&dataset) {
            self.bytes -= stats.bytes();
        }
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
