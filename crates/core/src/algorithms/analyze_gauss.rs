//! `analyze_gauss`: input perturbation, "Analyze Gauss" / DP-Gauss-1 (Dwork, Talwar, Thakurta
//! & Zhang 2014, Alg. 1; seed 004 App. G).
//!
//! Â = A + E with E symmetric, its upper triangle (diagonal included) iid N(0, σ²); the output
//! is the top-k eigenvectors of Â (largest eigenvalues first) and those eigenvalues, all
//! post-processing of the single release Â.
//!
//! Privacy. The release is the upper triangle of A plus iid Gaussian noise, a Gaussian mechanism
//! whose L2 sensitivity is at most ‖A' − A‖_F = ‖C‖_F:
//! - records `add_remove`: C = xxᵀ, ‖C‖_F = ‖x‖₂² ≤ β²;
//! - records `replace_one`: C = xxᵀ − yyᵀ, ‖C‖_F² = ‖x‖⁴ + ‖y‖⁴ − 2(xᵀy)² ≤ 2β⁴, so Δ = √2·β²;
//! - matrix: ‖C‖_F ≤ sqrt(Σ_i ‖C_i:‖₁²) ≤ u (Nicolas et al. eq. 12, as ‖·‖₂ ≤ ‖·‖₁ per row).
//!
//! Cost ρ = Δ²/(2σ²) (Bun & Steinke 2016 Prop. 1.6); given ρ_job, σ = Δ/sqrt(2ρ_job).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::calibration::{check_calibrated, check_opening};
use super::{Algorithm, AlgorithmInfo, ConfigError, NoiseScale, Output, Run, RunError, catalog, ensure_fits};
use crate::dataset::{DataContext, Neighbours};
use crate::privacy::cost::round_up_while;
use crate::privacy::{Cost, PrivacyTarget};

/// Audit label of the perturbation.
pub const RELEASE: &str = "symmetric_perturbation";

/// Input perturbation of the Gram / data matrix.
#[derive(Debug, Clone, Copy, Default)]
pub struct AnalyzeGauss;

/// What the client sends.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnalyzeGaussParams {
    /// Target rank: number of principal components returned (1 ≤ k ≤ d).
    #[schemars(range(min = 1))]
    pub k: usize,
}

/// Every parameter fixed and the noise calibrated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnalyzeGaussConfig {
    pub k: usize,
    /// σ, the standard deviation of each independent entry of E.
    pub noise_sd: f64,
}

/// Δ = β² (add_remove), √2·β² (replace_one), u (matrix): the L2 sensitivity of A's upper
/// triangle (module docs).
pub fn sensitivity(neighbours: &Neighbours) -> f64 {
    match *neighbours {
        Neighbours::AddRemove { beta, .. } => beta * beta,
        Neighbours::ReplaceOne { beta, .. } => std::f64::consts::SQRT_2 * beta * beta,
        Neighbours::Entry { u } => u,
    }
}

/// ρ = Δ²/(2σ²) (Bun & Steinke 2016 Prop. 1.6).
fn cost_of(delta: f64, sd: f64) -> f64 {
    // (Δ/σ)² rather than Δ²/σ², so that neither square can overflow or underflow alone.
    let ratio = delta / sd;
    ratio * ratio / 2.0
}

/// σ = Δ/sqrt(2ρ), rounded up (never down) so that `cost_of(Δ, σ) ≤ ρ` in floating point too.
fn calibrate(delta: f64, rho: f64) -> f64 {
    round_up_while(delta / (2.0 * rho).sqrt(), |sd| cost_of(delta, sd) > rho)
}

impl Algorithm for AnalyzeGauss {
    const INFO: &'static AlgorithmInfo = &catalog::ANALYZE_GAUSS;
    type Params = AnalyzeGaussParams;
    type Config = AnalyzeGaussConfig;

    fn configure(
        &self,
        params: AnalyzeGaussParams,
        ctx: &DataContext,
        target: &PrivacyTarget,
    ) -> Result<AnalyzeGaussConfig, ConfigError> {
        let rho = check_opening(ctx, target, params.k)?;
        let noise_sd = calibrate(sensitivity(&ctx.neighbours), rho);
        check_calibrated(noise_sd.is_finite())?;
        Ok(AnalyzeGaussConfig {
            k: params.k,
            noise_sd,
        })
    }

    /// ρ = Δ²/(2σ²) with Δ from the dataset's public bounds.
    fn cost(&self, config: &AnalyzeGaussConfig, ctx: &DataContext) -> Cost {
        Cost::gaussian_zcdp(cost_of(sensitivity(&ctx.neighbours), config.noise_sd))
    }

    fn noise_scales(&self, config: &AnalyzeGaussConfig, ctx: &DataContext) -> Vec<NoiseScale> {
        let delta = sensitivity(&ctx.neighbours);
        let d = ctx.d;
        vec![NoiseScale::gaussian(
            RELEASE,
            config.noise_sd,
            delta,
            1,
            format!(
                "One symmetric Gaussian matrix added to A: {} independent entries (upper triangle) of sd {:.6e}.",
                d * (d + 1) / 2,
                config.noise_sd
            ),
        )]
    }

    /// Draws E through `env.gaussian_symmetric_release` under the label [`RELEASE`].
    fn run(&self, config: &AnalyzeGaussConfig, run: Run<'_, '_>) -> Result<Output, RunError> {
        let Run { input, ctx, env } = run;
        let k = config.k;
        ensure_fits(k >= 1 && k <= ctx.d && config.noise_sd > 0.0 && config.noise_sd.is_finite())?;
        let a = input.symmetric_matrix(ctx)?;
        // Â = A + E (DP-Gauss-1); only the upper triangle of A enters, released on the grid and
        // mirrored.
        let noisy =
            env.gaussian_symmetric_release(RELEASE, a, sensitivity(&ctx.neighbours), config.noise_sd)?;
        if !noisy.iter().all(|v| v.is_finite()) {
            return Err(RunError::Failed(
                "numerical overflow in the perturbed matrix".into(),
            ));
        }
        Output::top_eigenpairs(&noisy, k)
    }
}

#[cfg(test)]
#[path = "analyze_gauss_tests.rs"]
mod tests;
