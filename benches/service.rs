//! Service-level measurements (service.md "Performance expectations"), run in-process against
//! the real store and runner: `cargo bench --bench service`.
//!
//! - tiny job: submit → succeeded → result, p50/p90 over 200 jobs;
//! - status reads per second (`GET /v1/jobs/{id}`), 8 concurrent callers;
//! - `noisy_power` k = 10 on a public 100 000 × 500 dataset (uploaded as .npy), and the same
//!   through `analyze_gauss` for comparison.
//!
//! Set `PRIVPCA_BENCH_N` / `PRIVPCA_BENCH_D` to change the large shape.

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use privpca::config::Config;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

struct Bench {
    router: axum::Router,
}

impl Bench {
    async fn call(
        &self,
        method: Method,
        uri: &str,
        key: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> (StatusCode, Vec<u8>) {
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::AUTHORIZATION, format!("Bearer {key}"))
            .header(header::CONTENT_TYPE, content_type)
            .body(Body::from(body))
            .expect("request");
        let response = self.router.clone().oneshot(request).await.expect("response");
        let status = response.status();
        (
            status,
            response
                .into_body()
                .collect()
                .await
                .expect("body")
                .to_bytes()
                .to_vec(),
        )
    }

    async fn json(&self, method: Method, uri: &str, key: &str, body: Value) -> Value {
        let (status, bytes) = self
            .call(
                method,
                uri,
                key,
                "application/json",
                body.to_string().into_bytes(),
            )
            .await;
        let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        assert!(status.is_success(), "{uri}: {status} {value}");
        value
    }

    async fn wait(&self, key: &str, job: &str) -> Value {
        loop {
            let view = self
                .json(Method::GET, &format!("/v1/jobs/{job}"), key, Value::Null)
                .await;
            if matches!(
                view["status"].as_str(),
                Some("succeeded" | "failed" | "cancelled")
            ) {
                return view;
            }
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }
}

fn npy(n: usize, d: usize, seed: u64) -> Vec<u8> {
    // Spiked data: 10 strong directions plus isotropic noise, rows of norm about 1.
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut values = vec![0.0f64; n * d];
    for row in values.chunks_mut(d) {
        for (j, v) in row.iter_mut().enumerate() {
            let spike = if j < 10 { 3.0 / (1.0 + j as f64) } else { 0.3 };
            *v = spike * (rng.random::<f64>() - 0.5) / (d as f64).sqrt();
        }
    }
    // The header of an (n, d) f64 C-order array, then the row-major values.
    let mut bytes = privpca::http::jobs::npy_header(n, d);
    bytes.reserve(8 * n * d);
    for v in &values {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    bytes
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let n: usize = std::env::var("PRIVPCA_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let d: usize = std::env::var("PRIVPCA_BENCH_D")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = Config::for_tests(dir.path());
    config.max_upload_bytes = 1 << 33;
    config.max_rows = 10_000_000;
    config.max_d = 10_000;
    config.max_body_bytes = 1 << 20;
    let state = privpca::serve::prepare(config).await.expect("prepare");
    let shutdown = CancellationToken::new();
    let runner = tokio::spawn(privpca::runner::run(state.clone(), shutdown.clone()));
    let bench = Bench {
        router: privpca::app(state.clone()),
    };
    let key = bench
        .json(
            Method::POST,
            "/v1/tenants",
            "test-admin-key",
            json!({ "name": "bench" }),
        )
        .await["api_key"]
        .as_str()
        .expect("key")
        .to_string();

    // Tiny jobs.
    let tiny = bench
        .json(
            Method::POST,
            "/v1/datasets",
            &key,
            json!({ "name": "tiny", "kind": "records", "row_norm_bound": 1.0, "budget": { "rho": 1e5 } }),
        )
        .await["id"]
        .as_str()
        .expect("id")
        .to_string();
    let csv: String = (0..50)
        .map(|i| format!("{},{},{},{}\n", i % 7, i % 3, i % 5, 1))
        .collect();
    let (status, _) = bench
        .call(
            Method::PUT,
            &format!("/v1/datasets/{tiny}/data"),
            &key,
            "text/csv",
            csv.into_bytes(),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let mut latencies = Vec::new();
    let mut last_job = String::new();
    for _ in 0..200 {
        let start = Instant::now();
        let job = bench
            .json(Method::POST, "/v1/jobs", &key, json!({ "dataset_id": tiny, "algorithm": "noisy_power", "params": { "k": 1, "iterations": 1 }, "privacy": { "rho": 1.0 } }))
            .await;
        let id = job["id"].as_str().expect("id").to_string();
        assert_eq!(bench.wait(&key, &id).await["status"], "succeeded");
        bench
            .json(Method::GET, &format!("/v1/jobs/{id}/result"), &key, Value::Null)
            .await;
        latencies.push(start.elapsed());
        last_job = id;
    }
    latencies.sort();
    println!(
        "tiny job (noisy_power k=1 L=1 on 50×4) submit→result: p50 {:.2} ms, p90 {:.2} ms, max {:.2} ms",
        percentile(&latencies, 0.5).as_secs_f64() * 1e3,
        percentile(&latencies, 0.9).as_secs_f64() * 1e3,
        latencies[latencies.len() - 1].as_secs_f64() * 1e3
    );

    // Status reads.
    let reads = 20_000;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let router = bench.router.clone();
        let (key, job) = (key.clone(), last_job.clone());
        tasks.push(tokio::spawn(async move {
            let b = Bench { router };
            for _ in 0..reads / 8 {
                let (status, _) = b
                    .call(
                        Method::GET,
                        &format!("/v1/jobs/{job}"),
                        &key,
                        "application/json",
                        Vec::new(),
                    )
                    .await;
                assert_eq!(status, StatusCode::OK);
            }
        }));
    }
    for t in tasks {
        t.await.expect("reader");
    }
    println!(
        "status reads: {:.0} req/s (8 concurrent in-process callers)",
        reads as f64 / start.elapsed().as_secs_f64()
    );

    // Large public dataset.
    let big = bench
        .json(
            Method::POST,
            "/v1/datasets",
            &key,
            json!({ "name": "big", "kind": "records", "row_norm_bound": 1.0, "public": true }),
        )
        .await["id"]
        .as_str()
        .expect("id")
        .to_string();
    let body = npy(n, d, 1);
    let mb = body.len() as f64 / 1e6;
    let start = Instant::now();
    let (status, reply) = bench
        .call(
            Method::PUT,
            &format!("/v1/datasets/{big}/data"),
            &key,
            "application/x-npy",
            body,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&reply));
    println!(
        "upload {n}×{d} .npy ({mb:.0} MB): {:.2} s",
        start.elapsed().as_secs_f64()
    );
    for (algorithm, params) in [
        ("noisy_power", json!({ "k": 10 })),
        ("analyze_gauss", json!({ "k": 10 })),
        ("exact", json!({ "k": 10 })),
    ] {
        let start = Instant::now();
        let job = bench
            .json(Method::POST, "/v1/jobs", &key, json!({ "dataset_id": big, "algorithm": algorithm, "params": params, "privacy": { "rho": 1.0 }, "seed": 7 }))
            .await;
        let done = bench.wait(&key, job["id"].as_str().expect("id")).await;
        assert_eq!(done["status"], "succeeded", "{done}");
        println!(
            "{algorithm} k=10 on {n}×{d}: submit→succeeded {:.2} s (run {} ms, config {})",
            start.elapsed().as_secs_f64(),
            done["run_ms"],
            done["config"]
        );
    }
    shutdown.cancel();
    runner.await.expect("runner");
}
