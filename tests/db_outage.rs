//! PostgreSQL lost while the service runs (docs/deployment.md, "Faults" → "Database lost while
//! running"): one real `privpca serve` on a throwaway cluster, a long job running, then the
//! cluster is stopped with `pg_ctl -m fast stop` and started again on the same port.
//!
//! - While the database is down, requests that need it (a job's view, a submission) get a 503
//!   problem document, never a 500, and `/readyz` answers 503.
//! - The job that was running keeps computing; the database comes back within the lease, the
//!   job finishes `succeeded`, with exactly one charge and no refund in the ledger.
//!
//! Stopping the cluster would break any other test using it at the same time, so this is its
//! own test binary with one test. It is ignored by a plain `cargo test`: run it with
//! `-- --ignored` after `eval "$(scripts/postgres.sh)"` (which sets `PRIVPCA_TEST_POSTGRES_URL`
//! and `PRIVPCA_PG_DIR`), as root so that it may run `runuser -u postgres` (CI does).

#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Server, get, post, start, tenant};

const ADMIN: &str = "outage-test-admin";
/// Long enough to cover the outage: the job's lease must not run out while the database is
/// away. Each request made during the outage waits out the pool's 5 s acquire timeout, so the
/// outage below lasts about 30 s.
const LEASE_SECS: u64 = 60;

/// The newest PostgreSQL server binaries, as scripts/postgres.sh picks them.
fn bindir() -> PathBuf {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("/usr/lib/postgresql")
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("bin"))
        .filter(|d| d.join("pg_ctl").exists())
        .collect();
    dirs.sort_by_key(|d| {
        d.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    dirs.pop().expect("PostgreSQL server binaries")
}

fn pg_ctl(pg_dir: &Path, args: &[&str]) {
    let data = pg_dir.join("data");
    let status = Command::new("runuser")
        .args(["-u", "postgres", "--"])
        .arg(bindir().join("pg_ctl"))
        .arg("-D")
        .arg(&data)
        .args(args)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run pg_ctl");
    assert!(status.success(), "pg_ctl {args:?} failed: {status}");
}

/// One request with its status, Content-Type and body (JSON, or the text as a string).
async fn exchange(
    method: reqwest::Method,
    url: &str,
    key: &str,
    body: Option<Value>,
) -> (u16, String, Value) {
    let mut request = reqwest::Client::new().request(method, url).bearer_auth(key);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let text = response.text().await.unwrap();
    (
        status,
        content_type,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// A 503 problem document, never a 500.
fn assert_problem_503(what: &str, (status, content_type, body): &(u16, String, Value), log: &str) {
    assert_eq!(*status, 503, "{what}: {body}\n{log}");
    assert!(
        content_type.starts_with("application/problem+json"),
        "{what}: Content-Type {content_type}: {body}"
    );
    assert_eq!(body["status"], 503, "{what}: {body}");
}

/// Stops the cluster again if the test fails while it is down, so the next test (or
/// `scripts/postgres.sh stop`) finds it as it left it.
struct Restart<'a>(&'a Path, bool);

impl Drop for Restart<'_> {
    fn drop(&mut self) {
        if self.1 {
            let log = self.0.join("log");
            let _ = std::panic::catch_unwind(|| {
                pg_ctl(self.0, &["-l", log.to_str().unwrap(), "-w", "-t", "60", "start"])
            });
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: set PRIVPCA_TEST_POSTGRES_URL and PRIVPCA_PG_DIR (CI runs it)"]
async fn a_database_outage_is_a_503_and_the_running_job_survives_it() {
    let set = |name: &str| {
        std::env::var(name)
            .ok()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| panic!("{name} is not set: run `eval \"$(scripts/postgres.sh)\"` first"))
    };
    let (base_url, pg_dir) = (set("PRIVPCA_TEST_POSTGRES_URL"), set("PRIVPCA_PG_DIR"));
    let pg_dir = PathBuf::from(pg_dir);
    let database = support::fresh_database(&base_url, "privpca_outage").await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("serve.log");
    let server: Server = start(
        &[
            ("PRIVPCA_DATABASE_URL", database.clone()),
            ("PRIVPCA_DATA_DIR", dir.path().join("data").display().to_string()),
            ("PRIVPCA_ADMIN_KEY", ADMIN.to_string()),
            ("PRIVPCA_REPLICA_ID", "outage".to_string()),
            ("PRIVPCA_JOB_LEASE_SECS", LEASE_SECS.to_string()),
            ("PRIVPCA_WORKERS", "1".to_string()),
            ("PRIVPCA_THREADS", "1".to_string()),
        ],
        &log,
    )
    .await;
    let base = server.base.clone();
    let key = tenant(&base, ADMIN, "outage").await;
    let data = support::dataset(&base, &key, 1.0, N, D).await;
    let submit = json!({"dataset_id": data, "algorithm": "noisy_power",
                        "params": {"k": K, "iterations": ITERATIONS}, "privacy": {"rho": 0.2}});
    let (status, long) = post(&format!("{base}/v1/jobs"), &key, submit.clone()).await;
    assert_eq!(status, 202, "{long}");
    let id = long["id"].as_str().unwrap().to_string();
    let submitted = Instant::now();
    let running = support::wait_for(
        &base,
        &key,
        &id,
        &["running", "succeeded", "failed", "cancelled"],
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(running["status"], "running", "{running}\n{}", server.log_text());

    // The database goes away mid-job.
    let mut restart = Restart(&pg_dir, false);
    pg_ctl(&pg_dir, &["-m", "fast", "-w", "stop"]);
    restart.1 = true;
    let stopped_at = Instant::now();
    eprintln!(
        "database stopped {:.1} s after submission",
        submitted.elapsed().as_secs_f64()
    );

    let view = exchange(reqwest::Method::GET, &format!("{base}/v1/jobs/{id}"), &key, None).await;
    assert_problem_503("GET /v1/jobs/{id}", &view, &server.log_text());
    let ready = exchange(reqwest::Method::GET, &format!("{base}/readyz"), "", None).await;
    assert_eq!(ready.0, 503, "/readyz while the database is down: {}", ready.2);
    let submission = exchange(
        reqwest::Method::POST,
        &format!("{base}/v1/jobs"),
        &key,
        Some(json!({"dataset_id": data, "algorithm": "noisy_power",
                    "params": {"k": 2, "iterations": 2}, "privacy": {"rho": 0.1}})),
    )
    .await;
    assert_problem_503("POST /v1/jobs", &submission, &server.log_text());
    // A second round, after the pool has had time to notice: still 503, not 500.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let view = exchange(reqwest::Method::GET, &format!("{base}/v1/jobs/{id}"), &key, None).await;
    assert_problem_503("GET /v1/jobs/{id} (again)", &view, &server.log_text());
    let ledger = exchange(
        reqwest::Method::GET,
        &format!("{base}/v1/datasets/{data}/ledger"),
        &key,
        None,
    )
    .await;
    assert_problem_503("GET /v1/datasets/{id}/ledger", &ledger, &server.log_text());

    // The database comes back, well within the lease.
    let log_file = pg_dir.join("log");
    pg_ctl(
        &pg_dir,
        &["-l", log_file.to_str().unwrap(), "-w", "-t", "60", "start"],
    );
    restart.1 = false;
    let outage = stopped_at.elapsed();
    assert!(
        outage < Duration::from_secs(LEASE_SECS),
        "the outage ({outage:?}) outlasted the lease"
    );

    let deadline = Instant::now() + Duration::from_secs(60);
    let finished = loop {
        let (status, content_type, view) =
            exchange(reqwest::Method::GET, &format!("{base}/v1/jobs/{id}"), &key, None).await;
        assert_ne!(status, 500, "{view}\n{}", server.log_text());
        if status == 200 && view["status"] != "running" {
            break view;
        }
        if status == 503 {
            assert!(content_type.starts_with("application/problem+json"), "{view}");
        }
        assert!(
            Instant::now() < deadline,
            "job {id} did not finish within 60 s of the database's return: {view}\n{}",
            server.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let job_took = submitted.elapsed();
    assert_eq!(
        finished["status"],
        "succeeded",
        "{finished}\n{}",
        server.log_text()
    );
    eprintln!(
        "outage {:.1} s; job finished {:.1} s after submission",
        outage.as_secs_f64(),
        job_took.as_secs_f64()
    );

    let (status, ledger) = get(&format!("{base}/v1/datasets/{data}/ledger"), &key).await;
    assert_eq!(status, 200, "{ledger}");
    let entries = ledger["entries"].as_array().expect("ledger entries");
    let mine: Vec<&Value> = entries.iter().filter(|e| e["job_id"] == id.as_str()).collect();
    assert_eq!(mine.len(), 1, "one charge and no refund: {ledger}");
    assert_eq!(
        mine[0]["kind"].as_str().or(mine[0]["entry"].as_str()),
        Some("charge"),
        "{ledger}"
    );
    assert!((mine[0]["rho"].as_f64().unwrap() - 0.2).abs() < 1e-9, "{ledger}");
    // The submission refused during the outage left no trace.
    assert_eq!(entries.len(), 1, "{ledger}");

    let ready = exchange(reqwest::Method::GET, &format!("{base}/readyz"), "", None).await;
    assert_eq!(ready.0, 200, "/readyz after the database's return: {}", ready.2);
    let text = server.log_text();
    assert!(!text.contains("panicked"), "{text}");
    assert!(
        !text.contains(" 500 ") && !text.contains("status=500"),
        "a 500 in the log:\n{text}"
    );
    drop(server);
}

/// The long job: big enough to be running for several seconds in a debug build.
const N: usize = 4000;
const D: usize = 300;
const K: usize = 100;
const ITERATIONS: usize = 1000;
