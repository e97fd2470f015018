//! Datasets: creation with their budget, listing, deletion (data removed, ledger kept, queued
//! jobs refunded, id never reused). Uploading data is in `uploads.rs`.

use std::path::Path;

use sqlx::AnyConnection;
use uuid::Uuid;

use super::codec::{id, now, ts};
use super::jobs::cancel_queued;
use super::lookup::DATASETS;
use super::models::{DataObject, DatasetRecord, DatasetStatus, JobRecord, NewDataset};
use super::rows::{self, DATASET_COLUMNS, JOB_COLUMNS};
use super::{Store, StoreError};
use crate::privacy::units::{DeltaUnits, RhoUnits};

/// Why a queued job of a deleted dataset ended.
const DELETED_REASON: &str = "the dataset was deleted before this job started; its charge was refunded";

/// Second-line checks of what the schema and the privacy rules require of a new dataset.
fn check(new: &NewDataset) -> Result<(), StoreError> {
    let bad = |msg: &str| Err(StoreError::InvalidDataset(msg.to_owned()));
    if !new.relation.fits(new.kind) {
        return bad("the neighbouring relation does not fit the dataset kind");
    }
    for bound in [new.row_norm_bound, new.row_l1_bound, new.entry_bound]
        .into_iter()
        .flatten()
    {
        if !(bound > 0.0 && bound.is_finite()) {
            return bad("bounds must be finite and > 0");
        }
    }
    match (new.public, new.budget_rho_units, new.budget_delta_units) {
        (true, None, None) => Ok(()),
        (true, _, _) => bad("a public dataset carries no budget"),
        (false, Some(rho), Some(delta)) => {
            if !rho.is_valid_budget() {
                return bad("the rho budget must be > 0 and at most the largest allowed budget");
            }
            if !delta.is_valid_budget() {
                return bad("the delta budget must lie in [0, 1)");
            }
            match new.budget_epsilon_delta {
                None => Ok(()),
                Some((epsilon, d)) if epsilon > 0.0 && epsilon.is_finite() && d > 0.0 && d < 1.0 => Ok(()),
                Some(_) => bad("a stated (epsilon, delta) budget needs epsilon > 0 and delta in (0, 1)"),
            }
        }
        (false, _, _) => bad("a private dataset needs a rho and a delta budget"),
    }
}

pub(super) fn positive(value: u64, what: &str) -> Result<i64, StoreError> {
    match i64::try_from(value) {
        Ok(v) if v > 0 => Ok(v),
        _ => Err(StoreError::InvalidDataset(format!(
            "{what} must be between 1 and 2^63-1"
        ))),
    }
}

/// Removes a file, treating "already gone" as success.
pub(super) async fn remove_if_present(path: &Path) -> Result<(), StoreError> {
    match tokio::fs::remove_file(path).await {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
        _ => Ok(()),
    }
}

impl Store {
    /// Creates an empty dataset with a fresh random (v4) id.
    pub async fn create_dataset(&self, tenant: Uuid, new: NewDataset) -> Result<DatasetRecord, StoreError> {
        check(&new)?;
        super::error::text_without_nul("name", &new.name)?;
        let at = now();
        let record = DatasetRecord {
            id: Uuid::new_v4(),
            tenant_id: tenant,
            name: new.name,
            kind: new.kind,
            relation: new.relation,
            row_norm_bound: new.row_norm_bound,
            row_l1_bound: new.row_l1_bound,
            entry_bound: new.entry_bound,
            public: new.public,
            budget_rho_units: new.budget_rho_units,
            budget_delta_units: new.budget_delta_units,
            spent_rho_units: RhoUnits::ZERO,
            spent_delta_units: DeltaUnits::ZERO,
            spent_other_rho_units: RhoUnits::ZERO,
            budget_epsilon_delta: new.budget_epsilon_delta,
            budget_stated: new.budget_stated,
            status: DatasetStatus::Empty,
            n: None,
            d: None,
            nnz: None,
            created_at: at,
            deleted_at: None,
        };
        // The dataset and the leaf that opens its log (its budget) commit together.
        let mut tx = self.write_tx().await?;
        sqlx::query(
            "INSERT INTO datasets (id, tenant_id, name, kind, relation, row_norm_bound, row_l1_bound, \
                 entry_bound, public, budget_rho_units, budget_delta_units, budget_epsilon, budget_delta, \
                 budget_stated, status, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)",
        )
        .bind(id(record.id))
        .bind(id(tenant))
        .bind(&record.name)
        .bind(record.kind.as_str())
        .bind(record.relation.as_str())
        .bind(record.row_norm_bound)
        .bind(record.row_l1_bound)
        .bind(record.entry_bound)
        .bind(i64::from(record.public))
        .bind(record.budget_rho_units.map(|u| u.0))
        .bind(record.budget_delta_units.map(|u| u.0))
        .bind(record.budget_epsilon_delta.map(|(e, _)| e))
        .bind(record.budget_epsilon_delta.map(|(_, d)| d))
        .bind(serde_json::to_string(&record.budget_stated)?)
        .bind(record.status.as_str())
        .bind(ts(at))
        .bind(ts(at))
        .execute(&mut *tx)
        .await?;
        super::ledger_log::append_budget_leaf(&mut tx, record.id).await?;
        tx.commit().await?;
        Ok(record)
    }

    /// The dataset, including a deleted one (status `Deleted`); `None` if it does not exist
    /// for this tenant.
    pub async fn get_dataset(
        &self,
        tenant: Uuid,
        dataset: Uuid,
    ) -> Result<Option<DatasetRecord>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        DATASETS.get(&mut conn, tenant, dataset).await
    }

    /// The tenant's datasets (deleted ones included) in creation order.
    pub async fn list_datasets(&self, tenant: Uuid) -> Result<Vec<DatasetRecord>, StoreError> {
        let sql =
            format!("SELECT {DATASET_COLUMNS} FROM datasets WHERE tenant_id = $1 ORDER BY created_at, id");
        let found = sqlx::query(&sql).bind(id(tenant)).fetch_all(&self.pool).await?;
        found.iter().map(rows::dataset).collect()
    }

    /// Marks an empty dataset ready with its shape; `None` if it does not exist for this tenant
    /// or is not empty (an upload holding it included). The caller has already moved the data
    /// into [`Store::data_path`]; uploads use [`Store::attach_upload`] instead, which does the
    /// move under the write lock and the upload's claim, so that two uploads or an upload
    /// racing a delete cannot leave data and shape mismatched.
    pub async fn attach_data(
        &self,
        tenant: Uuid,
        dataset: Uuid,
        n: u64,
        d: u64,
    ) -> Result<Option<DatasetRecord>, StoreError> {
        let (n, d) = (positive(n, "n")?, positive(d, "d")?);
        let mut conn = self.pool.acquire().await?;
        mark_ready(&mut conn, tenant, dataset, n, d).await
    }

    /// Deletes a dataset: status `Deleted`, its queued jobs cancelled and refunded, its running
    /// jobs asked to stop (their charge is kept), an upload's claim on it dropped (that upload
    /// can no longer attach), all in one transaction; then its data file is removed. The ledger is kept. Idempotent: deleting again returns the deleted record and
    /// retries the file removal. `None` if the dataset does not exist for this tenant.
    pub async fn delete_dataset(
        &self,
        tenant: Uuid,
        dataset: Uuid,
    ) -> Result<Option<DatasetRecord>, StoreError> {
        let mut tx = self.write_tx().await?;
        let Some(found) = DATASETS.get(&mut tx, tenant, dataset).await? else {
            tx.rollback().await?;
            return Ok(None);
        };
        if found.status != DatasetStatus::Deleted {
            let at = now();
            sqlx::query(
                "UPDATE datasets SET status = 'deleted', deleted_at = $1, updated_at = $1, \
                     upload_claim = NULL, upload_lease_until = NULL \
                 WHERE id = $2",
            )
            .bind(ts(at))
            .bind(id(dataset))
            .execute(&mut *tx)
            .await?;
            let sql = format!(
                "SELECT {JOB_COLUMNS} FROM jobs WHERE dataset_id = $1 AND status = 'queued' ORDER BY seq"
            );
            let queued = sqlx::query(&sql).bind(id(dataset)).fetch_all(&mut *tx).await?;
            for job in queued
                .iter()
                .map(rows::job)
                .collect::<Result<Vec<JobRecord>, _>>()?
            {
                cancel_queued(&mut tx, &job, Some(DELETED_REASON), at).await?;
            }
            sqlx::query("UPDATE jobs SET cancel_requested = 1 WHERE dataset_id = $1 AND status = 'running'")
                .bind(id(dataset))
                .execute(&mut *tx)
                .await?;
            super::ledger_log::append_deletion_leaf(&mut tx, dataset).await?;
        }
        let deleted = DATASETS.get(&mut tx, tenant, dataset).await?;
        tx.commit().await?;
        remove_if_present(&self.data_path(dataset)).await?;
        remove_if_present(&self.stats_path(dataset)).await?;
        Ok(deleted)
    }
}

impl Store {
    /// Where a ready dataset's data is in the object store, if it was uploaded there (any
    /// tenant: the runner and the replicas' sweep ask by id).
    pub async fn data_object(&self, dataset: Uuid) -> Result<Option<DataObject>, StoreError> {
        let row: Option<(Option<String>, Option<String>)> = sqlx::query_as(
            "SELECT data_object, data_sha256 FROM datasets WHERE id = $1 AND status = 'ready'",
        )
        .bind(id(dataset))
        .fetch_optional(&self.pool)
        .await?;
        Ok(match row {
            Some((Some(key), Some(sha256))) => Some(DataObject { key, sha256 }),
            _ => None,
        })
    }

    /// Whether a dataset is deleted or was never created (any tenant): a replica's sweep drops
    /// what it caches of such datasets.
    pub async fn dataset_gone(&self, dataset: Uuid) -> Result<bool, StoreError> {
        Ok(self
            .dataset_status_text(dataset)
            .await?
            .is_none_or(|s| s == "deleted"))
    }

    /// Whether this database holds `dataset` as deleted (any tenant). Unlike
    /// [`Store::dataset_gone`], a dataset this database never knew is not deleted: the object
    /// store's sweep removes only what this deployment deleted, never the data of another
    /// database that shares the bucket and prefix by mistake.
    pub async fn dataset_deleted(&self, dataset: Uuid) -> Result<bool, StoreError> {
        Ok(self
            .dataset_status_text(dataset)
            .await?
            .is_some_and(|s| s == "deleted"))
    }

    async fn dataset_status_text(&self, dataset: Uuid) -> Result<Option<String>, StoreError> {
        Ok(sqlx::query_scalar("SELECT status FROM datasets WHERE id = $1")
            .bind(id(dataset))
            .fetch_optional(&self.pool)
            .await?)
    }
}

/// Empty → ready with shape n×d, scoped by tenant.
async fn mark_ready(
    conn: &mut AnyConnection,
    tenant: Uuid,
    dataset: Uuid,
    n: i64,
    d: i64,
) -> Result<Option<DatasetRecord>, StoreError> {
    let sql = format!(
        "UPDATE datasets SET status = 'ready', n = $1, d = $2, updated_at = $3 \
         WHERE id = $4 AND tenant_id = $5 AND status = 'empty' RETURNING {DATASET_COLUMNS}"
    );
    let row = sqlx::query(&sql)
        .bind(n)
        .bind(d)
        .bind(ts(now()))
        .bind(id(dataset))
        .bind(id(tenant))
        .fetch_optional(conn)
        .await?;
    row.as_ref().map(rows::dataset).transpose()
}
