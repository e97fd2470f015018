//! Live SecAgg+ studies over HTTP (issue 38): the commit-then-reveal graph seed, share boxes to
//! graph neighbours only, a dropout, the checks on reveals and boxes, and a coordinator restart
//! in the middle of the reveals. The sites are the in-process ones of `studies.rs`.

use std::collections::BTreeMap;

use privpca::federation::messages::SiteTask;
use privpca::federation::secagg::seed;
use privpca::federation::wire;
use serde_json::{Value, json};

use crate::helpers::TestApp;
use crate::studies::{create, enrolled, joined_sites, run_sites, site_tokens, step_until, study_body};

/// A 10-site `federated_power` study on SecAgg+ at the default rates (k = 4, t = 3).
fn sparse_body(iterations: u32) -> Value {
    let mut body = study_body(10, 7, iterations, 60);
    body["params"]["secure_aggregation"] = json!("sparse");
    body
}

/// A `POST /v1/site/seed` that must be refused with `status`: its problem document.
async fn refused_reveal(app: &TestApp, token: &str, body: Value, status: u16) -> Value {
    app.post("/v1/site/seed", token, body).await.problem(status)
}

async fn task_of(app: &TestApp, token: &str) -> Value {
    app.get("/v1/site/task?wait_ms=0", token).await.json()
}

/// The site's next task other than `wait` (the coordinator moves on in its own task).
async fn next_task(app: &TestApp, token: &str) -> Value {
    for _ in 0..100 {
        let task = app.get("/v1/site/task?wait_ms=200", token).await.json();
        if task["task"] != "wait" {
            return task;
        }
    }
    panic!("the study did not move on");
}

#[tokio::test]
async fn a_secagg_plus_study_shares_with_neighbours_only_and_survives_a_dropout() {
    let (app, key) = TestApp::start_with_tenant("owner").await;
    let (id, tokens, mut sites) = enrolled(&app, &key, sparse_body(3), 90, 60).await;
    let view = app.get(&format!("/v1/studies/{id}"), &key).await.json();
    assert_eq!(
        view["config"]["secagg_plus"],
        json!({"corruption_rate": 0.1, "dropout_rate": 0.1, "degree": 4, "threshold": 3}),
        "{view}"
    );
    // Enrolment is over: the first task is the reveal, with every site's commitment.
    let task = next_task(&app, &tokens[0]).await;
    assert_eq!(task["task"], "reveal_seed", "{task}");
    let participants = task["participants"].as_array().unwrap();
    assert_eq!(participants.len(), 10);
    assert!(
        participants
            .iter()
            .all(|p| p["seed_commitment"].as_str().is_some_and(|c| c.len() == 44))
    );
    // Nobody is asked for share boxes before every site has revealed.
    sites[0].step(&app).await;
    assert_eq!(task_of(&app, &tokens[0]).await["task"], "wait");
    for site in sites.iter_mut().skip(1) {
        site.step(&app).await;
    }
    let task = next_task(&app, &tokens[0]).await;
    assert_eq!(task["task"], "share_keys", "{task}");
    assert_eq!(task["seed_reveals"].as_array().map(Vec::len), Some(10));
    sites[3].dies_at = Some(2);
    let mut finals = BTreeMap::new();
    step_until(&app, &mut sites, &mut finals, |sites, done| {
        done.contains_key(&3)
            && sites
                .iter()
                .enumerate()
                .all(|(i, s)| i == 3 || s.contributed >= 2)
    })
    .await;
    app.expire_phase(&id).await;
    step_until(&app, &mut sites, &mut finals, |_, _| false).await;
    let view = app.get(&format!("/v1/studies/{id}"), &key).await.json();
    assert_eq!(view["status"], "succeeded", "{view}");
    assert_eq!(view["sites"][3]["status"], "dropped");
    assert_eq!(view["sites"][3]["dropped_round"], 2);
    let result = app.get(&format!("/v1/studies/{id}/result"), &key).await.json();
    let rounds = result["rounds"].as_array().unwrap();
    assert_eq!(rounds[1]["dropped"], json!(["site-3"]), "{result}");
    assert_eq!(result["survivors"].as_array().map(Vec::len), Some(9));
    assert!(result["basis"][0][0].as_f64().unwrap().abs() > 0.9, "{result}");
}

#[tokio::test]
async fn seed_commitments_reveals_and_share_boxes_are_checked() {
    let (app, key) = TestApp::start_with_tenant("owner").await;
    // A complete-graph study takes no commitment and has no seed to reveal.
    let complete = create(&app, &key, study_body(3, 2, 2, 30)).await;
    let complete_tokens = site_tokens(&complete);
    let mut complete_sites = joined_sites(&app, &complete_tokens[..2], 5, 40).await;
    let committed = json!({
        "n_samples": 40, "encryption_public_key": wire::encode(&[9u8; 32]),
        "mask_public_keys": vec![wire::encode(&[9u8; 32]); 2],
        "signing_public_key": privpca::federation::transcript::SiteSigner::from_seed([3; 32]).public_key(),
        "seed_commitment": wire::encode(&[1u8; 32]),
    });
    let doc = app
        .post("/v1/site/join", &complete_tokens[2], committed.clone())
        .await
        .problem(422);
    assert!(
        doc["detail"].as_str().unwrap().contains("seed_commitment"),
        "{doc}"
    );
    let doc = refused_reveal(
        &app,
        &complete_tokens[0],
        json!({"reveal": wire::encode(&[1u8; 32])}),
        409,
    )
    .await;
    assert!(doc["detail"].as_str().unwrap().contains("graph"), "{doc}");
    let _ = complete_sites.pop();

    // A SecAgg+ study needs one.
    let created = create(&app, &key, sparse_body(2)).await;
    let tokens = site_tokens(&created);
    let mut bare = committed;
    bare.as_object_mut().unwrap().remove("seed_commitment");
    bare["mask_public_keys"] = json!(vec![wire::encode(&[9u8; 32]); 2]);
    let doc = app.post("/v1/site/join", &tokens[0], bare).await.problem(422);
    assert!(
        doc["detail"]
            .as_str()
            .unwrap()
            .contains("seed_commitment is required"),
        "{doc}"
    );
    let mut sites = joined_sites(&app, &tokens, 30, 40).await;
    // Enrolment ends in the coordinator's own task: wait for the reveal.
    let reveal_task = next_task(&app, &tokens[0]).await;
    assert_eq!(reveal_task["task"], "reveal_seed");
    let participants: Vec<privpca::federation::messages::Participant> =
        serde_json::from_value(reveal_task["participants"].clone()).unwrap();
    // A reveal that does not open the site's commitment is refused and changes nothing.
    let doc = refused_reveal(&app, &tokens[0], json!({"reveal": wire::encode(&[7u8; 32])}), 422).await;
    assert!(doc["detail"].as_str().unwrap().contains("does not open"), "{doc}");
    assert_eq!(task_of(&app, &tokens[0]).await["task"], "reveal_seed");
    for site in &mut sites {
        site.step(&app).await;
    }
    // Revealed twice: the same bytes are already received.
    let task = next_task(&app, &tokens[0]).await;
    let reveals = task["seed_reveals"]
        .as_array()
        .unwrap_or_else(|| panic!("{task}"));
    let own = reveals[0]["reveal"].clone();
    let doc = refused_reveal(&app, &tokens[0], json!({ "reveal": own }), 409).await;
    assert!(
        doc["type"].as_str().unwrap().ends_with("already-received"),
        "{doc}"
    );
    // Every relayed reveal opens the commitment the roster lists.
    let study = created["id"].as_str().unwrap().parse().unwrap();
    assert_eq!(
        task["participants"],
        json!([]),
        "the roster went out with the reveal task"
    );
    let relayed: Vec<privpca::federation::messages::SeedReveal> =
        serde_json::from_value(task["seed_reveals"].clone()).unwrap();
    seed::seed_from_reveals(study, &participants, &relayed).unwrap();
    // Boxes to every participant are refused: SecAgg+ deals to the graph neighbours only.
    let boxes: Vec<Value> = (1..=10u32)
        .filter(|&i| i != 1)
        .map(|to| json!({"from": 1, "to": to, "ciphertext": wire::encode(&[0u8; 64])}))
        .collect();
    let doc = app
        .post("/v1/site/shares", &tokens[0], json!({ "boxes": boxes }))
        .await
        .problem(422);
    assert!(
        doc["detail"].as_str().unwrap().contains("graph neighbour"),
        "{doc}"
    );
    // Once the rounds run the reveals are no longer kept: a repeat that opens the site's
    // commitment is the share that arrived; other bytes are another share, a conflict.
    for site in &mut sites {
        site.step(&app).await;
    }
    assert_eq!(next_task(&app, &tokens[0]).await["task"], "contribute");
    let doc = refused_reveal(&app, &tokens[0], json!({ "reveal": own }), 409).await;
    assert!(
        doc["type"].as_str().unwrap().ends_with("already-received"),
        "{doc}"
    );
    let doc = refused_reveal(&app, &tokens[0], json!({"reveal": wire::encode(&[7u8; 32])}), 409).await;
    assert!(
        !doc["type"].as_str().unwrap().ends_with("already-received"),
        "{doc}"
    );
    assert!(doc["detail"].as_str().unwrap().contains("another share"), "{doc}");
    let finals = run_sites(&app, &mut sites).await;
    assert!(
        finals
            .values()
            .all(|t| matches!(t, SiteTask::Finished { status, .. }
        if *status == privpca::store::StudyStatus::Succeeded)),
        "{finals:?}"
    );
}

#[tokio::test]
async fn coordinator_restarts_between_reveals_and_between_share_boxes_keep_them() {
    let (app, key) = TestApp::start_with_tenant("owner").await;
    let (id, tokens, mut sites) = enrolled(&app, &key, sparse_body(2), 120, 40).await;
    let _ = next_task(&app, &tokens[0]).await;
    for site in sites.iter_mut().take(6) {
        site.step(&app).await;
    }
    let config = app.state.config.as_ref().clone();
    let dir = app.stop().await;
    let app = TestApp::open(dir, config.clone(), true).await;
    for token in &tokens[..6] {
        assert_eq!(task_of(&app, token).await["task"], "wait", "its reveal was kept");
    }
    // The other reveals; then half the sites send their share boxes, and the coordinator stops
    // again: the boxes, like the reveals, are kept in the study's journal only.
    for site in sites.iter_mut().skip(6) {
        site.step(&app).await;
    }
    let _ = next_task(&app, &tokens[0]).await;
    for site in sites.iter_mut().take(5) {
        site.step(&app).await;
    }
    let dir = app.stop().await;
    let app = TestApp::open(dir, config, true).await;
    for token in &tokens[..5] {
        assert_eq!(task_of(&app, token).await["task"], "wait", "its boxes were kept");
    }
    assert_eq!(task_of(&app, &tokens[5]).await["task"], "share_keys");
    let finals = run_sites(&app, &mut sites).await;
    let view = app.get(&format!("/v1/studies/{id}"), &key).await.json();
    assert_eq!(view["status"], "succeeded", "{view} {finals:?}");
    for site in view["sites"].as_array().unwrap() {
        assert!(
            (site["charged"]["rho"].as_f64().unwrap() - 0.5).abs() < 1e-9,
            "{view}"
        );
    }
}

#[tokio::test]
async fn a_thousand_site_secagg_plus_study_is_created_and_a_complete_one_of_65_is_refused() {
    let (app, key) = TestApp::start_with_tenant("owner").await;
    let mut body = sparse_body(3);
    body["sites"] = json!(
        (0..1000)
            .map(|i| json!({"name": format!("site-{i}")}))
            .collect::<Vec<_>>()
    );
    body.as_object_mut().unwrap().remove("threshold");
    body["params"]["max_site_samples"] = json!(1000);
    let created = create(&app, &key, body.clone()).await;
    assert_eq!(created["sites"].as_array().map(Vec::len), Some(1000));
    assert_eq!(created["study"]["threshold"], 667, "{created}");
    body["sites"] = json!(
        (0..1001)
            .map(|i| json!({"name": format!("site-{i}")}))
            .collect::<Vec<_>>()
    );
    let doc = app.post("/v1/studies", &key, body.clone()).await.problem(422);
    assert_eq!(doc["field"], "sites", "{doc}");
    body["sites"] = json!(
        (0..65)
            .map(|i| json!({"name": format!("site-{i}")}))
            .collect::<Vec<_>>()
    );
    body["params"]
        .as_object_mut()
        .unwrap()
        .remove("secure_aggregation");
    let doc = app.post("/v1/studies", &key, body.clone()).await.problem(422);
    assert!(doc["detail"].as_str().unwrap().contains("sparse"), "{doc}");
    body["algorithm"] = json!("cape_pca");
    let doc = app.post("/v1/studies", &key, body).await.problem(422);
    assert_eq!(doc["field"], "sites", "{doc}");
}

/// A sparse study whose terms could leave fewer honest releases in a round's sum than its
/// threshold t (S less ⌈δS⌉ sites out less ⌈γS⌉ corrupt) is refused naming `threshold`: every
/// site's noise is calibrated for t of them, so the charge would not hold. At t = that number it
/// is created.
#[tokio::test]
async fn a_secagg_plus_study_with_fewer_honest_survivors_than_its_threshold_is_refused() {
    let (app, key) = TestApp::start_with_tenant("owner").await;
    let mut body = sparse_body(3);
    body["sites"] = json!(
        (0..100)
            .map(|i| json!({"name": format!("site-{i}")}))
            .collect::<Vec<_>>()
    );
    body.as_object_mut().unwrap().remove("threshold");
    body["params"]["max_site_samples"] = json!(1000);
    body["params"]["corruption_rate"] = json!(0.2);
    body["params"]["dropout_rate"] = json!(0.2);
    let doc = app.post("/v1/studies", &key, body.clone()).await.problem(422);
    assert_eq!(doc["field"], "threshold", "{doc}");
    assert!(
        doc["detail"]
            .as_str()
            .unwrap()
            .contains("leave 60 honest survivors"),
        "{doc}"
    );
    body["threshold"] = json!(60);
    let created = create(&app, &key, body).await;
    assert_eq!(created["study"]["threshold"], 60, "{created}");
}

/// The last reveal fixes the graph without a phase change: a site already long-polling for its
/// next task is woken with `share_keys` at once, not at the end of its poll (which could be
/// after the key exchange's deadline).
#[tokio::test]
async fn the_last_reveal_wakes_the_sites_that_wait() {
    let (app, key) = TestApp::start_with_tenant("owner").await;
    let (_, tokens, mut sites) = enrolled(&app, &key, sparse_body(2), 150, 40).await;
    let _ = next_task(&app, &tokens[0]).await;
    sites[0].step(&app).await;
    let started = std::time::Instant::now();
    let poll = app.get("/v1/site/task?wait_ms=20000", &tokens[0]);
    let others = async {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        for site in sites.iter_mut().skip(1) {
            site.step(&app).await;
        }
    };
    let (reply, ()) = tokio::join!(poll, others);
    let task = reply.json();
    assert_eq!(task["task"], "share_keys", "{task}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

/// SecAgg+'s graph is chosen for ⌈δS⌉ sites out: a round that leaves more out stops the study
/// (the sites would refuse its transcript), with the charges standing.
#[tokio::test]
async fn more_sites_out_than_the_dropout_rate_allows_stops_a_secagg_plus_study() {
    let (app, key) = TestApp::start_with_tenant("owner").await;
    let (id, _, mut sites) = enrolled(&app, &key, sparse_body(3), 160, 40).await;
    sites[3].dies_at = Some(2);
    sites[7].dies_at = Some(2);
    let mut finals = BTreeMap::new();
    step_until(&app, &mut sites, &mut finals, |sites, done| {
        done.contains_key(&3)
            && done.contains_key(&7)
            && sites
                .iter()
                .enumerate()
                .all(|(i, s)| i == 3 || i == 7 || s.contributed >= 2)
    })
    .await;
    app.expire_phase(&id).await;
    let mut study = app.get(&format!("/v1/studies/{id}"), &key).await.json();
    for _ in 0..100 {
        if study["status"] != "running" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        study = app.get(&format!("/v1/studies/{id}"), &key).await.json();
    }
    assert_eq!(study["status"], "failed", "{study}");
    assert!(
        study["error"]
            .as_str()
            .unwrap_or_default()
            .contains("dropout rate"),
        "{study}"
    );
    assert!(
        study["sites"][0]["charged"]["rho"].as_f64().unwrap() > 0.0,
        "{study}"
    );
}
