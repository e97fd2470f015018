//! Persistence: tenants and their API keys, datasets with their zCDP budget, the append-only
//! ledger, and the job queue, in SQLite through sqlx (runtime queries, embedded migrations).
//!
//! The ledger rules are those of privacy.md §2: a job's cost is checked against the remaining
//! budget and charged in the same `BEGIN IMMEDIATE` transaction that queues the job, so two
//! concurrent submissions can never both fit into a budget that holds one; a job cancelled
//! while queued is refunded in one transaction; a job that ran (succeeded, failed, was
//! cancelled or interrupted) keeps its charge and is never re-run. The schema repeats the
//! guarantees as constraints: `spent ≤ budget`, non-negative amounts, an append-only ledger,
//! dataset rows never deleted (ids never reused).
//!
//! Every tenant-facing method is scoped by tenant: another tenant's id behaves as unknown.

mod codec;
mod datasets;
mod error;
mod jobs;
mod ledger;
mod local_ledger;
mod models;
mod queue;
mod rows;
mod studies;
mod tenants;

#[cfg(test)]
mod tests;

/// The extension of an upload's temporary file, next to the data files.
const UPLOAD_EXTENSION: &str = "upload";

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use uuid::Uuid;

pub use error::StoreError;
pub use local_ledger::{ChargeOutcome, DELTA_UNITS_PER_ONE, LocalBudget, LocalDataset, RHO_UNITS_PER_ONE};
pub use models::{
    CancelOutcome, DatasetRecord, DatasetStatus, Idempotency, JobRecord, JobResult, JobStatus, LedgerEntry,
    LedgerEntryKind, NewDataset, NewJob, SubmitOutcome, Tenant,
};
pub use queue::{CANCELLED_REASON, INTERRUPTED_REASON};
pub use studies::{
    NewStudy, NewStudySite, SITE_TOKEN_PREFIX, SiteStatus, StudyCancel, StudyRecord, StudyResult,
    StudySiteRecord, StudyStatus,
};
pub use tenants::API_KEY_PREFIX;

/// The schema, embedded at build time from `migrations/`.
static MIGRATOR: Migrator = sqlx::migrate!();

/// How long a connection waits for SQLite's write lock before giving up with SQLITE_BUSY.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// Pool size; SQLite has one writer at a time, the rest serve reads (WAL).
const MAX_CONNECTIONS: u32 = 8;

/// The connection settings every store uses: created if missing, WAL, busy timeout, foreign
/// keys on.
fn connect_options(options: SqliteConnectOptions) -> SqliteConnectOptions {
    options
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(BUSY_TIMEOUT)
        .foreign_keys(true)
}

async fn open_pool(options: SqliteConnectOptions) -> Result<SqlitePool, StoreError> {
    Ok(SqlitePoolOptions::new()
        .max_connections(MAX_CONNECTIONS)
        .connect_with(options)
        .await?)
}

/// Handle to the database and the directory holding uploaded data. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    pool: SqlitePool,
    data_dir: PathBuf,
}

impl Store {
    /// Opens (creating if missing) the database at `database_url` (e.g.
    /// `sqlite:///var/lib/privpca/privpca.db` or `sqlite://privpca.db`), creates
    /// `data_dir/datasets`, and applies pending migrations.
    ///
    /// Note: `sqlite::memory:` gives every pooled connection its own empty database; use a file.
    pub async fn connect(database_url: &str, data_dir: &Path) -> Result<Store, StoreError> {
        let pool = open_pool(connect_options(SqliteConnectOptions::from_str(database_url)?)).await?;
        let store = Store {
            pool,
            data_dir: data_dir.to_path_buf(),
        };
        tokio::fs::create_dir_all(store.datasets_dir()).await?;
        MIGRATOR.run(&store.pool).await?;
        Ok(store)
    }

    /// Readiness: the database answers and every embedded migration is applied.
    pub async fn ping(&self) -> Result<(), StoreError> {
        let applied: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations WHERE success = 1")
            .fetch_one(&self.pool)
            .await?;
        let up = MIGRATOR
            .iter()
            .filter(|m| !m.migration_type.is_down_migration())
            .count();
        let expected = i64::try_from(up).unwrap_or(i64::MAX);
        if applied < expected {
            return Err(StoreError::NotMigrated { applied, expected });
        }
        Ok(())
    }

    /// Where a dataset's data lives once attached: `data_dir/datasets/{id}.f64`.
    pub fn data_path(&self, dataset_id: Uuid) -> PathBuf {
        self.datasets_dir().join(format!("{}.f64", codec::id(dataset_id)))
    }

    /// A fresh temporary file name for an upload in progress, in the same directory as
    /// [`Store::data_path`] so the final move is an atomic rename.
    pub fn upload_temp_path(&self, dataset_id: Uuid) -> PathBuf {
        self.datasets_dir().join(format!(
            "{}.{}.{UPLOAD_EXTENSION}",
            codec::id(dataset_id),
            Uuid::new_v4().simple()
        ))
    }

    /// Removes the temporary files of uploads that a crash interrupted (`*.upload` in the data
    /// directory) and returns how many it removed. Call it at start, before serving: an upload
    /// in progress in this process would lose its file. Data files are never touched.
    pub async fn remove_interrupted_uploads(&self) -> Result<usize, StoreError> {
        let mut entries = match tokio::fs::read_dir(self.datasets_dir()).await {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(e.into()),
        };
        let mut removed = 0;
        while let Some(entry) = entries.next_entry().await? {
            let path = entry.path();
            let is_upload = path.extension().is_some_and(|ext| ext == UPLOAD_EXTENSION);
            if is_upload && entry.file_type().await?.is_file() {
                tokio::fs::remove_file(&path).await?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Closes the pool, waiting for connections to be returned (graceful shutdown).
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// A write transaction that takes SQLite's write lock at `BEGIN` (waiting up to the busy
    /// timeout), so a read-then-write inside it can never fail to upgrade or interleave with
    /// another writer. Dropped without `commit` it rolls back.
    async fn write_tx(&self) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, StoreError> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }

    fn datasets_dir(&self) -> PathBuf {
        self.data_dir.join("datasets")
    }
}
