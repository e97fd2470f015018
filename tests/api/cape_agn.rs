//! cape_agn through HTTP: listed with its parameters, a simulate-mode job returns the
//! components and both stages' CAPE noise reports, and one site is a 422 naming params.sites.

use axum::http::Method;
use serde_json::json;

use crate::helpers::{TestApp, job};

/// Word-count documents of 4 words over 6 words, two topics (words 0–2 and 3–5), as CSV.
fn documents(n: usize) -> String {
    let mut out = String::new();
    for i in 0..n {
        let base = if i % 2 == 0 { 0 } else { 3 };
        let mut counts = [0u32; 6];
        for w in 0..4 {
            counts[base + (i / 2 + w) % 3] += 1;
        }
        let row: Vec<String> = counts.iter().map(|c| c.to_string()).collect();
        out.push_str(&row.join(","));
        out.push('\n');
    }
    out
}

#[tokio::test]
async fn cape_agn_is_listed_runs_and_refuses_one_site() {
    let app = TestApp::start().await;
    let list = app.anonymous(Method::GET, "/v1/algorithms").await.json();
    let info = list
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "cape_agn")
        .expect("cape_agn listed")
        .clone();
    let properties = info["parameters"]["properties"]
        .as_object()
        .expect("a parameter schema");
    for name in [
        "k",
        "model",
        "sigma2",
        "sites",
        "site_shares",
        "dropouts",
        "pair_ratio",
    ] {
        assert!(properties.contains_key(name), "{name} in {info}");
    }

    let key = app.tenant("t").await;
    let ds = app
        .dataset(
            &key,
            json!({ "name": "docs", "kind": "records", "row_norm_bound": 4.0, "row_l1_bound": 4.0, "budget": { "rho": 1e6 } }),
        )
        .await;
    let reply = app
        .upload(&key, &ds, "text/csv", documents(600).into_bytes())
        .await;
    assert_eq!(
        reply.status.as_u16(),
        200,
        "{}",
        String::from_utf8_lossy(&reply.bytes)
    );

    let stm = |sites: u32| json!({ "k": 2, "model": "stm", "sites": sites });
    let done = app
        .succeeded(&key, job(&ds, "cape_agn", stm(3), json!({ "rho": 1e5 })))
        .await;
    let result = app.result(&key, &done).await;
    let components = result["released"]["components"]["components"]
        .as_array()
        .expect("components");
    assert_eq!(components.len(), 2, "{result}");
    assert_eq!(components[0].as_array().map(Vec::len), Some(6));
    assert_eq!(result["released"]["cape_stage1"]["sites"], 3, "{result}");
    assert_eq!(result["released"]["cape_stage2"]["fallback"], false, "{result}");

    let body = job(&ds, "cape_agn", stm(1), json!({ "rho": 1 }));
    app.refused(&key, body, "params.sites").await;
}
