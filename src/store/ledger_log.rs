//! The transparency log in the store (issue 39; docs/design/ledger.md, "The transparency log"):
//! every ledger row of a dataset is also a leaf of the dataset's log, `datasets/<id>`, appended
//! in the same transaction as the row, and the log is read back only after it has been checked
//! against the ledger.
//!
//! A leaf is the RFC 8785 canonical JSON of a [`LedgerEvent`] (`crate::transparency::event`),
//! stored as text with its leaf hash SHA-256(0x00 ‖ leaf) in hex (`ledger_leaves`, migration
//! 0011). Its index is the number of leaves the log already holds, read inside the write
//! transaction: SQLite's `BEGIN IMMEDIATE` and PostgreSQL's advisory write lock serialise
//! writers, and the primary key `(log, idx)` refuses a second leaf at one index anyway.
//!
//! Reading ([`Store::dataset_log`]) recomputes every leaf's hash, parses every leaf back (it
//! must be exactly canonical), and checks that the charges and refunds it records are the
//! ledger's rows, in order, with the same job, kind and units, and that the spending the
//! leaves state is the dataset's running totals. Any difference is [`StoreError::LogTampered`]:
//! the log is not served or signed until an operator looks.

use sqlx::{AnyConnection, Row};
use uuid::Uuid;

use super::codec::id;
use super::models::{DatasetRecord, JobRecord, LedgerEntry, LedgerEntryKind};
use super::rows::{self, DATASET_COLUMNS, JOB_COLUMNS, LEDGER_COLUMNS};
use super::{Store, StoreError};
use crate::privacy::admission::{Rule, Spending};
use crate::transparency::event::{Amounts, EpsilonDelta, PublicBounds, ServiceBuild, Units};
use crate::transparency::merkle::{self, Hash};
use crate::transparency::{EventKind, LedgerEvent, leaf_bytes};

/// The name of a dataset's log in the store; its origin is `<service origin>/datasets/<id>`.
pub fn dataset_log(dataset: Uuid) -> String {
    format!("datasets/{dataset}")
}

/// The build that writes events: the crate's version, and the source commit when the build
/// was given one (`PRIVPCA_COMMIT` at compile time), else `unknown`.
pub fn service_build() -> ServiceBuild {
    ServiceBuild {
        version: env!("CARGO_PKG_VERSION").to_string(),
        commit: option_env!("PRIVPCA_COMMIT").unwrap_or("unknown").to_string(),
    }
}

/// A dataset's log, checked against its ledger: the leaves in order, their hashes and events.
#[derive(Debug, Clone)]
pub struct VerifiedLog {
    pub leaves: Vec<Vec<u8>>,
    pub hashes: Vec<Hash>,
    pub events: Vec<LedgerEvent>,
}

impl VerifiedLog {
    /// The index of the leaf recording `job`'s charge, if the log holds one.
    pub fn charge_of(&self, job: Uuid) -> Option<u64> {
        let job = job.to_string();
        self.events
            .iter()
            .position(|e| e.kind == EventKind::Charge && e.job.as_deref() == Some(job.as_str()))
            .map(|i| i as u64)
    }
}

/// Units and reals of one amount, as an event states them.
pub(super) fn amounts(spending: Spending) -> Amounts {
    Amounts {
        rho_units: Units(spending.rho_units.0),
        other_rho_units: Some(Units(spending.other_rho_units.0)),
        delta_units: Units(spending.delta_units.0),
        rho: spending.rho_units.to_real(),
        delta: spending.delta_units.to_real(),
    }
}

/// The public bounds of a dataset; `n` only where n is public.
fn bounds(dataset: &DatasetRecord) -> PublicBounds {
    let n_public = crate::context::n_is_public(dataset);
    PublicBounds {
        relation: dataset.relation.as_str().to_string(),
        d: dataset.d.and_then(|d| u64::try_from(d).ok()),
        n: dataset.n.filter(|_| n_public).and_then(|n| u64::try_from(n).ok()),
        row_norm_bound: dataset.row_norm_bound,
        row_l1_bound: dataset.row_l1_bound,
        entry_bound: dataset.entry_bound,
    }
}

/// The (ε, δ) a job's charge achieves at the δ its privacy states, when it states one.
fn achieved(job: &JobRecord) -> Option<EpsilonDelta> {
    achieved_at(&job.privacy, job.cost)
}

/// The (ε, δ) that `charged` achieves at the δ `privacy` states, when it states one.
pub(super) fn achieved_at(privacy: &serde_json::Value, charged: Spending) -> Option<EpsilonDelta> {
    let delta = privacy.get("delta")?.as_f64()?;
    let cost = crate::privacy::Cost {
        rho: charged.rho_units.to_real(),
        delta: charged.delta_units.to_real(),
        other_rho: charged.other_rho_units.to_real(),
    };
    let a = crate::privacy::target::achieved(&cost, delta);
    (a.epsilon.is_finite() && a.delta.is_finite()).then_some(EpsilonDelta {
        epsilon: a.epsilon,
        delta: a.delta,
    })
}

/// The event of a job's ledger row; `spent_after` is the dataset's spending after the row
/// (`None` on a public dataset, which has none).
fn job_event(
    entry: LedgerEntryKind,
    job: &JobRecord,
    dataset: &DatasetRecord,
    rule: Option<Rule>,
    spent_after: Option<Spending>,
) -> LedgerEvent {
    let kind = match entry {
        LedgerEntryKind::Charge => EventKind::Charge,
        LedgerEntryKind::Refund => EventKind::Refund,
    };
    let mut event = LedgerEvent::new(kind, service_build());
    event.dataset = Some(job.dataset_id.to_string());
    event.job = Some(job.id.to_string());
    event.algorithm = Some(job.algorithm.clone());
    event.bounds = Some(bounds(dataset));
    event.rule = rule.map(|r| r.as_str().to_string());
    event.amount = Some(amounts(job.cost));
    event.spent_after = spent_after.filter(|_| !dataset.public).map(amounts);
    if entry == LedgerEntryKind::Charge {
        event.config = Some(job.config.clone());
        event.achieved = achieved(job);
    } else {
        event.reason = job.error.clone();
    }
    event
}

/// Why a public dataset's opening leaf states a zero budget.
pub const PUBLIC_BUDGET: &str = "the dataset is public: its releases are not charged";

/// Why the opening leaf of a dataset created before the log existed was written later.
pub const BACKFILLED: &str = "the dataset existed before its transparency log; this leaf and the \
entries after it up to the log's first live leaf were written from its ledger rows when the \
service that introduced the log first started";

/// The leaf that opens a dataset's log: the budget set at creation (zero on a public dataset),
/// the budget as its owner stated it in (ε, δ), and the public bounds.
fn budget_event(dataset: &DatasetRecord, backfilled: bool) -> LedgerEvent {
    let mut event = LedgerEvent::new(EventKind::BudgetSet, service_build());
    event.dataset = Some(dataset.id.to_string());
    event.bounds = Some(bounds(dataset));
    event.amount = Some(amounts(Spending {
        rho_units: dataset.budget_rho_units.unwrap_or_default(),
        other_rho_units: Default::default(),
        delta_units: dataset.budget_delta_units.unwrap_or_default(),
    }));
    event.stated_budget = dataset
        .budget_epsilon_delta
        .map(|(epsilon, delta)| EpsilonDelta { epsilon, delta });
    event.reason = match (dataset.public, backfilled) {
        (_, true) => Some(BACKFILLED.to_string()),
        (true, false) => Some(PUBLIC_BUDGET.to_string()),
        (false, false) => None,
    };
    event
}

/// The leaf that records a dataset's deletion (its data removed; its ledger and log stay).
fn deletion_event(dataset: &DatasetRecord) -> LedgerEvent {
    let mut event = LedgerEvent::new(EventKind::Deletion, service_build());
    event.dataset = Some(dataset.id.to_string());
    event.spent_after = (!dataset.public).then(|| amounts(dataset.spent()));
    event
}

/// The dataset as the transaction sees it now.
async fn dataset_now(conn: &mut AnyConnection, dataset: Uuid) -> Result<DatasetRecord, StoreError> {
    let sql = format!("SELECT {DATASET_COLUMNS} FROM datasets WHERE id = $1");
    let row = sqlx::query(&sql).bind(id(dataset)).fetch_one(&mut *conn).await?;
    rows::dataset(&row)
}

/// Appends the leaf of a job's ledger row to its dataset's log. Runs inside the write
/// transaction that wrote the row (and updated the dataset's totals), so both commit or neither.
/// `after` is the dataset as the transaction left it, when the caller has it (a submission
/// knows its totals after the charge); otherwise it is read.
pub(crate) async fn append_job_leaf(
    conn: &mut AnyConnection,
    entry: LedgerEntryKind,
    job: &JobRecord,
    rule: Option<Rule>,
    after: Option<&DatasetRecord>,
) -> Result<u64, StoreError> {
    let read;
    let dataset = match after {
        Some(dataset) => dataset,
        None => {
            read = dataset_now(conn, job.dataset_id).await?;
            &read
        }
    };
    let event = job_event(entry, job, dataset, rule, Some(dataset.spent()));
    append(conn, &dataset_log(job.dataset_id), &event).await
}

/// Opens a new dataset's log with its `budget_set` leaf, in the transaction that created it.
pub(crate) async fn append_budget_leaf(conn: &mut AnyConnection, dataset: Uuid) -> Result<u64, StoreError> {
    let record = dataset_now(conn, dataset).await?;
    append(conn, &dataset_log(dataset), &budget_event(&record, false)).await
}

/// Records a dataset's deletion, in the transaction that marked it deleted (after the refunds
/// of its queued jobs).
pub(crate) async fn append_deletion_leaf(conn: &mut AnyConnection, dataset: Uuid) -> Result<u64, StoreError> {
    let record = dataset_now(conn, dataset).await?;
    append(conn, &dataset_log(dataset), &deletion_event(&record)).await
}

/// Appends `event` as the next leaf of `log`; returns its index.
pub(crate) async fn append(
    conn: &mut AnyConnection,
    log: &str,
    event: &LedgerEvent,
) -> Result<u64, StoreError> {
    // Refused before anything commits: the charge rolls back with it (no charge without a leaf).
    let leaf = leaf_bytes(event).map_err(|e| StoreError::UnloggableEvent(e.to_string()))?;
    let leaf = String::from_utf8(leaf).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    // One statement: the next index (from the primary key's index) and the insert, so the
    // write lock is held for one more round trip only.
    let idx: i64 = sqlx::query_scalar(
        "INSERT INTO ledger_leaves (log, idx, leaf, leaf_hash) \
         SELECT $1, COALESCE(MAX(idx) + 1, 0), $2, $3 FROM ledger_leaves WHERE log = $1 \
         RETURNING idx",
    )
    .bind(log)
    .bind(&leaf)
    .bind(hex::encode(merkle::leaf_hash(leaf.as_bytes())))
    .fetch_one(&mut *conn)
    .await?;
    u64::try_from(idx).map_err(|_| StoreError::Corrupt(format!("log {log} has a negative size")))
}

/// A stored leaf as read back.
pub(super) struct StoredLeaf {
    idx: i64,
    leaf: String,
    leaf_hash: String,
}

/// The leaves of `log` in index order.
pub(super) async fn load_leaves(conn: &mut AnyConnection, log: &str) -> Result<Vec<StoredLeaf>, StoreError> {
    let found = sqlx::query("SELECT idx, leaf, leaf_hash FROM ledger_leaves WHERE log = $1 ORDER BY idx")
        .bind(log)
        .fetch_all(&mut *conn)
        .await?;
    found
        .iter()
        .map(|row| {
            Ok(StoredLeaf {
                idx: row.try_get("idx")?,
                leaf: row.try_get("leaf")?,
                leaf_hash: row.try_get("leaf_hash")?,
            })
        })
        .collect()
}

/// Checks the stored leaves of a log on their own: indices 0, 1, …, each hash recomputed from
/// its leaf, each leaf the canonical form of an event that `belongs` to the log.
pub(super) fn check_leaves(
    belongs: impl Fn(&LedgerEvent) -> bool,
    stored: Vec<StoredLeaf>,
) -> Result<VerifiedLog, String> {
    let mut log = VerifiedLog {
        leaves: Vec::with_capacity(stored.len()),
        hashes: Vec::with_capacity(stored.len()),
        events: Vec::with_capacity(stored.len()),
    };
    for (expected, leaf) in stored.into_iter().enumerate() {
        if usize::try_from(leaf.idx).ok() != Some(expected) {
            return Err(format!("leaf {expected} is missing"));
        }
        let hash = merkle::leaf_hash(leaf.leaf.as_bytes());
        if hex::encode(hash) != leaf.leaf_hash {
            return Err(format!("leaf {expected} does not match its stored hash"));
        }
        let event = LedgerEvent::from_leaf(leaf.leaf.as_bytes())
            .map_err(|e| format!("leaf {expected} is not a ledger event: {e}"))?;
        if !belongs(&event) {
            return Err(format!("leaf {expected} records another log's event"));
        }
        log.leaves.push(leaf.leaf.into_bytes());
        log.hashes.push(hash);
        log.events.push(event);
    }
    Ok(log)
}

/// Whether an event's amount is exactly the ledger row's units.
fn same_amount(amount: Option<&Amounts>, row: &LedgerEntry) -> bool {
    amount.is_some_and(|a| {
        a.rho_units.0 == row.rho_units.0
            && a.delta_units.0 == row.delta_units.0
            && a.other_rho_units.map_or(0, |u| u.0) == row.other_rho_units.0
    })
}

/// Checks the log against the dataset and its ledger: the first leaf sets the dataset's
/// budget, and no other does; one charge or refund leaf per ledger row, in the same order, same
/// job, kind and units; each `spent_after` the sum of the amounts before it and the last the
/// dataset's spending; a deletion leaf exactly when the dataset is deleted.
fn check_against_ledger(
    log: &VerifiedLog,
    ledger: &[LedgerEntry],
    dataset: &DatasetRecord,
) -> Result<(), String> {
    check_opening(log, dataset)?;
    let deletions = log
        .events
        .iter()
        .filter(|e| e.kind == EventKind::Deletion)
        .count();
    let deleted = dataset.status == crate::store::DatasetStatus::Deleted;
    if deletions != usize::from(deleted) {
        return Err(format!(
            "the log records {deletions} deletions of a dataset that is {}",
            dataset.status.as_str()
        ));
    }
    let entries: Vec<(usize, &LedgerEvent)> = log
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e.kind, EventKind::Charge | EventKind::Refund))
        .collect();
    if entries.len() != ledger.len() {
        return Err(format!(
            "the ledger has {} entries and the log records {}",
            ledger.len(),
            entries.len()
        ));
    }
    let mut spent = Spending::default();
    for ((idx, event), row) in entries.into_iter().zip(ledger) {
        let kind_matches = event.kind.as_str() == row.entry.as_str();
        let job_matches = event.job.as_deref() == row.job_id.map(|j| j.to_string()).as_deref();
        if !(kind_matches && job_matches && same_amount(event.amount.as_ref(), row)) {
            return Err(format!("ledger entry {} differs from leaf {idx}", row.id));
        }
        if dataset.public {
            continue;
        }
        spent = step(spent, row).ok_or_else(|| format!("ledger entry {} overflows the spending", row.id))?;
        if let Some(after) = &event.spent_after
            && !same_spending(after, spent)
        {
            return Err(format!(
                "leaf {idx} states a spending its entries do not add up to"
            ));
        }
    }
    if !dataset.public && dataset.spent() != spent {
        return Err("the dataset's spending is not the sum of its ledger entries".to_string());
    }
    Ok(())
}

/// The first leaf sets the budget the dataset has (zero on a public one); no other leaf does.
fn check_opening(log: &VerifiedLog, dataset: &DatasetRecord) -> Result<(), String> {
    let Some(first) = log.events.first() else {
        return Err("the log is empty: it has lost its opening leaf".to_string());
    };
    let budget_set = |e: &LedgerEvent| e.kind == EventKind::BudgetSet;
    if !budget_set(first) || log.events.iter().filter(|e| budget_set(e)).count() != 1 {
        return Err("the log does not open with the one leaf that sets the budget".to_string());
    }
    let stated = first.amount.as_ref();
    let same = stated.is_some_and(|a| {
        a.rho_units.0 == dataset.budget_rho_units.unwrap_or_default().0
            && a.delta_units.0 == dataset.budget_delta_units.unwrap_or_default().0
    });
    if !same {
        return Err("the dataset's budget is not the budget its log sets".to_string());
    }
    Ok(())
}

/// The spending after one more ledger row; `None` if it leaves the i64 range (only an edited
/// ledger can: a budgeted dataset's spending stays within its budget). Public datasets keep
/// no spending, and their charges are not bounded, so callers do not sum theirs.
fn step(spent: Spending, row: &LedgerEntry) -> Option<Spending> {
    let apply = |total: i64, amount: i64| match row.entry {
        LedgerEntryKind::Charge => total.checked_add(amount),
        LedgerEntryKind::Refund => total.checked_sub(amount),
    };
    Some(Spending {
        rho_units: crate::privacy::units::RhoUnits(apply(spent.rho_units.0, row.rho_units.0)?),
        other_rho_units: crate::privacy::units::RhoUnits(apply(
            spent.other_rho_units.0,
            row.other_rho_units.0,
        )?),
        delta_units: crate::privacy::units::DeltaUnits(apply(spent.delta_units.0, row.delta_units.0)?),
    })
}

fn same_spending(a: &Amounts, s: Spending) -> bool {
    a.rho_units.0 == s.rho_units.0
        && a.delta_units.0 == s.delta_units.0
        && a.other_rho_units.map_or(0, |u| u.0) == s.other_rho_units.0
}

/// The leaves of a dataset created before the log existed: its budget, then one leaf per
/// ledger row in order (with the running spending), then its deletion if it is deleted.
pub(super) async fn backfill_events(
    conn: &mut AnyConnection,
    dataset: Uuid,
) -> Result<Vec<LedgerEvent>, StoreError> {
    let record = dataset_now(conn, dataset).await?;
    let mut events = vec![budget_event(&record, true)];
    let sql = format!("SELECT {LEDGER_COLUMNS} FROM ledger WHERE dataset_id = $1 ORDER BY id");
    let found = sqlx::query(&sql).bind(id(dataset)).fetch_all(&mut *conn).await?;
    let mut spent = Spending::default();
    for row in found.iter().map(rows::ledger_entry) {
        let row = row?;
        let job_id = row
            .job_id
            .ok_or_else(|| StoreError::Corrupt(format!("ledger entry {} names no job", row.id)))?;
        let sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = $1");
        let job = sqlx::query(&sql).bind(id(job_id)).fetch_one(&mut *conn).await?;
        let mut job = rows::job(&job)?;
        // The row is the record: its units, whatever the job row says now.
        job.cost = Spending {
            rho_units: row.rho_units,
            other_rho_units: row.other_rho_units,
            delta_units: row.delta_units,
        };
        if !record.public {
            spent = step(spent, &row).ok_or_else(|| {
                StoreError::Corrupt(format!("ledger entry {} overflows the spending", row.id))
            })?;
        }
        events.push(job_event(row.entry, &job, &record, row.rule, Some(spent)));
    }
    if record.status == crate::store::DatasetStatus::Deleted {
        events.push(deletion_event(&record));
    }
    Ok(events)
}

impl Store {
    /// The tenant's dataset's log, checked leaf by leaf and against the ledger (module
    /// documentation); `None` if the dataset does not exist for this tenant;
    /// [`StoreError::LogTampered`] if the log and the ledger disagree.
    pub async fn dataset_log(&self, tenant: Uuid, dataset: Uuid) -> Result<Option<VerifiedLog>, StoreError> {
        // One snapshot: a charge committing between two of these reads would look like tampering.
        let mut conn = self.snapshot_tx().await?;
        let sql = format!("SELECT {DATASET_COLUMNS} FROM datasets WHERE id = $1 AND tenant_id = $2");
        let Some(row) = sqlx::query(&sql)
            .bind(id(dataset))
            .bind(id(tenant))
            .fetch_optional(&mut *conn)
            .await?
        else {
            return Ok(None);
        };
        let record = rows::dataset(&row)?;
        let log = dataset_log(dataset);
        let stored = load_leaves(&mut conn, &log).await?;
        let sql = format!("SELECT {LEDGER_COLUMNS} FROM ledger WHERE dataset_id = $1 ORDER BY id");
        let ledger = sqlx::query(&sql)
            .bind(id(dataset))
            .fetch_all(&mut *conn)
            .await?
            .iter()
            .map(rows::ledger_entry)
            .collect::<Result<Vec<_>, _>>()?;
        let tampered = |reason: String| StoreError::LogTampered {
            log: log.clone(),
            reason,
        };
        let subject = dataset.to_string();
        let belongs = |e: &LedgerEvent| e.dataset.as_deref() == Some(subject.as_str());
        let verified = check_leaves(belongs, stored).map_err(tampered)?;
        check_against_ledger(&verified, &ledger, &record).map_err(tampered)?;
        Ok(Some(verified))
    }
}
