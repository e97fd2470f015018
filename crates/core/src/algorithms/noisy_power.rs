//! `noisy_power`: the private randomized power method (Nicolas et al. 2024, Alg. 1, with the
//! sensitivity of Thm 3.1 and the zCDP accounting of Thm 3.2's proof; Hardt & Price 2014;
//! Balcan et al. 2016).
//!
//! 1. X₀ = Q(Ω), the Q factor of the thin QR of a d×p standard Gaussian Ω (Alg. 1 line 3).
//!    X₀ does not depend on the data, so it is drawn from `env.rng()`, not as privacy noise.
//! 2. For l = 1..L: Y_l = A·X_{l−1} + G_l, G_l iid N(0, (s·Δ(X_{l−1}))²), X_l = Q(Y_l)
//!    (Alg. 1 line 5), Δ from [`super::sensitivity`].
//! 3. Output the top-k left singular vectors of Y_L: a Rayleigh–Ritz step on the last release,
//!    i.e. post-processing. Their singular values are released too, as estimates of the
//!    magnitudes of the top-k eigenvalues (for positive semi-definite A, the eigenvalues).
//!
//! Privacy. Iteration l is a Gaussian mechanism on A·X_{l−1} with sensitivity Δ(X_{l−1}) and
//! noise sd s·Δ(X_{l−1}), hence (1/(2s²))-zCDP (Lemma 2.1); X_{l−1} is a post-processing of
//! X₀ and earlier releases, so adaptive composition (Lemma 2.2) gives ρ = L/(2s²) (eqs. 25–27).
//! Given a job budget ρ_job: s = sqrt(L/(2ρ_job)), nudged up so the cost never exceeds ρ_job.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::calibration::{check_calibrated, check_opening, choose_iterations, choose_p};
use super::filtered_power;
use super::operator::Operator;
use super::power_noise::{calibrate, cost_of, initial_iterate};
use super::sensitivity::{SensitivityMode, power_sensitivity};
use super::{Algorithm, AlgorithmInfo, ConfigError, NoiseScale, Output, Run, RunError, catalog, ensure_fits};
use crate::dataset::DataContext;
use crate::linalg::{Matrix, try_thin_svd};
use crate::privacy::{Cost, PrivacyTarget};

/// Default number of iterations. Nicolas et al. (§5) note that L is usually 1–5. At a fixed
/// budget every iteration costs the same 1/(2s²), so the noise sd grows only like √L, while the
/// noiseless error contracts like (σ_{p+1}/σ_k)^L; with the default p = 2k, four iterations
/// shrink it by (σ_{2k+1}/σ_k)⁴ (1/16 at a ratio of 1/2) for twice the noise of one iteration.
pub const DEFAULT_ITERATIONS: u32 = 4;
/// On a public sparse matrix with no privacy target and no `iterations` given: at most this many
/// products of A, stopping once the top-k Ritz pairs have converged (see
/// [`NoisyPowerConfig::until_converged`] and [`super::filtered_power`]). The eigenvalues of a
/// sparse graph matrix are often clustered (σ_{p+1}/σ_k near 1), where L = 4 is far from
/// converged; a job with no privacy at all has no noise to trade against more products, so it
/// runs to convergence instead.
pub const PUBLIC_SPARSE_ITERATIONS: u32 = 50;
/// Released with the result when a run without privacy stopped on convergence: the number of
/// iterations it ran (a fact of public data).
pub const ITERATIONS_RUN: &str = "iterations_run";
/// Largest accepted L (bounds the job's run time).
pub const MAX_ITERATIONS: u32 = 1000;
/// Audit label of the per-iteration release.
pub const RELEASE: &str = "power_iteration";

/// The private randomized power method.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoisyPower;

/// What the client sends.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoisyPowerParams {
    /// Target rank: number of principal components returned (1 ≤ k ≤ d).
    #[schemars(range(min = 1))]
    pub k: usize,
    /// Iteration rank (k ≤ p ≤ d); extra columns speed convergence. Default: min(d, 2k).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub p: Option<usize>,
    /// Number of noisy power iterations L (1–1000; 1–5 is typical). The noise grows like √L at
    /// a fixed budget. On a public sparse matrix with no privacy target (no noise) the default
    /// is instead to run until the top-k Ritz pairs have converged (a Chebyshev-filtered
    /// subspace iteration, at most 50 products of the matrix).
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_ITERATIONS), extend("default" = DEFAULT_ITERATIONS))]
    pub iterations: Option<u32>,
    /// Sensitivity bound calibrating each iteration's noise: row_norm (Nicolas et al. Thm 3.1),
    /// rank_one (records only), hardt_price (baseline), or auto (the smallest applicable).
    #[serde(default)]
    pub sensitivity: SensitivityMode,
}

/// Every parameter fixed and the noise multiplier calibrated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoisyPowerConfig {
    pub k: usize,
    pub p: usize,
    pub iterations: u32,
    pub sensitivity: SensitivityMode,
    /// The noise multiplier s: iteration l adds noise of sd s·Δ(X_{l−1}). Zero only for a job
    /// with no privacy at all (a public dataset and no privacy target,
    /// [`PrivacyTarget::public_default`]): it then draws no noise and costs nothing.
    pub multiplier: f64,
    /// Run to convergence instead: at most `iterations` products of A by the Chebyshev-filtered
    /// subspace iteration of [`super::filtered_power`], stopping once every top-k Ritz pair's
    /// residual is at most [`super::filtered_power::RESIDUAL_TOLERANCE`]·|θ₁|. The rule reads the
    /// data, so the number of products run depends on it: chosen only for a job with no privacy
    /// at all (multiplier 0) on a sparse matrix when the client gives no `iterations`, and the
    /// run honours it only then. Absent (false) in every other configuration; a job with any
    /// noise runs exactly `iterations` power iterations.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub until_converged: bool,
}

impl Algorithm for NoisyPower {
    const INFO: &'static AlgorithmInfo = &catalog::NOISY_POWER;
    type Params = NoisyPowerParams;
    type Config = NoisyPowerConfig;

    fn configure(
        &self,
        params: NoisyPowerParams,
        ctx: &DataContext,
        target: &PrivacyTarget,
    ) -> Result<NoisyPowerConfig, ConfigError> {
        let rho = check_opening(ctx, target, params.k)?;
        let d = ctx.d;
        let k = params.k;
        let p = choose_p(params.p, k, d)?;
        // No privacy at all: a public dataset and no privacy target stated. Then no noise is
        // drawn, and only then may the run stop on convergence (a data-dependent number of
        // iterations): a job with any noise keeps a number of iterations fixed in advance.
        let noiseless = target.public_default && ctx.public;
        // Public facts only: the above, whether the matrix is stored sparse, and whether the
        // client chose L.
        let until_converged = noiseless && params.iterations.is_none() && ctx.sparse;
        let iterations = if until_converged {
            PUBLIC_SPARSE_ITERATIONS
        } else {
            choose_iterations(params.iterations, DEFAULT_ITERATIONS, MAX_ITERATIONS, "")?
        };
        if !params.sensitivity.applies_to(&ctx.neighbours) {
            return Err(ConfigError::invalid(
                "params.sensitivity",
                "rank_one applies to records datasets only; use row_norm, hardt_price or auto on a matrix",
            ));
        }
        let multiplier = if noiseless {
            0.0
        } else {
            calibrate(iterations, rho)
        };
        check_calibrated(multiplier.is_finite())?;
        Ok(NoisyPowerConfig {
            k,
            p,
            iterations,
            sensitivity: params.sensitivity,
            multiplier,
            until_converged,
        })
    }

    /// ρ = L/(2s²) (Nicolas et al. eqs. 25–27), independent of the data and of Δ; zero for a
    /// run with no noise (multiplier 0, public datasets only: the run refuses it elsewhere).
    fn cost(&self, config: &NoisyPowerConfig, _ctx: &DataContext) -> Cost {
        if config.multiplier == 0.0 {
            return Cost::ZERO;
        }
        Cost::gaussian_zcdp(cost_of(config.iterations, config.multiplier))
    }

    fn noise_scales(&self, config: &NoisyPowerConfig, ctx: &DataContext) -> Vec<NoiseScale> {
        if config.multiplier == 0.0 {
            return Vec::new();
        }
        let fixed = config.sensitivity.fixed(&ctx.neighbours);
        let description = match fixed {
            Some(delta) => format!(
                "Gaussian noise added to A·X at each of {} iterations; sd = multiplier × {} sensitivity = {:.6e}.",
                config.iterations,
                config.sensitivity.as_str(),
                config.multiplier * delta
            ),
            None => format!(
                "Gaussian noise added to A·X at each of {} iterations; sd = multiplier × Δ(X), the {} sensitivity recomputed from each (public) iterate.",
                config.iterations,
                config.sensitivity.as_str()
            ),
        };
        vec![NoiseScale {
            release: RELEASE.into(),
            distribution: "gaussian".into(),
            multiplier: config.multiplier,
            sensitivity: fixed,
            count: config.iterations as usize,
            description,
        }]
    }

    /// Runs Alg. 1. X₀ is the first thing drawn from `env.rng()`; all noise goes through
    /// `env.gaussian_noise` under the label [`RELEASE`].
    fn run(&self, config: &NoisyPowerConfig, run: Run<'_, '_>) -> Result<Output, RunError> {
        let Run { input, ctx, env } = run;
        let NoisyPowerConfig {
            k,
            p,
            iterations,
            sensitivity,
            multiplier,
            until_converged,
        } = *config;
        // No noise only on a public dataset; the stopping rule reads the data, so it is honoured
        // only when the run has no privacy at all (no noise on a public dataset).
        let noiseless = multiplier == 0.0;
        if noiseless && !ctx.public {
            return Err(RunError::Failed(
                "a run without noise is allowed on public datasets only".into(),
            ));
        }
        let until_converged = until_converged && noiseless && ctx.public;
        let d = ctx.d;
        let fits = k >= 1 && k <= p && p <= d && (1..=MAX_ITERATIONS).contains(&iterations);
        ensure_fits(fits && (noiseless || (multiplier > 0.0 && multiplier.is_finite())))?;
        let op = Operator::new(input, ctx, p, iterations)?;
        let mut x = initial_iterate(env.rng(), d, p);
        if until_converged {
            // No privacy at all: the filtered run to convergence (`filtered_power`).
            let run = filtered_power::run(&op, x, k, iterations, |done| Ok(env.progress(done, iterations)?))?;
            // Public (the run has no privacy at all): how many products it took.
            env.record_release(ITERATIONS_RUN, run.products);
            env.progress(iterations, iterations)?;
            return leading_of(&run.y, k);
        }
        let mut y = Matrix::zeros(d, p);
        for l in 1..=iterations {
            // Y_l = A·X_{l−1} + G_l (Alg. 1 line 5); G_l = 0 without privacy.
            y = if noiseless {
                op.apply(&x)
            } else {
                let delta = power_sensitivity(sensitivity, &ctx.neighbours, &x).ok_or_else(|| {
                    RunError::Failed("sensitivity mode does not apply to this dataset".into())
                })?;
                let sd = multiplier * delta;
                if !(sd > 0.0 && sd.is_finite()) {
                    return Err(RunError::Failed(
                        "noise scale is not a finite positive number".into(),
                    ));
                }
                env.gaussian_release(RELEASE, op.apply(&x), delta, sd)?
            };
            // Clipped records and finite bounds keep Y finite unless n·β² overflows f64.
            if !y.iter().all(|v| v.is_finite()) {
                return Err(RunError::Failed(
                    "numerical overflow in the power iteration".into(),
                ));
            }
            if l < iterations {
                x = op.orthonormalise(&y);
            }
            env.progress(l, iterations)?;
        }
        leading_of(&y, k)
    }
}

/// Rayleigh–Ritz on the release Y_L: its top-k left singular vectors.
fn leading_of(y: &Matrix, k: usize) -> Result<Output, RunError> {
    let svd = try_thin_svd(y).map_err(|_| RunError::Failed("the final SVD did not converge".into()))?;
    Ok(Output::leading(&svd.u, svd.s.as_slice(), k))
}

#[cfg(test)]
#[path = "noisy_power_tests.rs"]
mod tests;
