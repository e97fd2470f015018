use std::time::Duration;

use super::*;

#[tokio::test]
async fn a_second_task_waits_for_the_first_and_other_datasets_do_not() {
    let builds = Arc::new(StatsBuilds::default());
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let first = builds.turn(a).await;
    assert!(builds.is_busy(a));
    // Another dataset goes at once.
    let other = tokio::time::timeout(Duration::from_secs(5), builds.turn(b))
        .await
        .expect("another dataset does not wait");
    drop(other);
    assert!(!builds.is_busy(b));

    let waiter = tokio::spawn({
        let builds = builds.clone();
        async move {
            let turn = builds.turn(a).await;
            drop(turn);
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !waiter.is_finished(),
        "the second task waits while the first holds the turn"
    );
    drop(first);
    tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter goes once the turn is given back")
        .unwrap();
    assert!(!builds.is_busy(a));
}

#[tokio::test]
async fn many_waiters_take_the_turn_one_at_a_time() {
    let builds = Arc::new(StatsBuilds::default());
    let dataset = Uuid::new_v4();
    let inside = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let first = builds.turn(dataset).await;
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (builds, inside) = (builds.clone(), inside.clone());
            tokio::spawn(async move {
                let _turn = builds.turn(dataset).await;
                let now = inside.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                assert_eq!(now, 0, "two tasks held the turn at once");
                tokio::time::sleep(Duration::from_millis(5)).await;
                inside.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    drop(first);
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .unwrap()
            .unwrap();
    }
    assert!(!builds.is_busy(dataset));
}

/// Statistics of d-feature records (d ≥ 2 829 has no blocks: `block_count` = 1, so complete).
fn stats_of(d: usize, n: usize, blocks: Option<crate::linalg::ClipBlocks>) -> Arc<KeptStats> {
    let stats = crate::linalg::RecordStats {
        n,
        gram: crate::linalg::Matrix::zeros(d, d),
        sums: crate::linalg::Vector::zeros(d),
    };
    Arc::new(KeptStats::new(stats, blocks))
}

#[test]
fn kept_statistics_are_shared_until_forgotten_and_those_with_blocks_are_not_replaced_by_those_without() {
    let builds = StatsBuilds::default();
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    assert!(builds.kept(a).is_none());
    let complete = stats_of(3000, 10, None);
    builds.keep(a, &complete);
    assert!(Arc::ptr_eq(&builds.kept(a).expect("kept"), &complete));
    // 50 records of 6 features get blocks later: kept without them meanwhile, replaced by the
    // statistics with blocks, and those never by statistics without.
    builds.keep(b, &stats_of(6, 50, None));
    assert!(builds.kept(b).expect("kept").blocks.is_none());
    let xt = crate::linalg::Matrix::from_fn(6, 50, |i, j| (i + j) as f64);
    let blocks = crate::linalg::ClipBlocks::build((&xt).into(), 4);
    let with_blocks = stats_of(6, 50, Some(blocks));
    builds.keep(b, &with_blocks);
    builds.keep(b, &stats_of(6, 50, None));
    assert!(Arc::ptr_eq(&builds.kept(b).expect("kept"), &with_blocks));
    builds.forget(a);
    assert!(builds.kept(a).is_none());
    assert!(builds.kept(b).is_some());
}

#[test]
fn kept_statistics_stay_within_the_budget_least_recently_used_out_first() {
    let builds = StatsBuilds::default();
    let each = stats_of(3000, 10, None).bytes();
    let fit = KEPT_BUDGET_BYTES / each;
    assert!(fit >= 2, "the test needs room for two");
    let ids: Vec<Uuid> = (0..=fit).map(|_| Uuid::new_v4()).collect();
    for id in &ids[..fit] {
        builds.keep(*id, &stats_of(3000, 10, None));
    }
    // The first is used again, so the second is the least recently used when one more comes.
    assert!(builds.kept(ids[0]).is_some());
    builds.keep(ids[fit], &stats_of(3000, 10, None));
    assert!(builds.kept(ids[1]).is_none(), "least recently used: forgotten");
    assert!(builds.kept(ids[0]).is_some() && builds.kept(ids[fit]).is_some());
    let kept = builds.lock_kept();
    assert!(kept.bytes <= KEPT_BUDGET_BYTES);
    assert_eq!(kept.bytes, kept.entries.len() * each);
}

#[test]
fn the_blocks_wait_until_no_job_has_read_the_records_for_a_moment() {
    let builds = Arc::new(StatsBuilds::default());
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let quiet = Duration::from_millis(40);
    // Nobody reads: the wait is the quiet time.
    let start = Instant::now();
    builds.wait_unread(a, quiet, Duration::from_secs(5));
    assert!(start.elapsed() >= quiet && start.elapsed() < Duration::from_secs(2));
    // A job reads `a` for 300 ms: the wait ends after it, and a job on `b` does not count.
    let job = builds.reading(a);
    let other = builds.reading(b);
    let ends = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        let ended = Instant::now();
        drop(job);
        ended
    });
    builds.wait_unread(a, quiet, Duration::from_secs(5));
    let ended = ends.join().unwrap();
    // Quiet since the last look that saw the reader, which is at most a quarter of `quiet`
    // before it ended.
    assert!(
        ended.elapsed() >= quiet / 2,
        "waited {:?} after the job",
        ended.elapsed()
    );
    // A reader that never ends: the limit bounds the wait.
    let start = Instant::now();
    builds.wait_unread(b, quiet, Duration::from_millis(200));
    assert!(start.elapsed() >= Duration::from_millis(200) && start.elapsed() < Duration::from_secs(2));
    drop(other);
    assert!(lock_map(&builds.reading).is_empty());
}

#[test]
fn the_sweep_forgets_exactly_the_datasets_said_to_be_gone() {
    let builds = StatsBuilds::default();
    let (kept, gone) = (Uuid::new_v4(), Uuid::new_v4());
    builds.keep(kept, &stats_of(3000, 10, None));
    builds.keep(gone, &stats_of(3000, 10, None));
    builds.forget_where(|id| id == gone);
    assert!(builds.kept(gone).is_none());
    assert!(builds.kept(kept).is_some());
}
