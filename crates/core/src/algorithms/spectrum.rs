//! `spectrum`: the private spectrum of a records dataset, the paid part of the utility forecast
//! (issue 41, docs/design/forecast.md "A paid private spectrum"). Not a PCA: it returns no
//! basis, only the d eigenvalues of A = XᵀX, each with Gaussian noise, and it is not in
//! [`super::registry()`]: a client gets it through `POST /v1/privacy/plan`
//! (`scenario.private_spectrum`), which charges it on the ledger as a job like any other.
//!
//! Release. λ(A) = (λ₁ ≥ … ≥ λ_d), the eigenvalues of A = Σ_x x·xᵀ sorted, plus iid N(0, σ²):
//! λ̂_i = λ_i(A) + z_i. The i-th entry estimates the i-th largest eigenvalue; the vector is
//! released in that order, not re-sorted (a fixed set of its entries then sums to an unbiased
//! estimate, which the forecast's noise floor uses; any re-sorting is post-processing).
//!
//! Sensitivity. For symmetric A and A', the Hoffman–Wielandt inequality (Hoffman & Wielandt
//! 1953; for Hermitian matrices with both spectra sorted the same way, Bhatia, *Matrix
//! Analysis*, Thm. III.4.1 and VI.4.1) gives Σ_i (λ_i(A) − λ_i(A'))² ≤ ‖A − A'‖_F², so the
//! L2 sensitivity of the sorted spectrum is at most that of A in Frobenius norm, as in
//! `analyze_gauss` (Dwork et al. 2014; [`super::analyze_gauss::sensitivity`]):
//! - `add_remove`: A − A' = xxᵀ, ‖·‖_F = ‖x‖² ≤ β²: Δ = β²;
//! - `replace_one`: A − A' = xxᵀ − yyᵀ, ‖·‖_F² = ‖x‖⁴ + ‖y‖⁴ − 2(xᵀy)² ≤ 2β⁴: Δ = √2·β².
//!
//! Cost ρ = Δ²/(2σ²) (Bun & Steinke 2016, Prop. 1.6); given ρ, σ = Δ/√(2ρ). Each eigenvalue
//! then carries the noise each *entry* of `analyze_gauss`'s matrix carries at the same ρ, where
//! the eigenvalues of that noisy matrix spread by about 2σ√d (a Wigner matrix's edge): √d times
//! less noise per eigenvalue, which is why the forecast pays for this release rather than
//! reading `analyze_gauss`'s free eigenvalues.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::calibration::{check_calibrated, target_rho};
use super::{Algorithm, AlgorithmInfo, ConfigError, NoiseScale, Output, Run, RunError, ensure_fits};
use crate::dataset::{DataContext, Kind, Relation};
use crate::linalg::{Matrix, try_sym_eigenvalues};
use crate::privacy::cost::round_up_while;
use crate::privacy::{Cost, PrivacyTarget};

/// The name jobs of this release carry.
pub const NAME: &str = "spectrum";
/// Audit label of the release.
pub const RELEASE: &str = "spectrum";

/// Its entry: a records-only release, outside the catalog of PCA algorithms.
pub const SPECTRUM: AlgorithmInfo = AlgorithmInfo {
    name: NAME,
    summary: "The d eigenvalues of A = XᵀX with Gaussian noise (no basis): the paid private spectrum a utility forecast can start from.",
    source: "Hoffman–Wielandt sensitivity of the sorted spectrum; Gaussian mechanism (Bun & Steinke 2016, Prop. 1.6)",
    kinds: &[Kind::Records],
    relations: &[Relation::ReplaceOne, Relation::AddRemove],
    privacy: "ρ-zCDP with ρ = Δ²/(2σ²): one Gaussian mechanism on the sorted eigenvalues of A, Δ = β² (add_remove) or √2·β² (replace_one) by Hoffman–Wielandt.",
    public_only: false,
    scope_reason: Some("the forecast it serves simulates records"),
    releases_eigenvalues: true,
    study: None,
    sparse: false,
    clip_noise_factor: 1.0,
    clip_by_default: false,
    stats_suffice: true,
};

/// The release of the noisy spectrum.
#[derive(Debug, Clone, Copy, Default)]
pub struct Spectrum;

/// It takes no parameters.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpectrumParams {}

/// The calibrated noise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpectrumConfig {
    /// σ, the standard deviation of each eigenvalue's noise (on A = XᵀX, not divided by n).
    pub noise_sd: f64,
}

/// Δ of the sorted spectrum of A (module docs).
pub fn sensitivity(ctx: &DataContext) -> f64 {
    super::analyze_gauss::sensitivity(&ctx.neighbours)
}

/// ρ = Δ²/(2σ²).
fn cost_of(delta: f64, sd: f64) -> f64 {
    let ratio = delta / sd;
    ratio * ratio / 2.0
}

impl Algorithm for Spectrum {
    const INFO: &'static AlgorithmInfo = &SPECTRUM;
    type Params = SpectrumParams;
    type Config = SpectrumConfig;

    fn configure(
        &self,
        _params: SpectrumParams,
        ctx: &DataContext,
        target: &PrivacyTarget,
    ) -> Result<SpectrumConfig, ConfigError> {
        // No privacy at all (a public dataset, no target stated): the exact spectrum, free. The
        // forecast's public proxy reads it (`scenario.proxy_dataset`).
        if target.public_default && ctx.public {
            return Ok(SpectrumConfig { noise_sd: 0.0 });
        }
        let rho = target_rho(target)?;
        let delta = sensitivity(ctx);
        if !(delta > 0.0 && delta.is_finite()) {
            return Err(ConfigError::invalid(
                "row_norm_bound",
                "the spectrum needs a finite row norm bound > 0",
            ));
        }
        // σ = Δ/√(2ρ), rounded up so that the cost never exceeds ρ in floating point.
        let noise_sd = round_up_while(delta / (2.0 * rho).sqrt(), |sd| cost_of(delta, sd) > rho);
        check_calibrated(noise_sd.is_finite())?;
        Ok(SpectrumConfig { noise_sd })
    }

    fn cost(&self, config: &SpectrumConfig, ctx: &DataContext) -> Cost {
        if config.noise_sd == 0.0 {
            return Cost::ZERO;
        }
        Cost::gaussian_zcdp(cost_of(sensitivity(ctx), config.noise_sd))
    }

    fn noise_scales(&self, config: &SpectrumConfig, ctx: &DataContext) -> Vec<NoiseScale> {
        if config.noise_sd == 0.0 {
            return Vec::new();
        }
        vec![NoiseScale::gaussian(
            RELEASE,
            config.noise_sd,
            sensitivity(ctx),
            1,
            format!(
                "The {} sorted eigenvalues of XᵀX, each with Gaussian noise of sd {:.6e}.",
                ctx.d, config.noise_sd
            ),
        )]
    }

    /// Releases λ(A) + N(0, σ²I) through `env.gaussian_release` under [`RELEASE`]; the output's
    /// basis has no columns.
    fn run(&self, config: &SpectrumConfig, run: Run<'_, '_>) -> Result<Output, RunError> {
        let Run { input, ctx, env } = run;
        let noiseless = config.noise_sd == 0.0;
        if noiseless && !ctx.public {
            return Err(RunError::Failed(
                "a spectrum without noise is released on public datasets only".into(),
            ));
        }
        ensure_fits(noiseless || (config.noise_sd > 0.0 && config.noise_sd.is_finite()))?;
        let a = input.symmetric_matrix(ctx)?;
        let values = try_sym_eigenvalues(&a)
            .map_err(|_| RunError::Failed("the eigendecomposition did not converge".into()))?;
        let mut sorted: Vec<f64> = values.iter().copied().collect();
        sorted.sort_by(|x, y| y.total_cmp(x));
        let query = Matrix::from_column_slice(sorted.len(), 1, &sorted);
        let released = if noiseless {
            query
        } else {
            env.gaussian_release(RELEASE, query, sensitivity(ctx), config.noise_sd)?
        };
        Ok(Output {
            basis: Matrix::zeros(ctx.d, 0),
            eigenvalues: Some(released.as_slice().to_vec()),
        })
    }
}

#[cfg(test)]
#[path = "spectrum_tests.rs"]
mod tests;
