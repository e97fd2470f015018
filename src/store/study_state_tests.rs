//! The durable study state: claims bump the fence, a stale holder's write is refused, the
//! snapshot survives a reconnect, and a site's kept messages are written once. Runs on
//! PostgreSQL too when `PRIVPCA_TEST_POSTGRES_URL` is set.

use std::time::Duration;

use uuid::Uuid;

use crate::store::{
    SiteMessageKind, SiteSession, SiteStatus, Store, StoreError, StudyLease, StudySnapshot, StudyStatus,
    StudyWrite,
};

async fn store_on(url: &str, dir: &std::path::Path, replica: &str) -> Store {
    crate::store::testing::replica_store(url, dir, replica).await
}

async fn study(store: &Store) -> Uuid {
    crate::store::testing::small_study(store, 2).await
}

/// Replicas a and b on one fresh database, and a study a created and kept (`{"v":1}`) under
/// its creation lease.
async fn two_replicas(dir: &std::path::Path) -> (Store, Store, Uuid, StudyLease) {
    let url = crate::store::testing::fresh_database_url(dir).await;
    let a = store_on(&url, dir, "replica-a").await;
    let b = store_on(&url, dir, "replica-b").await;
    let id = study(&a).await;
    let created = StudyLease::created(id);
    a.save_study_state(created, "{\"v\":1}")
        .await
        .expect("the creator writes");
    (a, b, id, created)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stale_lease_holders_write_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b, id, created) = two_replicas(dir.path()).await;
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
async fn a_lease_taken_over_is_never_renewed_back_and_its_old_holder_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b, id, created) = two_replicas(dir.path()).await;
    assert!(
        a.renew_study_lease(created).await.expect("renew"),
        "the holder renews"
    );
    // b's clock runs past a's lease: b claims the study.
    b.advance_lease_clock(Duration::from_secs(120));
    let taken = b.claim_study(id).await.expect("claim").expect("claimable");
    // a can never renew it back, not even once its own clock is past b's lease ...
    assert!(!a.renew_study_lease(created).await.expect("renew"));
    a.advance_lease_clock(Duration::from_secs(60));
    assert!(!a.renew_study_lease(created).await.expect("renew"));
    // ... nor can a process under b's own name that holds an older claim.
    let older = StudyLease {
        study: id,
        epoch: created.epoch,
    };
    assert!(!b.renew_study_lease(older).await.expect("renew"));
    assert!(
        b.renew_study_lease(taken).await.expect("renew"),
        "the new holder renews"
    );

    // a's step (its snapshot and every store write of the step) changes nothing at all.
    let roster = [1, 2];
    let writes = [
        StudyWrite::Join {
            site: 2,
            n_samples: None,
        },
        StudyWrite::Start { roster: &roster },
        StudyWrite::Charge {
            roster: &roster,
            dropped: &[],
        },
        StudyWrite::Progress { done: 1 },
        StudyWrite::Failed {
            reason: "test",
            report: None,
        },
    ];
    let stale = a
        .save_study_step(created, Some(StudySnapshot::whole("{\"v\":2}")), &writes)
        .await;
    assert!(
        matches!(stale, Err(StoreError::StudyLeaseLost(s)) if s == id),
        "{stale:?}"
    );
    let (record, sites) = b.get_study_any(id).await.expect("read").expect("study");
    assert_eq!(record.status, StudyStatus::Enrolling);
    assert!(
        sites
            .iter()
            .all(|s| s.status == SiteStatus::Invited && s.charged_at.is_none())
    );
    assert_eq!(
        b.load_study_state(id).await.expect("load").as_deref(),
        Some("{\"v\":1}")
    );

    // The holder's steps are written whole, and a step that ends the study drops its snapshot.
    let join = [StudyWrite::Join {
        site: 1,
        n_samples: None,
    }];
    for (i, step) in [&join[..], &writes[..1], &writes[1..3], &writes[3..]]
        .into_iter()
        .enumerate()
    {
        let state = format!("{{\"step\":{i}}}");
        b.save_study_step(taken, Some(StudySnapshot::whole(&state)), step)
            .await
            .expect("the holder's step");
    }
    let (record, sites) = b.get_study_any(id).await.expect("read").expect("study");
    assert_eq!(record.status, StudyStatus::Failed);
    assert_eq!(record.progress_done, 1);
    assert!(
        sites
            .iter()
            .all(|s| s.status == SiteStatus::Contributing && s.charged_at.is_some())
    );
    assert_eq!(b.load_study_state(id).await.expect("load"), None);
    assert!(
        !b.renew_study_lease(taken).await.expect("renew"),
        "a finished study has no lease"
    );
}

/// The journal: rows appended in order under the lease (several in one transaction), refused
/// (and not written) for a holder that lost it, kept beside a snapshot that does not supersede
/// it (with the entries written with that snapshot after it), emptied by one that does, and
/// gone with the snapshot when the study ends.
#[tokio::test(flavor = "multi_thread")]
async fn the_journal_is_fenced_emptied_by_a_snapshot_and_dropped_at_the_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b, id, created) = two_replicas(dir.path()).await;
    let entries = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    a.append_study_journal(created, &entries(&["one"]))
        .await
        .expect("append");
    a.append_study_journal(created, &entries(&["two", "three"]))
        .await
        .expect("append a group");
    assert_eq!(
        a.load_study_journal(id).await.expect("load"),
        ["one", "two", "three"]
    );
    b.advance_lease_clock(Duration::from_secs(120));
    let taken = b.claim_study(id).await.expect("claim").expect("claimable");
    let refused = a.append_study_journal(created, &entries(&["four"])).await;
    assert!(
        matches!(refused, Err(StoreError::StudyLeaseLost(s)) if s == id),
        "{refused:?}"
    );
    b.append_study_journal(taken, &entries(&["four"]))
        .await
        .expect("append");
    assert_eq!(
        b.load_study_journal(id).await.expect("load"),
        ["one", "two", "three", "four"],
        "the stale holder wrote nothing"
    );
    let pending = entries(&["five", "six"]);
    let beside = StudySnapshot {
        state: "{\"v\":2}",
        journal: &pending,
        supersedes_journal: false,
    };
    b.save_study_step(taken, Some(beside), &[])
        .await
        .expect("snapshot beside the journal");
    assert_eq!(
        b.load_study_journal(id).await.expect("load"),
        ["one", "two", "three", "four", "five", "six"]
    );
    assert_eq!(
        b.load_study_state(id).await.expect("load").as_deref(),
        Some("{\"v\":2}")
    );
    b.save_study_state(taken, "{\"v\":3}").await.expect("snapshot");
    assert!(b.load_study_journal(id).await.expect("load").is_empty());
    b.append_study_journal(taken, &entries(&["seven"]))
        .await
        .expect("append");
    let failed = [StudyWrite::Failed {
        reason: "test",
        report: None,
    }];
    b.save_study_step(taken, None, &failed).await.expect("end");
    assert!(b.load_study_journal(id).await.expect("load").is_empty());
    assert_eq!(b.load_study_state(id).await.expect("load"), None);
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

/// A study's step (its snapshot and writes) is committed synced on SQLite (docs/design/ledger.md,
/// "Durable before released"): with the synced pool closed it cannot be written, while the
/// journal of accepted messages, which sites resend, still can.
#[tokio::test(flavor = "multi_thread")]
async fn a_study_step_is_committed_synced_to_the_disk() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, _b, id, created) = two_replicas(dir.path()).await;
    if a.backend != crate::store::Backend::Sqlite {
        return; // PostgreSQL: one pool, every commit synced.
    }
    a.synced.close().await;
    assert!(matches!(
        a.save_study_state(created, "{\"v\":2}").await,
        Err(StoreError::Database(_))
    ));
    a.append_study_journal(created, &["{\"m\":1}".to_owned()])
        .await
        .expect("the journal is an ordinary write");
    assert_eq!(
        a.load_study_state(id).await.expect("load").as_deref(),
        Some("{\"v\":1}")
    );
}
