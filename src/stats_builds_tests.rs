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
