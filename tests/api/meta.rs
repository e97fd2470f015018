use axum::http::{Method, StatusCode};
use serde_json::json;

use crate::helpers::{ADMIN, Records, TestApp, csv_rows, job};

#[tokio::test]
async fn health_readiness_docs_and_openapi_are_open() {
    let app = TestApp::without_runner().await;
    for path in ["/healthz", "/readyz", "/openapi.json", "/docs/"] {
        let reply = app.anonymous(Method::GET, path).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}");
    }
    let doc = app.anonymous(Method::GET, "/openapi.json").await.json();
    assert!(doc["paths"]["/v1/jobs"]["post"].is_object());
    let docs = app.anonymous(Method::GET, "/docs/").await;
    assert!(
        String::from_utf8_lossy(&docs.bytes).contains("swagger"),
        "docs page is Swagger UI"
    );
}

#[tokio::test]
async fn committed_openapi_document_matches_the_code() {
    let committed = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/openapi.json"))
        .expect("openapi/openapi.json is committed");
    let generated = privpca::http::openapi::document();
    assert!(
        committed == generated,
        "openapi/openapi.json is stale: run `cargo run -- openapi > openapi/openapi.json`"
    );
}

#[tokio::test]
async fn metrics_are_not_served_on_the_api_port() {
    // Durations and every tenant's queue and refusals are for operators: the API port has no
    // /metrics, whoever asks (the operator listener is `--metrics-bind`).
    let (app, key) = TestApp::queued_with_tenant("m").await;
    for who in [None, Some(key.as_str()), Some(ADMIN)] {
        app.call(Method::GET, "/metrics", who, None).await.problem(404);
    }
    let doc = privpca::http::openapi::document_value();
    assert!(doc["paths"].get("/metrics").is_none(), "not in the API document");
}

#[tokio::test]
async fn the_operator_listener_serves_the_metrics_and_nothing_else() {
    let app = TestApp::without_runner().await;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let (address, server) = privpca::serve::serve_metrics(
        "127.0.0.1:0".parse().unwrap(),
        app.state.clone(),
        shutdown.clone(),
    )
    .await
    .unwrap();
    let client = reqwest::Client::new();
    let reply = client
        .get(format!("http://{address}/metrics"))
        .header("accept", "text/plain")
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    assert!(
        reply.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain"),
        "{:?}",
        reply.headers()
    );
    let text = reply.text().await.unwrap();
    assert!(text.contains("privpca_jobs{status=\"queued\"} 0"), "{text}");
    // Not a second door to the API.
    for path in ["/v1/jobs", "/healthz", "/openapi.json", "/ui"] {
        let reply = client
            .get(format!("http://{address}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), 404, "{path}");
    }
    shutdown.cancel();
    server.await.unwrap();
}

#[tokio::test]
async fn job_durations_on_private_n_datasets_stay_out_of_the_metrics() {
    let (app, key) = TestApp::start_with_tenant("m").await;
    let (shown, hidden) = app.shown_and_hidden(&key, &csv_rows(200, 4, 3)).await;
    let privacy = json!({ "rho": 0.1 });
    for (ds, algorithm) in [(&shown, "analyze_gauss"), (&hidden, "noisy_power")] {
        app.succeeded(&key, job(ds, algorithm, json!({ "k": 1 }), privacy.clone()))
            .await;
    }
    let text = app.metrics_text().await;
    assert!(
        text.contains(
            "privpca_job_duration_seconds_count{algorithm=\"analyze_gauss\",status=\"succeeded\"} 1"
        ),
        "{text}"
    );
    // The add_remove job's run time grows with its private n: no histogram sample, no sum.
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("privpca_job_duration_seconds") && l.contains("noisy_power")),
        "{text}"
    );
    assert!(
        text.contains("privpca_jobs_finished_total{status=\"succeeded\"} 2"),
        "{text}"
    );
    assert!(
        text.contains(
            "privpca_job_durations_withheld_total{algorithm=\"noisy_power\",status=\"succeeded\"} 1"
        ),
        "{text}"
    );
}

#[tokio::test]
async fn metrics_count_jobs_by_state_and_budget_refusals() {
    let t = Records::queued(json!({ "rho": 0.1 }), "1,0\n0,1\n1,1\n").await;
    let job = t.job("analyze_gauss", json!({ "k": 1 }), json!({ "rho": 0.1 }));
    let Records { app, key, .. } = t;
    assert_eq!(app.submit(&key, job.clone()).await.status, StatusCode::ACCEPTED);
    app.submit(&key, job).await.problem(409);
    let text = app.metrics_text().await;
    assert!(text.contains("privpca_jobs{status=\"queued\"} 1"), "{text}");
    assert!(
        text.contains("privpca_budget_refusals_total{algorithm=\"analyze_gauss\",reason=\"rho\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn metrics_time_finished_jobs_per_algorithm() {
    let (app, key) = TestApp::start_with_tenant("m").await;
    let ds = app.public_records(&key, "1,0\n0,1\n1,1\n").await;
    for algorithm in ["exact", "exact", "noisy_power"] {
        app.succeeded(
            &key,
            json!({ "dataset_id": ds, "algorithm": algorithm, "params": { "k": 1 } }),
        )
        .await;
    }
    let text = app.metrics_text().await;
    for (algorithm, count) in [("exact", 2), ("noisy_power", 1)] {
        let line = format!(
            "privpca_job_duration_seconds_count{{algorithm=\"{algorithm}\",status=\"succeeded\"}} {count}"
        );
        assert!(text.contains(&line), "{line} in {text}");
    }
}

#[tokio::test]
async fn submissions_over_the_tenant_rate_are_429_with_retry_after() {
    let app = TestApp::build(false, |config| {
        config.job_rate_per_minute = 2;
        config.job_burst = 2;
    })
    .await;
    let (a, b) = (app.tenant("a").await, app.tenant("b").await);
    let ds_a = app.public_records(&a, "1,0\n0,1\n").await;
    let ds_b = app.public_records(&b, "1,0\n0,1\n").await;
    let job = |ds: &str| json!({ "dataset_id": ds, "algorithm": "exact", "params": { "k": 1 } });
    for _ in 0..2 {
        assert_eq!(app.submit(&a, job(&ds_a)).await.status, StatusCode::ACCEPTED);
    }
    let refused = app.submit(&a, job(&ds_a)).await;
    let retry: u64 = refused.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!(
        (1..=30).contains(&retry),
        "2 per minute: a token every 30 s, got {retry}"
    );
    let problem = refused.problem(429);
    assert_eq!(problem["limit_per_minute"], 2, "{problem}");
    // Another tenant has its own bucket, and the refused request queued nothing.
    assert_eq!(app.submit(&b, job(&ds_b)).await.status, StatusCode::ACCEPTED);
    let jobs = app.get("/v1/jobs", &a).await.json();
    assert_eq!(jobs.as_array().map(Vec::len), Some(2), "{jobs}");
    let text = app.metrics_text().await;
    assert!(
        text.contains("privpca_rate_limit_refusals_total{action=\"submission\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn unknown_routes_and_methods_are_problem_documents() {
    let app = TestApp::without_runner().await;
    app.anonymous(Method::GET, "/v1/nothing").await.problem(404);
    let reply = app.call(Method::PATCH, "/v1/datasets", Some(ADMIN), None).await;
    reply.problem(405);
}

#[tokio::test]
async fn algorithms_list_describes_parameters_and_privacy() {
    let app = TestApp::without_runner().await;
    let list = app.anonymous(Method::GET, "/v1/algorithms").await.json();
    let list = list.as_array().unwrap();
    for name in [
        "noisy_power",
        "analyze_gauss",
        "exact",
        "coherent_power",
        "k_dp_pca",
        "dp_oja",
        "eigen_sampling",
    ] {
        let a = list
            .iter()
            .find(|a| a["name"] == name)
            .unwrap_or_else(|| panic!("{name} listed"));
        assert!(!a["summary"].as_str().unwrap().is_empty());
        assert!(!a["source"].as_str().unwrap().is_empty());
        assert!(!a["privacy"].as_str().unwrap().is_empty());
        assert_eq!(a["parameters"]["type"], "object");
        assert!(a["parameters"]["properties"]["k"].is_object(), "{name} has k");
        assert!(!a["kinds"].as_array().unwrap().is_empty());
        // Every algorithm that leaves out a kind or relation says why.
        let everything =
            a["kinds"].as_array().unwrap().len() == 2 && a["relations"].as_array().unwrap().len() == 3;
        assert_eq!(a["scope_reason"].is_string(), !everything, "{name}: {a}");
    }
    let np = list.iter().find(|a| a["name"] == "noisy_power").unwrap();
    assert!(
        np["parameters"]["properties"]["sensitivity"]["enum"]
            .as_array()
            .unwrap()
            .len()
            >= 4
    );
    let exact = list.iter().find(|a| a["name"] == "exact").unwrap();
    assert_eq!(exact["public_only"], true);
}

#[tokio::test]
async fn privacy_plan_converts_and_prices_without_spending() {
    let (app, key) = TestApp::queued_with_tenant("p").await;
    let conv = app
        .plan(&key, json!({ "privacy": { "epsilon": 1.0, "delta": 1e-5 } }))
        .await;
    assert_eq!(conv.status, StatusCode::OK);
    let conv = conv.json();
    let rho = conv["requested"]["rho"].as_f64().unwrap();
    // The CKS inverse at (1, 1e-5): 0.0305566 (docs/design/privacy.md §2), and the exact Gaussian maximum
    // 0.0359257 (both mpmath, 50 digits); the Bun–Steinke inverse would give 0.0208.
    assert!((rho - 0.030_556_595_197_639_566).abs() < 1e-9, "{conv}");
    assert!(conv["requested"]["epsilon"].as_f64().unwrap() <= 1.0 + 1e-9);
    assert_eq!(conv["conversions"]["rho_cks"], conv["requested"]["rho"]);
    let gauss = conv["conversions"]["rho_exact_gaussian"].as_f64().unwrap();
    assert!((gauss - 0.035_925_702_327_418_217).abs() < 1e-9, "{conv}");
    assert!(conv["conversions"]["epsilon_exact_gaussian"].as_f64().unwrap() < 1.0);

    let ds = app.records(&key, json!({ "rho": 0.5 }), "1,0\n0,1\n").await;
    let plan = app
        .plan(
            &key,
            // `clip: "none"`: the plan prices noisy_power's own calibration (the default clip
            // would take a tenth of ρ; checked in crates/core/src/algorithms/clipping_tests.rs).
            json!({ "privacy": { "rho": 0.25 }, "dataset_id": ds, "algorithm": "noisy_power",
                    "params": { "k": 1, "iterations": 4, "clip": "none" } }),
        )
        .await;
    plan.expect(StatusCode::OK);
    let plan = plan.json();
    assert_eq!(plan["fits_budget"], true);
    assert!((plan["cost"]["rho"].as_f64().unwrap() - 0.25).abs() < 1e-9);
    // s = sqrt(L / (2ρ)) = sqrt(4 / 0.5)
    let s = plan["noise"][0]["multiplier"].as_f64().unwrap();
    assert!((s - 8f64.sqrt()).abs() < 1e-9, "{plan}");
    let too_much = app
        .plan(&key, json!({ "privacy": { "rho": 0.75 }, "dataset_id": ds, "algorithm": "noisy_power", "params": { "k": 1 } }))
        .await
        .json();
    assert_eq!(too_much["fits_budget"], false);
    // Nothing was spent.
    let view = app.get(&format!("/v1/datasets/{ds}"), &key).await.json();
    assert_eq!(view["budget"]["spent"]["rho"], 0.0);
}
