//! Reads of one record by id inside the caller's connection or transaction, shared by the
//! modules that write datasets, jobs and uploads (so none of them imports another for it), and
//! the read of a succeeded job's or study's result row.

use sqlx::any::AnyRow;
use sqlx::{AnyConnection, AnyPool};
use uuid::Uuid;

use super::StoreError;
use super::codec;
use super::models::{DatasetRecord, JobRecord};
use super::rows::{self, DATASET_COLUMNS, JOB_COLUMNS};

/// A table whose rows belong to tenants, with the columns and mapper of its record.
pub(crate) struct Owned<T> {
    table: &'static str,
    columns: &'static str,
    record: fn(&AnyRow) -> Result<T, StoreError>,
}

pub(crate) const DATASETS: Owned<DatasetRecord> = Owned {
    table: "datasets",
    columns: DATASET_COLUMNS,
    record: rows::dataset,
};

pub(crate) const JOBS: Owned<JobRecord> = Owned {
    table: "jobs",
    columns: JOB_COLUMNS,
    record: rows::job,
};

impl<T> Owned<T> {
    /// The record with id `id` if it belongs to `tenant`.
    pub(crate) async fn get(
        &self,
        conn: &mut AnyConnection,
        tenant: Uuid,
        id: Uuid,
    ) -> Result<Option<T>, StoreError> {
        let sql = format!(
            "SELECT {} FROM {} WHERE id = $1 AND tenant_id = $2",
            self.columns, self.table
        );
        let row = sqlx::query(&sql)
            .bind(codec::id(id))
            .bind(codec::id(tenant))
            .fetch_optional(conn)
            .await?;
        row.as_ref().map(self.record).transpose()
    }
}

/// The result columns (`result`, `result_d`, `result_k`, `eigenvalues`) and `extra` of the
/// tenant's succeeded job or study `id` in `table`; `None` if it is unknown, belongs to another
/// tenant, has not succeeded or has no result.
pub(crate) async fn succeeded_result(
    pool: &AnyPool,
    table: &str,
    extra: &str,
    tenant: Uuid,
    id: Uuid,
) -> Result<Option<AnyRow>, StoreError> {
    let sql = format!(
        "SELECT result, result_d, result_k, eigenvalues, {extra} FROM {table} \
         WHERE id = $1 AND tenant_id = $2 AND status = 'succeeded' AND result IS NOT NULL"
    );
    Ok(sqlx::query(&sql)
        .bind(codec::id(id))
        .bind(codec::id(tenant))
        .fetch_optional(pool)
        .await?)
}
