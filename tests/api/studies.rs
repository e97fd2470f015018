//! Studies over HTTP: creation and its refusals, the site protocol driven by in-process sites
//! (the same protocol code `privpca site` uses), dropouts, bad site messages, and results.

use std::collections::BTreeMap;

use axum::http::{Method, StatusCode};
use privpca::federation::messages::{SiteStudyView, SiteTask};
use privpca::federation::secagg::{GraphSpec, SiteSession, seed};
use privpca::federation::transcript::{self, RoundView, SiteSigner};
use privpca::federation::wire;
use privpca::linalg::Matrix;
use privpca::protocols::power::state::{SiteComputation, clip_rows};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde_json::{Value, json};

use crate::helpers::TestApp;

/// A `federated_power` study of `iterations` power rounds and no clip (`clip: "none"`: these
/// tests count rounds; the clip's 8 steps before them are tested in `study_clip.rs` and by the
/// end-to-end test here).
pub(crate) fn study_body(sites: usize, threshold: u32, iterations: u32, round_timeout: u64) -> Value {
    json!({
        "name": "four hospitals",
        "algorithm": "federated_power",
        "n_features": 6,
        "relation": "replace_one",
        "row_norm_bound": 1.0,
        "params": {"k": 2, "iterations": iterations, "clip": "none"},
        "privacy": {"rho": 0.5},
        "threshold": threshold,
        "sites": (0..sites).map(|i| json!({"name": format!("site-{i}")})).collect::<Vec<_>>(),
        "join_timeout_seconds": 30,
        "round_timeout_seconds": round_timeout,
    })
}

/// A site driven in the test: its data, token and protocol session.
pub(crate) struct TestSite {
    token: String,
    xt: Matrix,
    view: Option<SiteStudyView>,
    session: Option<SiteSession>,
    comp: Option<SiteComputation>,
    rng: ChaCha20Rng,
    /// Stop answering from this round on (a crash).
    pub(crate) dies_at: Option<u32>,
    /// The last round this site sent its contribution to.
    pub(crate) contributed: u32,
    /// Its round signatures' key, and what it signed each round (iterate hash and roster).
    signer: SiteSigner,
    signed: BTreeMap<u32, ([u8; 32], Vec<u32>)>,
    /// SecAgg+: its share of the graph seed (committed to at join), and the roster it revealed
    /// it for.
    seed_share: Option<[u8; 32]>,
    roster: Vec<privpca::federation::messages::Participant>,
}

impl TestSite {
    /// A site holding `xt` (d×n, a record per column).
    pub(crate) fn with_rows(token: &str, seed: u64, xt: Matrix) -> TestSite {
        TestSite {
            token: token.to_string(),
            xt,
            view: None,
            session: None,
            comp: None,
            rng: ChaCha20Rng::seed_from_u64(seed),
            dies_at: None,
            contributed: 0,
            signer: SiteSigner::from_seed([seed as u8; 32]),
            signed: BTreeMap::new(),
            seed_share: None,
            roster: Vec::new(),
        }
    }

    pub(crate) fn new(token: &str, seed: u64, n: usize) -> TestSite {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let xt = Matrix::from_fn(6, n, |i, _| {
            let z: f64 = rand_distr::Distribution::sample(&rand_distr::StandardNormal, &mut rng);
            z * if i == 0 { 0.5 } else { 0.1 }
        });
        let mut xt = xt;
        for mut c in xt.column_iter_mut() {
            let norm = c.norm();
            if norm > 1.0 {
                c /= norm;
            }
        }
        TestSite {
            token: token.to_string(),
            xt,
            view: None,
            session: None,
            comp: None,
            rng,
            dies_at: None,
            contributed: 0,
            signer: SiteSigner::from_seed([seed as u8; 32]),
            signed: BTreeMap::new(),
            seed_share: None,
            roster: Vec::new(),
        }
    }

    pub(crate) async fn join(&mut self, app: &TestApp) {
        let view: SiteStudyView =
            serde_json::from_value(app.get("/v1/site/study", &self.token).await.json()).unwrap();
        let comp = SiteComputation::from_view(&view).unwrap();
        comp.check_data(self.xt.ncols(), self.xt.nrows()).unwrap();
        let rounds = comp.config().total_rounds();
        let session = SiteSession::new(view.study_id, view.site_index, rounds, &mut self.rng);
        let mut body = json!({
            "n_samples": self.xt.ncols(),
            "encryption_public_key": session.encryption_public_key(),
            "mask_public_keys": session.mask_public_keys(),
            "signing_public_key": self.signer.public_key(),
        });
        if comp.config().secagg_plus.is_some() {
            let share: [u8; 32] = rand::Rng::random(&mut self.rng);
            let commitment = seed::commitment(view.study_id, view.site_index, &share);
            body["seed_commitment"] = json!(wire::encode(&commitment));
            self.seed_share = Some(share);
        }
        let reply = app.post("/v1/site/join", &self.token, body).await;
        reply.expect(StatusCode::OK);
        self.view = Some(view);
        self.session = Some(session);
        self.comp = Some(comp);
    }

    /// Does the next task; returns the final task when the study is over for this site.
    pub(crate) async fn step(&mut self, app: &TestApp) -> Option<SiteTask> {
        let reply = app.get("/v1/site/task?wait_ms=200", &self.token).await;
        reply.expect(StatusCode::OK);
        let task: SiteTask = serde_json::from_value(reply.json()).unwrap();
        let threshold = self.view.as_ref().unwrap().threshold;
        let session = self.session.as_mut().unwrap();
        match task {
            SiteTask::Wait { .. } => None,
            SiteTask::RevealSeed { participants } => {
                self.roster = participants;
                let reveal = wire::encode(&self.seed_share.expect("a SecAgg+ study"));
                let reply = app
                    .post("/v1/site/seed", &self.token, json!({ "reveal": reveal }))
                    .await;
                reply.expect(StatusCode::NO_CONTENT);
                None
            }
            SiteTask::ShareKeys {
                participants,
                seed_reveals,
            } => {
                let boxes = match self.comp.as_ref().unwrap().config().secagg_plus {
                    Some(plus) => {
                        assert!(participants.is_empty(), "the roster is the reveal's");
                        let participants = &self.roster;
                        let study = self.view.as_ref().unwrap().study_id;
                        let seed = seed::seed_from_reveals(study, participants, &seed_reveals).unwrap();
                        let sites = participants.len() as u32;
                        let invited = self.comp.as_ref().unwrap().config().sites;
                        let rate = plus.corruption_rate_for(invited, sites);
                        let spec = GraphSpec::new(seed, sites, rate, plus.dropout_rate).unwrap();
                        session.share_boxes_sparse(participants, threshold, &spec, &mut self.rng)
                    }
                    None => session.share_boxes(&participants, threshold, &mut self.rng),
                }
                .unwrap();
                let reply = app
                    .post("/v1/site/shares", &self.token, json!({"boxes": boxes}))
                    .await;
                reply.expect(StatusCode::NO_CONTENT);
                None
            }
            SiteTask::Contribute {
                round,
                roster,
                iterate,
                rows,
                cols,
                inbox,
                clip_norm,
                ..
            } => {
                if self.dies_at.is_some_and(|r| round >= r) {
                    return Some(SiteTask::Wait {
                        status: privpca::store::StudyStatus::Running,
                    });
                }
                if round == 1 {
                    session.receive_inbox(&inbox).unwrap();
                }
                let study = self.view.as_ref().unwrap().study_id;
                let signed = transcript::round_bytes(&wire::decode(&iterate).unwrap(), clip_norm, None);
                let hash = transcript::iterate_hash(study, round, rows, cols, &signed);
                let values = wire::b64_to_f64s(&iterate, rows * cols).unwrap();
                let comp = self.comp.as_ref().unwrap();
                let encoded = if comp.is_clip_round(round) {
                    let norms: Vec<f64> = self.xt.column_iter().map(|x| x.norm()).collect();
                    comp.clip_count(&norms, &values, &mut self.rng).unwrap()
                } else {
                    let x = Matrix::from_column_slice(rows, cols, &values);
                    let xt = match clip_norm {
                        Some(c) => clip_rows(&self.xt, c),
                        None => self.xt.clone(),
                    };
                    comp.contribution(&xt, &x, clip_norm, &mut self.rng).unwrap()
                };
                let masked = session.mask(round, &roster, &encoded).unwrap();
                let signature = self.signer.sign(&transcript::contribution_message(&RoundView {
                    study,
                    round,
                    iterate: &hash,
                    roster: &roster,
                }));
                self.signed.insert(round, (hash, roster.clone()));
                let uri = format!("/v1/site/rounds/{round}/contribution");
                let reply = app
                    .post(
                        &uri,
                        &self.token,
                        json!({"masked": wire::words_to_b64(&masked), "signature": signature}),
                    )
                    .await;
                reply.expect(StatusCode::NO_CONTENT);
                self.contributed = round;
                None
            }
            SiteTask::Confirm {
                round,
                survivors,
                dropped,
                ..
            } => {
                let (hash, roster) = &self.signed[&round];
                let view = RoundView {
                    study: self.view.as_ref().unwrap().study_id,
                    round,
                    iterate: hash,
                    roster,
                };
                let signature = self
                    .signer
                    .sign(&transcript::confirmation_message(&view, &survivors, &dropped));
                let uri = format!("/v1/site/rounds/{round}/confirm");
                let reply = app
                    .post(&uri, &self.token, json!({ "signature": signature }))
                    .await;
                reply.expect(StatusCode::NO_CONTENT);
                None
            }
            SiteTask::Unmask {
                round,
                survivors,
                dropped,
                ..
            } => {
                let mut roster: Vec<u32> = survivors.iter().chain(&dropped).copied().collect();
                roster.sort_unstable();
                let answer = session
                    .unmask_response(round, &roster, &survivors, &dropped, threshold)
                    .unwrap();
                let uri = format!("/v1/site/rounds/{round}/unmask");
                let reply = app
                    .post(&uri, &self.token, serde_json::to_value(answer).unwrap())
                    .await;
                reply.expect(StatusCode::NO_CONTENT);
                None
            }
            finished @ SiteTask::Finished { .. } => Some(finished),
            SiteTask::CapeRelease { .. } | SiteTask::GossipStep { .. } | SiteTask::GossipConfirm { .. } => {
                panic!("a task of another protocol in a federated_power study")
            }
        }
    }
}

/// One in-process site per token (site i seeded `seed + i`, holding `n` rows), each joined.
pub(crate) async fn joined_sites(app: &TestApp, tokens: &[String], seed: u64, n: usize) -> Vec<TestSite> {
    let mut sites = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        let mut site = TestSite::new(token, seed + i as u64, n);
        site.join(app).await;
        sites.push(site);
    }
    sites
}

/// Every site's token from a creation answer, in site order.
pub(crate) fn site_tokens(created: &Value) -> Vec<String> {
    created["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["token"].as_str().unwrap().to_string())
        .collect()
}

/// A study's status as its owner sees it.
pub(crate) async fn view_status(app: &TestApp, key: &str, id: &str) -> Value {
    app.get(&format!("/v1/studies/{id}"), key).await.json()["status"].clone()
}

/// Creates the study `body` describes and joins one in-process site per token (see
/// [`joined_sites`]): the study's id, the sites' tokens and the sites.
pub(crate) async fn enrolled(
    app: &TestApp,
    key: &str,
    body: Value,
    seed: u64,
    n: usize,
) -> (String, Vec<String>, Vec<TestSite>) {
    let created = create(app, key, body).await;
    let id = created["id"].as_str().unwrap().to_string();
    let tokens = site_tokens(&created);
    let sites = joined_sites(app, &tokens, seed, n).await;
    (id, tokens, sites)
}

pub(crate) async fn create(app: &TestApp, key: &str, body: Value) -> Value {
    let reply = app.post("/v1/studies", key, body).await;
    reply.expect(StatusCode::CREATED);
    reply.json()
}

/// Runs every site until each has a final task.
pub(crate) async fn run_sites(app: &TestApp, sites: &mut [TestSite]) -> BTreeMap<usize, SiteTask> {
    let mut done = BTreeMap::new();
    step_until(app, sites, &mut done, |_, _| false).await;
    done
}

/// Steps every site without a final task (recorded in `done`) until `until` holds or every
/// site has a final task.
pub(crate) async fn step_until(
    app: &TestApp,
    sites: &mut [TestSite],
    done: &mut BTreeMap<usize, SiteTask>,
    until: impl Fn(&[TestSite], &BTreeMap<usize, SiteTask>) -> bool,
) {
    for _ in 0..5000 {
        for (i, site) in sites.iter_mut().enumerate() {
            if done.contains_key(&i) {
                continue;
            }
            if let Some(task) = site.step(app).await {
                done.insert(i, task);
            }
        }
        if done.len() == sites.len() || until(sites, done) {
            return;
        }
    }
    panic!("the study did not finish");
}

#[tokio::test]
async fn a_study_runs_end_to_end_and_reports_survivors() {
    let (app, key) = TestApp::start_with_tenant("owner").await;
    // At its defaults, so with the clip: 8 count rounds, then the 5 power rounds.
    let mut body = study_body(3, 2, 5, 30);
    body["params"].as_object_mut().unwrap().remove("clip");
    let created = create(&app, &key, body).await;
    assert_eq!(created["status"], "enrolling");
    let id = created["id"].as_str().unwrap().to_string();
    let tokens = site_tokens(&created);
    assert_eq!(tokens.len(), 3);
    assert!(tokens.iter().all(|t| t.starts_with("pps_")));
    let mut sites = joined_sites(&app, &tokens, 0, 200).await;
    // A second join by the same site is refused and changes nothing.
    let again = app
        .post(
            "/v1/site/join",
            &tokens[0],
            json!({"n_samples": 200, "encryption_public_key": "", "mask_public_keys": []}),
        )
        .await;
    again.problem(409);
    let finals = run_sites(&app, &mut sites).await;
    for task in finals.values() {
        assert!(
            matches!(task, SiteTask::Finished { status, .. } if *status == privpca::store::StudyStatus::Succeeded),
            "{task:?}"
        );
    }
    let view = app.get(&format!("/v1/studies/{id}"), &key).await.json();
    assert_eq!(view["status"], "succeeded");
    assert_eq!(view["progress"], json!({"done": 13, "total": 13}));
    assert_eq!(view["n_samples"], 600);
    for site in view["sites"].as_array().unwrap() {
        assert_eq!(site["status"], "done");
        assert_eq!(site["n_samples"], 200);
        assert!((site["charged"]["rho"].as_f64().unwrap() - 0.5).abs() < 1e-9);
    }
    let result = app.get(&format!("/v1/studies/{id}/result"), &key).await.json();
    assert_eq!(
        (result["n_features"].as_u64(), result["n_components"].as_u64()),
        (Some(6), Some(2))
    );
    assert_eq!(result["survivors"].as_array().unwrap().len(), 3);
    assert_eq!(result["rounds"].as_array().unwrap().len(), 13);
    let clip = result["clip"]["clip_norm"].as_f64().unwrap();
    assert!(clip > 0.0 && clip <= 1.0, "{result}");
    assert_eq!(result["clip"]["steps"].as_array().map(Vec::len), Some(8));
    let first = &result["basis"][0];
    // The planted direction is e_0.
    assert!(first[0].as_f64().unwrap().abs() > 0.95, "{first}");
    assert!(result["achieved_multiplier"].as_f64().unwrap() >= result["target_multiplier"].as_f64().unwrap());
    // The result's receipt: the charge of the roster, leaf 1 of the study's log (after its budget).
    let vkey = app.get("/v1/ledger-key", &key).await.json()["verifier_key"]
        .as_str()
        .unwrap()
        .to_string();
    let receipt: privpca::transparency::Receipt = serde_json::from_value(result["receipt"].clone()).unwrap();
    let verified = receipt.verify(&vkey).expect("the study's receipt verifies");
    assert_eq!(verified.leaf_index, 1);
    let event = verified.event().unwrap();
    assert_eq!(event.study.as_deref(), Some(id.as_str()));
    assert_eq!(event.roster, Some(vec![1, 2, 3]));
    let checkpoint = app
        .get(&format!("/v1/studies/{id}/ledger/checkpoint"), &key)
        .await
        .json();
    assert_eq!(checkpoint["checkpoint"], receipt.checkpoint);
    let proof = app
        .get(&format!("/v1/studies/{id}/ledger/consistency?from=1&to=2"), &key)
        .await
        .json();
    assert_eq!(proof["proof"].as_array().map(Vec::len), Some(1));
    // A site token reads nothing on the tenant's side, and a tenant key is not a site token.
    app.get(&format!("/v1/studies/{id}"), &tokens[0])
        .await
        .problem(401);
    app.get("/v1/site/study", &key).await.problem(401);
}

#[tokio::test]
async fn a_site_that_dies_is_dropped_and_the_study_survives() {
    let (app, key) = TestApp::start_with_tenant("owner").await;
    let (id, _, mut sites) = enrolled(&app, &key, study_body(4, 3, 4, 60), 10, 150).await;
    sites[1].dies_at = Some(3);
    // Step until site 1 has fallen silent and the others have all sent round 3: the round can
    // only wait for site 1 now. Close it as its deadline would.
    let mut finals = BTreeMap::new();
    step_until(&app, &mut sites, &mut finals, |sites, done| {
        done.contains_key(&1)
            && sites
                .iter()
                .enumerate()
                .all(|(i, s)| i == 1 || s.contributed >= 3)
    })
    .await;
    assert_eq!(view_status(&app, &key, &id).await, "running");
    app.expire_phase(&id).await;
    step_until(&app, &mut sites, &mut finals, |_, _| false).await;
    let view = app.get(&format!("/v1/studies/{id}"), &key).await.json();
    assert_eq!(view["status"], "succeeded", "{view}");
    assert_eq!(view["sites"][1]["status"], "dropped");
    assert_eq!(view["sites"][1]["dropped_round"], 3);
    // The dropped site was charged (its noisy shares went out in rounds 1–2); the charge stands.
    assert!(view["sites"][1]["charged"]["rho"].as_f64().unwrap() > 0.0);
    let result = app.get(&format!("/v1/studies/{id}/result"), &key).await.json();
    let rounds = result["rounds"].as_array().unwrap();
    assert_eq!(rounds[1]["survivors"].as_array().unwrap().len(), 4);
    assert_eq!(rounds[2]["survivors"].as_array().unwrap().len(), 3);
    assert_eq!(rounds[2]["dropped"], json!(["site-1"]));
    assert!(
        finals
            .values()
            .filter(|t| matches!(t, SiteTask::Finished { .. }))
            .count()
            >= 3
    );
}

#[tokio::test]
async fn below_threshold_at_the_join_deadline_fails_without_charges() {
    let (app, key) = TestApp::start_with_tenant("owner").await;
    let created = create(&app, &key, study_body(3, 3, 2, 30)).await;
    let id = created["id"].as_str().unwrap().to_string();
    let mut site = TestSite::new(created["sites"][0]["token"].as_str().unwrap(), 1, 50);
    site.join(&app).await;
    // One of three joined: the join deadline comes (closed here as it would close).
    assert_eq!(view_status(&app, &key, &id).await, "enrolling");
    app.expire_phase(&id).await;
    let view = app.get(&format!("/v1/studies/{id}"), &key).await.json();
    assert_eq!(view["status"], "failed", "{view}");
    assert!(view["error"].as_str().unwrap().contains("Nothing was charged"));
    assert!(
        view["sites"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["charged"].is_null())
    );
    app.get(&format!("/v1/studies/{id}/result"), &key)
        .await
        .problem(409);
}

#[tokio::test]
async fn a_study_without_a_relation_is_replace_one_as_a_dataset_is() {
    let (app, key) = TestApp::start_with_tenant("owner").await;
    let mut body = study_body(3, 2, 3, 30);
    body.as_object_mut().unwrap().remove("relation");
    let study = create(&app, &key, body).await;
    assert_eq!(study["study"]["relation"], "replace_one", "{study}");
}

#[tokio::test]
async fn bad_studies_are_refused_with_clear_problems() {
    let (app, key) = TestApp::start_with_tenant("owner").await;
    let cases: Vec<(Value, &str)> = vec![
        (json!({"threshold": 1}), "threshold"),
        (json!({"threshold": 5}), "threshold"),
        (json!({"algorithm": "cape_agn"}), "params.iterations"),
        (json!({"algorithm": "cape_pca"}), "params.iterations"),
        (json!({"algorithm": "noisy_power"}), "algorithm"),
        (json!({"relation": "entry"}), "relation"),
        (json!({"row_norm_bound": 0.0}), "row_norm_bound"),
        (json!({"n_features": 0}), "n_features"),
        (json!({"sites": [{"name": "only"}]}), "sites"),
        (json!({"sites": [{"name": "a"}, {"name": "a"}]}), "sites[1].name"),
        (
            json!({"params": {"k": 2, "fraction_bits": 60}}),
            "params.fraction_bits",
        ),
        (
            json!({"params": {"k": 2, "max_site_samples": 1_000_000_000_000_u64, "fraction_bits": 40}}),
            "params.fraction_bits",
        ),
        (json!({"params": {"k": 2, "sites": 3}}), "params.sites"),
        (
            json!({"params": {"k": 2, "secure_aggregation": "sparse"}}),
            "params.secure_aggregation",
        ),
        (json!({"params": {"k": 9}}), "params.k"),
        // Private centring: a study's centre is checked as a job's; CAPE does not centre yet.
        (json!({"params": {"k": 2, "center": [0.0, 1.0]}}), "params.center"),
        (json!({"params": {"k": 2, "center": "mean"}}), "params.center"),
        (
            json!({"params": {"k": 2, "center_share": 0.2}}),
            "params.center_share",
        ),
        (
            json!({"params": {"k": 2, "center": "private", "center_share": 1.0}}),
            "params.center_share",
        ),
        (
            json!({"algorithm": "cape_agn", "params": {"k": 2, "model": "mog", "sigma2": 0.05, "center": "private"}}),
            "params.center",
        ),
        (
            json!({"algorithm": "cape_pca", "params": {"k": 2, "center": "private", "center_share": 0.95}}),
            "params.center_share",
        ),
        (json!({"privacy": {"rho": -1.0}}), "privacy.rho"),
        (json!({"round_timeout_seconds": 0}), "round_timeout_seconds"),
    ];
    for (patch, field) in cases {
        let mut body = study_body(3, 2, 3, 30);
        for (k, v) in patch.as_object().unwrap() {
            body[k] = v.clone();
        }
        let reply = app.post("/v1/studies", &key, body).await;
        let doc = reply.problem(422);
        assert_eq!(doc["field"], field, "{doc}");
    }
    // A missing required field is named (serde's top-level "missing field" carries no path).
    for missing in ["name", "n_features", "row_norm_bound"] {
        let mut body = study_body(3, 2, 3, 30);
        body.as_object_mut().unwrap().remove(missing);
        let doc = app.post("/v1/studies", &key, body).await.problem(422);
        assert_eq!(doc["field"], missing, "{doc}");
    }
    // A site budget below the cost: 409 naming the site.
    let mut body = study_body(3, 2, 3, 30);
    body["sites"][2]["budget_rho"] = json!(0.1);
    let doc = app.post("/v1/studies", &key, body).await.problem(409);
    assert!(doc["detail"].as_str().unwrap().contains("site-2"));
    assert!(app.list("/v1/studies", &key).await.is_empty());
}

#[tokio::test]
async fn bad_site_messages_are_refused_and_change_nothing() {
    let (app, key) = TestApp::start_with_tenant("owner").await;
    let created = create(&app, &key, study_body(3, 2, 3, 30)).await;
    let tokens = site_tokens(&created);
    // Unknown or foreign tokens.
    app.get("/v1/site/study", "pps_0000").await.problem(401);
    app.anonymous(Method::GET, "/v1/site/task").await.problem(401);
    // Malformed join: wrong number of keys, a broken key, n missing under replace_one.
    let mut site = TestSite::new(&tokens[0], 3, 40);
    let view: SiteStudyView =
        serde_json::from_value(app.get("/v1/site/study", &tokens[0]).await.json()).unwrap();
    let session = SiteSession::new(view.study_id, 1, 3, &mut site.rng);
    let good = json!({"n_samples": 40, "encryption_public_key": session.encryption_public_key(), "mask_public_keys": session.mask_public_keys()});
    let mut short = good.clone();
    short["mask_public_keys"] = json!([session.mask_public_keys()[0]]);
    app.post("/v1/site/join", &tokens[0], short).await.problem(422);
    let mut broken = good.clone();
    broken["encryption_public_key"] = json!("bm90IGEga2V5");
    app.post("/v1/site/join", &tokens[0], broken).await.problem(422);
    let mut no_n = good.clone();
    no_n.as_object_mut().unwrap().remove("n_samples");
    app.post("/v1/site/join", &tokens[0], no_n).await.problem(422);
    // Contributions before the study runs.
    app.post(
        "/v1/site/rounds/1/contribution",
        &tokens[0],
        json!({"masked": "AAAA", "signature": ""}),
    )
    .await
    .problem(409);
    // Everyone joins; the study starts.
    let mut sites = joined_sites(&app, &tokens, 20, 40).await;
    // One pass: every site shares its keys, so round 1 opens.
    for s in &mut sites {
        assert!(s.step(&app).await.is_none());
    }
    let task = app.get("/v1/site/task?wait_ms=2000", &tokens[0]).await.json();
    assert_eq!(task["task"], "contribute", "{task}");
    // A wrong-length contribution, a wrong round and a replayed share upload are refused.
    app.post(
        "/v1/site/rounds/1/contribution",
        &tokens[0],
        json!({"masked": wire::words_to_b64(&[1, 2, 3]), "signature": ""}),
    )
    .await
    .problem(422);
    app.post(
        "/v1/site/rounds/7/contribution",
        &tokens[0],
        json!({"masked": wire::words_to_b64(&[0; 24]), "signature": ""}),
    )
    .await
    .problem(409);
    // A contribution whose signature does not verify over the round's iterate and roster.
    let forged = SiteSigner::from_seed([99; 32]).sign(b"something else");
    let doc = app
        .post(
            "/v1/site/rounds/1/contribution",
            &tokens[0],
            json!({"masked": wire::words_to_b64(&[0; 24]), "signature": forged}),
        )
        .await
        .problem(422);
    assert!(
        doc["detail"].as_str().unwrap().contains("does not verify"),
        "{doc}"
    );
    // A confirmation before the round's collection closed.
    app.post(
        "/v1/site/rounds/1/confirm",
        &tokens[0],
        json!({"signature": forged}),
    )
    .await
    .problem(409);
    let replay = app
        .post("/v1/site/shares", &tokens[0], json!({"boxes": []}))
        .await
        .problem(409);
    assert!(replay["type"].as_str().unwrap().ends_with("already-received"));
    // The run still completes.
    let finals = run_sites(&app, &mut sites).await;
    assert!(
        finals
            .values()
            .all(|t| matches!(t, SiteTask::Finished { status, .. } if *status == privpca::store::StudyStatus::Succeeded))
    );
}

#[tokio::test]
async fn cancelling_a_study_ends_it_for_its_sites() {
    let (app, key) = TestApp::start_with_tenant("owner").await;
    let created = create(&app, &key, study_body(2, 2, 2, 30)).await;
    let id = created["id"].as_str().unwrap();
    let token = created["sites"][0]["token"].as_str().unwrap().to_string();
    let reply = app
        .call(Method::DELETE, &format!("/v1/studies/{id}"), Some(&key), None)
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json()["status"], "cancelled");
    app.call(Method::DELETE, &format!("/v1/studies/{id}"), Some(&key), None)
        .await
        .problem(409);
    let task = app.get("/v1/site/task?wait_ms=0", &token).await.json();
    assert_eq!(task["task"], "finished");
    assert_eq!(task["status"], "cancelled");
    // Other tenants see nothing.
    let other = app.tenant("other").await;
    app.get(&format!("/v1/studies/{id}"), &other).await.problem(404);
}

#[tokio::test]
async fn a_coordinator_restart_continues_a_federated_power_study_and_charges_once() {
    let (app, key) = TestApp::start_with_tenant("owner").await;
    let (id, tokens, mut sites) = enrolled(&app, &key, study_body(2, 2, 50, 30), 40, 60).await;
    // Run until round 1 is done, so the sites have been charged.
    for _ in 0..50 {
        for s in &mut sites {
            let _ = s.step(&app).await;
        }
        if app.get(&format!("/v1/studies/{id}"), &key).await.json()["progress"]["done"].as_i64() >= Some(1) {
            break;
        }
    }
    let config = app.state.config.as_ref().clone();
    let dir = app.stop().await;
    let app = TestApp::open(dir, config, true).await;
    let view = app.get(&format!("/v1/studies/{id}"), &key).await.json();
    assert_eq!(view["status"], "running", "the study's state is kept: {view}");
    // The same sites go on against the restarted coordinator, which continues from the database.
    for _ in 0..2_000 {
        for s in &mut sites {
            let _ = s.step(&app).await;
        }
        let view = app.get(&format!("/v1/studies/{id}"), &key).await.json();
        if view["status"] != "running" {
            break;
        }
    }
    let view = app.get(&format!("/v1/studies/{id}"), &key).await.json();
    assert_eq!(view["status"], "succeeded", "{view}");
    for site in view["sites"].as_array().unwrap() {
        assert_eq!(site["status"], "done", "{view}");
        assert!(
            (site["charged"]["rho"].as_f64().unwrap() - 0.5).abs() < 1e-9,
            "charged once: {view}"
        );
    }
    let task = app.get("/v1/site/task?wait_ms=0", &tokens[0]).await.json();
    assert_eq!(task["task"], "finished");
    assert_eq!(task["status"], "succeeded");
}

#[tokio::test]
async fn retried_site_messages_are_already_received() {
    let (app, key) = TestApp::start_with_tenant("owner").await;
    let created = create(&app, &key, study_body(2, 2, 3, 30)).await;
    let tokens = site_tokens(&created);
    let mut sites = joined_sites(&app, &tokens, 60, 30).await;
    // Key exchange, then both contribute to round 1 and unmask it (step until round 1 is done).
    let id = created["id"].as_str().unwrap().to_string();
    for _ in 0..100 {
        for s in &mut sites {
            let _ = s.step(&app).await;
        }
        let done = app.get(&format!("/v1/studies/{id}"), &key).await.json()["progress"]["done"].as_i64();
        if done >= Some(1) {
            break;
        }
    }
    // Round 1 is done: a retried share upload, contribution or unmask is "already received".
    let retries = [
        ("/v1/site/shares", json!({"boxes": []})),
        (
            "/v1/site/rounds/1/contribution",
            json!({"masked": wire::words_to_b64(&[0; 24]), "signature": ""}),
        ),
        (
            "/v1/site/rounds/1/confirm",
            json!({"signature": wire::encode(&[0; 64])}),
        ),
        (
            "/v1/site/rounds/1/unmask",
            json!({"self_mask_shares": [], "mask_key_shares": []}),
        ),
    ];
    for (uri, body) in retries {
        let doc = app.post(uri, &tokens[0], body).await.problem(409);
        assert!(
            doc["type"].as_str().unwrap().ends_with("already-received"),
            "{uri}: {doc}"
        );
    }
    let finals = run_sites(&app, &mut sites).await;
    assert!(
        finals
            .values()
            .all(|t| matches!(t, SiteTask::Finished { status, .. } if *status == privpca::store::StudyStatus::Succeeded))
    );
}
