//! Odd input everywhere: every field of valid requests replaced, one at a time, by values of the
//! wrong type, out of range or at the edge of f64, for every algorithm and every JSON endpoint.
//! The service must answer 2xx or a 4xx problem document, never a 5xx, and every job it accepts
//! must end `succeeded` or `failed` (never stuck, never a crashed worker).

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{Reply, TestApp, csv_rows};

/// Values of every JSON type, out of range, and at f64's edges.
fn odd_values() -> Vec<Value> {
    vec![
        Value::Null,
        json!(true),
        json!(-1),
        json!(0),
        json!(0.5),
        json!(2),
        json!(1_000_000_000),
        json!(1e308),
        json!(-1e308),
        json!(5e-324),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(""),
        json!("NaN"),
        json!("inf"),
        json!("ü\u{0}"),
        json!([]),
        json!([1, 2]),
        json!([[0.5]]),
        json!({}),
        json!({ "a": 1 }),
    ]
}

/// `template` with the value at `path` (object keys) replaced by each odd value, and also with
/// that key removed.
fn variants(template: &Value, path: &[&str]) -> Vec<Value> {
    let mut out = Vec::new();
    for value in odd_values().into_iter().map(Some).chain([None]) {
        let mut body = template.clone();
        let mut slot = &mut body;
        for key in &path[..path.len() - 1] {
            slot = &mut slot[*key];
        }
        let last = path[path.len() - 1];
        match (slot.as_object_mut(), value) {
            (Some(object), Some(value)) => {
                object.insert(last.into(), value);
            }
            (Some(object), None) => {
                object.remove(last);
            }
            (None, _) => continue,
        }
        out.push(body);
    }
    out
}

/// Every path to a leaf or container field of a JSON object, depth first.
fn paths(value: &Value, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    if let Some(object) = value.as_object() {
        for (key, child) in object {
            let mut path = prefix.clone();
            path.push(key.clone());
            out.push(path.clone());
            paths(child, path, out);
        }
    }
}

#[track_caller]
fn assert_client_error_or_success(reply: &Reply, what: &str) {
    let status = reply.status;
    assert!(
        !status.is_server_error(),
        "{what}: {status} {}",
        String::from_utf8_lossy(&reply.bytes)
    );
    if status.is_client_error() {
        reply.problem(status.as_u16());
    }
}

/// POSTs every variant of `template` (each of its fields and each path in `extra`) and every
/// odd value as the whole body; returns the accepted replies.
async fn fuzz_post(
    app: &TestApp,
    key: &str,
    uri: &str,
    template: Value,
    extra: Vec<Vec<String>>,
) -> Vec<Value> {
    let mut all = extra;
    paths(&template, Vec::new(), &mut all);
    let mut accepted = Vec::new();
    for path in all {
        let path: Vec<&str> = path.iter().map(String::as_str).collect();
        for body in variants(&template, &path) {
            let reply = app.post(uri, key, body.clone()).await;
            assert_client_error_or_success(&reply, &format!("POST {uri} {body}"));
            if reply.status.is_success() {
                accepted.push(reply.json());
            }
        }
    }
    for body in odd_values() {
        let reply = app.post(uri, key, body.clone()).await;
        assert_client_error_or_success(&reply, &format!("POST {uri} {body}"));
    }
    accepted
}

#[tokio::test]
async fn odd_fields_never_cause_a_server_error_or_a_stuck_job() {
    let (app, key) = TestApp::start_with_tenant("t").await;
    fuzz_post(
        &app,
        &key,
        "/v1/datasets",
        json!({ "name": "n", "kind": "records", "relation": "replace_one", "row_norm_bound": 1.0,
                "row_l1_bound": 2.0, "budget": { "epsilon": 1.0, "delta": 1e-6 }, "public": false }),
        vec![vec!["budget".into(), "rho".into()]],
    )
    .await;
    fuzz_post(
        &app,
        &key,
        "/v1/datasets",
        json!({ "name": "m", "kind": "matrix", "relation": "entry", "entry_bound": 1.0,
                "budget": { "rho": 1.0, "delta": 1e-6 } }),
        Vec::new(),
    )
    .await;
    let ds = app
        .records(&key, json!({ "rho": 1e6, "delta": 0.5 }), &csv_rows(3000, 5, 9))
        .await;
    fuzz_post(
        &app,
        &key,
        "/v1/privacy/plan",
        json!({ "privacy": { "rho": 0.25 }, "dataset_id": ds, "algorithm": "noisy_power",
                "params": { "k": 1, "iterations": 4 } }),
        Vec::new(),
    )
    .await;

    let catalogue = app.anonymous(Method::GET, "/v1/algorithms").await.json();
    let mut jobs = Vec::new();
    for algorithm in catalogue.as_array().unwrap() {
        let name = algorithm["name"].as_str().unwrap();
        let (params, privacy) = match name {
            "coherent_power" => (json!({ "k": 1, "coherence_bound": 5 }), json!({ "rho": 1.0 })),
            "k_dp_pca" => (json!({ "k": 1 }), json!({ "rho": 50.0, "delta": 1e-3 })),
            "cape_agn" => (
                json!({ "k": 1, "model": "mog", "sigma2": 0.0 }),
                json!({ "rho": 1.0 }),
            ),
            _ => (json!({ "k": 1 }), json!({ "rho": 1.0 })),
        };
        let template = json!({ "dataset_id": ds, "algorithm": name, "params": params, "privacy": privacy });
        let reply = app.submit(&key, template.clone()).await;
        if name != "exact" {
            assert_eq!(
                reply.status,
                StatusCode::ACCEPTED,
                "{name}: {}",
                String::from_utf8_lossy(&reply.bytes)
            );
            jobs.push(reply.json());
        }
        // Every documented parameter, one at a time, set to each odd value.
        let documented = algorithm["parameters"]["properties"].as_object().unwrap().keys();
        let extra: Vec<Vec<String>> = documented.map(|p| vec!["params".into(), p.clone()]).collect();
        jobs.extend(fuzz_post(&app, &key, "/v1/jobs", template, extra).await);
    }
    assert!(jobs.len() > 50, "only {} variants were accepted", jobs.len());
    for job in jobs {
        let id = job["id"].as_str().unwrap();
        let done = app.wait(&key, id).await;
        let status = done["status"].as_str().unwrap();
        assert!(status == "succeeded" || status == "failed", "{done}");
        if status == "succeeded" {
            let result = app.get(&format!("/v1/jobs/{id}/result"), &key).await;
            assert_eq!(result.status, StatusCode::OK, "{done}");
        }
    }
}
