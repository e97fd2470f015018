//! `gossip_power`: the decentralized DP power method, D-DP-PM (seed 001, Alg. 1), simulate
//! mode, with the Gaussian-mechanism accounting of docs/design/algorithms.md (`gossip_power`).
//!
//! # Setting
//! The records X (n×d) are split by features over m agents, X = [X_1 | … | X_m] (the paper's
//! partition, eq. 1); agent i holds X_i (n×d_i) and the rows V_i of the iterate that belong to its
//! features (eq. 4). The agents talk over a graph with mixing matrix W ([`super::graph`],
//! Assumption 2). In simulate mode the service holds every block and runs the protocol
//! in-process; every message that leaves an agent goes through the noise below.
//!
//! # Iteration (Alg. 1, block form), for l = 1..L
//! 1. Clip: V_i ← V_i·min(1, ν/‖V_i‖₂) (ν public, `clip_norm`).
//! 2. Message (Alg. 1 step 6): Ỹ_i = X_i·V_i + G_i, G_i iid N(0, (s_y·Δ_y)²), an n×p matrix.
//! 3. Consensus (eq. 11): K rounds of Z ← W·Z starting from Z_j = Ỹ_j; agent i ends with Ȳ_i ≈
//!    (1/m)Σ_j Ỹ_j and forms its consensus estimate C_i = m·Ȳ_i ≈ X·V, then clips its rows to
//!    ‖C_i\[r,:\]‖₂ ≤ τ (`consensus_clip`, public; post-processing). The rows of C_i are mostly
//!    the summed message noise, whose largest row sets Δ_v below; clipping at τ ≈ the typical
//!    row (not the largest of n) shrinks Δ_v several-fold while scaling signal and noise alike
//!    ([`default_consensus_clip`]).
//! 4. Update (Alg. 1 step 7): Ũ_i = X_iᵀ·C_i / c + H_i, H_i iid N(0, (s_v·Δ_v)²), d_i×p, with the
//!    paper's fixed scalar c; we fix c = n, so Ũ ≈ Σ̂·V with Σ̂ = XᵀX/n (n is public under
//!    replace_one).
//! 5. Re-orthonormalise (post-processing, see "Deviations"): the agents gossip their p×p Grams
//!    Ũ_iᵀŨ_i (K rounds), each forms G_i ≈ Σ_j Ũ_jᵀŨ_j and sets V_i = Ũ_i·G_i^{−1/2}.
//!
//! After L iterations the agents share their segments Ũ_i (Alg. 1 step 8); the output is the top-k
//! left singular vectors of the stacked Ũ (d×p), a Rayleigh–Ritz step on released values as in
//! `noisy_power`, sign-fixed.
//!
//! # Privacy (docs/design/algorithms.md; the paper's Rényi analysis, Thm 2, is not claimed)
//! Relation: `replace_one` records, β the public row-norm bound. Replacing record r changes row r
//! of every X_i, by δ_i with Σ_i‖δ_i‖² = ‖x_r − x'_r‖² ≤ (2β)².
//! * Messages. Stacked over agents, the change of (X_1V_1, …, X_mV_m) is the row vectors
//!   δ_iᵀV_i at row r, so its Frobenius norm is sqrt(Σ_i‖V_iᵀδ_i‖²) ≤ sqrt(Σ_i‖V_i‖₂²‖δ_i‖²)
//!   ≤ ν·2β: **Δ_y = 2β·ν** (the clip makes ‖V_i‖₂ ≤ ν; V is a post-processing of earlier
//!   releases).
//! * Updates. C_i is a post-processing of the released messages, hence fixed given them; the
//!   change of (X_1ᵀC_1/c, …, X_mᵀC_m/c) is δ_i·C_i\[r,:\]/c for each i, with norm
//!   sqrt(Σ_i‖δ_i‖²‖C_i\[r,:\]‖²)/c ≤ 2β·max_{i,r}‖C_i\[r,:\]‖₂/c: **Δ_v = 2β·max_{i,r}‖C_i\[r,:\]‖₂/c**
//!   (for p = 1 the spec's 2β·max_i‖w_i‖∞/c), recomputed each iteration from public values (the
//!   agents agree on the maximum by max-consensus on released values; here it is computed
//!   directly).
//! * Everything else that leaves an agent (gossip states, Grams, final segments, the consensus
//!   error) is a post-processing of these two releases.
//!
//! Each release is a Gaussian mechanism with noise sd = multiplier × sensitivity, so it costs
//! 1/(2s²) zCDP (Bun & Steinke 2016, Prop. 1.6), whatever the sensitivity; adaptive composition
//! over the L iterations gives
//!
//! **ρ = L·(1/(2s_y²) + 1/(2s_v²))** ([`cost_of`]).
//!
//! Calibration ([`calibrate`]): a share φ (`message_share`, default 0.8) of each iteration's ρ/L
//! goes to the messages: s_y = sqrt(L/(2φρ)), s_v = sqrt(L/(2(1−φ)ρ)), each rounded up until the
//! cost, computed by [`cost_of`], does not exceed ρ.
//!
//! `add_remove` is not offered: each message has one entry per record, so adding or removing a
//! record changes the length of every message, which no amount of noise hides; comparing with the
//! record replaced by a zero row (sensitivity β·ν) would bound a different neighbour relation.
//!
//! # Deviations from the paper, and why
//! * **Block iteration instead of deflation.** Seed 001 computes one eigenvector at a time and
//!   deflates. Deflation would spend the budget k times, and deflating each X_i with the noisy
//!   consensus X·v no longer keeps rows within β. We iterate a p-column block (p ≥ k) instead:
//!   Δ_y does not grow with p (clip on ‖V_i‖₂), so k vectors cost what one costs.
//! * **Normalisation instead of a fixed c.** The paper divides by a fixed c and never normalises,
//!   to keep every release Gaussian for its Rényi analysis, and picks c by a search on the data.
//!   A data-independent c cannot track λ₁: the iterate then grows into the clip (which, applied
//!   per agent, bends its direction) or decays into the noise. Our accounting treats every Ũ_i
//!   as released, so normalising it is free post-processing; c then only fixes the units.
//! * **Noise on the first message.** The paper relies on the hidden random initial state for the
//!   first iteration's privacy; we noise every message.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::graph::{GraphSpec, Mixing};
use crate::algorithms::calibration::{check_calibrated, check_opening, choose_iterations, choose_p};
use crate::algorithms::{ConfigError, RunError, catalog};
use crate::dataset::{DataContext, Neighbours};
use crate::linalg::Matrix;
use crate::privacy::PrivacyTarget;

/// Default number of agents.
pub const DEFAULT_AGENTS: usize = 4;
/// Most agents (bounds the simulation's m²·K·n·p work per iteration).
pub const MAX_AGENTS: usize = 256;
/// Default number of power iterations L. At a fixed ρ every iteration's noise sd grows like √L,
/// while with the default block width p = 2k the noiseless error contracts like
/// (λ_{2k+1}/λ_k)^L; on spiked data (gossip_power_tests, `explore_defaults`) L = 3 beat 2, 4
/// and 6 at ρ = 5 in mean and worst captured energy.
pub const DEFAULT_ITERATIONS: u32 = 3;
/// Largest accepted L.
pub const MAX_ITERATIONS: u32 = 1000;
/// Default gossip rounds: the fewest K with SLEM(W)^K ≤ this (consensus error contracted 10⁴-fold).
pub const DEFAULT_CONTRACTION: f64 = 1e-4;
/// Largest accepted K.
pub const MAX_GOSSIP_ROUNDS: u32 = 10_000;
/// Default ν: the iterate is re-orthonormalised, so ‖V_i‖₂ ≤ ‖V‖₂ = 1 and ν = 1 never binds.
pub const DEFAULT_CLIP_NORM: f64 = 1.0;
/// Default share of each iteration's ρ spent on the messages (the rest on the updates). The
/// messages' noise is summed over m agents by the consensus, while the updates' noise is kept
/// small by the consensus clip, so the messages get most of the budget (0.8 beat 0.5 and 0.65
/// in `explore_defaults`).
pub const DEFAULT_MESSAGE_SHARE: f64 = 0.8;
/// Scale of the default consensus clip (see [`default_consensus_clip`]); ½ beat 1, ¼ and no clip
/// at ρ = 5 on spiked data (`explore_defaults` in the tests).
pub const CONSENSUS_CLIP_FACTOR: f64 = 0.5;
/// Audit label of the agents' n×p messages Ỹ_i.
pub const MESSAGE_RELEASE: &str = "gossip_message";
/// Audit label of the agents' d_i×p updates Ũ_i.
pub const UPDATE_RELEASE: &str = "gossip_update";

/// The decentralized DP power method.
#[derive(Debug, Clone, Copy, Default)]
pub struct GossipPower;

/// What the client sends.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GossipPowerParams {
    /// Target rank: number of principal components returned (1 ≤ k ≤ d).
    #[schemars(range(min = 1))]
    pub k: usize,
    /// Block width (k ≤ p ≤ d): columns iterated together; the message sensitivity does not
    /// grow with p, extra columns speed convergence. Default: min(d, 2k).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub p: Option<usize>,
    /// Number of agents m (2 ≤ m ≤ min(d, 256)); each holds a block of features. Default:
    /// min(4, d), or the length of partition.
    #[serde(default)]
    #[schemars(range(min = 2, max = MAX_AGENTS))]
    pub agents: Option<usize>,
    /// Feature indices (0-based) held by each agent: m arrays covering every feature exactly
    /// once. Default: m contiguous blocks.
    #[serde(default)]
    pub partition: Option<Vec<Vec<usize>>>,
    /// The agents' network: "ring" (default), "path", "star", "complete" or
    /// {"erdos_renyi": {"p": …, "seed": …}} (Metropolis weights), or {"matrix": [[…]]}, a
    /// symmetric doubly stochastic m×m mixing matrix of a connected graph.
    #[serde(default)]
    #[schemars(extend("default" = "ring"))]
    pub graph: Option<GraphSpec>,
    /// Gossip rounds K per consensus (free: gossip only mixes released values). Default: the
    /// fewest K with SLEM(W)^K ≤ 1e-4.
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_GOSSIP_ROUNDS))]
    pub gossip_rounds: Option<u32>,
    /// Power iterations L (1–1000). Each costs two Gaussian mechanisms.
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_ITERATIONS), extend("default" = DEFAULT_ITERATIONS))]
    pub iterations: Option<u32>,
    /// ν > 0, public bound on the spectral norm of each agent's iterate block; the message
    /// sensitivity is 2βν. Iterates are orthonormal, so 1 never binds.
    #[serde(default)]
    #[schemars(extend("default" = DEFAULT_CLIP_NORM, "exclusiveMinimum" = 0))]
    pub clip_norm: Option<f64>,
    /// Share of each iteration's ρ spent on the messages X_i·V_i, in (0, 1); the rest goes to
    /// the updates.
    #[serde(default)]
    #[schemars(extend("default" = DEFAULT_MESSAGE_SHARE, "exclusiveMinimum" = 0, "exclusiveMaximum" = 1))]
    pub message_share: Option<f64>,
    /// τ, public bound the rows of each agent's consensus estimate are clipped to before its
    /// update (post-processing); the update sensitivity is 2β·(largest row norm ≤ τ)/n.
    /// Default: ½·(βν + √(m·p)·s_y·2βν), half the largest signal row plus the typical
    /// summed-noise row.
    #[serde(default)]
    pub consensus_clip: Option<f64>,
}

/// Every parameter fixed and the noise calibrated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GossipPowerConfig {
    pub k: usize,
    pub p: usize,
    /// Feature indices held by each agent (m lists covering 0..d once).
    pub partition: Vec<Vec<usize>>,
    /// The validated mixing matrix W, by rows.
    pub mixing: Vec<Vec<f64>>,
    pub gossip_rounds: u32,
    pub iterations: u32,
    pub clip_norm: f64,
    /// s_y: message noise sd = s_y·2βν.
    pub message_multiplier: f64,
    /// s_v: update noise sd = s_v·2β·max_{i,r}‖C_i\[r,:\]‖₂/c.
    pub update_multiplier: f64,
    /// τ: rows of each consensus estimate C_i are clipped to ‖C_i\[r,:\]‖₂ ≤ τ (post-processing).
    pub consensus_clip: f64,
}

/// ρ = L·(1/(2s_y²) + 1/(2s_v²)): two Gaussian mechanisms per iteration (module doc).
pub fn cost_of(iterations: u32, message_multiplier: f64, update_multiplier: f64) -> f64 {
    // (1/s)² rather than 1/s², so that a huge s cannot overflow s² into a zero cost.
    let per = |s: f64| {
        let inverse = 1.0 / s;
        inverse * inverse / 2.0
    };
    f64::from(iterations) * (per(message_multiplier) + per(update_multiplier))
}

/// (s_y, s_v) with s_y = sqrt(L/(2φρ)), s_v = sqrt(L/(2(1−φ)ρ)), rounded up so that
/// `cost_of(L, s_y, s_v) ≤ ρ` in floating point.
pub fn calibrate(iterations: u32, rho: f64, message_share: f64) -> (f64, f64) {
    let l = f64::from(iterations);
    let mut s_y = (l / (2.0 * message_share * rho)).sqrt();
    let mut s_v = (l / (2.0 * (1.0 - message_share) * rho)).sqrt();
    while cost_of(iterations, s_y, s_v) > rho {
        s_y = s_y.next_up();
        s_v = s_v.next_up();
    }
    (s_y, s_v)
}

/// Δ_y = 2β·ν: stacked messages under replace_one (module doc).
pub fn message_sensitivity(beta: f64, clip_norm: f64) -> f64 {
    2.0 * beta * clip_norm
}

/// Δ_v = 2β·max_{i,r}‖C_i\[r,:\]‖₂/c: stacked updates under replace_one (module doc).
pub fn update_sensitivity(beta: f64, max_row_norm: f64, c: f64) -> f64 {
    2.0 * beta * max_row_norm / c
}

/// The default τ: β·ν (the largest signal row, ‖x_r‖₂·‖V‖₂ with ‖V‖₂ = 1 for the
/// orthonormal iterate, times ν) plus the typical norm √(m·p)·s_y·2βν of a row of the summed
/// message noise, times [`CONSENSUS_CLIP_FACTOR`]. Public: it depends on the configuration only.
pub fn default_consensus_clip(
    ctx: &DataContext,
    m: usize,
    p: usize,
    clip_norm: f64,
    message_multiplier: f64,
) -> f64 {
    let beta = row_norm_bound(&ctx.neighbours).unwrap_or(f64::NAN);
    let noise = ((m * p) as f64).sqrt() * message_multiplier * message_sensitivity(beta, clip_norm);
    CONSENSUS_CLIP_FACTOR * (beta * clip_norm + noise)
}

/// m contiguous blocks of 0..d, the first d mod m one longer.
pub fn contiguous_partition(d: usize, m: usize) -> Vec<Vec<usize>> {
    let (base, extra) = (d / m, d % m);
    let mut start = 0;
    (0..m)
        .map(|i| {
            let len = base + usize::from(i < extra);
            let block = (start..start + len).collect();
            start += len;
            block
        })
        .collect()
}

/// Checks that `partition` gives each of m agents at least one feature and covers 0..d once.
pub(crate) fn check_partition(partition: &[Vec<usize>], d: usize) -> Result<(), ConfigError> {
    let bad = |message: String| Err(ConfigError::invalid("params.partition", message));
    let mut owner = vec![None; d];
    for (agent, block) in partition.iter().enumerate() {
        if block.is_empty() {
            return bad(format!("agent {agent} holds no feature"));
        }
        for &j in block {
            if j >= d {
                return bad(format!("feature index {j} is out of range 0..{d}"));
            }
            if let Some(other) = owner[j] {
                return bad(format!(
                    "feature {j} is given to agents {other} and {agent}; each feature goes to exactly one agent"
                ));
            }
            owner[j] = Some(agent);
        }
    }
    if let Some(j) = owner.iter().position(Option::is_none) {
        return bad(format!(
            "feature {j} is given to no agent; the partition must cover all {d} features"
        ));
    }
    Ok(())
}

/// β of a replace_one context.
pub(crate) fn row_norm_bound(neighbours: &Neighbours) -> Option<f64> {
    match *neighbours {
        Neighbours::ReplaceOne { beta, .. } => Some(beta),
        _ => None,
    }
}

impl GossipPowerConfig {
    pub(crate) fn agents(&self) -> usize {
        self.partition.len()
    }

    pub fn mixing(&self) -> Result<Mixing, RunError> {
        let m = self.agents();
        let w = Matrix::from_fn(m, m, |i, j| self.mixing[i][j]);
        Mixing::new(w).map_err(|e| RunError::Failed(format!("stored mixing matrix: {e}")))
    }
}

/// `gossip_power`'s configuration of `params` for `ctx` at `target` (what
/// [`crate::algorithms::Algorithm::configure`] returns; a study's agents call it directly).
pub fn configure(
    params: GossipPowerParams,
    ctx: &DataContext,
    target: &PrivacyTarget,
) -> Result<GossipPowerConfig, ConfigError> {
    if row_norm_bound(&ctx.neighbours).is_none() {
        return Err(ConfigError::Unsupported(format!(
            "{} runs on replace_one records only",
            catalog::GOSSIP_POWER.name
        )));
    }
    let rho = check_opening(ctx, target, params.k)?;
    let d = ctx.d;
    let k = params.k;
    let p = choose_p(params.p, k, d)?;
    let (partition, mixing, gossip_rounds) = network_of(&params, d)?;
    let m = partition.len();
    let iterations = choose_iterations(params.iterations, DEFAULT_ITERATIONS, MAX_ITERATIONS, "")?;
    let (clip_norm, share) = clip_and_share(&params)?;
    let (message_multiplier, update_multiplier) = calibrate(iterations, rho, share);
    check_calibrated(message_multiplier.is_finite() && update_multiplier.is_finite())?;
    let consensus_clip = match params.consensus_clip {
        Some(tau) => tau,
        None => default_consensus_clip(ctx, m, p, clip_norm, message_multiplier),
    };
    if !(consensus_clip > 0.0 && consensus_clip.is_finite()) {
        return Err(ConfigError::invalid(
            "params.consensus_clip",
            "must be a finite number > 0",
        ));
    }
    Ok(GossipPowerConfig {
        k,
        p,
        partition,
        mixing: mixing.rows(),
        gossip_rounds,
        iterations,
        clip_norm,
        message_multiplier,
        update_multiplier,
        consensus_clip,
    })
}

/// The agents' network of a configuration: the feature blocks (one per agent), the mixing
/// matrix of the graph, and the gossip rounds per exchange.
fn network_of(params: &GossipPowerParams, d: usize) -> Result<(Vec<Vec<usize>>, Mixing, u32), ConfigError> {
    let m = params
        .agents
        .or(params.partition.as_ref().map(Vec::len))
        .unwrap_or(DEFAULT_AGENTS.min(d));
    let most = d.min(MAX_AGENTS);
    if !(m >= 2 && m <= most) {
        return Err(ConfigError::invalid(
            "params.agents",
            format!(
                "must satisfy 2 ≤ agents ≤ min(d, {MAX_AGENTS}) = {most}: each agent holds at least one feature (got {m})"
            ),
        ));
    }
    let partition = match params.partition.clone() {
        Some(partition) => {
            if partition.len() != m {
                return Err(ConfigError::invalid(
                    "params.partition",
                    format!("has {} blocks but there are {m} agents", partition.len()),
                ));
            }
            check_partition(&partition, d)?;
            partition
        }
        None => contiguous_partition(d, m),
    };
    let graph = params.graph.clone().unwrap_or(GraphSpec::Ring);
    let mixing = Mixing::build(&graph, m).map_err(|e| ConfigError::invalid("params.graph", e.0))?;
    let gossip_rounds = params
        .gossip_rounds
        .unwrap_or_else(|| mixing.rounds_for(DEFAULT_CONTRACTION, MAX_GOSSIP_ROUNDS));
    if !(1..=MAX_GOSSIP_ROUNDS).contains(&gossip_rounds) {
        return Err(ConfigError::invalid(
            "params.gossip_rounds",
            format!("must satisfy 1 ≤ gossip_rounds ≤ {MAX_GOSSIP_ROUNDS} (got {gossip_rounds})"),
        ));
    }
    Ok((partition, mixing, gossip_rounds))
}

/// The per-agent clip norm and the share of ρ spent on the messages, checked.
fn clip_and_share(params: &GossipPowerParams) -> Result<(f64, f64), ConfigError> {
    let clip_norm = params.clip_norm.unwrap_or(DEFAULT_CLIP_NORM);
    if !(clip_norm > 0.0 && clip_norm.is_finite()) {
        return Err(ConfigError::invalid(
            "params.clip_norm",
            "must be a finite number > 0",
        ));
    }
    let share = params.message_share.unwrap_or(DEFAULT_MESSAGE_SHARE);
    if !(share > 0.0 && share < 1.0) {
        return Err(ConfigError::invalid(
            "params.message_share",
            "must satisfy 0 < message_share < 1",
        ));
    }
    Ok((clip_norm, share))
}

#[cfg(test)]
#[path = "power_tests.rs"]
mod tests;
