//! Replicas on a real PostgreSQL: two `privpca serve` processes (the real binary) share one
//! database, one admin key and one data directory. The PostgreSQL test is ignored by a plain
//! `cargo test`: run it with `PRIVPCA_TEST_POSTGRES_URL` naming a server whose user may create
//! databases (`scripts/postgres.sh` starts one) and `-- --ignored` (CI does); it creates its
//! own fresh database.
//!
//! - A replica SIGKILLed while running a job: the other replica alone fails the job once the
//!   lease runs out, with its ρ 0.2 charge kept in the ledger, and never re-runs it.
//! - With the killed replica restarted, 50 concurrent submissions of ρ 0.1 against a ρ 1.0
//!   budget, alternating between the replicas, admit exactly 10 and refuse 40.
//! - A database unreachable at start: the binary exits non-zero with a clear message.

#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Server, dataset, get, job, post, wait_exit};

const ADMIN: &str = "replica-test-admin";
/// A short lease, so that the kill test takes seconds.
const LEASE_SECS: u64 = 2;

/// A replica's environment: one worker, a short lease, the shared database and data directory.
fn replica_env(name: &str, database_url: &str, data_dir: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("PRIVPCA_DATABASE_URL", database_url.to_string()),
        ("PRIVPCA_DATA_DIR", data_dir.display().to_string()),
        ("PRIVPCA_ADMIN_KEY", ADMIN.to_string()),
        ("PRIVPCA_REPLICA_ID", name.to_string()),
        ("PRIVPCA_JOB_LEASE_SECS", LEASE_SECS.to_string()),
        ("PRIVPCA_WORKERS", "1".to_string()),
        ("PRIVPCA_THREADS", "1".to_string()),
    ]
}

async fn start(name: &str, database_url: &str, data_dir: &Path, log: &Path) -> Server {
    support::start(&replica_env(name, database_url, data_dir), log).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: set PRIVPCA_TEST_POSTGRES_URL (CI runs it)"]
async fn a_killed_replicas_job_is_failed_by_the_other_and_admission_never_overspends() {
    let base_url = support::postgres_url();
    let database = support::fresh_database(&base_url, "privpca_replicas").await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (log_a, log_b) = (dir.path().join("a.log"), dir.path().join("b.log"));
    let logs = || {
        format!(
            "--- a ---\n{}\n--- b ---\n{}",
            std::fs::read_to_string(&log_a).unwrap_or_default(),
            std::fs::read_to_string(&log_b).unwrap_or_default()
        )
    };

    // Replica A alone, so that A is the one that claims the long job.
    let a = start("replica-a", &database, &data, &log_a).await;
    let key = support::tenant(&a.base, ADMIN, "replicas").await;
    let long_data = dataset(&a.base, &key, 1.0, 4000, 300).await;
    let long_id = support::submit(
        &a.base,
        &key,
        json!({"dataset_id": long_data, "algorithm": "noisy_power",
               "params": {"k": 100, "iterations": 1000}, "privacy": {"rho": 0.2}}),
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let view = job(&a.base, &key, &long_id).await;
        match view["status"].as_str() {
            Some("running") => break,
            Some("queued") => {}
            other => panic!(
                "the long job ended before the kill ({other:?}): {view}\n{}",
                logs()
            ),
        }
        assert!(
            Instant::now() < deadline,
            "the long job was never claimed\n{}",
            logs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // B joins, then A dies mid-job.
    let b = start("replica-b", &database, &data, &log_b).await;
    a.kill();
    let killed_at = Instant::now();
    let failed = loop {
        let view = job(&b.base, &key, &long_id).await;
        if view["status"] == "failed" {
            break view;
        }
        assert_eq!(view["status"], "running", "{view}\n{}", logs());
        assert!(
            killed_at.elapsed() < Duration::from_secs(120),
            "replica B did not fail the job within 2 minutes\n{}",
            logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let took = killed_at.elapsed();
    assert!(
        failed["error"].as_str().unwrap_or("").contains("lease"),
        "{failed}"
    );
    eprintln!(
        "replica B failed the killed replica's job {:.1} s after the kill",
        took.as_secs_f64()
    );
    let (_, ledger) = get(&format!("{}/v1/datasets/{long_data}/ledger", b.base), &key).await;
    let entries = ledger["entries"].as_array().expect("ledger entries");
    let charges: Vec<&Value> = entries
        .iter()
        .filter(|e| e["job_id"] == long_id.as_str())
        .collect();
    assert_eq!(charges.len(), 1, "one charge and no refund: {ledger}");
    assert_eq!(
        charges[0]["kind"].as_str().or(charges[0]["entry"].as_str()),
        Some("charge"),
        "{ledger}"
    );
    assert!(
        (charges[0]["rho"].as_f64().unwrap() - 0.2).abs() < 1e-9,
        "{ledger}"
    );
    // Never re-run: it stays failed.
    tokio::time::sleep(Duration::from_secs(LEASE_SECS)).await;
    assert_eq!(job(&b.base, &key, &long_id).await["status"], "failed");

    // A restarts (same name); 50 concurrent submissions over both replicas.
    let a = start("replica-a", &database, &data, &log_a).await;
    let small = dataset(&b.base, &key, 1.0, 200, 5).await;
    let bases = [a.base.clone(), b.base.clone()];
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..50 {
        let url = format!("{}/v1/jobs", bases[i % 2]);
        let key = key.clone();
        let body = json!({"dataset_id": small, "algorithm": "analyze_gauss",
                          "params": {"k": 2}, "privacy": {"rho": 0.1}});
        tasks.spawn(async move { post(&url, &key, body).await });
    }
    let mut admitted = 0;
    let mut refused = 0;
    while let Some(outcome) = tasks.join_next().await {
        let (status, body) = outcome.unwrap();
        match status {
            202 => admitted += 1,
            409 => {
                assert!(body.to_string().contains("budget"), "{body}");
                refused += 1;
            }
            other => panic!("unexpected {other}: {body}\n{}", logs()),
        }
    }
    assert_eq!((admitted, refused), (10, 40), "{}", logs());
    let (_, view) = get(&format!("{}/v1/datasets/{small}", a.base), &key).await;
    let spent = view["budget"]["spent"]["rho"].as_f64().unwrap();
    assert!((spent - 1.0).abs() < 1e-9, "{view}");
    drop(a);
    drop(b);
}

#[tokio::test]
async fn an_unreachable_database_at_start_is_a_clear_error_and_a_non_zero_exit() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("serve.log");
    // Nothing listens on a port just released.
    let url = format!("postgres://privpca@127.0.0.1:{}/privpca", support::free_port());
    let (mut child, _) = support::spawn(&replica_env("lonely", &url, &dir.path().join("data")), &log);
    let status = wait_exit(&mut child, Duration::from_secs(60))
        .expect("the service kept running without its database");
    assert!(!status.success());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("opening the database"), "{text}");
    assert!(!text.contains("panicked"), "{text}");
}

#[tokio::test]
async fn a_postgres_database_without_an_admin_key_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("serve.log");
    let status = Command::new(support::BIN)
        .arg("serve")
        .env("PRIVPCA_BIND", format!("127.0.0.1:{}", support::free_port()))
        .env("PRIVPCA_DATABASE_URL", "postgres://privpca@127.0.0.1:1/privpca")
        .env("PRIVPCA_DATA_DIR", dir.path().join("data"))
        .env_remove("PRIVPCA_ADMIN_KEY")
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(dir.path().join("stderr.log")).unwrap())
        .status()
        .unwrap();
    assert!(!status.success());
    let text = std::fs::read_to_string(&log).unwrap()
        + &std::fs::read_to_string(dir.path().join("stderr.log")).unwrap();
    assert!(text.contains("PRIVPCA_ADMIN_KEY"), "{text}");
}
