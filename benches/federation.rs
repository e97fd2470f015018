//! Secure aggregation against a plain sum on loopback (docs/performance-federation.md):
//! `cargo bench --bench federation`. S = 10 sites, d = 1000, k = 10 (p = 20), L = 10 rounds,
//! 2000 clipped rows per site (`PRIVPCA_BENCH_ROWS`); every mode runs `PRIVPCA_BENCH_REPS` = 3
//! times, interleaved, and the table pools the rounds of all repetitions.
//!
//! - secure: the real service in-process (`privpca::app` under `axum::serve` on 127.0.0.1) and ten
//!   site tasks, each with its own `reqwest::Client`, speaking `/v1/site/*` with `SiteSession`,
//!   `SiteComputation` and `wire` as tests/api/studies.rs's `TestSite` does;
//! - plain: the same sites, shards, seeds and `SiteComputation::contribution`, posting the
//!   *unmasked* encoding (same base64 JSON) to a minimal axum server that adds it into a wrapping
//!   sum and, once all ten arrived, publishes the next iterate (`PowerState::absorb`: fixed-point
//!   decode and `thin_qr_q`, as the coordinator does);
//! - both again with each site's encoding computed in round 1 and reused ("protocol only"): what
//!   is left is the cost of the protocol itself;
//! - CPU only: `SiteSession::mask`, `Aggregator::unmask_sum`, one site's contribution alone.
//!
//! A round's wall time runs from the first site receiving round r's iterate to the first site
//! receiving round r+1's (or the end of the study). Bytes are HTTP body bytes; a site's bytes
//! per round are everything after its round-1 task arrived (that task included) divided by L.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use privpca::federation::messages::{ContributionRequest, Participant, ShareBox, SiteStudyView, SiteTask};
use privpca::federation::secagg::{Aggregator, SiteSession};
use privpca::federation::transcript::{self, RoundView};
use privpca::federation::wire;
use privpca::linalg::Matrix;
use privpca::protocols::power::state::{PowerState, SiteComputation};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rand_distr::{Distribution, StandardNormal};
use reqwest::RequestBuilder;
use reqwest::header::CONTENT_TYPE;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{Mutex, watch};

const SITES: usize = 10;
const D: usize = 1000;
const K: usize = 10;
const ROUNDS: u32 = 10;
const THRESHOLD: u32 = 7;

/// Body bytes up, body bytes down, requests.
type Traffic = [usize; 3];

/// One site: its HTTP client, data and computation, and what it measured.
struct Site {
    http: reqwest::Client,
    base: String,
    token: String,
    xt: Arc<Matrix>,
    comp: Option<SiteComputation>,
    rng: ChaCha20Rng,
    /// Protocol-only mode: the round-1 encoding is reused in every later round.
    reuse: bool,
    cached: Option<Vec<u64>>,
    /// All traffic, and the part before round 1's task arrived (study, join, key exchange).
    traffic: Traffic,
    setup: Traffic,
    /// When each round's task, then the final one, reached this site.
    seen: Vec<Instant>,
    /// When each round's unmask task reached this site (secure only).
    unmasks: Vec<Instant>,
    /// When each round's confirm task arrived (secure).
    confirms: Vec<Instant>,
    compute: Vec<Duration>,
    mask: Vec<Duration>,
}

impl Site {
    /// POSTs `body` (JSON), or GETs when there is none; counts the body bytes.
    async fn call(&mut self, path: &str, body: Option<String>) -> Result<Vec<u8>> {
        let url = format!("{}{path}", self.base);
        let up = body.as_ref().map_or(0, String::len);
        let request = match body {
            Some(body) => self
                .http
                .post(url)
                .header(CONTENT_TYPE, "application/json")
                .body(body),
            None => self.http.get(url),
        };
        let response = request.bearer_auth(&self.token).send().await?;
        let status = response.status();
        let bytes = response.bytes().await?.to_vec();
        let text = String::from_utf8_lossy(&bytes);
        ensure!(status.is_success(), "{path}: {status} {text}");
        for (total, n) in self.traffic.iter_mut().zip([up, bytes.len(), 1]) {
            *total += n;
        }
        Ok(bytes)
    }

    /// This round's release A_s·X + noise, fixed-point encoded (or the cached one), timed. Runs
    /// under `block_in_place`, so that the runtime's other worker keeps serving meanwhile.
    fn encode(&mut self, iterate: &str) -> Result<Vec<u64>> {
        let start = Instant::now();
        let comp = self.comp.as_ref().context("no study view yet")?;
        // The bench's studies run no clip: every round is a power round.
        let (rows, cols) = comp.shape_of(1);
        let x = Matrix::from_column_slice(rows, cols, &wire::b64_to_f64s(iterate, rows * cols)?);
        let encoded = match self.cached.clone() {
            Some(cached) => cached,
            None => tokio::task::block_in_place(|| comp.contribution(&self.xt, &x, None, &mut self.rng))
                .map_err(anyhow::Error::msg)?,
        };
        if self.reuse {
            self.cached = Some(encoded.clone());
        }
        self.compute.push(start.elapsed());
        Ok(encoded)
    }
}

fn contribution(words: &[u64], signature: &str) -> Option<String> {
    Some(json!({ "masked": wire::words_to_b64(words), "signature": signature }).to_string())
}

/// Checks the relayed signatures of `statement`, as `privpca site` does before it confirms (all
/// of the survivors' contributions) or reveals (a quorum of confirmations): the count that
/// verifies, up to `enough` (`transcript::count_verified`).
fn verified(
    keys: &BTreeMap<u32, ed25519_dalek::VerifyingKey>,
    signatures: &[privpca::federation::messages::SiteSignature],
    statement: &[u8],
    enough: usize,
) -> usize {
    let signed = signatures.iter().map(|s| (s.site, s.signature.as_str()));
    transcript::count_verified(keys, statement, signed, enough)
}

/// One site of the real protocol, from reading its study to `finished`.
async fn secure_site(mut site: Site) -> Result<Site> {
    let view: SiteStudyView = serde_json::from_slice(&site.call("/v1/site/study", None).await?)?;
    let comp = SiteComputation::from_view(&view).map_err(anyhow::Error::msg)?;
    let n = site.xt.ncols();
    comp.check_data(n, site.xt.nrows()).map_err(anyhow::Error::msg)?;
    site.comp = Some(comp);
    let mut rng = ChaCha20Rng::seed_from_u64(1000 + u64::from(view.site_index));
    let mut session = SiteSession::new(view.study_id, view.site_index, ROUNDS, &mut rng);
    let signer = transcript::SiteSigner::from_seed([view.site_index as u8; 32]);
    let mut keys = BTreeMap::new();
    let mut signed = BTreeMap::<u32, ([u8; 32], Vec<u32>)>::new();
    let join = json!({
        "n_samples": n,
        "encryption_public_key": session.encryption_public_key(),
        "mask_public_keys": session.mask_public_keys(),
        "signing_public_key": signer.public_key(),
    });
    site.call("/v1/site/join", Some(join.to_string())).await?;
    loop {
        let before = site.traffic;
        let task = site.call("/v1/site/task?wait_ms=20000", None).await?;
        match serde_json::from_slice::<SiteTask>(&task)? {
            SiteTask::Wait { .. } => {}
            SiteTask::ShareKeys { participants, .. } => {
                for p in &participants {
                    keys.insert(p.index, transcript::verifying_key(&p.signing_public_key)?);
                }
                let boxes = session.share_boxes(&participants, view.threshold, &mut rng)?;
                let body = json!({ "boxes": boxes }).to_string();
                site.call("/v1/site/shares", Some(body)).await?;
            }
            SiteTask::Contribute {
                round,
                roster,
                iterate,
                inbox,
                rows,
                cols,
                ..
            } => {
                site.seen.push(Instant::now());
                if round == 1 {
                    site.setup = before;
                    session.receive_inbox(&inbox)?;
                }
                let encoded = site.encode(&iterate)?;
                let start = Instant::now();
                let masked = session.mask(round, &roster, &encoded)?;
                let (signature, hash) =
                    signer.sign_contribution(view.study_id, round, (rows, cols), &iterate, &roster)?;
                site.mask.push(start.elapsed());
                signed.insert(round, (hash, roster));
                let path = format!("/v1/site/rounds/{round}/contribution");
                site.call(&path, contribution(&masked, &signature)).await?;
            }
            SiteTask::Confirm {
                round,
                survivors,
                dropped,
                contributions,
            } => {
                site.confirms.push(Instant::now());
                let (hash, roster) = &signed[&round];
                let view = RoundView {
                    study: view.study_id,
                    round,
                    iterate: hash,
                    roster,
                };
                let statement = transcript::contribution_message(&view);
                ensure!(verified(&keys, &contributions, &statement, survivors.len()) == survivors.len());
                let signature = signer.sign(&transcript::confirmation_message(&view, &survivors, &dropped));
                let path = format!("/v1/site/rounds/{round}/confirm");
                site.call(&path, Some(json!({ "signature": signature }).to_string()))
                    .await?;
            }
            SiteTask::Unmask {
                round,
                survivors,
                dropped,
                confirmations,
                ..
            } => {
                site.unmasks.push(Instant::now());
                let (hash, roster) = &signed[&round];
                let round_view = RoundView {
                    study: view.study_id,
                    round,
                    iterate: hash,
                    roster,
                };
                let statement = transcript::confirmation_message(&round_view, &survivors, &dropped);
                let quorum = transcript::quorum(keys.len() as u32, 0) as usize;
                ensure!(verified(&keys, &confirmations, &statement, quorum) >= quorum);
                let mut roster: Vec<u32> = survivors.iter().chain(&dropped).copied().collect();
                roster.sort_unstable();
                let t = view.threshold;
                let answer = session.unmask_response(round, &roster, &survivors, &dropped, t)?;
                let path = format!("/v1/site/rounds/{round}/unmask");
                site.call(&path, Some(serde_json::to_string(&answer)?)).await?;
            }
            SiteTask::Finished { status, reason } => {
                site.seen.push(Instant::now());
                ensure!(
                    status == privpca::store::StudyStatus::Succeeded,
                    "study {}: {reason:?}",
                    status.as_str()
                );
                return Ok(site);
            }
            SiteTask::CapeRelease { .. } | SiteTask::GossipStep { .. } | SiteTask::GossipConfirm { .. } => {
                bail!("a task of another protocol in a federated_power study")
            }
            SiteTask::RevealSeed { .. } => bail!("this bench runs the complete graph, not SecAgg+"),
        }
    }
}

/// One site of the plain protocol: fetch the iterate, compute, post the unmasked encoding.
async fn plain_site(mut site: Site, index: u32) -> Result<Site> {
    for round in 1.. {
        let path = format!("/plain/task?site={index}&round={round}");
        let task: Value = serde_json::from_slice(&site.call(&path, None).await?)?;
        site.seen.push(Instant::now());
        let Some(iterate) = task["iterate"].as_str() else {
            break;
        };
        let encoded = site.encode(iterate)?;
        let path = format!("/plain/rounds/{round}/contribution?site={index}");
        site.call(&path, contribution(&encoded, "")).await?;
    }
    Ok(site)
}

/// The plain coordinator's state.
struct Plain {
    /// The open round (L + 1 once done) and its public iterate.
    round: u32,
    iterate: String,
    /// The running wrapping sum and who has added to it this round.
    sum: Vec<u64>,
    arrived: BTreeSet<u32>,
    power: PowerState,
}

type PlainHub = Arc<(Mutex<Plain>, watch::Sender<u64>)>;

#[derive(Deserialize)]
struct PlainQuery {
    site: u32,
    #[serde(default)]
    round: u32,
}

/// Long-poll: answers once round `round` is open, with its iterate (none after the last round).
async fn plain_task(State(hub): State<PlainHub>, Query(q): Query<PlainQuery>) -> Json<Value> {
    let mut changes = hub.1.subscribe();
    loop {
        {
            let state = hub.0.lock().await;
            if state.round >= q.round {
                let iterate = (q.round <= ROUNDS).then(|| state.iterate.clone());
                let (rows, cols) = (D, 2 * K);
                return Json(json!({"round": q.round, "iterate": iterate, "rows": rows, "cols": cols}));
            }
        }
        let _ = changes.changed().await;
    }
}

/// Adds an unmasked encoding into the sum; the round's last one computes the next iterate.
async fn plain_contribution(
    State(hub): State<PlainHub>,
    Path(round): Path<u32>,
    Query(q): Query<PlainQuery>,
    Json(body): Json<ContributionRequest>,
) -> StatusCode {
    let mut state = hub.0.lock().await;
    if round != state.round || !state.arrived.insert(q.site) {
        return StatusCode::CONFLICT;
    }
    let Ok(words) = wire::b64_to_words(&body.masked, state.sum.len()) else {
        return StatusCode::UNPROCESSABLE_ENTITY;
    };
    for (acc, w) in state.sum.iter_mut().zip(words) {
        *acc = acc.wrapping_add(w);
    }
    if state.arrived.len() == SITES {
        let sum = std::mem::replace(&mut state.sum, vec![0; D * 2 * K]);
        if state.power.absorb(&sum, None).is_err() {
            return StatusCode::INTERNAL_SERVER_ERROR;
        }
        state.iterate = wire::f64s_to_b64(state.power.iterate().as_slice());
        state.arrived.clear();
        state.round += 1;
        drop(state);
        hub.1.send_modify(|v| *v += 1);
    }
    StatusCode::NO_CONTENT
}

async fn serve(router: Router) -> Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(base)
}

/// An admin or tenant call to the real service, answered with JSON.
async fn api(request: RequestBuilder, key: &str) -> Result<Value> {
    let response = request.bearer_auth(key).send().await?;
    let status = response.status();
    let value: Value = response.json().await?;
    ensure!(status.is_success(), "{status}: {value}");
    Ok(value)
}

/// What one run measured.
struct Run {
    label: String,
    setup: Duration,
    rounds: Vec<Duration>,
    /// Secure: from a round's iterate to its first unmask task (the rest is the unmask phase).
    collect: Vec<Duration>,
    /// Secure: from a round's iterate to its first confirm task.
    confirm: Vec<Duration>,
    sites: Vec<Site>,
}

/// Runs ten sites against `base` at once: secure when `comp` is `None` (each site reads its
/// study), plain otherwise.
async fn run(
    base: &str,
    tokens: &[String],
    shards: &[Arc<Matrix>],
    comp: Option<&SiteComputation>,
    reuse: bool,
) -> Result<Run> {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (i, (token, xt)) in tokens.iter().zip(shards).enumerate() {
        let site = Site {
            http: reqwest::Client::new(),
            base: base.to_string(),
            token: token.clone(),
            xt: xt.clone(),
            comp: comp.cloned(),
            rng: ChaCha20Rng::seed_from_u64(i as u64),
            reuse,
            cached: None,
            traffic: [0; 3],
            setup: [0; 3],
            seen: Vec::new(),
            unmasks: Vec::new(),
            confirms: Vec::new(),
            compute: Vec::new(),
            mask: Vec::new(),
        };
        tasks.push(match comp {
            None => tokio::spawn(secure_site(site)),
            Some(_) => tokio::spawn(plain_site(site, i as u32 + 1)),
        });
    }
    let mut sites = Vec::new();
    for task in tasks {
        sites.push(task.await??);
    }
    // The first arrival of each round's tasks, over the sites.
    let first =
        |r: usize, f: fn(&Site) -> &Vec<Instant>| sites.iter().filter_map(|s| f(s).get(r)).min().copied();
    let firsts: Option<Vec<Instant>> = (0..=ROUNDS as usize).map(|r| first(r, |s| &s.seen)).collect();
    let firsts = firsts.context("a site missed a round")?;
    let rounds = firsts.windows(2).map(|w| w[1] - w[0]).collect();
    let collect = (0..ROUNDS as usize).filter_map(|r| Some(first(r, |s| &s.unmasks)? - firsts[r]));
    let confirm = (0..ROUNDS as usize).filter_map(|r| Some(first(r, |s| &s.confirms)? - firsts[r]));
    let mode = if comp.is_some() { "plain" } else { "secure" };
    let label = format!("{mode}{}", if reuse { ", protocol only" } else { "" });
    Ok(Run {
        label,
        setup: firsts[0] - start,
        rounds,
        collect: collect.collect(),
        confirm: confirm.collect(),
        sites,
    })
}

/// A study on the real service; returns the run and the computation the study fixed.
async fn secure_run(
    base: &str,
    key: &str,
    shards: &[Arc<Matrix>],
    reuse: bool,
) -> Result<(Run, SiteComputation)> {
    let http = reqwest::Client::new();
    let body = json!({
        "name": "bench", "algorithm": "federated_power", "n_features": D, "relation": "replace_one",
        "row_norm_bound": 1.0, "params": {"k": K, "iterations": ROUNDS, "clip": "none"}, "privacy": {"rho": 1.0},
        "threshold": THRESHOLD, "round_timeout_seconds": 60,
        "sites": (0..SITES).map(|i| json!({"name": format!("site-{i}")})).collect::<Vec<_>>(),
    });
    let created = api(http.post(format!("{base}/v1/studies")).json(&body), key).await?;
    let sites = created["sites"].as_array().context("sites")?;
    let tokens: Vec<String> = sites
        .iter()
        .filter_map(|s| Some(s["token"].as_str()?.into()))
        .collect();
    let run = run(base, &tokens, shards, None, reuse).await?;
    let id = created["id"].as_str().context("study id")?;
    let study = api(http.get(format!("{base}/v1/studies/{id}")), key).await?;
    let done = study["status"] == "succeeded" && study["progress"]["done"] == ROUNDS;
    ensure!(done, "{study}");
    let comp = run.sites[0].comp.clone().context("no computation")?;
    Ok((run, comp))
}

/// The same sites (same shards, seeds and computation) against the minimal plain server.
async fn plain_run(comp: &SiteComputation, shards: &[Arc<Matrix>], reuse: bool) -> Result<Run> {
    let power = PowerState::new(
        comp.config().clone(),
        D,
        None,
        &mut ChaCha20Rng::seed_from_u64(99),
    )?;
    let iterate = wire::f64s_to_b64(power.iterate().as_slice());
    let (sum, arrived) = (vec![0; power.len()], BTreeSet::new());
    let state = Plain {
        round: 1,
        iterate,
        sum,
        arrived,
        power,
    };
    let hub: PlainHub = Arc::new((Mutex::new(state), watch::channel(0).0));
    let router = Router::new()
        .route("/plain/task", get(plain_task))
        .route("/plain/rounds/{round}/contribution", post(plain_contribution))
        .layer(axum::extract::DefaultBodyLimit::max(1 << 20))
        .with_state(hub);
    let base = serve(router).await?;
    run(
        &base,
        &vec!["plain".to_string(); SITES],
        shards,
        Some(comp),
        reuse,
    )
    .await
}

/// CPU only, one thread, no HTTP: masking and unmasking for ten sessions over 20 rounds (in rounds
/// 11–20 site 10's vector is missing: one dropout to recover), and one site's contribution alone.
fn micro(comp: &SiteComputation, xt: &Matrix) -> Result<()> {
    const MICRO_ROUNDS: u32 = 20;
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let study = uuid::Uuid::new_v4();
    let (mut sessions, mut participants) = (Vec::new(), Vec::new());
    for index in 1..=SITES as u32 {
        let s = SiteSession::new(study, index, MICRO_ROUNDS, &mut rng);
        let (encryption_public_key, name) = (s.encryption_public_key(), format!("site-{index}"));
        let mask_public_keys = s.mask_public_keys();
        participants.push(Participant {
            index,
            name,
            encryption_public_key,
            mask_public_keys,
            signing_public_key: String::new(),
            seed_commitment: String::new(),
        });
        sessions.push(s);
    }
    let mut inboxes = BTreeMap::<u32, Vec<ShareBox>>::new();
    for s in &mut sessions {
        for b in s.share_boxes(&participants, THRESHOLD, &mut rng)? {
            inboxes.entry(b.to).or_default().push(b);
        }
    }
    for s in &mut sessions {
        s.receive_inbox(&inboxes[&s.index()])?;
    }
    let aggregator = Aggregator::new(study, THRESHOLD, &participants, MICRO_ROUNDS)?;
    let roster: Vec<u32> = (1..=SITES as u32).collect();
    let encoded: Vec<u64> = (0..D * 2 * K).map(|_| rng.next_u64() >> 20).collect();
    // Mask per site, unmask without and with a dropout, contribution.
    let mut times: [Vec<Duration>; 7] = Default::default();
    for round in 1..=MICRO_ROUNDS {
        let dropped: &[u32] = if round > MICRO_ROUNDS / 2 {
            &[SITES as u32]
        } else {
            &[]
        };
        let mut masked = BTreeMap::new();
        for s in &mut sessions {
            let start = Instant::now();
            let z = s.mask(round, &roster, &encoded)?;
            times[0].push(start.elapsed());
            if !dropped.contains(&s.index()) {
                masked.insert(s.index(), z);
            }
        }
        let survivors: Vec<u32> = masked.keys().copied().collect();
        let mut responses = BTreeMap::new();
        for s in sessions.iter_mut().filter(|s| survivors.contains(&s.index())) {
            let answer = s.unmask_response(round, &roster, &survivors, dropped, THRESHOLD)?;
            responses.insert(s.index(), answer);
        }
        let start = Instant::now();
        let sum = aggregator.unmask_sum(round, &roster, &masked, &responses)?;
        times[1 + dropped.len()].push(start.elapsed());
        let n = survivors.len() as u64;
        ensure!(
            sum.iter().zip(&encoded).all(|(s, e)| *s == e.wrapping_mul(n)),
            "wrong sum"
        );
    }
    // A site's signature checks in one round: the survivors' ten contribution signatures one
    // by one (before batching) and batched, and a quorum of confirmations batched.
    let signers: Vec<transcript::SiteSigner> = (1..=SITES as u8)
        .map(|i| transcript::SiteSigner::from_seed([i; 32]))
        .collect();
    let keys: BTreeMap<u32, ed25519_dalek::VerifyingKey> = signers
        .iter()
        .zip(1..)
        .map(|(s, i)| Ok((i, transcript::verifying_key(&s.public_key())?)))
        .collect::<Result<_>>()?;
    let statement = b"privpca bench statement".to_vec();
    let signed: Vec<(u32, String)> = signers
        .iter()
        .zip(1..)
        .map(|(s, i)| (i, s.sign(&statement)))
        .collect();
    let quorum = transcript::quorum(SITES as u32, 0) as usize;
    for _ in 0..MICRO_ROUNDS {
        let start = Instant::now();
        let one_by_one = signed
            .iter()
            .filter(|(i, sig)| transcript::verify(&keys[i], *i, &statement, sig).is_ok())
            .count();
        times[4].push(start.elapsed());
        let start = Instant::now();
        let batched = transcript::count_verified(
            &keys,
            &statement,
            signed.iter().map(|(i, s)| (*i, s.as_str())),
            SITES,
        );
        times[5].push(start.elapsed());
        let start = Instant::now();
        let enough = transcript::count_verified(
            &keys,
            &statement,
            signed.iter().map(|(i, s)| (*i, s.as_str())),
            quorum,
        );
        times[6].push(start.elapsed());
        ensure!(
            one_by_one == SITES && batched == SITES && enough == quorum,
            "a signature did not verify"
        );
    }
    let iterate = Matrix::from_fn(D, 2 * K, |i, j| if i == j { 1.0 } else { 0.0 });
    for _ in 0..5 {
        let start = Instant::now();
        comp.contribution(xt, &iterate, None, &mut rng)
            .map_err(anyhow::Error::msg)?;
        times[3].push(start.elapsed());
    }
    println!("\nCPU only (no HTTP), median [min]:");
    let labels = [
        "mask, per site per round (1 self + 9 pair PRGs)",
        "unmask_sum, per round, no dropout",
        "unmask_sum, per round, one dropout",
        "contribution (A_s·X + noise + encode), one site alone",
        "10 signatures checked one by one (verify_strict)",
        "10 signatures checked as one batch (count_verified)",
        "a quorum (6) of 10 signatures, batched",
    ];
    for (what, v) in labels.iter().zip(&times) {
        let min = v.iter().min().copied().unwrap_or_default();
        println!("  {what:<54} {:>8.3} ms [{:.3}]", ms(median(v)), ms(min));
    }
    Ok(())
}

fn median(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    match v.len() {
        0 => Duration::ZERO,
        n => (v[(n - 1) / 2] + v[n / 2]) / 2,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One line per mode over every repetition: medians of the round times, setups and per-site CPU
/// times; bytes and requests per site per round.
fn report(runs: &[Run]) {
    let head = "setup ms round med  min ms  max ms up kB/rnd dn kB/rnd req/rnd compute ms mask ms setup kB";
    println!("\n{:<22}{head}", "mode");
    let mut medians = Vec::new();
    for mode in ["secure", "plain", "secure, protocol only", "plain, protocol only"] {
        let runs: Vec<&Run> = runs.iter().filter(|r| r.label == mode).collect();
        let sites: Vec<&Site> = runs.iter().flat_map(|r| &r.sites).collect();
        let rounds: Vec<Duration> = runs.iter().flat_map(|r| r.rounds.clone()).collect();
        let setups: Vec<Duration> = runs.iter().map(|r| r.setup).collect();
        let all =
            |f: fn(&Site) -> &Vec<Duration>| sites.iter().flat_map(|s| f(s).clone()).collect::<Vec<_>>();
        let n = sites.len() as f64;
        // Per site per round: (all − setup) / L, averaged over sites.
        let per_round = |i: usize| {
            sites.iter().map(|s| s.traffic[i] - s.setup[i]).sum::<usize>() as f64 / n / f64::from(ROUNDS)
        };
        let setup_bytes = sites.iter().map(|s| s.setup[0] + s.setup[1]).sum::<usize>() as f64 / n;
        let cells = [
            ms(median(&setups)),
            ms(median(&rounds)),
            ms(rounds.iter().min().copied().unwrap_or_default()),
            ms(rounds.iter().max().copied().unwrap_or_default()),
            per_round(0) / 1e3,
            per_round(1) / 1e3,
            per_round(2),
            ms(median(&all(|s| &s.compute))),
            ms(median(&all(|s| &s.mask))),
            setup_bytes / 1e3,
        ];
        println!("{mode:<22}{}", cells.map(|c| format!("{c:>9.2}")).concat());
        medians.push(ms(median(&rounds)));
        let collect: Vec<Duration> = runs.iter().flat_map(|r| r.collect.clone()).collect();
        if !collect.is_empty() {
            let unmask: Vec<Duration> = rounds.iter().zip(&collect).map(|(r, c)| *r - *c).collect();
            let (c, u) = (ms(median(&collect)), ms(median(&unmask)));
            let confirm: Vec<Duration> = runs.iter().flat_map(|r| r.confirm.clone()).collect();
            let k = ms(median(&confirm));
            println!(
                "  phases: iterate → first confirm task {k:.1} ms, → first unmask task {c:.1} ms, → next iterate {u:.1} ms (medians)"
            );
        }
    }
    // Runs come in (secure, plain) pairs: full, protocol only, full, protocol only, ...
    for (offset, what) in [(0, "full"), (1, "protocol only")] {
        let ratio = |pair: &[Run]| ms(median(&pair[0].rounds)) / ms(median(&pair[1].rounds));
        let pairs = runs.chunks(2).skip(offset).step_by(2);
        let per_rep: Vec<String> = pairs.map(|pair| format!("{:.2}", ratio(pair))).collect();
        let (s, p) = (medians[2 * offset], medians[2 * offset + 1]);
        let (ratio, extra, per_rep) = (s / p, s - p, per_rep.join(" "));
        println!("secure / plain, {what}: {ratio:.2}x ({extra:+.1} ms per round); per repetition: {per_rep}");
    }
}

/// A site's shard: `n` rows (the columns of a d×n matrix) with a planted k-dimensional signal,
/// clipped to norm 1.
fn shard(n: usize, seed: u64) -> Arc<Matrix> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut xt = Matrix::from_fn(D, n, |i, _| {
        let z: f64 = StandardNormal.sample(&mut rng);
        z * if i < K { 0.2 } else { 0.02 }
    });
    for mut row in xt.column_iter_mut() {
        let norm = row.norm().max(1.0);
        row /= norm;
    }
    Arc::new(xt)
}

/// A positive integer from the environment, or `default`.
fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main]
async fn main() -> Result<()> {
    let (rows, reps) = (env("PRIVPCA_BENCH_ROWS", 2000), env("PRIVPCA_BENCH_REPS", 3));
    let dir = tempfile::tempdir()?;
    let mut config = privpca::config::Config::for_tests(dir.path());
    config.max_d = 10_000;
    let base = serve(privpca::app(privpca::serve::prepare(config).await?)).await?;
    let request = reqwest::Client::new().post(format!("{base}/v1/tenants"));
    let tenant = api(request.json(&json!({"name": "bench"})), "test-admin-key").await?;
    let key = tenant["api_key"].as_str().context("api key")?.to_string();
    let shards: Vec<Arc<Matrix>> = (0..SITES).map(|i| shard(rows, 10 + i as u64)).collect();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "S = {SITES}, d = {D}, p = {}, L = {ROUNDS}, t = {THRESHOLD}, {rows} rows/site, {cores} cores",
        2 * K
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "load average before: {}",
        load.split(' ').take(3).collect::<Vec<_>>().join(" ")
    );
    let (mut runs, mut comp) = (Vec::new(), None);
    for _ in 0..reps {
        for reuse in [false, true] {
            let (secure, c) = secure_run(&base, &key, &shards, reuse).await?;
            runs.push(secure);
            runs.push(plain_run(comp.get_or_insert(c), &shards, reuse).await?);
        }
    }
    report(&runs);
    // One idle request, sequentially: no auth at all, then a site-token lookup (two SQLite reads).
    let site = &mut runs[0].sites[0];
    for path in ["/healthz", "/v1/site/study"] {
        let start = Instant::now();
        for _ in 0..200 {
            site.call(path, None).await?;
        }
        println!("idle GET {path}: {:.3} ms", ms(start.elapsed() / 200));
    }
    micro(comp.as_ref().context("no computation")?, &shards[0])
}
