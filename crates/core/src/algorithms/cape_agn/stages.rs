//! The two CAPE stages of capeAGN (Alg. 3 steps 1–7 and 10–13) and the whole simulated run
//! over S shards of a records dataset.

use std::collections::BTreeMap;
use std::ops::Range;

use super::config::{CapeAgnConfig, Model};
use super::moments::{second_moment, third_moment};
use super::whitening::Decomposition;
use super::whitening::{noise_floor, unwhiten, whiten};
use crate::algorithms::cape_noise::Seed;
use crate::algorithms::cape_noise::{
    self as cape, CapeLattice, CapeNoise, CapeReport, fresh_seed, pack_upper, site_release, unpack_symmetric,
};
use crate::algorithms::tensor_power::{self, PowerSettings, packed_len};
use crate::algorithms::{RunEnv, RunError};
use crate::linalg::Matrix;

/// Column ranges of `n` records split into contiguous shards proportional to `shares`.
pub fn shard_ranges(n: usize, shares: &[f64]) -> Vec<Range<usize>> {
    let mut out = Vec::with_capacity(shares.len());
    let mut cumulative = 0.0;
    let mut start = 0;
    for (s, share) in shares.iter().enumerate() {
        cumulative += share;
        let end = if s + 1 == shares.len() {
            n
        } else {
            ((cumulative * n as f64).round() as usize).clamp(start, n)
        };
        out.push(start..end);
        start = end;
    }
    out
}

/// A finished simulation.
#[derive(Debug, Clone)]
pub struct SimulatedRun {
    pub decomposition: Decomposition,
    pub stage1: CapeReport,
    pub stage2: CapeReport,
}

/// Seeds of one CAPE stage: every pair's seed and the aggregator's seed per site (simulate
/// mode draws them from the run's public randomness; live sites agree on pair seeds by X25519).
pub struct StageSeeds {
    pairs: BTreeMap<(u32, u32), Seed>,
    aggregator: BTreeMap<u32, Seed>,
}

impl StageSeeds {
    pub fn fresh(sites: u32, env: &mut RunEnv<'_>) -> Self {
        let mut pairs = BTreeMap::new();
        for a in 1..=sites {
            for b in a + 1..=sites {
                pairs.insert((a, b), fresh_seed(env.rng()));
            }
        }
        let aggregator = (1..=sites).map(|s| (s, fresh_seed(env.rng()))).collect();
        Self { pairs, aggregator }
    }

    /// Site `me`'s pair seeds with every other site.
    pub fn of(&self, me: u32, sites: u32) -> Vec<(u32, Seed)> {
        (1..=sites)
            .filter(|&j| j != me)
            .map(|j| (j, self.pairs[&(me.min(j), me.max(j))]))
            .collect()
    }

    /// The aggregator's seed of every site.
    pub fn aggregator(&self) -> &BTreeMap<u32, Seed> {
        &self.aggregator
    }
}

pub(super) fn failed(e: impl std::fmt::Display) -> RunError {
    RunError::Failed(e.to_string())
}

fn check_shards(shards: &[Matrix], config: &CapeAgnConfig) -> Result<usize, RunError> {
    let d = shards
        .first()
        .map(Matrix::nrows)
        .ok_or_else(|| failed("no sites"))?;
    if shards.len() != config.sites as usize || shards.iter().any(|s| s.nrows() != d) {
        return Err(failed("the shards do not match the configuration"));
    }
    Ok(d)
}

/// Every site's message in turn, `message(s, shard, pair seeds)`, kept for the sites that send:
/// a dropout's message is formed and discarded, so the generator advances as if it had sent.
fn site_messages(
    shards: &[Matrix],
    config: &CapeAgnConfig,
    mut message: impl FnMut(u32, &Matrix, &[(u32, Seed)]) -> Result<Vec<f64>, RunError>,
    seeds: &StageSeeds,
) -> Result<BTreeMap<u32, Vec<f64>>, RunError> {
    let sites = config.sites;
    let mut releases = BTreeMap::new();
    for (s, shard) in (1..=sites).zip(shards) {
        let sent = message(s, shard, &seeds.of(s, sites))?;
        if !config.dropouts.contains(&s) {
            releases.insert(s, sent);
        }
    }
    Ok(releases)
}

/// Stage 1 (Alg. 3 steps 1–7): every site sends its packed M₂^s by CAPE; the aggregator's
/// Σ_{s sent}(M̂₂^s − F₂^s), packed upper triangle.
pub fn stage1_aggregate(
    shards: &[Matrix],
    config: &CapeAgnConfig,
    seeds: &StageSeeds,
    env: &mut RunEnv<'_>,
) -> Result<Vec<f64>, RunError> {
    let d = check_shards(shards, config)?;
    let releases = site_messages(
        shards,
        config,
        |s, shard, pair_seeds| {
            let statistic = pack_upper(&second_moment(shard, config.model, config.sigma2));
            site_release(
                &statistic,
                s,
                pair_seeds,
                &seeds.aggregator[&s],
                &config.stage1,
                env,
            )
        },
        seeds,
    )?;
    cape::aggregate(&releases, &seeds.aggregator, d * (d + 1) / 2, &config.stage1).map_err(failed)
}

/// Site s's stage-2 message (Alg. 3 steps 10–11), shared by the simulation and the live site
/// (`src/protocols/cape/site.rs`): the CAPE lattice release of its packed D-dimensional M₃^s,
/// h·(round(M₃^s/h) + E₃ + F₃ + G₃) ([`site_release`], the same mechanism and cost as any CAPE
/// release of C(D+2, 3) values with Δ = `noise.sensitivity`), then projected by the public W
/// (packed K×K×K). The projection is a deterministic function of that lattice vector and W,
/// so the message is post-processing of the lattice release whose cost the calibration covers.
#[allow(clippy::too_many_arguments)]
pub fn stage2_message(
    records: &Matrix,
    model: Model,
    sigma2: f64,
    w: &Matrix,
    me: u32,
    pair_seeds: &[(u32, Seed)],
    aggregator_seed: &Seed,
    noise: &CapeNoise,
    env: &mut RunEnv<'_>,
) -> Result<Vec<f64>, RunError> {
    let d = records.nrows();
    if w.nrows() != d {
        return Err(failed("W does not match the records"));
    }
    let m3 = third_moment(records, model, sigma2);
    let release = site_release(&m3, me, pair_seeds, aggregator_seed, noise, env)?;
    tensor_power::project_packed(&release, d, w).map_err(failed)
}

/// The aggregator's stage-2 sum Σ_{s sent}(M̃₃^s − F₃^s(W, W, W)) (Alg. 3 step 13), shared by
/// the simulation and the live coordinator: F₃^s is expanded on the D-dimensional lattice
/// (`packed_len(d)` values) and projected like the messages.
pub fn stage2_sum(
    releases: &BTreeMap<u32, Vec<f64>>,
    aggregator_seeds: &BTreeMap<u32, Seed>,
    noise: &CapeNoise,
    w: &Matrix,
) -> Result<Vec<f64>, String> {
    let d = w.nrows();
    let len3 = packed_len(d);
    let lattice = CapeLattice::new(noise, len3).map_err(|e| e.to_string())?;
    let mut total = vec![0.0; packed_len(w.ncols())];
    for (site, release) in releases {
        if release.len() != total.len() {
            return Err(format!(
                "site {site}'s stage-2 release has {} entries, not {}",
                release.len(),
                total.len()
            ));
        }
        let seed = aggregator_seeds
            .get(site)
            .ok_or_else(|| format!("no aggregator seed for site {site}"))?;
        let f = tensor_power::project_packed(&lattice.aggregator_term(seed, len3), d, w)?;
        for ((acc, m), f) in total.iter_mut().zip(release).zip(f) {
            *acc += m - f;
        }
    }
    if total.iter().all(|v| v.is_finite()) {
        Ok(total)
    } else {
        Err("numerical overflow in the stage-2 aggregate".into())
    }
}

/// Stage 2 (steps 9–13) in simulation: every site forms its [`stage2_message`] (a dropout's is
/// drawn and discarded, so the generator advances as if it had sent), and the aggregator's
/// [`stage2_sum`].
pub fn stage2_aggregate(
    shards: &[Matrix],
    config: &CapeAgnConfig,
    seeds: &StageSeeds,
    w: &Matrix,
    env: &mut RunEnv<'_>,
) -> Result<Vec<f64>, RunError> {
    let d = check_shards(shards, config)?;
    if w.nrows() != d {
        return Err(failed("W does not match the shards"));
    }
    let releases = site_messages(
        shards,
        config,
        |s, shard, pair_seeds| {
            let aggregator_seed = &seeds.aggregator[&s];
            stage2_message(
                shard,
                config.model,
                config.sigma2,
                w,
                s,
                pair_seeds,
                aggregator_seed,
                &config.stage2,
                env,
            )
        },
        seeds,
    )?;
    stage2_sum(&releases, &seeds.aggregator, &config.stage2, w).map_err(failed)
}

/// Runs Alg. 3 over the domain-projected shards `shards` (one d×n_s matrix per site), every
/// CAPE message formed as a live site would (module docs).
pub fn simulate(
    shards: &[Matrix],
    config: &CapeAgnConfig,
    env: &mut RunEnv<'_>,
) -> Result<SimulatedRun, RunError> {
    let d = check_shards(shards, config)?;
    let survivors: Vec<u32> = (1..=config.sites)
        .filter(|s| !config.dropouts.contains(s))
        .collect();
    env.progress(0, 3)?;
    let seeds = StageSeeds::fresh(config.sites, env);
    let sum = stage1_aggregate(shards, config, &seeds, env)?;
    let m2 = unpack_symmetric(&sum, d).map_err(failed)?;
    let stage1 = config.stage1.report(survivors.clone(), config.dropouts.clone());
    env.progress(1, 3)?;
    let whitening = whiten(&m2, config.k, noise_floor(d, stage1.noise_sd))?;
    let seeds = StageSeeds::fresh(config.sites, env);
    let t = stage2_aggregate(shards, config, &seeds, &whitening.w, env)?;
    env.progress(2, 3)?;
    let settings = PowerSettings {
        starts: config.starts,
        iterations: config.power_iterations,
    };
    let pairs = tensor_power::tensor_power(&t, config.k, config.k, settings, env.rng()).map_err(failed)?;
    let decomposition = Decomposition {
        components: unwhiten(&whitening, &pairs, config.model),
        clamped: whitening.clamped,
    };
    env.progress(3, 3)?;
    Ok(SimulatedRun {
        decomposition,
        stage1,
        stage2: config.stage2.report(survivors, config.dropouts.clone()),
    })
}
