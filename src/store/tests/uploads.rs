//! Upload claims: one upload at a time holds a dataset, across replicas; a lapsed claim can be
//! taken over; attaching is fenced by the claim's token; failure and deletion end a claim.

use std::path::PathBuf;
use std::time::Duration;

use uuid::Uuid;

use super::{Fixture, assert_ready, empty_dataset, fixture, replica, replicas};
use crate::store::{DatasetRecord, DatasetStatus, Store, UploadClaim, UploadClaimOutcome};

/// Claims `dataset`, expecting the claim to succeed.
pub(super) async fn claimed(store: &Store, tenant: Uuid, dataset: Uuid) -> UploadClaim {
    match store.claim_upload(tenant, dataset).await.expect("claim") {
        UploadClaimOutcome::Claimed(claim) => claim,
        other => panic!("expected a claim, got {other:?}"),
    }
}

/// Two replicas, A and B, with leases of `lease` (see [`replicas`]), and an empty dataset,
/// created through A, for their uploads to contend for.
async fn contended(f: &Fixture, lease: Duration) -> (Store, Store, DatasetRecord) {
    let (a, b) = replicas(f, lease).await;
    let ds = empty_dataset(&a, f.tenant).await;
    (a, b, ds)
}

/// A finished upload's temporary file, as the handler leaves it.
fn written(store: &Store, dataset: Uuid, byte: u8) -> PathBuf {
    let path = store.upload_temp_path(dataset);
    // A renamed replica's directory is made at its start (`remove_interrupted_uploads`).
    std::fs::create_dir_all(path.parent().expect("upload directory")).expect("mkdir");
    std::fs::write(&path, [byte; 16]).expect("write");
    path
}

/// Writes an upload's file and expects `claim` to be refused attaching it: the file is removed.
async fn attach_is_refused(store: &Store, claim: &UploadClaim, dataset: Uuid) {
    let path = written(store, dataset, 1);
    assert_eq!(
        store.attach_upload(claim, &path, 2, 1).await.expect("attach"),
        None
    );
    assert!(!path.exists(), "a refused upload's file is removed");
}

async fn status(store: &Store, tenant: Uuid, dataset: Uuid) -> DatasetStatus {
    store
        .get_dataset(tenant, dataset)
        .await
        .expect("get")
        .expect("dataset")
        .status
}

/// The dataset's upload lease end as stored (fixed-width RFC 3339 text, so it orders as time).
async fn lease_until(store: &Store, dataset: Uuid) -> String {
    sqlx::query_scalar::<_, String>("SELECT upload_lease_until FROM datasets WHERE id = $1")
        .bind(crate::store::codec::id(dataset))
        .fetch_one(&store.pool)
        .await
        .expect("lease")
}

/// Waits (up to a minute) for the holder's next renewal to change the stored lease end.
async fn changed_lease_until(store: &Store, dataset: Uuid, before: &str) -> String {
    for _ in 0..3000 {
        let now = lease_until(store, dataset).await;
        if now != before {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the upload's lease was never renewed");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_is_exclusive_across_replicas() {
    let f = fixture().await;
    let b = replica(&f, "replica-b", Duration::from_secs(30)).await;
    let ds = empty_dataset(&f.store, f.tenant).await;

    let claim = claimed(&f.store, f.tenant, ds.id).await;
    assert_eq!(status(&f.store, f.tenant, ds.id).await, DatasetStatus::Uploading);
    for store in [&f.store, &b] {
        assert_eq!(
            store.claim_upload(f.tenant, ds.id).await.expect("claim"),
            UploadClaimOutcome::Refused(DatasetStatus::Uploading)
        );
    }
    // Nor can data be attached past the claim.
    assert_eq!(
        f.store.attach_data(f.tenant, ds.id, 2, 1).await.expect("attach"),
        None
    );
    let other = f.store.create_tenant("mallory").await.expect("tenant").0;
    assert_eq!(
        b.claim_upload(other.id, ds.id).await.expect("claim"),
        UploadClaimOutcome::NotFound
    );

    assert!(f.store.renew_upload(&claim).await.expect("renew"));
    let path = written(&f.store, ds.id, 1);
    let ready = f.attached(&claim, &path, 2, 1).await;
    assert_ready(&ready, 2, 1);
    assert_eq!(
        b.claim_upload(f.tenant, ds.id).await.expect("claim"),
        UploadClaimOutcome::Refused(DatasetStatus::Ready)
    );
    assert!(
        !f.store.renew_upload(&claim).await.expect("renew"),
        "the claim ended"
    );
}

/// A replica that died mid-upload leaves a lease that runs out; another upload takes the
/// dataset over, and the first one, if it comes back, can neither renew nor attach.
#[tokio::test(flavor = "multi_thread")]
async fn a_lapsed_claim_is_taken_over_and_fences_its_old_holder() {
    let f = fixture().await;
    // Long leases, so that nothing runs out by itself; B's clock is moved past them below.
    let lease = Duration::from_secs(60);
    let (a, b, ds) = contended(&f, lease).await;

    let first = claimed(&a, f.tenant, ds.id).await;
    assert_eq!(
        b.claim_upload(f.tenant, ds.id).await.expect("claim"),
        UploadClaimOutcome::Refused(DatasetStatus::Uploading),
        "a live lease holds"
    );
    b.advance_lease_clock(lease / 2);
    assert_eq!(
        b.claim_upload(f.tenant, ds.id).await.expect("claim"),
        UploadClaimOutcome::Refused(DatasetStatus::Uploading),
        "it holds until its end"
    );
    b.advance_lease_clock(lease / 2 + Duration::from_secs(1));
    let second = claimed(&b, f.tenant, ds.id).await;
    assert_ne!(first.token, second.token);

    assert!(!a.renew_upload(&first).await.expect("renew"));
    assert!(
        !a.release_upload(&first).await.expect("release"),
        "not its claim any more"
    );
    attach_is_refused(&a, &first, ds.id).await;
    assert!(!a.data_path(ds.id).exists());
    assert_eq!(status(&a, f.tenant, ds.id).await, DatasetStatus::Uploading);

    let fresh = written(&b, ds.id, 2);
    b.attach_upload(&second, &fresh, 4, 2)
        .await
        .expect("attach")
        .expect("attached");
    assert_eq!(std::fs::read(b.data_path(ds.id)).expect("data"), vec![2u8; 16]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stale_token_cannot_attach() {
    let f = fixture().await;
    let ds = empty_dataset(&f.store, f.tenant).await;
    let claim = claimed(&f.store, f.tenant, ds.id).await;
    let forged = UploadClaim {
        token: Uuid::new_v4(),
        ..claim
    };
    attach_is_refused(&f.store, &forged, ds.id).await;
    assert!(!f.store.renew_upload(&forged).await.expect("renew"));
    assert!(!f.store.release_upload(&forged).await.expect("release"));
    assert_eq!(status(&f.store, f.tenant, ds.id).await, DatasetStatus::Uploading);

    let path = written(&f.store, ds.id, 2);
    assert!(
        f.store
            .attach_upload(&claim, &path, 2, 1)
            .await
            .expect("attach")
            .is_some(),
        "the holder still attaches"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn release_returns_the_dataset_to_empty() {
    let f = fixture().await;
    let ds = empty_dataset(&f.store, f.tenant).await;
    let claim = claimed(&f.store, f.tenant, ds.id).await;
    assert!(f.store.release_upload(&claim).await.expect("release"));
    assert_eq!(status(&f.store, f.tenant, ds.id).await, DatasetStatus::Empty);
    assert!(!f.store.release_upload(&claim).await.expect("release"), "once");
    assert!(!f.store.renew_upload(&claim).await.expect("renew"));
    attach_is_refused(&f.store, &claim, ds.id).await;

    let again = claimed(&f.store, f.tenant, ds.id).await;
    assert_ne!(again.token, claim.token);
}

#[tokio::test(flavor = "multi_thread")]
async fn deleting_during_an_upload_wins() {
    let f = fixture().await;
    let ds = empty_dataset(&f.store, f.tenant).await;
    let claim = claimed(&f.store, f.tenant, ds.id).await;
    let deleted = f
        .store
        .delete_dataset(f.tenant, ds.id)
        .await
        .expect("delete")
        .expect("dataset");
    assert_eq!(deleted.status, DatasetStatus::Deleted);

    assert!(!f.store.renew_upload(&claim).await.expect("renew"));
    attach_is_refused(&f.store, &claim, ds.id).await;
    assert!(!f.store.data_path(ds.id).exists());
    assert!(!f.store.release_upload(&claim).await.expect("release"));
    assert_eq!(status(&f.store, f.tenant, ds.id).await, DatasetStatus::Deleted);
    assert_eq!(
        f.store.claim_upload(f.tenant, ds.id).await.expect("claim"),
        UploadClaimOutcome::Refused(DatasetStatus::Deleted)
    );
}

/// A held upload renews its lease past the lease's length, and gives the dataset back when
/// dropped without attaching (an abandoned request).
#[tokio::test(flavor = "multi_thread")]
async fn a_held_upload_stays_claimed_and_is_released_on_drop() {
    let f = fixture().await;
    // A renews every second. B's clock is moved two leases on, so that the first claim has
    // lapsed for B; A's ten, so that each of A's renewals holds for B by a wide margin.
    let lease = Duration::from_secs(3);
    let (a, b, ds) = contended(&f, lease).await;
    let held = a.hold_upload(claimed(&a, f.tenant, ds.id).await);
    let claimed_until = lease_until(&a, ds.id).await;
    a.advance_lease_clock(10 * lease);
    b.advance_lease_clock(2 * lease);

    // Two renewals, seen in the database.
    let mut until = claimed_until.clone();
    for _ in 0..2 {
        until = changed_lease_until(&a, ds.id, &until).await;
    }
    assert!(until > claimed_until, "{until} after {claimed_until}");
    assert_eq!(
        b.claim_upload(f.tenant, ds.id).await.expect("claim"),
        UploadClaimOutcome::Refused(DatasetStatus::Uploading),
        "renewed past two leases"
    );

    drop(held);
    let mut waited = Duration::ZERO;
    while status(&a, f.tenant, ds.id).await != DatasetStatus::Empty {
        assert!(waited < Duration::from_secs(60), "released after drop");
        tokio::time::sleep(Duration::from_millis(20)).await;
        waited += Duration::from_millis(20);
    }
    claimed(&b, f.tenant, ds.id).await;
}
