//! `gossip_power` through HTTP: the judged defaults run and return the consensus error, and a
//! mixing matrix that breaks Assumption 2 is a 422 problem naming `params.graph`.

use serde_json::json;

use crate::helpers::{Records, csv_rows};

#[tokio::test]
async fn gossip_power_runs_at_its_defaults_and_reports_the_consensus_error() {
    let t = Records::start(json!({ "rho": 10.0 }), &csv_rows(2000, 20, 7)).await;
    let params = json!({ "k": 2, "agents": 4, "graph": "ring" });
    let result = t.result_of("gossip_power", params, json!({ "rho": 5.0 })).await;
    assert_eq!(result["n_components"], 2, "{result}");
    let error = result["released"]["consensus_error"]
        .as_f64()
        .expect("consensus_error");
    assert!((0.0..1e-3).contains(&error), "{result}");
    let gap = result["released"]["spectral_gap"].as_f64().expect("spectral_gap");
    assert!((gap - 2.0 / 3.0).abs() < 1e-9, "{result}");
    // csv_rows puts the top direction on the first feature.
    let first = result["basis"][0][0].as_f64().expect("basis");
    assert!(first.abs() > 0.9, "{result}");
}

#[tokio::test]
async fn a_mixing_matrix_that_is_not_doubly_stochastic_is_a_422() {
    let t = Records::queued(json!({ "rho": 10.0 }), &csv_rows(50, 6, 3)).await;
    for (graph, needle) in [
        (
            json!({ "matrix": [[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.5, 0.0, 0.5]] }),
            "symmetric",
        ),
        (
            json!({ "matrix": [[0.6, 0.2, 0.2], [0.2, 0.6, 0.2], [0.2, 0.2, 0.5]] }),
            "doubly stochastic",
        ),
        (
            json!({ "matrix": [[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.0, 0.0, 1.0]] }),
            "disconnected",
        ),
        (json!("hypercube"), "unknown variant"),
    ] {
        let params = json!({ "k": 1, "agents": 3, "graph": graph });
        let doc = t
            .refused("gossip_power", params, json!({ "rho": 1.0 }), "params.graph")
            .await;
        assert!(doc["detail"].as_str().unwrap().contains(needle), "{doc}");
    }
    let too_many = json!({ "k": 1, "agents": 7 });
    t.refused("gossip_power", too_many, json!({ "rho": 1.0 }), "params.agents")
        .await;
}

/// A live `gossip_power` study body: `sizes` are the sites' blocks, d = 12.
fn gossip_study(sizes: &[usize]) -> serde_json::Value {
    json!({
        "name": "gossip",
        "algorithm": "gossip_power",
        "n_features": 12,
        "relation": "replace_one",
        "row_norm_bound": 1.0,
        "params": {"k": 2, "graph": "ring"},
        "privacy": {"rho": 5.0},
        "sites": sizes.iter().enumerate().map(|(i, d)| json!({"name": format!("a{i}"), "n_features": d})).collect::<Vec<_>>(),
    })
}

/// Live gossip studies: created with the sites' blocks (the stored configuration partitions
/// the features by them and every agent is needed), and refused with the field at fault.
#[tokio::test]
async fn gossip_studies_are_created_with_blocks_and_bad_ones_are_refused() {
    let (app, key) = crate::helpers::TestApp::start_with_tenant("owner").await;
    let reply = app.post("/v1/studies", &key, gossip_study(&[3, 3, 3, 3])).await;
    reply.expect(axum::http::StatusCode::CREATED);
    let created = reply.json();
    let study = &created["study"];
    assert_eq!(study["threshold"], 4, "{created}");
    assert_eq!(study["config"]["blocks"], json!([3, 3, 3, 3]), "{created}");
    assert_eq!(
        study["config"]["gossip"]["partition"][1],
        json!([3, 4, 5]),
        "{created}"
    );
    let cases: Vec<(serde_json::Value, &str)> = vec![
        (gossip_study(&[3, 3, 3, 2]), "sites"),
        (gossip_study(&[12, 0]), "sites[1].n_features"),
        (
            {
                let mut body = gossip_study(&[6, 6]);
                body["sites"][0].as_object_mut().unwrap().remove("n_features");
                body
            },
            "sites[0].n_features",
        ),
        (
            {
                let mut body = gossip_study(&[6, 6]);
                body["threshold"] = json!(1);
                body
            },
            "threshold",
        ),
        (
            {
                let mut body = gossip_study(&[6, 6]);
                body["params"]["partition"] = json!([[0], [1]]);
                body
            },
            "params.partition",
        ),
        (
            {
                let mut body = gossip_study(&[4, 4, 4]);
                body["params"]["agents"] = json!(4);
                body
            },
            "params.agents",
        ),
        (
            {
                let mut body = gossip_study(&[4, 4, 4]);
                body["params"]["graph"] =
                    json!({"matrix": [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]});
                body
            },
            "params.graph",
        ),
        (
            {
                let mut body = gossip_study(&[4, 4, 4]);
                body["algorithm"] = json!("federated_power");
                body["params"] = json!({"k": 2});
                body
            },
            "sites[0].n_features",
        ),
    ];
    for (body, field) in cases {
        let doc = app.post("/v1/studies", &key, body.clone()).await.problem(422);
        assert_eq!(doc["field"], field, "{body}: {doc}");
    }
    // add_remove cannot hide a record: each message has one row per record.
    let mut body = gossip_study(&[6, 6]);
    body["relation"] = json!("add_remove");
    let reply = app.post("/v1/studies", &key, body).await;
    assert!(reply.status.is_client_error(), "{:?}", reply.status);
}
