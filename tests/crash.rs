//! A crash of the real binary on the default embedded database (SQLite): `privpca serve` is
//! SIGKILLed while a job runs, then started again on the same database and data directory.
//!
//! - The job that was running is failed at the restart (it is this replica's own: the replica
//!   id defaults to the host name), its charge kept and no refund written; it never runs again.
//! - A job that was only queued at the crash runs after the restart.
//! - The ledger is intact: one charge per admitted job, the dataset's spent ρ is their sum,
//!   admission goes on from there (the remaining budget admits exactly what is left), an earlier
//!   result is unchanged, and SQLite's integrity check passes.

#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::Connection;
use support::{get, post, start, submit, wait_for};

const ADMIN: &str = "crash-test-admin";

fn env(dir: &Path) -> Vec<(&'static str, String)> {
    vec![
        (
            "PRIVPCA_DATABASE_URL",
            format!("sqlite://{}", dir.join("privpca.db").display()),
        ),
        ("PRIVPCA_DATA_DIR", dir.join("data").display().to_string()),
        ("PRIVPCA_ADMIN_KEY", ADMIN.to_string()),
        ("PRIVPCA_WORKERS", "1".to_string()),
        ("PRIVPCA_THREADS", "1".to_string()),
    ]
}

/// Submits `body` and waits (up to `limit`) until the job has succeeded; its id.
async fn succeeded(base: &str, key: &str, body: Value, limit: Duration) -> String {
    let id = submit(base, key, body).await;
    wait_for(base, key, &id, &["succeeded"], limit).await;
    id
}

/// A job submission body.
fn job(dataset: &str, algorithm: &str, params: Value, rho: f64) -> Value {
    json!({ "dataset_id": dataset, "algorithm": algorithm, "params": params, "privacy": { "rho": rho } })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkill_mid_job_fails_that_job_at_restart_and_keeps_the_ledger_intact() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("serve.log");
    let env = env(dir.path());
    let server = start(&env, &log).await;
    let key = support::tenant(&server.base, ADMIN, "crash").await;
    let dataset = support::dataset(&server.base, &key, 1.0, 4000, 300).await;
    let limit = Duration::from_secs(120);

    // A finished job, whose result must survive the crash unchanged.
    let first = job(&dataset, "analyze_gauss", json!({ "k": 2 }), 0.1);
    let done = succeeded(&server.base, &key, first, limit).await;
    let result_path = format!("/v1/jobs/{done}/result");
    let (status, result_before) = get(&format!("{}{result_path}", server.base), &key).await;
    assert_eq!(status, 200, "{result_before}");

    // A long job, running when the process dies, and one queued behind it (one worker).
    let long_job = job(
        &dataset,
        "noisy_power",
        json!({ "k": 100, "iterations": 1000 }),
        0.2,
    );
    let long = submit(&server.base, &key, long_job).await;
    wait_for(&server.base, &key, &long, &["running"], limit).await;
    let queued = submit(
        &server.base,
        &key,
        job(&dataset, "analyze_gauss", json!({ "k": 2 }), 0.1),
    )
    .await;
    assert_eq!(
        support::job(&server.base, &key, &queued).await["status"],
        "queued"
    );
    server.kill();

    let restarted_at = Instant::now();
    let server = start(&env, &log).await;
    let failed = wait_for(
        &server.base,
        &key,
        &long,
        &["failed", "succeeded", "cancelled"],
        limit,
    )
    .await;
    assert_eq!(failed["status"], "failed", "{failed}\n{}", server.log_text());
    let took = restarted_at.elapsed();
    eprintln!(
        "the killed job was failed {:.1} s after the restart began",
        took.as_secs_f64()
    );
    assert!(
        took < Duration::from_secs(30),
        "failed at start, not after a lease: {took:?}"
    );
    assert!(
        failed["error"].as_str().unwrap_or("").contains("interrupted"),
        "{failed}"
    );

    // The queued job runs; the killed one never does again.
    let ran = wait_for(&server.base, &key, &queued, &["succeeded", "failed"], limit).await;
    assert_eq!(ran["status"], "succeeded", "{ran}\n{}", server.log_text());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let again = support::job(&server.base, &key, &long).await;
    assert_eq!(again["status"], "failed", "never re-run: {again}");
    assert_eq!(again["started_at"], failed["started_at"], "{again}");

    // The ledger: one charge per admitted job, no refund; spent is their sum.
    let (_, ledger) = get(&format!("{}/v1/datasets/{dataset}/ledger", server.base), &key).await;
    let entries = ledger["entries"].as_array().expect("entries");
    let charges: Vec<(&str, f64)> = entries
        .iter()
        .map(|e| (e["entry"].as_str().unwrap(), e["rho"].as_f64().unwrap()))
        .collect();
    assert_eq!(
        charges,
        vec![("charge", 0.1), ("charge", 0.2), ("charge", 0.1)],
        "{ledger}"
    );
    for (entry, job) in entries.iter().zip([&done, &long, &queued]) {
        assert_eq!(entry["job_id"], job.as_str(), "{ledger}");
    }
    let spent = ledger["budget"]["spent"]["rho"].as_f64().unwrap();
    assert!((spent - 0.4).abs() < 1e-12, "{ledger}");

    // Admission goes on from the recorded total: 0.6 is left, so 0.6000001 is refused, 0.6 is not.
    let over = job(&dataset, "analyze_gauss", json!({ "k": 2 }), 0.600_000_1);
    let (status, refused) = post(&format!("{}/v1/jobs", server.base), &key, over).await;
    assert_eq!(status, 409, "{refused}");
    let rest = job(&dataset, "analyze_gauss", json!({ "k": 2 }), 0.6);
    succeeded(&server.base, &key, rest, limit).await;

    // The earlier result is unchanged.
    let (status, mut result_after) = get(&format!("{}{result_path}", server.base), &key).await;
    assert_eq!(status, 200);
    // The receipt proves the same leaf in the log's newer tree (its checkpoint has grown).
    let mut result_before = result_before;
    let (before, after) = (
        result_before.as_object_mut().unwrap().remove("receipt").unwrap(),
        result_after.as_object_mut().unwrap().remove("receipt").unwrap(),
    );
    assert_eq!(
        (&before["leaf"], &before["leaf_index"]),
        (&after["leaf"], &after["leaf_index"])
    );
    assert_eq!(result_after, result_before);
    drop(server);

    let url = format!("sqlite://{}", dir.path().join("privpca.db").display());
    let mut db = sqlx::SqliteConnection::connect(&url).await.unwrap();
    let (check,): (String,) = sqlx::query_as("PRAGMA integrity_check")
        .fetch_one(&mut db)
        .await
        .unwrap();
    assert_eq!(check, "ok");
}
