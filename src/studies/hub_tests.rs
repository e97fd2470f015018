//! The hub under a lost lease: a replica whose claim was taken over stops driving the study at
//! once, at its next heartbeat or at its next write, and changes nothing in the store. Runs on
//! PostgreSQL too when `PRIVPCA_TEST_POSTGRES_URL` is set.

use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use uuid::Uuid;

use super::live::Protocol;
use super::{HubError, StudyHub};
use crate::federation::messages::JoinRequest;
use crate::federation::secagg::SiteSession;
use crate::store::{SiteStatus, StoreError, testing};

/// Site `site`'s join with fresh keys.
fn join_request(study: Uuid, site: u32, rng: &mut ChaCha20Rng) -> JoinRequest {
    let session = SiteSession::new(study, site, 2, rng);
    JoinRequest {
        n_samples: Some(5),
        encryption_public_key: Some(session.encryption_public_key()),
        mask_public_keys: session.mask_public_keys(),
        signing_public_key: Some(
            crate::federation::transcript::SiteSigner::from_seed([site as u8; 32]).public_key(),
        ),
        seed_commitment: None,
    }
}

/// A small 3-site study in `store`, opened by a hub on it, once its first snapshot is kept.
/// `open` keeps it from a spawned task: under load that task could otherwise run only after
/// another claim, be fenced, and stop the driver before what a test is about.
async fn opened(store: &crate::store::Store) -> (Uuid, StudyHub) {
    let id = testing::small_study(store, 3).await;
    let (record, sites) = store.get_study_any(id).await.expect("read").expect("study");
    let hub = StudyHub::new(store.clone());
    hub.open(&record, &sites, Protocol::Power(super::durable::tests::config()));
    let kept = async {
        while store.load_study_state(id).await.expect("read").is_none() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), kept)
        .await
        .expect("the first snapshot is kept");
    (id, hub)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replica_that_loses_its_lease_stops_driving_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = testing::fresh_database_url(dir.path()).await;
    let a = testing::replica_store(&url, dir.path(), "replica-a").await;
    let b = testing::replica_store(&url, dir.path(), "replica-b").await;
    let c = testing::replica_store(&url, dir.path(), "replica-c").await;
    let (id, hub_a) = opened(&a).await;
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    hub_a
        .join(id, 1, Some(5), join_request(id, 1, &mut rng))
        .await
        .expect("a drives the study");

    // b may not take the study while a's lease is live; once it has run out (as b's clock
    // sees it), b claims it.
    let hub_b = StudyHub::new(b.clone());
    assert!(matches!(hub_b.resume(id).await, Err(HubError::HeldElsewhere)));
    b.advance_lease_clock(Duration::from_secs(120));
    assert!(hub_b.resume(id).await.expect("claim"));

    // a's next heartbeat is refused: a drops the study at once, without writing anything, and
    // serves nothing from its old state (b holds the study).
    assert_eq!(hub_a.renew_leases().await, 1);
    assert!(hub_a.entry(id).is_none(), "a stopped driving the study");
    assert!(matches!(
        hub_a.task(id, 2, Duration::ZERO).await,
        Err(HubError::HeldElsewhere)
    ));

    // c takes the study from b. b has not heard yet (no heartbeat since): its next write is
    // fenced, it stops at once, and the store holds nothing of the refused step.
    c.advance_lease_clock(Duration::from_secs(300));
    let hub_c = StudyHub::new(c.clone());
    assert!(hub_c.resume(id).await.expect("claim"));
    let refused = hub_b.join(id, 2, Some(5), join_request(id, 2, &mut rng)).await;
    assert!(
        matches!(refused, Err(HubError::Store(StoreError::StudyLeaseLost(s))) if s == id),
        "{refused:?}"
    );
    assert!(hub_b.entry(id).is_none(), "b stopped driving the study");
    let (_, sites) = c.get_study_any(id).await.expect("read").expect("study");
    assert_eq!(sites[0].status, SiteStatus::Joined);
    assert_eq!(
        sites[1].status,
        SiteStatus::Invited,
        "b's refused join wrote nothing"
    );
    // The holder goes on.
    hub_c
        .join(id, 2, Some(5), join_request(id, 2, &mut rng))
        .await
        .expect("c drives the study");
    assert_eq!(hub_c.renew_leases().await, 0);
}

/// A write of the study's state fails (here: a restarted process under the same replica name
/// claimed the study, so the old claim's write is fenced): the entry in memory stops, a long
/// poll waiting on it is told to retry (`Reloading`, a 503 over HTTP) rather than that the
/// study is gone, and the next request takes the study up again from the database.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_write_makes_waiting_polls_retry_and_the_next_request_takes_the_study_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = testing::fresh_database_url(dir.path()).await;
    let a = testing::replica_store(&url, dir.path(), "replica-a").await;
    let (id, hub) = opened(&a).await;
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    hub.join(id, 1, Some(5), join_request(id, 1, &mut rng))
        .await
        .expect("the hub drives the study");
    // Site 2 waits for a task: none comes before enrolment ends.
    let waiting = {
        let hub = hub.clone();
        tokio::spawn(async move { hub.task(id, 3, Duration::from_secs(20)).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let restarted = testing::replica_store(&url, dir.path(), "replica-a").await;
    assert!(restarted.claim_study(id).await.expect("claim").is_some());
    let refused = hub.join(id, 2, Some(5), join_request(id, 2, &mut rng)).await;
    assert!(
        matches!(refused, Err(HubError::Store(StoreError::StudyLeaseLost(_)))),
        "{refused:?}"
    );
    let polled = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the poll ends at once")
        .expect("the poll's task");
    assert!(matches!(polled, Err(HubError::Reloading)), "{polled:?}");
    // The retry: the study is taken up again from what the database kept (site 1's join).
    hub.join(id, 2, Some(5), join_request(id, 2, &mut rng))
        .await
        .expect("taken up again and joined");
    let (_, sites) = a.get_study_any(id).await.expect("read").expect("study");
    assert_eq!(sites[0].status, SiteStatus::Joined);
    assert_eq!(sites[1].status, SiteStatus::Joined);
}
