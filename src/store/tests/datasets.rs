//! Dataset lifecycle: validation, attaching data, deletion.

use super::{
    assert_ready, empty_dataset, fixture, fixture_with, held, job, ledger_entries, ledger_net, private_spec,
    public_spec, stored_job,
};
use crate::dataset::Relation;
use crate::store::{
    CancelOutcome, DatasetStatus, JobStatus, LedgerEntryKind, NewDataset, StoreError, SubmitOutcome,
};

#[tokio::test(flavor = "multi_thread")]
async fn invalid_datasets_are_refused() {
    let f = fixture().await;
    let cases = [
        NewDataset {
            relation: Relation::Entry,
            ..private_spec(10, 0)
        },
        NewDataset {
            row_norm_bound: Some(f64::NAN),
            ..private_spec(10, 0)
        },
        NewDataset {
            row_norm_bound: Some(0.0),
            ..private_spec(10, 0)
        },
        NewDataset {
            entry_bound: Some(f64::INFINITY),
            ..private_spec(10, 0)
        },
        NewDataset {
            budget_rho_units: None,
            ..private_spec(10, 0)
        },
        NewDataset {
            budget_delta_units: None,
            ..private_spec(10, 0)
        },
        private_spec(0, 0),
        private_spec(10, -1),
        private_spec(i64::MAX, 0),
        NewDataset {
            budget_rho_units: Some(crate::privacy::units::RhoUnits(10)),
            ..public_spec()
        },
    ];
    for case in cases {
        let refused = f.store.create_dataset(f.tenant, case.clone()).await;
        assert!(
            matches!(refused, Err(StoreError::InvalidDataset(_))),
            "{case:?} must be refused"
        );
    }
    assert!(f.store.list_datasets(f.tenant).await.expect("list").is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn created_datasets_read_back_equal() {
    let f = fixture().await;
    let created = f
        .store
        .create_dataset(f.tenant, private_spec(1_000, 7))
        .await
        .expect("create");
    assert_eq!(created.status, DatasetStatus::Empty);
    let read = f.store.get_dataset(f.tenant, created.id).await.expect("get");
    assert_eq!(read.as_ref(), Some(&created));
    assert!(matches!(
        f.store.attach_data(f.tenant, created.id, 0, 3).await,
        Err(StoreError::InvalidDataset(_))
    ));
    let ready = f
        .store
        .attach_data(f.tenant, created.id, 40, 3)
        .await
        .expect("attach")
        .expect("attachable");
    assert_ready(&ready, 40, 3);
    assert!(
        f.store
            .attach_data(f.tenant, created.id, 41, 3)
            .await
            .expect("attach")
            .is_none(),
        "only once"
    );
    let listed = f.store.list_datasets(f.tenant).await.expect("list");
    assert_eq!(listed, vec![ready]);
}

#[tokio::test(flavor = "multi_thread")]
async fn attach_upload_moves_the_file_once() {
    let f = fixture().await;
    let ds = empty_dataset(&f.store, f.tenant).await;
    let first = f.store.upload_temp_path(ds.id);
    let second = f.store.upload_temp_path(ds.id);
    assert_ne!(first, second);
    std::fs::write(&first, [1u8; 16]).expect("write");
    std::fs::write(&second, [2u8; 16]).expect("write");

    let claim = super::uploads::claimed(&f.store, f.tenant, ds.id).await;
    let ready = f.attached(&claim, &first, 2, 1).await;
    assert_ready(&ready, 2, 1);
    assert!(!first.exists());
    assert_eq!(
        std::fs::read(f.store.data_path(ds.id)).expect("data"),
        vec![1u8; 16]
    );

    let again = f
        .store
        .attach_upload(&claim, &second, 2, 1)
        .await
        .expect("attach");
    assert!(again.is_none());
    assert!(!second.exists(), "a refused upload is removed");
    assert_eq!(
        std::fs::read(f.store.data_path(ds.id)).expect("data"),
        vec![1u8; 16],
        "data untouched"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn deletion_keeps_the_ledger_refunds_queued_jobs_and_removes_the_data() {
    let (f, ds) = fixture_with(private_spec(1_000, 0)).await;
    std::fs::write(f.store.data_path(ds.id), [0u8; 8]).expect("data file");
    let running = f.submit_ok(job(ds.id, 300, 0)).await;
    let queued = f.submit_ok(job(ds.id, 200, 0)).await;
    f.store.claim_next_job().await.expect("claim").expect("running");

    let deleted = f.delete(ds.id).await;
    assert_eq!(deleted.status, DatasetStatus::Deleted);
    assert!(deleted.deleted_at.is_some());
    assert_eq!(
        deleted.spent_rho_units.0, 300,
        "the queued job is refunded, the running one is not"
    );
    assert!(!f.store.data_path(ds.id).exists());

    let queued_after = stored_job(&f.store, f.tenant, queued.id).await;
    assert_eq!(queued_after.status, JobStatus::Cancelled);
    let running_after = stored_job(&f.store, f.tenant, running.id).await;
    assert!(running_after.cancel_requested && running_after.status == JobStatus::Running);
    assert!(f.store.claim_next_job().await.expect("claim").is_none());

    let entries = ledger_entries(&f.store, f.tenant, ds.id).await;
    let kinds: Vec<_> = entries.iter().map(|e| e.entry).collect();
    assert_eq!(
        kinds,
        [
            LedgerEntryKind::Charge,
            LedgerEntryKind::Charge,
            LedgerEntryKind::Refund
        ]
    );
    assert_eq!(ledger_net(&f.store, f.tenant, ds.id).await, (300, 0));

    // Idempotent; the dataset stays readable as deleted; no new work.
    let again = f.delete(ds.id).await;
    assert_eq!(again, deleted);
    let outcome = f.submit(job(ds.id, 1, 0)).await;
    assert_eq!(outcome, SubmitOutcome::DatasetNotReady(DatasetStatus::Deleted));
    assert!(
        f.store
            .attach_data(f.tenant, ds.id, 1, 1)
            .await
            .expect("attach")
            .is_none()
    );
    assert!(matches!(
        f.store.cancel_job(f.tenant, queued.id).await.expect("cancel"),
        CancelOutcome::AlreadyFinished(_)
    ));
    // The running job ends as the runner sees the request; its charge stays.
    f.store.mark_cancelled(held(running.id)).await.expect("cancelled");
    assert_eq!(ledger_net(&f.store, f.tenant, ds.id).await, (300, 0));

    let fresh = empty_dataset(&f.store, f.tenant).await;
    assert_ne!(fresh.id, ds.id);
    assert_eq!(fresh.spent_rho_units.0, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn interrupted_uploads_are_removed_and_data_files_kept() {
    let f = fixture().await;
    let ds = empty_dataset(&f.store, f.tenant).await;
    let attached = f.store.upload_temp_path(ds.id);
    std::fs::write(&attached, [1u8; 16]).expect("write");
    let claim = super::uploads::claimed(&f.store, f.tenant, ds.id).await;
    f.attached(&claim, &attached, 2, 1).await;
    let stale = [f.store.upload_temp_path(ds.id), f.store.upload_temp_path(ds.id)];
    for path in &stale {
        std::fs::write(path, [2u8; 8]).expect("write");
    }

    assert_eq!(f.store.remove_interrupted_uploads().await.expect("clean"), 2);
    assert!(stale.iter().all(|p| !p.exists()));
    assert_eq!(
        std::fs::read(f.store.data_path(ds.id)).expect("data kept"),
        vec![1u8; 16]
    );
    assert_eq!(f.store.remove_interrupted_uploads().await.expect("clean"), 0);
}
