//! `cape_pca`: improved distributed private PCA with correlated noise, capePCA (Imtiaz &
//! Sarwate, Alg. 2 over Alg. 1; docs/design/cape.md).
//!
//! Sites s = 1..S hold disjoint clipped records X_s. One shot: site s sends
//! Â_s = A_s + E_s + F_s + G_s (Alg. 2 step 6) with A_s = X_sᵀX_s in sum form (the packed upper
//! triangle, diagonal included), E_s zero-sum pair noise, F_s from the aggregator, G_s its own
//! ([`crate::algorithms::cape_noise`]). The aggregator forms Â = Σ_s (Â_s − F_s) (step 8; dividing by
//! the public N would give the paper's weighted average with μ_s = N_s/N, §III-A, and does not
//! change the eigenvectors) and releases the top-k eigenvectors of Â (steps 9–10) and their
//! eigenvalues (post-processing).
//!
//! Sensitivity. One record of site s moves A_s by C = xxᵀ (add_remove, ‖C‖_F ≤ β²) or
//! xxᵀ − yyᵀ (replace_one, ‖C‖_F ≤ √2·β²), as `analyze_gauss` — in sum form the same Δ for
//! every site whatever N_s, which is why unequal sizes need no special weights here.
//! Privacy: ρ-zCDP against the aggregator's joint view of all messages, charged to every site
//! (the calibration in [`crate::algorithms::cape_noise`]); the release is post-processing of that view.
//!
//! As a job (simulate mode) the service holds every shard: contiguous shards of the dataset's
//! rows, of near-equal sizes or proportional to `site_shares`; sites listed in `dropouts` send
//! nothing. As a study, real sites run `privpca site`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::analyze_gauss::sensitivity;
use super::calibration::check_opening;
use super::{
    Algorithm, AlgorithmInfo, ConfigError, DataInput, NoiseScale, Output, Run, RunEnv, RunError, catalog,
};
use crate::algorithms::cape_noise::Seed;
use crate::algorithms::cape_noise::{self as cape, CapeNoise, CapeReport, DEFAULT_PAIR_RATIO};
use crate::dataset::{DataContext, Kind};
use crate::linalg::{Records, gram_t};
use crate::privacy::{Cost, PrivacyTarget};

/// Default number of simulated sites.
pub const DEFAULT_SITES: u32 = 3;
/// Most sites of one CAPE federation (every pair shares a seed: S² work at each site).
pub const MAX_SITES: u32 = 64;

/// What the client sends (a study takes the sites at its top level and refuses `sites`,
/// `site_shares` and `dropouts` here).
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapePcaParams {
    /// Target rank: number of principal components returned (1 ≤ k ≤ d).
    #[schemars(range(min = 1))]
    pub k: usize,
    /// Jobs only (simulate mode): number of sites S, 2–64; the rows are split into contiguous
    /// shards.
    #[serde(default)]
    #[schemars(range(min = 2, max = MAX_SITES), extend("default" = DEFAULT_SITES))]
    pub sites: Option<u32>,
    /// Jobs only: relative shard sizes, S positive numbers (e.g. [1, 2, 4]). Default:
    /// near-equal shards.
    #[serde(default)]
    pub site_shares: Option<Vec<f64>>,
    /// Jobs only: sites (1-based) that send nothing; their pair noise then does not cancel and
    /// the result reports the noise achieved.
    #[serde(default)]
    pub dropouts: Vec<u32>,
    /// κ: variance of each pairwise zero-sum term as a multiple of the pooled variance, in
    /// [0.001, 1e6]. Larger κ brings the aggregate closer to the pooled noise; a dropout then
    /// leaves more noise.
    #[serde(default)]
    #[schemars(range(min = 0.001, max = 1e6), extend("default" = DEFAULT_PAIR_RATIO))]
    pub pair_ratio: Option<f64>,
}

/// Every parameter fixed and the noise calibrated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapePcaConfig {
    pub k: usize,
    pub sites: u32,
    /// Relative shard sizes (simulate mode); `None`: near-equal.
    #[serde(default)]
    pub site_shares: Option<Vec<f64>>,
    #[serde(default)]
    pub dropouts: Vec<u32>,
    pub pair_ratio: f64,
    pub noise: CapeNoise,
    /// A live study's private clip ([`super::cape_clip`]); jobs clip centrally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clip: Option<super::cape_clip::CapeClip>,
    /// A live study's centre ([`super::cape_center`]); jobs centre centrally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub center: Option<super::cape_center::CapeCenter>,
}

/// Validates k, S and κ and calibrates (shared by jobs and studies).
pub fn configure_for(
    k: usize,
    pair_ratio: Option<f64>,
    ctx: &DataContext,
    target: &PrivacyTarget,
    sites: u32,
    sites_field: &str,
) -> Result<CapePcaConfig, ConfigError> {
    if ctx.kind() != Kind::Records {
        return Err(ConfigError::Unsupported(
            "cape_pca runs on records held at sites".into(),
        ));
    }
    let rho = check_opening(ctx, target, k)?;
    if !(2..=MAX_SITES).contains(&sites) {
        return Err(ConfigError::invalid(
            sites_field,
            format!(
                "CAPE needs 2 to {MAX_SITES} sites (got {sites}): with one site there is nothing to correlate"
            ),
        ));
    }
    let pair_ratio = pair_ratio.unwrap_or(DEFAULT_PAIR_RATIO);
    if !(pair_ratio.is_finite() && (1e-3..=1e6).contains(&pair_ratio)) {
        return Err(ConfigError::invalid(
            "params.pair_ratio",
            "must lie in [0.001, 1e6]",
        ));
    }
    let noise =
        CapeNoise::calibrate(sensitivity(&ctx.neighbours), rho, sites, pair_ratio).ok_or_else(|| {
            ConfigError::invalid(
                "rho",
                "is too small or too large to calibrate noise in floating point",
            )
        })?;
    Ok(CapePcaConfig {
        k,
        sites,
        site_shares: None,
        dropouts: Vec::new(),
        pair_ratio,
        noise,
        clip: None,
        center: None,
    })
}

/// Checks a simulated split of the dataset's records into `sites` contiguous shards with the
/// sites in `dropouts` (1-based) silent, and returns the dropouts sorted and deduplicated.
/// Shared by the simulate modes of `cape_pca` and `cape_agn`.
pub(crate) fn simulated_split(
    ctx: &DataContext,
    sites: u32,
    dropouts: &[u32],
) -> Result<Vec<u32>, ConfigError> {
    if let Some(n) = ctx.n
        && n < sites as usize
    {
        return Err(ConfigError::invalid(
            "params.sites",
            format!("cannot split {n} records into {sites} sites"),
        ));
    }
    let mut dropouts = dropouts.to_vec();
    dropouts.sort_unstable();
    dropouts.dedup();
    if let Some(bad) = dropouts.iter().find(|&&s| !(1..=sites).contains(&s)) {
        return Err(ConfigError::invalid(
            "params.dropouts",
            format!("site {bad} is not in 1..={sites}"),
        ));
    }
    if dropouts.len() >= sites as usize {
        return Err(ConfigError::invalid(
            "params.dropouts",
            "at least one site must send",
        ));
    }
    // Simulated shards are contiguous by record index. Under add_remove one added record shifts
    // every later shard boundary, so the records a dropped site holds would change with it and
    // the survivors' sum could move by more than one record (docs/design/cape.md, "Outcomes that
    // do not depend on n"). Without dropouts the sum covers every shard and equals the whole
    // statistic whatever the split. The relation is public: this refusal reveals nothing.
    if !dropouts.is_empty() && ctx.relation() == crate::dataset::Relation::AddRemove {
        return Err(ConfigError::invalid(
            "params.dropouts",
            "simulated dropouts need a replace_one dataset: under add_remove the contiguous shards move with the private n",
        ));
    }
    Ok(dropouts)
}

/// Column ranges of `n` records split into contiguous shards proportional to `shares` (or
/// near-equal when `None`): boundaries at round(cumulative share · n). The rule does not look at
/// whether n ≥ S: a shard may be empty, and its site then sends noise only (n is private under
/// add_remove, so no outcome may depend on it).
pub fn shard_ranges(n: usize, sites: usize, shares: Option<&[f64]>) -> Vec<std::ops::Range<usize>> {
    let Some(shares) = shares else {
        return (0..sites)
            .map(|s| (s * n / sites)..((s + 1) * n / sites))
            .collect();
    };
    let total: f64 = shares.iter().sum();
    let mut start = 0;
    let mut acc = 0.0;
    shares
        .iter()
        .enumerate()
        .map(|(i, w)| {
            acc += w;
            let end = if i + 1 == shares.len() {
                n
            } else {
                ((acc / total * n as f64).round() as usize).clamp(start, n)
            };
            let range = start..end;
            start = end;
            range
        })
        .collect()
}

/// The aggregator's last step: the top-k eigenpairs of the aggregate Â (Alg. 2 steps 9–10).
pub fn finish(aggregate: &[f64], d: usize, k: usize) -> Result<Output, RunError> {
    let a = cape::unpack_symmetric(aggregate, d).map_err(RunError::Failed)?;
    Output::top_eigenpairs(&a, k)
}

/// A site's statistic: the packed upper triangle of X_sᵀX_s (`xt` = X_sᵀ, d×n_s, clipped).
pub fn site_statistic<'a>(xt: impl Into<Records<'a>>) -> Vec<f64> {
    let xt = xt.into();
    if xt.ncols() == 0 {
        return vec![0.0; xt.nrows() * (xt.nrows() + 1) / 2];
    }
    cape::pack_upper(&gram_t(xt))
}

/// correlated-noise PCA.
#[derive(Debug, Clone, Copy, Default)]
pub struct CapePca;

impl Algorithm for CapePca {
    const INFO: &'static AlgorithmInfo = &catalog::CAPE_PCA;
    type Params = CapePcaParams;
    type Config = CapePcaConfig;

    fn configure(
        &self,
        params: CapePcaParams,
        ctx: &DataContext,
        target: &PrivacyTarget,
    ) -> Result<CapePcaConfig, ConfigError> {
        let sites = params.sites.unwrap_or(DEFAULT_SITES);
        let mut config = configure_for(params.k, params.pair_ratio, ctx, target, sites, "params.sites")?;
        if let Some(shares) = &params.site_shares {
            if shares.len() != sites as usize {
                return Err(ConfigError::invalid(
                    "params.site_shares",
                    format!("needs one share per site ({sites}); got {}", shares.len()),
                ));
            }
            if !shares.iter().all(|w| w.is_finite() && *w > 0.0) {
                return Err(ConfigError::invalid(
                    "params.site_shares",
                    "every share must be a finite number > 0",
                ));
            }
            config.site_shares = Some(shares.clone());
        }
        config.dropouts = simulated_split(ctx, sites, &params.dropouts)?;
        Ok(config)
    }

    /// ρ_joint = (Δ²/2)·(g + v)/(g·(S·v + g)), one correlated Gaussian mechanism.
    fn cost(&self, config: &CapePcaConfig, _ctx: &DataContext) -> Cost {
        Cost::gaussian_zcdp(config.noise.cost())
    }

    fn noise_scales(&self, config: &CapePcaConfig, ctx: &DataContext) -> Vec<NoiseScale> {
        let delta = sensitivity(&ctx.neighbours);
        let n = &config.noise;
        let entries = ctx.d * (ctx.d + 1) / 2;
        let s = config.sites as usize;
        let scale = |release: &str, sd: f64, count: usize, description: String| {
            NoiseScale::gaussian(release, sd, delta, count, description)
        };
        vec![
            scale(
                cape::OWN_NOISE,
                n.own_sd,
                s,
                format!(
                    "Each site's own symmetric noise G_s: {entries} entries of sd {:.4e}; the aggregate carries S of them (sd {:.4e} per entry, the pooled sd being {:.4e}).",
                    n.own_sd,
                    n.achieved_sd(s, 0),
                    n.pooled_sd
                ),
            ),
            scale(
                "cape_pair_noise",
                n.pair_sd,
                s * (s - 1) / 2,
                format!(
                    "One zero-sum term z_sj = −z_js per pair of sites, sd {:.4e}; cancels in the aggregate.",
                    n.pair_sd
                ),
            ),
            scale(
                "cape_aggregator_noise",
                n.aggregator_sd,
                s,
                format!(
                    "The aggregator's term F_s for each site, sd {:.4e}; it subtracts it again.",
                    n.aggregator_sd
                ),
            ),
        ]
    }

    fn run(&self, config: &CapePcaConfig, run: Run<'_, '_>) -> Result<Output, RunError> {
        let Run { input, ctx, env } = run;
        let DataInput::Records { xt } = input else {
            return Err(RunError::Failed("cape_pca runs on records".into()));
        };
        let d = ctx.d;
        if xt.nrows() != d || config.k > d {
            return Err(RunError::Failed(
                "the data does not match the dataset's dimension".into(),
            ));
        }
        let (output, report) = simulate(xt, config, env)?;
        env.record_release(
            "cape",
            serde_json::to_value(&report).map_err(|e| RunError::Failed(e.to_string()))?,
        );
        Ok(output)
    }
}

/// The whole protocol in process: fresh pair and aggregator seeds from `env` (known to no one
/// but the simulated parties), each site's message, the aggregate and its eigenvectors.
pub fn simulate<'a>(
    xt: impl Into<Records<'a>>,
    config: &CapePcaConfig,
    env: &mut RunEnv<'_>,
) -> Result<(Output, CapeReport), RunError> {
    let xt = xt.into();
    let (sum, report) = simulate_aggregate(xt, config, env)?;
    let output = finish(&sum, xt.nrows(), config.k)?;
    env.progress(config.sites + 1, config.sites + 1)?;
    Ok((output, report))
}

/// The aggregate Σ_{s∈U}(Â_s − F_s) of a simulated run (packed), and its noise report.
pub fn simulate_aggregate<'a>(
    xt: impl Into<Records<'a>>,
    config: &CapePcaConfig,
    env: &mut RunEnv<'_>,
) -> Result<(Vec<f64>, CapeReport), RunError> {
    let xt = xt.into();
    let sites = config.sites;
    // Every shard may be empty (a site with no records sends noise only): nothing here depends
    // on n, which is private under add_remove.
    let n = xt.ncols();
    let d = xt.nrows();
    let len = d * (d + 1) / 2;
    let mut pair: BTreeMap<(u32, u32), Seed> = BTreeMap::new();
    for a in 1..=sites {
        for b in a + 1..=sites {
            pair.insert((a, b), cape::fresh_seed(env.rng()));
        }
    }
    let aggregator_seeds: BTreeMap<u32, Seed> =
        (1..=sites).map(|s| (s, cape::fresh_seed(env.rng()))).collect();
    let ranges = shard_ranges(n, sites as usize, config.site_shares.as_deref());
    let mut releases = BTreeMap::new();
    for (me, range) in (1..=sites).zip(ranges) {
        env.progress(me - 1, sites + 1)?;
        if config.dropouts.contains(&me) {
            continue;
        }
        let shard = xt.block(range.start, range.len());
        let seeds: Vec<(u32, Seed)> = (1..=sites)
            .filter(|&j| j != me)
            .map(|j| (j, pair[&(me.min(j), me.max(j))]))
            .collect();
        let release = cape::site_release(
            &site_statistic(shard),
            me,
            &seeds,
            &aggregator_seeds[&me],
            &config.noise,
            env,
        )?;
        releases.insert(me, release);
    }
    let sum = cape::aggregate(&releases, &aggregator_seeds, len, &config.noise).map_err(RunError::Failed)?;
    let survivors: Vec<u32> = releases.keys().copied().collect();
    Ok((sum, config.noise.report(survivors, config.dropouts.clone())))
}

#[cfg(test)]
#[path = "cape_pca_tests.rs"]
mod tests;
