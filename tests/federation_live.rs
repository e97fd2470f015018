//! Multi-process test of a live study: the real `privpca serve` and four real `privpca site`
//! processes on loopback, each holding a disjoint shard; one is SIGKILLed after round 2. Then a
//! second study in which one site's own budget is too small: it must refuse before sending
//! anything and the study must not succeed.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nalgebra::DMatrix;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rand_distr::{Distribution, StandardNormal};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_privpca");
const ADMIN: &str = "live-test-admin";

struct Server {
    child: Child,
    base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn start_server(dir: &Path) -> Server {
    let port = free_port();
    let mut child = Command::new(BIN)
        .args([
            "serve",
            "--admin-key",
            ADMIN,
            "--bind",
            &format!("127.0.0.1:{port}"),
        ])
        .arg("--database-url")
        .arg(format!("sqlite://{}", dir.join("privpca.db").display()))
        .arg("--data-dir")
        .arg(dir.join("data"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("server.log")).unwrap())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    for _ in 0..200 {
        if let Ok(r) = client.get(format!("{base}/healthz")).send().await
            && r.status().is_success()
        {
            return Server { child, base };
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the server did not start");
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

/// Rows with a planted top-3 spectrum plus noise, clipped to norm 1: n×d, row-major.
fn planted_rows(n: usize, d: usize, seed: u64) -> Vec<Vec<f64>> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut g = || -> f64 { StandardNormal.sample(&mut rng) };
    let basis = DMatrix::from_fn(d, 3, |_, _| g()).qr().q();
    let scales = [0.45, 0.3, 0.2];
    (0..n)
        .map(|_| {
            let mut x: Vec<f64> = (0..d).map(|_| 0.03 * g()).collect();
            for (j, s) in scales.iter().enumerate() {
                let z = s * g();
                for (i, xi) in x.iter_mut().enumerate() {
                    *xi += z * basis[(i, j)];
                }
            }
            let norm = x.iter().map(|v| v * v).sum::<f64>().sqrt();
            if norm > 1.0 {
                x.iter_mut().for_each(|v| *v /= norm);
            }
            x
        })
        .collect()
}

fn to_csv(rows: &[Vec<f64>]) -> String {
    rows.iter()
        .map(|r| {
            r.iter()
                .map(|v| format!("{v:.17e}"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// Captured energy tr(QᵀAQ)/Σ_{i≤k} λ_i on A = XᵀX.
fn energy(rows: &[Vec<f64>], basis: &Value) -> f64 {
    let d = rows[0].len();
    let x = DMatrix::from_fn(rows.len(), d, |i, j| rows[i][j]);
    let a = x.transpose() * &x;
    let cols = basis.as_array().unwrap();
    let q = DMatrix::from_fn(d, cols.len(), |i, j| cols[j][i].as_f64().unwrap());
    let mut eig: Vec<f64> = a.clone().symmetric_eigen().eigenvalues.iter().copied().collect();
    eig.sort_by(|a, b| b.total_cmp(a));
    (q.transpose() * a * &q).trace() / eig.iter().take(cols.len()).sum::<f64>()
}

fn site(server: &Server, token: &str, data: &Path, ledger: &Path, budget: f64, log: &Path) -> Child {
    Command::new(BIN)
        .args([
            "site",
            "--server",
            &server.base,
            "--token",
            token,
            "--budget-rho",
            &budget.to_string(),
        ])
        .arg("--data")
        .arg(data)
        .arg("--ledger")
        .arg(ledger)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap()
}

fn wait_exit(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    None
}

fn logs(paths: &[PathBuf]) -> String {
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

async fn study(server: &Server, key: &str, sites: usize, threshold: u32, join_timeout: u64) -> Value {
    let body = json!({
        "name": "live",
        "algorithm": "federated_power",
        "n_features": 20,
        "relation": "replace_one",
        "row_norm_bound": 1.0,
        "params": {"k": 3, "iterations": 40},
        "privacy": {"rho": 0.5},
        "threshold": threshold,
        "sites": (0..sites).map(|i| json!({"name": format!("site-{}", i + 1)})).collect::<Vec<_>>(),
        "join_timeout_seconds": join_timeout,
        "round_timeout_seconds": 3,
    });
    let (status, created) = call(
        reqwest::Method::POST,
        &format!("{}/v1/studies", server.base),
        key,
        Some(body),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    created
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_sites_one_killed_and_a_site_over_its_own_budget() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_server(dir.path()).await;
    let (status, tenant) = call(
        reqwest::Method::POST,
        &format!("{}/v1/tenants", server.base),
        ADMIN,
        Some(json!({"name": "t"})),
    )
    .await;
    assert_eq!(status, 201, "{tenant}");
    let key = tenant["api_key"].as_str().unwrap().to_string();

    let rows = planted_rows(4000, 20, 7);
    let shards: Vec<PathBuf> = rows
        .chunks(1000)
        .enumerate()
        .map(|(i, chunk)| {
            let path = dir.path().join(format!("shard-{i}.csv"));
            std::fs::write(&path, to_csv(chunk)).unwrap();
            path
        })
        .collect();

    // Study 1: four sites, t = 3; site 4 is killed after round 2.
    let created = study(&server, &key, 4, 3, 120).await;
    let id = created["id"].as_str().unwrap().to_string();
    let url = format!("{}/v1/studies/{id}", server.base);
    let mut logs_paths = Vec::new();
    let mut children: Vec<Child> = (0..4)
        .map(|i| {
            let log = dir.path().join(format!("site-{i}.log"));
            logs_paths.push(log.clone());
            let token = created["sites"][i]["token"].as_str().unwrap();
            // Site 1's own budget is exactly the study's cost: it must fit.
            let budget = if i == 0 { 0.5 } else { 1.0 };
            site(
                &server,
                token,
                &shards[i],
                &dir.path().join(format!("ledger-{i}.db")),
                budget,
                &log,
            )
        })
        .collect();
    let until = Instant::now() + Duration::from_secs(120);
    loop {
        let (_, view) = call(reqwest::Method::GET, &url, &key, None).await;
        if view["progress"]["done"].as_i64().unwrap_or(0) >= 2 {
            children[3].kill().unwrap();
            let _ = children[3].wait();
            break;
        }
        assert!(
            view["status"] == "enrolling" || view["status"] == "running",
            "{view}\n{}",
            logs(&logs_paths)
        );
        assert!(
            Instant::now() < until,
            "round 2 never completed\n{}",
            logs(&logs_paths)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for child in children.iter_mut().take(3) {
        let status = wait_exit(child, Duration::from_secs(180));
        assert_eq!(
            status.map(|s| s.code()),
            Some(Some(0)),
            "a surviving site failed\n{}",
            logs(&logs_paths)
        );
    }
    let (_, view) = call(reqwest::Method::GET, &url, &key, None).await;
    assert_eq!(view["status"], "succeeded", "{view}");
    assert_eq!(view["sites"][3]["status"], "dropped", "{view}");
    for i in 0..3 {
        assert_eq!(view["sites"][i]["status"], "done", "{view}");
    }
    let (_, result) = call(reqwest::Method::GET, &format!("{url}/result"), &key, None).await;
    let federated = energy(&rows, &result["basis"]);

    // Central noisy_power on the pooled data at the same ρ and iterations.
    let (_, dataset) = call(
        reqwest::Method::POST,
        &format!("{}/v1/datasets", server.base),
        &key,
        Some(json!({"name": "pooled", "kind": "records", "row_norm_bound": 1.0, "budget": {"rho": 1.0}})),
    )
    .await;
    let dataset_id = dataset["id"].as_str().unwrap();
    let upload = reqwest::Client::new()
        .put(format!("{}/v1/datasets/{dataset_id}/data", server.base))
        .bearer_auth(&key)
        .header("content-type", "text/csv")
        .body(to_csv(&rows))
        .send()
        .await
        .unwrap();
    assert!(upload.status().is_success());
    let (status, job) = call(
        reqwest::Method::POST,
        &format!("{}/v1/jobs", server.base),
        &key,
        Some(json!({"dataset_id": dataset_id, "algorithm": "noisy_power", "params": {"k": 3, "iterations": 40}, "privacy": {"rho": 0.5}})),
    )
    .await;
    assert_eq!(status, 202, "{job}");
    let job_url = format!("{}/v1/jobs/{}", server.base, job["id"].as_str().unwrap());
    for _ in 0..600 {
        let (_, j) = call(reqwest::Method::GET, &job_url, &key, None).await;
        if j["status"] == "succeeded" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (_, central_result) = call(reqwest::Method::GET, &format!("{job_url}/result"), &key, None).await;
    let central = energy(&rows, &central_result["basis"]);
    assert!(
        (federated - central).abs() <= 0.05,
        "federated energy {federated:.4} vs central {central:.4}"
    );
    assert!(federated > 0.9, "federated energy {federated:.4}");

    // Study 2: three sites, t = 3; site 3's own budget (ρ 0.1) is below the cost (ρ 0.5).
    let created = study(&server, &key, 3, 3, 4).await;
    let id = created["id"].as_str().unwrap().to_string();
    let mut logs2 = Vec::new();
    let mut children: Vec<Child> = (0..3)
        .map(|i| {
            let log = dir.path().join(format!("study2-site-{i}.log"));
            logs2.push(log.clone());
            let token = created["sites"][i]["token"].as_str().unwrap();
            let budget = if i == 2 { 0.1 } else { 1.0 };
            site(
                &server,
                token,
                &shards[i],
                &dir.path().join(format!("study2-ledger-{i}.db")),
                budget,
                &log,
            )
        })
        .collect();
    let refused = wait_exit(&mut children[2], Duration::from_secs(30));
    assert!(
        matches!(refused, Some(s) if !s.success()),
        "the over-budget site did not refuse\n{}",
        logs(&logs2)
    );
    for child in children.iter_mut().take(2) {
        let status = wait_exit(child, Duration::from_secs(60));
        assert!(
            matches!(status, Some(s) if !s.success()),
            "a site reported success\n{}",
            logs(&logs2)
        );
    }
    let (_, view) = call(
        reqwest::Method::GET,
        &format!("{}/v1/studies/{id}", server.base),
        &key,
        None,
    )
    .await;
    assert_ne!(view["status"], "succeeded", "{view}");
    assert_eq!(
        view["sites"][2]["status"], "invited",
        "the refusing site sent something: {view}"
    );
    assert!(
        view["sites"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["charged"].is_null()),
        "{view}"
    );
}

/// Creates a study from `body`, runs one `privpca site` per shard (ledger `<prefix>-ledger-i.db`
/// with budget `budget`, log `<prefix>-site-i.log`), waits for every site to exit 0, and
/// returns the study id and the logs.
#[allow(clippy::too_many_arguments)]
async fn run_study(
    server: &Server,
    key: &str,
    dir: &Path,
    body: Value,
    shards: &[PathBuf],
    prefix: &str,
    log_prefix: &str,
    budget: f64,
) -> (String, Vec<PathBuf>) {
    let (status, created) = call(
        reqwest::Method::POST,
        &format!("{}/v1/studies", server.base),
        key,
        Some(body),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let mut paths = Vec::new();
    let mut children: Vec<Child> = shards
        .iter()
        .enumerate()
        .map(|(i, shard)| {
            let log = dir.join(format!("{log_prefix}-site-{i}.log"));
            paths.push(log.clone());
            let token = created["sites"][i]["token"].as_str().unwrap();
            site(
                server,
                token,
                shard,
                &dir.join(format!("{prefix}-ledger-{i}.db")),
                budget,
                &log,
            )
        })
        .collect();
    for child in &mut children {
        let status = wait_exit(child, Duration::from_secs(120));
        assert_eq!(
            status.map(|s| s.code()),
            Some(Some(0)),
            "a site failed\n{}",
            logs(&paths)
        );
    }
    (created["id"].as_str().unwrap().to_string(), paths)
}

/// Waits for a job to succeed and returns its result.
async fn job_result(server: &Server, key: &str, job: &Value) -> Value {
    let job_url = format!("{}/v1/jobs/{}", server.base, job["id"].as_str().unwrap());
    for _ in 0..1500 {
        let (_, j) = call(reqwest::Method::GET, &job_url, key, None).await;
        if j["status"] == "succeeded" {
            let (_, result) = call(reqwest::Method::GET, &format!("{job_url}/result"), key, None).await;
            return result;
        }
        assert!(j["status"] != "failed", "{j}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the job did not finish");
}

/// Live `cape_pca` over three real `privpca site` processes with unequal shards (1 000,
/// 2 000 and 4 000 rows; d 20, k 2, ρ 0.002, t 3): over 8 studies the mean captured energy is
/// within 0.05 of central `analyze_gauss` on the pooled data at the same ρ (8 jobs). Every
/// site's own ledger is charged, and the result reports the noise achieved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cape_pca_over_three_unequal_sites_matches_central_analyze_gauss() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_server(dir.path()).await;
    let (status, tenant) = call(
        reqwest::Method::POST,
        &format!("{}/v1/tenants", server.base),
        ADMIN,
        Some(json!({"name": "t"})),
    )
    .await;
    assert_eq!(status, 201, "{tenant}");
    let key = tenant["api_key"].as_str().unwrap().to_string();
    let rows = planted_rows(7000, 20, 11);
    let mut shards = Vec::new();
    let mut start = 0;
    for (i, size) in [1000, 2000, 4000].into_iter().enumerate() {
        let path = dir.path().join(format!("cape-shard-{i}.csv"));
        std::fs::write(&path, to_csv(&rows[start..start + size])).unwrap();
        shards.push(path);
        start += size;
    }
    let runs = 8;
    let mut live = Vec::new();
    for run in 0..runs {
        let body = json!({
            "name": format!("cape {run}"),
            "algorithm": "cape_pca",
            "n_features": 20,
            "relation": "replace_one",
            "row_norm_bound": 1.0,
            "params": {"k": 2},
            "privacy": {"rho": 0.002},
            "threshold": 3,
            "sites": (0..3).map(|i| json!({"name": format!("site-{}", i + 1)})).collect::<Vec<_>>(),
            "join_timeout_seconds": 60,
            "round_timeout_seconds": 30,
        });
        // One ledger per site across all runs: 8 × 0.002 fits a budget of 0.02.
        let (id, _) = run_study(
            &server,
            &key,
            dir.path(),
            body,
            &shards,
            "cape",
            &format!("cape-{run}"),
            0.02,
        )
        .await;
        let url = format!("{}/v1/studies/{id}", server.base);
        let (_, view) = call(reqwest::Method::GET, &url, &key, None).await;
        assert_eq!(view["status"], "succeeded", "{view}");
        assert_eq!(view["sites"][0]["n_samples"], 1000, "{view}");
        assert_eq!(view["sites"][2]["n_samples"], 4000, "{view}");
        let (_, result) = call(reqwest::Method::GET, &format!("{url}/result"), &key, None).await;
        let noise = &result["noise"];
        assert_eq!(noise["fallback"], false, "{result}");
        let ratio = noise["ratio_to_pooled"].as_f64().unwrap();
        assert!((1.0..1.2).contains(&ratio), "{noise}");
        assert!(noise["conventional_noise_sd"].as_f64().unwrap() > noise["noise_sd"].as_f64().unwrap());
        live.push(energy(&rows, &result["basis"]));
    }
    // Each site's own ledger holds the 8 charges.
    for i in 0..3 {
        let log = std::fs::read_to_string(dir.path().join(format!("cape-7-site-{i}.log"))).unwrap();
        assert!(log.contains("charged rho = 0.002"), "{log}");
    }

    let (_, dataset) = call(
        reqwest::Method::POST,
        &format!("{}/v1/datasets", server.base),
        &key,
        Some(json!({"name": "pooled", "kind": "records", "row_norm_bound": 1.0, "budget": {"rho": 1.0}})),
    )
    .await;
    let dataset_id = dataset["id"].as_str().unwrap();
    let upload = reqwest::Client::new()
        .put(format!("{}/v1/datasets/{dataset_id}/data", server.base))
        .bearer_auth(&key)
        .header("content-type", "text/csv")
        .body(to_csv(&rows))
        .send()
        .await
        .unwrap();
    assert!(upload.status().is_success());
    let mut central = Vec::new();
    for _ in 0..runs {
        let (status, job) = call(
            reqwest::Method::POST,
            &format!("{}/v1/jobs", server.base),
            &key,
            Some(json!({"dataset_id": dataset_id, "algorithm": "analyze_gauss", "params": {"k": 2}, "privacy": {"rho": 0.002}})),
        )
        .await;
        assert_eq!(status, 202, "{job}");
        central.push(energy(&rows, &job_result(&server, &key, &job).await["basis"]));
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (live_mean, central_mean) = (mean(&live), mean(&central));
    eprintln!("cape_pca live {live_mean:.4} ({live:?}); analyze_gauss {central_mean:.4} ({central:?})");
    assert!(
        (live_mean - central_mean).abs() <= 0.05,
        "cape_pca {live_mean:.4} vs analyze_gauss {central_mean:.4}"
    );
}

/// Live `cape_agn` (Alg. 3, two stages) over three real `privpca site` processes on a mixture
/// of three spherical Gaussians (d = 10, σ² = 0.05): the study succeeds, returns components
/// close to the true means at a large budget, reports both stages' noise, and every site's own
/// ledger is charged once for both stages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cape_agn_over_three_sites_recovers_the_mixture() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_server(dir.path()).await;
    let (_, tenant) = call(
        reqwest::Method::POST,
        &format!("{}/v1/tenants", server.base),
        ADMIN,
        Some(json!({"name": "t"})),
    )
    .await;
    let key = tenant["api_key"].as_str().unwrap().to_string();
    let (d, k, sigma2) = (10usize, 3usize, 0.05f64);
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let q = DMatrix::from_fn(d, k, |_, _| -> f64 { StandardNormal.sample(&mut rng) })
        .qr()
        .q();
    let means: Vec<Vec<f64>> = (0..k)
        .map(|j| q.column(j).iter().map(|v| v * (0.9 - 0.1 * j as f64)).collect())
        .collect();
    let weights = [0.5, 0.3, 0.2];
    let rows: Vec<Vec<f64>> = (0..9000)
        .map(|i| {
            let h = if i % 10 < 5 {
                0
            } else if i % 10 < 8 {
                1
            } else {
                2
            };
            means[h]
                .iter()
                .map(|m| {
                    let z: f64 = StandardNormal.sample(&mut rng);
                    m + sigma2.sqrt() * z
                })
                .collect()
        })
        .collect();
    let mut paths = Vec::new();
    for (i, chunk) in rows.chunks(3000).enumerate() {
        let path = dir.path().join(format!("agn-{i}.csv"));
        std::fs::write(&path, to_csv(chunk)).unwrap();
        paths.push(path);
    }
    let body = json!({
        "name": "mixture",
        "algorithm": "cape_agn",
        "n_features": d,
        "relation": "replace_one",
        "row_norm_bound": 3.0,
        "params": {"k": k, "model": "mog", "sigma2": sigma2},
        "privacy": {"rho": 1e5},
        "threshold": 3,
        "sites": (0..3).map(|i| json!({"name": format!("site-{}", i + 1)})).collect::<Vec<_>>(),
        "join_timeout_seconds": 60,
        "round_timeout_seconds": 30,
    });
    let (id, logs_paths) = run_study(&server, &key, dir.path(), body, &paths, "agn", "agn", 1e6).await;
    let url = format!("{}/v1/studies/{id}", server.base);
    let (_, view) = call(reqwest::Method::GET, &url, &key, None).await;
    assert_eq!(view["status"], "succeeded", "{view}");
    assert_eq!(view["progress"]["done"], 2, "{view}");
    let (_, result) = call(reqwest::Method::GET, &format!("{url}/result"), &key, None).await;
    let noise = &result["noise"];
    assert_eq!(noise["stage1"]["fallback"], false, "{result}");
    assert_eq!(noise["stage2"]["fallback"], false, "{result}");
    let components: Vec<Vec<f64>> = serde_json::from_value(noise["components"]["vectors"].clone()).unwrap();
    assert_eq!(components.len(), k);
    let q = privpca::algorithms::tensor_power::q_comp(&components, &means);
    assert!(q < 0.1, "q_comp {q}: {components:?} vs {means:?}");
    let released: Vec<f64> = serde_json::from_value(noise["components"]["weights"].clone()).unwrap();
    for (w, want) in released.iter().zip(weights) {
        assert!((w - want).abs() < 0.1, "weights {released:?}");
    }
    for log in &logs_paths {
        let text = std::fs::read_to_string(log).unwrap();
        assert_eq!(text.matches("charged rho").count(), 1, "{text}");
        assert!(text.contains("stage 2/2 release sent"), "{text}");
    }
}

/// Without a configured admin key, the service generates one and never writes it to its log:
/// with stderr not a terminal, it goes to `<data dir>/generated-admin-key` (owner-only), and
/// that key works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_admin_key_stays_out_of_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let log = dir.path().join("server.log");
    let child = Command::new(BIN)
        .args(["serve", "--bind", &format!("127.0.0.1:{port}")])
        .arg("--database-url")
        .arg(format!("sqlite://{}", dir.path().join("privpca.db").display()))
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .env_remove("PRIVPCA_ADMIN_KEY")
        .stdout(std::fs::File::create(dir.path().join("server.out")).unwrap())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let server = Server {
        child,
        base: format!("http://127.0.0.1:{port}"),
    };
    let client = reqwest::Client::new();
    let mut up = false;
    for _ in 0..200 {
        if let Ok(r) = client.get(format!("{}/healthz", server.base)).send().await
            && r.status().is_success()
        {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(up, "{}", std::fs::read_to_string(&log).unwrap_or_default());
    let file = dir.path().join("data").join("generated-admin-key");
    let key = std::fs::read_to_string(&file).unwrap().trim().to_string();
    assert!(key.starts_with("ppa_") && key.len() > 40);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    let (status, _) = call(
        reqwest::Method::POST,
        &format!("{}/v1/tenants", server.base),
        &key,
        Some(json!({"name": "t"})),
    )
    .await;
    assert_eq!(status, 201);
    let logged = std::fs::read_to_string(&log).unwrap()
        + &std::fs::read_to_string(dir.path().join("server.out")).unwrap();
    assert!(!logged.contains(&key), "the key is in the log:\n{logged}");
    assert!(logged.contains("generated-admin-key"), "{logged}");
}
