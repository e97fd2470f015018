//! Opening the transparency log of every dataset and study created before the log existed
//! (migration 0011): their history is written from their rows. Apart from `ledger_log.rs` (the
//! log machinery every owner uses) and `study_log.rs` (a study's events), which it both calls.

use uuid::Uuid;

use super::ledger_log::{append, backfill_events, dataset_log};
use super::{Store, StoreError};

/// Whose rows a backfill writes a log of.
#[derive(Debug, Clone, Copy)]
enum Owner {
    Dataset,
    Study,
}

impl Owner {
    /// The ids of this kind that have no log yet.
    fn missing_sql(self) -> &'static str {
        match self {
            Owner::Dataset => {
                "SELECT id FROM datasets d WHERE NOT EXISTS \
                     (SELECT 1 FROM ledger_leaves l WHERE l.log = 'datasets/' || d.id AND l.idx = 0)"
            }
            Owner::Study => {
                "SELECT id FROM studies s WHERE NOT EXISTS \
                     (SELECT 1 FROM ledger_leaves l WHERE l.log = 'studies/' || s.id AND l.idx = 0)"
            }
        }
    }

    fn log(self, id: Uuid) -> String {
        match self {
            Owner::Dataset => dataset_log(id),
            Owner::Study => super::study_log::study_log(id),
        }
    }
}

impl Store {
    /// Opens the log of every dataset and study that has none (created before migration
    /// 0011): their history is written from their rows ([`BACKFILLED`]), each in one write
    /// transaction that checks again that the log is still empty (replicas starting together
    /// write it once). Runs at connect, after the migrations; a no-op once every log is open.
    /// A row that cannot be logged (say an old configuration with an integer beyond 2⁵³) leaves
    /// that one log unopened, so its views answer 409, and is reported at error level; it
    /// does not stop the service from starting. Database errors do.
    pub(crate) async fn open_missing_logs(&self) -> Result<u64, StoreError> {
        let mut opened = 0;
        for owner in [Owner::Dataset, Owner::Study] {
            let missing: Vec<String> = sqlx::query_scalar(owner.missing_sql())
                .fetch_all(&self.pool)
                .await?;
            for id in missing {
                let id = Uuid::parse_str(&id).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                match self.open_log(owner, id).await {
                    Ok(written) => opened += u64::from(written),
                    Err(e @ (StoreError::UnloggableEvent(_) | StoreError::Corrupt(_))) => {
                        tracing::error!(log = %owner.log(id), error = %e, "cannot open the transparency log of rows older than it");
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        if opened > 0 {
            tracing::info!(
                logs = opened,
                "opened the transparency logs of datasets and studies older than the log"
            );
        }
        Ok(opened)
    }

    /// Writes `id`'s history as its log if the log is still empty; whether it did.
    async fn open_log(&self, owner: Owner, id: Uuid) -> Result<bool, StoreError> {
        let log = owner.log(id);
        let mut tx = self.write_tx().await?;
        let leaves: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM ledger_leaves WHERE log = $1")
            .bind(&log)
            .fetch_one(&mut *tx)
            .await?;
        if leaves > 0 {
            return Ok(false);
        }
        let events = match owner {
            Owner::Dataset => backfill_events(&mut tx, id).await?,
            Owner::Study => super::study_log::backfill_events(&mut tx, id).await?,
        };
        for event in &events {
            append(&mut tx, &log, event).await?;
        }
        tx.commit().await?;
        Ok(true)
    }
}
