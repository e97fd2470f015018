//! A coordinator that lies (issue 36), between real `privpca site` processes and the real
//! service: a test-only HTTP relay (never part of the product) that forwards the study, the
//! joins and the key exchange to the real `privpca serve`, then takes the rounds over and shows
//! sites different views of round 1:
//!
//! - **split views** (attack 1): the victim v is told the round's roster is {v} ∪ J
//!   (|J| = t − 1), so it masks with J only; every other site is told the full roster, with v
//!   surviving and J dropped (each member j of J is shown J \ {j} dropped and itself surviving,
//!   so that every pair-mask secret of J collects t shares). Revealed, those shares remove every
//!   mask from v's single vector. S = 5, t = 3 and S = 10, t = 6;
//! - **another iterate** (attack 2): the victim is sent a concentrated orthonormal iterate
//!   (the first p unit vectors, the largest Δ), the others the real one; or, in round 1 of a
//!   study with a clip (its first search step), another c than its peers.
//!
//! Each attack runs with the consistency round (the relay asks for confirmations and relays
//! them) and without it (the relay skips straight to the unmask request). What must hold: the
//! sites reveal no share that would let the relay unmask the victim alone or remove the
//! self-mask of a site whose view differed; here every revealing site refuses with exit code 3
//! before sending any share. With an honest relay the same study succeeds.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use privpca::federation::messages::{SiteSignature, SiteTask, UnmaskRequest};
use privpca::federation::wire;
use serde_json::{Value, json};
use support::{BIN, Server, logs, wait_exit};

const ADMIN: &str = "liar-test-admin";
const D: usize = 6;

/// What the relay does to round 1.
#[derive(Clone, Debug)]
enum Attack {
    /// Forwards everything: the study runs as it would without the relay.
    Honest,
    /// Attack 1: the victim masks with `{victim} ∪ hidden`; the others see `hidden` dropped.
    SplitView { victim: u32, hidden: Vec<u32> },
    /// Attack 2: the victim multiplies a concentrated iterate (in a study with `clip: "none"`,
    /// whose round 1 is a power round), or is shown another c in round 1, the first step of the
    /// study's clip (`clip_step`).
    Iterate { victim: u32, clip_step: bool },
    /// SecAgg+: every site is shown round 1 with `dropped` out, more than the study's dropout
    /// rate allows (a coordinator that picks them after seeing the public graph could cut it).
    GraphCut { dropped: Vec<u32> },
    /// SecAgg+: the victim's `share_keys` task carries another site's reveal altered (so it
    /// would derive another graph than its peers), or the roster again with one key swapped.
    AlterKeyExchange { victim: u32, roster: bool },
    /// Forwards everything, but once `site` has been restarted after answering round 1's
    /// unmask request, asks it to unmask round 1 again with `survivors` and `dropped`.
    Reask {
        site: u32,
        survivors: Vec<u32>,
        dropped: Vec<u32>,
    },
}

impl Attack {
    fn victim(&self) -> Option<u32> {
        match self {
            Attack::Honest | Attack::Reask { .. } | Attack::GraphCut { .. } => None,
            Attack::SplitView { victim, .. }
            | Attack::Iterate { victim, .. }
            | Attack::AlterKeyExchange { victim, .. } => Some(*victim),
        }
    }
}

/// What the relay saw and collected.
#[derive(Default)]
struct Books {
    /// Site token → site index.
    index: BTreeMap<String, u32>,
    /// Round 1's real task per site, once the real service handed it out.
    round1: BTreeMap<u32, Value>,
    /// The task each site was shown for round 1 (the victim's altered).
    shown: BTreeMap<u32, Value>,
    contributions: BTreeMap<u32, Value>,
    confirmations: BTreeMap<u32, String>,
    answers: BTreeMap<u32, UnmaskRequest>,
    /// Unmask answers the relay forwarded (by site, every one it saw).
    forwarded_answers: Vec<u32>,
    /// `Attack::Reask`: the site was restarted; ask it again.
    reask: bool,
    /// Sites whose share boxes the relay forwarded.
    dealt: BTreeSet<u32>,
    /// SecAgg+: the roster of the `reveal_seed` task, as the real service sent it.
    roster: Vec<Value>,
    /// `Attack::Reask`: the victim's round-1 answer went out; every request waits until it is
    /// restarted, so that the study cannot run on (and finish) before the restart.
    held: bool,
}

struct Relay {
    real: String,
    attack: Attack,
    /// Go straight to the unmask request, without asking for confirmations.
    skip_confirm: bool,
    sites: u32,
    http: reqwest::Client,
    books: Mutex<Books>,
}

fn bearer(headers: &HeaderMap) -> String {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_string()
}

fn json_response(value: &Value) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

impl Relay {
    async fn forward(
        &self,
        method: Method,
        uri: &Uri,
        headers: &HeaderMap,
        body: Bytes,
    ) -> (StatusCode, Bytes) {
        let url = format!("{}{}", self.real, uri.path_and_query().map_or("", |p| p.as_str()));
        let mut request = self
            .http
            .request(
                reqwest::Method::from_bytes(method.as_str().as_bytes()).unwrap(),
                url,
            )
            .body(body);
        for name in [header::AUTHORIZATION, header::CONTENT_TYPE] {
            if let Some(value) = headers.get(&name) {
                request = request.header(name.as_str(), value.to_str().unwrap());
            }
        }
        let response = request.send().await.unwrap();
        let status = StatusCode::from_u16(response.status().as_u16()).unwrap();
        (status, response.bytes().await.unwrap())
    }

    /// Round 1's task as the relay shows it to `site`.
    fn altered(&self, site: u32, real: &Value) -> Value {
        let mut task = real.clone();
        match &self.attack {
            Attack::SplitView { victim, hidden } if *victim == site => {
                let mut roster: Vec<u32> = hidden.clone();
                roster.push(site);
                roster.sort_unstable();
                task["roster"] = json!(roster);
            }
            Attack::Iterate { victim, .. } if *victim == site => {
                let (rows, cols) = (
                    task["rows"].as_u64().unwrap() as usize,
                    task["cols"].as_u64().unwrap() as usize,
                );
                let shown: Vec<f64> = if (rows, cols) == (1, 2) {
                    // A step of the study's clip ([c, q]): another valid c than its peers'.
                    let real = wire::b64_to_f64s(task["iterate"].as_str().unwrap(), 2).unwrap();
                    vec![real[0] / 2.0, real[1]]
                } else {
                    (0..cols)
                        .flat_map(|j| (0..rows).map(move |i| if i == j { 1.0 } else { 0.0 }))
                        .collect()
                };
                task["iterate"] = json!(wire::f64s_to_b64(&shown));
            }
            _ => {}
        }
        task
    }

    /// The survivors and dropped sites `site` is shown (it revealing for the victim's benefit).
    fn view_of(&self, site: u32) -> (Vec<u32>, Vec<u32>) {
        let all: Vec<u32> = (1..=self.sites).collect();
        match &self.attack {
            Attack::SplitView { hidden, .. } => {
                let dropped: Vec<u32> = hidden.iter().copied().filter(|&j| j != site).collect();
                let survivors = all.into_iter().filter(|s| !dropped.contains(s)).collect();
                (survivors, dropped)
            }
            Attack::GraphCut { dropped } => {
                let survivors = all.into_iter().filter(|s| !dropped.contains(s)).collect();
                (survivors, dropped.clone())
            }
            Attack::Iterate { .. }
            | Attack::Honest
            | Attack::Reask { .. }
            | Attack::AlterKeyExchange { .. } => (all, Vec::new()),
        }
    }

    /// The relay's own task for `site` once round 1 is taken over.
    fn task(&self, site: u32, books: &Books) -> Option<Value> {
        if !books.contributions.contains_key(&site) {
            return books.shown.get(&site).cloned();
        }
        if self.attack.victim() == Some(site) && matches!(self.attack, Attack::SplitView { .. }) {
            return None;
        }
        if books.contributions.len() < self.sites as usize {
            return None;
        }
        let (survivors, dropped) = self.view_of(site);
        let contributions: Vec<SiteSignature> = survivors
            .iter()
            .filter_map(|s| {
                Some(SiteSignature {
                    site: *s,
                    signature: books.contributions.get(s)?["signature"].as_str()?.to_string(),
                })
            })
            .collect();
        if !self.skip_confirm && !books.confirmations.contains_key(&site) {
            let task = SiteTask::Confirm {
                round: 1,
                survivors,
                dropped,
                contributions,
            };
            return Some(serde_json::to_value(task).unwrap());
        }
        if books.answers.contains_key(&site) {
            return None;
        }
        // Every confirmation the relay holds, whatever transcript it confirms.
        let confirmations = books
            .confirmations
            .iter()
            .map(|(s, signature)| SiteSignature {
                site: *s,
                signature: signature.clone(),
            })
            .collect();
        let task = SiteTask::Unmask {
            round: 1,
            survivors,
            dropped,
            contributions,
            confirmations,
        };
        Some(serde_json::to_value(task).unwrap())
    }
}

async fn relay(
    State(relay): State<Arc<Relay>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let token = bearer(&headers);
    let path = uri.path().to_string();
    let site = relay.books.lock().unwrap().index.get(&token).copied();
    let until = Instant::now() + Duration::from_secs(120);
    while {
        let books = relay.books.lock().unwrap();
        books.held && !books.reask
    } && Instant::now() < until
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let taken = site.is_some_and(|s| relay.books.lock().unwrap().round1.contains_key(&s));
    if let Attack::Reask {
        site: asked,
        survivors,
        dropped,
    } = &relay.attack
        && site == Some(*asked)
        && path == "/v1/site/task"
        && relay.books.lock().unwrap().reask
    {
        let task = SiteTask::Unmask {
            round: 1,
            survivors: survivors.clone(),
            dropped: dropped.clone(),
            contributions: Vec::new(),
            confirmations: Vec::new(),
        };
        return json_response(&serde_json::to_value(task).unwrap());
    }
    let forwarding = matches!(relay.attack, Attack::Honest | Attack::Reask { .. });
    if method == Method::POST && path == "/v1/site/shares" {
        relay.books.lock().unwrap().dealt.extend(site);
    }
    if forwarding && method == Method::POST && path == "/v1/site/rounds/1/unmask" {
        let mut books = relay.books.lock().unwrap();
        books.forwarded_answers.extend(site);
        if let Attack::Reask { site: asked, .. } = &relay.attack
            && site == Some(*asked)
        {
            books.held = true;
        }
    }
    // The study's transparency log is the real service's (the relay cannot sign another), so
    // a site's witness checks at every phase are forwarded whatever the relay does with rounds.
    let log = path == "/v1/ledger-key" || path.starts_with("/v1/site/ledger/");
    if forwarding || log || !(taken || path == "/v1/site/task") {
        let (status, bytes) = relay.forward(method, &uri, &headers, body).await;
        if path == "/v1/site/study" && status == StatusCode::OK {
            let view: Value = serde_json::from_slice(&bytes).unwrap();
            let index = view["site_index"].as_u64().unwrap() as u32;
            relay.books.lock().unwrap().index.insert(token, index);
        }
        return (status, [(header::CONTENT_TYPE, "application/json")], bytes).into_response();
    }
    let site = site.expect("a site reads its study first");
    if path == "/v1/site/task" && !taken {
        let (status, bytes) = relay.forward(method, &uri, &headers, body).await;
        let mut task: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if let Attack::AlterKeyExchange { victim, roster } = &relay.attack
            && *victim == site
            && task["task"] == "share_keys"
        {
            if *roster {
                // The roster again (SecAgg+ sends none here), with a peer's signing key swapped.
                let mut participants = relay.books.lock().unwrap().roster.clone();
                let other = participants
                    .iter()
                    .position(|p| p["index"] != json!(site))
                    .unwrap();
                participants[other]["signing_public_key"] =
                    json!(privpca::federation::transcript::SiteSigner::from_seed([77; 32]).public_key());
                task["participants"] = json!(participants);
            } else {
                let reveals = task["seed_reveals"].as_array_mut().unwrap();
                let other = reveals.iter().position(|r| r["site"] != json!(site)).unwrap();
                reveals[other]["reveal"] = json!(wire::encode(&[0x5a; 32]));
            }
            return json_response(&task);
        }
        if task["task"] == "reveal_seed" {
            relay.books.lock().unwrap().roster = task["participants"].as_array().unwrap().clone();
        }
        if task["task"] != "contribute" {
            return (status, [(header::CONTENT_TYPE, "application/json")], bytes).into_response();
        }
        // Round 1 opens: from here on the relay answers this site itself.
        let shown = relay.altered(site, &task);
        let mut books = relay.books.lock().unwrap();
        books.round1.insert(site, task);
        books.shown.insert(site, shown.clone());
        return json_response(&shown);
    }
    match (method, path.as_str()) {
        (Method::GET, "/v1/site/task") => {
            let task = {
                let books = relay.books.lock().unwrap();
                relay.task(site, &books)
            };
            match task {
                Some(task) => json_response(&task),
                None => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    json_response(&json!({"task": "wait", "status": "running"}))
                }
            }
        }
        (Method::POST, "/v1/site/rounds/1/contribution") => {
            let body: Value = serde_json::from_slice(&body).unwrap();
            relay.books.lock().unwrap().contributions.insert(site, body);
            StatusCode::NO_CONTENT.into_response()
        }
        (Method::POST, "/v1/site/rounds/1/confirm") => {
            let body: Value = serde_json::from_slice(&body).unwrap();
            let signature = body["signature"].as_str().unwrap().to_string();
            relay.books.lock().unwrap().confirmations.insert(site, signature);
            StatusCode::NO_CONTENT.into_response()
        }
        (Method::POST, "/v1/site/rounds/1/unmask") => {
            let answer: UnmaskRequest = serde_json::from_slice(&body).unwrap();
            relay.books.lock().unwrap().answers.insert(site, answer);
            StatusCode::NO_CONTENT.into_response()
        }
        (method, path) => panic!("the relay did not expect {method} {path}"),
    }
}

/// Starts the relay in front of `real` on a loopback port; its base URL.
async fn start_relay(relay: Arc<Relay>) -> String {
    let app = Router::new().fallback(self::relay).with_state(relay);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

fn shard(dir: &Path, i: usize) -> PathBuf {
    let path = dir.join(format!("shard-{i}.csv"));
    let mut text = String::new();
    for r in 0..40 {
        let row: Vec<String> = (0..D)
            .map(|c| format!("{:.6}", (((r * 7 + c * 3 + i * 11) % 17) as f64 - 8.0) / 40.0))
            .collect();
        text.push_str(&row.join(","));
        text.push('\n');
    }
    std::fs::write(&path, text).unwrap();
    path
}

fn spawn_site(base: &str, token: &str, data: &Path, ledger: &Path, log: &Path) -> Child {
    Command::new(BIN)
        .args(["site", "--server", base, "--token", token, "--budget-rho", "1"])
        .arg("--data")
        .arg(data)
        .arg("--ledger")
        .arg(ledger)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap()
}

/// The real service on SQLite under `dir`, a tenant's key, and a `federated_power` study of
/// `sites` sites, threshold `t` and `iterations` rounds (its creation answer).
async fn study(
    dir: &Path,
    sites: u32,
    t: u32,
    iterations: u32,
    clip: bool,
    sparse: bool,
) -> (Server, String, Value) {
    let env = vec![
        ("PRIVPCA_ADMIN_KEY", ADMIN.to_string()),
        (
            "PRIVPCA_DATABASE_URL",
            format!("sqlite://{}", dir.join("privpca.db").display()),
        ),
        ("PRIVPCA_DATA_DIR", dir.join("data").display().to_string()),
    ];
    let server: Server = support::start(&env, &dir.join("server.log")).await;
    let key = support::tenant(&server.base, ADMIN, "t").await;
    let body = json!({
        "name": "lied to",
        "algorithm": "federated_power",
        "n_features": D,
        "relation": "replace_one",
        "row_norm_bound": 1.0,
        "params": {"k": 2, "iterations": iterations, "clip": if clip { "auto" } else { "none" }},
        "privacy": {"rho": 0.5},
        "threshold": t,
        "sites": (1..=sites).map(|i| json!({"name": format!("site-{i}")})).collect::<Vec<_>>(),
        "join_timeout_seconds": 120,
        "round_timeout_seconds": 120,
    });
    let mut body = body;
    if sparse {
        body["params"]["secure_aggregation"] = json!("sparse");
    }
    let (status, created) = support::post(&format!("{}/v1/studies", server.base), &key, body).await;
    assert_eq!(status, 201, "{created}");
    (server, key, created)
}

/// One study of `sites` sites and threshold `t` run through a relay doing `attack`: the sites'
/// exit codes (None: still running when the others had ended, then killed), what the relay
/// collected, and the logs.
async fn run(
    sites: u32,
    t: u32,
    attack: Attack,
    skip_confirm: bool,
) -> (BTreeMap<u32, Option<i32>>, Arc<Relay>, String) {
    let dir = tempfile::tempdir().unwrap();
    let clip = !matches!(attack, Attack::Iterate { clip_step: false, .. });
    let sparse = matches!(attack, Attack::GraphCut { .. });
    let (server, key, created) = study(dir.path(), sites, t, 2, clip, sparse).await;
    let relay = Arc::new(Relay {
        real: server.base.clone(),
        attack: attack.clone(),
        skip_confirm,
        sites,
        http: reqwest::Client::new(),
        books: Mutex::new(Books::default()),
    });
    let base = start_relay(relay.clone()).await;
    let mut logs_paths = Vec::new();
    let mut children = BTreeMap::new();
    for i in 0..sites as usize {
        let token = created["sites"][i]["token"].as_str().unwrap();
        let log = dir.path().join(format!("site-{}.log", i + 1));
        let child = spawn_site(
            &base,
            token,
            &shard(dir.path(), i),
            &dir.path().join(format!("ledger-{i}.db")),
            &log,
        );
        logs_paths.push(log);
        children.insert(i as u32 + 1, child);
    }
    // Every site but the victim ends (an attacked one refuses; an honest study finishes);
    // the victim of a split view waits for a task that never comes.
    let until = Instant::now() + Duration::from_secs(240);
    let mut codes = BTreeMap::new();
    while Instant::now() < until {
        for (&site, child) in &mut children {
            if let Some(status) = child.try_wait().unwrap() {
                codes.entry(site).or_insert(status.code());
            }
        }
        let others_done = (1..=sites)
            .filter(|s| Some(*s) != attack.victim())
            .all(|s| codes.contains_key(&s));
        if others_done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for (&site, child) in &mut children {
        if codes.contains_key(&site) {
            continue;
        }
        // Still running (waiting for a task that never comes): killed, recorded as None.
        let code = wait_exit(child, Duration::ZERO).and_then(|status| status.code());
        let _ = child.wait();
        codes.insert(site, code);
    }
    let text = logs(&logs_paths);
    if matches!(attack, Attack::Honest) {
        let (_, view) = support::get(
            &format!("{}/v1/studies/{}", server.base, created["id"].as_str().unwrap()),
            &key,
        )
        .await;
        assert_eq!(view["status"], "succeeded", "{view}\n{text}");
    }
    drop(server);
    (codes, relay, text)
}

/// The shares the relay collected, by whose secret they are: (self-mask shares, mask-key
/// shares) per site.
fn shares_of(relay: &Relay) -> (BTreeMap<u32, usize>, BTreeMap<u32, usize>) {
    let books = relay.books.lock().unwrap();
    let (mut own, mut keys) = (BTreeMap::new(), BTreeMap::new());
    for answer in books.answers.values() {
        for s in &answer.self_mask_shares {
            *own.entry(s.site).or_insert(0) += 1;
        }
        for s in &answer.mask_key_shares {
            *keys.entry(s.site).or_insert(0) += 1;
        }
    }
    (own, keys)
}

/// The victim's vector was never unmasked alone (never t self-mask shares of it), and every
/// site the relay asked to reveal refused with exit code 3 before sending any share.
fn assert_refused(
    sites: u32,
    t: u32,
    attack: &Attack,
    codes: &BTreeMap<u32, Option<i32>>,
    relay: &Relay,
    logs: &str,
) {
    let victim = attack.victim().unwrap();
    let (own, keys) = shares_of(relay);
    assert!(
        own.get(&victim).copied().unwrap_or(0) < t as usize,
        "the relay holds {:?} self-mask shares of the victim (t = {t}) and mask-key shares {keys:?}\n{logs}",
        own.get(&victim)
    );
    assert!(
        relay.books.lock().unwrap().answers.is_empty(),
        "no site may reveal any share of a round whose views differ\n{logs}"
    );
    let contributed: BTreeSet<u32> = relay
        .books
        .lock()
        .unwrap()
        .contributions
        .keys()
        .copied()
        .collect();
    assert_eq!(
        contributed.len(),
        sites as usize,
        "every site contributed: the attack was set up\n{logs}"
    );
    for site in (1..=sites).filter(|&s| s != victim) {
        assert_eq!(
            codes[&site],
            Some(3),
            "site {site} must refuse with exit code 3\n{logs}"
        );
    }
    assert!(logs.contains("refusing"), "{logs}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_views_of_a_round_never_unmask_one_site_five_sites() {
    for skip_confirm in [false, true] {
        let attack = Attack::SplitView {
            victim: 1,
            hidden: vec![2, 3],
        };
        let (codes, relay, logs) = run(5, 3, attack.clone(), skip_confirm).await;
        assert_refused(5, 3, &attack, &codes, &relay, &logs);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_views_of_a_round_never_unmask_one_site_ten_sites() {
    let attack = Attack::SplitView {
        victim: 1,
        hidden: vec![2, 3, 4, 5, 6],
    };
    let (codes, relay, logs) = run(10, 6, attack.clone(), false).await;
    assert_refused(10, 6, &attack, &codes, &relay, &logs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_site_sent_another_iterate_never_has_its_self_mask_removed() {
    for (skip_confirm, clip_step) in [(false, false), (true, false), (false, true), (true, true)] {
        let attack = Attack::Iterate { victim: 2, clip_step };
        let (codes, relay, logs) = run(5, 3, attack.clone(), skip_confirm).await;
        assert_refused(5, 3, &attack, &codes, &relay, &logs);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_honest_relay_lets_the_same_study_succeed() {
    let (codes, _, logs) = run(5, 3, Attack::Honest, false).await;
    assert!(codes.values().all(|c| *c == Some(0)), "{codes:?}\n{logs}");
}

/// A site restarted after it answered round 1's unmask request, and asked to unmask round 1
/// again with other survivor and dropped sets, refuses (exit 3) and sends nothing: the
/// transcript it confirmed and the answer it sent are kept in its ledger, not only in memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_site_refuses_to_unmask_a_round_again_with_other_sets() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _key, created) = study(dir.path(), 3, 2, 3, true, false).await;
    let relay = Arc::new(Relay {
        real: server.base.clone(),
        attack: Attack::Reask {
            site: 1,
            survivors: vec![1, 2],
            dropped: vec![3],
        },
        skip_confirm: false,
        sites: 3,
        http: reqwest::Client::new(),
        books: Mutex::new(Books::default()),
    });
    let base = start_relay(relay.clone()).await;
    let ledger = dir.path().join("ledger-0.db");
    let log = dir.path().join("site-1.log");
    let data = shard(dir.path(), 0);
    let token = created["sites"][0]["token"].as_str().unwrap();
    let mut first = spawn_site(&base, token, &data, &ledger, &log);
    let mut others: Vec<Child> = (1..3)
        .map(|i| {
            let token = created["sites"][i]["token"].as_str().unwrap();
            let log = dir.path().join(format!("site-{}.log", i + 1));
            spawn_site(
                &base,
                token,
                &shard(dir.path(), i),
                &dir.path().join(format!("ledger-{i}.db")),
                &log,
            )
        })
        .collect();
    let until = Instant::now() + Duration::from_secs(240);
    while !relay.books.lock().unwrap().forwarded_answers.contains(&1) {
        assert!(
            Instant::now() < until,
            "site 1 never answered round 1\n{}",
            logs(std::slice::from_ref(&log))
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Killed once its answer went out, then started again with the same command line.
    first.kill().unwrap();
    first.wait().unwrap();
    relay.books.lock().unwrap().reask = true;
    let restarted_log = dir.path().join("site-1-restarted.log");
    let mut restarted = spawn_site(&base, token, &data, &ledger, &restarted_log);
    let status = wait_exit(&mut restarted, Duration::from_secs(120));
    let text = logs(&[log, restarted_log]);
    assert_eq!(status.and_then(|s| s.code()), Some(3), "{text}");
    assert!(text.contains("refusing"), "{text}");
    assert_eq!(
        relay
            .books
            .lock()
            .unwrap()
            .forwarded_answers
            .iter()
            .filter(|&&s| s == 1)
            .count(),
        1,
        "the restarted site sent no second answer\n{text}"
    );
    for child in &mut others {
        let _ = child.kill();
        let _ = child.wait();
    }
    drop(server);
}

/// SecAgg+: a relay that shows every site round 1 with more sites dropped than the study's
/// dropout rate allows (⌈0.1·10⌉ = 1 here) is refused by every site before it reveals anything:
/// chosen after the public graph is known, such a dropped set could cut the honest survivors
/// apart (docs/design/federation.md, "Live SecAgg+").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secagg_plus_sites_refuse_more_dropped_sites_than_the_dropout_rate_allows() {
    let attack = Attack::GraphCut { dropped: vec![2, 3] };
    let (codes, relay, logs) = run(10, 6, attack, false).await;
    assert!(
        relay.books.lock().unwrap().answers.is_empty(),
        "no share may be revealed\n{logs}"
    );
    assert_eq!(relay.books.lock().unwrap().contributions.len(), 10, "{logs}");
    assert!(codes.values().all(|c| *c == Some(3)), "{codes:?}\n{logs}");
    assert!(logs.contains("dropout rate"), "{logs}");
}

/// SecAgg+: the victim's key-exchange task carries another site's reveal altered (it would
/// derive another graph than its peers), or a roster with a peer's key swapped: it refuses with
/// exit code 3 before it deals any share box. (Its peers go on without it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secagg_plus_a_site_shown_another_reveal_or_roster_deals_nothing() {
    for (roster, expected) in [
        (false, "refusing the graph seed"),
        (true, "sent a roster with the SecAgg+ key exchange"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (server, _key, created) = study(dir.path(), 10, 6, 2, true, true).await;
        let relay = Arc::new(Relay {
            real: server.base.clone(),
            attack: Attack::AlterKeyExchange { victim: 4, roster },
            skip_confirm: false,
            sites: 10,
            http: reqwest::Client::new(),
            books: Mutex::new(Books::default()),
        });
        let base = start_relay(relay.clone()).await;
        let mut children = Vec::new();
        let mut paths = Vec::new();
        for i in 0..10 {
            let token = created["sites"][i]["token"].as_str().unwrap();
            let log = dir.path().join(format!("site-{}.log", i + 1));
            let ledger = dir.path().join(format!("ledger-{i}.db"));
            children.push(spawn_site(&base, token, &shard(dir.path(), i), &ledger, &log));
            paths.push(log);
        }
        let code = wait_exit(&mut children[3], Duration::from_secs(120)).and_then(|s| s.code());
        for child in &mut children {
            let _ = child.kill();
            let _ = child.wait();
        }
        let text = logs(&paths);
        assert_eq!(code, Some(3), "the victim refuses\n{text}");
        assert!(text.contains(expected), "{text}");
        assert!(
            !relay.books.lock().unwrap().dealt.contains(&4),
            "the victim dealt boxes\n{text}"
        );
        drop(server);
    }
}
