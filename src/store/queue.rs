//! The runner's side of jobs: claiming in FIFO order, progress, and the terminal transitions.
//! A job that leaves `running` keeps its charge whatever the outcome: noise has been drawn
//! (privacy.md §2). Nothing here ever moves a job back to `queued`, so no job is run twice.

use sqlx::Row;
use uuid::Uuid;

use super::codec::{basis_to_bytes, id, now, ts};
use super::models::{JobRecord, JobResult, JobStatus};
use super::rows::{self, JOB_COLUMNS};
use super::{Store, StoreError};

/// Why a job found `running` at start-up failed.
pub const INTERRUPTED_REASON: &str = "interrupted: the service stopped while this job was running; its privacy charge is kept and it is never re-run";

/// Why a job stopped on a cancellation request ended.
pub const CANCELLED_REASON: &str = "cancelled while running; its privacy charge is kept";

fn check_result(result: &JobResult) -> Result<(), StoreError> {
    let bad = |msg: &str| Err(StoreError::InvalidResult(msg.to_owned()));
    if result.d == 0 || result.k == 0 || result.k > result.d {
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
    /// Claims the oldest queued job: queued → running with `started_at`, in one conditional
    /// statement, so concurrent claimers never get the same job.
    pub async fn claim_next_job(&self) -> Result<Option<JobRecord>, StoreError> {
        let sql = format!(
            "UPDATE jobs SET status = 'running', started_at = ?1 \
             WHERE seq = (SELECT seq FROM jobs WHERE status = 'queued' ORDER BY seq LIMIT 1) \
               AND status = 'queued' \
             RETURNING {JOB_COLUMNS}"
        );
        let row = sqlx::query(&sql)
            .bind(ts(now()))
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(rows::job).transpose()
    }

    /// Records progress (iteration `done` of `total`) of a running job.
    pub async fn update_progress(&self, job: Uuid, done: u32, total: u32) -> Result<(), StoreError> {
        let updated = sqlx::query(
            "UPDATE jobs SET progress_done = ?, progress_total = ? WHERE id = ? AND status = 'running'",
        )
        .bind(i64::from(done))
        .bind(i64::from(total))
        .bind(id(job))
        .execute(&self.pool)
        .await?;
        running(updated.rows_affected(), job)
    }

    /// running → succeeded, storing the basis (little-endian f64, column-major d×k) and values.
    pub async fn complete_job(&self, job: Uuid, result: &JobResult) -> Result<(), StoreError> {
        check_result(result)?;
        let eigenvalues = result
            .eigenvalues
            .as_ref()
            .map(serde_json::to_string)
            .transpose()?;
        let updated = sqlx::query(
            "UPDATE jobs SET status = 'succeeded', finished_at = ?, result = ?, result_d = ?, result_k = ?, \
                 eigenvalues = ?, released = ?, progress_done = progress_total \
             WHERE id = ? AND status = 'running'",
        )
        .bind(ts(now()))
        .bind(basis_to_bytes(&result.basis))
        .bind(as_db(result.d)?)
        .bind(as_db(result.k)?)
        .bind(eigenvalues)
        .bind(result.released.as_ref().map(serde_json::to_string).transpose()?)
        .bind(id(job))
        .execute(&self.pool)
        .await?;
        running(updated.rows_affected(), job)
    }

    /// running → failed with `reason`; the charge is kept.
    pub async fn fail_job(&self, job: Uuid, reason: &str) -> Result<(), StoreError> {
        self.finish(job, JobStatus::Failed, reason).await
    }

    /// running → cancelled (the runner honoured `cancel_requested`); the charge is kept.
    pub async fn mark_cancelled(&self, job: Uuid) -> Result<(), StoreError> {
        self.finish(job, JobStatus::Cancelled, CANCELLED_REASON).await
    }

    async fn finish(&self, job: Uuid, status: JobStatus, reason: &str) -> Result<(), StoreError> {
        let updated = sqlx::query(
            "UPDATE jobs SET status = ?, error = ?, finished_at = ? WHERE id = ? AND status = 'running'",
        )
        .bind(status.as_str())
        .bind(reason)
        .bind(ts(now()))
        .bind(id(job))
        .execute(&self.pool)
        .await?;
        running(updated.rows_affected(), job)
    }

    /// At start-up, before the runner claims anything: every job still `running` was cut off
    /// by a stop or crash. It fails with [`INTERRUPTED_REASON`], keeps its charge, and is
    /// never re-run (re-running would draw fresh noise on a charge already spent). Returns how
    /// many jobs were failed.
    pub async fn fail_interrupted_jobs(&self) -> Result<u64, StoreError> {
        let updated = sqlx::query(
            "UPDATE jobs SET status = 'failed', error = ?, finished_at = ? WHERE status = 'running'",
        )
        .bind(INTERRUPTED_REASON)
        .bind(ts(now()))
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

fn running(rows_affected: u64, job: Uuid) -> Result<(), StoreError> {
    if rows_affected == 1 {
        Ok(())
    } else {
        Err(StoreError::JobNotRunning(job))
    }
}
