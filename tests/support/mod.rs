//! Running the real `privpca serve` binary in tests: start it with an environment, wait for
//! readiness, call it, SIGKILL it. Shared by the process-level suites (`tests/crash.rs`,
//! `tests/replicas.rs`, `tests/db_outage.rs`, `tests/federation_live.rs`); each includes it with
//! `mod support;`.

#![allow(dead_code, clippy::unwrap_used)]

pub mod bodies;
pub mod poll;

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use serde_json::{Value, json};

pub const BIN: &str = env!("CARGO_BIN_EXE_privpca");

/// The text of every log in `paths`, each under a `--- path` line (for a failing assertion).
pub fn logs(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| {
            format!(
                "--- {}\n{}",
                p.display(),
                std::fs::read_to_string(p).unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A running `privpca serve`; killed (SIGKILL) when dropped.
pub struct Server {
    pub child: Child,
    pub base: String,
    pub log: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// SIGKILL: no shutdown path runs, nothing is flushed or released.
    pub fn kill(mut self) {
        self.child.kill().expect("kill");
        self.child.wait().expect("wait");
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// A free loopback port for a server started later, from below the kernel's ephemeral range:
/// a port from bind(0) lies inside that range, so an outbound connection (a PostgreSQL pool) can
/// be given it before the server binds (scripts/free-port.sh says the same for the scripts).
pub fn free_port() -> u16 {
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768)
        .max(12000);
    for _ in 0..200 {
        let port = rand::random_range(10000..low);
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port below the ephemeral range")
}

/// The `privpca serve` command on a free loopback port with `env` (on top of the inherited
/// environment), its output appended to `log`; and the base URL it will answer on.
pub fn serve_command(env: &[(&str, String)], log: &Path) -> (Command, String) {
    let port = free_port();
    let mut command = Command::new(BIN);
    command
        .arg("serve")
        .env("PRIVPCA_BIND", format!("127.0.0.1:{port}"))
        // The object store only where a test names it (tests/object_storage.rs), never from
        // the shell that runs the tests.
        .env_remove("PRIVPCA_STORAGE_URL")
        .stdout(append(log))
        .stderr(append(log));
    for (name, value) in env {
        command.env(name, value);
    }
    (command, format!("http://127.0.0.1:{port}"))
}

/// `path` opened for appending (created if missing).
pub fn append(path: &Path) -> std::fs::File {
    OpenOptions::new().create(true).append(true).open(path).unwrap()
}

/// Spawns `privpca serve` (see [`serve_command`]); does not wait for it.
pub fn spawn(env: &[(&str, String)], log: &Path) -> (Child, String) {
    let (mut command, base) = serve_command(env, log);
    (command.spawn().expect("spawn privpca serve"), base)
}

/// Spawns `privpca serve` and waits until `/readyz` answers 200 (panics with its log if it
/// exits or is not ready within 30 s).
pub async fn start(env: &[(&str, String)], log: &Path) -> Server {
    let (child, base) = spawn(env, log);
    ready(child, base, log).await
}

/// Waits until the spawned service at `base` answers `/readyz` with 200 (panics with its log
/// if it exits or is not ready within 30 s).
pub async fn ready(mut child: Child, base: String, log: &Path) -> Server {
    let client = reqwest::Client::new();
    for _ in 0..600 {
        if let Ok(r) = client.get(format!("{base}/readyz")).send().await
            && r.status().is_success()
        {
            return Server {
                child,
                base,
                log: log.to_path_buf(),
            };
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "privpca serve exited with {status}: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = child.kill();
    panic!(
        "privpca serve did not become ready: {}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

/// Waits for a child process to exit; kills it and returns `None` after `limit`.
pub fn wait_exit(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let until = std::time::Instant::now() + limit;
    while std::time::Instant::now() < until {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    None
}

/// One request; the body parsed as JSON (or kept as a string).
pub async fn call(method: reqwest::Method, url: &str, key: &str, body: Option<Value>) -> (u16, Value) {
    let mut request = reqwest::Client::new().request(method, url).bearer_auth(key);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

pub async fn get(url: &str, key: &str) -> (u16, Value) {
    call(reqwest::Method::GET, url, key, None).await
}

pub async fn post(url: &str, key: &str, body: Value) -> (u16, Value) {
    call(reqwest::Method::POST, url, key, Some(body)).await
}

/// A C-order f64 `.npy` of `n` rows of `d` values, each row of norm at most 1 (seeded).
pub fn npy(n: usize, d: usize, seed: u64) -> Vec<u8> {
    let mut out = privpca::http::jobs::npy_header(n, d);
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

/// A new tenant's API key.
pub async fn tenant(base: &str, admin: &str, name: &str) -> String {
    let (status, tenant) = post(&format!("{base}/v1/tenants"), admin, json!({ "name": name })).await;
    assert_eq!(status, 201, "{tenant}");
    tenant["api_key"].as_str().unwrap().to_string()
}

/// A private records dataset (β = 1) with a ρ budget and nothing uploaded yet; its id.
pub async fn records(base: &str, key: &str, name: &str, rho: f64) -> String {
    let (status, created) = post(
        &format!("{base}/v1/datasets"),
        key,
        json!({"name": name, "kind": "records", "row_norm_bound": 1.0, "budget": {"rho": rho}}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    created["id"].as_str().unwrap().to_string()
}

/// Uploads `body` as the data of dataset `id`; asserts it is accepted.
pub async fn upload(base: &str, key: &str, id: &str, content_type: &str, body: Vec<u8>) {
    let upload = reqwest::Client::new()
        .put(format!("{base}/v1/datasets/{id}/data"))
        .bearer_auth(key)
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    assert!(upload.status().is_success(), "{}", upload.text().await.unwrap());
}

/// A private records dataset with a ρ budget, `n` × `d` seeded rows uploaded; its id.
pub async fn dataset(base: &str, key: &str, rho: f64, n: usize, d: usize) -> String {
    let id = records(base, key, "shared", rho).await;
    upload(base, key, &id, "application/x-npy", npy(n, d, 7)).await;
    id
}

/// Submits a job (`body` as `POST /v1/jobs` takes it), expects 202; its id.
pub async fn submit(base: &str, key: &str, body: Value) -> String {
    let (status, job) = post(&format!("{base}/v1/jobs"), key, body).await;
    assert_eq!(status, 202, "{job}");
    job["id"].as_str().unwrap().to_string()
}

/// Waits for a job to end, asserts that it succeeded, and returns its result.
pub async fn result(base: &str, key: &str, id: &str, limit: Duration) -> Value {
    let view = wait_for(base, key, id, &["succeeded", "failed", "cancelled"], limit).await;
    assert_eq!(view["status"], "succeeded", "{view}");
    let (status, result) = get(&format!("{base}/v1/jobs/{id}/result"), key).await;
    assert_eq!(status, 200, "{result}");
    result
}

pub async fn job(base: &str, key: &str, id: &str) -> Value {
    get(&format!("{base}/v1/jobs/{id}"), key).await.1
}

/// Polls a job until its status is one of `until` (panics after `limit`).
pub async fn wait_for(base: &str, key: &str, id: &str, until: &[&str], limit: Duration) -> Value {
    poll::until(limit, Duration::from_millis(20), || async {
        let view = job(base, key, id).await;
        if until.iter().any(|s| view["status"] == *s) {
            Ok(view)
        } else {
            Err(format!("job {id} never reached {until:?}: {view}"))
        }
    })
    .await
}

/// The server the PostgreSQL tests use; an ignored test run without it fails, never skips.
pub fn postgres_url() -> String {
    std::env::var("PRIVPCA_TEST_POSTGRES_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .expect("PRIVPCA_TEST_POSTGRES_URL names the PostgreSQL server (scripts/postgres.sh)")
}

/// A fresh, empty database on the PostgreSQL server at `base` (a URL naming a database its user
/// may create databases from); returns its URL. Each process-level test on PostgreSQL uses its own.
pub async fn fresh_database(base: &str, prefix: &str) -> String {
    use sqlx::{Connection, Executor};
    let name = format!("{prefix}_{}", uuid::Uuid::new_v4().simple());
    let mut admin = sqlx::PgConnection::connect(base)
        .await
        .expect("connect to PRIVPCA_TEST_POSTGRES_URL");
    admin
        .execute(format!("CREATE DATABASE {name}").as_str())
        .await
        .expect("create database");
    admin.close().await.ok();
    let (server, _) = base.rsplit_once('/').expect("a URL with a database name");
    let query = base
        .split_once('?')
        .map(|(_, q)| format!("?{q}"))
        .unwrap_or_default();
    format!("{server}/{name}{query}")
}
