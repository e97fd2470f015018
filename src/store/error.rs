//! The store's one error type.

use uuid::Uuid;

/// Everything that can go wrong in the persistence layer.
///
/// `Database`, `Migrate`, `Io`, `Json`, `Corrupt` and `Entropy` are server faults (500s).
/// `InvalidDataset`, `InvalidCharge`, `InvalidResult` and `SeedNotAllowed` are caller
/// mistakes the layer above should have caught; the store refuses them as a second line of
/// defence. `LeaseLost` means a runner write was attempted on a job that is not
/// running under this replica's lease (finished, or failed by a reaper).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration error: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("file error: {0}")]
    Io(#[from] std::io::Error),
    #[error("JSON error: {0}")]
    Json(#[from] serde_json::Error),
    #[error("stored value is corrupt: {0}")]
    Corrupt(String),
    #[error("the operating system's random generator failed: {0}")]
    Entropy(String),
    #[error("invalid dataset: {0}")]
    InvalidDataset(String),
    #[error("the job cannot be recorded in the transparency log: {0}")]
    UnloggableEvent(String),
    #[error("the transparency log {log} does not match the ledger: {reason}")]
    LogTampered { log: String, reason: String },
    #[error("invalid charge: {0}")]
    InvalidCharge(String),
    #[error("invalid job result: {0}")]
    InvalidResult(String),
    #[error("a seed is only allowed on public datasets")]
    SeedNotAllowed,
    #[error("{0} must not contain the NUL character")]
    NulInText(&'static str),
    #[error("the database URL must start with sqlite:// or postgres://")]
    UnsupportedUrl,
    #[error("job {0} is not running under this replica's lease")]
    LeaseLost(Uuid),
    #[error("study {0} is no longer coordinated by this replica under the epoch it claimed")]
    StudyLeaseLost(Uuid),
    #[error("not all migrations are applied ({applied} of {expected})")]
    NotMigrated { applied: i64, expected: i64 },
}

/// Refuses text the database cannot store as given: PostgreSQL's `TEXT` holds no NUL
/// character, and the store keeps names byte-for-byte on both backends rather than altering
/// them. A caller mistake (a 422 for the client).
pub(crate) fn text_without_nul(field: &'static str, value: &str) -> Result<(), StoreError> {
    if value.contains('\0') {
        Err(StoreError::NulInText(field))
    } else {
        Ok(())
    }
}

impl StoreError {
    /// Whether the database was busy, locked past the busy timeout, or unreachable; worth a
    /// 503 and a retry rather than a 500. Covers SQLite's BUSY/LOCKED, PostgreSQL's
    /// serialization failure, deadlock, lock timeout, shutdown and connection classes, and a
    /// connection that could not be made or was lost (the database is down).
    pub fn is_busy(&self) -> bool {
        let StoreError::Database(e) = self else {
            return false;
        };
        match e {
            sqlx::Error::Database(e) => e.code().is_some_and(|code| busy_code(&code)),
            sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::WorkerCrashed => true,
            _ => false,
        }
    }
}

/// PostgreSQL's codes are five-character SQLSTATEs: 40001 serialization failure, 40P01
/// deadlock, 55P03 lock not available, class 57P (operator intervention: shutdown, crash),
/// class 08 (connection exception). SQLite's are numbers of at most four digits: BUSY (5) and
/// LOCKED (6) with their extended codes.
fn busy_code(code: &str) -> bool {
    if code.len() == 5 {
        matches!(code, "40001" | "40P01" | "55P03") || code.starts_with("57P") || code.starts_with("08")
    } else {
        code.parse::<i32>().is_ok_and(|n| matches!(n & 0xff, 5 | 6))
    }
}
