//! Budgets and privacy targets at the edges of their published ranges: huge ε, subnormal and
//! tiny δ, δ just below 1, ρ at `MAX_RHO`, the largest finite double. Every answer is a 2xx or a
//! 4xx problem document naming the field, never a 500; a value the schema admits is accepted.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{Reply, TestApp, job};

/// The largest double below 1: the δ schemathesis sent (a budget with it answered 500, "the
/// delta budget must lie in [0, 1)", because it and 1.0 round to the same number of ledger units).
const JUST_BELOW_ONE: f64 = 0.999_999_999_999_999_9;

fn records(budget: Value) -> Value {
    json!({ "name": "edge", "kind": "records", "row_norm_bound": 1.0, "budget": budget })
}

/// Asserts that `reply` is not a server error, and that a 422 names a field starting with
/// `prefix`. Returns the status.
#[track_caller]
fn no_server_error(reply: &Reply, what: &Value, prefix: &str) -> StatusCode {
    let body = String::from_utf8_lossy(&reply.bytes);
    assert!(!reply.status.is_server_error(), "{what}: {} {body}", reply.status);
    if reply.status == StatusCode::UNPROCESSABLE_ENTITY {
        let field = reply.problem(422)["field"].as_str().unwrap_or("").to_string();
        assert!(field.starts_with(prefix), "{what}: field `{field}` in {body}");
    }
    reply.status
}

#[tokio::test]
async fn budgets_at_their_extremes_are_accepted_or_refused_naming_the_field() {
    let (app, key) = TestApp::queued_with_tenant("edges").await;
    let created = StatusCode::CREATED;
    let refused = StatusCode::UNPROCESSABLE_ENTITY;
    let cases = [
        // schemathesis' counterexample: δ rounds to the ledger's 1.
        (
            json!({ "epsilon": 14244.88, "delta": JUST_BELOW_ONE }),
            refused,
            "budget.delta",
        ),
        (
            json!({ "rho": 1, "delta": JUST_BELOW_ONE }),
            refused,
            "budget.delta",
        ),
        (
            json!({ "epsilon": 1, "delta": 0.999_999_9 }),
            refused,
            "budget.delta",
        ),
        // The published largest δ, with the largest and smallest ε.
        (json!({ "epsilon": 1e5, "delta": 0.999_999 }), created, ""),
        (json!({ "epsilon": 14244.88, "delta": 0.5 }), created, ""),
        (json!({ "epsilon": 1e-3, "delta": 0.999_999 }), created, ""),
        (json!({ "rho": 1e6, "delta": 0.999_999 }), created, ""),
        // Tiny and subnormal δ.
        (json!({ "epsilon": 1e5, "delta": 5e-324 }), created, ""),
        (json!({ "epsilon": 1e5, "delta": 1e-300 }), created, ""),
        (json!({ "epsilon": 1e-3, "delta": 5e-324 }), created, ""),
        (json!({ "rho": 1e-12, "delta": 5e-324 }), created, ""),
        (
            json!({ "rho": 1e6, "delta": 2.225_073_858_507_201_4e-308 }),
            created,
            "",
        ),
        // ρ at MAX_RHO, below one ledger unit, subnormal, and the largest double.
        (json!({ "rho": 1e6 }), created, ""),
        (json!({ "rho": 5e-13 }), refused, "budget"),
        (json!({ "rho": 5e-324 }), refused, "budget"),
        (json!({ "rho": f64::MAX }), refused, "budget.rho"),
        (
            json!({ "epsilon": 5e-324, "delta": 1e-6 }),
            refused,
            "budget.epsilon",
        ),
        (
            json!({ "epsilon": f64::MAX, "delta": 1e-6 }),
            refused,
            "budget.epsilon",
        ),
        (
            json!({ "epsilon": 1e5 + 1.0, "delta": 1e-6 }),
            refused,
            "budget.epsilon",
        ),
    ];
    for (budget, expected, field) in cases {
        let reply = app.post("/v1/datasets", &key, records(budget.clone())).await;
        assert_eq!(
            no_server_error(&reply, &budget, field),
            expected,
            "{budget}: {}",
            String::from_utf8_lossy(&reply.bytes)
        );
        if expected != created {
            continue;
        }
        // The views of an extreme budget convert it without failing.
        let id = reply.json()["id"].as_str().unwrap().to_string();
        for path in [format!("/v1/datasets/{id}"), format!("/v1/datasets/{id}/ledger")] {
            let view = app.get(&path, &key).await;
            assert_eq!(view.status, StatusCode::OK, "{budget} {path}");
            let total = &view.json()["budget"]["total"];
            let rho = total["rho"].as_f64().unwrap_or(f64::NAN);
            assert!(rho > 0.0 && rho <= 1e6, "{budget}: total {total}");
        }
    }
}

#[tokio::test]
async fn job_targets_at_their_extremes_are_never_server_errors() {
    let (app, key) = TestApp::queued_with_tenant("edges").await;
    let ds = app
        .records(
            &key,
            json!({ "rho": 1e6, "delta": 0.999_999 }),
            "1,0\n0,1\n1,1\n0.5,0.5\n",
        )
        .await;
    let targets = [
        (json!({ "rho": 1e6 }), false),
        (json!({ "rho": 5e-324 }), false),
        (json!({ "rho": 1e-12, "delta": 5e-324 }), false),
        (json!({ "rho": 1, "delta": 0.999_999 }), false),
        (json!({ "epsilon": 1e5, "delta": 0.999_999 }), false),
        (json!({ "epsilon": 1e5, "delta": 5e-324 }), false),
        (json!({ "epsilon": 5e-324, "delta": 5e-324 }), false),
        (json!({ "epsilon": 5e-324, "delta": 0.999_999 }), false),
        (json!({ "rho": 1, "delta": JUST_BELOW_ONE }), true),
        (json!({ "epsilon": 14244.88, "delta": JUST_BELOW_ONE }), true),
    ];
    for (privacy, delta_refused) in targets {
        for algorithm in [
            "analyze_gauss",
            "noisy_power",
            "eigen_sampling",
            "k_dp_pca",
            "auto",
        ] {
            let what = json!({ "algorithm": algorithm, "privacy": privacy });
            let planned = app
                .plan(&key,
                    json!({ "privacy": privacy, "dataset_id": ds, "algorithm": algorithm, "params": { "k": 1 } }),
                )
                .await;
            let submitted = app
                .submit(&key, job(&ds, algorithm, json!({ "k": 1 }), privacy.clone()))
                .await;
            for reply in [&planned, &submitted] {
                let status = no_server_error(reply, &what, "");
                if delta_refused {
                    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{what}");
                    assert_eq!(reply.json()["field"], "privacy.delta", "{what}");
                }
            }
        }
        // Conversion alone, without a dataset.
        let converted = app.plan(&key, json!({ "privacy": privacy })).await;
        let expected = if delta_refused {
            StatusCode::UNPROCESSABLE_ENTITY
        } else {
            StatusCode::OK
        };
        assert_eq!(
            no_server_error(&converted, &privacy, "privacy"),
            expected,
            "{privacy}"
        );
    }
    for (display_delta, expected) in [
        (5e-324, StatusCode::OK),
        (0.999_999, StatusCode::OK),
        (JUST_BELOW_ONE, StatusCode::UNPROCESSABLE_ENTITY),
    ] {
        let body = json!({ "privacy": { "rho": 1 }, "display_delta": display_delta });
        let reply = app.plan(&key, body.clone()).await;
        assert_eq!(
            no_server_error(&reply, &body, "display_delta"),
            expected,
            "{body}"
        );
    }
}
