//! `federated_power` jobs (simulate mode) through HTTP: the holes of issue 22.

use serde_json::json;

use crate::helpers::{Records, TestApp, csv_rows, job};

/// A step 2^-f coarser than the sites' noise grid would round noise away: refused at
/// submission, naming the field.
#[tokio::test]
async fn fraction_bits_that_round_noise_away_are_refused_by_name() {
    let t = Records::queued(json!({ "rho": 10.0 }), &csv_rows(300, 6, 1)).await;
    let params = json!({ "k": 2, "sites": 4, "threshold": 4, "fraction_bits": 0 });
    let field = "params.fraction_bits";
    let doc = t
        .refused("federated_power", params, json!({ "rho": 0.5 }), field)
        .await;
    let detail = doc["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("round away"), "{doc}");
    // Nothing was charged for the refused job.
    assert_eq!(t.app.spent_rho(&t.key, &t.ds).await, 0.0);
}

/// On an add_remove dataset n is private: a simulated job with a small max_site_samples must
/// not fail because a shard holds more records (which used to reveal n, a bit per job), and
/// must not fail for fewer records than sites either.
#[tokio::test]
async fn an_add_remove_job_never_fails_because_of_n() {
    let (app, key) = TestApp::start_with_tenant("t").await;
    for (n, name) in [(200, "many"), (2, "fewer than sites")] {
        let ds = app
            .dataset(
                &key,
                json!({ "name": name, "kind": "records", "relation": "add_remove", "row_norm_bound": 1, "budget": { "rho": 10 } }),
            )
            .await;
        app.upload(&key, &ds, "text/csv", csv_rows(n, 5, 3).into_bytes())
            .await;
        let params = json!({ "k": 2, "sites": 3, "max_site_samples": 10, "iterations": 4 });
        let done = app
            .run(&key, job(&ds, "federated_power", params, json!({ "rho": 1.0 })))
            .await;
        assert_eq!(done["status"], "succeeded", "n = {n}: {done}");
        let result = app.result(&key, &done).await;
        assert_eq!(result["basis"].as_array().map(Vec::len), Some(2), "{result}");
    }
}

/// SecAgg+ in simulate mode: a sparse job succeeds; bad rates, rates without `sparse`, more
/// scripted dropouts than the dropout rate allows, and a federation too small for any
/// neighbourhood are 422s naming the field.
#[tokio::test]
async fn secagg_plus_runs_and_bad_rates_are_refused_by_name() {
    let t = Records::start(json!({ "rho": 10.0 }), &csv_rows(300, 6, 1)).await;
    let params = json!({ "k": 2, "sites": 40, "threshold": 21, "iterations": 3,
        "secure_aggregation": "sparse", "corruption_rate": 0.05, "dropout_rate": 0.05,
        "dropouts": [{ "site": 3, "round": 2 }] });
    let done = t
        .succeeded("federated_power", params, json!({ "rho": 1.0 }))
        .await;
    assert_eq!(done["config"]["secagg_plus"]["degree"], 8, "{done}");
    let cases = [
        (
            json!({ "k": 2, "sites": 40, "secure_aggregation": "sparse", "corruption_rate": -0.1 }),
            "params.corruption_rate",
        ),
        (
            json!({ "k": 2, "sites": 40, "secure_aggregation": "sparse", "dropout_rate": 0.5 }),
            "params.dropout_rate",
        ),
        (
            json!({ "k": 2, "sites": 40, "dropout_rate": 0.1 }),
            "params.dropout_rate",
        ),
        (
            json!({ "k": 2, "sites": 3, "secure_aggregation": "sparse" }),
            "params.secure_aggregation",
        ),
        (
            json!({ "k": 2, "sites": 10, "secure_aggregation": "sparse", "dropout_rate": 0.1,
                "dropouts": [{ "site": 1, "round": 1 }, { "site": 2, "round": 1 }] }),
            "params.dropouts",
        ),
    ];
    for (params, field) in cases {
        t.refused("federated_power", params, json!({ "rho": 0.5 }), field)
            .await;
    }
}
