use std::sync::Arc;

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{TestApp, csv_rows};

fn gauss(dataset: &str, rho: f64) -> Value {
    json!({ "dataset_id": dataset, "algorithm": "analyze_gauss", "params": { "k": 1 }, "privacy": { "rho": rho } })
}

#[tokio::test]
async fn over_budget_is_a_409_naming_remaining_and_requested() {
    let (app, key, ds) = TestApp::queued_with_records(json!({ "rho": 1.0 }), "1,0\n0,1\n").await;
    assert_eq!(
        app.submit(&key, gauss(&ds, 0.7)).await.status,
        StatusCode::ACCEPTED
    );
    let doc = app.submit(&key, gauss(&ds, 0.5)).await.problem(409);
    assert_eq!(doc["type"], "urn:privpca:problem:over-budget");
    assert_eq!(doc["dataset_id"], ds.as_str());
    assert!(
        (doc["remaining_rho"].as_f64().unwrap() - 0.3).abs() < 1e-9,
        "{doc}"
    );
    assert!(
        (doc["requested_rho"].as_f64().unwrap() - 0.5).abs() < 1e-9,
        "{doc}"
    );
    // Exactly the rest still fits.
    assert_eq!(
        app.submit(&key, gauss(&ds, 0.3)).await.status,
        StatusCode::ACCEPTED
    );
    let view = app.get(&format!("/v1/datasets/{ds}"), &key).await.json();
    assert_eq!(view["budget"]["remaining"]["rho"], 0.0);
    app.submit(&key, gauss(&ds, 1e-6)).await.problem(409);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_submissions_against_a_budget_for_ten_admit_exactly_ten() {
    let app = Arc::new(TestApp::without_runner().await);
    let key = app.tenant("t").await;
    let ds = app.records(&key, json!({ "rho": 1.0 }), "1,0\n0,1\n").await;
    let mut handles = Vec::new();
    for _ in 0..50 {
        let (app, key, ds) = (app.clone(), key.clone(), ds.clone());
        handles.push(tokio::spawn(async move {
            app.submit(&key, gauss(&ds, 0.1)).await.status
        }));
    }
    let mut accepted = 0;
    let mut refused = 0;
    for h in handles {
        match h.await.unwrap() {
            StatusCode::ACCEPTED => accepted += 1,
            StatusCode::CONFLICT => refused += 1,
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!((accepted, refused), (10, 40));
    let ledger = app.get(&format!("/v1/datasets/{ds}/ledger"), &key).await.json();
    assert_eq!(ledger["entries"].as_array().unwrap().len(), 10);
    assert_eq!(ledger["budget"]["remaining"]["rho"], 0.0);
}

#[tokio::test]
async fn idempotency_key_replays_the_same_job_without_a_new_charge() {
    let (app, key, ds) = TestApp::queued_with_records(json!({ "rho": 1.0 }), "1,0\n0,1\n").await;
    let send = |body: Value, idem: &'static str| {
        let headers = [("content-type", "application/json"), ("idempotency-key", idem)];
        app.raw(Method::POST, "/v1/jobs", &key, headers, body.to_string())
    };
    let first = send(gauss(&ds, 0.4), "abc").await;
    assert_eq!(first.status, StatusCode::ACCEPTED);
    let second = send(gauss(&ds, 0.4), "abc").await;
    assert_eq!(second.status, StatusCode::ACCEPTED);
    assert_eq!(first.json()["id"], second.json()["id"]);
    assert_eq!(second.headers.get("idempotent-replayed").unwrap(), "true");
    let doc = send(gauss(&ds, 0.2), "abc").await.problem(409);
    assert_eq!(doc["type"], "urn:privpca:problem:idempotency-key-reused");
    let view = app.get(&format!("/v1/datasets/{ds}"), &key).await.json();
    assert!((view["budget"]["spent"]["rho"].as_f64().unwrap() - 0.4).abs() < 1e-9);
    // Another key is another job.
    assert_ne!(
        send(gauss(&ds, 0.4), "def").await.json()["id"],
        first.json()["id"]
    );
}

#[tokio::test]
async fn the_ledger_lists_every_charge_and_totals_in_rho_and_epsilon() {
    let (app, key, ds) =
        TestApp::with_records(json!({ "epsilon": 2.0, "delta": 1e-6 }), &csv_rows(100, 4, 9)).await;
    let a = app.submit(&key, gauss(&ds, 0.01)).await.json();
    let b = app
        .submit(&key, json!({ "dataset_id": ds, "algorithm": "noisy_power", "params": { "k": 1 }, "privacy": { "rho": 0.02 } }))
        .await
        .json();
    app.wait(&key, a["id"].as_str().unwrap()).await;
    app.wait(&key, b["id"].as_str().unwrap()).await;
    let ledger = app.get(&format!("/v1/datasets/{ds}/ledger"), &key).await.json();
    let entries = ledger["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0]["job_id"], a["id"]);
    assert_eq!(entries[0]["algorithm"], "analyze_gauss");
    assert_eq!(entries[1]["algorithm"], "noisy_power");
    let spent = &ledger["budget"]["spent"];
    assert!((spent["rho"].as_f64().unwrap() - 0.03).abs() < 1e-9);
    assert_eq!(spent["epsilon_at_delta"], 1e-6);
    assert!(spent["epsilon"].as_f64().unwrap() > 0.0);
    assert!(ledger["budget"]["remaining"]["epsilon"].as_f64().unwrap() < 2.0);
}

#[tokio::test]
async fn a_job_left_running_by_a_crash_is_failed_with_its_charge_kept_and_never_rerun() {
    let (app, key, ds) = TestApp::queued_with_records(json!({ "rho": 1.0 }), "1,0\n0,1\n").await;
    let id = app.submit(&key, gauss(&ds, 0.4)).await.json()["id"]
        .as_str()
        .unwrap()
        .to_string();
    // The runner claims it (noise would be drawn from here on), then the process dies.
    let claimed = app.state.store.claim_next_job().await.unwrap().unwrap();
    assert_eq!(claimed.id.to_string(), id);
    let config = app.state.config.as_ref().clone();
    let dir = app.stop().await;

    let app = TestApp::open(dir, config, true).await;
    let view = app.get(&format!("/v1/jobs/{id}"), &key).await.json();
    assert_eq!(view["status"], "failed");
    assert!(view["error"].as_str().unwrap().contains("interrupted"), "{view}");
    let spent = app.get(&format!("/v1/datasets/{ds}"), &key).await.json()["budget"]["spent"]["rho"]
        .as_f64()
        .unwrap();
    assert!((spent - 0.4).abs() < 1e-9, "charge kept");
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(
        app.get(&format!("/v1/jobs/{id}"), &key).await.json()["status"],
        "failed",
        "never re-run"
    );

    // A job that was only queued at the crash runs after the restart.
    let queued = app.submit(&key, gauss(&ds, 0.1)).await.json()["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(app.wait(&key, &queued).await["status"], "succeeded");
}

#[tokio::test]
async fn an_epsilon_delta_budget_admits_gaussian_jobs_by_the_exact_curve() {
    // (ε, δ) = (1, 1e-5) admits three analyze_gauss jobs of ρ = 0.011 (Σρ = 0.033 ≤ 0.0331, the
    // exact Gaussian maximum at δ/2: the union bound of docs/design/privacy.md §2.6) and
    // refuses a fourth of ρ = 0.001 (the old rule admitted up to 0.0359).
    let (app, key, ds) =
        TestApp::queued_with_records(json!({ "epsilon": 1.0, "delta": 1e-5 }), "1,0\n0,1\n").await;
    for _ in 0..3 {
        let reply = app.submit(&key, gauss(&ds, 0.011)).await;
        reply.expect(StatusCode::ACCEPTED);
    }
    let doc = app.submit(&key, gauss(&ds, 0.001)).await.problem(409);
    assert_eq!(doc["type"], "urn:privpca:problem:over-budget");
    let ledger = app.get(&format!("/v1/datasets/{ds}/ledger"), &key).await.json();
    let entries = ledger["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 3);
    for e in entries {
        assert_eq!(e["rule"], "exact_gaussian");
        assert_eq!(e["other_rho"], 0.0);
        assert_eq!(e["rho"], 0.011, "shown as the decimal charged");
    }
    let budget = &ledger["budget"];
    assert_eq!(budget["rule"], "exact_gaussian");
    let spent = budget["spent"]["rho"].as_f64().unwrap();
    assert!((spent - 0.033).abs() < 1e-15, "{spent}");
    // The exact curve says the three jobs together are (< 1, 1e-5)-DP.
    let exact = budget["spent"]["epsilon_exact_gaussian"].as_f64().unwrap();
    assert!(exact <= 0.96 && exact > 0.95, "{exact}");
}

#[tokio::test]
async fn a_non_gaussian_charge_switches_an_epsilon_delta_budget_to_cks() {
    let (app, key, ds) =
        TestApp::queued_with_records(json!({ "epsilon": 1.0, "delta": 1e-5 }), "1,0\n0,1\n").await;
    // eigen_sampling's exponential mechanism is not Gaussian: CKS at δ/2 − δ/10 (0.0278)
    // governs from here.
    let sampling = json!({ "dataset_id": ds, "algorithm": "eigen_sampling", "params": { "k": 1 },
                           "privacy": { "rho": 0.005 } });
    let reply = app.submit(&key, sampling).await;
    reply.expect(StatusCode::ACCEPTED);
    // 0.005 + 0.025 = 0.030 would fit the Gaussian curve (0.0331) but not CKS (0.0278).
    app.submit(&key, gauss(&ds, 0.025)).await.problem(409);
    let reply = app.submit(&key, gauss(&ds, 0.0225)).await;
    assert_eq!(reply.status, StatusCode::ACCEPTED);
    let ledger = app.get(&format!("/v1/datasets/{ds}/ledger"), &key).await.json();
    let entries = ledger["entries"].as_array().unwrap();
    assert_eq!(entries[0]["rule"], "cks");
    assert!(entries[0]["other_rho"].as_f64().unwrap() > 0.0);
    assert_eq!(entries[1]["rule"], "cks");
    assert_eq!(ledger["budget"]["rule"], "cks");
    let remaining = ledger["budget"]["remaining"]["rho"].as_f64().unwrap();
    assert!(remaining > 0.0 && remaining < 0.0004, "{remaining}");
}

#[tokio::test]
async fn decimal_amounts_read_back_as_written() {
    let (app, key, ds) = TestApp::queued_with_records(json!({ "rho": 1.0 }), "1,0\n0,1\n").await;
    let job = app.submit(&key, gauss(&ds, 0.2)).await.json();
    assert_eq!(job["cost"]["rho"], 0.2);
    let view = app.get(&format!("/v1/datasets/{ds}"), &key).await.json();
    assert_eq!(view["budget"]["spent"]["rho"], 0.2);
    assert_eq!(view["budget"]["remaining"]["rho"], 0.8);
}
