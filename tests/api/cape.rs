//! `cape_pca` over HTTP: as a job (simulate mode, unequal shards, a dropout, refusals) and as
//! a study driven by in-process sites that use the same CAPE code as `privpca site` — a
//! dropout, and bad site messages.

use axum::http::StatusCode;
use privpca::algorithms::RunEnv;
use privpca::algorithms::cape_noise as cape;
use privpca::federation::crypto::{self, KeyPair, Seed};
use privpca::federation::messages::SiteTask;
use privpca::federation::transcript::SiteSigner;
use privpca::federation::wire;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde_json::{Value, json};

use crate::helpers::{Records, Reply, TestApp, csv_rows, job};

#[tokio::test]
async fn a_cape_job_reports_its_noise_and_a_dropout() {
    let t = Records::start(json!({"rho": 10.0}), &csv_rows(700, 6, 3)).await;
    let params = json!({"k": 2, "sites": 3, "site_shares": [1, 2, 4]});
    let done = t.succeeded("cape_pca", params, json!({"rho": 1.0})).await;
    let result = t.result(&done).await;
    let report = &result["released"]["cape"];
    assert_eq!(report["fallback"], false, "{result}");
    assert_eq!(report["survivors"], json!([1, 2, 3]));
    let ratio = report["ratio_to_pooled"].as_f64().unwrap();
    assert!((1.0..1.2).contains(&ratio), "{report}");
    assert_eq!(result["basis"].as_array().unwrap().len(), 2);

    let params = json!({"k": 1, "sites": 4, "dropouts": [2]});
    let done = t
        .app
        .run(&t.key, t.job("cape_pca", params, json!({"rho": 1.0})))
        .await;
    let result = t.result(&done).await;
    let report = &result["released"]["cape"];
    assert_eq!(report["fallback"], true, "{result}");
    assert_eq!(report["dropped"], json!([2]));
    assert!(report["noise_sd"].as_f64().unwrap() > report["pooled_noise_sd"].as_f64().unwrap());
}

#[tokio::test]
async fn bad_cape_jobs_are_422() {
    let (app, key, ds) = TestApp::with_records(json!({"rho": 10.0}), &csv_rows(50, 4, 3)).await;
    for (params, field) in [
        (json!({"k": 1, "sites": 1}), "params.sites"),
        (
            json!({"k": 1, "sites": 2, "site_shares": [1]}),
            "params.site_shares",
        ),
        (json!({"k": 1, "dropouts": [1, 2, 3]}), "params.dropouts"),
        (json!({"k": 1, "pair_ratio": -1}), "params.pair_ratio"),
    ] {
        let reply = app
            .submit(&key, job(&ds, "cape_pca", params.clone(), json!({"rho": 1.0})))
            .await;
        let problem = reply.problem(422);
        assert_eq!(problem["field"], field, "{params}: {problem}");
    }
}

/// A one-stage `cape_pca` study (`clip: "none"`: the sites here send a made-up Gram matrix;
/// the clip's stages run with real sites in tests/federation_live.rs).
fn cape_study(sites: usize, round_timeout: u64) -> Value {
    json!({
        "name": "cape",
        "algorithm": "cape_pca",
        "n_features": 4,
        "relation": "replace_one",
        "row_norm_bound": 1.0,
        "params": {"k": 1, "clip": "none"},
        "privacy": {"rho": 0.5},
        "threshold": 2,
        "sites": (0..sites).map(|i| json!({"name": format!("site-{i}")})).collect::<Vec<_>>(),
        "join_timeout_seconds": 30,
        "round_timeout_seconds": round_timeout,
    })
}

/// A site's statistic here: the packed Gram matrix of a few fixed rows.
fn statistic(seed: u64) -> Vec<f64> {
    let rows: Vec<Vec<f64>> = csv_rows(20, 4, seed)
        .lines()
        .map(|l| l.split(',').map(|v| v.parse::<f64>().unwrap() / 4.0).collect())
        .collect();
    let mut out = Vec::new();
    for j in 0..4 {
        for i in 0..=j {
            out.push(rows.iter().map(|r| r[i] * r[j]).sum());
        }
    }
    out
}

async fn task(app: &TestApp, token: &str) -> SiteTask {
    serde_json::from_value(app.get("/v1/site/task?wait_ms=2000", token).await.json()).unwrap()
}

/// Joins, waits for the release task, and sends what `privpca site` would.
async fn release(app: &TestApp, token: &str, keys: &KeyPair, seed: u64) -> (u16, String) {
    let view = app.get("/v1/site/study", token).await.json();
    let me = view["site_index"].as_u64().unwrap() as u32;
    let study: uuid::Uuid = view["study_id"].as_str().unwrap().parse().unwrap();
    let SiteTask::CapeRelease {
        stage,
        peers,
        aggregator_seed,
        noise,
        len,
        confirm: false,
        ..
    } = task(app, token).await
    else {
        panic!("expected a release task");
    };
    let seeds: Vec<(u32, Seed)> = peers
        .iter()
        .map(|p| {
            let public = wire::decode_key(&p.noise_public_keys[0]).unwrap();
            let shared = crypto::agree(&keys.secret_bytes(), &public).unwrap();
            (
                p.index,
                crypto::cape_pair_seed(&shared, study, stage, me, p.index).unwrap(),
            )
        })
        .collect();
    let f: Seed = wire::decode(&aggregator_seed).unwrap().try_into().unwrap();
    let stat = statistic(seed);
    assert_eq!(stat.len(), len);
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut never = |_: u32, _: u32| Ok(());
    let mut env = RunEnv::new(&mut rng, &mut never);
    let values = cape::site_release(&stat, me, &seeds, &f, &noise, &mut env).expect("calibrated");
    let reply = send_release(app, token, 1, &values).await;
    (
        reply.status.as_u16(),
        String::from_utf8_lossy(&reply.bytes).into_owned(),
    )
}

/// Confirms stage 1 as a site would (the coordinator checks only the signature's shape; the
/// sites check each other's, `privpca site` and tests/lying_coordinator.rs).
async fn confirm(app: &TestApp, token: &str, signer: &SiteSigner) {
    let SiteTask::CapeRelease { confirm: true, .. } = task(app, token).await else {
        panic!("expected the stage's consistency round");
    };
    let body = json!({"signature": signer.sign(b"stage 1")});
    app.post("/v1/site/stages/1/confirm", token, body)
        .await
        .expect(StatusCode::NO_CONTENT);
}

/// Sends `values` as the site's release for `stage`.
async fn send_release(app: &TestApp, token: &str, stage: u32, values: &[f64]) -> Reply {
    let uri = format!("/v1/site/stages/{stage}/release");
    let body = json!({"values": wire::f64s_to_b64(values)});
    app.post(&uri, token, body).await
}

#[tokio::test]
async fn a_cape_study_with_a_dropout_succeeds_and_says_so() {
    let (app, key) = TestApp::start_with_tenant("t").await;
    let created = app.post("/v1/studies", &key, cape_study(3, 60)).await;
    assert_eq!(created.status, StatusCode::CREATED);
    let created = created.json();
    assert_eq!(created["study"]["config"]["noise"]["sites"], 3);
    let tokens: Vec<String> = created["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["token"].as_str().unwrap().to_string())
        .collect();
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let keys: Vec<KeyPair> = (0..3).map(|_| KeyPair::generate(&mut rng)).collect();
    let signers: Vec<SiteSigner> = (0..3).map(|i| SiteSigner::from_seed([i + 1; 32])).collect();
    // A CAPE join carries one pair-noise key and no encryption key.
    let bad = app
        .post(
            "/v1/site/join",
            &tokens[0],
            json!({"n_samples": 20, "encryption_public_key": wire::encode(&keys[0].public()), "mask_public_keys": [wire::encode(&keys[0].public())]}),
        )
        .await;
    assert_eq!(bad.problem(422)["field"], "body");
    for ((token, k), signer) in tokens.iter().zip(&keys).zip(&signers) {
        let reply = app
            .post(
                "/v1/site/join",
                token,
                json!({"n_samples": 20, "mask_public_keys": [wire::encode(&k.public())], "signing_public_key": signer.public_key()}),
            )
            .await;
        reply.expect(StatusCode::OK);
    }
    // Nothing is released before the stage's consistency round closes.
    send_release(&app, &tokens[0], 1, &[1.0; 10]).await.problem(409);
    let id = created["id"].as_str().unwrap();
    let url = format!("/v1/studies/{id}");
    // Sites 1 and 2 confirm; site 3 never does, and the round closes at its deadline with the
    // study's threshold of confirmations.
    for i in 0..2 {
        confirm(&app, &tokens[i], &signers[i]).await;
    }
    let again = app
        .post(
            "/v1/site/stages/1/confirm",
            &tokens[0],
            json!({"signature": signers[0].sign(b"x")}),
        )
        .await
        .problem(409);
    assert!(
        again["type"].as_str().unwrap().ends_with("already-received"),
        "{again}"
    );
    app.expire_phase(id).await;
    // A release of the wrong length is refused and changes nothing.
    let short = send_release(&app, &tokens[0], 1, &[1.0; 3]).await;
    assert_eq!(short.problem(422)["field"], "body");
    send_release(&app, &tokens[0], 2, &[1.0; 10]).await.problem(409);
    // Sites 1 and 2 send; site 3 never does.
    for i in 0..2 {
        let (status, body) = release(&app, &tokens[i], &keys[i], i as u64).await;
        assert_eq!(status, 204, "{body}");
    }
    // The stage waits for site 3 alone now; its deadline comes (closed here as it would close).
    assert_eq!(app.get(&url, &key).await.json()["status"], "running");
    app.expire_phase(id).await;
    let view = app.get(&url, &key).await.json();
    assert_eq!(view["status"], "succeeded", "{view}");
    assert_eq!(view["sites"][2]["status"], "dropped", "{view}");
    assert!(
        view["sites"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["charged"]["rho"] == 0.5),
        "{view}"
    );
    let result = app.get(&format!("{url}/result"), &key).await.json();
    assert_eq!(result["noise"]["fallback"], true, "{result}");
    assert_eq!(result["survivors"], json!(["site-0", "site-1"]));
    assert!(matches!(task(&app, &tokens[2]).await, SiteTask::Finished { .. }));
}

#[tokio::test]
async fn cape_studies_are_refused_with_clear_problems() {
    let (app, key) = TestApp::start_with_tenant("t").await;
    let mut one = cape_study(1, 5);
    one["threshold"] = Value::Null;
    assert_eq!(
        app.post("/v1/studies", &key, one).await.problem(422)["field"],
        "sites"
    );
    let mut shares = cape_study(3, 5);
    shares["params"]["site_shares"] = json!([1, 2, 3]);
    assert_eq!(
        app.post("/v1/studies", &key, shares).await.problem(422)["field"],
        "params.site_shares"
    );
    // cape_agn studies need a model, and keep the jobs' limits.
    let mut agn = cape_study(3, 5);
    agn["algorithm"] = json!("cape_agn");
    let problem = app.post("/v1/studies", &key, agn.clone()).await.problem(422);
    assert_eq!(problem["field"], "params.model", "{problem}");
    agn["params"] = json!({"k": 1, "model": "mog", "sigma2": 0.1, "dropouts": [1]});
    let problem = app.post("/v1/studies", &key, agn.clone()).await.problem(422);
    assert_eq!(problem["field"], "params.dropouts", "{problem}");
    agn["params"] = json!({"k": 1, "model": "mog", "sigma2": 0.1});
    let created = app.post("/v1/studies", &key, agn).await;
    assert_eq!(created.status, StatusCode::CREATED);
    assert_eq!(created.json()["study"]["config"]["model"], "mog");
    let mut unknown = cape_study(3, 5);
    unknown["algorithm"] = json!("cape_svd");
    let problem = app.post("/v1/studies", &key, unknown).await.problem(422);
    assert_eq!(problem["field"], "algorithm", "{problem}");
}
