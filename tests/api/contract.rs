//! The contract for generated clients: what the OpenAPI document promises (every error a problem
//! document, unique operation ids, the upload as a file) and the server keeping those promises
//! (uploads as octet streams, the published limits enforced exactly, job timings withheld where
//! they would reveal n).

use std::collections::HashSet;

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{ADMIN, TestApp, csv_rows, job};

fn records(name: &str, budget: Value) -> Value {
    json!({ "name": name, "kind": "records", "row_norm_bound": 1.0, "budget": budget })
}

#[tokio::test]
async fn every_operation_has_a_unique_id_and_problem_documents_for_its_errors() {
    let doc: Value = serde_json::from_str(&privpca::http::openapi::document()).unwrap();
    let mut ids = HashSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let id = op["operationId"].as_str().unwrap_or_default();
            assert!(
                id.contains('_') && ids.insert(id.to_string()),
                "{method} {path}: {id}"
            );
            let responses = op["responses"].as_object().unwrap();
            for (status, response) in responses {
                if status.parse::<u16>().unwrap() >= 400 {
                    assert_eq!(
                        response["content"]["application/problem+json"]["schema"]["$ref"],
                        "#/components/schemas/ProblemDocument",
                        "{method} {path} {status}"
                    );
                }
            }
            if op["requestBody"]["content"]["application/json"].is_object() {
                for status in ["400", "413", "415", "422"] {
                    assert!(
                        responses.contains_key(status),
                        "{method} {path} documents {status}"
                    );
                }
            }
            if op["security"].as_array().is_some_and(|s| !s.is_empty()) {
                assert!(responses.contains_key("401"), "{method} {path} documents 401");
            }
        }
    }
    for id in [
        "submit_job",
        "upload_dataset_data",
        "get_job_result",
        "create_study",
        "list_algorithms",
    ] {
        assert!(ids.contains(id), "{id}");
    }
    let upload = &doc["paths"]["/v1/datasets/{id}/data"]["put"];
    assert_eq!(
        upload["requestBody"]["content"]["application/octet-stream"]["schema"],
        json!({ "type": "string", "format": "binary" })
    );
    for rate_limited in [upload, &doc["paths"]["/v1/jobs"]["post"]] {
        assert!(rate_limited["responses"]["429"].is_object());
    }
    // Privacy is one of ρ or (ε, δ); statuses are enums.
    let privacy = &doc["components"]["schemas"]["PrivacyInput"]["oneOf"];
    assert_eq!(privacy.as_array().map(Vec::len), Some(2), "{privacy}");
    let statuses = &doc["components"]["schemas"]["JobStatus"]["enum"];
    assert_eq!(statuses.as_array().map(Vec::len), Some(5), "{statuses}");
    // No single-letter field in any published object.
    for (name, schema) in doc["components"]["schemas"].as_object().unwrap() {
        if let Some(properties) = schema["properties"].as_object()
            && !name.ends_with("_params")
        {
            for field in properties.keys() {
                assert!(field.len() > 1, "{name}.{field}");
            }
        }
    }
}

#[tokio::test]
async fn an_octet_stream_upload_is_npy_by_its_magic_or_names_its_format() {
    let (app, key) = TestApp::queued_with_tenant("t").await;
    const OCTETS: &str = "application/octet-stream";
    let (app, key) = (&app, &key);
    let upload = move |id: String, query: &'static str, content_type: &'static str, body: &[u8]| {
        let body = body.to_vec();
        async move { app.upload_with_query(key, &id, query, content_type, body).await }
    };
    let npy = privpca::http::jobs::npy_bytes(3, 2, &[1.0, 0.0, 0.5, 0.0, 1.0, 0.5]);

    let ds = app.dataset(key, records("npy", json!({ "rho": 1 }))).await;
    let reply = upload(ds, "", OCTETS, &npy).await;
    reply.expect(StatusCode::OK);
    assert_eq!(
        (
            reply.json()["n_samples"].as_i64(),
            reply.json()["n_features"].as_i64()
        ),
        (Some(3), Some(2))
    );

    // A CSV body sent as an octet stream must say it is CSV.
    let ds = app.dataset(key, records("csv", json!({ "rho": 1 }))).await;
    let problem = upload(ds.clone(), "", OCTETS, b"1,2\n3,4\n").await.problem(415);
    assert!(
        problem["detail"].as_str().unwrap().contains("?format="),
        "{problem}"
    );
    let reply = upload(ds, "?format=csv", OCTETS, b"1,2\n3,4\n").await;
    reply.expect(StatusCode::OK);

    let ds = app.dataset(key, records("json", json!({ "rho": 1 }))).await;
    upload(ds.clone(), "?format=json", "text/csv", b"1,2\n")
        .await
        .problem(415);
    upload(ds.clone(), "?format=xml", OCTETS, b"1,2\n")
        .await
        .problem(422);
    let reply = upload(ds, "?format=json", OCTETS, b"[[1, 2], [3, 4]]").await;
    reply.expect(StatusCode::OK);
    // The named media types keep working, with or without an agreeing ?format=.
    let ds = app.dataset(key, records("x-npy", json!({ "rho": 1 }))).await;
    let reply = upload(ds, "?format=npy", "application/x-npy", &npy).await;
    reply.expect(StatusCode::OK);
}

#[tokio::test]
async fn the_published_limits_are_the_enforced_ones() {
    let (app, key) = TestApp::queued_with_tenant("t").await;
    // Names: not only white space, at most 200 characters counted before trimming.
    for name in ["", "   ", &format!(" {}", "a".repeat(200))] {
        app.post("/v1/datasets", &key, records(name, json!({ "rho": 1 })))
            .await
            .problem(422);
        app.post("/v1/tenants", ADMIN, json!({ "name": name }))
            .await
            .problem(422);
    }
    let reply = app
        .post(
            "/v1/datasets",
            &key,
            records(&"a".repeat(200), json!({ "rho": 1 })),
        )
        .await;
    assert_eq!(reply.status, StatusCode::CREATED);
    // Privacy is one of ρ or (ε, δ), in the published ranges.
    for privacy in [
        json!({}),
        json!({ "rho": 1, "epsilon": 1 }),
        json!({ "epsilon": 1 }),
        json!({ "epsilon": 1.5e5, "delta": 1e-6 }),
        json!({ "rho": 2e6 }),
        json!({ "rho": 1, "delta": 1 }),
    ] {
        app.plan(&key, json!({ "privacy": privacy })).await.problem(422);
    }
    for privacy in [
        json!({ "epsilon": 1e5, "delta": 0.5 }),
        json!({ "rho": 1e6 }),
        json!({ "rho": 5e-324 }),
    ] {
        let reply = app.plan(&key, json!({ "privacy": privacy })).await;
        assert_eq!(
            reply.status,
            StatusCode::OK,
            "{privacy}: {}",
            String::from_utf8_lossy(&reply.bytes)
        );
    }
    // Budgets: an (ε, δ) budget needs ε ≥ 0.001, a ρ budget at least one ledger unit.
    for (budget, status) in [
        (
            json!({ "epsilon": 0.0005, "delta": 1e-6 }),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (json!({ "epsilon": 0.001, "delta": 5e-324 }), StatusCode::CREATED),
        (json!({ "rho": 1e-12 }), StatusCode::CREATED),
        (json!({ "rho": 5e-13 }), StatusCode::UNPROCESSABLE_ENTITY),
    ] {
        let reply = app.post("/v1/datasets", &key, records("b", budget.clone())).await;
        assert_eq!(
            reply.status,
            status,
            "{budget}: {}",
            String::from_utf8_lossy(&reply.bytes)
        );
    }
    // A whole number written with a fraction is an integer, as JSON Schema counts it.
    let ds = app.records(&key, json!({ "rho": 1 }), "1,0\n0,1\n1,1\n").await;
    let reply = app
        .submit(
            &key,
            job(&ds, "analyze_gauss", json!({ "k": 1.0 }), json!({ "rho": 0.1 })),
        )
        .await;
    reply.expect(StatusCode::ACCEPTED);
    app.submit(
        &key,
        job(&ds, "analyze_gauss", json!({ "k": 1.5 }), json!({ "rho": 0.1 })),
    )
    .await
    .problem(422);
    // Idempotency keys: 1 to 255 visible ASCII characters.
    for bad in ["", "a b", &"k".repeat(256)] {
        let headers = [("content-type", "application/json"), ("idempotency-key", bad)];
        let body = job(&ds, "analyze_gauss", json!({ "k": 1 }), json!({ "rho": 0.1 }));
        app.raw(Method::POST, "/v1/jobs", &key, headers, body.to_string())
            .await
            .problem(422);
    }
}

#[tokio::test]
async fn job_timings_are_withheld_where_they_would_reveal_the_record_count() {
    let (app, key) = TestApp::start_with_tenant("t").await;
    let (shown, hidden) = app.shown_and_hidden(&key, &csv_rows(200, 4, 3)).await;
    let params = json!({ "k": 1 });
    let public = app
        .run(
            &key,
            job(&shown, "analyze_gauss", params.clone(), json!({ "rho": 0.1 })),
        )
        .await;
    let private = app
        .run(&key, job(&hidden, "analyze_gauss", params, json!({ "rho": 0.1 })))
        .await;
    assert_eq!(
        (public["status"].as_str(), private["status"].as_str()),
        (Some("succeeded"), Some("succeeded"))
    );
    assert!(
        public["run_ms"].is_i64() && public["started_at"].is_string(),
        "{public}"
    );
    for view in [
        private.clone(),
        app.get(&format!("/v1/jobs/{}", private["id"].as_str().unwrap()), &key)
            .await
            .json(),
    ] {
        // finished_at − created_at would be the run time to the millisecond on an idle queue.
        for field in ["run_ms", "started_at", "finished_at", "queued_ms"] {
            assert!(view[field].is_null(), "{field}: {view}");
        }
        assert!(view["created_at"].is_string(), "{view}");
    }
    let list = app.get("/v1/jobs", &key).await.json();
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 2);
    for view in list {
        let on_hidden = view["dataset_id"] == hidden.as_str();
        for field in ["run_ms", "started_at", "finished_at", "queued_ms"] {
            assert_eq!(view[field].is_null(), on_hidden, "{field}: {view}");
        }
    }
}
