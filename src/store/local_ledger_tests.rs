use super::*;
use crate::privacy::units::{DeltaUnits, RhoUnits};
use tempfile::TempDir;

fn data(relation: Relation) -> LocalDataset {
    LocalDataset {
        name: "site-a.csv".to_owned(),
        relation,
        row_norm_bound: 1.0,
        row_l1_bound: Some(2.0),
        n: 100,
        d: 5,
    }
}

fn rho(x: f64) -> RhoUnits {
    RhoUnits::checked_budget(x).expect("rho")
}

async fn ledger(dir: &TempDir) -> Store {
    Store::open_ledger(&dir.path().join("ledger.db"))
        .await
        .expect("open ledger")
}

/// The site's ρ budget of 1 (no δ) for a dataset under `relation`, as `ensure_local_budget`
/// creates it, or finds it again.
async fn rho_budget(store: &Store, relation: Relation) -> LocalBudget {
    store
        .ensure_local_budget(rho(1.0), DeltaUnits(0), &data(relation))
        .await
        .expect("budget")
}

/// Charges `study` on `dataset` as a `federated_power` study costing ρ `rho` and δ `delta`; the
/// ledger's answer.
async fn charge(
    store: &Store,
    dataset: Uuid,
    study: Uuid,
    rho: RhoUnits,
    delta: DeltaUnits,
) -> ChargeOutcome {
    store
        .charge_study(dataset, study, "federated_power", rho, delta)
        .await
        .expect("charge")
}

#[test]
fn amounts_are_shown_in_short_decimals() {
    assert_eq!(
        show(RhoUnits(200_000_000_000), DeltaUnits(1_000_000_000_000)),
        "rho = 0.2, delta = 0.000001"
    );
}

#[tokio::test]
async fn first_use_creates_the_budget_and_later_uses_must_repeat_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ledger(&dir).await;
    assert_eq!(store.local_budget().await.expect("read"), None);
    let delta = DeltaUnits::checked_budget(1e-6).expect("delta");
    let first = store
        .ensure_local_budget(rho(1.0), delta, &data(Relation::ReplaceOne))
        .await
        .expect("create");
    assert!(first.created);
    assert_eq!(first.remaining_rho_units(), rho(1.0));
    assert_eq!(first.remaining_delta_units(), delta);
    let again = store
        .ensure_local_budget(rho(1.0), delta, &data(Relation::ReplaceOne))
        .await
        .expect("same budget");
    assert!(!again.created);
    assert_eq!(again.dataset, first.dataset);

    let other = store
        .ensure_local_budget(rho(2.0), delta, &data(Relation::ReplaceOne))
        .await;
    assert!(
        matches!(&other, Err(StoreError::InvalidDataset(msg)) if msg.contains("never changes")),
        "{other:?}"
    );
    let other_delta = store
        .ensure_local_budget(rho(1.0), DeltaUnits(0), &data(Relation::ReplaceOne))
        .await;
    assert!(matches!(other_delta, Err(StoreError::InvalidDataset(_))));
    let other_relation = store
        .ensure_local_budget(rho(1.0), delta, &data(Relation::AddRemove))
        .await;
    assert!(matches!(other_relation, Err(StoreError::InvalidDataset(_))));
    // Nothing changed.
    let kept = store.local_budget().await.expect("read").expect("exists");
    assert_eq!(kept.budget_rho_units, rho(1.0));
    assert_eq!(kept.budget_delta_units, delta);
}

#[tokio::test]
async fn invalid_budgets_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ledger(&dir).await;
    for (r, d) in [(0, 0), (-1, 0), (rho(1.0).0, -1), (rho(1.0).0, i64::MAX)] {
        let (r, d) = (RhoUnits(r), DeltaUnits(d));
        let refused = store.ensure_local_budget(r, d, &data(Relation::ReplaceOne)).await;
        assert!(
            matches!(refused, Err(StoreError::InvalidCharge(_))),
            "{r:?} {d:?}"
        );
    }
    assert_eq!(store.local_budget().await.expect("read"), None);
}

#[tokio::test]
async fn charges_fit_the_budget_or_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ledger(&dir).await;
    let budget = rho_budget(&store, Relation::AddRemove).await;
    let cost = RhoUnits::checked_charge(0.4).expect("cost");
    for _ in 0..2 {
        let study = Uuid::new_v4();
        let charged = charge(&store, budget.dataset, study, cost, DeltaUnits(0)).await;
        assert!(matches!(charged, ChargeOutcome::Charged(_)), "{charged:?}");
    }
    let refused = charge(&store, budget.dataset, Uuid::new_v4(), cost, DeltaUnits(0)).await;
    assert_eq!(
        refused,
        ChargeOutcome::OverBudget {
            remaining_rho_units: rho(1.0) - RhoUnits(2 * cost.0),
            remaining_delta_units: DeltaUnits(0),
        }
    );
    // δ is checked too: the budget has none.
    let no_delta = charge(&store, budget.dataset, Uuid::new_v4(), RhoUnits(1), DeltaUnits(1)).await;
    assert!(matches!(no_delta, ChargeOutcome::OverBudget { .. }));
    let left = store.local_budget().await.expect("read").expect("exists");
    assert_eq!(left.spent_rho_units, RhoUnits(2 * cost.0));
    assert!(left.fits(rho(1.0) - RhoUnits(2 * cost.0), DeltaUnits(0)));
    assert!(!left.fits(rho(1.0) - RhoUnits(2 * cost.0 - 1), DeltaUnits(0)));
    let entries = store
        .ledger(left.tenant, left.dataset)
        .await
        .expect("ledger")
        .expect("dataset");
    assert_eq!(entries.len(), 2);
    assert!(entries.iter().all(|e| e.job_id.is_none() && e.rho_units == cost));
    // The rows sum to the totals, the "other" part included, and name their rule.
    let other: i64 = entries.iter().map(|e| e.other_rho_units.0).sum();
    assert_eq!(other, left.spent_rho_units.0, "study charges are all \"other\" ρ");
    assert!(
        entries
            .iter()
            .all(|e| e.rule == Some(crate::privacy::admission::Rule::Zcdp))
    );
}

#[tokio::test]
async fn a_study_is_never_charged_twice() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ledger(&dir).await;
    let budget = rho_budget(&store, Relation::ReplaceOne).await;
    let study = Uuid::new_v4();
    assert!(!store.study_charged(budget.dataset, study).await.expect("read"));
    let first = charge(&store, budget.dataset, study, RhoUnits(10), DeltaUnits(0)).await;
    let ChargeOutcome::Charged(after) = first else {
        panic!("not charged: {first:?}");
    };
    assert_eq!(after.spent_rho_units, RhoUnits(10));
    assert!(store.study_charged(budget.dataset, study).await.expect("read"));
    let second = charge(&store, budget.dataset, study, RhoUnits(10), DeltaUnits(0)).await;
    assert_eq!(second, ChargeOutcome::AlreadyCharged);
    let left = store.local_budget().await.expect("read").expect("exists");
    assert_eq!(left.spent_rho_units, RhoUnits(10));
}

#[tokio::test]
async fn charges_survive_reopening_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let study = Uuid::new_v4();
    let dataset = {
        let store = ledger(&dir).await;
        let budget = rho_budget(&store, Relation::ReplaceOne).await;
        let charged = charge(&store, budget.dataset, study, rho(0.25), DeltaUnits(0)).await;
        assert!(matches!(charged, ChargeOutcome::Charged(_)));
        store.close().await;
        budget.dataset
    };
    let store = ledger(&dir).await;
    let budget = rho_budget(&store, Relation::ReplaceOne).await;
    assert!(!budget.created);
    assert_eq!(budget.dataset, dataset);
    assert_eq!(budget.remaining_rho_units(), rho(0.75));
    assert_eq!(
        charge(&store, dataset, study, rho(0.25), DeltaUnits(0)).await,
        ChargeOutcome::AlreadyCharged
    );
}

#[tokio::test]
async fn the_service_database_is_not_a_site_ledger() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("ledger.db");
    let service = Store::connect(&format!("sqlite://{}", path.display()), dir.path())
        .await
        .expect("connect");
    service.create_tenant("alice").await.expect("tenant");
    service.close().await;
    let store = Store::open_ledger(&path).await.expect("open");
    let refused = store
        .ensure_local_budget(rho(1.0), DeltaUnits(0), &data(Relation::ReplaceOne))
        .await;
    assert!(
        matches!(&refused, Err(StoreError::InvalidDataset(msg)) if msg.contains("not a site ledger")),
        "{refused:?}"
    );
}

/// A charge that returned has reached the disk before the site sends anything
/// ([`Store::open_ledger`]): every connection of a ledger opened the product's way commits with
/// `synchronous = FULL` (2), not NORMAL (1), which a power loss can undo.
#[tokio::test]
async fn a_site_ledger_syncs_every_commit_to_the_disk() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ledger(&dir).await;
    let mut held = Vec::new();
    for pool in [&store.pool, &store.synced, &store.reads] {
        for _ in 0..2 {
            let mut conn = pool.acquire().await.expect("a connection");
            let synchronous: i64 = sqlx::query_scalar("PRAGMA synchronous")
                .fetch_one(&mut *conn)
                .await
                .expect("pragma");
            assert_eq!(synchronous, 2, "PRAGMA synchronous of a site ledger");
            held.push(conn);
        }
    }
}
