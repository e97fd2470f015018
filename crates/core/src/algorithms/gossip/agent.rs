//! One agent of `gossip_power` (D-DP-PM, seed 001 Alg. 1, [`super::power`]) as a state
//! machine over a fixed, public schedule of exchanges. Simulate mode runs m agents in process
//! and hands each agent its neighbours' values; a live study (docs/design/federation.md, "Live
//! gossip") runs one agent per `privpca site` process and the coordinator relays the same
//! values. Both call [`Agent::advance`], so a live agent computes exactly what the simulated
//! one computes.
//!
//! # The schedule ([`schedule`])
//! Exchange t carries one value from every agent to its graph neighbours (W_ij > 0). A block of
//! K exchanges of one kind is one consensus: the agent posts its state Z⁰, mixes what its
//! neighbours posted into Z¹ = Σ_j W_ij Z⁰_j, posts Z¹, … and ends with Z^K, computed when the
//! next exchange begins. In order:
//! - K × [`Exchange::Gram`]: the Grams U_iᵀU_i of the random initial segments (data-free);
//!   then V_i = U_i·(m·Ḡ_i)^{−1/2};
//! - per iteration l = 1..L: K × [`Exchange::Message`] (the first post is the noisy message
//!   Ỹ_i, a release; the later ones mix releases), then m − 1 × [`Exchange::Max`] (max-consensus
//!   of the agents' max row norms of C_i, public; m − 1 rounds reach every agent of a connected
//!   graph), then the noisy update Ũ_i (a release), and if l < L, K × Gram of Ũ_i;
//! - one [`Exchange::Segment`]: the last Ũ_i, which the coordinator (or the simulation)
//!   stacks in block order ([`assemble`]).
//!
//! Every posted value is a release of the module doc of [`super::power`] or a
//! post-processing of releases and public randomness.

use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};

use super::graph::mix_row;
use super::power::{
    GossipPowerConfig, GossipPowerParams, MESSAGE_RELEASE, UPDATE_RELEASE, message_sensitivity,
    update_sensitivity,
};
use crate::algorithms::centering::CenterConfig;
use crate::algorithms::{ConfigError, Output, RunEnv, RunError};
use crate::dataset::DataContext;
use crate::linalg::clip::{clip_rows_l2, margin};
use crate::linalg::{Matrix, fix_signs, matmul, matmul_tn, try_sym_eig, try_thin_svd};
use crate::privacy::PrivacyTarget;

/// What one exchange carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Exchange {
    /// A gossip state of p×p Grams.
    Gram,
    /// A gossip state of n×p messages.
    Message,
    /// A max-consensus state (one number).
    Max,
    /// The agent's final d_i×p segment.
    Segment,
}

impl Exchange {
    /// Rows and columns of the value an agent with `d_i` features and `n` records posts.
    pub fn shape(self, n: usize, p: usize, d_i: usize) -> (usize, usize) {
        match self {
            Exchange::Gram => (p, p),
            Exchange::Message => (n, p),
            Exchange::Max => (1, 1),
            Exchange::Segment => (d_i, p),
        }
    }
}

/// The public schedule of a configuration (module doc).
pub fn schedule(config: &GossipPowerConfig) -> Vec<Exchange> {
    let k = config.gossip_rounds as usize;
    let m = config.partition.len();
    let mut out = vec![Exchange::Gram; k];
    for l in 1..=config.iterations {
        out.extend(std::iter::repeat_n(Exchange::Message, k));
        out.extend(std::iter::repeat_n(Exchange::Max, m.saturating_sub(1).max(1)));
        if l < config.iterations {
            out.extend(std::iter::repeat_n(Exchange::Gram, k));
        }
    }
    out.push(Exchange::Segment);
    out
}

/// m contiguous blocks of sizes `sizes`, in order.
pub fn blocks_partition(sizes: &[usize]) -> Vec<Vec<usize>> {
    let mut start = 0;
    sizes
        .iter()
        .map(|&len| {
            let block = (start..start + len).collect();
            start += len;
            block
        })
        .collect()
}

/// The configuration of a live study whose agents hold contiguous blocks of `sizes` features
/// in site order: the job's `configure` with the partition fixed by the sites. The
/// coordinator and every site call it on the same public facts and compare.
pub fn configure_blocks(
    mut params: GossipPowerParams,
    sizes: &[usize],
    ctx: &DataContext,
    target: &PrivacyTarget,
) -> Result<GossipPowerConfig, ConfigError> {
    if params.partition.is_some() {
        return Err(ConfigError::invalid(
            "params.partition",
            "is fixed by the sites' n_features in a study (blocks in site order)",
        ));
    }
    let m = sizes.len();
    if let Some(agents) = params.agents
        && agents != m
    {
        return Err(ConfigError::invalid(
            "params.agents",
            format!("the study has {m} sites, one agent each (got {agents})"),
        ));
    }
    if let Some(i) = sizes.iter().position(|&s| s == 0) {
        return Err(ConfigError::invalid(
            format!("sites[{i}].n_features"),
            "must be at least 1: every agent holds a block of features",
        ));
    }
    let total: usize = sizes.iter().sum();
    if total != ctx.d {
        return Err(ConfigError::invalid(
            "sites",
            format!(
                "the sites' n_features sum to {total}; the study has n_features = {}",
                ctx.d
            ),
        ));
    }
    params.agents = Some(m);
    params.partition = Some(blocks_partition(sizes));
    super::power::configure(params, ctx, target)
}

/// One agent: its block of the records and its side of the protocol.
#[derive(Debug, Clone)]
pub struct Agent {
    config: GossipPowerConfig,
    index: usize,
    weights: Vec<f64>,
    /// X_iᵀ: d_i×n.
    block: Matrix,
    beta: f64,
    d: usize,
    schedule: Vec<Exchange>,
    step: usize,
    segment: Matrix,
    update: Matrix,
    state: Matrix,
    message: Option<Matrix>,
    averaged: Option<Matrix>,
    estimate: Matrix,
    local_max: f64,
    iterations_done: u32,
}

impl Agent {
    /// Agent `index` (0-based) holding `block` = X_iᵀ (its d_i features × n records), of a
    /// replace_one study with row-norm bound `beta` and d features in all.
    pub fn new(
        config: &GossipPowerConfig,
        index: usize,
        block: Matrix,
        beta: f64,
        d: usize,
    ) -> Result<Agent, RunError> {
        let features = config
            .partition
            .get(index)
            .ok_or_else(|| RunError::Failed(format!("there is no agent {index}")))?;
        if block.nrows() != features.len() || block.ncols() == 0 {
            return Err(RunError::Failed(format!(
                "agent {index} holds {} features of {} records; its block has {} features and at least one record",
                block.nrows(),
                block.ncols(),
                features.len()
            )));
        }
        let weights = config.mixing[index].clone();
        Ok(Agent {
            config: config.clone(),
            index,
            weights,
            block,
            beta,
            d,
            schedule: schedule(config),
            step: 0,
            segment: Matrix::zeros(0, 0),
            update: Matrix::zeros(0, 0),
            state: Matrix::zeros(0, 0),
            message: None,
            averaged: None,
            estimate: Matrix::zeros(0, 0),
            local_max: 0.0,
            iterations_done: 0,
        })
    }

    /// Before the first exchange: maps the block's rows by the study's centre
    /// ([`super::center`]): the given vector's entries, or the private mean of the block drawn
    /// through `env`, then clip(x_i − μ̂_i) at β_i = β·√(d_i/d).
    pub fn centre(&mut self, center: &CenterConfig, env: &mut RunEnv<'_>) -> Result<(), RunError> {
        if self.step != 0 {
            return Err(RunError::Failed(
                "the block is centred before the first exchange only".into(),
            ));
        }
        let features = &self.config.partition[self.index];
        let beta_i = self.beta * (features.len() as f64 / self.d as f64).sqrt();
        let mu = super::center::block_centre(center, features, &self.block, beta_i, env)?;
        self.block = super::center::centre_block(&self.block, &mu, beta_i);
        Ok(())
    }

    /// The agents whose values this agent mixes (W_ij > 0, j ≠ i), ascending.
    pub fn neighbours(&self) -> Vec<usize> {
        (0..self.weights.len())
            .filter(|&j| j != self.index && self.weights[j] > 0.0)
            .collect()
    }

    /// Exchanges done so far (the next one is `step() + 1`, 1-based).
    pub fn step(&self) -> usize {
        self.step
    }

    /// Power iterations whose update has been released.
    pub fn iterations_done(&self) -> u32 {
        self.iterations_done
    }

    /// The last noisy message Ỹ_i, and this agent's consensus of the messages Ȳ_i.
    pub fn last_consensus(&self) -> Option<(&Matrix, &Matrix)> {
        self.message.as_ref().zip(self.averaged.as_ref())
    }

    /// max_r ‖C_i\[r,:\]‖₂ of the last consensus estimate.
    pub fn local_max(&self) -> f64 {
        self.local_max
    }

    fn n(&self) -> usize {
        self.block.ncols()
    }

    /// Takes the neighbours' values of the previous exchange (none before the first), and
    /// returns this agent's value for the next one. Refuses inputs from anyone but its
    /// neighbours, or of the wrong shape, or not finite.
    pub fn advance(&mut self, env: &mut RunEnv<'_>, inputs: &[(usize, &Matrix)]) -> Result<Matrix, RunError> {
        let Some(&kind) = self.schedule.get(self.step) else {
            return Err(RunError::Failed("the schedule is over".into()));
        };
        if self.step == 0 {
            if !inputs.is_empty() {
                return Err(RunError::Failed("the first exchange takes no inputs".into()));
            }
            self.start(kind, env)?;
        } else {
            let previous = self.schedule[self.step - 1];
            self.check_inputs(inputs)?;
            self.state = match previous {
                Exchange::Max => {
                    let top = inputs
                        .iter()
                        .map(|(_, s)| s[(0, 0)])
                        .fold(self.state[(0, 0)], f64::max);
                    Matrix::from_element(1, 1, top)
                }
                _ => mix_row(&self.weights, self.index, &self.state, inputs),
            };
            if kind != previous {
                self.finish(previous, env)?;
                self.start(kind, env)?;
            }
        }
        self.step += 1;
        Ok(self.state.clone())
    }

    fn check_inputs(&self, inputs: &[(usize, &Matrix)]) -> Result<(), RunError> {
        let from: Vec<usize> = inputs.iter().map(|(j, _)| *j).collect();
        if from != self.neighbours() {
            return Err(RunError::Failed(format!(
                "agent {} mixes the values of agents {:?}, got {from:?}",
                self.index,
                self.neighbours()
            )));
        }
        let shape = self.state.shape();
        if let Some((j, _)) = inputs
            .iter()
            .find(|(_, s)| s.shape() != shape || !s.iter().all(|v| v.is_finite()))
        {
            return Err(RunError::Failed(format!(
                "agent {j}'s value is not a finite {}×{} matrix",
                shape.0, shape.1
            )));
        }
        Ok(())
    }

    /// Begins a block of `kind`: its first posted state.
    fn start(&mut self, kind: Exchange, env: &mut RunEnv<'_>) -> Result<(), RunError> {
        let p = self.config.p;
        let m = self.config.partition.len();
        match kind {
            Exchange::Gram => {
                if self.step == 0 {
                    // Alg. 1 step 1: an independent random initial segment, data-independent.
                    let rows = self.block.nrows();
                    let rng = env.rng();
                    self.update = Matrix::from_fn(rows, p, |_, _| StandardNormal.sample(&mut *rng));
                }
                self.state = matmul_tn(&self.update, &self.update);
            }
            Exchange::Message => {
                // 1–2. Clip, then Ỹ_i = X_i·V_i + N(0, (s_y·2βν)²); Δ_y is stated for all m
                // messages stacked (m·n·p coordinates).
                clip_spectral(&mut self.segment, self.config.clip_norm)?;
                let delta = message_sensitivity(self.beta, self.config.clip_norm);
                let y = env.gaussian_block_release(
                    MESSAGE_RELEASE,
                    matmul_tn(&self.block, &self.segment),
                    delta,
                    self.config.message_multiplier * delta,
                    m * self.n() * p,
                )?;
                self.state = y.clone();
                self.message = Some(y);
            }
            Exchange::Max => self.state = Matrix::from_element(1, 1, self.local_max),
            Exchange::Segment => self.state = self.update.clone(),
        }
        Ok(())
    }

    /// Ends a block of `kind` with the consensus in `self.state`.
    fn finish(&mut self, kind: Exchange, env: &mut RunEnv<'_>) -> Result<(), RunError> {
        let m = self.config.partition.len() as f64;
        match kind {
            // 5. V_i = Ũ_i·G_i^{−1/2}, G_i = m·(consensus of the Grams).
            Exchange::Gram => self.segment = orthonormalise_one(&self.update, &self.state, m)?,
            // 3. C_i = m·Ȳ_i, rows clipped to τ (post-processing).
            Exchange::Message => {
                let mut estimate = &self.state * m;
                clip_rows_l2(&mut estimate, self.config.consensus_clip);
                self.local_max = estimate.row_iter().map(|r| r.norm()).fold(0.0, f64::max);
                self.estimate = estimate;
                self.averaged = Some(self.state.clone());
            }
            // 4. Ũ_i = X_iᵀC_i/c + N(0, (s_v·Δ_v)²), Δ_v = 2β·(agreed max row norm)/c, c = n;
            // Δ_v is stated for all m updates stacked (d·p coordinates).
            Exchange::Max => {
                let max_row = self.state[(0, 0)].max(self.local_max);
                let c = self.n() as f64;
                let delta = update_sensitivity(self.beta, max_row, c);
                let sd = self.config.update_multiplier * delta;
                if !(sd > 0.0 && sd.is_finite()) {
                    return Err(RunError::Failed(
                        "numerical overflow in the gossip power iteration".into(),
                    ));
                }
                self.update = env.gaussian_block_release(
                    UPDATE_RELEASE,
                    matmul(&self.block, &self.estimate) / c,
                    delta,
                    sd,
                    self.d * self.config.p,
                )?;
                self.iterations_done += 1;
            }
            Exchange::Segment => {}
        }
        Ok(())
    }
}

/// V_i ← V_i·min(1, ν'/‖V_i‖₂) with ν' = ν·(1 − margin) (`linalg::clip::margin` of the
/// segment's entries). The computed ‖V_i‖₂, the square root of the Gram matrix's computed top
/// eigenvalue, can be below the exact norm by a relative O((d_i + p)·ε), and the scaling rounds
/// each entry again; the margin (d_i·p + 8)·ε covers both, so the exact spectral norm the
/// sensitivity relies on is at most ν, as the row clips' margin does for row norms (review of
/// session 34; without it the excess was of relative order 10⁻¹⁵).
fn clip_spectral(segment: &mut Matrix, clip_norm: f64) -> Result<(), RunError> {
    let gram = matmul_tn(segment, segment);
    let top = try_sym_eig(&gram)
        .map_err(|_| RunError::Failed("an iterate is not finite".into()))?
        .values[0];
    let norm = top.max(0.0).sqrt();
    let target = clip_norm * (1.0 - margin(segment.len()));
    if norm > target {
        *segment *= target / norm;
    }
    Ok(())
}

/// V_i = Ũ_i·(m·g)^{−1/2} with g the agent's consensus of the Grams (eigenvalues floored at
/// 1e-12 of the largest).
fn orthonormalise_one(u: &Matrix, g: &Matrix, m: f64) -> Result<Matrix, RunError> {
    let eig = try_sym_eig(&(g * m))
        .map_err(|_| RunError::Failed("numerical overflow in the gossip power iteration".into()))?;
    let floor = eig.values[0].max(0.0) * 1e-12;
    if !(floor > 0.0 && floor.is_finite()) {
        return Err(RunError::Failed("the iterate collapsed to zero".into()));
    }
    let inv_sqrt = eig.values.map(|v| 1.0 / v.max(floor).sqrt());
    let root = &eig.vectors * Matrix::from_diagonal(&inv_sqrt) * eig.vectors.transpose();
    Ok(u * root)
}

/// Alg. 1 step 8: the segments stacked by `partition` (d×p), then the top-k left singular
/// vectors, sign-fixed (Rayleigh–Ritz on released values).
pub fn assemble(
    partition: &[Vec<usize>],
    segments: &[Matrix],
    d: usize,
    k: usize,
) -> Result<Output, RunError> {
    let p = segments.first().map_or(0, Matrix::ncols);
    if segments.len() != partition.len()
        || k > p
        || segments
            .iter()
            .zip(partition)
            .any(|(s, f)| s.nrows() != f.len() || s.ncols() != p)
    {
        return Err(RunError::Failed("the segments do not fit the partition".into()));
    }
    let mut stacked = Matrix::zeros(d, p);
    for (features, segment) in partition.iter().zip(segments) {
        for (row, &j) in features.iter().enumerate() {
            stacked.row_mut(j).copy_from(&segment.row(row));
        }
    }
    let svd =
        try_thin_svd(&stacked).map_err(|_| RunError::Failed("the final SVD did not converge".into()))?;
    let mut basis = svd.u.columns(0, k).into_owned();
    fix_signs(&mut basis);
    Ok(Output {
        basis,
        eigenvalues: None,
    })
}

#[cfg(test)]
#[path = "agent_tests.rs"]
mod tests;
