//! The runner's side of jobs: claiming in FIFO order under a lease, heartbeats, progress, the
//! terminal transitions, and the reaper. A job that leaves `running` keeps its charge whatever
//! the outcome: noise has been drawn (docs/design/privacy.md §2). Nothing here ever moves a job back to
//! `queued`, so no job is run twice.
//!
//! Replicas: a claim writes the claiming replica (`claimed_by`), bumps `attempt` and sets
//! `lease_until`; the holder's heartbeat pushes the lease forward and reads the cancel flag.
//! Every write of the holder (progress, completion, failure) is fenced by (job, attempt,
//! replica), so once any replica's reaper has failed a job whose lease ran out, the old holder
//! can no longer write to it ([`StoreError::LeaseLost`]). Leases are compared on the replicas'
//! clocks, which must agree to well within a lease (NTP).

use sqlx::{AnyPool, Row};
use uuid::Uuid;

use super::codec::{basis_to_bytes, id, now, ts};
use super::models::{JobRecord, JobResult, JobStatus};
use super::rows::{self, JOB_COLUMNS};
use super::{AnyQuery, Store, StoreError};

/// Why a job found `running` at start-up failed.
pub const INTERRUPTED_REASON: &str = "interrupted: the service stopped while this job was running; its privacy charge is kept and it is never re-run";

/// Why a job whose lease ran out failed.
pub const LEASE_EXPIRED_REASON: &str = "interrupted: the replica running this job stopped answering (its lease ran out); its privacy charge is kept and it is never re-run";

/// A running job as held by this replica: the fence of every write the runner makes to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    pub job: Uuid,
    pub attempt: i64,
}

impl JobRecord {
    /// The lease of a job this replica just claimed.
    pub fn lease(&self) -> Lease {
        Lease {
            job: self.id,
            attempt: self.attempt,
        }
    }
}

/// Why a job stopped on a cancellation request ended.
pub const CANCELLED_REASON: &str = "cancelled while running; its privacy charge is kept";

fn check_result(result: &JobResult) -> Result<(), StoreError> {
    let bad = |msg: &str| Err(StoreError::InvalidResult(msg.to_owned()));
    // k = 0 only for a release of eigenvalues alone (the forecast's private spectrum), which
    // carries one per dimension.
    let values_only = result.k == 0 && result.eigenvalues.as_ref().is_some_and(|v| v.len() == result.d);
    if result.d == 0 || (result.k == 0 && !values_only) || result.k > result.d {
        return bad("the basis must be d×k with 1 <= k <= d");
    }
    if result.d.checked_mul(result.k) != Some(result.basis.len()) {
        return bad("the basis must hold d·k values");
    }
    if !result
        .basis
        .iter()
        .chain(result.eigenvalues.iter().flatten())
        .all(|x| x.is_finite())
    {
        return bad("the basis and the values must be finite");
    }
    Ok(())
}

fn as_db(x: usize) -> Result<i64, StoreError> {
    i64::try_from(x).map_err(|_| StoreError::InvalidResult(format!("{x} does not fit the database")))
}

impl Store {
    /// Claims the oldest queued job for this replica: queued → running with `started_at`, a
    /// lease of [`Store::lease`] and `attempt + 1`, in one conditional statement, so
    /// concurrent claimers (threads or replicas) never get the same job. On PostgreSQL the
    /// candidate row is chosen `FOR UPDATE SKIP LOCKED`, so claimers do not queue behind each
    /// other; on SQLite the statement runs under the database's write lock.
    pub async fn claim_next_job(&self) -> Result<Option<JobRecord>, StoreError> {
        let sql = format!(
            "UPDATE jobs SET status = 'running', started_at = $1, claimed_by = $2, lease_until = $3, \
                 attempt = attempt + 1 \
             WHERE seq = (SELECT seq FROM jobs WHERE status = 'queued' ORDER BY seq LIMIT 1 {}) \
               AND status = 'queued' \
             RETURNING {JOB_COLUMNS}",
            self.backend.skip_locked()
        );
        let at = now();
        let row = sqlx::query(&sql)
            .bind(ts(at))
            .bind(self.replica())
            .bind(ts(self.lease_end(self.lease_now())))
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(rows::job).transpose()
    }

    /// The holder's heartbeat: pushes the lease of a job this replica holds forward by
    /// [`Store::lease`] and returns whether cancellation was requested (by any replica).
    /// [`StoreError::LeaseLost`] if the job is no longer this replica's running job (a reaper
    /// failed it): the caller must stop it.
    pub async fn heartbeat(&self, lease: Lease) -> Result<bool, StoreError> {
        let row = sqlx::query(
            "UPDATE jobs SET lease_until = $1 \
             WHERE id = $2 AND status = 'running' AND attempt = $3 AND claimed_by = $4 \
             RETURNING cancel_requested",
        )
        .bind(ts(self.lease_end(self.lease_now())))
        .bind(id(lease.job))
        .bind(lease.attempt)
        .bind(self.replica())
        .fetch_optional(&self.pool)
        .await?;
        match row {
            Some(row) => Ok(row.try_get::<i64, _>("cancel_requested")? != 0),
            None => Err(StoreError::LeaseLost(lease.job)),
        }
    }

    /// Records progress (iteration `done` of `total`) of a running job this replica holds.
    pub async fn update_progress(&self, lease: Lease, done: u32, total: u32) -> Result<(), StoreError> {
        self.update_held(
            &self.pool,
            lease,
            "progress_done = $1, progress_total = $2",
            |q| q.bind(i64::from(done)).bind(i64::from(total)),
        )
        .await
    }

    /// running → succeeded, storing the basis (little-endian f64, column-major d×k) and values;
    /// fenced by the lease. Committed on the synced pool: once a client can read the result, a
    /// power loss cannot put the job back to queued, where it would run again with fresh noise
    /// on the one charge.
    pub async fn complete_job(&self, lease: Lease, result: &JobResult) -> Result<(), StoreError> {
        self.complete_job_after(lease, result, None).await
    }

    /// [`Store::complete_job`] of a job that ran `steps` progress steps: its progress is
    /// recorded as `steps` of `steps` in the same write, whether or not a progress write of the
    /// job (spawned, at most every 250 ms) reached the database before it. `None`: the progress
    /// saved so far is completed.
    pub async fn complete_job_after(
        &self,
        lease: Lease,
        result: &JobResult,
        steps: Option<u32>,
    ) -> Result<(), StoreError> {
        check_result(result)?;
        let eigenvalues = result
            .eigenvalues
            .as_ref()
            .map(serde_json::to_string)
            .transpose()?;
        let released = result.released.as_ref().map(serde_json::to_string).transpose()?;
        let (d, k, basis) = (as_db(result.d)?, as_db(result.k)?, basis_to_bytes(&result.basis));
        self.update_held(
            &self.synced,
            lease,
            "status = 'succeeded', finished_at = $1, result = $2, result_d = $3, result_k = $4, \
                 eigenvalues = $5, released = $6, progress_done = COALESCE($7, progress_total), \
                 progress_total = COALESCE($8, progress_total), lease_until = NULL",
            |q| {
                q.bind(ts(now()))
                    .bind(basis)
                    .bind(d)
                    .bind(k)
                    .bind(eigenvalues)
                    .bind(released)
                    .bind(steps.map(i64::from))
                    .bind(steps.map(i64::from))
            },
        )
        .await
    }

    /// running → failed with `reason`; the charge is kept. Fenced by the lease.
    pub async fn fail_job(&self, lease: Lease, reason: &str) -> Result<(), StoreError> {
        self.finish(lease, JobStatus::Failed, reason).await
    }

    /// running → cancelled (the runner honoured `cancel_requested`); the charge is kept.
    pub async fn mark_cancelled(&self, lease: Lease) -> Result<(), StoreError> {
        self.finish(lease, JobStatus::Cancelled, CANCELLED_REASON).await
    }

    /// Committed on the synced pool, as a result is: a failure's reason can be an output of
    /// the mechanism ("PrivRange returned ⊥", a coherence bound exceeded), so a power loss must
    /// not put a job whose failure was read back in the queue to run again.
    async fn finish(&self, lease: Lease, status: JobStatus, reason: &str) -> Result<(), StoreError> {
        let reason = reason.to_owned();
        self.update_held(
            &self.synced,
            lease,
            "status = $1, error = $2, finished_at = $3, lease_until = NULL",
            |q| q.bind(status.as_str()).bind(reason).bind(ts(now())),
        )
        .await
    }

    /// `UPDATE jobs SET {set}` on `pool` (the synced pool for an outcome) on the running job
    /// `lease` names, if this replica still holds it under that attempt. `set` uses the
    /// placeholders $1…$k, bound by `bind`; the lease's own arguments follow them.
    /// [`StoreError::LeaseLost`] if the lease no longer holds.
    async fn update_held(
        &self,
        pool: &AnyPool,
        lease: Lease,
        set: &str,
        bind: impl for<'q> FnOnce(AnyQuery<'q>) -> AnyQuery<'q>,
    ) -> Result<(), StoreError> {
        let k = set.matches('$').count();
        let sql = format!(
            "UPDATE jobs SET {set} WHERE id = ${} AND status = 'running' AND attempt = ${} AND claimed_by = ${}",
            k + 1,
            k + 2,
            k + 3
        );
        let updated = bind(sqlx::query(&sql))
            .bind(id(lease.job))
            .bind(lease.attempt)
            .bind(self.replica())
            .execute(pool)
            .await?;
        held(updated.rows_affected(), lease)
    }

    /// The reaper, run by every replica: each running job whose lease ran out (its holder
    /// crashed, was killed or lost the database for longer than a lease) fails with
    /// [`LEASE_EXPIRED_REASON`], keeps its charge, and is never re-run (re-running would draw
    /// fresh noise on a charge already spent). A running job without a lease was left by a
    /// version without leases and is failed too. Returns how many jobs were failed.
    pub async fn reap_expired_jobs(&self) -> Result<u64, StoreError> {
        let at = ts(self.lease_now());
        let updated = sqlx::query(
            "UPDATE jobs SET status = 'failed', error = $1, finished_at = $2, lease_until = NULL \
             WHERE status = 'running' AND (lease_until IS NULL OR lease_until < $2)",
        )
        .bind(LEASE_EXPIRED_REASON)
        .bind(&at)
        .execute(&self.pool)
        .await?;
        Ok(updated.rows_affected())
    }

    /// At start, before the runner claims anything: every job still `running` under this
    /// replica's name was cut off by this replica's stop or crash (one process per name), so
    /// it fails at once with [`INTERRUPTED_REASON`] instead of waiting for its lease; so does
    /// a running job without a lease (left by a version without leases). Charges are kept and
    /// nothing is re-run. Other replicas' jobs are left to their leases. Returns how many.
    pub async fn fail_interrupted_jobs(&self) -> Result<u64, StoreError> {
        let updated = sqlx::query(
            "UPDATE jobs SET status = 'failed', error = $1, finished_at = $2, lease_until = NULL \
             WHERE status = 'running' AND (claimed_by = $3 OR lease_until IS NULL)",
        )
        .bind(INTERRUPTED_REASON)
        .bind(ts(now()))
        .bind(self.replica())
        .execute(&self.pool)
        .await?;
        Ok(updated.rows_affected())
    }

    /// How many jobs are in each status (every status listed, zeros included).
    pub async fn job_counts(&self) -> Result<Vec<(JobStatus, i64)>, StoreError> {
        let found = sqlx::query("SELECT status, COUNT(*) AS count FROM jobs GROUP BY status")
            .fetch_all(&self.pool)
            .await?;
        let mut counts: Vec<(JobStatus, i64)> = JobStatus::ALL.iter().map(|&s| (s, 0)).collect();
        for row in &found {
            let status: &str = row.try_get("status")?;
            let count: i64 = row.try_get("count")?;
            if let Some(slot) = counts.iter_mut().find(|(s, _)| s.as_str() == status) {
                slot.1 = count;
            }
        }
        Ok(counts)
    }
}

fn held(rows_affected: u64, lease: Lease) -> Result<(), StoreError> {
    if rows_affected == 1 {
        Ok(())
    } else {
        Err(StoreError::LeaseLost(lease.job))
    }
}
