//! Reads of one record by id inside the caller's connection or transaction, shared by the
//! modules that write datasets, jobs and uploads (so none of them imports another for it).

use sqlx::AnyConnection;
use uuid::Uuid;

use super::StoreError;
use super::codec::id;
use super::models::DatasetRecord;
use super::rows::{self, DATASET_COLUMNS};

/// The dataset if it belongs to `tenant`.
pub(crate) async fn dataset_for(
    conn: &mut AnyConnection,
    tenant: Uuid,
    dataset: Uuid,
) -> Result<Option<DatasetRecord>, StoreError> {
    let sql = format!("SELECT {DATASET_COLUMNS} FROM datasets WHERE id = $1 AND tenant_id = $2");
    let row = sqlx::query(&sql)
        .bind(id(dataset))
        .bind(id(tenant))
        .fetch_optional(conn)
        .await?;
    row.as_ref().map(rows::dataset).transpose()
}
