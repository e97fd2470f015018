//! Sparse symmetric matrices: Matrix Market uploads stored sparse, validation naming the line,
//! the capability check of dense-only algorithms, and the sparse algorithms against dense ones
//! on the same matrix.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, job, orthonormality_error};

/// Lazy normalised adjacency (I + D^-½WD^-½)/2 of a planted-partition graph on `n` nodes in 4
/// groups, from a fixed LCG: `(i, j, value)` for i ≥ j (the lower triangle with the diagonal).
fn lower_triangle(n: usize) -> Vec<(usize, usize, f64)> {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut uniform = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut edges = Vec::new();
    let mut degree = vec![0.0; n];
    for i in 0..n {
        for j in 0..i {
            let p = if i % 4 == j % 4 { 0.15 } else { 0.01 };
            if uniform() < p {
                edges.push((i, j));
                degree[i] += 1.0;
                degree[j] += 1.0;
            }
        }
    }
    let mut entries: Vec<(usize, usize, f64)> = (0..n).map(|i| (i, i, 0.5)).collect();
    entries.extend(
        edges
            .into_iter()
            .map(|(i, j)| (i, j, 0.5 / (degree[i] * degree[j] as f64).sqrt())),
    );
    entries
}

/// The matrix as Matrix Market text, `symmetric` (lower triangle) or `general` (both).
fn mtx(n: usize, symmetric: bool) -> String {
    let lower = lower_triangle(n);
    let mut lines = Vec::new();
    for &(i, j, v) in &lower {
        lines.push(format!("{} {} {v:e}", i + 1, j + 1));
        if !symmetric && i != j {
            lines.push(format!("{} {} {v:e}", j + 1, i + 1));
        }
    }
    let symmetry = if symmetric { "symmetric" } else { "general" };
    format!(
        "%%MatrixMarket matrix coordinate real {symmetry}\n% written by the test\n{n} {n} {}\n{}\n",
        lines.len(),
        lines.join("\n")
    )
}

/// The same matrix as dense CSV rows.
fn dense_csv(n: usize) -> String {
    let mut a = vec![vec![0.0; n]; n];
    for (i, j, v) in lower_triangle(n) {
        a[i][j] = v;
        a[j][i] = v;
    }
    a.iter()
        .map(|row| row.iter().map(|v| format!("{v:e}")).collect::<Vec<_>>().join(","))
        .collect::<Vec<_>>()
        .join("\n")
}

async fn matrix_dataset(app: &TestApp, key: &str, public: bool) -> String {
    let spec = if public {
        json!({ "name": "graph", "kind": "matrix", "public": true })
    } else {
        json!({ "name": "graph", "kind": "matrix", "entry_bound": 1.0, "budget": { "rho": 10 } })
    };
    app.dataset(key, spec).await
}

async fn sparse_upload(app: &TestApp, key: &str, id: &str, text: String) -> Value {
    app.upload(key, id, "application/x-matrix-market", text.into_bytes())
        .await
        .expect(StatusCode::OK)
        .json()
}

/// A new matrix dataset holding `mtx(n, true)`, stored sparse: its id and the upload's view.
async fn sparse_dataset(app: &TestApp, key: &str, public: bool, n: usize) -> (String, Value) {
    let id = matrix_dataset(app, key, public).await;
    let view = sparse_upload(app, key, &id, mtx(n, true)).await;
    (id, view)
}

/// A new matrix dataset holding the same matrix as [`sparse_dataset`], uploaded dense as CSV.
async fn dense_dataset(app: &TestApp, key: &str, public: bool, n: usize) -> String {
    let id = matrix_dataset(app, key, public).await;
    app.upload(key, &id, "text/csv", dense_csv(n).into_bytes())
        .await
        .expect(StatusCode::OK);
    id
}

/// Uploads `text` as Matrix Market, expects a 422 and returns its `detail`.
async fn refused_upload(app: &TestApp, key: &str, id: &str, text: &str) -> String {
    let doc = app
        .upload(key, id, "application/x-matrix-market", text.as_bytes().to_vec())
        .await
        .problem(422);
    doc["detail"].as_str().unwrap().to_owned()
}

/// The basis of a finished job as columns.
async fn basis(app: &TestApp, key: &str, done: &Value) -> Vec<Vec<f64>> {
    let result = app.result(key, done).await;
    serde_json::from_value(result["basis"].clone()).unwrap()
}

/// ‖PᵤP_v‖_F² / k: 1 when two k-dimensional subspaces coincide.
fn overlap(u: &[Vec<f64>], v: &[Vec<f64>]) -> f64 {
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let total: f64 = u
        .iter()
        .flat_map(|a| v.iter().map(move |b| dot(a, b).powi(2)))
        .sum();
    total / u.len() as f64
}

#[tokio::test]
async fn a_matrix_market_upload_is_stored_sparse_in_either_symmetry() {
    let (app, key) = TestApp::start_with_tenant("t").await;
    let (_, view) = sparse_dataset(&app, &key, true, 200).await;
    assert_eq!(view["status"], "ready");
    assert_eq!(view["n_features"], 200);
    assert_eq!(view["sparse"], true);
    let nnz = view["nnz"].as_i64().unwrap();
    let off_diagonal = lower_triangle(200).len() as i64 - 200;
    assert_eq!(nnz, 200 + 2 * off_diagonal);
    // `general` with symmetric content, as an octet stream naming the format.
    let general = matrix_dataset(&app, &key, true).await;
    let reply = app
        .upload_with_query(
            &key,
            &general,
            "?format=mtx",
            "application/octet-stream",
            mtx(200, false).into_bytes(),
        )
        .await;
    reply.expect(StatusCode::OK);
    assert_eq!(reply.json()["nnz"], nnz);
    // An octet stream that names no format is recognised by its `%%MatrixMarket` banner.
    let sniffed = matrix_dataset(&app, &key, true).await;
    let reply = app
        .upload_with_query(
            &key,
            &sniffed,
            "",
            "application/octet-stream",
            mtx(200, true).into_bytes(),
        )
        .await;
    reply.expect(StatusCode::OK);
    assert_eq!(
        (reply.json()["sparse"].clone(), reply.json()["nnz"].clone()),
        (json!(true), json!(nnz))
    );
    // A private dataset does not show nnz (a statistic of the data), only that it is sparse.
    let (_, view) = sparse_dataset(&app, &key, false, 200).await;
    assert_eq!(view["sparse"], true);
    assert!(view["nnz"].is_null(), "{view}");
    // A dense upload is not sparse.
    let dense = app.matrix(&key).await;
    let view = app.get(&format!("/v1/datasets/{dense}"), &key).await.json();
    assert_eq!(view["sparse"], false);
}

#[tokio::test]
async fn a_bad_line_is_named_and_nothing_is_stored() {
    let (app, key) = TestApp::start_with_tenant("t").await;
    let id = matrix_dataset(&app, &key, true).await;
    // Line 5 (banner, comment, size line, two entries) points past the side 3.
    let bad = "%%MatrixMarket matrix coordinate real symmetric\n% c\n3 3 3\n1 1 1\n4 1 0.5\n3 3 1\n";
    let detail = refused_upload(&app, &key, &id, bad).await;
    assert!(
        detail.contains("line 5") && detail.contains("out of range"),
        "{detail}"
    );
    assert_eq!(
        app.get(&format!("/v1/datasets/{id}"), &key).await.json()["status"],
        "empty"
    );
    for (text, line) in [
        (
            "%%MatrixMarket matrix coordinate real symmetric\n2 2 2\n1 1 1\n1 1 2\n",
            "line 4",
        ),
        (
            "%%MatrixMarket matrix coordinate real symmetric\n2 2 1\n2 1 nan\n",
            "line 3",
        ),
        (
            "%%MatrixMarket matrix coordinate real general\n2 2 1\n2 1 1\n",
            "line 3",
        ),
    ] {
        let detail = refused_upload(&app, &key, &id, text).await;
        assert!(detail.contains(line), "{text:?}: {detail}");
    }
    // Nothing was kept: the dataset still takes its data.
    sparse_upload(&app, &key, &id, mtx(50, true)).await;
    // A records dataset refuses Matrix Market.
    let records = app
        .dataset(
            &key,
            json!({ "name": "r", "kind": "records", "row_norm_bound": 1.0, "public": true }),
        )
        .await;
    let detail = refused_upload(&app, &key, &records, &mtx(5, true)).await;
    assert!(detail.contains("matrix dataset"), "{detail}");
}

#[tokio::test]
async fn the_nonzero_cap_is_configurable_and_the_dense_side_limit_does_not_apply() {
    let app = TestApp::build(true, |config| {
        config.max_d = 10;
        config.max_nnz = 400;
    })
    .await;
    let key = app.tenant("t").await;
    let id = matrix_dataset(&app, &key, true).await;
    // 60 > max_d, but few entries: accepted.
    sparse_upload(&app, &key, &id, mtx(60, true)).await;
    let big = matrix_dataset(&app, &key, true).await;
    let detail = refused_upload(&app, &key, &big, &mtx(200, true)).await;
    assert!(detail.contains("more than 400 stored entries"), "{detail}");
}

#[tokio::test]
async fn dense_only_algorithms_refuse_sparse_data_with_the_reason() {
    let (app, key) = TestApp::start_with_tenant("t").await;
    let (id, _) = sparse_dataset(&app, &key, false, 100).await;
    let doc = app
        .refused(
            &key,
            job(&id, "analyze_gauss", json!({ "k": 2 }), json!({ "rho": 0.5 })),
            "algorithm",
        )
        .await;
    let detail = doc["detail"].as_str().unwrap();
    assert!(
        detail.contains("needs the dense matrix") && detail.contains("noisy_power"),
        "{detail}"
    );
    let catalog = app.get("/v1/algorithms", &key).await.json();
    let sparse: Vec<&str> = catalog
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["sparse"] == true)
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert!(
        sparse.contains(&"noisy_power") && sparse.contains(&"exact") && !sparse.contains(&"analyze_gauss")
    );
}

#[tokio::test]
async fn exact_and_noisy_power_on_sparse_data_match_the_dense_computation() {
    let (app, key) = TestApp::start_with_tenant("t").await;
    let n = 300;
    let (sparse, _) = sparse_dataset(&app, &key, true, n).await;
    let dense = dense_dataset(&app, &key, true, n).await;
    let k = 4;
    let on_sparse = app
        .succeeded(&key, job(&sparse, "exact", json!({ "k": k }), Value::Null))
        .await;
    let on_dense = app
        .succeeded(&key, job(&dense, "exact", json!({ "k": k }), Value::Null))
        .await;
    let (sparse_result, dense_result) = (
        app.result(&key, &on_sparse).await,
        app.result(&key, &on_dense).await,
    );
    let values = |r: &Value| -> Vec<f64> { serde_json::from_value(r["eigenvalues"].clone()).unwrap() };
    for (s, d) in values(&sparse_result).iter().zip(values(&dense_result)) {
        assert!((s - d).abs() < 1e-8, "eigenvalues {s} vs {d}");
    }
    let exact = basis(&app, &key, &on_dense).await;
    let got = basis(&app, &key, &on_sparse).await;
    assert!(
        overlap(&got, &exact) > 1.0 - 1e-8,
        "the sparse top-{k} subspace is the dense one"
    );
    // noisy_power, public (no privacy target: practically noise-free): orthonormal, and the
    // subspace of the dense computation.
    let done = app
        .succeeded(
            &key,
            job(
                &sparse,
                "noisy_power",
                json!({ "k": k, "iterations": 30 }),
                Value::Null,
            ),
        )
        .await;
    let power = basis(&app, &key, &done).await;
    assert_eq!((power.len(), power[0].len()), (k, n));
    let error = orthonormality_error(&power);
    assert!(error < 1e-9, "orthonormality error {error}");
    assert!(overlap(&power, &exact) > 0.99, "{}", overlap(&power, &exact));
    // With no privacy target and no `iterations` on a public sparse matrix, it draws no noise
    // and iterates until the Ritz values settle (at most 50): it stops early here, and
    // converges as far.
    let done = app
        .succeeded(&key, job(&sparse, "noisy_power", json!({ "k": k }), Value::Null))
        .await;
    assert_eq!(done["config"]["until_converged"], true, "{done}");
    assert_eq!(done["config"]["iterations"], 50, "{done}");
    assert_eq!(done["config"]["multiplier"], 0.0, "{done}");
    let ran = app.result(&key, &done).await["released"]["iterations_run"].clone();
    assert!(ran.as_u64().is_some_and(|l| (2..50).contains(&l)), "{ran}");
    let power = basis(&app, &key, &done).await;
    // The stopping rule is on the Ritz values (the captured energy), which converge about twice
    // as fast as the subspace: here it holds 0.9996 of the exact subspace.
    assert!(overlap(&power, &exact) > 0.999, "{}", overlap(&power, &exact));
    // A stated target, even on a public dataset, draws noise and keeps a fixed L.
    let done = app
        .succeeded(
            &key,
            job(&sparse, "noisy_power", json!({ "k": k }), json!({ "rho": 1e6 })),
        )
        .await;
    assert!(done["config"].get("until_converged").is_none(), "{done}");
    assert_eq!(done["config"]["iterations"], 4, "{done}");
    assert!(
        done["config"]["multiplier"].as_f64().is_some_and(|s| s > 0.0),
        "{done}"
    );
    assert!(
        app.result(&key, &done).await["released"]
            .get("iterations_run")
            .is_none()
    );
}

#[tokio::test]
async fn a_private_sparse_noisy_power_job_runs_its_configured_iterations() {
    let (app, key) = TestApp::start_with_tenant("t").await;
    let (private, _) = sparse_dataset(&app, &key, false, 300).await;
    for (params, iterations) in [(json!({ "k": 4 }), 4), (json!({ "k": 4, "iterations": 9 }), 9)] {
        let done = app
            .run(&key, job(&private, "noisy_power", params, json!({ "rho": 1.0 })))
            .await;
        assert_eq!(done["status"], "succeeded", "{done}");
        assert_eq!(done["config"]["iterations"], iterations, "{done}");
        assert!(done["config"].get("until_converged").is_none(), "{done}");
        assert_eq!(done["progress"]["done"], iterations, "{done}");
    }
}

#[tokio::test]
async fn a_private_sparse_job_is_charged_exactly_as_on_the_dense_matrix() {
    let (app, key) = TestApp::start_with_tenant("t").await;
    let (sparse, _) = sparse_dataset(&app, &key, false, 80).await;
    let dense = dense_dataset(&app, &key, false, 80).await;
    for (algorithm, params) in [
        ("noisy_power", json!({ "k": 2, "iterations": 3 })),
        ("coherent_power", json!({ "k": 1 })),
    ] {
        let mut seen = Vec::new();
        for ds in [&sparse, &dense] {
            let done = app
                .run(&key, job(ds, algorithm, params.clone(), json!({ "rho": 0.5 })))
                .await;
            assert_ne!(done["status"], "queued", "{done}");
            // The run time grows with nnz, a statistic of a private sparse matrix.
            assert_eq!(done["run_ms"].is_null(), ds == &sparse, "{done}");
            seen.push((done["cost"].clone(), done["config"].clone()));
        }
        assert_eq!(
            seen[0], seen[1],
            "{algorithm}: the same cost and calibrated configuration on both storages"
        );
    }
}
