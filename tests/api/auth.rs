use axum::http::{Method, StatusCode};
use serde_json::json;

use crate::helpers::{ADMIN, TestApp};

#[tokio::test]
async fn api_requires_a_valid_bearer_key() {
    let app = TestApp::without_runner().await;
    app.anonymous(Method::GET, "/v1/datasets").await.problem(401);
    app.call(Method::GET, "/v1/datasets", Some("ppk_wrong"), None)
        .await
        .problem(401);
    let key = app.tenant("a").await;
    assert!(key.starts_with("ppk_"));
    assert_eq!(app.get("/v1/datasets", &key).await.status, StatusCode::OK);
}

#[tokio::test]
async fn only_the_admin_key_creates_tenants() {
    let (app, key) = TestApp::queued_with_tenant("a").await;
    app.post("/v1/tenants", &key, json!({ "name": "x" }))
        .await
        .problem(403);
    app.call(Method::POST, "/v1/tenants", None, Some(json!({ "name": "x" })))
        .await
        .problem(401);
    app.post("/v1/tenants", ADMIN, json!({ "name": "" }))
        .await
        .problem(422);
    let reply = app.post("/v1/tenants", ADMIN, json!({ "name": "b" })).await;
    assert_eq!(reply.status, StatusCode::CREATED);
    assert_ne!(reply.json()["api_key"], key.as_str());
}

#[tokio::test]
async fn tenants_see_only_their_own_datasets_and_jobs() {
    let (app, alice) = TestApp::queued_with_tenant("alice").await;
    let bob = app.tenant("bob").await;
    let ds = app.records(&alice, json!({ "rho": 1.0 }), "1,0\n0,1\n").await;
    let job = app
        .submit(&alice, json!({ "dataset_id": ds, "algorithm": "analyze_gauss", "params": { "k": 1 }, "privacy": { "rho": 0.1 } }))
        .await
        .json();
    let job_id = job["id"].as_str().unwrap();
    for path in [
        format!("/v1/datasets/{ds}"),
        format!("/v1/datasets/{ds}/ledger"),
        format!("/v1/jobs/{job_id}"),
        format!("/v1/jobs/{job_id}/result"),
    ] {
        app.get(&path, &bob).await.problem(404);
    }
    app.call(Method::DELETE, &format!("/v1/datasets/{ds}"), Some(&bob), None)
        .await
        .problem(404);
    app.call(Method::DELETE, &format!("/v1/jobs/{job_id}"), Some(&bob), None)
        .await
        .problem(404);
    app.upload_csv(&bob, &ds, "1,2\n").await.problem(404);
    let spend = json!({ "dataset_id": ds, "algorithm": "analyze_gauss", "params": { "k": 1 }, "privacy": { "rho": 0.1 } });
    app.submit(&bob, spend).await.problem(404);
    assert_eq!(app.list("/v1/datasets", &bob).await.len(), 0);
    assert_eq!(app.list("/v1/jobs", &bob).await.len(), 0);
}
