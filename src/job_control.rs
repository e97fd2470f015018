//! Job control across replicas: the database is the source of truth for who runs a job, its
//! progress and its cancellation; this module keeps each running job's lease alive, turns what
//! the database says into stop requests for the computation, and runs the reaper.
//!
//! - **Lease.** The runner claims a job under a lease ([`crate::store::Store::claim_next_job`]).
//!   While the job runs, [`hold`] sends a heartbeat every third of a lease; the heartbeat
//!   returns the job's `cancel_requested` flag, so a cancellation made through any replica
//!   reaches the computation within a third of a lease. If the heartbeat finds the lease lost
//!   (a reaper failed the job while this replica was cut off from the database), the
//!   computation is stopped; its writes are fenced anyway.
//! - **Reaper.** Every replica runs [`reap`]: jobs whose lease ran out fail with their charge
//!   kept and are never re-run; studies whose coordinator stopped renewing fail (charges
//!   stand). This replaces a start-up sweep, which would fail the jobs other replicas are
//!   running.
//! - **In-memory fast path.** [`JobControl`] holds the jobs running in this process: the HTTP
//!   layer reads live progress from it and asks for a stop without waiting for the next
//!   heartbeat. It is a cache of this process's own work, never a source of truth.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::algorithms::Cancelled;
use crate::store::{Lease, Store, StoreError};

/// Least time between two progress writes to the store.
const PROGRESS_SAVE_PERIOD: Duration = Duration::from_millis(250);

/// A running job's progress callback ([`crate::algorithms::RunEnv`]'s): it shows the progress
/// live, holds while the test hook holds jobs, turns the job's timeout into a stop, stops the
/// computation when asked, and saves the progress in the store at most every 250 ms (and at
/// the end), from the async runtime so that the computation never waits for the database.
pub struct ProgressReporter {
    control: Arc<RunningJob>,
    deadline: Instant,
    store: Store,
    runtime: tokio::runtime::Handle,
    lease: Lease,
    job: Uuid,
    last_saved: Instant,
}

impl ProgressReporter {
    /// For the job `job` running under `lease` until `deadline`; call from the runtime.
    pub fn new(control: Arc<RunningJob>, deadline: Instant, store: Store, lease: Lease, job: Uuid) -> Self {
        ProgressReporter {
            control,
            deadline,
            store,
            runtime: tokio::runtime::Handle::current(),
            lease,
            job,
            last_saved: Instant::now() - PROGRESS_SAVE_PERIOD * 4,
        }
    }

    /// `done` of `total` steps are done; `Err(Cancelled)` when the computation must stop.
    pub fn report(&mut self, done: u32, total: u32) -> Result<(), Cancelled> {
        let control = &self.control;
        control.set_progress(done, total);
        control.wait_while_held();
        if Instant::now() > self.deadline {
            control.request_stop(StopReason::Timeout);
        }
        if control.should_stop() {
            return Err(Cancelled);
        }
        if self.last_saved.elapsed() >= PROGRESS_SAVE_PERIOD || done == total {
            self.last_saved = Instant::now();
            let (store, lease, job) = (self.store.clone(), self.lease, self.job);
            self.runtime.spawn(async move {
                match store.update_progress(lease, done, total).await {
                    // The job finished (its completion sets the progress to total) before this
                    // write ran, or its lease was lost, which the heartbeat handles.
                    Ok(()) | Err(StoreError::LeaseLost(_)) => {}
                    Err(e) => tracing::warn!(%job, error = %e, "could not save progress"),
                }
            });
        }
        Ok(())
    }
}

/// Why a running job was asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum StopReason {
    None = 0,
    User = 1,
    Timeout = 2,
    Shutdown = 3,
    LeaseLost = 4,
}

/// Live state of a running job, shared between the worker, its heartbeat and the HTTP handlers.
#[derive(Debug, Default)]
pub struct RunningJob {
    done: AtomicU32,
    total: AtomicU32,
    stop: AtomicBool,
    reason: AtomicU8,
    /// Set by the test hook [`JobControl::hold_jobs`]: no progress until asked to stop.
    held: bool,
}

impl RunningJob {
    /// Asks the computation to stop at its next progress report; the first reason wins.
    pub fn request_stop(&self, reason: StopReason) {
        let _ = self
            .reason
            .compare_exchange(0, reason as u8, Ordering::SeqCst, Ordering::SeqCst);
        self.stop.store(true, Ordering::SeqCst);
    }

    pub fn reason(&self) -> StopReason {
        match self.reason.load(Ordering::SeqCst) {
            1 => StopReason::User,
            2 => StopReason::Timeout,
            3 => StopReason::Shutdown,
            4 => StopReason::LeaseLost,
            _ => StopReason::None,
        }
    }

    pub fn should_stop(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Blocks (on the job's own thread) while the job is held by the test hook
    /// [`JobControl::hold_jobs`] and not asked to stop; returns at once otherwise.
    pub fn wait_while_held(&self) {
        while self.held && !self.should_stop() {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn set_progress(&self, done: u32, total: u32) {
        self.done.store(done, Ordering::Relaxed);
        self.total.store(total, Ordering::Relaxed);
    }

    /// The progress last reported (done, total).
    pub fn progress(&self) -> (u32, u32) {
        (
            self.done.load(Ordering::Relaxed),
            self.total.load(Ordering::Relaxed),
        )
    }
}

/// Registry of the jobs running in this process, and the runner's wake-up signal.
#[derive(Debug, Default)]
pub struct JobControl {
    running: Mutex<HashMap<Uuid, Arc<RunningJob>>>,
    wake: Notify,
    hold: AtomicBool,
}

impl JobControl {
    /// Tell the runner a job was queued (another replica's runner finds it by polling).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Waits for [`JobControl::wake`].
    pub async fn woken(&self) {
        self.wake.notified().await;
    }

    /// Live progress (done, total) of a job running in this process.
    pub fn progress(&self, id: Uuid) -> Option<(u32, u32)> {
        let running = self.running.lock().ok()?;
        let job = running.get(&id)?;
        Some((
            job.done.load(Ordering::Relaxed),
            job.total.load(Ordering::Relaxed),
        ))
    }

    /// Ask a job running in this process to stop at its next progress report (the fast path;
    /// the flag in the database reaches it through the heartbeat wherever it runs).
    pub fn request_cancel(&self, id: Uuid) {
        if let Some(job) = self.running.lock().ok().and_then(|r| r.get(&id).cloned()) {
            job.request_stop(StopReason::User);
        }
    }

    pub fn running_count(&self) -> usize {
        self.running.lock().map(|r| r.len()).unwrap_or(0)
    }

    /// A test hook: every job started from now on stops at its first progress report and
    /// waits there until it is asked to stop (cancelled, timed out, shut down), so a test can
    /// act on a running job without racing its end.
    #[doc(hidden)]
    pub fn hold_jobs(&self) {
        self.hold.store(true, Ordering::SeqCst);
    }

    pub fn register(&self, id: Uuid) -> Arc<RunningJob> {
        let job = Arc::new(RunningJob {
            held: self.hold.load(Ordering::SeqCst),
            ..RunningJob::default()
        });
        if let Ok(mut running) = self.running.lock() {
            running.insert(id, job.clone());
        }
        job
    }

    pub fn unregister(&self, id: Uuid) {
        if let Ok(mut running) = self.running.lock() {
            running.remove(&id);
        }
    }

    pub fn stop_all(&self, reason: StopReason) {
        if let Ok(running) = self.running.lock() {
            for job in running.values() {
                job.request_stop(reason);
            }
        }
    }
}

/// How often a holder renews its leases: three heartbeats per lease, so one lost heartbeat
/// (a slow database, a pause) never lets a healthy replica's lease run out.
pub fn heartbeat_period(lease: Duration) -> Duration {
    (lease / 3).max(Duration::from_millis(200))
}

/// Keeps a running job's lease alive until `done` is cancelled, and turns the database's view
/// into stop requests: `cancel_requested` → [`StopReason::User`], a lost lease →
/// [`StopReason::LeaseLost`]. A heartbeat that fails for another reason (the database is
/// unreachable) is retried at the next period; if the database stays away past the lease, a
/// reaper elsewhere fails the job and this holder learns it on reconnecting.
pub async fn hold(store: Store, lease: Lease, control: Arc<RunningJob>, done: CancellationToken) {
    let period = heartbeat_period(store.lease());
    loop {
        tokio::select! {
            _ = done.cancelled() => return,
            _ = tokio::time::sleep(period) => {}
        }
        match store.heartbeat(lease).await {
            Ok(true) => control.request_stop(StopReason::User),
            Ok(false) => {}
            Err(StoreError::LeaseLost(_)) => {
                tracing::warn!(job = %lease.job, "lost the job's lease (another replica failed it); stopping");
                control.request_stop(StopReason::LeaseLost);
                return;
            }
            Err(e) => tracing::warn!(job = %lease.job, error = %e, "could not renew the job's lease"),
        }
    }
}

/// The reaper, one per replica, until `shutdown`: fails jobs whose lease ran out and studies
/// whose coordinator stopped renewing. Runs once at once (so a restarted single process fails
/// what its predecessor left as soon as the lease allows), then every half lease. (A replica's
/// own study leases are renewed by its study hub, each under the epoch it claimed:
/// `StudyHub::adopt`.)
pub async fn reap(store: Store, shutdown: CancellationToken) {
    let period = (store.lease() / 2).max(Duration::from_millis(200));
    loop {
        match store.reap_expired_jobs().await {
            Ok(0) => {}
            Ok(n) => tracing::warn!(
                jobs = n,
                "failed jobs whose replica stopped answering (charges kept, never re-run)"
            ),
            Err(e) => tracing::warn!(error = %e, "could not reap expired jobs"),
        }
        match store.reap_expired_studies().await {
            Ok(0) => {}
            Ok(n) => tracing::warn!(
                studies = n,
                "failed studies whose coordinator stopped (charges made stand)"
            ),
            Err(e) => tracing::warn!(error = %e, "could not reap interrupted studies"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(period) => {}
        }
    }
}
