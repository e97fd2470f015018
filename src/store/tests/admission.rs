//! Check-and-charge: atomic admission under concurrency, over-budget answers, and the
//! database's own refusal of an overspend.

use super::{
    empty_dataset, fixture, fixture_with, job, ledger_entries, ledger_net, private_spec, public_spec,
    spawn_submissions, stored_dataset,
};
use crate::privacy::units::{DeltaUnits, RhoUnits};
use crate::store::{LedgerEntryKind, StoreError, SubmitOutcome};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_submissions_fit_exactly_ten() {
    let (f, ds) = fixture_with(private_spec(1_000, 50)).await;
    let (mut created, mut over) = (0, 0);
    for handle in spawn_submissions(&f, 50, || job(ds.id, 100, 5)) {
        match handle.await.expect("task").expect("submit") {
            SubmitOutcome::Created(_) => created += 1,
            SubmitOutcome::OverBudget {
                remaining_rho_units,
                requested_rho_units,
                ..
            } => {
                assert!(remaining_rho_units < requested_rho_units);
                over += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((created, over), (10, 40));
    let after = stored_dataset(&f.store, f.tenant, ds.id).await;
    assert_eq!((after.spent_rho_units.0, after.spent_delta_units.0), (1_000, 50));
    let entries = ledger_entries(&f.store, f.tenant, ds.id).await;
    assert_eq!(entries.len(), 10);
    assert!(
        entries
            .iter()
            .all(|e| e.entry == LedgerEntryKind::Charge && e.rho_units.0 == 100)
    );
    assert_eq!(
        f.store
            .list_jobs(f.tenant, Some(ds.id))
            .await
            .expect("jobs")
            .len(),
        10
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn over_budget_names_remaining_and_requested_for_rho_and_delta() {
    let (f, ds) = fixture_with(private_spec(1_000, 10)).await;
    f.submit_ok(job(ds.id, 700, 4)).await;
    let outcome = f.submit(job(ds.id, 301, 0)).await;
    assert_eq!(
        outcome,
        SubmitOutcome::OverBudget {
            remaining_rho_units: RhoUnits(300),
            requested_rho_units: RhoUnits(301),
            remaining_delta_units: DeltaUnits(6),
            requested_delta_units: DeltaUnits(0)
        }
    );
    // δ alone can also be the limit.
    let outcome = f.submit(job(ds.id, 1, 7)).await;
    assert!(matches!(
        outcome,
        SubmitOutcome::OverBudget {
            remaining_delta_units: DeltaUnits(6),
            ..
        }
    ));
    // Exactly the remainder fits.
    f.submit_ok(job(ds.id, 300, 6)).await;
    let after = stored_dataset(&f.store, f.tenant, ds.id).await;
    assert_eq!(
        (after.remaining_rho_units(), after.remaining_delta_units()),
        (Some(RhoUnits(0)), Some(DeltaUnits(0)))
    );
    assert_eq!(ledger_net(&f.store, f.tenant, ds.id).await, (1_000, 10));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_database_itself_refuses_an_overspend_and_ledger_rewrites() {
    let (f, ds) = fixture_with(private_spec(1_000, 0)).await;
    f.submit_ok(job(ds.id, 400, 0)).await;
    let overspend = sqlx::query("UPDATE datasets SET spent_rho_units = 1001 WHERE id = $1")
        .bind(ds.id.to_string())
        .execute(&f.store.pool)
        .await;
    assert!(overspend.is_err(), "CHECK (spent <= budget) must refuse");
    let negative = sqlx::query("UPDATE datasets SET spent_rho_units = -1 WHERE id = $1")
        .bind(ds.id.to_string())
        .execute(&f.store.pool)
        .await;
    assert!(negative.is_err(), "CHECK (spent >= 0) must refuse");
    for sql in [
        "UPDATE ledger SET rho_units = 0",
        "DELETE FROM ledger",
        "DELETE FROM datasets",
    ] {
        assert!(
            sqlx::query(sql).execute(&f.store.pool).await.is_err(),
            "{sql} must be refused"
        );
    }
    assert_eq!(ledger_net(&f.store, f.tenant, ds.id).await, (400, 0));
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_charges_and_seeds_on_private_data_are_refused_without_writing() {
    let (f, ds) = fixture_with(private_spec(1_000, 0)).await;
    let negative = f.store.submit_job(f.tenant, job(ds.id, -5, 0)).await;
    assert!(matches!(negative, Err(StoreError::InvalidCharge(_))));
    let seeded = f
        .store
        .submit_job(
            f.tenant,
            super::super::NewJob {
                seed: Some(7),
                ..job(ds.id, 1, 0)
            },
        )
        .await;
    assert!(matches!(seeded, Err(StoreError::SeedNotAllowed)));
    assert_eq!(
        f.store.ledger(f.tenant, ds.id).await.expect("ledger"),
        Some(vec![])
    );
    assert!(f.store.list_jobs(f.tenant, None).await.expect("jobs").is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn public_datasets_record_costs_without_a_budget() {
    let (f, ds) = fixture_with(public_spec()).await;
    let big = RhoUnits::budget(crate::privacy::units::MAX_RHO).0;
    for _ in 0..12 {
        // Twelve maximal charges would overflow an i64 total; nothing is totalled on the row.
        f.submit_ok(super::super::NewJob {
            seed: Some(u64::MAX),
            ..job(ds.id, big, 0)
        })
        .await;
    }
    let after = stored_dataset(&f.store, f.tenant, ds.id).await;
    assert_eq!(
        (after.budget_rho_units, after.spent_rho_units),
        (None, RhoUnits(0))
    );
    let entries = ledger_entries(&f.store, f.tenant, ds.id).await;
    assert_eq!(entries.len(), 12);
    let jobs = f.store.list_jobs(f.tenant, Some(ds.id)).await.expect("jobs");
    assert!(jobs.iter().all(|j| j.seed == Some(u64::MAX)));
}

#[tokio::test(flavor = "multi_thread")]
async fn submission_needs_a_ready_dataset() {
    let f = fixture().await;
    let empty = empty_dataset(&f.store, f.tenant).await;
    let outcome = f.submit(job(empty.id, 1, 0)).await;
    assert_eq!(
        outcome,
        SubmitOutcome::DatasetNotReady(crate::store::DatasetStatus::Empty)
    );
    let outcome = f.submit(job(uuid::Uuid::new_v4(), 1, 0)).await;
    assert_eq!(outcome, SubmitOutcome::DatasetNotFound);
}
