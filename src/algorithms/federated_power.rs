//! `federated_power`: the federated private power method (Nicolas et al. 2024, Alg. 2) with
//! secure aggregation (docs/design/federation.md).
//!
//! Sites s = 1..S hold disjoint clipped records X_s, A = Σ_s X_sᵀX_s. Round l: the coordinator
//! publishes X_{l−1}; site s releases Y_l^(s) = A^(s)·X_{l−1} + G^(s) with
//! G^(s) iid N(0, (m·Δ(X_{l−1}))²/t) (Alg. 2 line 6, the noise split over the sites); the
//! coordinator learns Σ_{s∈U_l} Y_l^(s) only, for a survivor set |U_l| ≥ t, and continues with
//! X_l = Q(thin QR of the sum). Output: the top-k left singular vectors of Y_L, as in
//! `noisy_power` (a Rayleigh–Ritz step on the last release).
//!
//! Privacy. The released sum carries noise of variance |U_l|·(mΔ)²/t ≥ (mΔ)², so each round is
//! at least the central Gaussian mechanism of `noisy_power` with multiplier m (Lemma 2.1), and L
//! rounds cost ρ = L/(2m²) (eqs. 25–27), charged to every site. A record lives at one site, so
//! its change moves A by the same xxᵀ (or xxᵀ − yyᵀ) as centrally: Δ is
//! [`super::sensitivity::power_sensitivity`] of the study's relation. Against a coalition of the
//! server with every other site, one site's release has noise variance (mΔ)²/t only; the
//! design page says so.
//!
//! This module holds the parameters, the calibration, the cost and the per-site computation.
//! The job form (`simulate` mode: the service holds every shard) runs the real protocol
//! in-process ([`crate::federation::simulate`]); the live form is a study
//! ([`crate::federation::power`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::noisy_power::{calibrate, check_k, cost_of, target_rho};
use super::sensitivity::{SensitivityMode, change_l1_bound, check_bounds, power_sensitivity, rank_one};
use super::{Algorithm, AlgorithmInfo, ConfigError, DataInput, NoiseScale, Output, RunEnv, RunError};
use crate::dataset::{DataContext, Kind, Neighbours, Relation};
use crate::federation::fixed_point;
use crate::linalg::{Matrix, Records, gram_t_times};
use crate::privacy::{Cost, PrivacyTarget};

/// Default number of rounds, as `noisy_power`.
pub const DEFAULT_ITERATIONS: u32 = super::noisy_power::DEFAULT_ITERATIONS;
/// Most rounds of a federated run: every round is a network round trip, and every site shares
/// L masking secrets with every other site at setup.
pub const MAX_ITERATIONS: u32 = 200;
/// Most sites of one federation (Shamir x-coordinates are bytes; shares grow as S²·L).
pub const MAX_SITES: u32 = 64;
/// Default number of simulated sites.
pub const DEFAULT_SITES: u32 = 3;
/// Default largest number of records one site may hold (the no-wrap bound assumes it).
pub const DEFAULT_MAX_SITE_SAMPLES: u64 = 10_000_000;
/// Largest fraction-bit count the default picks: 2^-40 ≈ 1e-12 resolution is far below any
/// calibrated noise, and leaves integer headroom.
pub const MAX_DEFAULT_FRACTION_BITS: u32 = 40;
/// Noise draws are range-checked at this many standard deviations (a Gaussian beyond 40σ has
/// probability below 1e-340, i.e. never in f64).
pub const NOISE_TAIL_SDS: f64 = 40.0;
/// Audit label of a site's per-round noise.
pub const RELEASE: &str = "site_power_iteration";

/// The default threshold ⌈2S/3⌉, at least 2 (docs/design/algorithms.md, `federated_power`).
pub fn default_threshold(sites: u32) -> u32 {
    (2 * sites).div_ceil(3).max(2)
}

/// A simulated dropout: `site` (1-based) sends nothing from round `round` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Dropout {
    /// The site, 1-based.
    pub site: u32,
    /// The first round it does not send, 1-based.
    pub round: u32,
}

/// What the client sends (for a job; a study takes `sites` and `threshold` at its top level
/// and refuses them here).
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FederatedPowerParams {
    /// Target rank: number of principal components returned (1 ≤ k ≤ d).
    #[schemars(range(min = 1))]
    pub k: usize,
    /// Iteration rank (k ≤ p ≤ d). Default: min(d, 2k).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub p: Option<usize>,
    /// Rounds L (1–200).
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_ITERATIONS), extend("default" = DEFAULT_ITERATIONS))]
    pub iterations: Option<u32>,
    /// Sensitivity bound per round, as noisy_power (the sites compute it from the public
    /// iterate).
    #[serde(default)]
    pub sensitivity: SensitivityMode,
    /// Jobs only (simulate mode): number of simulated sites S, 2–64; the records are split into
    /// contiguous shards.
    #[serde(default)]
    #[schemars(range(min = 2, max = MAX_SITES), extend("default" = DEFAULT_SITES))]
    pub sites: Option<u32>,
    /// Jobs only: survivors needed per round t, 2 ≤ t ≤ S. Default: ⌈2S/3⌉.
    #[serde(default)]
    #[schemars(range(min = 2))]
    pub threshold: Option<u32>,
    /// Jobs only: [{"site": i, "round": r}]: simulated site i sends nothing from round r on.
    #[serde(default)]
    pub dropouts: Vec<Dropout>,
    /// Fixed-point fraction bits f (values scaled by 2^f); refused if the sum could wrap.
    /// Default: the largest that cannot wrap, ≤ 40.
    #[serde(default)]
    pub fraction_bits: Option<u32>,
    /// Largest number of records one site may hold (the no-wrap bound assumes it), 1–2⁴⁰.
    #[serde(default)]
    #[schemars(range(min = 1, max = 1_099_511_627_776u64), extend("default" = DEFAULT_MAX_SITE_SAMPLES))]
    pub max_site_samples: Option<u64>,
}

/// Every parameter fixed and the noise calibrated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FederatedPowerConfig {
    pub k: usize,
    pub p: usize,
    pub iterations: u32,
    pub sensitivity: SensitivityMode,
    /// The central noise multiplier m: the released sum has noise sd ≥ m·Δ(X_{l−1}).
    pub multiplier: f64,
    pub sites: u32,
    pub threshold: u32,
    pub fraction_bits: u32,
    pub max_site_samples: u64,
    #[serde(default)]
    pub dropouts: Vec<Dropout>,
}

/// The largest Δ(X) the mode can produce for any iterate with orthonormal columns: the
/// rank-one bound for `auto` and `rank_one` (auto is a minimum that includes it), eq. 12's bound
/// for `row_norm` (max row norm ≤ 1), √p times it for `hardt_price` (max entry ≤ 1).
pub fn max_sensitivity(mode: SensitivityMode, neighbours: &Neighbours, p: usize) -> f64 {
    let l1 = change_l1_bound(neighbours);
    match mode {
        SensitivityMode::Auto | SensitivityMode::RankOne => rank_one(neighbours).unwrap_or(l1),
        SensitivityMode::RowNorm => l1,
        SensitivityMode::HardtPrice => l1 * (p as f64).sqrt(),
    }
}

impl FederatedPowerConfig {
    /// Per-site noise sd for iterate sensitivity Δ: m·Δ/√t.
    pub fn site_sd(&self, delta: f64) -> f64 {
        self.multiplier * delta / f64::from(self.threshold).sqrt()
    }

    /// A bound on every entry of one site's release: |(A_s X)_ij| ≤ n_max·β² (each record adds
    /// x_i·(xᵀX_j) with |x_i|, |xᵀX_j| ≤ β) plus [`NOISE_TAIL_SDS`] noise sds.
    pub fn entry_bound(&self, neighbours: &Neighbours) -> f64 {
        let beta = match *neighbours {
            Neighbours::ReplaceOne { beta, .. } | Neighbours::AddRemove { beta, .. } => beta,
            Neighbours::Entry { u } => u,
        };
        let signal = self.max_site_samples as f64 * beta * beta;
        let noise = NOISE_TAIL_SDS * self.site_sd(max_sensitivity(self.sensitivity, neighbours, self.p));
        signal + noise
    }

    /// A bound on every entry of the sum over all sites.
    pub fn total_bound(&self, neighbours: &Neighbours) -> f64 {
        f64::from(self.sites) * self.entry_bound(neighbours)
    }
}

/// Validates and calibrates for `sites` sites with threshold `threshold` (shared by jobs and
/// studies). `params.sites`/`threshold`/`dropouts` are ignored here; the caller has resolved them.
pub fn configure_for(
    params: &FederatedPowerParams,
    ctx: &DataContext,
    target: &PrivacyTarget,
    sites: u32,
    threshold: u32,
) -> Result<FederatedPowerConfig, ConfigError> {
    if ctx.kind() != Kind::Records {
        return Err(ConfigError::Unsupported(
            "federated_power runs on records held at sites".into(),
        ));
    }
    check_bounds(&ctx.neighbours)?;
    let rho = target_rho(target)?;
    let d = ctx.d;
    check_k(params.k, d)?;
    let k = params.k;
    let p = params.p.unwrap_or(d.min(2 * k));
    if !(p >= k && p <= d) {
        return Err(ConfigError::invalid(
            "params.p",
            format!("must satisfy k = {k} ≤ p ≤ d = {d} (got {p})"),
        ));
    }
    let iterations = params.iterations.unwrap_or(DEFAULT_ITERATIONS);
    if !(1..=MAX_ITERATIONS).contains(&iterations) {
        return Err(ConfigError::invalid(
            "params.iterations",
            format!("must satisfy 1 ≤ iterations ≤ {MAX_ITERATIONS} for a federated run (got {iterations})"),
        ));
    }
    if !(2..=MAX_SITES).contains(&sites) {
        return Err(ConfigError::invalid(
            "sites",
            format!("a federation needs 2 to {MAX_SITES} sites (got {sites})"),
        ));
    }
    if !(threshold >= 2 && threshold <= sites) {
        return Err(ConfigError::invalid(
            "threshold",
            format!("must satisfy 2 ≤ t ≤ S = {sites} (got {threshold})"),
        ));
    }
    if !params.sensitivity.applies_to(&ctx.neighbours) {
        return Err(ConfigError::invalid(
            "params.sensitivity",
            "does not apply to this relation",
        ));
    }
    let max_site_samples = params.max_site_samples.unwrap_or(DEFAULT_MAX_SITE_SAMPLES);
    if !(1..=1 << 40).contains(&max_site_samples) {
        return Err(ConfigError::invalid(
            "params.max_site_samples",
            "must lie in 1..=2^40",
        ));
    }
    let multiplier = calibrate(iterations, rho);
    if !multiplier.is_finite() {
        return Err(ConfigError::invalid(
            "rho",
            "is too small to calibrate noise in floating point",
        ));
    }
    let mut config = FederatedPowerConfig {
        k,
        p,
        iterations,
        sensitivity: params.sensitivity,
        multiplier,
        sites,
        threshold,
        fraction_bits: 0,
        max_site_samples,
        dropouts: Vec::new(),
    };
    let total = config.total_bound(&ctx.neighbours);
    config.fraction_bits = match params.fraction_bits {
        Some(f) if fixed_point::fits(total, f) && f <= 52 => f,
        Some(f) => {
            return Err(ConfigError::invalid(
                "params.fraction_bits",
                format!(
                    "{f} fraction bits could wrap: S·(n_max·β² + {NOISE_TAIL_SDS}·σ_site) = {total:.4e} must stay below 2^(62−f){}",
                    fixed_point::max_fraction_bits(total, 52)
                        .map(|m| format!("; at most {m} bits fit"))
                        .unwrap_or_default()
                ),
            ));
        }
        None => fixed_point::max_fraction_bits(total, MAX_DEFAULT_FRACTION_BITS).ok_or_else(|| {
            ConfigError::invalid(
                "params.max_site_samples",
                format!("the sum bound {total:.4e} does not fit a 64-bit fixed-point encoding; lower max_site_samples"),
            )
        })?,
    };
    Ok(config)
}

/// One site's release for the iterate `x` (d×p): A_s·x + G, G iid N(0, (m·Δ(x))²/t)
/// (Nicolas et al. Alg. 2 line 6). `xt` is the site's clipped records, d×n_s. Noise goes
/// through `env` under [`RELEASE`].
pub fn site_update<'a>(
    xt: impl Into<Records<'a>>,
    x: &Matrix,
    config: &FederatedPowerConfig,
    neighbours: &Neighbours,
    env: &mut RunEnv<'_>,
) -> Result<Matrix, RunError> {
    let xt = xt.into();
    let d = x.nrows();
    if xt.nrows() != d || x.ncols() != config.p {
        return Err(RunError::Failed(
            "the iterate does not match the site's data".into(),
        ));
    }
    let delta = power_sensitivity(config.sensitivity, neighbours, x)
        .ok_or_else(|| RunError::Failed("sensitivity mode does not apply".into()))?;
    let sd = config.site_sd(delta);
    if !(sd > 0.0 && sd.is_finite()) {
        return Err(RunError::Failed(
            "noise scale is not a finite positive number".into(),
        ));
    }
    let product = if xt.ncols() == 0 {
        Matrix::zeros(d, config.p)
    } else {
        gram_t_times(xt, x)
    };
    env.gaussian_release(RELEASE, product, delta, sd)
}

/// The public context of a study (no data): n is never known to the coordinator as a whole.
pub fn study_context(d: usize, neighbours: Neighbours) -> DataContext {
    DataContext {
        d,
        n: None,
        neighbours,
        public: false,
    }
}

/// The federated private power method.
#[derive(Debug, Clone, Copy, Default)]
pub struct FederatedPower;

impl Algorithm for FederatedPower {
    type Params = FederatedPowerParams;
    type Config = FederatedPowerConfig;

    fn info(&self) -> AlgorithmInfo {
        AlgorithmInfo {
            name: "federated_power",
            summary: "Federated private power method with secure aggregation. As a job it simulates S sites in process over a records dataset (contiguous shards); as a study (POST /v1/studies) real sites run `privpca site` and their data never leaves them.",
            source: "Nicolas et al. 2024, Alg. 2 (federated), Thm 3.1/3.2; secure aggregation after Bonawitz et al. 2017",
            kinds: vec![Kind::Records],
            relations: vec![Relation::ReplaceOne, Relation::AddRemove],
            privacy: "ρ-zCDP with ρ = L/(2m²) charged to every site: each site adds N(0, (mΔ)²/t), so any t survivors reach the central noise. The server sees only noisy sums; a coalition of the server with all other sites sees one site's release with noise variance (mΔ)²/t.",
            public_only: false,
            scope_reason: Some("federated_power runs on records (the sites' rows)"),
        }
    }

    fn configure(
        &self,
        params: FederatedPowerParams,
        ctx: &DataContext,
        target: &PrivacyTarget,
    ) -> Result<FederatedPowerConfig, ConfigError> {
        let sites = params.sites.unwrap_or(DEFAULT_SITES);
        if !(2..=MAX_SITES).contains(&sites) {
            return Err(ConfigError::invalid(
                "params.sites",
                format!("must satisfy 2 ≤ sites ≤ {MAX_SITES} (got {sites})"),
            ));
        }
        let threshold = params.threshold.unwrap_or_else(|| default_threshold(sites));
        if !(threshold >= 2 && threshold <= sites) {
            return Err(ConfigError::invalid(
                "params.threshold",
                format!("must satisfy 2 ≤ t ≤ sites = {sites} (got {threshold})"),
            ));
        }
        if let Some(n) = ctx.n
            && n < sites as usize
        {
            return Err(ConfigError::invalid(
                "params.sites",
                format!("cannot split {n} records into {sites} sites"),
            ));
        }
        let mut config = configure_for(&params, ctx, target, sites, threshold)?;
        for (i, drop) in params.dropouts.iter().enumerate() {
            if !(drop.site >= 1 && drop.site <= sites && drop.round >= 1 && drop.round <= config.iterations) {
                return Err(ConfigError::invalid(
                    format!("params.dropouts[{i}]"),
                    format!(
                        "site must lie in 1..={sites} and round in 1..={}",
                        config.iterations
                    ),
                ));
            }
        }
        let mut dropouts = params.dropouts.clone();
        dropouts.sort_by_key(|d| (d.site, d.round));
        dropouts.dedup_by_key(|d| d.site);
        config.dropouts = dropouts;
        Ok(config)
    }

    /// ρ = L/(2m²), as `noisy_power` (Nicolas et al. eqs. 25–27).
    fn cost(&self, config: &FederatedPowerConfig, _ctx: &DataContext) -> Cost {
        Cost::gaussian_zcdp(cost_of(config.iterations, config.multiplier))
    }

    fn noise_scales(&self, config: &FederatedPowerConfig, ctx: &DataContext) -> Vec<NoiseScale> {
        let fixed = config.sensitivity.fixed(&ctx.neighbours);
        vec![NoiseScale {
            release: RELEASE.into(),
            distribution: "gaussian".into(),
            multiplier: config.multiplier / f64::from(config.threshold).sqrt(),
            sensitivity: fixed,
            count: config.iterations as usize * config.sites as usize,
            description: format!(
                "Each of {} sites adds Gaussian noise of sd m·Δ(X)/√t (m = {:.4}, t = {}) to its A_s·X in each of {} rounds; any t survivors together reach sd m·Δ(X).",
                config.sites, config.multiplier, config.threshold, config.iterations
            ),
        }]
    }

    fn run(
        &self,
        input: DataInput<'_>,
        config: &FederatedPowerConfig,
        ctx: &DataContext,
        env: &mut RunEnv<'_>,
    ) -> Result<Output, RunError> {
        let DataInput::Records { xt } = input else {
            return Err(RunError::Failed("federated_power runs on records".into()));
        };
        if xt.nrows() != ctx.d {
            return Err(RunError::Failed(
                "the data does not match the dataset's dimension".into(),
            ));
        }
        crate::federation::simulate::run(xt, config, &ctx.neighbours, env).map(|run| run.output)
    }
}

#[cfg(test)]
#[path = "federated_power_tests.rs"]
mod tests;
