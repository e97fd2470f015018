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
//! What a site checks before it releases anything (docs/design/federation.md, "What a site
//! checks"): the iterate it received has the study's shape, finite entries and orthonormal
//! columns, and the sensitivity is computed from that iterate ([`received_sensitivity`]); each
//! entry of A_s·X is clamped to the public signal bound ([`FederatedPowerConfig::signal_bound`]),
//! so no site ever refuses because of how many records it holds; and the fixed-point step 2^-f
//! is no coarser than the grid its noise is released on, so the encoding is exact
//! ([`encoding_is_exact`]).
//!
//! [`config`] holds the parameters, the calibration, the cost and the per-site computation;
//! [`state`] the per-round state both sides compute. The job form (`simulate` mode: the service
//! holds every shard) runs the real protocol in-process ([`simulate`]); the live form is a
//! study (the service's `protocols::power`).

pub mod config;
pub mod simulate;
pub mod state;

pub use self::config::*;
pub use crate::federation::fixed_point::{NOISE_TAIL_SDS, encoding_is_exact};

use crate::algorithms::power_noise::cost_of;
use crate::algorithms::{
    Algorithm, AlgorithmInfo, ConfigError, DataInput, NoiseScale, Output, Run, RunError, catalog,
};
use crate::dataset::DataContext;
use crate::privacy::{Cost, PrivacyTarget};

/// The federated private power method.
#[derive(Debug, Clone, Copy, Default)]
pub struct FederatedPower;

impl Algorithm for FederatedPower {
    const INFO: &'static AlgorithmInfo = &catalog::FEDERATED_POWER;
    type Params = FederatedPowerParams;
    type Config = FederatedPowerConfig;

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
        config.secagg_plus = choose_secagg(&params, sites, dropouts.len())?;
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

    fn run(&self, config: &FederatedPowerConfig, run: Run<'_, '_>) -> Result<Output, RunError> {
        let Run { input, ctx, env } = run;
        let DataInput::Records { xt } = input else {
            return Err(RunError::Failed("federated_power runs on records".into()));
        };
        if xt.nrows() != ctx.d {
            return Err(RunError::Failed(
                "the data does not match the dataset's dimension".into(),
            ));
        }
        simulate::run(xt, config, &ctx.neighbours, env).map(|run| run.output)
    }
}

#[cfg(test)]
mod tests;
