//! The durable study state: claims bump the fence, a stale holder's write is refused, the
//! snapshot survives a reconnect, and a site's kept messages are written once. Runs on
//! PostgreSQL too when `PRIVPCA_TEST_POSTGRES_URL` is set.

use std::time::Duration;

use serde_json::json;
use uuid::Uuid;

use crate::dataset::Relation;
use crate::privacy::units::{DeltaUnits, RhoUnits};
use crate::store::{NewStudy, NewStudySite, SiteMessageKind, SiteSession, Store, StoreError, StudyLease};

async fn store_on(url: &str, dir: &std::path::Path, replica: &str) -> Store {
    Store::connect(url, dir)
        .await
        .expect("connect")
        .with_replica(replica)
        .with_lease(Duration::from_secs(30))
}

async fn study(store: &Store) -> Uuid {
    let (tenant, _) = store.create_tenant("alice").await.expect("tenant");
    let new = NewStudy {
        name: "durable".into(),
        algorithm: "federated_power".into(),
        n_features: 3,
        relation: Relation::ReplaceOne,
        row_norm_bound: 1.0,
        row_l1_bound: None,
        params: json!({}),
        config: json!({}),
        privacy: json!({}),
        cost_rho_units: RhoUnits(10),
        cost_delta_units: DeltaUnits(0),
        threshold: 2,
        join_deadline: chrono::Utc::now() + chrono::Duration::seconds(60),
        round_timeout_ms: 1_000,
        rounds: 3,
        sites: ["a", "b"]
            .iter()
            .map(|n| NewStudySite {
                name: (*n).to_owned(),
                budget_rho_units: None,
            })
            .collect(),
    };
    let (record, _, _) = store.create_study(tenant.id, new).await.expect("create");
    record.id
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stale_lease_holders_write_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = crate::store::testing::fresh_database_url(dir.path()).await;
    let a = store_on(&url, dir.path(), "replica-a").await;
    let b = store_on(&url, dir.path(), "replica-b").await;
    let id = study(&a).await;
    let created = StudyLease::created(id);
    a.save_study_state(created, "{\"v\":1}")
        .await
        .expect("the creator writes");
    // b cannot take a study whose lease is live.
    assert_eq!(b.claim_study(id).await.expect("claim"), None);
    assert!(b.claimable_studies().await.expect("list").is_empty());
    // Once a's lease has run out (as b's clock sees it), b claims it: the fence moves on.
    b.advance_lease_clock(Duration::from_secs(120));
    assert_eq!(b.claimable_studies().await.expect("list"), vec![id]);
    let taken = b.claim_study(id).await.expect("claim").expect("claimable");
    assert_eq!(taken.epoch, created.epoch + 1);
    // a's next write is refused and changes nothing; b's goes through.
    let refused = a.save_study_state(created, "{\"v\":2}").await;
    assert!(
        matches!(refused, Err(StoreError::StudyLeaseLost(s)) if s == id),
        "{refused:?}"
    );
    assert_eq!(
        a.load_study_state(id).await.expect("load").as_deref(),
        Some("{\"v\":1}")
    );
    b.save_study_state(taken, "{\"v\":3}")
        .await
        .expect("the new holder writes");
    // a, restarted under its own name, claims it back at once (its old epoch stays dead).
    let again = a.claim_study(id).await.expect("claim");
    assert_eq!(again, None, "b's lease is live and b is another replica");
    // A finished study is not claimable, and its snapshot is dropped.
    b.end_study(id, crate::store::StudyStatus::Failed, "test", None)
        .await
        .expect("end");
    assert!(b.save_study_state(taken, "{}").await.is_err());
    b.drop_study_state(id).await.expect("drop");
    assert_eq!(b.load_study_state(id).await.expect("load"), None);
    assert_eq!(b.claim_study(id).await.expect("claim"), None);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restarted_replica_claims_its_own_studies_and_fences_its_past() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = crate::store::testing::fresh_database_url(dir.path()).await;
    let first = store_on(&url, dir.path(), "replica-a").await;
    let id = study(&first).await;
    first
        .save_study_state(StudyLease::created(id), "{\"round\":2}")
        .await
        .expect("write");
    // The same replica name after a restart: its study is claimable at once.
    let restarted = store_on(&url, dir.path(), "replica-a").await;
    assert_eq!(restarted.claimable_studies().await.expect("list"), vec![id]);
    let lease = restarted
        .claim_study(id)
        .await
        .expect("claim")
        .expect("own study");
    assert_eq!(lease.epoch, 1);
    assert_eq!(
        restarted.load_study_state(id).await.expect("load").as_deref(),
        Some("{\"round\":2}")
    );
    // The process before the restart (same name, old epoch) is fenced.
    assert!(matches!(
        first.save_study_state(StudyLease::created(id), "{}").await,
        Err(StoreError::StudyLeaseLost(_))
    ));
    restarted
        .save_study_state(lease, "{\"round\":3}")
        .await
        .expect("write");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_site_keeps_one_message_per_phase_and_one_session_per_study() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("site.ledger");
    let ledger = Store::open_ledger(&path).await.expect("ledger");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).expect("stat").permissions().mode();
        assert_eq!(
            mode & 0o777,
            0o600,
            "the ledger holds session secrets: owner only"
        );
    }
    let study = Uuid::new_v4();
    assert_eq!(ledger.site_session(study).await.expect("read"), None);
    let first = SiteSession {
        secret_seed: [7; 32],
        fingerprint: "f1".into(),
    };
    let kept = ledger.start_site_session(study, &first).await.expect("start");
    assert_eq!(kept, first);
    let other = SiteSession {
        secret_seed: [9; 32],
        fingerprint: "f2".into(),
    };
    assert_eq!(
        ledger.start_site_session(study, &other).await.expect("again"),
        first
    );
    let sent = ledger
        .keep_site_message(study, SiteMessageKind::Contribution, 2, "bytes-1")
        .await
        .expect("keep");
    assert_eq!(sent, "bytes-1");
    let resent = ledger
        .keep_site_message(study, SiteMessageKind::Contribution, 2, "bytes-2")
        .await
        .expect("keep again");
    assert_eq!(
        resent, "bytes-1",
        "a round is answered once: the first bytes stand"
    );
    assert_eq!(
        ledger
            .site_messages(study, SiteMessageKind::Contribution)
            .await
            .expect("list"),
        vec![(2, "bytes-1".to_owned())]
    );
    assert_eq!(
        ledger
            .site_message(study, SiteMessageKind::Unmask, 2)
            .await
            .expect("read"),
        None
    );
    ledger.close().await;
}
