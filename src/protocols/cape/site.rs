//! The site's side of a CAPE study (docs/design/cape.md): join with one fresh X25519 pair-noise
//! key per stage, wait for the roster, derive the stage's noise *itself* from public facts it
//! checks (its own Δ, the share of the ρ its ledger is charged, the roster size, κ; grid,
//! widening and integer variances follow), refuse when the coordinator's noise differs, charge
//! the local ledger (once, before the first release), and send each stage's noisy statistic
//! â_s = a_s + E_s + F_s + G_s drawn with its own values: `cape_pca` the packed Gram matrix;
//! `cape_agn` the packed second moment, then the lattice release of the D-dimensional third
//! moment projected by the coordinator's whitening W (Alg. 3 steps 10–11). Asked again for the
//! same stage (an answer was lost), the same vector is sent again, never a fresh draw. Whether
//! the site takes part never depends on its n when n is private (add_remove).
//!
//! Restarts (docs/design/federation.md, "Durable studies"): the pair-noise keys derive from the
//! session seed the ledger keeps ([`crate::site::ledger::start_session`]), and every release is kept
//! in the ledger (kind `contribution`, round = stage, with the roster it was drawn for) before
//! it is sent. A site restarted with the same command line has the same keys, skips the join,
//! and sends a kept release again when asked for that stage: the same bytes, never a fresh draw.

use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};

use crate::algorithms::RunEnv;
use crate::algorithms::analyze_gauss::sensitivity;
use crate::algorithms::cape_agn::{self, CapeAgnConfig, Model};
use crate::algorithms::cape_center::CapeCenter;
use crate::algorithms::cape_clip::{CapeClip, count_sensitivity, gram_sensitivity_at};
use crate::algorithms::cape_noise::{self as cape, CapeNoise, StageTerms};
use crate::algorithms::cape_pca::{CapePcaConfig, site_statistic};
use crate::algorithms::centering::recentre;
use crate::algorithms::clipping::{clip_rows, score};
use crate::algorithms::study_center::check_center;
use crate::algorithms::tensor_power;
use crate::dataset::{Neighbours, Relation};
use crate::federation::crypto::{self, KeyPair, Seed};
use crate::federation::messages::{
    CapePeer, CapeReleaseRequest, ConfirmRequest, SiteSignature, SiteStudyView, SiteTask,
};
use crate::federation::transcript::{self, SiteSigner};
use crate::federation::wire;
use crate::linalg::{Matrix, Vector};
use crate::protocols::SiteRun;
use crate::protocols::power::state::study_neighbours;
use crate::site::ledger::{charge_ledger, keep, ledger_failure, parse_kept, signer_of, start_session};
use crate::site::prepare::{JoinKeys, join};
use crate::site::roster::{Member, RosterGuard, describe};
use crate::site::run::{finished, next_task, note_wait, resend};
use crate::site::witness::StudyWitness;
use crate::site::{Failure, progress};
use crate::store::{SiteMessageKind, SiteStatus};

use super::consistency::StageTranscript;
use super::coordinator::{check_stage_shares, stage_share};

/// A stage's release as kept in the ledger: the roster it was drawn for and what was sent.
#[derive(Serialize, Deserialize)]
struct KeptRelease {
    peers: Vec<CapePeer>,
    request: CapeReleaseRequest,
}

/// Checks a stage's roster (the peers and this site) against the first one this site saw.
fn observe_roster(
    roster: &mut RosterGuard,
    view: &SiteStudyView,
    peers: &[CapePeer],
    me: &Member,
    stage: u32,
) -> Result<(), Failure> {
    let mut members: Vec<Member> = peers.iter().map(Member::from_cape_peer).collect();
    members.push(me.clone());
    if let Some(hash) = roster
        .observe(view, &members, me)
        .map_err(|e| violation(format!("refusing stage {stage}'s roster: {e}")))?
    {
        progress(&describe(&hash, &members));
    }
    Ok(())
}

fn violation(what: impl std::fmt::Display) -> Failure {
    Failure::Protocol(what.to_string())
}

/// What this site computes, from the study's public description.
enum Plan {
    Pca {
        pair_ratio: f64,
        /// The study's private clip: 8 count stages before the Gram stage.
        clip: Option<CapeClip>,
        /// The study's centre: a private mean's stage first, or a given vector.
        center: Option<CapeCenter>,
    },
    Agn {
        model: Model,
        sigma2: f64,
        k: usize,
        pair_ratio: f64,
    },
}

impl Plan {
    fn of(view: &SiteStudyView) -> Result<Plan, String> {
        match view.algorithm.as_str() {
            "cape_pca" => {
                let config: CapePcaConfig = serde_json::from_value(view.config.clone())
                    .map_err(|e| format!("the study's cape_pca configuration is not readable: {e}"))?;
                Ok(Plan::Pca {
                    pair_ratio: config.pair_ratio,
                    clip: config.clip,
                    center: config.center,
                })
            }
            "cape_agn" => {
                let config: CapeAgnConfig = serde_json::from_value(view.config.clone())
                    .map_err(|e| format!("the study's cape_agn configuration is not readable: {e}"))?;
                // σ² enters the third moment's Δ (2β³ + 2βσ²√(3D + 6)): a negative σ² would
                // lower Δ below what one record moves the statistic by (≥ β³).
                if !(config.sigma2.is_finite() && config.sigma2 >= 0.0) {
                    return Err(format!(
                        "the study's sigma2 = {} is not a finite number ≥ 0",
                        config.sigma2
                    ));
                }
                Ok(Plan::Agn {
                    model: config.model,
                    sigma2: config.sigma2,
                    k: config.k,
                    pair_ratio: config.pair_ratio,
                })
            }
            other => Err(format!("`{other}` is not a CAPE algorithm")),
        }
    }

    fn pair_ratio(&self) -> f64 {
        match self {
            Plan::Pca { pair_ratio, .. } | Plan::Agn { pair_ratio, .. } => *pair_ratio,
        }
    }

    fn stages(&self) -> u32 {
        match self {
            Plan::Pca { clip, .. } => 1 + self.center_stages() + clip.as_ref().map_or(0, CapeClip::steps),
            Plan::Agn { .. } => 2,
        }
    }

    fn clip(&self) -> Option<&CapeClip> {
        match self {
            Plan::Pca { clip, .. } => clip.as_ref(),
            Plan::Agn { .. } => None,
        }
    }

    fn center(&self) -> Option<&CapeCenter> {
        match self {
            Plan::Pca { center, .. } => center.as_ref(),
            Plan::Agn { .. } => None,
        }
    }

    /// Stages before the clip's: 1 with a private centre, else 0.
    fn center_stages(&self) -> u32 {
        self.center().map_or(0, CapeCenter::stages)
    }

    /// Δ of this site's statistic in `stage`, from the study's public bounds (at the clip
    /// norm of the stage's input for the Gram stage of a study with a clip).
    fn sensitivity(&self, neighbours: &Neighbours, d: usize, stage: u32, input: &StageInput) -> f64 {
        match (self, stage, input) {
            (Plan::Pca { .. }, _, StageInput::CenterSum { .. }) => {
                // The plan was checked to be on records: a relation without β has no centre.
                CapeCenter::sensitivity(neighbours).unwrap_or(f64::NAN)
            }
            (Plan::Pca { .. }, _, StageInput::Step { q, .. }) => count_sensitivity(neighbours, *q),
            (Plan::Pca { .. }, _, StageInput::Clipped { c, .. }) => {
                let beta = self.clip().map_or(*c, |clip| clip.upper);
                gram_sensitivity_at(sensitivity(neighbours), beta, *c)
            }
            (Plan::Pca { .. }, _, _) => sensitivity(neighbours),
            (Plan::Agn { model, sigma2, .. }, 1, _) => {
                cape_agn::second_moment_sensitivity(*model, *sigma2, d, neighbours)
            }
            (Plan::Agn { model, sigma2, .. }, _, _) => {
                cape_agn::third_moment_sensitivity(*model, *sigma2, d, neighbours)
            }
        }
    }
}

/// This stage's noise as the site derives it from public facts it checks itself, and the
/// check of the coordinator's offer against it (docs/design/cape.md, "What a site checks"):
///
/// - Δ from the study's relation, bounds, d (and model, σ²), never the coordinator's;
/// - the share of the ρ this site's ledger is charged (`view.cost_rho`, split evenly over the
///   stages, or with a clip [`CapeClip::shares`]: `share`), with no slack: the derived cost is
///   ≤ the share as evaluated;
/// - the roster size S′ = peers + 1, which must lie between the study's threshold and its
///   number of sites;
/// - κ from the study's terms.
///
/// Returns the site's own noise; the site sends with it and nothing of the offer. `len` is
/// the length of the lattice release (C(D+2, 3) in `cape_agn` stage 2).
pub fn derived_noise(
    view: &SiteStudyView,
    delta: f64,
    share: f64,
    pair_ratio: f64,
    roster_size: usize,
    offered: &CapeNoise,
    len: usize,
) -> Result<CapeNoise, String> {
    let sites = u32::try_from(roster_size).map_err(|_| "the roster is too large".to_string())?;
    if !(sites >= view.threshold.max(2) && sites <= view.n_sites) {
        return Err(format!(
            "the roster has {sites} sites; the study allows {} to {}",
            view.threshold.max(2),
            view.n_sites
        ));
    }
    let terms = StageTerms {
        sensitivity: delta,
        share,
        sites,
        pair_ratio,
    };
    let own = terms
        .noise()
        .ok_or_else(|| "the study's public terms do not calibrate CAPE noise".to_string())?;
    cape::check_offer(offered, &own, terms.share(), len)?;
    Ok(own)
}

/// A stage's public input, as the site checked it.
enum StageInput {
    /// None: the statistic alone.
    Plain,
    /// `cape_agn` stage 2: the whitening W (D×K).
    Whitening(Matrix),
    /// A step of `cape_pca`'s clip: count at c with quantile q (over the rows centred at μ̂
    /// with a private centre).
    Step {
        c: f64,
        q: f64,
        center: Option<Vec<f64>>,
    },
    /// The Gram stage after a clip: the rows (centred at μ̂) clipped at c.
    Clipped { c: f64, center: Option<Vec<f64>> },
    /// The Gram stage of a study with a private centre and no clip: the rows centred at μ̂.
    Centred { center: Vec<f64> },
    /// A private centre's own stage: the rows' sum (`len` values).
    CenterSum { len: usize },
}

impl StageInput {
    /// The input as the transcript hashes it (base64 f64).
    fn text(&self) -> Option<String> {
        let with = |head: &[f64], center: &Option<Vec<f64>>| {
            let values: Vec<f64> = head.iter().chain(center.iter().flatten()).copied().collect();
            Some(wire::f64s_to_b64(&values))
        };
        match self {
            StageInput::Plain | StageInput::CenterSum { .. } => None,
            StageInput::Whitening(w) => Some(wire::f64s_to_b64(w.as_slice())),
            StageInput::Step { c, q, center } => with(&[*c, *q], center),
            StageInput::Clipped { c, center } => with(&[*c], center),
            StageInput::Centred { center } => Some(wire::f64s_to_b64(center)),
        }
    }

    /// The centre μ̂ the stage maps the rows by, after a private centre's stage.
    fn center(&self) -> Option<&[f64]> {
        match self {
            StageInput::Step { center, .. } | StageInput::Clipped { center, .. } => center.as_deref(),
            StageInput::Centred { center } => Some(center),
            _ => None,
        }
    }

    /// The length of the stage's lattice release (the D-dimensional tensor in `cape_agn`
    /// stage 2, one count in a clip step, the packed Gram matrix otherwise).
    fn lattice_len(&self, d: usize) -> usize {
        match self {
            StageInput::Whitening(_) => tensor_power::packed_len(d),
            StageInput::Step { .. } => 1,
            StageInput::CenterSum { len } => *len,
            StageInput::Plain | StageInput::Clipped { .. } | StageInput::Centred { .. } => d * (d + 1) / 2,
        }
    }
}

/// A stage input's own values, and the centre μ̂ that follows them after a private centre's stage.
type Row = (Vec<f64>, Option<Vec<f64>>);

/// A `cape_agn` site's stage-2 input: the d×k whitening W the coordinator sent, finite, after
/// a stage 1 this site sent (`charged`) with the packed k-tensor's `len` values.
fn whitening_input(
    input: Option<&(String, usize, usize)>,
    (d, k): (usize, usize),
    (len, charged): (usize, bool),
) -> Result<StageInput, String> {
    let w = match input {
        Some((text, rows, cols)) if (*rows, *cols) == (d, k) => {
            Matrix::from_vec(d, k, wire::b64_to_f64s(text, d * k).map_err(|e| e.to_string())?)
        }
        _ => return Err(format!("stage 2 came without a {d}×{k} whitening W")),
    };
    if !w.iter().all(|v| v.is_finite()) {
        return Err("the whitening W has non-finite entries".into());
    }
    if len != tensor_power::packed_len(k) || !charged {
        return Err("stage 2 does not follow a stage 1 this site sent".into());
    }
    Ok(StageInput::Whitening(w))
}

/// Checks `stage`'s task against the study's public shape: its `len` values and its `input`
/// (base64 f64 with its rows and columns) — cape_agn stage 2's W after a stage 1 this site
/// sent (`charged`); a private centre's stage with no input and d (d + 1 under `add_remove`)
/// values; a clip step's [c, q] and the Gram stage's [c] within the clip's bounds, each followed
/// by μ̂ (d finite numbers) after a private centre's stage; μ̂ alone for the Gram stage of a
/// study with a private centre and no clip; nothing otherwise.
fn stage_input(
    plan: &Plan,
    (stage, d): (u32, usize),
    (len, charged): (usize, bool),
    neighbours: &Neighbours,
    input: Option<(String, usize, usize)>,
) -> Result<StageInput, String> {
    let packed_matrix = d * (d + 1) / 2;
    let values = |(text, rows, cols): &(String, usize, usize)| {
        wire::b64_to_f64s(text, rows * cols).map_err(|e| e.to_string())
    };
    let centred = plan.center_stages();
    // One row of `head` values, then μ̂ after a private centre's stage.
    let row = |head: usize| -> Result<Option<Row>, String> {
        let width = head + if centred > 0 { d } else { 0 };
        match &input {
            Some(given) if (given.1, given.2) == (1, width) => {
                let mut all = values(given)?;
                let center = all.split_off(head);
                if centred == 0 {
                    return Ok(Some((all, None)));
                }
                check_center(&center, d)?;
                Ok(Some((all, Some(center))))
            }
            _ => Ok(None),
        }
    };
    match (plan, plan.clip()) {
        (Plan::Agn { k, .. }, _) if stage == 2 => whitening_input(input.as_ref(), (d, *k), (len, charged)),
        (Plan::Pca { .. }, _) if stage <= centred => {
            let expected = CapeCenter::len(neighbours, d);
            if input.is_some() || len != expected {
                return Err(format!(
                    "stage {stage} is the centre's and must carry no input and {expected} values"
                ));
            }
            Ok(StageInput::CenterSum { len })
        }
        (Plan::Pca { .. }, Some(clip)) if stage <= centred + clip.steps() => match row(2)? {
            Some((head, center)) if len == 1 => {
                let [c, q] = head[..] else {
                    return Err("a clip step's input is not [c, q]".into());
                };
                clip.bounds().check_c(c)?;
                clip.bounds().check_quantile(q)?;
                Ok(StageInput::Step { c, q, center })
            }
            _ => Err(format!(
                "stage {stage} is a step of the study's clip and came without its [c, q]{}",
                if centred > 0 { " and centre" } else { "" }
            )),
        },
        (Plan::Pca { .. }, _) if len != packed_matrix => {
            Err(format!("stage {stage} with {len} values does not fit the study"))
        }
        (Plan::Pca { .. }, Some(clip)) => match row(1)? {
            Some((head, center)) => {
                let c = head[0];
                clip.bounds().check_c(c)?;
                Ok(StageInput::Clipped { c, center })
            }
            _ => Err(format!("stage {stage} came without the study's clip norm")),
        },
        (Plan::Pca { .. }, None) if centred > 0 => match row(0)? {
            Some((_, Some(center))) => Ok(StageInput::Centred { center }),
            _ => Err(format!("stage {stage} came without the study's centre")),
        },
        _ if len == packed_matrix && input.is_none() => Ok(StageInput::Plain),
        _ => Err(format!("stage {stage} with {len} values does not fit the study")),
    }
}

/// How a CAPE site loads its records: the most it reads (no cap: CAPE encodes nothing in fixed
/// point, so the study's `max_site_samples`, a `federated_power` bound, does not apply, and a
/// site that refused over a cap would tell the coordinator one bit of its n, private under
/// add_remove), and, under add_remove, a file without rows read as zero records of the study's
/// d (so that an empty site takes part like any other).
pub(crate) fn record_rules(view: &SiteStudyView) -> (u64, Option<usize>) {
    let empty = (view.relation != Relation::ReplaceOne).then_some(view.n_features);
    (u64::MAX, empty)
}

/// Whether this site's record count lets it take part. Under replace_one n is public (the site
/// sends it at join) and must be ≥ 1. Under add_remove n is private: every n takes part, 0
/// included (the statistic is then zero and the release is noise only), so that whether the
/// site joins never depends on it.
pub(crate) fn check_count(view: &SiteStudyView, n: usize) -> Result<(), String> {
    if n == 0 && view.relation == Relation::ReplaceOne {
        return Err("the data has no records".into());
    }
    Ok(())
}

/// The pair seeds with every peer, from this site's secret and the peers' public keys.
fn pair_seeds(
    view: &SiteStudyView,
    keys: &KeyPair,
    peers: &[CapePeer],
    stage: u32,
) -> Result<Vec<(u32, Seed)>, String> {
    let me = view.site_index;
    let mut seen = std::collections::BTreeSet::new();
    peers
        .iter()
        .map(|peer| {
            if peer.index == me || !(1..=view.n_sites).contains(&peer.index) || !seen.insert(peer.index) {
                return Err(format!(
                    "the roster lists site {} twice, lists this site, or lists a site the study does not have",
                    peer.index
                ));
            }
            let Some(key) = peer.noise_public_keys.get(stage as usize - 1) else {
                return Err(format!(
                    "site {} has no pair-noise key for stage {stage}",
                    peer.index
                ));
            };
            let public = wire::decode_key(key).map_err(|e| format!("site {}'s key: {e}", peer.index))?;
            let shared = crypto::agree(&keys.secret_bytes(), &public).map_err(|e| e.to_string())?;
            let seed = crypto::cape_pair_seed(&shared, view.study_id, stage, me, peer.index)
                .map_err(|e| e.to_string())?;
            Ok((peer.index, seed))
        })
        .collect()
}

/// What a stage is computed from: the study's plan, the site's records (d × n, d the study's
/// number of features), their image in the model's domain (`cape_agn`) and the stage's public
/// input.
struct StageData<'a> {
    plan: &'a Plan,
    neighbours: &'a Neighbours,
    d: usize,
    xt: &'a Matrix,
    domain: Option<&'a Matrix>,
    input: &'a StageInput,
}

/// How a stage's statistic is masked and noised: the site's index, its pair seeds, the
/// aggregator's seed and its own noise.
struct Masks<'a> {
    me: u32,
    seeds: &'a [(u32, Seed)],
    aggregator_seed: &'a Seed,
    noise: &'a CapeNoise,
}

/// The stage's release: its statistic (a clip step's count, the Gram of the rows as they are or
/// clipped, `cape_agn`'s second moment or its stage-2 message), noised and masked.
fn stage_release(
    data: &StageData<'_>,
    masks: &Masks<'_>,
    rng: &mut ChaCha20Rng,
) -> Result<Vec<f64>, Failure> {
    let mut never = |_: u32, _: u32| Ok(());
    let mut env = RunEnv::new(rng, &mut never);
    let Masks {
        me,
        seeds,
        aggregator_seed,
        noise,
    } = *masks;
    let release = |statistic: &[f64], env: &mut RunEnv<'_>| {
        cape::site_release(statistic, me, seeds, aggregator_seed, noise, env)
    };
    // Every stage after a private centre's maps the rows to clip(x − μ̂); a given centre maps
    // every stage's.
    let center = data
        .input
        .center()
        .or_else(|| data.plan.center().and_then(CapeCenter::given));
    let centred = center.map(|mu| centred_rows(data.xt, mu, data.neighbours));
    let xt = centred.as_ref().unwrap_or(data.xt);
    match (data.plan, data.domain, data.input) {
        (Plan::Pca { .. }, _, StageInput::CenterSum { .. }) => {
            let statistic = CapeCenter::statistic(data.xt, data.d, data.neighbours).map_err(violation)?;
            release(&statistic, &mut env)
        }
        (Plan::Pca { .. }, _, StageInput::Step { c, q, .. }) => {
            let norms: Vec<f64> = xt.column_iter().map(|x| x.norm()).collect();
            release(&[score(&norms, *c, *q, data.d)], &mut env)
        }
        (Plan::Pca { .. }, _, StageInput::Clipped { c, .. }) => {
            release(&site_statistic(&clip_rows(xt, *c)), &mut env)
        }
        (Plan::Pca { .. }, _, _) => release(&site_statistic(xt), &mut env),
        (Plan::Agn { model, sigma2, .. }, Some(x), StageInput::Plain) => release(
            &cape::pack_upper(&cape_agn::second_moment(x, *model, *sigma2)),
            &mut env,
        ),
        (Plan::Agn { model, sigma2, .. }, Some(x), StageInput::Whitening(w)) => {
            cape_agn::stage2_message(x, *model, *sigma2, w, me, seeds, aggregator_seed, noise, &mut env)
        }
        _ => return Err(violation("no data for this stage")),
    }
    .map_err(violation)
}

/// The rows mapped by the centre μ̂: clip(x − μ̂) to β and α for every row.
fn centred_rows(xt: &Matrix, mu: &[f64], neighbours: &Neighbours) -> Matrix {
    let (beta, alpha) = match *neighbours {
        Neighbours::ReplaceOne { beta, alpha } | Neighbours::AddRemove { beta, alpha } => (beta, alpha),
        Neighbours::Entry { u } => (u, f64::INFINITY),
    };
    recentre(xt, &Vector::from_column_slice(mu), beta, alpha)
}

/// What the ledger kept of this study (the site restarted): every release sent, each checked
/// against the first roster; the last one is the stage to answer again if asked.
async fn resume(
    store: &crate::store::Store,
    view: &SiteStudyView,
    roster: &mut RosterGuard,
    me: &Member,
) -> Result<Option<(u32, CapeReleaseRequest)>, Failure> {
    let mut sent = None;
    // The roster first fixed (kept with the first stage's confirmation, before any release),
    // then every release's.
    for (stage, peers) in super::consistency::kept_rosters(store, view).await? {
        observe_roster(roster, view, &peers, me, stage)?;
    }
    for (stage, text) in store
        .site_messages(view.study_id, SiteMessageKind::Contribution)
        .await
        .map_err(ledger_failure)?
    {
        let kept: KeptRelease = parse_kept(&text)?;
        observe_roster(roster, view, &kept.peers, me, stage)?;
        progress(&format!(
            "continuing the study from the ledger: stage {stage} was sent"
        ));
        sent = Some((stage, kept.request));
    }
    Ok(sent)
}

/// A release task's fields.
struct StageTask {
    stage: u32,
    stages: u32,
    peers: Vec<CapePeer>,
    aggregator_seed: String,
    noise: CapeNoise,
    len: usize,
    /// The public input (base64, rows, cols), when the stage has one.
    input: Option<(String, usize, usize)>,
    confirm: bool,
    confirmations: Vec<SiteSignature>,
}

/// What a site derives for a stage from public facts it checks: the stage's input, its own
/// noise, the pair and aggregator seeds, and the stage's transcript.
struct Derived {
    input: StageInput,
    own: CapeNoise,
    seeds: Vec<(u32, Seed)>,
    aggregator_seed: Seed,
    transcript: StageTranscript,
}

/// A CAPE site after joining: what it holds across the study's stages.
struct CapeSite<'a> {
    run: SiteRun<'a>,
    plan: Plan,
    neighbours: Neighbours,
    /// One pair-noise key per stage, from the kept session seed.
    keys: Vec<KeyPair>,
    signer: SiteSigner,
    /// The records in the model's domain (`cape_agn`), computed once.
    domain: Option<Matrix>,
    me: Member,
    roster: RosterGuard,
    /// Noise: fresh from the operating system.
    rng: ChaCha20Rng,
    charged: bool,
    /// The last stage released and what was sent for it.
    sent: Option<(u32, CapeReleaseRequest)>,
    resends: u32,
}

/// Joins, then follows the tasks until the study is over.
pub(crate) async fn follow(run: SiteRun<'_>) -> Result<(), Failure> {
    let (args, client, store, budget, prepared) = run.parts();
    let view = &prepared.view;
    let plan = Plan::of(view).map_err(Failure::Refused)?;
    let neighbours =
        study_neighbours(view.relation, view.row_norm_bound, view.row_l1_bound).map_err(Failure::Refused)?;
    if let Some(clip) = plan.clip() {
        clip.check(&neighbours, view.n_features)
            .map_err(Failure::Refused)?;
    }
    if let Some(center) = plan.center() {
        center.check(view.n_features).map_err(Failure::Refused)?;
        CapeCenter::sensitivity(&neighbours).map_err(Failure::Refused)?;
    }
    check_stage_shares(
        view.cost_rho,
        plan.stages() as usize,
        (plan.center().and_then(CapeCenter::share), plan.clip()),
    )
    .map_err(|e| Failure::Refused(format!("{e}; nothing was sent")))?;
    // The pair-noise keys derive from the session seed kept in the ledger (the same keys after
    // a restart); the noise is drawn from the operating system.
    let (rng, secret_seed) = start_session(args, view, store).await?;
    let mut keys_rng = ChaCha20Rng::from_seed(secret_seed);
    let keys: Vec<KeyPair> = (0..plan.stages())
        .map(|_| KeyPair::generate(&mut keys_rng))
        .collect();
    let public: Vec<String> = keys.iter().map(|k| wire::encode(&k.public())).collect();
    // The stage confirmations' key (the same after a restart).
    let signer = signer_of(secret_seed);
    if view.site_status == SiteStatus::Invited {
        let keys = JoinKeys {
            mask: public.clone(),
            signing: Some(signer.public_key()),
            ..JoinKeys::default()
        };
        join(client, view, prepared.records.n, keys).await?;
    }
    let domain = match &plan {
        Plan::Pca { .. } => None,
        Plan::Agn { model, .. } => Some(cape_agn::to_domain(&prepared.records.xt, *model)),
    };
    let me = Member {
        index: view.site_index,
        name: view.site_name.clone(),
        keys: public.iter().cloned().chain([signer.public_key()]).collect(),
    };
    let mut roster = RosterGuard::new(prepared.expected_roster);
    // What the ledger kept of this study (the site restarted): the charge, and every release
    // sent, each checked against the first roster.
    let charged = store
        .study_charged(budget.dataset, view.study_id)
        .await
        .map_err(ledger_failure)?;
    let sent = resume(store, view, &mut roster, &me).await?;
    let mut site = CapeSite {
        run,
        plan,
        neighbours,
        keys,
        signer,
        domain,
        me,
        roster,
        rng,
        charged,
        sent,
        resends: 0,
    };
    site.run().await
}

impl CapeSite<'_> {
    async fn run(&mut self) -> Result<(), Failure> {
        let (args, client, ..) = self.run.parts();
        let view = &self.run.prepared.view;
        let wait = Duration::from_secs(args.wait_seconds);
        let path = format!("/v1/site/task?wait_ms={}", wait.as_millis());
        let mut witness = StudyWitness::open(&args.ledger, view.study_id, args.ledger_key.as_deref())?;
        let mut last_wait: Option<crate::store::StudyStatus> = None;
        loop {
            match next_task(client, &path, wait, &mut witness).await? {
                SiteTask::Wait { status } => note_wait(&mut last_wait, status),
                SiteTask::CapeRelease {
                    stage,
                    stages,
                    peers,
                    aggregator_seed,
                    noise,
                    len,
                    input,
                    input_rows,
                    input_cols,
                    confirm,
                    confirmations,
                } => {
                    last_wait = None;
                    let task = StageTask {
                        stage,
                        stages,
                        peers,
                        aggregator_seed,
                        noise,
                        len,
                        input: input.map(|b| (b, input_rows, input_cols)),
                        confirm,
                        confirmations,
                    };
                    self.stage(task).await?;
                }
                SiteTask::Finished { status, reason } => return finished(status, reason),
                other => {
                    return Err(violation(format!(
                        "the server sent a task of another protocol in a CAPE study: {other:?}"
                    )));
                }
            }
        }
    }

    /// One stage's task: the kept release again if it was sent before; otherwise the stage's
    /// checks, then its confirmation (the consistency round) or its release.
    async fn stage(&mut self, task: StageTask) -> Result<(), Failure> {
        let (_, client, ..) = self.run.parts();
        let view = &self.run.prepared.view;
        let stage = task.stage;
        let stage_path = format!("/v1/site/stages/{stage}/release");
        if let Some((done, request)) = &self.sent {
            if *done == stage {
                let what = format!("stage {stage}");
                return resend(client, &stage_path, request, &mut self.resends, &what).await;
            }
            if stage < *done {
                return Err(violation(format!(
                    "the server asked for stage {stage} after stage {done}"
                )));
            }
        }
        self.resends = 0;
        let stages = self.plan.stages();
        if task.stages != stages || !(1..=stages).contains(&stage) {
            return Err(violation(format!(
                "stage {stage}/{} does not fit a {} study",
                task.stages, view.algorithm
            )));
        }
        observe_roster(&mut self.roster, view, &task.peers, &self.me, stage)?;
        let derived = self.derive(&task)?;
        // The consistency round: one transcript per stage, confirmed by a quorum before
        // anything is drawn.
        let (args, _, store, ..) = self.run.parts();
        let signature = derived
            .transcript
            .accept(store, view, stage, &self.signer)
            .await?;
        if task.confirm {
            let confirm_path = format!("/v1/site/stages/{stage}/confirm");
            client.post(&confirm_path, &ConfirmRequest { signature }).await?;
            progress(&format!(
                "stage {stage} confirmed ({} sites in the roster)",
                task.peers.len() + 1
            ));
            return Ok(());
        }
        let quorum = transcript::quorum(self.roster.size() as u32, args.colluding_sites);
        derived.transcript.check_quorum(
            stage,
            &task.peers,
            (view.site_index, &self.signer),
            &task.confirmations,
            quorum,
        )?;
        self.release(task, derived).await
    }

    /// What the site derives for `task` from public facts it checks ([`Derived`]). Every noise
    /// parameter is this site's own; the coordinator's offer only decides whether it takes part.
    fn derive(&self, task: &StageTask) -> Result<Derived, Failure> {
        let view = &self.run.prepared.view;
        let (stage, d) = (task.stage, view.n_features);
        // What this stage releases, from the study's public shape: the packed statistic's
        // length, and its public input (cape_agn's W in stage 2; a clip step's [c, q]; the clip
        // norm of the Gram stage after a clip).
        let input = stage_input(
            &self.plan,
            (stage, d),
            (task.len, self.charged),
            &self.neighbours,
            task.input.clone(),
        )
        .map_err(violation)?;
        let delta = self.plan.sensitivity(&self.neighbours, d, stage, &input);
        let center_share = self.plan.center().and_then(CapeCenter::share);
        let share = stage_share(
            view.cost_rho,
            self.plan.stages() as usize,
            (center_share, self.plan.clip()),
            stage,
        )
        .ok_or_else(|| violation(format!("stage {stage} does not fit the study")))?;
        let own = derived_noise(
            view,
            delta,
            share,
            self.plan.pair_ratio(),
            task.peers.len() + 1,
            &task.noise,
            input.lattice_len(d),
        )
        .map_err(|e| {
            Failure::Refused(format!(
                "refusing the coordinator's stage-{stage} noise: {e}; nothing was sent"
            ))
        })?;
        let seeds =
            pair_seeds(view, &self.keys[stage as usize - 1], &task.peers, stage).map_err(violation)?;
        let aggregator_seed: Seed = wire::decode(&task.aggregator_seed)
            .ok()
            .and_then(|bytes| bytes.try_into().ok())
            .ok_or_else(|| violation("the aggregator seed is not 32 bytes of base64"))?;
        let transcript = StageTranscript::of(view, stage, &task.peers, &own, input.text().as_deref())?;
        Ok(Derived {
            input,
            own,
            seeds,
            aggregator_seed,
            transcript,
        })
    }

    /// Charges the ledger (once, before the first draw), draws the stage's release, keeps it
    /// and sends it. A release kept first (by a run that stopped before sending it) is sent
    /// instead, so a stage is answered with one vector only.
    async fn release(&mut self, task: StageTask, derived: Derived) -> Result<(), Failure> {
        let (args, client, store, budget, prepared) = self.run.parts();
        let view = &prepared.view;
        let stage = task.stage;
        if !self.charged {
            charge_ledger(args, store, budget, prepared).await?;
            self.charged = true;
        }
        let data = StageData {
            plan: &self.plan,
            neighbours: &self.neighbours,
            d: view.n_features,
            xt: &prepared.records.xt,
            domain: self.domain.as_ref(),
            input: &derived.input,
        };
        let masks = Masks {
            me: view.site_index,
            seeds: &derived.seeds,
            aggregator_seed: &derived.aggregator_seed,
            noise: &derived.own,
        };
        let release = stage_release(&data, &masks, &mut self.rng)?;
        let kept = KeptRelease {
            peers: task.peers,
            request: CapeReleaseRequest {
                values: wire::f64s_to_b64(&release),
            },
        };
        let KeptRelease { peers, request } =
            keep(store, view.study_id, SiteMessageKind::Contribution, stage, &kept).await?;
        client
            .post(&format!("/v1/site/stages/{stage}/release"), &request)
            .await?;
        progress(&format!(
            "stage {stage}/{} release sent ({} values; correlated with {} peers; own noise sd {:.4e})",
            self.plan.stages(),
            task.len,
            peers.len(),
            derived.own.own_sd
        ));
        self.sent = Some((stage, request));
        if args.test_stop_after_round == Some(stage) {
            progress(&format!("stopping after stage {stage} (test hook)"));
            std::future::pending::<()>().await;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "site_tests.rs"]
mod tests;
