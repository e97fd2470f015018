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
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_privpca");
const ADMIN: &str = "replica-test-admin";
/// A short lease, so that the kill test takes seconds.
const LEASE_SECS: u64 = 2;

/// The server the PostgreSQL test uses; an ignored test run without it fails, never skips.
fn postgres_url() -> String {
    std::env::var("PRIVPCA_TEST_POSTGRES_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .expect("PRIVPCA_TEST_POSTGRES_URL names the PostgreSQL server (scripts/postgres.sh)")
}

struct Replica {
    child: Child,
    base: String,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Replica {
    /// SIGKILL: no shutdown path runs, the job's lease is simply no longer renewed.
    fn kill(mut self) {
        self.child.kill().expect("kill");
        self.child.wait().expect("wait");
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn serve(name: &str, database_url: &str, data_dir: &Path, log: &Path) -> (Child, String) {
    let port = free_port();
    let child = Command::new(BIN)
        .arg("serve")
        .env("PRIVPCA_BIND", format!("127.0.0.1:{port}"))
        .env("PRIVPCA_DATABASE_URL", database_url)
        .env("PRIVPCA_DATA_DIR", data_dir)
        .env("PRIVPCA_ADMIN_KEY", ADMIN)
        .env("PRIVPCA_REPLICA_ID", name)
        .env("PRIVPCA_JOB_LEASE_SECS", LEASE_SECS.to_string())
        .env("PRIVPCA_WORKERS", "1")
        .env("PRIVPCA_THREADS", "1")
        .stdout(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .unwrap(),
        )
        .stderr(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .unwrap(),
        )
        .spawn()
        .expect("spawn privpca serve");
    (child, format!("http://127.0.0.1:{port}"))
}

async fn start(name: &str, database_url: &str, data_dir: &Path, log: &Path) -> Replica {
    let (mut child, base) = serve(name, database_url, data_dir, log);
    let client = reqwest::Client::new();
    for _ in 0..600 {
        if let Ok(r) = client.get(format!("{base}/readyz")).send().await
            && r.status().is_success()
        {
            return Replica { child, base };
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "replica {name} exited with {status}: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = child.kill();
    panic!("replica {name} did not become ready");
}

async fn call(method: reqwest::Method, url: &str, key: &str, body: Option<Value>) -> (u16, Value) {
    let mut request = reqwest::Client::new().request(method, url).bearer_auth(key);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// A C-order f64 `.npy` of `n` rows of `d` values, each row of norm at most 1 (seeded).
fn npy(n: usize, d: usize, seed: u64) -> Vec<u8> {
    let header = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': ({n}, {d}), }}");
    let mut header = header.into_bytes();
    let total = 10 + header.len() + 1;
    header.extend(std::iter::repeat_n(b' ', (64 - total % 64) % 64));
    header.push(b'\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend(u16::try_from(header.len()).unwrap().to_le_bytes());
    out.extend(header);
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let scale = 1.0 / (d as f64).sqrt();
    for _ in 0..n * d {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let unit = (state >> 11) as f64 / (1u64 << 53) as f64;
        out.extend(((2.0 * unit - 1.0) * scale).to_le_bytes());
    }
    out
}

async fn tenant(base: &str) -> String {
    let (status, tenant) = call(
        reqwest::Method::POST,
        &format!("{base}/v1/tenants"),
        ADMIN,
        Some(json!({"name": "replicas"})),
    )
    .await;
    assert_eq!(status, 201, "{tenant}");
    tenant["api_key"].as_str().unwrap().to_string()
}

async fn dataset(base: &str, key: &str, rho: f64, n: usize, d: usize) -> String {
    let (status, created) = call(
        reqwest::Method::POST,
        &format!("{base}/v1/datasets"),
        key,
        Some(json!({"name": "shared", "kind": "records", "row_norm_bound": 1.0, "budget": {"rho": rho}})),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_string();
    let upload = reqwest::Client::new()
        .put(format!("{base}/v1/datasets/{id}/data"))
        .bearer_auth(key)
        .header("content-type", "application/x-npy")
        .body(npy(n, d, 7))
        .send()
        .await
        .unwrap();
    assert!(upload.status().is_success(), "{}", upload.text().await.unwrap());
    id
}

async fn job(base: &str, key: &str, id: &str) -> Value {
    call(reqwest::Method::GET, &format!("{base}/v1/jobs/{id}"), key, None)
        .await
        .1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: set PRIVPCA_TEST_POSTGRES_URL (CI runs it)"]
async fn a_killed_replicas_job_is_failed_by_the_other_and_admission_never_overspends() {
    let base_url = postgres_url();
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
    let key = tenant(&a.base).await;
    let long_data = dataset(&a.base, &key, 1.0, 4000, 300).await;
    let (status, long) = call(
        reqwest::Method::POST,
        &format!("{}/v1/jobs", a.base),
        &key,
        Some(json!({"dataset_id": long_data, "algorithm": "noisy_power",
                    "params": {"k": 100, "iterations": 1000}, "privacy": {"rho": 0.2}})),
    )
    .await;
    assert_eq!(status, 202, "{long}");
    let long_id = long["id"].as_str().unwrap().to_string();
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
    let (_, ledger) = call(
        reqwest::Method::GET,
        &format!("{}/v1/datasets/{long_data}/ledger", b.base),
        &key,
        None,
    )
    .await;
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
        tasks.spawn(async move { call(reqwest::Method::POST, &url, &key, Some(body)).await });
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
    let (_, view) = call(
        reqwest::Method::GET,
        &format!("{}/v1/datasets/{small}", a.base),
        &key,
        None,
    )
    .await;
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
    let url = format!("postgres://privpca@127.0.0.1:{}/privpca", free_port());
    let (mut child, _) = serve("lonely", &url, &dir.path().join("data"), &log);
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the service kept running without its database"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("opening the database"), "{text}");
    assert!(!text.contains("panicked"), "{text}");
}

#[tokio::test]
async fn a_postgres_database_without_an_admin_key_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("serve.log");
    let status = Command::new(BIN)
        .arg("serve")
        .env("PRIVPCA_BIND", format!("127.0.0.1:{}", free_port()))
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
