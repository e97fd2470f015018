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

#[tokio::test]
async fn the_admin_rotates_and_revokes_a_tenants_key_with_effect_at_once() {
    let app = TestApp::without_runner().await;
    let created = app.post("/v1/tenants", ADMIN, json!({ "name": "bob" })).await;
    let created = created.expect(StatusCode::CREATED).json();
    let (tenant, old) = (
        created["id"].as_str().unwrap(),
        created["api_key"].as_str().unwrap(),
    );
    let other = app.tenant("carol").await;
    let key_path = format!("/v1/tenants/{tenant}/api-key");
    // The key is cached by its first use; rotation and revocation still take effect at once.
    app.get("/v1/datasets", old).await.expect(StatusCode::OK);

    // Only the admin key; unknown tenants and malformed ids are problem documents.
    for key in [old, other.as_str()] {
        app.post(&key_path, key, json!({})).await.problem(403);
        app.call(Method::DELETE, &key_path, Some(key), None)
            .await
            .problem(403);
    }
    app.call(Method::POST, &key_path, None, None).await.problem(401);
    let nobody = format!("/v1/tenants/{}/api-key", uuid::Uuid::new_v4());
    app.call(Method::POST, &nobody, Some(ADMIN), None)
        .await
        .problem(404);
    app.call(Method::DELETE, &nobody, Some(ADMIN), None)
        .await
        .problem(404);
    app.call(Method::POST, "/v1/tenants/not-a-uuid/api-key", Some(ADMIN), None)
        .await
        .problem(404);

    let rotated = app.call(Method::POST, &key_path, Some(ADMIN), None).await;
    let rotated = rotated.expect(StatusCode::OK).json();
    let new = rotated["api_key"].as_str().unwrap();
    assert_eq!(rotated["tenant_id"], tenant);
    assert!(new.starts_with("ppk_") && new != old);
    assert!(rotated["issued_at"].is_string());
    let refused = app.get("/v1/datasets", old).await.problem(401);
    assert_eq!(refused["detail"], "unknown API key");
    app.get("/v1/datasets", new).await.expect(StatusCode::OK);

    let revoked = app.call(Method::DELETE, &key_path, Some(ADMIN), None).await;
    assert_eq!(revoked.status, StatusCode::NO_CONTENT);
    assert!(revoked.bytes.is_empty());
    app.get("/v1/datasets", new).await.problem(401);
    let again = app.call(Method::DELETE, &key_path, Some(ADMIN), None).await;
    assert_eq!(again.status, StatusCode::NO_CONTENT);
    // Other tenants are untouched; a rotation gives the revoked tenant a key again.
    app.get("/v1/datasets", &other).await.expect(StatusCode::OK);
    let back = app.call(Method::POST, &key_path, Some(ADMIN), None).await.json();
    app.get("/v1/datasets", back["api_key"].as_str().unwrap())
        .await
        .expect(StatusCode::OK);
}
