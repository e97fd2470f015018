//! The utility forecast of `POST /v1/privacy/plan` (issue 41): free, without a dataset, close
//! to what real jobs capture on data of the scenario, and refused cells forecast nothing.

use axum::http::StatusCode;
use privpca::forecast::Scenario;
use privpca::linalg::Matrix;
use serde_json::{Value, json};

use crate::helpers::{Records, TestApp, captured_energy};

const D: usize = 10;
const N: usize = 3_000;

/// One cell of the judged grid: n, d, k, the spectrum, the algorithm, and the ρ (or `None`:
/// the ρ the inverse question finds for a captured energy of 0.8, a noisy cell by design).
struct Cell {
    n: usize,
    d: usize,
    k: usize,
    eigenvalues: &'static [f64],
    floor: f64,
    algorithm: &'static str,
    rho: Option<f64>,
}

const fn cell(
    n: usize,
    d: usize,
    k: usize,
    eigenvalues: &'static [f64],
    floor: f64,
    algorithm: &'static str,
    rho: Option<f64>,
) -> Cell {
    Cell {
        n,
        d,
        k,
        eigenvalues,
        floor,
        algorithm,
        rho,
    }
}

fn scenario() -> Value {
    json!({ "eigenvalues": [3.0, 1.5, 0.8], "noise_floor": 0.05 })
}

fn data(n: usize) -> Value {
    json!({ "kind": "records", "n_samples": n, "n_features": D, "row_norm_bound": 1.0, "relation": "replace_one" })
}

/// Records of the scenario (drawn with `seed`, clipped to β = 1 as an upload would), as CSV,
/// and their C = XᵀX/n.
fn scenario_records(seed: u64) -> (String, Matrix) {
    records_of(&[3.0, 1.5, 0.8], 0.05, N, D, seed)
}

fn records_of(eigenvalues: &[f64], floor: f64, n: usize, d: usize, seed: u64) -> (String, Matrix) {
    let s = Scenario::new(eigenvalues.to_vec(), floor, d).unwrap();
    let xt = s.draw(d, n, 1.0, seed);
    let mut csv = String::new();
    for row in xt.column_iter() {
        let line: Vec<String> = row.iter().map(|v| format!("{v:e}")).collect();
        csv.push_str(&line.join(","));
        csv.push('\n');
    }
    let c = &xt * xt.transpose() / n as f64;
    (csv, c)
}

/// Real jobs averaged per cell where the dataset is private (unseeded jobs): one job's captured
/// energy spreads by 0.03–0.05 here, so 20 keep the mean within 0.01 of its expectation and the
/// 0.05 bound is not at the mercy of the draw (5 were, and failed once in CI).
const JOBS_HERE: usize = 20;

#[tokio::test]
async fn a_forecast_needs_no_dataset_and_lands_near_real_jobs_on_data_of_the_scenario() {
    let (csv, c) = scenario_records(77);
    let t = Records::start(json!({ "rho": 10.0 }), &csv).await;
    for (algorithm, rho) in [("analyze_gauss", 1.5e-4), ("noisy_power", 3e-4)] {
        let body = json!({ "privacy": { "rho": rho }, "algorithm": algorithm, "params": { "k": 2 },
                           "data": data(N), "scenario": scenario() });
        let reply = t.app.plan(&t.key, body.clone()).await;
        reply.expect(StatusCode::OK);
        let forecast = reply.json()["forecast"].clone();
        assert_eq!(forecast["algorithm"], algorithm, "{forecast}");
        assert_eq!(forecast["free"], true);
        // The same question gets the same answer.
        assert_eq!(t.app.plan(&t.key, body).await.json()["forecast"], forecast);
        let predicted = forecast["captured_energy"].as_f64().unwrap();
        let interval = [
            forecast["interval"][0].as_f64().unwrap(),
            forecast["interval"][1].as_f64().unwrap(),
        ];
        let mut realized = 0.0;
        for _ in 0..JOBS_HERE {
            let result = t
                .result_of(algorithm, json!({ "k": 2 }), json!({ "rho": rho }))
                .await;
            realized += captured_energy(&result, &c) / JOBS_HERE as f64;
        }
        assert!(
            realized < 0.97,
            "{algorithm}: the cell should be noisy ({realized})"
        );
        assert!(
            (predicted - realized).abs() < 0.05,
            "{algorithm}: forecast {predicted} vs realized {realized}"
        );
        assert!(
            interval[0] <= realized && realized <= interval[1],
            "{algorithm}: {interval:?} vs {realized}"
        );
    }
}

#[tokio::test]
async fn a_forecast_charges_nothing_and_a_refused_job_forecasts_nothing() {
    let (csv, _) = scenario_records(5);
    let t = Records::queued(json!({ "rho": 0.01 }), &csv).await;
    let before = t.budget().await;
    let ledger_before = t
        .app
        .get(&format!("/v1/datasets/{}/ledger", t.ds), &t.key)
        .await
        .json();
    // On the dataset's public shape (n is public under replace_one).
    let on_dataset = t
        .app
        .plan(&t.key, json!({ "privacy": { "rho": 0.005 }, "dataset_id": t.ds, "params": { "k": 2 }, "scenario": scenario() }))
        .await;
    on_dataset.expect(StatusCode::OK);
    let forecast = on_dataset.json()["forecast"].clone();
    assert!(forecast["captured_energy"].as_f64().unwrap() > 0.5, "{forecast}");
    assert_eq!(forecast["algorithm"], "analyze_gauss", "auto's pick: {forecast}");
    // Above the remaining budget: the job would be refused.
    let over = t
        .app
        .plan(
            &t.key,
            json!({ "privacy": { "rho": 0.5 }, "dataset_id": t.ds, "algorithm": "analyze_gauss",
                               "params": { "k": 2 }, "scenario": scenario() }),
        )
        .await;
    over.expect(StatusCode::OK);
    let over = over.json();
    assert_eq!(over["fits_budget"], false);
    assert_eq!(over["forecast"]["captured_energy"], 0.0, "{over}");
    assert!(
        over["forecast"]["reason"].as_str().unwrap().contains("budget"),
        "{over}"
    );
    // The same without naming the algorithm: `auto`'s job is priced, and refused.
    let over_auto = t
        .app
        .plan(&t.key, json!({ "privacy": { "rho": 0.5 }, "dataset_id": t.ds, "params": { "k": 2 }, "scenario": scenario() }))
        .await
        .json();
    assert_eq!(over_auto["fits_budget"], false, "{over_auto}");
    assert_eq!(over_auto["forecast"]["captured_energy"], 0.0, "{over_auto}");
    assert!(
        over_auto["forecast"]["reason"]
            .as_str()
            .unwrap()
            .contains("budget"),
        "{over_auto}"
    );
    // Parameters the job would refuse (k > d).
    let refused = t
        .app
        .plan(
            &t.key,
            json!({ "privacy": { "rho": 0.5 }, "algorithm": "noisy_power", "params": { "k": 11 },
                               "data": data(N), "scenario": scenario() }),
        )
        .await;
    refused.expect(StatusCode::OK);
    let refused = refused.json();
    assert_eq!(refused["forecast"]["captured_energy"], 0.0, "{refused}");
    assert!(
        refused["forecast"]["reason"]
            .as_str()
            .unwrap()
            .contains("refused"),
        "{refused}"
    );
    assert_eq!(t.budget().await, before);
    let ledger_after = t
        .app
        .get(&format!("/v1/datasets/{}/ledger", t.ds), &t.key)
        .await
        .json();
    assert_eq!(ledger_after, ledger_before);
}

#[tokio::test]
async fn the_inverse_question_finds_the_least_rho_that_reaches_the_target() {
    let (app, key) = TestApp::queued_with_tenant("t").await;
    let ask = |rho: f64, target: Option<f64>| {
        let mut body = json!({ "privacy": { "rho": rho }, "params": { "k": 2 }, "data": data(N), "scenario": scenario() });
        if let Some(t) = target {
            body["target"] = json!({ "captured_energy": t });
        }
        body
    };
    let reply = app.plan(&key, ask(1e-3, Some(0.9))).await;
    reply.expect(StatusCode::OK);
    let needed = reply.json()["needed"].clone();
    let rho = needed["rho"].as_f64().unwrap();
    assert!(needed["epsilon"].as_f64().unwrap() > 0.0, "{needed}");
    assert_eq!(needed["delta"], 1e-6, "{needed}");
    let names: Vec<&str> = needed["by_algorithm"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["algorithm"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["analyze_gauss", "noisy_power"], "{needed}");
    let best = needed["algorithm"].as_str().unwrap();
    // At the ρ found the forecast reaches the target, and well below it does not.
    let at = |r: f64| {
        let body = json!({ "privacy": { "rho": r }, "algorithm": best, "params": { "k": 2 }, "data": data(N), "scenario": scenario() });
        let app = &app;
        let key = &key;
        async move {
            app.plan(key, body).await.json()["forecast"]["captured_energy"]
                .as_f64()
                .unwrap()
        }
    };
    assert!(at(rho * 1.2).await >= 0.88, "{needed}");
    assert!(at(rho / 3.0).await < 0.9, "{needed}");
    // Unreachable: a job the algorithm refuses at every ρ (k > d).
    let mut refused = ask(1e-3, Some(0.5));
    refused["params"]["k"] = json!(11);
    let never = app.plan(&key, refused).await.json();
    assert_eq!(never["needed"]["rho"], Value::Null, "{never}");
    assert_eq!(never["needed"]["algorithm"], Value::Null, "{never}");
}

#[tokio::test]
async fn bad_forecast_requests_are_422_naming_the_field() {
    let (app, key) = TestApp::queued_with_tenant("t").await;
    let base = json!({ "privacy": { "rho": 0.1 }, "data": data(N), "scenario": scenario() });
    let with = |path: &str, value: Value| {
        let mut body = base.clone();
        let (head, tail) = path.split_once('.').map_or((path, None), |(h, t)| (h, Some(t)));
        match tail {
            Some(t) => body[head][t] = value,
            None => body[head] = value,
        }
        body
    };
    for (body, field) in [
        (with("scenario.eigenvalues", json!([])), "scenario.eigenvalues"),
        (
            with("scenario.eigenvalues", json!([1.0, -2.0])),
            "scenario.eigenvalues",
        ),
        (with("scenario.noise_floor", json!(-1.0)), "scenario.noise_floor"),
        (with("data.n_features", json!(1001)), "data.n_features"),
        (with("data.n_samples", json!(0)), "data.n_samples"),
        (with("data.row_norm_bound", json!(0.0)), "data.row_norm_bound"),
        (with("data.kind", json!("matrix")), "data.kind"),
        (
            with("target", json!({ "captured_energy": 1.0 })),
            "target.captured_energy",
        ),
        (
            with("dataset_id", json!("00000000-0000-0000-0000-000000000000")),
            "data",
        ),
        (
            json!({ "privacy": { "rho": 0.1 }, "scenario": scenario() }),
            "scenario",
        ),
        (
            json!({ "privacy": { "rho": 0.1 }, "data": data(N), "target": { "captured_energy": 0.5 } }),
            "target",
        ),
        (with("algorithm", json!("no_such_algorithm")), "algorithm"),
        (
            with(
                "scenario",
                json!({ "decay": { "model": "geometric", "top": 2.0, "rate": 1.5, "count": 3 } }),
            ),
            "scenario.decay.rate",
        ),
        (
            with(
                "scenario",
                json!({ "decay": { "model": "power_law", "top": 2.0, "rate": 1.0, "count": 0 } }),
            ),
            "scenario.decay.count",
        ),
        (
            with(
                "scenario",
                json!({ "eigenvalues": [1.0], "decay": { "model": "power_law", "top": 2.0, "rate": 1.0, "count": 2 } }),
            ),
            "scenario",
        ),
    ] {
        let problem = app.plan(&key, body.clone()).await.problem(422);
        assert_eq!(problem["field"], field, "{body}: {problem}");
    }
    // A matrix dataset is not records: no forecast.
    let matrix = app.matrix(&key).await;
    let problem = app
        .plan(
            &key,
            json!({ "privacy": { "rho": 0.1 }, "dataset_id": matrix, "scenario": { "eigenvalues": [1.0] } }),
        )
        .await
        .problem(422);
    assert_eq!(problem["field"], "scenario", "{problem}");
    // A dataset whose n is private cannot be forecast without a stated n.
    let ds = app
        .dataset(&key, json!({ "name": "ar", "kind": "records", "relation": "add_remove", "row_norm_bound": 1.0, "budget": { "rho": 1.0 } }))
        .await;
    app.upload_csv(&key, &ds, "0.1,0.2\n0.3,0.1\n")
        .await
        .expect(StatusCode::OK);
    let problem = app
        .plan(
            &key,
            json!({ "privacy": { "rho": 0.1 }, "dataset_id": ds, "scenario": { "eigenvalues": [1.0] } }),
        )
        .await
        .problem(422);
    assert_eq!(problem["field"], "scenario", "{problem}");
}

#[tokio::test]
async fn a_decay_model_forecasts_as_its_eigenvalues_stated_one_by_one() {
    let (app, key) = TestApp::queued_with_tenant("t").await;
    let ask = |scenario: Value| json!({ "privacy": { "rho": 0.05 }, "data": data(N), "algorithm": "analyze_gauss", "params": { "k": 2 }, "scenario": scenario });
    let decayed = app
        .plan(&key, ask(json!({ "decay": { "model": "geometric", "top": 3.0, "rate": 0.5, "count": 3 }, "noise_floor": 0.05 })))
        .await;
    decayed.expect(StatusCode::OK);
    let stated = app
        .plan(
            &key,
            ask(json!({ "eigenvalues": [3.0, 1.5, 0.75], "noise_floor": 0.05 })),
        )
        .await;
    stated.expect(StatusCode::OK);
    let (decayed, stated) = (decayed.json(), stated.json());
    assert_eq!(decayed["forecast"], stated["forecast"], "{decayed}");
    assert!(decayed["forecast"]["captured_energy"].as_f64().expect("a number") > 0.5);
}

/// The judged grid (issue 41): over n, d, k and ρ, including a cell whose job is refused, the
/// forecast (made without the dataset) is within 0.05 of the mean of real jobs on records of
/// the scenario drawn independently, and its interval covers that mean in at least 9 cells of
/// 10. The jobs are seeded (public datasets), so the test is reproducible; it averages 20 of
/// them, because at a captured energy near 0.8 one job's spread is 0.06–0.11 and the mean of
/// five alone wanders by 0.03–0.05 (docs/design/forecast.md, "How close"). Prints the table the
/// design quotes.
#[tokio::test]
async fn over_a_grid_the_forecast_is_within_005_of_real_jobs() {
    const A: &[f64] = &[3.0, 1.5, 0.8];
    const B: &[f64] = &[5.0, 4.0, 1.0];
    const C: &[f64] = &[2.0, 1.0, 0.5, 0.25];
    let cells = [
        cell(2_000, 10, 1, A, 0.05, "analyze_gauss", None),
        cell(5_000, 10, 2, A, 0.05, "analyze_gauss", None),
        cell(20_000, 10, 2, B, 0.1, "analyze_gauss", None),
        cell(5_000, 30, 3, C, 0.02, "analyze_gauss", None),
        cell(5_000, 30, 2, A, 0.05, "auto", None),
        cell(5_000, 10, 2, A, 0.05, "noisy_power", None),
        cell(20_000, 30, 1, C, 0.02, "noisy_power", None),
        cell(2_000, 30, 2, B, 0.1, "analyze_gauss", Some(0.05)),
        cell(5_000, 10, 3, C, 0.02, "analyze_gauss", None),
        // Refused: k_dp_pca needs more budget than this for its n (and the default clip's share
        // makes no difference): the job is refused, the forecast says 0.
        cell(2_000, 10, 1, A, 0.05, "k_dp_pca", Some(1e-6)),
    ];
    const JOBS: u64 = 20;
    let (app, key) = TestApp::start_with_tenant("grid").await;
    let mut covered = 0;
    eprintln!("| n | d | k | algorithm | ρ | forecast | interval | realized ({JOBS} jobs) |");
    eprintln!("|---|---|---|---|---|---|---|---|");
    for (i, cell) in cells.iter().enumerate() {
        let data =
            json!({ "kind": "records", "n_samples": cell.n, "n_features": cell.d, "row_norm_bound": 1.0 });
        let scenario = json!({ "eigenvalues": cell.eigenvalues, "noise_floor": cell.floor });
        let params = json!({ "k": cell.k });
        let rho = match cell.rho {
            Some(rho) => rho,
            None => {
                let body = json!({ "privacy": { "rho": 0.01 }, "algorithm": cell.algorithm, "params": params,
                                   "data": data, "scenario": scenario, "target": { "captured_energy": 0.8 } });
                let reply = app.plan(&key, body).await;
                reply.expect(StatusCode::OK);
                reply.json()["needed"]["by_algorithm"][0]["rho"]
                    .as_f64()
                    .expect("reachable")
            }
        };
        let body = json!({ "privacy": { "rho": rho }, "algorithm": cell.algorithm, "params": params,
                           "data": data, "scenario": scenario });
        let reply = app.plan(&key, body).await;
        reply.expect(StatusCode::OK);
        let forecast = reply.json()["forecast"].clone();
        let predicted = forecast["captured_energy"].as_f64().unwrap();
        let interval = [
            forecast["interval"][0].as_f64().unwrap(),
            forecast["interval"][1].as_f64().unwrap(),
        ];
        let (csv, c) = records_of(cell.eigenvalues, cell.floor, cell.n, cell.d, 500 + i as u64);
        // A public dataset, so that the real jobs take a seed and the test is reproducible; the
        // jobs state the privacy (and the algorithm `auto` picks for private data), so they
        // run exactly as on a private dataset.
        let spec = json!({ "name": "grid", "kind": "records", "row_norm_bound": 1.0, "public": true });
        let ds = app.with_csv(&key, spec, &csv).await;
        let mut realized = 0.0;
        let algorithm = forecast["algorithm"].as_str().unwrap();
        for seed in 0..JOBS {
            let mut job = crate::helpers::job(&ds, algorithm, params.clone(), json!({ "rho": rho }));
            job["seed"] = json!(seed);
            let reply = app.submit(&key, job).await;
            if reply.status == StatusCode::UNPROCESSABLE_ENTITY {
                continue; // refused: captures nothing
            }
            reply.expect(StatusCode::ACCEPTED);
            let id = reply.json()["id"].as_str().unwrap().to_string();
            let done = app.wait(&key, &id).await;
            if done["status"] == "succeeded" {
                realized += captured_energy(&app.result(&key, &done).await, &c) / JOBS as f64;
            }
        }
        let inside = interval[0] <= realized && realized <= interval[1];
        covered += usize::from(inside);
        eprintln!(
            "| {} | {} | {} | {} | {rho:.3e} | {predicted:.3} | [{:.3}, {:.3}] | {realized:.3} |",
            cell.n,
            cell.d,
            cell.k,
            forecast["algorithm"].as_str().unwrap(),
            interval[0],
            interval[1]
        );
        assert!(
            (predicted - realized).abs() < 0.05,
            "cell {i}: forecast {predicted} vs realized {realized} ({forecast})"
        );
    }
    assert!(covered >= 9, "the interval covered {covered} of 10 cells");
}

/// The paid private spectrum (issue 41): 5 % of the job's ρ spent on the dataset's noisy
/// eigenvalues, charged on its ledger as a job; the forecast from them lands within 0.1 of the
/// realized jobs; reusing the spectrum charges nothing.
///
/// This cell is deliberately noisy (the spectrum's noise sd is about 0.12 against a top
/// eigenvalue near 0.5), and one paid spectrum misses by more than 0.1 about 3 % of the time
/// (docs/design/forecast.md, "A paid private spectrum"). So three spectra are paid for each
/// algorithm and the median of their forecasts is judged: a test of the estimator that fails
/// about once in 300 runs by chance, not once in 20.
#[tokio::test]
async fn a_forecast_from_a_paid_private_spectrum_lands_near_the_real_job() {
    const SPECTRA: usize = 3;
    let (csv, c) = scenario_records(91);
    let t = Records::start(json!({ "rho": 10.0 }), &csv).await;
    for (algorithm, rho) in [("noisy_power", 3e-4), ("analyze_gauss", 1.5e-4)] {
        let body = json!({ "privacy": { "rho": rho }, "dataset_id": t.ds, "algorithm": algorithm,
                           "params": { "k": 2 }, "scenario": { "private_spectrum": { "share": 0.05 } } });
        let mut forecasts = Vec::new();
        let mut plan = Value::Null;
        for _ in 0..SPECTRA {
            let spent = t.app.spent_rho(&t.key, &t.ds).await;
            let reply = t.app.plan(&t.key, body.clone()).await;
            reply.expect(StatusCode::OK);
            plan = reply.json();
            let spectrum = &plan["spectrum"];
            assert_eq!(spectrum["paid"], true, "{plan}");
            assert_eq!(spectrum["charged_now"], true);
            assert_eq!(spectrum["status"], "succeeded", "{plan}");
            assert!(spectrum["note"].as_str().unwrap().starts_with("Paid"), "{plan}");
            assert_eq!(plan["forecast"]["free"], false, "{plan}");
            assert_eq!(spectrum["eigenvalues"].as_array().unwrap().len(), D);
            // Charged on the ledger: exactly the share of ρ, as the spectrum job.
            let charged = t.app.spent_rho(&t.key, &t.ds).await - spent;
            assert!((charged - 0.05 * rho).abs() < 1e-12, "charged {charged}");
            assert!(spectrum["rho"].as_f64().unwrap() <= 0.05 * rho);
            let job = t
                .app
                .get(
                    &format!("/v1/jobs/{}", spectrum["job_id"].as_str().unwrap()),
                    &t.key,
                )
                .await
                .json();
            assert_eq!(job["algorithm"], "spectrum", "{job}");
            forecasts.push(plan["forecast"]["captured_energy"].as_f64().unwrap());
        }
        forecasts.sort_by(f64::total_cmp);
        let predicted = forecasts[SPECTRA / 2];
        let mut realized = 0.0;
        for _ in 0..JOBS_HERE {
            let result = t
                .result_of(algorithm, json!({ "k": 2 }), json!({ "rho": rho }))
                .await;
            realized += captured_energy(&result, &c) / JOBS_HERE as f64;
        }
        assert!(
            (predicted - realized).abs() < 0.1,
            "{algorithm}: median forecast from {SPECTRA} private spectra {predicted} ({forecasts:?}) vs realized {realized} (last: {plan})"
        );
        // Reusing the paid spectrum is free: nothing more is charged.
        let spectrum = &plan["spectrum"];
        let spent = t.app.spent_rho(&t.key, &t.ds).await;
        let again = t
            .app
            .plan(
                &t.key,
                json!({ "privacy": { "rho": rho }, "dataset_id": t.ds, "algorithm": algorithm, "params": { "k": 2 },
                        "scenario": { "spectrum_job": spectrum["job_id"] } }),
            )
            .await;
        again.expect(StatusCode::OK);
        let again = again.json();
        assert_eq!(again["spectrum"]["charged_now"], false, "{again}");
        assert_eq!(again["forecast"]["free"], true);
        assert_eq!(
            again["forecast"]["captured_energy"],
            plan["forecast"]["captured_energy"]
        );
        assert_eq!(t.app.spent_rho(&t.key, &t.ds).await, spent);
    }
}

/// A public dataset of the same shape as a proxy (issue 41: "comes from a public dataset used
/// as a proxy"): the forecast for the private dataset runs on the proxy's exact spectrum, read
/// by a free job, and charges nothing; it lands near the forecast from the true scenario. A
/// private proxy, one of another d, or a proxy next to stated eigenvalues is a 422 naming the
/// field.
#[tokio::test]
async fn a_public_proxy_dataset_states_the_scenario_free_of_charge() {
    let (csv, _) = scenario_records(93);
    let t = Records::start(json!({ "rho": 10.0 }), &csv).await;
    let public = |name: &'static str, csv: String| {
        let t = &t;
        async move {
            let id = t
                .app
                .dataset(
                    &t.key,
                    json!({ "name": name, "kind": "records", "row_norm_bound": 1.0, "public": true }),
                )
                .await;
            t.app.upload_csv(&t.key, &id, &csv).await.expect(StatusCode::OK);
            id
        }
    };
    let proxy = public("proxy", scenario_records(94).0).await;
    let spent = t.app.spent_rho(&t.key, &t.ds).await;
    let ask = |scenario: Value| json!({ "privacy": { "rho": 3e-4 }, "dataset_id": t.ds, "algorithm": "noisy_power", "params": { "k": 2 }, "scenario": scenario });
    let reply = t.app.plan(&t.key, ask(json!({ "proxy_dataset": proxy }))).await;
    reply.expect(StatusCode::OK);
    let plan = reply.json();
    assert_eq!(plan["forecast"]["free"], true, "{plan}");
    assert_eq!(plan["proxy"]["dataset_id"], proxy.as_str(), "{plan}");
    assert!(plan["spectrum"].is_null(), "nothing paid: {plan}");
    let listed = plan["proxy"]["scenario"]["eigenvalues"].as_array().unwrap();
    assert!(listed.len() >= 3, "{plan}");
    assert_eq!(
        t.app.spent_rho(&t.key, &t.ds).await,
        spent,
        "the ledger is unchanged"
    );
    let stated = t.app.plan(&t.key, ask(scenario())).await;
    stated.expect(StatusCode::OK);
    let (from_proxy, from_truth) = (
        plan["forecast"]["captured_energy"].as_f64().unwrap(),
        stated.json()["forecast"]["captured_energy"].as_f64().unwrap(),
    );
    assert!(
        (from_proxy - from_truth).abs() < 0.05,
        "proxy {from_proxy} against the true scenario {from_truth}"
    );
    // Refusals: a private proxy, another d, and a proxy with stated eigenvalues.
    let other = public("narrow", "0.1,0.2\n0.3,0.1\n".to_string()).await;
    for (scenario, field) in [
        (json!({ "proxy_dataset": t.ds }), "scenario.proxy_dataset"),
        (json!({ "proxy_dataset": other }), "scenario.proxy_dataset"),
        (
            json!({ "proxy_dataset": proxy, "eigenvalues": [1.0] }),
            "scenario",
        ),
    ] {
        let problem = t.app.plan(&t.key, ask(scenario.clone())).await.problem(422);
        assert_eq!(problem["field"], field, "{scenario}: {problem}");
    }
    assert_eq!(t.app.spent_rho(&t.key, &t.ds).await, spent);
}

/// A private spectrum is refused before anything is charged when the request cannot be
/// forecast: on a stated shape, with a bad share, with both sources, or on another dataset's
/// spectrum job.
#[tokio::test]
async fn bad_private_spectrum_requests_charge_nothing() {
    let (csv, _) = scenario_records(92);
    let t = Records::start(json!({ "rho": 10.0 }), &csv).await;
    let spent = t.app.spent_rho(&t.key, &t.ds).await;
    let paid = json!({ "private_spectrum": { "share": 0.05 } });
    let cases = [
        (
            json!({ "privacy": { "rho": 0.01 }, "data": data(N), "scenario": paid }),
            "scenario",
        ),
        (
            json!({ "privacy": { "rho": 0.01 }, "dataset_id": t.ds, "scenario": { "private_spectrum": { "share": 0.0 } } }),
            "scenario.private_spectrum.share",
        ),
        (
            json!({ "privacy": { "rho": 0.01 }, "dataset_id": t.ds, "scenario": { "private_spectrum": { "share": 1.5 } } }),
            "scenario.private_spectrum.share",
        ),
        (
            json!({ "privacy": { "rho": 0.01 }, "dataset_id": t.ds, "scenario": { "eigenvalues": [1.0], "private_spectrum": { "share": 0.05 } } }),
            "scenario",
        ),
        (
            json!({ "privacy": { "rho": 0.01 }, "dataset_id": t.ds, "scenario": { "noise_floor": 0.1, "private_spectrum": { "share": 0.05 } } }),
            "scenario",
        ),
        (
            json!({ "privacy": { "rho": 0.01 }, "dataset_id": t.ds, "scenario": {} }),
            "scenario",
        ),
        (
            json!({ "privacy": { "rho": 0.01 }, "dataset_id": t.ds, "algorithm": "no_such", "scenario": paid }),
            "algorithm",
        ),
        (
            json!({ "privacy": { "rho": 0.01 }, "dataset_id": t.ds, "scenario": paid, "target": { "captured_energy": 1.5 } }),
            "target.captured_energy",
        ),
        (
            json!({ "privacy": { "rho": 0.01 }, "dataset_id": t.ds, "scenario": { "spectrum_job": uuid::Uuid::new_v4() } }),
            "scenario.spectrum_job",
        ),
    ];
    for (body, field) in cases {
        let reply = t.app.plan(&t.key, body.clone()).await;
        reply.expect(StatusCode::UNPROCESSABLE_ENTITY);
        let problem = reply.json();
        assert_eq!(problem["field"], field, "{body}: {problem}");
    }
    assert_eq!(t.app.spent_rho(&t.key, &t.ds).await, spent, "nothing was charged");
    // A PCA job's id is not a spectrum job.
    let done = t
        .succeeded("analyze_gauss", json!({ "k": 2 }), json!({ "rho": 0.01 }))
        .await;
    let reply = t
        .app
        .plan(&t.key, json!({ "privacy": { "rho": 0.01 }, "dataset_id": t.ds, "scenario": { "spectrum_job": done["id"] } }))
        .await;
    reply.expect(StatusCode::UNPROCESSABLE_ENTITY);
    // Nor can a spectrum job be submitted as a PCA job.
    let refused = t
        .refused("spectrum", json!({}), json!({ "rho": 0.01 }), "algorithm")
        .await;
    assert!(
        refused["detail"].as_str().unwrap().contains("unknown algorithm"),
        "{refused}"
    );
}
