//! The job lifecycle: claiming, progress, completion, failure, cancellation and restart.

use std::collections::HashSet;

use super::{
    fixture, fixture_with, held, job, ledger_entries, ledger_net, private_spec, ready_dataset, replicas,
    stored_dataset, stored_job, submit_ok,
};
use crate::store::{
    CancelOutcome, INTERRUPTED_REASON, JobResult, JobStatus, LedgerEntryKind, Store, StoreError,
};

#[tokio::test(flavor = "multi_thread")]
async fn a_job_running_at_a_crash_fails_keeps_its_charge_and_is_never_rerun() {
    let (f, ds) = fixture_with(private_spec(1_000, 0)).await;
    let submitted = f.submit_ok(job(ds.id, 250, 0)).await;
    let claimed = f
        .store
        .claim_next_job()
        .await
        .expect("claim")
        .expect("a queued job");
    assert_eq!(claimed.id, submitted.id);
    assert_eq!(claimed.status, JobStatus::Running);
    drop(f.store); // no graceful close: as after a crash

    let store = Store::connect(&f.url, f.dir.path()).await.expect("reconnect");
    store.ping().await.expect("ready");
    assert_eq!(store.fail_interrupted_jobs().await.expect("fail interrupted"), 1);
    let after = stored_job(&store, f.tenant, submitted.id).await;
    assert_eq!(after.status, JobStatus::Failed);
    assert_eq!(after.error.as_deref(), Some(INTERRUPTED_REASON));
    assert!(after.finished_at.is_some());
    assert!(store.claim_next_job().await.expect("claim").is_none());
    let dataset = stored_dataset(&store, f.tenant, ds.id).await;
    assert_eq!(dataset.spent_rho_units.0, 250);
    assert_eq!(ledger_net(&store, f.tenant, ds.id).await, (250, 0));
    assert_eq!(store.fail_interrupted_jobs().await.expect("again"), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_refunds_only_while_queued() {
    let (f, ds) = fixture_with(private_spec(1_000, 10)).await;
    let first = f.submit_ok(job(ds.id, 300, 2)).await;
    let second = f.submit_ok(job(ds.id, 200, 3)).await;

    // Running: asked to stop, charge kept.
    let running = f.store.claim_next_job().await.expect("claim").expect("job");
    assert_eq!(running.id, first.id);
    let CancelOutcome::CancelRequested(requested) =
        f.store.cancel_job(f.tenant, first.id).await.expect("cancel")
    else {
        panic!("expected CancelRequested");
    };
    assert!(requested.cancel_requested);
    let stored = f.store.get_job_any(first.id).await.expect("get").expect("exists");
    assert!(stored.cancel_requested && stored.status == JobStatus::Running);

    // Queued: cancelled and refunded.
    let CancelOutcome::Refunded(refunded) = f.store.cancel_job(f.tenant, second.id).await.expect("cancel")
    else {
        panic!("expected Refunded");
    };
    assert_eq!(refunded.status, JobStatus::Cancelled);
    let dataset = stored_dataset(&f.store, f.tenant, ds.id).await;
    assert_eq!((dataset.spent_rho_units.0, dataset.spent_delta_units.0), (300, 2));
    let entries = ledger_entries(&f.store, f.tenant, ds.id).await;
    let refunds: Vec<_> = entries
        .iter()
        .filter(|e| e.entry == LedgerEntryKind::Refund)
        .collect();
    assert_eq!(refunds.len(), 1);
    assert_eq!(
        (
            refunds[0].job_id,
            refunds[0].rho_units.0,
            refunds[0].delta_units.0
        ),
        (Some(second.id), 200, 3)
    );

    // Terminal: unchanged, no second refund.
    f.store
        .mark_cancelled(held(first.id))
        .await
        .expect("runner honours the request");
    for id in [first.id, second.id] {
        let outcome = f.store.cancel_job(f.tenant, id).await.expect("cancel");
        assert!(matches!(outcome, CancelOutcome::AlreadyFinished(j) if j.status == JobStatus::Cancelled));
    }
    assert_eq!(ledger_net(&f.store, f.tenant, ds.id).await, (300, 2));
    let dataset = stored_dataset(&f.store, f.tenant, ds.id).await;
    assert_eq!(dataset.spent_rho_units.0, 300);
}

#[tokio::test(flavor = "multi_thread")]
async fn claims_are_fifo() {
    let (f, ds) = fixture_with(private_spec(1_000, 0)).await;
    let mut submitted = Vec::new();
    for _ in 0..6 {
        submitted.push(f.submit_ok(job(ds.id, 1, 0)).await.id);
    }
    let mut claimed = Vec::new();
    while let Some(next) = f.store.claim_next_job().await.expect("claim") {
        assert!(next.started_at.is_some());
        claimed.push(next.id);
    }
    assert_eq!(claimed, submitted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_claimers_each_get_a_job_once() {
    let (f, ds) = fixture_with(private_spec(1_000, 0)).await;
    let mut submitted = HashSet::new();
    for _ in 0..24 {
        submitted.insert(f.submit_ok(job(ds.id, 1, 0)).await.id);
    }
    let claimers: Vec<_> = (0..8)
        .map(|_| {
            let store = f.store.clone();
            tokio::spawn(async move {
                let mut mine = Vec::new();
                while let Some(next) = store.claim_next_job().await.expect("claim") {
                    mine.push(next.id);
                }
                mine
            })
        })
        .collect();
    let mut all = Vec::new();
    for claimer in claimers {
        all.extend(claimer.await.expect("task"));
    }
    assert_eq!(all.len(), 24, "every job claimed exactly once");
    assert_eq!(all.into_iter().collect::<HashSet<_>>(), submitted);
}

#[tokio::test(flavor = "multi_thread")]
async fn completion_stores_the_basis_and_failure_keeps_the_charge() {
    let (f, ds) = fixture_with(private_spec(1_000, 0)).await;
    let a = f.submit_ok(job(ds.id, 100, 0)).await;
    let b = f.submit_ok(job(ds.id, 100, 0)).await;
    let result = JobResult {
        d: 3,
        k: 2,
        basis: vec![1.0, 0.0, 0.0, 0.0, 0.6, 0.8],
        eigenvalues: Some(vec![2.5, 0.5]),
        released: Some(serde_json::json!({ "clip_norm": 1.5 })),
    };

    // Not running yet: runner transitions are refused.
    assert!(matches!(
        f.store.complete_job(held(a.id), &result).await,
        Err(StoreError::LeaseLost(_))
    ));
    assert!(f.job_result(a.id).await.is_none());

    f.store.claim_next_job().await.expect("claim").expect("a");
    f.store
        .update_progress(held(a.id), 3, 10)
        .await
        .expect("progress");
    let progressed = stored_job(&f.store, f.tenant, a.id).await;
    assert_eq!((progressed.progress_done, progressed.progress_total), (3, 10));
    let ragged = JobResult {
        basis: vec![1.0; 5],
        ..result.clone()
    };
    assert!(matches!(
        f.store.complete_job(held(a.id), &ragged).await,
        Err(StoreError::InvalidResult(_))
    ));
    let nan = JobResult {
        eigenvalues: Some(vec![f64::NAN, 1.0]),
        ..result.clone()
    };
    assert!(matches!(
        f.store.complete_job(held(a.id), &nan).await,
        Err(StoreError::InvalidResult(_))
    ));
    f.store.complete_job(held(a.id), &result).await.expect("complete");
    assert_eq!(f.job_result(a.id).await, Some(result.clone()));
    let done = stored_job(&f.store, f.tenant, a.id).await;
    assert_eq!((done.status, done.progress_done), (JobStatus::Succeeded, 10));
    assert!(matches!(
        f.store.complete_job(held(a.id), &result).await,
        Err(StoreError::LeaseLost(_))
    ));

    f.store.claim_next_job().await.expect("claim").expect("b");
    f.store
        .fail_job(held(b.id), "the iteration diverged")
        .await
        .expect("fail");
    let failed = stored_job(&f.store, f.tenant, b.id).await;
    assert_eq!(
        (failed.status, failed.error.as_deref()),
        (JobStatus::Failed, Some("the iteration diverged"))
    );
    assert!(f.job_result(b.id).await.is_none());
    assert_eq!(ledger_net(&f.store, f.tenant, ds.id).await, (200, 0));

    let counts = f.store.job_counts().await.expect("counts");
    assert_eq!(counts.len(), JobStatus::ALL.len());
    let count = |s: JobStatus| counts.iter().find(|(status, _)| *status == s).map(|(_, n)| *n);
    assert_eq!(
        [
            JobStatus::Queued,
            JobStatus::Running,
            JobStatus::Succeeded,
            JobStatus::Failed
        ]
        .map(count),
        [Some(0), Some(0), Some(1), Some(1)]
    );
}

/// Two replicas on one database: the claimer's lease runs out, the other replica's reaper
/// fails the job (charge kept), the old holder's writes are fenced off, nothing is re-queued.
#[tokio::test(flavor = "multi_thread")]
async fn an_expired_lease_is_reaped_by_another_replica_and_fences_the_old_holder() {
    let f = fixture().await;
    // Long leases, so that nothing runs out by itself; B's clock is moved past them below.
    let length = std::time::Duration::from_secs(60);
    let (a, b) = replicas(&f, length).await;
    let ds = ready_dataset(&a, f.tenant, private_spec(1_000, 0)).await;
    let submitted = submit_ok(&a, f.tenant, job(ds.id, 200, 0)).await;
    let claimed = a.claim_next_job().await.expect("claim").expect("job");
    assert_eq!((claimed.id, claimed.attempt), (submitted.id, 1));
    let lease = claimed.lease();
    assert!(b.claim_next_job().await.expect("claim").is_none(), "claimed once");

    // A renews; B's reaper leaves a live lease alone and B cannot write to A's job.
    assert!(!a.heartbeat(lease).await.expect("heartbeat"));
    assert_eq!(b.reap_expired_jobs().await.expect("reap"), 0);
    assert!(matches!(b.heartbeat(lease).await, Err(StoreError::LeaseLost(_))));
    assert!(matches!(
        b.update_progress(lease, 1, 2).await,
        Err(StoreError::LeaseLost(_))
    ));
    // B's start-up sweep only fails B's own jobs.
    assert_eq!(b.fail_interrupted_jobs().await.expect("sweep"), 0);

    // Cancellation requested through B reaches A's heartbeat.
    assert!(matches!(
        b.cancel_job(f.tenant, submitted.id).await.expect("cancel"),
        CancelOutcome::CancelRequested(_)
    ));
    assert!(a.heartbeat(lease).await.expect("heartbeat"));

    // A stops heartbeating (killed). Half a lease on, B's reaper still leaves the job alone;
    // once a whole lease has passed since A's last heartbeat, it reaps it.
    b.advance_lease_clock(length / 2);
    assert_eq!(b.reap_expired_jobs().await.expect("reap"), 0);
    b.advance_lease_clock(length / 2 + std::time::Duration::from_secs(1));
    assert_eq!(b.reap_expired_jobs().await.expect("reap"), 1);
    let failed = b
        .get_job(f.tenant, submitted.id)
        .await
        .expect("get")
        .expect("job");
    assert_eq!(failed.status, JobStatus::Failed);
    assert_eq!(failed.error.as_deref(), Some(crate::store::LEASE_EXPIRED_REASON));
    assert_eq!(ledger_net(&b, f.tenant, ds.id).await, (200, 0), "charge kept");

    // The old holder comes back: every write is fenced off, and nothing is re-queued.
    assert!(matches!(a.heartbeat(lease).await, Err(StoreError::LeaseLost(_))));
    let result = JobResult {
        d: 1,
        k: 1,
        basis: vec![1.0],
        eigenvalues: None,
        released: None,
    };
    assert!(matches!(
        a.complete_job(lease, &result).await,
        Err(StoreError::LeaseLost(_))
    ));
    assert!(matches!(
        a.mark_cancelled(lease).await,
        Err(StoreError::LeaseLost(_))
    ));
    assert!(a.claim_next_job().await.expect("claim").is_none());
    assert!(b.claim_next_job().await.expect("claim").is_none());
    assert_eq!(b.reap_expired_jobs().await.expect("reap"), 0);
}

/// docs/design/ledger.md, "Durable before released": on SQLite the service commits with
/// `synchronous = NORMAL`, which a power loss can undo; the charge of a job and its result go
/// through a second pool whose commits are synced, as do its failure and cancellation. With that
/// pool closed, none of them can be written, while the ordinary writes still can: so none goes
/// through the fast pool.
#[tokio::test(flavor = "multi_thread")]
async fn charges_and_results_are_committed_synced_to_the_disk() {
    let (f, ds) = fixture_with(private_spec(1_000, 0)).await;
    if f.store.backend != crate::store::Backend::Sqlite {
        return; // PostgreSQL syncs every commit (synchronous_commit = on); one pool.
    }
    let synchronous = |pool: sqlx::AnyPool| async move {
        let row = sqlx::query("PRAGMA synchronous")
            .fetch_one(&pool)
            .await
            .expect("pragma");
        sqlx::Row::try_get::<i64, _>(&row, 0).expect("an integer")
    };
    assert_eq!(
        synchronous(f.store.pool.clone()).await,
        1,
        "the fast pool is NORMAL"
    );
    assert_eq!(
        synchronous(f.store.synced.clone()).await,
        2,
        "the synced pool is FULL"
    );

    let a = f.submit_ok(job(ds.id, 100, 0)).await;
    f.store.claim_next_job().await.expect("claim").expect("a");
    f.store.synced.close().await;

    let result = JobResult {
        d: 2,
        k: 1,
        basis: vec![0.6, 0.8],
        eigenvalues: None,
        released: None,
    };
    assert!(matches!(
        f.store.complete_job(held(a.id), &result).await,
        Err(StoreError::Database(_))
    ));
    assert!(matches!(
        f.store.submit_job(f.tenant, job(ds.id, 100, 0)).await,
        Err(StoreError::Database(_))
    ));
    assert!(matches!(
        f.store.fail_job(held(a.id), "PrivRange returned ⊥").await,
        Err(StoreError::Database(_))
    ));
    assert!(matches!(
        f.store.mark_cancelled(held(a.id)).await,
        Err(StoreError::Database(_))
    ));
    f.store
        .update_progress(held(a.id), 1, 2)
        .await
        .expect("the fast pool still writes");
    let running = stored_job(&f.store, f.tenant, a.id).await;
    assert_eq!((running.status, running.progress_done), (JobStatus::Running, 1));
    assert_eq!(ledger_net(&f.store, f.tenant, ds.id).await, (100, 0));
}

/// docs/design/ledger.md, "Durable before released", on PostgreSQL: the service's connections
/// set `synchronous_commit = on` themselves, whatever the server's, role's or database's default.
/// The database's default is turned `off` here, so only the service's own setting can make it on.
#[tokio::test(flavor = "multi_thread")]
async fn postgres_commits_are_synced_whatever_the_database_default() {
    let f = fixture().await;
    if f.store.backend != crate::store::Backend::Postgres {
        return; // SQLite: charges_and_results_are_committed_synced_to_the_disk.
    }
    let database: String = sqlx::query_scalar("SELECT current_database()::text")
        .fetch_one(&f.store.pool)
        .await
        .expect("database name");
    sqlx::raw_sql(&format!(
        "ALTER DATABASE \"{database}\" SET synchronous_commit = off"
    ))
    .execute(&f.store.pool)
    .await
    .expect("database default");
    let show = |pool: sqlx::AnyPool| async move {
        let mut held = Vec::new();
        let mut settings = Vec::new();
        for _ in 0..2 {
            let mut conn = pool.acquire().await.expect("a connection");
            let setting: String = sqlx::query_scalar("SHOW synchronous_commit")
                .fetch_one(&mut *conn)
                .await
                .expect("show");
            settings.push(setting);
            held.push(conn);
        }
        settings
    };
    let plain = sqlx::any::AnyPoolOptions::new()
        .max_connections(2)
        .connect(&f.url)
        .await
        .expect("a plain pool");
    assert_eq!(show(plain).await, ["off", "off"], "the database's default");

    let store = Store::connect(&f.url, f.dir.path()).await.expect("reconnect");
    assert_eq!(show(store.pool.clone()).await, ["on", "on"], "the service's pool");
    assert_eq!(show(store.synced.clone()).await, ["on", "on"], "the synced pool");
}
