//! The store's one error type.

use uuid::Uuid;

/// Everything that can go wrong in the persistence layer.
///
/// `Database`, `Migrate`, `Io`, `Json`, `Corrupt` and `Entropy` are server faults (500s).
/// `InvalidDataset`, `InvalidCharge`, `InvalidResult` and `SeedNotAllowed` are caller
/// mistakes the layer above should have caught; the store refuses them as a second line of
/// defence. `JobNotRunning` means a runner transition was attempted on a job that is not
/// running.
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
    #[error("invalid charge: {0}")]
    InvalidCharge(String),
    #[error("invalid job result: {0}")]
    InvalidResult(String),
    #[error("a seed is only allowed on public datasets")]
    SeedNotAllowed,
    #[error("job {0} is not running")]
    JobNotRunning(Uuid),
    #[error("not all migrations are applied ({applied} of {expected})")]
    NotMigrated { applied: i64, expected: i64 },
}

impl StoreError {
    /// Whether the database was busy or locked past the busy timeout; worth a 503 and a retry
    /// rather than a 500.
    pub fn is_busy(&self) -> bool {
        match self {
            // SQLITE_BUSY (5) and SQLITE_LOCKED (6), with their extended codes.
            StoreError::Database(sqlx::Error::Database(e)) => e
                .code()
                .and_then(|code| code.parse::<i32>().ok())
                .is_some_and(|code| matches!(code & 0xff, 5 | 6)),
            StoreError::Database(sqlx::Error::PoolTimedOut) => true,
            _ => false,
        }
    }
}
