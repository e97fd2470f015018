//! `gossip_power` as a job: the [`Algorithm`] over the simulated network, every agent a
//! [`super::agent::Agent`] in this process, exchanging through memory what a live study's agents
//! exchange through the coordinator. The configuration and calibration are [`super::power`]'s.

use super::agent::{Agent, Exchange, assemble, schedule};
use super::power::*;
use crate::algorithms::{
    Algorithm, AlgorithmInfo, ConfigError, DataInput, NoiseScale, Output, Run, RunEnv, RunError, catalog,
};
use crate::dataset::DataContext;
use crate::linalg::Matrix;
use crate::privacy::{Cost, PrivacyTarget};

impl Algorithm for GossipPower {
    const INFO: &'static AlgorithmInfo = &catalog::GOSSIP_POWER;
    type Params = GossipPowerParams;
    type Config = GossipPowerConfig;

    fn configure(
        &self,
        params: GossipPowerParams,
        ctx: &DataContext,
        target: &PrivacyTarget,
    ) -> Result<GossipPowerConfig, ConfigError> {
        configure(params, ctx, target)
    }

    /// ρ = L·(1/(2s_y²) + 1/(2s_v²)) (module doc), independent of the data and of Δ.
    fn cost(&self, config: &GossipPowerConfig, _ctx: &DataContext) -> Cost {
        Cost::gaussian_zcdp(cost_of(
            config.iterations,
            config.message_multiplier,
            config.update_multiplier,
        ))
    }

    fn noise_scales(&self, config: &GossipPowerConfig, ctx: &DataContext) -> Vec<NoiseScale> {
        let delta_y = row_norm_bound(&ctx.neighbours).map(|beta| message_sensitivity(beta, config.clip_norm));
        vec![
            NoiseScale {
                release: MESSAGE_RELEASE.into(),
                distribution: "gaussian".into(),
                multiplier: config.message_multiplier,
                sensitivity: delta_y,
                count: config.iterations as usize,
                description: format!(
                    "Gaussian noise on every agent's message X_i·V_i (n×p) at each of {} iterations; stacked sensitivity 2βν, sd = multiplier × sensitivity{}.",
                    config.iterations,
                    delta_y.map_or(String::new(), |delta| format!(
                        " = {:.6e}",
                        config.message_multiplier * delta
                    ))
                ),
            },
            NoiseScale {
                release: UPDATE_RELEASE.into(),
                distribution: "gaussian".into(),
                multiplier: config.update_multiplier,
                sensitivity: None,
                count: config.iterations as usize,
                description: format!(
                    "Gaussian noise on every agent's update X_iᵀC_i/c at each of {} iterations; sd = multiplier × 2β·max row norm of the (public) consensus estimates C_i / c, recomputed each iteration.",
                    config.iterations
                ),
            },
        ]
    }

    /// Runs the simulated network; all noise goes through `env` under [`MESSAGE_RELEASE`] and
    /// [`UPDATE_RELEASE`]. Records the releases `consensus_error`, `spectral_gap` and
    /// `gossip_rounds`.
    fn run(&self, config: &GossipPowerConfig, run: Run<'_, '_>) -> Result<Output, RunError> {
        let Run { input, ctx, env } = run;
        let run = simulate(input, config, ctx, env)?;
        env.record_release("consensus_error", run.consensus_error());
        env.record_release("spectral_gap", run.spectral_gap);
        env.record_release("gossip_rounds", config.gossip_rounds);
        Ok(run.output)
    }
}

/// What a simulated run produced, with the public facts of each iteration.
#[derive(Debug, Clone)]
pub struct Simulation {
    pub output: Output,
    /// Per iteration: max_i ‖Ȳ_i − ȳ‖_F / ‖ȳ‖_F, with Ȳ_i agent i's consensus value after K
    /// rounds and ȳ = (1/m)Σ_j Ỹ_j the exact mean of the noisy messages (post-processing).
    pub consensus_errors: Vec<f64>,
    /// Per iteration: max_{i,r}‖C_i\[r,:\]‖₂, the public quantity Δ_v is computed from.
    pub max_row_norms: Vec<f64>,
    /// The scalar c (= n).
    pub scale: f64,
    /// 1 − SLEM(W).
    pub spectral_gap: f64,
}

impl Simulation {
    /// The largest consensus error over the iterations.
    pub fn consensus_error(&self) -> f64 {
        self.consensus_errors.iter().copied().fold(0.0, f64::max)
    }
}

/// Whether a stored configuration is one `configure` could have made for `d` features.
fn stored_config_fits(config: &GossipPowerConfig, d: usize) -> bool {
    let (k, p) = (config.k, config.p);
    k >= 1
        && k <= p
        && p <= d
        && (1..=MAX_ITERATIONS).contains(&config.iterations)
        && (1..=MAX_GOSSIP_ROUNDS).contains(&config.gossip_rounds)
        && check_partition(&config.partition, d).is_ok()
        && config.agents() >= 2
        && [
            config.message_multiplier,
            config.update_multiplier,
            config.clip_norm,
        ]
        .iter()
        .all(|s| *s > 0.0 && s.is_finite())
}

/// Runs the protocol of the module doc on records `input`.
pub fn simulate(
    input: DataInput<'_>,
    config: &GossipPowerConfig,
    ctx: &DataContext,
    env: &mut RunEnv<'_>,
) -> Result<Simulation, RunError> {
    let d = ctx.d;
    let (k, l_total) = (config.k, config.iterations);
    let fits = stored_config_fits(config, d);
    let beta = row_norm_bound(&ctx.neighbours);
    let (DataInput::Records { xt }, Some(beta), true) = (input, beta, fits) else {
        return Err(RunError::unfit());
    };
    if xt.nrows() != d || xt.ncols() == 0 {
        return Err(RunError::Failed(
            "the data does not match the dataset's dimension".into(),
        ));
    }
    let mixing = config.mixing()?;
    let m = config.agents();
    // Agent i's records restricted to its features, transposed: d_i×n. Each agent runs the
    // per-agent steps a live site runs (`gossip::agent`); the simulation relays their values.
    let mut agents = config
        .partition
        .iter()
        .enumerate()
        .map(|(i, features)| Agent::new(config, i, xt.select_rows(features.iter()), beta, d))
        .collect::<Result<Vec<Agent>, RunError>>()?;
    let neighbours: Vec<Vec<usize>> = agents.iter().map(Agent::neighbours).collect();
    let plan = schedule(config);
    let mut posts: Vec<Matrix> = Vec::new();
    let mut consensus_errors = Vec::with_capacity(l_total as usize);
    let mut max_row_norms = Vec::with_capacity(l_total as usize);
    let mut done = 0;
    for (t, &kind) in plan.iter().enumerate() {
        let mut next = Vec::with_capacity(m);
        for (agent, around) in agents.iter_mut().zip(&neighbours) {
            let inputs: Vec<(usize, &Matrix)> = if t == 0 {
                Vec::new()
            } else {
                around.iter().map(|&j| (j, &posts[j])).collect()
            };
            next.push(agent.advance(env, &inputs)?);
        }
        posts = next;
        // The message consensus ends as the max-consensus begins: the public facts of it.
        if kind == Exchange::Max && plan[t - 1] == Exchange::Message {
            let pairs: Vec<(&Matrix, &Matrix)> = agents.iter().filter_map(Agent::last_consensus).collect();
            let messages: Vec<Matrix> = pairs.iter().map(|(y, _)| (*y).clone()).collect();
            let averaged: Vec<Matrix> = pairs.iter().map(|(_, z)| (*z).clone()).collect();
            consensus_errors.push(consensus_error(&messages, &averaged));
            max_row_norms.push(agents.iter().map(Agent::local_max).fold(0.0, f64::max));
        }
        if agents[0].iterations_done() > done {
            done = agents[0].iterations_done();
            env.progress(done, l_total)?;
        }
    }
    // Alg. 1 step 8: the agents share their segments; Rayleigh–Ritz on the stacked release.
    let output = assemble(&config.partition, &posts, d, k)?;
    Ok(Simulation {
        output,
        consensus_errors,
        max_row_norms,
        scale: xt.ncols() as f64,
        spectral_gap: mixing.spectral_gap(),
    })
}

/// max_i ‖Ȳ_i − ȳ‖_F / ‖ȳ‖_F with ȳ the exact mean of `messages`.
fn consensus_error(messages: &[Matrix], averaged: &[Matrix]) -> f64 {
    let mut mean = Matrix::zeros(messages[0].nrows(), messages[0].ncols());
    for y in messages {
        mean += y;
    }
    mean /= messages.len() as f64;
    let scale = mean.norm();
    averaged
        .iter()
        .map(|z| (z - &mean).norm() / scale)
        .fold(0.0, f64::max)
}
