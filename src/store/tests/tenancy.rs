//! API keys, tenant isolation and idempotent submission.

use super::{
    fixture, fixture_with, job, ledger_net, private_spec, ready_dataset, spawn_submissions, stored_dataset,
    submit_ok,
};
use crate::store::{CancelOutcome, Idempotency, NewJob, SubmitOutcome};

#[tokio::test(flavor = "multi_thread")]
async fn api_keys_round_trip_and_are_stored_hashed() {
    let f = fixture().await;
    let (bob, key) = f.store.create_tenant("bob").await.expect("tenant");
    assert_eq!(
        f.store.tenant_by_api_key(&key).await.expect("lookup"),
        Some(bob.clone())
    );
    assert_eq!(f.store.get_tenant(bob.id).await.expect("get"), Some(bob.clone()));
    let mut wrong = key.clone();
    wrong.pop();
    wrong.push(if key.ends_with('0') { '1' } else { '0' });
    assert_eq!(f.store.tenant_by_api_key(&wrong).await.expect("lookup"), None);
    assert_eq!(f.store.tenant_by_api_key("").await.expect("lookup"), None);
    let stored: Vec<String> = sqlx::query_scalar("SELECT key_hash FROM tenants")
        .fetch_all(&f.store.pool)
        .await
        .expect("hashes");
    assert!(
        stored
            .iter()
            .all(|h| h.len() == 64 && *h != key && !key.contains(h.as_str()))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn another_tenant_sees_nothing() {
    let f = fixture().await;
    let (mallory, _) = f.store.create_tenant("mallory").await.expect("tenant");
    let ds = f.ready(private_spec(1_000, 0)).await;
    let queued = f.submit_ok(job(ds.id, 100, 0)).await;
    let m = mallory.id;

    assert_eq!(f.store.get_dataset(m, ds.id).await.expect("get"), None);
    assert!(f.store.list_datasets(m).await.expect("list").is_empty());
    assert_eq!(f.store.ledger(m, ds.id).await.expect("ledger"), None);
    assert_eq!(f.store.attach_data(m, ds.id, 1, 1).await.expect("attach"), None);
    assert_eq!(f.store.delete_dataset(m, ds.id).await.expect("delete"), None);
    assert_eq!(
        f.store.submit_job(m, job(ds.id, 1, 0)).await.expect("submit"),
        SubmitOutcome::DatasetNotFound
    );
    assert_eq!(f.store.get_job(m, queued.id).await.expect("get"), None);
    assert!(f.store.list_jobs(m, None).await.expect("list").is_empty());
    assert_eq!(
        f.store.cancel_job(m, queued.id).await.expect("cancel"),
        CancelOutcome::NotFound
    );
    assert_eq!(f.store.job_result(m, queued.id).await.expect("result"), None);

    // Nothing of the owner's changed.
    let owner = stored_dataset(&f.store, f.tenant, ds.id).await;
    assert_eq!(
        (owner.spent_rho_units.0, owner.status),
        (100, crate::store::DatasetStatus::Ready)
    );
    assert_eq!(
        f.store.list_jobs(f.tenant, Some(ds.id)).await.expect("list"),
        vec![queued]
    );
}

fn keyed(dataset: uuid::Uuid, key: &str, hash: &str) -> NewJob {
    NewJob {
        idempotency: Some(Idempotency {
            key: key.to_owned(),
            request_hash: hash.to_owned(),
        }),
        ..job(dataset, 100, 0)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn idempotent_retries_replay_without_a_second_charge() {
    let (f, ds) = fixture_with(private_spec(1_000, 0)).await;
    let first = f.submit_ok(keyed(ds.id, "retry-1", "h1")).await;
    let replay = f.submit(keyed(ds.id, "retry-1", "h1")).await;
    assert_eq!(replay, SubmitOutcome::Replayed(first.clone()));
    let mismatch = f.submit(keyed(ds.id, "retry-1", "h2")).await;
    assert_eq!(mismatch, SubmitOutcome::IdempotencyMismatch);
    assert_eq!(ledger_net(&f.store, f.tenant, ds.id).await, (100, 0));

    // A replay is answered even once the job moved on, and keys are per tenant.
    f.store.claim_next_job().await.expect("claim").expect("job");
    let replay = f.submit(keyed(ds.id, "retry-1", "h1")).await;
    assert!(matches!(replay, SubmitOutcome::Replayed(j) if j.id == first.id));
    let (bob, _) = f.store.create_tenant("bob").await.expect("tenant");
    let bobs = ready_dataset(&f.store, bob.id, private_spec(1_000, 0)).await;
    let other = submit_ok(&f.store, bob.id, keyed(bobs.id, "retry-1", "h1")).await;
    assert_ne!(other.id, first.id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_retries_with_one_key_charge_once() {
    let (f, ds) = fixture_with(private_spec(1_000, 0)).await;
    let mut ids = std::collections::HashSet::new();
    let mut created = 0;
    for handle in spawn_submissions(&f, 12, || keyed(ds.id, "k", "h")) {
        match handle.await.expect("task").expect("submit") {
            SubmitOutcome::Created(j) => {
                created += 1;
                ids.insert(j.id);
            }
            SubmitOutcome::Replayed(j) => {
                ids.insert(j.id);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((created, ids.len()), (1, 1));
    assert_eq!(ledger_net(&f.store, f.tenant, ds.id).await, (100, 0));
}
