//! Uploads across replicas: an upload holds its dataset in the database, not in one process.
//!
//! Before it reads the body, an upload claims the dataset in one conditional statement:
//! `empty` → `uploading` with a fresh random token (`upload_claim`) and a lease
//! (`upload_lease_until`). The claim succeeds for an `empty` dataset, or for an `uploading` one
//! whose lease ran out (its replica died mid-upload); so at most one upload, on any replica,
//! streams into a dataset at a time, and a second one is refused before it sends its data.
//! While the body streams the holder renews the lease (every third of a lease, as a job's
//! heartbeat). Attaching the data is fenced by the token: an upload whose lease ran out and
//! was taken over, or whose dataset was deleted meanwhile, cannot attach, and its file is
//! removed. An upload that fails gives the dataset back (`empty`); one whose process crashed
//! leaves a lease that runs out. Leases are compared on the replicas' clocks, as job leases.

use std::path::Path;
use std::time::Duration;

use uuid::Uuid;

use super::codec::{id, now, ts};
use super::datasets::{positive, remove_if_present};
use super::lookup::DATASETS;
use super::models::{DataObject, DatasetRecord, DatasetStatus};
use super::rows::{self, DATASET_COLUMNS};
use super::{Store, StoreError};

/// An upload's hold on a dataset: the token its claim wrote, the fence of its later writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UploadClaim {
    pub tenant: Uuid,
    pub dataset: Uuid,
    pub token: Uuid,
}

/// What came of claiming a dataset for an upload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UploadClaimOutcome {
    Claimed(UploadClaim),
    /// Not claimable in this status: `Ready`, `Deleted`, or `Uploading` under another
    /// upload's live lease (`Empty` when that upload ended between the claim and the look).
    Refused(DatasetStatus),
    /// No such dataset for this tenant.
    NotFound,
}

impl Store {
    /// Claims a dataset for an upload: `empty`, or `uploading` with its lease run out, →
    /// `uploading` under a fresh token and a lease of [`Store::lease`], in one conditional
    /// statement, so two uploads (threads or replicas) never both hold it.
    pub async fn claim_upload(&self, tenant: Uuid, dataset: Uuid) -> Result<UploadClaimOutcome, StoreError> {
        let claim = UploadClaim {
            tenant,
            dataset,
            token: Uuid::new_v4(),
        };
        let at = self.lease_now();
        let claimed = sqlx::query(
            "UPDATE datasets SET status = 'uploading', upload_claim = $1, upload_lease_until = $2, \
                 updated_at = $3 \
             WHERE id = $4 AND tenant_id = $5 \
               AND (status = 'empty' OR (status = 'uploading' AND upload_lease_until < $3))",
        )
        .bind(id(claim.token))
        .bind(ts(self.lease_end(at)))
        .bind(ts(at))
        .bind(id(dataset))
        .bind(id(tenant))
        .execute(&self.pool)
        .await?;
        if claimed.rows_affected() == 1 {
            return Ok(UploadClaimOutcome::Claimed(claim));
        }
        let mut conn = self.pool.acquire().await?;
        Ok(match DATASETS.get(&mut conn, tenant, dataset).await? {
            Some(found) => UploadClaimOutcome::Refused(found.status),
            None => UploadClaimOutcome::NotFound,
        })
    }

    /// The holder's heartbeat: pushes the lease of its claim forward by [`Store::lease`].
    /// `false` when the claim is gone (the dataset was deleted, or the lease ran out and
    /// another upload took the dataset over): the upload can no longer attach.
    pub async fn renew_upload(&self, claim: &UploadClaim) -> Result<bool, StoreError> {
        let lease_until = ts(self.lease_end(self.lease_now()));
        self.update_claimed(claim, "upload_lease_until = $1", lease_until)
            .await
    }

    /// Gives a failed upload's dataset back: `uploading` → `empty`, if the claim still holds
    /// it. Returns whether it did.
    pub async fn release_upload(&self, claim: &UploadClaim) -> Result<bool, StoreError> {
        self.update_claimed(
            claim,
            "status = 'empty', upload_claim = NULL, upload_lease_until = NULL, updated_at = $1",
            ts(now()),
        )
        .await
    }

    /// `UPDATE datasets SET {set}` (whose one placeholder $1 is `value`) on the dataset
    /// `claim` names, if the claim still holds it. Returns whether it did.
    async fn update_claimed(
        &self,
        claim: &UploadClaim,
        set: &str,
        value: String,
    ) -> Result<bool, StoreError> {
        let sql = format!(
            "UPDATE datasets SET {set} \
             WHERE id = $2 AND tenant_id = $3 AND status = 'uploading' AND upload_claim = $4"
        );
        let updated = sqlx::query(&sql)
            .bind(value)
            .bind(id(claim.dataset))
            .bind(id(claim.tenant))
            .bind(id(claim.token))
            .execute(&self.pool)
            .await?;
        Ok(updated.rows_affected() == 1)
    }

    /// Atomically moves a finished upload (written at [`Store::upload_temp_path`]) to
    /// [`Store::data_path`] and marks the dataset ready with shape n×d, if `claim` still holds
    /// it. The store takes the file: it either becomes the dataset's data, or (the claim is
    /// gone: the dataset was deleted or taken over; or an error) it is removed. Returns `None`
    /// when the claim no longer held the dataset.
    pub async fn attach_upload(
        &self,
        claim: &UploadClaim,
        upload: &Path,
        n: u64,
        d: u64,
    ) -> Result<Option<DatasetRecord>, StoreError> {
        self.attach_stored(claim, upload, (n, d, None), None).await
    }

    /// [`Store::attach_upload`] of a sparse n×n matrix with `nnz` stored entries (a CSR file,
    /// `crate::ingest::csr_file`): the dataset records nnz, so jobs read the CSR layout.
    pub async fn attach_sparse_upload(
        &self,
        claim: &UploadClaim,
        upload: &Path,
        n: u64,
        nnz: u64,
    ) -> Result<Option<DatasetRecord>, StoreError> {
        self.attach_stored(claim, upload, (n, n, Some(nnz)), None).await
    }

    /// Attaches an upload of `shape` (n, d, nnz of a sparse matrix); `object` is where it was
    /// stored in the object store, recorded in the same transaction that makes it ready.
    async fn attach_stored(
        &self,
        claim: &UploadClaim,
        upload: &Path,
        shape: (u64, u64, Option<u64>),
        object: Option<&DataObject>,
    ) -> Result<Option<DatasetRecord>, StoreError> {
        let attached = self.attach_claimed(claim, upload, shape, object).await;
        if !matches!(attached, Ok(Some(_))) {
            remove_if_present(upload).await?;
        }
        attached
    }

    /// [`Store::attach_stored`] before its clean-up; `shape` is (n, d, nnz of a sparse matrix).
    async fn attach_claimed(
        &self,
        claim: &UploadClaim,
        upload: &Path,
        (n, d, nnz): (u64, u64, Option<u64>),
        object: Option<&DataObject>,
    ) -> Result<Option<DatasetRecord>, StoreError> {
        let (n, d) = (positive(n, "n")?, positive(d, "d")?);
        let nnz = nnz.map(|v| positive(v, "nnz")).transpose()?;
        let mut tx = self.write_tx().await?;
        let sql = format!(
            "UPDATE datasets SET status = 'ready', n = $1, d = $2, nnz = $7, upload_claim = NULL, \
                 upload_lease_until = NULL, updated_at = $3, data_object = $8, data_sha256 = $9 \
             WHERE id = $4 AND tenant_id = $5 AND status = 'uploading' AND upload_claim = $6 \
             RETURNING {DATASET_COLUMNS}"
        );
        let row = sqlx::query(&sql)
            .bind(n)
            .bind(d)
            .bind(ts(now()))
            .bind(id(claim.dataset))
            .bind(id(claim.tenant))
            .bind(id(claim.token))
            .bind(nnz)
            .bind(object.map(|o| o.key.clone()))
            .bind(object.map(|o| o.sha256.clone()))
            .fetch_optional(&mut *tx)
            .await?;
        let Some(ready) = row.as_ref().map(rows::dataset).transpose()? else {
            tx.rollback().await?;
            return Ok(None);
        };
        // Under the write lock and the row's new status, nothing else can attach or delete
        // until the commit; if the rename fails, the rollback (on drop) keeps the claim.
        let target = self.data_path(claim.dataset);
        tokio::fs::rename(upload, &target).await?;
        if let Err(e) = tx.commit().await {
            remove_if_present(&target).await?;
            return Err(e.into());
        }
        Ok(Some(ready))
    }

    /// Keeps `claim` alive while the upload runs (see [`HeldUpload`]). Call it on the tokio
    /// runtime, right after [`Store::claim_upload`].
    pub fn hold_upload(&self, claim: UploadClaim) -> HeldUpload {
        HeldUpload::new(self.clone(), claim)
    }
}

/// A claimed upload in progress. A background task renews the claim's lease every third of a
/// lease. Attaching or releasing ends it; dropped without either (an early return, an error,
/// or a request abandoned by its client), it gives the dataset back on the tokio runtime. A
/// crashed process gives nothing back; its lease runs out instead.
#[derive(Debug)]
pub struct HeldUpload {
    store: Store,
    claim: UploadClaim,
    renewer: tokio::task::JoinHandle<()>,
    /// Where the data was stored in the object store, if it was ([`HeldUpload::stored_in`]).
    object: Option<DataObject>,
    /// Attached or released: nothing left to give back.
    settled: bool,
}

impl HeldUpload {
    fn new(store: Store, claim: UploadClaim) -> HeldUpload {
        let renewer = tokio::spawn(renew_until_lost(store.clone(), claim));
        HeldUpload {
            store,
            claim,
            renewer,
            object: None,
            settled: false,
        }
    }

    /// The claim held.
    pub fn claim(&self) -> UploadClaim {
        self.claim
    }

    /// [`Store::attach_upload`] under this claim.
    pub async fn attach(self, upload: &Path, n: u64, d: u64) -> Result<Option<DatasetRecord>, StoreError> {
        self.attach_stored(upload, (n, d, None)).await
    }

    /// The object this upload's data was stored in (object storage), recorded when it attaches.
    pub fn stored_in(&mut self, object: DataObject) {
        self.object = Some(object);
    }

    /// [`HeldUpload::attach`] for a sparse matrix ([`Store::attach_sparse_upload`]).
    pub async fn attach_sparse(
        self,
        upload: &Path,
        n: u64,
        nnz: u64,
    ) -> Result<Option<DatasetRecord>, StoreError> {
        self.attach_stored(upload, (n, n, Some(nnz))).await
    }

    async fn attach_stored(
        mut self,
        upload: &Path,
        shape: (u64, u64, Option<u64>),
    ) -> Result<Option<DatasetRecord>, StoreError> {
        self.renewer.abort();
        let attached = self
            .store
            .attach_stored(&self.claim, upload, shape, self.object.as_ref())
            .await;
        self.settled = matches!(attached, Ok(Some(_)));
        attached
    }

    /// Gives the dataset back now (the upload failed), so that the answer to the client
    /// already finds it `empty`. Dropping does the same, but later.
    pub async fn release(mut self) {
        self.renewer.abort();
        self.settled = true;
        if let Err(e) = self.store.release_upload(&self.claim).await {
            lapses(&self.claim, &e);
        }
    }
}

fn lapses(claim: &UploadClaim, e: &StoreError) {
    tracing::warn!(dataset = %claim.dataset, error = %e, "could not release an upload's claim; it lapses with its lease");
}

impl Drop for HeldUpload {
    fn drop(&mut self) {
        self.renewer.abort();
        if self.settled {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (store, claim) = (self.store.clone(), self.claim);
        runtime.spawn(async move {
            if let Err(e) = store.release_upload(&claim).await {
                lapses(&claim, &e);
            }
        });
    }
}

/// Renews `claim` every third of a lease until it is lost (or the task is aborted). A failed
/// renewal is retried at the next tick; the lease covers two of them.
async fn renew_until_lost(store: Store, claim: UploadClaim) {
    let period = (store.lease() / 3).max(Duration::from_millis(100));
    let mut ticks = tokio::time::interval(period);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        match store.renew_upload(&claim).await {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                tracing::warn!(dataset = %claim.dataset, error = %e, "could not renew an upload's claim");
            }
        }
    }
}
