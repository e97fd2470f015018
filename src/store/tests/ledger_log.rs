//! The transparency log in the store: one leaf per ledger row, appended in the row's
//! transaction, in order under concurrency; and a log that no longer matches its ledger (a
//! past charge's ρ edited in the database, or a leaf edited) is refused, never served.

use super::{
    fixture_with, job, ledger_entries, private_spec, public_spec, spawn_submissions, stored_dataset,
};
use crate::store::ledger_log::{BACKFILLED, PUBLIC_BUDGET, VerifiedLog};
use crate::store::{Backend, CancelOutcome, StoreError, SubmitOutcome};
use crate::transparency::{EventKind, merkle};

/// The dataset's log, which must exist and match its ledger.
async fn log_of(f: &super::Fixture, dataset: uuid::Uuid) -> VerifiedLog {
    f.store
        .dataset_log(f.tenant, dataset)
        .await
        .expect("log matches")
        .expect("dataset exists")
}

#[tokio::test]
async fn every_charge_and_refund_appends_one_leaf_in_order() {
    let (f, ds) = fixture_with(private_spec(1_000, 50)).await;
    let first = f.submit_ok(job(ds.id, 100, 5)).await;
    let second = f.submit_ok(job(ds.id, 200, 0)).await;
    match f.store.cancel_job(f.tenant, second.id).await.expect("cancel") {
        CancelOutcome::Refunded(_) => {}
        other => panic!("expected a refund, got {other:?}"),
    }
    assert!(matches!(
        f.submit(job(ds.id, 10_000, 0)).await,
        SubmitOutcome::OverBudget { .. }
    ));
    let log = log_of(&f, ds.id).await;
    let kinds: Vec<EventKind> = log.events.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            EventKind::BudgetSet,
            EventKind::Charge,
            EventKind::Charge,
            EventKind::Refund
        ]
    );
    let opening = log.events[0].amount.as_ref().expect("the budget");
    assert_eq!((opening.rho_units.0, opening.delta_units.0), (1_000, 50));
    assert_eq!(log.charge_of(first.id), Some(1));
    assert_eq!(log.charge_of(second.id), Some(2));
    let last = log.events[3]
        .spent_after
        .as_ref()
        .expect("a private dataset states its spending");
    assert_eq!((last.rho_units.0, last.delta_units.0), (100, 5));
    assert_eq!(log.events[1].job.as_deref(), Some(first.id.to_string().as_str()));
    assert_eq!(log.events[1].config, Some(first.config.clone()));
    for (i, leaf) in log.leaves.iter().enumerate() {
        assert_eq!(merkle::leaf_hash(leaf), log.hashes[i]);
    }
    let ledger = ledger_entries(&f.store, f.tenant, ds.id).await;
    assert_eq!(ledger.len() + 1, log.leaves.len());
}

#[tokio::test]
async fn a_public_dataset_logs_its_charges_without_spending() {
    let (f, ds) = fixture_with(public_spec()).await;
    f.submit_ok(job(ds.id, 100, 0)).await;
    let log = log_of(&f, ds.id).await;
    assert_eq!(log.events.len(), 2);
    assert_eq!(log.events[0].reason.as_deref(), Some(PUBLIC_BUDGET));
    assert!(log.events[1].spent_after.is_none());
    assert_eq!(
        log.events[1].bounds.as_ref().and_then(|b| b.n),
        Some(100),
        "n is public here"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_charges_get_consecutive_leaves() {
    let (f, ds) = fixture_with(private_spec(1_000, 0)).await;
    let mut created = 0;
    for handle in spawn_submissions(&f, 20, || job(ds.id, 100, 0)) {
        if let SubmitOutcome::Created(_) = handle.await.expect("task").expect("submit") {
            created += 1;
        }
    }
    assert_eq!(created, 10);
    let log = log_of(&f, ds.id).await;
    assert_eq!(log.leaves.len(), 11);
    let after = stored_dataset(&f.store, f.tenant, ds.id).await;
    assert_eq!(after.spent_rho_units.0, 1_000);
}

/// Runs `sql` on the fixture's database with the append-only trigger of `table` that refuses
/// updates out of the way, as someone editing the database file directly would.
async fn tamper(f: &super::Fixture, table: &str, sql: &str) {
    tamper_past(f, table, "no_update", sql).await
}

/// [`tamper`] past the trigger `{table}_{trigger}`.
async fn tamper_past(f: &super::Fixture, table: &str, trigger: &str, sql: &str) {
    let name = format!("{table}_{trigger}");
    let (off, on): (Vec<String>, Vec<String>) = match f.store.backend() {
        Backend::Sqlite => (vec![format!("DROP TRIGGER {name}")], vec![]),
        Backend::Postgres => (
            vec![format!("ALTER TABLE {table} DISABLE TRIGGER {name}")],
            vec![format!("ALTER TABLE {table} ENABLE TRIGGER {name}")],
        ),
    };
    for statement in off
        .iter()
        .map(String::as_str)
        .chain([sql])
        .chain(on.iter().map(String::as_str))
    {
        sqlx::query(statement)
            .execute(&f.store.pool)
            .await
            .expect(statement);
    }
}

#[tokio::test]
async fn an_edited_past_charge_makes_the_log_refused() {
    let (f, ds) = fixture_with(private_spec(1_000, 0)).await;
    f.submit_ok(job(ds.id, 100, 0)).await;
    f.submit_ok(job(ds.id, 100, 0)).await;
    log_of(&f, ds.id).await;
    // The first charge lowered, and the dataset's total with it, so the ledger stays
    // self-consistent: only the log can tell.
    tamper(
        &f,
        "ledger",
        "UPDATE ledger SET rho_units = 1 WHERE id = (SELECT MIN(id) FROM ledger)",
    )
    .await;
    sqlx::query("UPDATE datasets SET spent_rho_units = 101")
        .execute(&f.store.pool)
        .await
        .expect("update the total");
    match f.store.dataset_log(f.tenant, ds.id).await {
        Err(StoreError::LogTampered { log, reason }) => {
            assert_eq!(log, format!("datasets/{}", ds.id));
            assert!(reason.contains("differs from leaf 1"), "{reason}");
        }
        other => panic!("expected LogTampered, got {other:?}"),
    }
}

#[tokio::test]
async fn an_edited_leaf_or_total_makes_the_log_refused() {
    let (f, ds) = fixture_with(private_spec(1_000, 0)).await;
    f.submit_ok(job(ds.id, 100, 0)).await;
    sqlx::query("UPDATE datasets SET spent_rho_units = 50")
        .execute(&f.store.pool)
        .await
        .expect("update the total");
    let refused = f.store.dataset_log(f.tenant, ds.id).await;
    assert!(
        matches!(refused, Err(StoreError::LogTampered { .. })),
        "{refused:?}"
    );
    sqlx::query("UPDATE datasets SET spent_rho_units = 100")
        .execute(&f.store.pool)
        .await
        .expect("restore the total");
    log_of(&f, ds.id).await;
    tamper(
        &f,
        "ledger_leaves",
        "UPDATE ledger_leaves SET leaf = REPLACE(leaf, '\"rho_units\":\"100\"', '\"rho_units\":\"10\"')",
    )
    .await;
    match f.store.dataset_log(f.tenant, ds.id).await {
        Err(StoreError::LogTampered { reason, .. }) => assert!(reason.contains("stored hash"), "{reason}"),
        other => panic!("expected LogTampered, got {other:?}"),
    }
}

#[tokio::test]
async fn a_deletion_closes_the_log_after_the_refunds_it_causes() {
    let (f, ds) = fixture_with(private_spec(1_000, 0)).await;
    f.submit_ok(job(ds.id, 100, 0)).await;
    f.store
        .delete_dataset(f.tenant, ds.id)
        .await
        .expect("delete")
        .expect("found");
    let log = log_of(&f, ds.id).await;
    let kinds: Vec<EventKind> = log.events.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            EventKind::BudgetSet,
            EventKind::Charge,
            EventKind::Refund,
            EventKind::Deletion
        ],
        "the queued job's refund, then the deletion"
    );
    let after = log.events[3].spent_after.as_ref().expect("spending");
    assert_eq!(after.rho_units.0, 0);
    // Deleting again writes nothing more.
    f.store
        .delete_dataset(f.tenant, ds.id)
        .await
        .expect("delete again");
    assert_eq!(log_of(&f, ds.id).await.leaves.len(), 4);
}

#[tokio::test]
async fn a_dataset_older_than_the_log_gets_its_history_written_once() {
    let (f, ds) = fixture_with(private_spec(1_000, 50)).await;
    let first = f.submit_ok(job(ds.id, 100, 5)).await;
    let second = f.submit_ok(job(ds.id, 200, 0)).await;
    f.store.cancel_job(f.tenant, second.id).await.expect("cancel");
    let live = log_of(&f, ds.id).await;
    // As before migration 0011: the ledger rows without any leaf.
    tamper_past(&f, "ledger_leaves", "no_delete", "DELETE FROM ledger_leaves").await;
    assert!(matches!(
        f.store.dataset_log(f.tenant, ds.id).await,
        Err(StoreError::LogTampered { .. })
    ));
    assert_eq!(f.store.open_missing_logs().await.expect("backfill"), 1);
    assert_eq!(f.store.open_missing_logs().await.expect("again"), 0, "once only");
    let log = log_of(&f, ds.id).await;
    assert_eq!(log.events[0].reason.as_deref(), Some(BACKFILLED));
    assert_eq!(log.charge_of(first.id), Some(1));
    // The rows' history is the live log's but for the opening leaf's reason.
    assert_eq!(log.events[1..], live.events[1..]);
    f.submit_ok(job(ds.id, 100, 0)).await;
    assert_eq!(log_of(&f, ds.id).await.leaves.len(), 5);
}

/// The leaf's share of a charge's latency (issue 39: under 1 ms): the time of appending a
/// charge's leaf inside a write transaction, against a whole submission. Prints its figures;
/// `cargo test --lib a_charge_s_leaf -- --ignored --nocapture` (docs/design/ledger.md, "Cost").
#[tokio::test]
#[ignore = "a measurement; run by hand"]
async fn a_charge_s_leaf_costs_under_a_millisecond() {
    use crate::store::LedgerEntryKind;
    use std::time::Instant;
    let (f, ds) = fixture_with(private_spec(1_000_000_000, 0)).await;
    let rounds = 300;
    let mut jobs = Vec::with_capacity(rounds);
    let start = Instant::now();
    for _ in 0..rounds {
        jobs.push(f.submit_ok(job(ds.id, 100, 0)).await);
    }
    let submit = start.elapsed().as_secs_f64() * 1e3 / rounds as f64;
    let mut leaf = Vec::with_capacity(rounds);
    for record in &jobs {
        let mut tx = f.store.write_tx().await.unwrap();
        let t = Instant::now();
        crate::store::ledger_log::append_job_leaf(&mut tx, LedgerEntryKind::Charge, record, None, None)
            .await
            .unwrap();
        leaf.push(t.elapsed().as_secs_f64() * 1e3);
        tx.rollback().await.unwrap();
    }
    leaf.sort_by(f64::total_cmp);
    let (median, p95) = (leaf[rounds / 2], leaf[rounds * 95 / 100]);
    println!(
        "{:?}: submission {submit:.3} ms mean; the leaf {median:.3} ms median, {p95:.3} ms p95 (log of {} leaves)",
        f.store.backend(),
        rounds + 1
    );
    assert!(median < 1.0, "the leaf takes {median} ms");
}

/// A public dataset's charges are not bounded by a budget, so their sum can pass the i64
/// range (the replica bench's public jobs did): the log's check must not add them up.
#[tokio::test]
async fn a_public_dataset_s_log_checks_without_summing_its_charges() {
    let (f, ds) = fixture_with(public_spec()).await;
    for _ in 0..3 {
        f.submit_ok(job(ds.id, i64::MAX / 2, 0)).await;
    }
    assert_eq!(log_of(&f, ds.id).await.leaves.len(), 4);
}

/// A row older than the log that no leaf can hold (an integer beyond 2^53 in its job's
/// configuration) leaves that one log unopened, and refused, without stopping the start.
#[tokio::test]
async fn an_old_row_the_log_cannot_hold_leaves_its_log_unopened_and_the_store_starts() {
    let (f, ds) = fixture_with(private_spec(1_000, 0)).await;
    let other = f.ready(private_spec(1_000, 0)).await;
    f.submit_ok(job(ds.id, 100, 0)).await;
    f.submit_ok(job(other.id, 100, 0)).await;
    tamper_past(&f, "ledger_leaves", "no_delete", "DELETE FROM ledger_leaves").await;
    let sql = format!(
        "UPDATE jobs SET config = '{{\"k\": 9007199254740993}}' WHERE dataset_id = '{}'",
        ds.id
    );
    sqlx::query(&sql)
        .execute(&f.store.pool)
        .await
        .expect("edit the config");
    assert_eq!(f.store.open_missing_logs().await.expect("the start goes on"), 1);
    assert!(matches!(
        f.store.dataset_log(f.tenant, ds.id).await,
        Err(StoreError::LogTampered { .. })
    ));
    log_of(&f, other.id).await;
}
