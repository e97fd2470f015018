//! Persistence: tenants and their API keys, datasets with their zCDP budget, the append-only
//! ledger, and the job queue, in SQLite or PostgreSQL through sqlx (runtime queries, embedded
//! migrations per backend: `migrations/sqlite/`, `migrations/postgres/`).
//!
//! The ledger rules are those of docs/design/privacy.md §2: a job's cost is checked against the remaining
//! budget and charged in the same write transaction that queues the job, so two concurrent
//! submissions can never both fit into a budget that holds one; a job cancelled while queued
//! is refunded in one transaction; a job that ran (succeeded, failed, was cancelled or
//! interrupted) keeps its charge and is never re-run. The schema repeats the guarantees as
//! constraints on both backends: `spent ≤ budget`, non-negative amounts, an append-only
//! ledger, dataset rows never deleted (ids never reused).
//!
//! Every tenant-facing method is scoped by tenant: another tenant's id behaves as unknown.
//!
//! # Two backends, one store
//!
//! The store is one struct over sqlx's `Any` pool, not a trait with two implementations. The
//! reasons: every statement the store runs is plain SQL that both engines accept (positional
//! `$n` parameters, which SQLite also understands; `RETURNING`; `ON CONFLICT … DO NOTHING`;
//! text timestamps, integer flags, integer ledger units), so a trait would mean writing and
//! testing each of the ~60 queries twice for no gain, and two copies of the admission code is
//! exactly where a ledger bug would hide. The few places where the engines differ are named
//! in [`Backend`] — how a write transaction begins (SQLite's `BEGIN IMMEDIATE` takes the
//! database's write lock; on PostgreSQL `BEGIN` plus a transaction-scoped advisory lock gives
//! the same one-writer-at-a-time discipline, and admission also locks the dataset row
//! `FOR UPDATE`), and how the runner claims a job (`FOR UPDATE SKIP LOCKED` on PostgreSQL) —
//! and both schemas use column types that decode to the same Rust values (see the PostgreSQL
//! migration's header). The store's tests and the API tests run against both
//! (`PRIVPCA_TEST_POSTGRES_URL`).

mod codec;
mod datasets;
mod error;
mod jobs;
mod key_cache;
mod ledger;
pub mod ledger_log;
mod local_ledger;
mod log_backfill;
mod lookup;
mod models;
mod queue;
mod rows;
mod studies;
pub mod study_log;
mod study_rows;
mod study_state;
mod tenants;
pub mod testing;
mod uploads;

#[cfg(test)]
mod tests;

/// The extension of an upload's temporary file, next to the data files.
const UPLOAD_EXTENSION: &str = "upload";
/// Extension of a records dataset's statistics file, beside its `.f64` data.
const STATS_EXTENSION: &str = "stats";

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sqlx::Executor;
use sqlx::any::AnyPoolOptions;
use sqlx::migrate::Migrator;
use sqlx::{AnyConnection, AnyPool};
use uuid::Uuid;

pub use error::StoreError;
pub use key_cache::DEFAULT_KEY_CACHE_TTL;
pub use local_ledger::{ChargeOutcome, LocalBudget, LocalDataset};
pub use models::{
    CancelOutcome, DataObject, DatasetRecord, DatasetStatus, Idempotency, JobDatasetFacts, JobRecord,
    JobResult, JobStatus, LedgerEntry, LedgerEntryKind, NewDataset, NewJob, SubmitOutcome, Tenant,
};
pub use queue::{CANCELLED_REASON, INTERRUPTED_REASON, LEASE_EXPIRED_REASON, Lease};
pub use studies::{
    NewStudy, NewStudySite, SITE_TOKEN_PREFIX, SiteStatus, StudyCancel, StudyResult, StudyStatus,
};
pub use study_rows::{StudyRecord, StudySiteRecord};
pub use study_state::{SiteMessageKind, SiteSession, StudyLease, StudySnapshot, StudyWrite};
pub use tenants::API_KEY_PREFIX;
pub use uploads::{HeldUpload, UploadClaim, UploadClaimOutcome};

/// A statement on the `Any` driver, as built by `sqlx::query`, for helpers that bind a
/// caller's arguments before their own.
type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>;

/// The SQLite schema, embedded at build time from `migrations/sqlite/`.
static SQLITE_MIGRATOR: Migrator = sqlx::migrate!("migrations/sqlite");
/// The PostgreSQL schema, embedded at build time from `migrations/postgres/`.
static POSTGRES_MIGRATOR: Migrator = sqlx::migrate!("migrations/postgres");

/// How long a connection waits for SQLite's write lock before giving up with SQLITE_BUSY.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// Pool size: SQLite has one writer at a time, the rest serve reads (WAL); PostgreSQL
/// connections are shared by every replica, so each replica keeps a modest pool.
const MAX_CONNECTIONS: u32 = 8;
/// How long a request waits for a pooled connection (or a new one) before the store reports
/// the database unavailable (a 503 for the client).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);
/// The same for a site's own ledger (`privpca site`): one client, whose every write is synced;
/// on a loaded machine (hundreds of sites on two cores in the many-sites harness) a write can
/// wait longer than a service request should, and failing it would end the site's study.
const LEDGER_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(60);

/// The service's SQLite database checkpoints its write-ahead log in the background
/// ([`Store::spawn_checkpointer`]) this often, instead of in whichever commit pushes the log
/// past SQLite's default of 1 000 pages. That commit would otherwise copy the log into the
/// database file and sync both before it returns: about 1.4 ms per MB written, which lands on
/// a study round's critical path (docs/performance-federation.md).
const CHECKPOINT_EVERY: Duration = Duration::from_millis(250);

/// A commit still checkpoints by itself past this many log pages (64 MiB): a backstop that
/// bounds the log if the background checkpoints stop or cannot keep up.
const WAL_AUTOCHECKPOINT_PAGES: u32 = 16_384;
/// The advisory lock key every PostgreSQL write transaction holds (`pg_advisory_xact_lock`):
/// "privpca" in ASCII, read as an integer.
const WRITE_LOCK_KEY: i64 = 0x70_7269_7670_6361;

/// The database engine behind a store, chosen by the URL's scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    /// The backend a database URL names: `sqlite:` or `postgres:`/`postgresql:`.
    pub fn from_url(url: &str) -> Result<Backend, StoreError> {
        if url.starts_with("sqlite:") {
            Ok(Backend::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Backend::Postgres)
        } else {
            Err(StoreError::UnsupportedUrl)
        }
    }

    fn migrator(self) -> &'static Migrator {
        match self {
            Backend::Sqlite => &SQLITE_MIGRATOR,
            Backend::Postgres => &POSTGRES_MIGRATOR,
        }
    }

    /// The clause that makes a claimer skip rows another claimer holds; SQLite has one writer
    /// at a time and needs none.
    fn skip_locked(self) -> &'static str {
        match self {
            Backend::Sqlite => "",
            Backend::Postgres => "FOR UPDATE SKIP LOCKED",
        }
    }
}

/// The backend of an open connection (for helpers that get a connection, not a store).
fn backend_of(conn: &AnyConnection) -> Backend {
    if conn.backend_name().eq_ignore_ascii_case("sqlite") {
        Backend::Sqlite
    } else {
        Backend::Postgres
    }
}

/// The `FOR UPDATE` row lock on PostgreSQL, nothing on SQLite (whose write transactions
/// already hold the database's write lock).
fn for_update(conn: &AnyConnection) -> &'static str {
    match backend_of(conn) {
        Backend::Sqlite => "",
        Backend::Postgres => "FOR UPDATE",
    }
}

/// A SQLite URL that creates the file if missing (`mode=rwc`, unless a mode is given).
fn sqlite_url(url: &str) -> String {
    with_default_option(url, "mode=", "mode=rwc")
}

/// A PostgreSQL URL with sqlx's prepared-statement cache turned off
/// (`statement-cache-capacity=0`). sqlx 0.8's `Any` driver binds a NULL `f64` as a `float4`
/// parameter; with a cached statement, a later non-NULL `f64` in the same position is then
/// refused ("incorrect binary data format"). Without the cache each execution declares the
/// types of its own arguments. A connection string that sets the capacity itself is kept.
fn postgres_url(url: &str) -> String {
    with_default_option(url, "statement-cache-capacity", "statement-cache-capacity=0")
}

/// The PostgreSQL URL of the reads pool: sqlx's prepared-statement cache on (unless the URL
/// sets its capacity). Safe there because the statements it runs bind text only, never a
/// NULL `f64` (see [`postgres_url`]).
fn reads_url(url: &str) -> String {
    with_default_option(url, "statement-cache-capacity", "statement-cache-capacity=32")
}

/// Connections of the reads pool (per replica, beside [`MAX_CONNECTIONS`]).
const READS_CONNECTIONS: u32 = 4;

/// Opens the reads pool on PostgreSQL ([`Store`]'s `reads`).
async fn open_reads_pool(url: &str) -> Result<AnyPool, StoreError> {
    Ok(AnyPoolOptions::new()
        .max_connections(READS_CONNECTIONS)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect(&reads_url(url))
        .await?)
}

/// `url` with the query option `option` appended, unless the URL already mentions `name`.
fn with_default_option(url: &str, name: &str, option: &str) -> String {
    if url.contains(name) {
        url.to_owned()
    } else if url.contains('?') {
        format!("{url}&{option}")
    } else {
        format!("{url}?{option}")
    }
}

/// How a pool's SQLite connections commit (docs/design/ledger.md, "Durable before released").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Commits {
    /// `synchronous = NORMAL`, log checkpointed in the background ([`Store::spawn_checkpointer`]):
    /// the service's ordinary writes, durable against a crash of the process, not of the machine.
    Fast,
    /// `synchronous = FULL`, log checkpointed in the background: the service's charges, job
    /// outcomes and study steps, each synced to the disk before its commit returns or becomes
    /// visible.
    Synced,
    /// `synchronous = FULL` with SQLite's own checkpoints: a site ledger.
    SyncedSelfCheckpointed,
}

/// Connections of the service's synced pool on SQLite (beside [`MAX_CONNECTIONS`]): its
/// writes take the one writer lock anyway.
const SYNCED_CONNECTIONS: u32 = 2;

/// Opens a pool on `url`. SQLite connections get WAL, the busy timeout, foreign keys and the
/// commit mode `commits`; PostgreSQL connections set `synchronous_commit = on` (every commit
/// synced, whatever the server's default), so `commits` changes nothing there.
async fn open_pool(url: &str, backend: Backend, commits: Commits) -> Result<AnyPool, StoreError> {
    sqlx::any::install_default_drivers();
    let options = AnyPoolOptions::new()
        .max_connections(if commits == Commits::Synced {
            SYNCED_CONNECTIONS
        } else {
            MAX_CONNECTIONS
        })
        .acquire_timeout(if commits == Commits::SyncedSelfCheckpointed {
            LEDGER_ACQUIRE_TIMEOUT
        } else {
            ACQUIRE_TIMEOUT
        });
    let pool = match backend {
        Backend::Sqlite => {
            // A site ledger keeps SQLite's own checkpoints; the service's are background.
            let (synchronous, autocheckpoint) = match commits {
                Commits::Fast => ("NORMAL", WAL_AUTOCHECKPOINT_PAGES),
                Commits::Synced => ("FULL", WAL_AUTOCHECKPOINT_PAGES),
                Commits::SyncedSelfCheckpointed => ("FULL", 1000),
            };
            let pragmas = format!(
                "PRAGMA busy_timeout = {}; PRAGMA journal_mode = WAL; PRAGMA synchronous = {synchronous}; \
                 PRAGMA foreign_keys = ON; PRAGMA wal_autocheckpoint = {autocheckpoint};",
                BUSY_TIMEOUT.as_millis(),
            );
            options
                .after_connect(move |conn, _| {
                    let pragmas = pragmas.clone();
                    Box::pin(async move {
                        conn.execute(sqlx::raw_sql(&pragmas)).await?;
                        Ok(())
                    })
                })
                .connect(&sqlite_url(url))
                .await?
        }
        // Every commit synced whatever the role's or database's setting: a charge or a result
        // must be on the disk before anything is read from it.
        Backend::Postgres => {
            options
                .after_connect(|conn, _| {
                    Box::pin(async move {
                        conn.execute(sqlx::raw_sql("SET synchronous_commit = on")).await?;
                        Ok(())
                    })
                })
                .connect(&postgres_url(url))
                .await?
        }
    };
    Ok(pool)
}

/// Handle to the database and the directory holding uploaded data. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    pool: AnyPool,
    /// The pool of the writes that must survive a power loss: a job's charge and its outcome,
    /// and a study's steps (docs/design/ledger.md, "Durable before released"). On SQLite a
    /// second pool whose commits are synced to the disk (`synchronous = FULL`, [`Commits`]), so
    /// that a power loss cannot take back a charge whose output may already have left, nor an
    /// outcome a client may already have read (which would let the job run again with fresh
    /// noise); on PostgreSQL `pool` itself. Its commits are also visible to `pool` at once.
    synced: AnyPool,
    /// The pool of the hot reads that bind only text (a job by id, a key's tenant): on
    /// PostgreSQL a second, small pool that keeps prepared statements ([`reads_url`]), so such a
    /// read is one round trip instead of a prepare and an execute; on SQLite `pool` itself.
    reads: AnyPool,
    backend: Backend,
    data_dir: PathBuf,
    /// This process's name in `jobs.claimed_by` and `studies.coordinator`.
    replica: Arc<str>,
    /// How long a claim or a heartbeat holds a job (and a coordinator its studies).
    lease: Duration,
    /// How far ahead of the wall clock this store reads the time for leases, in microseconds:
    /// zero, except in tests that let a lease run out without waiting (`advance_lease_clock`).
    /// Shared by the store's clones.
    lease_clock_ahead: Arc<std::sync::atomic::AtomicI64>,
    /// Site tokens this process has seen, by hash: the study and site each names
    /// ([`Store::site_identity_by_token`]). Shared by the store's clones.
    site_tokens: Arc<std::sync::Mutex<std::collections::HashMap<String, (Uuid, u32)>>>,
    /// API keys' tenants, kept for a short time ([`Store::tenant_id_by_api_key`]). Shared by
    /// the store's clones.
    api_keys: Arc<key_cache::KeyCache>,
}

/// The lease when none is configured.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// The default replica name: the host's name (a container's hostname differs per container),
/// stable across restarts, so a restarted process recognises the jobs its predecessor held.
/// Replicas that share a host must be given distinct names (`PRIVPCA_REPLICA_ID`).
fn default_replica_name() -> Arc<str> {
    let host = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
    let host = host.trim();
    Arc::from(if host.is_empty() { "privpca" } else { host })
}

impl Store {
    /// Opens the database at `database_url` — `sqlite://path/to/file.db` (created if missing)
    /// or `postgres://user@host:port/database` (which must exist) — creates
    /// `data_dir/datasets`, and applies pending migrations. An unreachable database is an
    /// error, not a wait.
    ///
    /// Note: `sqlite::memory:` gives every pooled connection its own empty database; use a file.
    pub async fn connect(database_url: &str, data_dir: &Path) -> Result<Store, StoreError> {
        let backend = Backend::from_url(database_url)?;
        let pool = open_pool(database_url, backend, Commits::Fast).await?;
        let (reads, synced) = match backend {
            Backend::Sqlite => (
                pool.clone(),
                open_pool(database_url, backend, Commits::Synced).await?,
            ),
            Backend::Postgres => (open_reads_pool(database_url).await?, pool.clone()),
        };
        let store = Store {
            pool,
            synced,
            reads,
            backend,
            data_dir: data_dir.to_path_buf(),
            replica: default_replica_name(),
            lease: DEFAULT_LEASE,
            lease_clock_ahead: Arc::default(),
            site_tokens: Arc::default(),
            api_keys: Arc::default(),
        };
        tokio::fs::create_dir_all(store.uploads_dir()).await?;
        store.migrate().await?;
        store.open_missing_logs().await?;
        Ok(store)
    }

    /// Applies pending migrations. On PostgreSQL, sqlx serialises concurrent migrators with an
    /// advisory lock, so replicas starting together are safe.
    ///
    /// On SQLite they run on a connection of their own with foreign keys off: changing a
    /// constraint means rebuilding the table (SQLite's documented procedure, e.g.
    /// `0005_upload_claims.sql`), and dropping a table that others reference needs foreign
    /// keys off, which SQLite ignores inside the transaction sqlx wraps each migration in.
    /// Afterwards every foreign key is checked, and the connection is closed rather than
    /// returned to the pool.
    async fn migrate(&self) -> Result<(), StoreError> {
        if self.backend == Backend::Postgres {
            self.backend.migrator().run(&self.pool).await?;
            return Ok(());
        }
        let mut conn = self.pool.acquire().await?.detach();
        conn.execute("PRAGMA foreign_keys = OFF").await?;
        let migrated = self.backend.migrator().run(&mut conn).await;
        let broken: Result<i64, sqlx::Error> =
            sqlx::query_scalar("SELECT COUNT(*) FROM pragma_foreign_key_check")
                .fetch_one(&mut conn)
                .await;
        let _ = sqlx::Connection::close(conn).await;
        migrated?;
        match broken? {
            0 => Ok(()),
            rows => Err(StoreError::Corrupt(format!(
                "{rows} rows break a foreign key after migrating"
            ))),
        }
    }

    /// The engine behind this store.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The same store with another lease length (at least one second).
    pub fn with_lease(mut self, lease: Duration) -> Store {
        self.lease = lease.max(Duration::from_secs(1));
        self
    }

    /// The same store keeping an API key's tenant for `ttl` after reading it (zero: every
    /// request reads the database). A key revoked on another replica is accepted here at most
    /// `ttl` after the revocation commits (`key_cache.rs`).
    pub fn with_key_cache_ttl(mut self, ttl: Duration) -> Store {
        self.api_keys = Arc::new(key_cache::KeyCache::new(ttl, key_cache::KEY_CACHE_CAPACITY));
        self
    }

    /// The same store under another replica name (non-empty).
    pub fn with_replica(mut self, name: &str) -> Store {
        let name = name.trim();
        if !name.is_empty() {
            self.replica = Arc::from(name);
        }
        self
    }

    /// How long a claim or a heartbeat holds a job.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// This process's replica name.
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// When a lease taken at `at` runs out.
    /// A test hook: this store (and its clones) reads the time for leases `by` later than
    /// before, so a test lets a lease run out, or checks that it has not, without sleeping.
    #[doc(hidden)]
    pub fn advance_lease_clock(&self, by: Duration) {
        let micros = i64::try_from(by.as_micros()).unwrap_or(i64::MAX);
        self.lease_clock_ahead
            .fetch_add(micros, std::sync::atomic::Ordering::SeqCst);
    }

    /// The time as leases are judged: claims, heartbeats and reapers read it.
    fn lease_now(&self) -> chrono::DateTime<chrono::Utc> {
        let ahead = self.lease_clock_ahead.load(std::sync::atomic::Ordering::SeqCst);
        codec::now() + chrono::Duration::microseconds(ahead)
    }

    fn lease_end(&self, at: chrono::DateTime<chrono::Utc>) -> chrono::DateTime<chrono::Utc> {
        at + chrono::Duration::from_std(self.lease).unwrap_or(chrono::Duration::MAX)
    }

    /// Readiness: the database answers and every embedded migration is applied.
    pub async fn ping(&self) -> Result<(), StoreError> {
        let applied: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations WHERE success")
            .fetch_one(&self.pool)
            .await?;
        let up = self
            .backend
            .migrator()
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

    /// Where a records dataset's statistics (XᵀX, Xᵀ1, n) are kept once a job has computed
    /// them: `data_dir/datasets/{id}.stats`, beside the data (`crate::ingest::stats_file`).
    pub fn stats_path(&self, dataset_id: Uuid) -> PathBuf {
        self.datasets_dir()
            .join(format!("{}.{STATS_EXTENSION}", codec::id(dataset_id)))
    }

    /// A fresh temporary file name for an upload in progress, in this replica's own upload
    /// directory under the data directory (same file system as [`Store::data_path`], so the
    /// final move is an atomic rename; per replica, so a replica's start-up clean-up never
    /// touches another replica's upload in progress).
    pub fn upload_temp_path(&self, dataset_id: Uuid) -> PathBuf {
        self.uploads_dir().join(format!(
            "{}.{}.{UPLOAD_EXTENSION}",
            codec::id(dataset_id),
            Uuid::new_v4().simple()
        ))
    }

    /// Removes the temporary files of this replica's uploads that a crash interrupted
    /// (`*.upload` in its upload directory, and in the data directory itself, where versions
    /// before replicas kept them) and returns how many it removed. Call it at start, before
    /// serving: an upload in progress in this process would lose its file. Data files and
    /// other replicas' uploads are never touched. Creates the upload directory.
    pub async fn remove_interrupted_uploads(&self) -> Result<usize, StoreError> {
        tokio::fs::create_dir_all(self.uploads_dir()).await?;
        let mut removed = 0;
        for dir in [self.uploads_dir(), self.datasets_dir()] {
            let mut entries = match tokio::fs::read_dir(&dir).await {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e.into()),
            };
            while let Some(entry) = entries.next_entry().await? {
                let path = entry.path();
                let is_upload = path.extension().is_some_and(|ext| ext == UPLOAD_EXTENSION);
                // Statistics whose data file is gone: a job wrote them while the dataset was
                // being deleted. They are data-derived, so they go with the data.
                let orphan_stats = path.extension().is_some_and(|ext| ext == STATS_EXTENSION)
                    && !tokio::fs::try_exists(path.with_extension("f64"))
                        .await
                        .unwrap_or(true);
                if (is_upload || orphan_stats) && entry.file_type().await?.is_file() {
                    tokio::fs::remove_file(&path).await?;
                    removed += 1;
                }
            }
        }
        Ok(removed)
    }

    /// This replica's directory for uploads in progress: `data_dir/datasets/.uploads-{replica}`.
    fn uploads_dir(&self) -> PathBuf {
        let name: String = self
            .replica
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.datasets_dir().join(format!(".uploads-{name}"))
    }

    /// Closes the pool, waiting for connections to be returned (graceful shutdown).
    pub async fn close(&self) {
        self.pool.close().await;
        self.synced.close().await;
        self.reads.close().await;
    }

    /// On SQLite, checkpoints the write-ahead log every `CHECKPOINT_EVERY` (250 ms) in a task of its
    /// own (`PRAGMA wal_checkpoint(PASSIVE)`: it waits for no reader or writer), until the pool
    /// closes; None on PostgreSQL. Durability is unchanged: a commit is in the log either way;
    /// the checkpoint only moves it into the database file.
    pub fn spawn_checkpointer(&self) -> Option<tokio::task::JoinHandle<()>> {
        if self.backend != Backend::Sqlite {
            return None;
        }
        let pool = self.pool.clone();
        Some(tokio::spawn(async move {
            let mut every = tokio::time::interval(CHECKPOINT_EVERY);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                if pool.is_closed() {
                    return;
                }
                if let Err(e) = pool
                    .execute(sqlx::raw_sql("PRAGMA wal_checkpoint(PASSIVE)"))
                    .await
                {
                    if pool.is_closed() {
                        return;
                    }
                    tracing::debug!(error = %e, "a background WAL checkpoint failed; the next one retries");
                }
            }
        }))
    }

    /// A write transaction that holds the database's one writer lock from its start, so a
    /// read-then-write inside it can never interleave with another writer: SQLite's
    /// `BEGIN IMMEDIATE` (waiting up to the busy timeout); on PostgreSQL `BEGIN` and a
    /// transaction-scoped advisory lock that every write transaction of every replica takes.
    /// Write transactions are short (no file I/O or computation inside), so one writer at a
    /// time is not the bottleneck; statements outside them (claims, progress, heartbeats) do
    /// not take it. Dropped without `commit` it rolls back.
    async fn write_tx(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>, StoreError> {
        self.write_tx_on(&self.pool).await
    }

    /// [`Store::write_tx`] on the synced pool: its commit returns once it is on the disk, and
    /// only then do other connections see it. For a job's charge and a study's step.
    async fn synced_write_tx(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>, StoreError> {
        self.write_tx_on(&self.synced).await
    }

    async fn write_tx_on(&self, pool: &AnyPool) -> Result<sqlx::Transaction<'static, sqlx::Any>, StoreError> {
        match self.backend {
            Backend::Sqlite => Ok(pool.begin_with("BEGIN IMMEDIATE").await?),
            Backend::Postgres => {
                let mut tx = pool.begin().await?;
                sqlx::query("SELECT CAST(pg_advisory_xact_lock($1) AS TEXT) AS locked")
                    .bind(WRITE_LOCK_KEY)
                    .fetch_one(&mut *tx)
                    .await?;
                Ok(tx)
            }
        }
    }

    /// A read-only transaction that sees one snapshot of the database for all its statements
    /// (SQLite's deferred `BEGIN` under WAL; `REPEATABLE READ` on PostgreSQL), for reads that
    /// compare several tables, such as a log against its ledger. Dropped, it rolls back.
    async fn snapshot_tx(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>, StoreError> {
        Ok(match self.backend {
            Backend::Sqlite => self.pool.begin().await?,
            Backend::Postgres => {
                self.pool
                    .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    .await?
            }
        })
    }

    fn datasets_dir(&self) -> PathBuf {
        self.data_dir.join("datasets")
    }
}
