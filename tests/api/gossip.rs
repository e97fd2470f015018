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
