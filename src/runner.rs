//! The job runner: claims queued jobs from the store, runs the maths on blocking threads with
//! bounded concurrency, reports progress, honours cancellation and time limits, and records
//! the outcome. A job is claimed (queued → running, under a lease) before any noise is drawn,
//! so its charge is final from then on; a job left running by a crash is failed by a reaper
//! once its lease runs out, never re-run (src/job_control.rs).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::algorithms::{self, Run, RunEnv, RunError};
use crate::context::data_context;
use crate::dataset::Kind;
use crate::ingest;
use crate::job_control::{self, ProgressReporter, RunningJob, StopReason};
use crate::linalg::subspace::polish_orthonormal;
use crate::state::AppState;
use crate::store::{DatasetStatus, JobRecord, JobResult, Lease};

/// Runs until `shutdown` is cancelled, then lets running jobs finish within the grace period
/// and stops the rest (they fail with their charge kept).
///
/// The replica's reaper runs beside it for the same span (src/job_control.rs).
pub async fn run(state: AppState, shutdown: CancellationToken) {
    let reaper = tokio::spawn(job_control::reap(state.store.clone(), shutdown.clone()));
    let adopter = tokio::spawn(state.studies.clone().adopt(
        job_control::heartbeat_period(state.store.lease()),
        shutdown.clone(),
    ));
    let permits = Arc::new(Semaphore::new(state.config.workers.max(1)));
    let mut tasks = JoinSet::new();
    loop {
        while tasks.try_join_next().is_some() {}
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit { Ok(p) => p, Err(_) => break },
            _ = shutdown.cancelled() => break,
        };
        match state.store.claim_next_job().await {
            Ok(Some(job)) => {
                let state = state.clone();
                tasks.spawn(async move {
                    run_one(&state, job).await;
                    drop(permit);
                });
            }
            Ok(None) => {
                drop(permit);
                tokio::select! {
                    _ = state.jobs.woken() => {}
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    _ = shutdown.cancelled() => break,
                }
            }
            Err(e) => {
                drop(permit);
                tracing::error!(error = %e, "could not claim a job");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
    let grace = state.config.shutdown_grace();
    let drained = tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::warn!(
            running = state.jobs.running_count(),
            "stopping jobs still running after the grace period"
        );
        state.jobs.stop_all(StopReason::Shutdown);
        while tasks.join_next().await.is_some() {}
    }
    let _ = reaper.await;
    let _ = adopter.await;
}

/// Whether a job's run time may be recorded: it grows with the row count n, so not where n is
/// private (`add_remove`; docs/design/privacy.md §3). Unknown counts as private.
async fn run_time_is_public(state: &AppState, job: &JobRecord) -> bool {
    match state.store.get_dataset(job.tenant_id, job.dataset_id).await {
        Ok(Some(dataset)) => crate::context::run_time_is_public(&dataset),
        _ => false,
    }
}

/// How a job ended without a result.
enum Failure {
    Stopped,
    Failed(String),
}

async fn run_one(state: &AppState, job: JobRecord) {
    let control = state.jobs.register(job.id);
    let lease = job.lease();
    let heartbeat = CancellationToken::new();
    tokio::spawn(job_control::hold(
        state.store.clone(),
        lease,
        control.clone(),
        heartbeat.clone(),
    ));
    // A run time that grows with a private n goes neither into the metrics nor the log line.
    let timed = run_time_is_public(state, &job).await;
    let started = Instant::now();
    tracing::info!(job = %job.id, algorithm = %job.algorithm, "job started");
    let outcome = execute(state, &job, control.clone()).await;
    let seconds = timed.then(|| started.elapsed().as_secs_f64());
    let write = match outcome {
        Ok(result) => {
            state.metrics.job_finished(&job.algorithm, "succeeded", seconds);
            Some(Outcome::Succeeded(result))
        }
        Err(Failure::Stopped) => match control.reason() {
            StopReason::User | StopReason::None => {
                state.metrics.job_finished(&job.algorithm, "cancelled", seconds);
                Some(Outcome::Cancelled)
            }
            StopReason::LeaseLost => {
                // Another replica's reaper already failed the job; nothing left to write.
                state.metrics.job_finished(&job.algorithm, "failed", seconds);
                None
            }
            StopReason::Timeout => {
                state.metrics.job_finished(&job.algorithm, "failed", seconds);
                Some(Outcome::Failed(format!(
                    "the job exceeded the time limit of {} s; its privacy charge is kept",
                    state.config.job_timeout_secs
                )))
            }
            StopReason::Shutdown => {
                state.metrics.job_finished(&job.algorithm, "failed", seconds);
                Some(Outcome::Failed(
                    "stopped by a service shutdown; its privacy charge is kept".into(),
                ))
            }
        },
        Err(Failure::Failed(reason)) => {
            state.metrics.job_finished(&job.algorithm, "failed", seconds);
            Some(Outcome::Failed(reason))
        }
    };
    if let Some(write) = write {
        record(state, lease, &control, &write).await;
    }
    // The heartbeat runs until the outcome is written (or given up), so that the lease holds
    // while the write is retried through a database outage.
    heartbeat.cancel();
    match seconds {
        Some(seconds) => tracing::info!(job = %job.id, seconds, "job finished"),
        None => tracing::info!(job = %job.id, "job finished"),
    }
    state.jobs.unregister(job.id);
}

/// What a finished job leaves in the database.
enum Outcome {
    Succeeded(JobResult),
    Cancelled,
    Failed(String),
}

/// Writes a finished job's outcome. A write the database refused for being busy or away is
/// retried, with the heartbeat still renewing the lease, so a job that finished during an
/// outage shorter than the lease still ends as it should (docs/deployment.md, "Database lost
/// while running"). It is given up once the lease is lost or must have run out (a reaper then
/// fails the job, charges kept, and this write would be fenced off anyway), or on shutdown.
async fn record(state: &AppState, lease: Lease, control: &RunningJob, outcome: &Outcome) {
    let finished = Instant::now();
    let limit = state.store.lease();
    let mut pause = Duration::from_millis(200);
    loop {
        let written = match outcome {
            Outcome::Succeeded(result) => {
                let steps = Some(control.progress().1).filter(|&total| total > 0);
                state.store.complete_job_after(lease, result, steps).await
            }
            Outcome::Cancelled => state.store.mark_cancelled(lease).await,
            Outcome::Failed(reason) => state.store.fail_job(lease, reason).await,
        };
        let e = match written {
            Ok(()) => return,
            Err(e) => e,
        };
        // A result the store refuses as malformed will not become valid on retry: fail the job
        // now (its charge kept) rather than leave it running until its lease runs out.
        if let (Outcome::Succeeded(_), crate::store::StoreError::InvalidResult(why)) = (outcome, &e) {
            tracing::error!(job = %lease.job, error = %why, "the job's result was refused; failing it");
            if let Err(e) = state
                .store
                .fail_job(lease, "internal error: the result could not be stored")
                .await
            {
                tracing::error!(job = %lease.job, error = %e, "could not record the job's failure");
            }
            return;
        }
        let gone = matches!(control.reason(), StopReason::LeaseLost | StopReason::Shutdown);
        if !e.is_busy() || gone || finished.elapsed() >= limit {
            tracing::error!(job = %lease.job, error = %e, "could not record the job's outcome");
            return;
        }
        tracing::warn!(job = %lease.job, error = %e, "could not record the job's outcome yet; retrying");
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(2));
    }
}

/// What a job runs on, read from the store and checked: its dataset (ready), the dataset's
/// public context, the algorithm, and the data's n × d.
async fn job_inputs(
    state: &AppState,
    job: &JobRecord,
) -> Result<
    (
        crate::store::DatasetRecord,
        crate::dataset::DataContext,
        &'static dyn algorithms::DynAlgorithm,
        (usize, usize),
    ),
    Failure,
> {
    let store_error = |e: crate::store::StoreError| {
        tracing::error!(job = %job.id, error = %e, "store error while starting a job");
        Failure::Failed("internal error while loading the job".into())
    };
    let dataset = state
        .store
        .get_dataset(job.tenant_id, job.dataset_id)
        .await
        .map_err(store_error)?
        .ok_or_else(|| Failure::Failed("the dataset no longer exists".into()))?;
    if dataset.status != DatasetStatus::Ready {
        return Err(Failure::Failed(
            "the dataset's data was deleted before the job started".into(),
        ));
    }
    let ctx = data_context(&dataset).ok_or_else(|| Failure::Failed("the dataset has no data".into()))?;
    let algorithm = algorithms::find_runnable(&job.algorithm).ok_or_else(|| {
        Failure::Failed(format!(
            "algorithm `{}` is not available in this version",
            job.algorithm
        ))
    })?;
    let (n, d) = match (dataset.n, dataset.d) {
        (Some(n), Some(d)) => (n as usize, d as usize),
        _ => return Err(Failure::Failed("the dataset has no data".into())),
    };
    Ok((dataset, ctx, algorithm, (n, d)))
}

async fn execute(state: &AppState, job: &JobRecord, control: Arc<RunningJob>) -> Result<JobResult, Failure> {
    let (dataset, ctx, algorithm, (n, d)) = job_inputs(state, job).await?;
    let path = state.store.data_path(dataset.id);
    let stats_path = state.store.stats_path(dataset.id);
    let stats_temp = state.store.upload_temp_path(dataset.id);
    let deadline = Instant::now() + state.config.job_timeout();
    // A fetch from the object store makes no progress reports: it is raced against the job's
    // stop and deadline instead (an 8 GB object would otherwise hold a cancelled job).
    let stats_stored = tokio::select! {
        fetched = fetch_objects(state, job, &dataset, [&path, &stats_path]) => fetched?,
        () = stopped(&control, deadline) => return Err(Failure::Stopped),
    };
    let seed = if dataset.public { job.seed } else { None };
    let config = job.config.clone();
    let kind = dataset.kind;
    let nnz = dataset.nnz.map(|v| v as u64);
    // A records dataset's statistics being built or kept by an upload or another job of this
    // process: wait for them, then read them, rather than build them a second time.
    let stats_turn = match kind {
        Kind::Records => Some(state.stats_builds.turn(dataset.id).await),
        Kind::Matrix => None,
    };
    let reading = stats_turn
        .as_ref()
        .map(|_| state.stats_builds.reading(dataset.id));
    let cached = stats_turn
        .as_ref()
        .and_then(|_| state.stats_builds.kept(dataset.id));
    let stats_builds = state.stats_builds.clone();
    let dataset_id = dataset.id;
    let job_id = job.id;
    let reporter = ProgressReporter::new(control, deadline, state.store.clone(), job.lease(), job.id);

    let blocking = Blocking {
        job: job_id,
        paths: [path, stats_path, stats_temp],
        kind,
        nnz,
        shape: (n, d),
        cached,
        stats_builds,
        dataset: dataset_id,
        stats_turn,
        reading,
        seed,
        algorithm,
        config,
        ctx,
    };
    let task = tokio::task::spawn_blocking(move || compute(blocking, reporter));
    let (output, released) = match task.await {
        Ok(result) => result?,
        Err(e) => {
            tracing::error!(job = %job.id, error = %e, "job panicked");
            return Err(Failure::Failed(
                "internal error while running the algorithm".into(),
            ));
        }
    };
    if !stats_stored {
        store_built_statistics(state, &dataset).await;
    }
    let basis = checked_basis(&job.algorithm, output.basis, output.eigenvalues.as_deref(), d)?;
    Ok(JobResult {
        d: basis.nrows(),
        k: basis.ncols(),
        basis: basis.as_slice().to_vec(),
        eigenvalues: output.eigenvalues,
        released: (!released.is_empty()).then_some(serde_json::Value::Object(released)),
    })
}

/// With datasets in the object store: the dataset's data into this replica's cache (checked
/// against the SHA-256 recorded when it was uploaded), and its kept statistics if the store
/// has them. An unreachable store fails the job (its charge is kept, as with any failure after
/// the claim); the message names no data-dependent fact. Returns whether the store holds the
/// statistics (else a job that builds them stores them after).
async fn fetch_objects(
    state: &AppState,
    job: &JobRecord,
    dataset: &crate::store::DatasetRecord,
    [data, stats]: [&std::path::Path; 2],
) -> Result<bool, Failure> {
    let Some(objects) = &state.objects else {
        return Ok(true);
    };
    let failed = |e: &dyn std::fmt::Display| {
        tracing::error!(job = %job.id, dataset = %dataset.id, error = %e, "could not read the dataset from the object store");
        Failure::Failed(
            "could not read the dataset's data from the object store; its privacy charge is kept".into(),
        )
    };
    let object = match objects.known_data(dataset.id) {
        Some(known) => Some(known),
        None => {
            let read = state
                .store
                .data_object(dataset.id)
                .await
                .map_err(|e| failed(&e))?;
            if let Some(object) = &read {
                objects.know_data(dataset.id, object);
            }
            read
        }
    };
    match object {
        Some(object) => objects.fetch_data(&object, data).await.map_err(|e| failed(&e))?,
        // Uploaded before the store was configured: its file is in the data directory.
        None if data.exists() => {}
        None => return Err(failed(&"no data object is recorded for the dataset")),
    }
    if dataset.kind != Kind::Records {
        return Ok(true);
    }
    match objects.fetch_stats(dataset.id, stats).await {
        Ok(stored) => Ok(stored),
        Err(e) => {
            // The job builds them from the data instead.
            tracing::warn!(job = %job.id, error = %e, "could not read the kept statistics from the object store");
            Ok(false)
        }
    }
}

/// Resolves once the job is asked to stop, or once its deadline passes (it is then asked to stop
/// for the time limit): for the steps before the computation, which make no progress reports.
async fn stopped(control: &RunningJob, deadline: Instant) {
    loop {
        if control.should_stop() {
            return;
        }
        if Instant::now() >= deadline {
            control.request_stop(StopReason::Timeout);
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// With datasets in the object store: statistics this job built (none were stored) go to the
/// store, so other replicas read rather than rebuild them.
async fn store_built_statistics(state: &AppState, dataset: &crate::store::DatasetRecord) {
    let Some(objects) = &state.objects else {
        return;
    };
    let stats = state.store.stats_path(dataset.id);
    if dataset.kind != Kind::Records || objects.cache().holds_verified(&stats).await || !stats.exists() {
        return;
    }
    if let Err(e) = objects.put_stats(dataset.id, &stats).await {
        tracing::warn!(dataset = %dataset.id, error = %e, "could not store the statistics a job built");
    }
}

/// A released value of a job, by name (`RunEnv::released`).
type Released = serde_json::Map<String, serde_json::Value>;

/// Everything a job's computation takes onto its blocking thread.
struct Blocking {
    job: uuid::Uuid,
    /// The data, its statistics, and where statistics are written before they are kept.
    paths: [std::path::PathBuf; 3],
    kind: Kind,
    nnz: Option<u64>,
    shape: (usize, usize),
    cached: Option<Arc<crate::ingest::stats_file::KeptStats>>,
    stats_builds: Arc<crate::stats_builds::StatsBuilds>,
    dataset: uuid::Uuid,
    /// This job's turn at the dataset's statistics, given up once they are open.
    stats_turn: Option<crate::stats_builds::StatsTurn>,
    /// Held while the job reads the dataset's statistics.
    reading: Option<crate::stats_builds::Reading>,
    seed: Option<u64>,
    algorithm: &'static dyn algorithms::DynAlgorithm,
    config: serde_json::Value,
    ctx: crate::dataset::DataContext,
}

/// Opens the data and runs the algorithm on it (on a blocking thread).
fn compute(b: Blocking, mut reporter: ProgressReporter) -> Result<(algorithms::Output, Released), Failure> {
    let job_id = b.job;
    let load_error = |e: std::io::Error| {
        tracing::error!(job = %job_id, error = %e, "could not load the dataset");
        Failure::Failed("could not load the dataset's data".into())
    };
    let [data, stats, stats_temp] = &b.paths;
    let paths = ingest::input::Paths {
        data,
        stats,
        stats_temp,
    };
    let (opened, write_error) =
        ingest::input::open(b.kind, b.nnz, &paths, b.shape, b.cached).map_err(load_error)?;
    if let Some(kept) = opened.kept() {
        b.stats_builds.keep(b.dataset, kept);
    }
    drop(b.stats_turn);
    if let Some(e) = write_error {
        tracing::warn!(job = %job_id, error = %e, "could not keep the dataset's statistics; the next job recomputes them");
    }
    let input = opened.input().map_err(load_error)?;
    // Private datasets: a fresh generator seeded from the OS, never stored or logged.
    let mut rng = match b.seed {
        Some(seed) => ChaCha20Rng::seed_from_u64(seed),
        None => ChaCha20Rng::from_os_rng(),
    };
    let mut progress = |done: u32, total: u32| reporter.report(done, total);
    let mut env = RunEnv::new(&mut rng, &mut progress);
    let output = b
        .algorithm
        .run_prepared(
            &b.config,
            Run {
                input,
                ctx: &b.ctx,
                env: &mut env,
            },
        )
        .map_err(|e| match e {
            RunError::Cancelled => Failure::Stopped,
            RunError::Failed(reason) => Failure::Failed(reason),
        })?;
    let released: Released = env
        .released()
        .iter()
        .map(|(name, value)| ((*name).to_string(), value.clone()))
        .collect();
    drop(b.reading);
    Ok((output, released))
}

/// The basis a job returns: d rows, orthonormal (polished), at least one column, or d×0 for
/// the forecast's private spectrum, which releases eigenvalues only.
fn checked_basis(
    algorithm: &str,
    basis: crate::linalg::Matrix,
    eigenvalues: Option<&[f64]>,
    d: usize,
) -> Result<crate::linalg::Matrix, Failure> {
    let spectrum_only = algorithm == algorithms::spectrum::NAME
        && basis.nrows() == d
        && basis.ncols() == 0
        && eigenvalues.is_some_and(|v| v.len() == d);
    (basis.nrows() == d && (basis.ncols() >= 1 || spectrum_only))
        .then(|| {
            if spectrum_only {
                Some(basis)
            } else {
                polish_orthonormal(basis)
            }
        })
        .flatten()
        .ok_or_else(|| {
            Failure::Failed("the algorithm did not produce an orthonormal basis (numerical failure)".into())
        })
}
