//! The ledger: the check-and-charge step, refunds, and reading a dataset's entries
//! (docs/design/privacy.md §2).
//!
//! Spending is kept twice, on purpose: as running totals on the dataset row (what admission
//! compares against the budget, with `CHECK (spent ≤ budget)` in the schema) and as the
//! append-only list of entries. For budgeted datasets `spent = Σ charges − Σ refunds` at every
//! commit, because both are written in the same transaction. Public datasets carry no budget:
//! their charges are recorded as entries (the cost of every job stays visible) but their
//! running totals are not touched, so nothing about them can overflow or be refused.

use chrono::{DateTime, Utc};
use sqlx::AnyConnection;
use uuid::Uuid;

use super::codec::{id, ts};
use super::models::{DatasetRecord, DatasetStatus, JobRecord, LedgerEntry, LedgerEntryKind};
use super::rows::{self, DATASET_COLUMNS, LEDGER_COLUMNS};
use super::{Store, StoreError};
use crate::privacy::admission::{Rule, Spending, admit};

/// Admits `charge` on a ready, budgeted dataset by the rule of its budget
/// ([`crate::privacy::admission`]) and adds it to the spending. Returns the rule that admitted
/// it, or `None` (nothing written) if it does not fit. Must run inside the write transaction
/// that also records the charge entry.
///
/// The rule is evaluated here, on the sums read in this transaction; the update then re-checks
/// those sums (compare-and-set), so a concurrent writer can never slip between the read and the
/// write even on a database that does not serialise writers as SQLite's `BEGIN IMMEDIATE`
/// does (on PostgreSQL the row is also read `FOR UPDATE`). The schema's `CHECK (spent ≤ budget)` remains a ceiling underneath.
pub(crate) async fn reserve(
    conn: &mut AnyConnection,
    dataset: Uuid,
    charge: Spending,
    at: DateTime<Utc>,
) -> Result<Option<Rule>, StoreError> {
    // PostgreSQL: lock the row until commit, so the sums read here are the sums updated below.
    let sql = format!(
        "SELECT {DATASET_COLUMNS} FROM datasets WHERE id = $1 {}",
        super::for_update(conn)
    );
    let Some(row) = sqlx::query(&sql)
        .bind(id(dataset))
        .fetch_optional(&mut *conn)
        .await?
    else {
        return Ok(None);
    };
    let record = rows::dataset(&row)?;
    if record.status != DatasetStatus::Ready || record.public {
        return Ok(None);
    }
    let Some(budget) = record.budget() else {
        return Ok(None);
    };
    let spent = record.spent();
    let Some(rule) = admit(&budget, spent, charge) else {
        return Ok(None);
    };
    let done = sqlx::query(
        "UPDATE datasets SET spent_rho_units = spent_rho_units + $1, \
             spent_other_rho_units = spent_other_rho_units + $2, \
             spent_delta_units = spent_delta_units + $3, updated_at = $4 \
         WHERE id = $5 AND status = 'ready' AND public = 0 \
           AND spent_rho_units = $6 AND spent_other_rho_units = $7 AND spent_delta_units = $8 \
           AND spent_rho_units + $1 <= budget_rho_units \
           AND spent_delta_units + $3 <= budget_delta_units",
    )
    .bind(charge.rho_units.0)
    .bind(charge.other_rho_units.0)
    .bind(charge.delta_units.0)
    .bind(ts(at))
    .bind(id(dataset))
    .bind(spent.rho_units.0)
    .bind(spent.other_rho_units.0)
    .bind(spent.delta_units.0)
    .execute(&mut *conn)
    .await?;
    Ok((done.rows_affected() == 1).then_some(rule))
}

/// Appends one entry for a job (`rule`: what admitted a charge; `None` for refunds and for
/// public datasets), and its leaf. `after`: the dataset as this transaction leaves it, when
/// the caller knows it (else the leaf's writer reads it).
pub(crate) async fn record(
    conn: &mut AnyConnection,
    entry: LedgerEntryKind,
    job: &JobRecord,
    rule: Option<Rule>,
    at: DateTime<Utc>,
    after: Option<&DatasetRecord>,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO ledger (dataset_id, job_id, entry, algorithm, rho_units, delta_units, \
             other_rho_units, rule, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(id(job.dataset_id))
    .bind(id(job.id))
    .bind(entry.as_str())
    .bind(&job.algorithm)
    .bind(job.cost.rho_units.0)
    .bind(job.cost.delta_units.0)
    .bind(job.cost.other_rho_units.0)
    .bind(rule.map(Rule::as_str))
    .bind(ts(at))
    .execute(&mut *conn)
    .await?;
    // The row's leaf, in the same transaction: a charge is never admitted without its leaf.
    super::ledger_log::append_job_leaf(conn, entry, job, rule, after).await?;
    Ok(())
}

/// Gives a queued job's charge back: lowers the dataset's spending (budgeted datasets only)
/// and appends the refund entry. The caller has just moved the job from queued to cancelled
/// in the same transaction; the schema allows one refund per job.
pub(crate) async fn refund(
    conn: &mut AnyConnection,
    job: &JobRecord,
    at: DateTime<Utc>,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE datasets SET spent_rho_units = spent_rho_units - $1, \
             spent_delta_units = spent_delta_units - $2, \
             spent_other_rho_units = spent_other_rho_units - $3, updated_at = $4 \
         WHERE id = $5 AND public = 0",
    )
    .bind(job.cost.rho_units.0)
    .bind(job.cost.delta_units.0)
    .bind(job.cost.other_rho_units.0)
    .bind(ts(at))
    .bind(id(job.dataset_id))
    .execute(&mut *conn)
    .await?;
    record(conn, LedgerEntryKind::Refund, job, None, at, None).await
}

/// Remaining and requested amounts for an over-budget answer.
pub(crate) fn shortfall(dataset: &DatasetRecord, charge: Spending) -> super::SubmitOutcome {
    super::SubmitOutcome::OverBudget {
        remaining_rho_units: dataset.remaining_rho_units().unwrap_or_default(),
        requested_rho_units: charge.rho_units,
        remaining_delta_units: dataset.remaining_delta_units().unwrap_or_default(),
        requested_delta_units: charge.delta_units,
    }
}

impl Store {
    /// Every entry of a dataset's ledger in the order written, also after the dataset was
    /// deleted; `None` if the dataset does not exist for this tenant.
    pub async fn ledger(&self, tenant: Uuid, dataset: Uuid) -> Result<Option<Vec<LedgerEntry>>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let owned: Option<i64> =
            sqlx::query_scalar("SELECT 1 FROM datasets WHERE id = $1 AND tenant_id = $2")
                .bind(id(dataset))
                .bind(id(tenant))
                .fetch_optional(&mut *conn)
                .await?;
        if owned.is_none() {
            return Ok(None);
        }
        let sql = format!("SELECT {LEDGER_COLUMNS} FROM ledger WHERE dataset_id = $1 ORDER BY id");
        let found = sqlx::query(&sql).bind(id(dataset)).fetch_all(&mut *conn).await?;
        found
            .iter()
            .map(rows::ledger_entry)
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}
