//! The tenant's side of jobs: submission (atomic with the budget charge), reading, listing,
//! cancellation (refunded while queued) and results.

use chrono::{DateTime, Utc};
use sqlx::{AnyConnection, Row};
use uuid::Uuid;

use super::codec::{id, now, seed_to_db, ts};
use super::ledger::{record, refund, reserve, shortfall};
use super::lookup::{DATASETS, JOBS, succeeded_result};
use super::models::{
    CancelOutcome, DatasetStatus, JobDatasetFacts, JobRecord, JobResult, JobStatus, LedgerEntryKind, NewJob,
    SubmitOutcome,
};
use super::rows::{self, JOB_COLUMNS};
use super::{Store, StoreError};
use crate::privacy::units::{DeltaUnits, RhoUnits};

/// Moves a queued job to cancelled and refunds its charge. Runs inside a write transaction
/// in which the job was just read as queued.
pub(crate) async fn cancel_queued(
    conn: &mut AnyConnection,
    job: &JobRecord,
    reason: Option<&str>,
    at: DateTime<Utc>,
) -> Result<JobRecord, StoreError> {
    let sql = format!(
        "UPDATE jobs SET status = 'cancelled', finished_at = $1, error = $2 \
         WHERE id = $3 AND status = 'queued' RETURNING {JOB_COLUMNS}"
    );
    let row = sqlx::query(&sql)
        .bind(ts(at))
        .bind(reason)
        .bind(id(job.id))
        .fetch_optional(&mut *conn)
        .await?;
    let Some(row) = row else {
        return Err(StoreError::Corrupt(format!(
            "job {} left the queue inside a write transaction",
            job.id
        )));
    };
    let cancelled = rows::job(&row)?;
    refund(conn, &cancelled, at).await?;
    Ok(cancelled)
}

/// Replay or refusal for a reused idempotency key; `None` if the key is new.
async fn idempotent_replay(
    conn: &mut AnyConnection,
    tenant: Uuid,
    key: &str,
    request_hash: &str,
) -> Result<Option<SubmitOutcome>, StoreError> {
    let sql =
        format!("SELECT {JOB_COLUMNS}, request_hash FROM jobs WHERE tenant_id = $1 AND idempotency_key = $2");
    let Some(row) = sqlx::query(&sql)
        .bind(id(tenant))
        .bind(key)
        .fetch_optional(conn)
        .await?
    else {
        return Ok(None);
    };
    let seen: Option<String> = row.try_get("request_hash")?;
    Ok(Some(if seen.as_deref() == Some(request_hash) {
        SubmitOutcome::Replayed(rows::job(&row)?)
    } else {
        SubmitOutcome::IdempotencyMismatch
    }))
}

/// Inserts the queued job; `false` (nothing written) if the tenant's idempotency key is
/// already taken (`ON CONFLICT … DO NOTHING`: a concurrent submission with the same key won).
async fn insert_job(conn: &mut AnyConnection, job: &JobRecord, new: &NewJob) -> Result<bool, StoreError> {
    let idempotency = new.idempotency.as_ref();
    let inserted = sqlx::query(
        "INSERT INTO jobs (id, tenant_id, dataset_id, algorithm, params, config, privacy, cost_rho_units, \
             cost_delta_units, cost_other_rho_units, selection, status, seed, created_at, idempotency_key, \
             request_hash) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) \
         ON CONFLICT (tenant_id, idempotency_key) DO NOTHING",
    )
    .bind(id(job.id))
    .bind(id(job.tenant_id))
    .bind(id(job.dataset_id))
    .bind(&job.algorithm)
    .bind(serde_json::to_string(&job.params)?)
    .bind(serde_json::to_string(&job.config)?)
    .bind(serde_json::to_string(&job.privacy)?)
    .bind(job.cost.rho_units.0)
    .bind(job.cost.delta_units.0)
    .bind(job.cost.other_rho_units.0)
    .bind(job.selection.as_ref().map(serde_json::to_string).transpose()?)
    .bind(job.status.as_str())
    .bind(seed_to_db(job.seed))
    .bind(ts(job.created_at))
    .bind(idempotency.map(|i| i.key.as_str()))
    .bind(idempotency.map(|i| i.request_hash.as_str()))
    .execute(conn)
    .await?;
    Ok(inserted.rows_affected() == 1)
}

/// Steps (1)–(4) of [`Store::submit_job`], inside its write transaction.
async fn admit(conn: &mut AnyConnection, tenant: Uuid, new: NewJob) -> Result<SubmitOutcome, StoreError> {
    if let Some(idem) = &new.idempotency
        && let Some(outcome) = idempotent_replay(conn, tenant, &idem.key, &idem.request_hash).await?
    {
        return Ok(outcome);
    }
    let Some(dataset) = DATASETS.get(conn, tenant, new.dataset_id).await? else {
        return Ok(SubmitOutcome::DatasetNotFound);
    };
    if dataset.status != DatasetStatus::Ready {
        return Ok(SubmitOutcome::DatasetNotReady(dataset.status));
    }
    if new.seed.is_some() && !dataset.public {
        return Err(StoreError::SeedNotAllowed);
    }
    let at = now();
    let charge = new.cost;
    let rule = if dataset.public {
        None
    } else {
        match reserve(conn, dataset.id, charge, at).await? {
            Some(rule) => Some(rule),
            None => return Ok(shortfall(&dataset, charge)),
        }
    };
    let job = JobRecord {
        id: Uuid::new_v4(),
        tenant_id: tenant,
        dataset_id: dataset.id,
        algorithm: new.algorithm.clone(),
        params: new.params.clone(),
        config: new.config.clone(),
        privacy: new.privacy.clone(),
        cost: new.cost,
        selection: new.selection.clone(),
        status: JobStatus::Queued,
        progress_done: 0,
        progress_total: 0,
        cancel_requested: false,
        error: None,
        seed: new.seed,
        created_at: at,
        started_at: None,
        finished_at: None,
        attempt: 0,
    };
    if !insert_job(conn, &job, &new).await? {
        // Only reachable with a key another transaction committed after our check; the
        // caller rolls back (the reservation too) and answers as for a reused key.
        return Ok(SubmitOutcome::IdempotencyMismatch);
    }
    // The dataset as `reserve` left it: its totals plus the charge (a public one's are not kept).
    let mut after = dataset;
    if !after.public {
        after.spent_rho_units = RhoUnits(after.spent_rho_units.0 + charge.rho_units.0);
        after.spent_other_rho_units = RhoUnits(after.spent_other_rho_units.0 + charge.other_rho_units.0);
        after.spent_delta_units = DeltaUnits(after.spent_delta_units.0 + charge.delta_units.0);
    }
    record(conn, LedgerEntryKind::Charge, &job, rule, at, Some(&after)).await?;
    Ok(SubmitOutcome::Created(job))
}

impl Store {
    /// Submits a job: in one write transaction (`Store::write_tx`), (1) replays or refuses a reused
    /// idempotency key, (2) finds the tenant's ready dataset, (3) admits the cost iff
    /// spent + cost ≤ budget for both ρ and δ and adds it to the spending (budgeted datasets;
    /// public ones have no budget and their spending is not tracked on the dataset row), and
    /// (4) records the charge in the ledger and queues the job (docs/design/privacy.md §2).
    ///
    /// Only `Created` writes anything. A seed on a private dataset is refused with
    /// `StoreError::SeedNotAllowed` (docs/design/privacy.md §4).
    pub async fn submit_job(&self, tenant: Uuid, new: NewJob) -> Result<SubmitOutcome, StoreError> {
        let cost = new.cost;
        if !(cost.rho_units.0 >= 0 && cost.delta_units.0 >= 0) {
            return Err(StoreError::InvalidCharge("a job's cost must be >= 0".to_owned()));
        }
        if !(RhoUnits::ZERO..=cost.rho_units).contains(&cost.other_rho_units) {
            return Err(StoreError::InvalidCharge(
                "a job's non-Gaussian ρ must lie between 0 and its whole ρ".to_owned(),
            ));
        }
        let idempotency = new.idempotency.clone();
        // Synced: the charge is on the disk before the job can run and release anything.
        let mut tx = self.synced_write_tx().await?;
        let outcome = admit(&mut tx, tenant, new).await?;
        if matches!(outcome, SubmitOutcome::Created(_)) {
            tx.commit().await?;
            return Ok(outcome);
        }
        tx.rollback().await?;
        // A key taken by a transaction that committed after this one looked: answer from
        // the committed job (replay or mismatch), now that its row is visible.
        if let (SubmitOutcome::IdempotencyMismatch, Some(idem)) = (&outcome, idempotency) {
            let mut conn = self.pool.acquire().await?;
            if let Some(settled) = idempotent_replay(&mut conn, tenant, &idem.key, &idem.request_hash).await?
            {
                return Ok(settled);
            }
        }
        Ok(outcome)
    }

    /// The tenant's job, or `None`.
    pub async fn get_job(&self, tenant: Uuid, job: Uuid) -> Result<Option<JobRecord>, StoreError> {
        // Text binds only: the reads pool keeps the statement prepared on PostgreSQL.
        let mut conn = self.reads.acquire().await?;
        JOBS.get(&mut conn, tenant, job).await
    }

    /// The tenant's job with the facts of its dataset that say whether its timings may be shown,
    /// in one query on the reads pool: a status read is one round trip to the database.
    pub async fn get_job_with_dataset_facts(
        &self,
        tenant: Uuid,
        job: Uuid,
    ) -> Result<Option<(JobRecord, Option<JobDatasetFacts>)>, StoreError> {
        let mut conn = self.reads.acquire().await?;
        let row = sqlx::query(rows::JOB_WITH_DATASET_FACTS.as_str())
            .bind(id(job))
            .bind(id(tenant))
            .fetch_optional(&mut *conn)
            .await?;
        row.as_ref()
            .map(|row| Ok((rows::job(row)?, rows::job_dataset_facts(row)?)))
            .transpose()
    }

    /// Any tenant's job (for the runner).
    pub async fn get_job_any(&self, job: Uuid) -> Result<Option<JobRecord>, StoreError> {
        let sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = $1");
        let row = sqlx::query(&sql).bind(id(job)).fetch_optional(&self.pool).await?;
        row.as_ref().map(rows::job).transpose()
    }

    /// The tenant's jobs, optionally of one dataset, in submission order.
    pub async fn list_jobs(&self, tenant: Uuid, dataset: Option<Uuid>) -> Result<Vec<JobRecord>, StoreError> {
        let sql = format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE tenant_id = $1 AND ($2 IS NULL OR dataset_id = $2) ORDER BY seq"
        );
        let found = sqlx::query(&sql)
            .bind(id(tenant))
            .bind(dataset.map(id))
            .fetch_all(&self.pool)
            .await?;
        found.iter().map(rows::job).collect()
    }

    /// Cancels a job. Queued: cancelled and refunded (a refund entry, spending lowered) in one
    /// transaction. Running: `cancel_requested` is set and the runner stops at its next check;
    /// noise has been drawn, so the charge is kept (docs/design/privacy.md §2). Finished: unchanged.
    pub async fn cancel_job(&self, tenant: Uuid, job: Uuid) -> Result<CancelOutcome, StoreError> {
        let mut tx = self.write_tx().await?;
        let Some(found) = JOBS.get(&mut tx, tenant, job).await? else {
            tx.rollback().await?;
            return Ok(CancelOutcome::NotFound);
        };
        let outcome = match found.status {
            JobStatus::Queued => CancelOutcome::Refunded(cancel_queued(&mut tx, &found, None, now()).await?),
            JobStatus::Running => {
                sqlx::query("UPDATE jobs SET cancel_requested = 1 WHERE id = $1")
                    .bind(id(job))
                    .execute(&mut *tx)
                    .await?;
                CancelOutcome::CancelRequested(JobRecord {
                    cancel_requested: true,
                    ..found
                })
            }
            JobStatus::Succeeded | JobStatus::Failed | JobStatus::Cancelled => {
                CancelOutcome::AlreadyFinished(found)
            }
        };
        tx.commit().await?;
        Ok(outcome)
    }

    /// The result of the tenant's succeeded job; `None` if the job is unknown or has no result.
    pub async fn job_result(&self, tenant: Uuid, job: Uuid) -> Result<Option<JobResult>, StoreError> {
        let row = succeeded_result(&self.pool, "jobs", "released", tenant, job).await?;
        row.as_ref()
            .map(|r| rows::basis_result(r, &format!("job {job}")))
            .transpose()
    }
}
