//! Generic job option `with_eigenvalues` (docs/design/privacy.md §3): private eigenvalue estimates for the
//! k output directions, implemented once for every algorithm in [`super::registry()`].
//!
//! - Algorithms whose catalog entry says `releases_eigenvalues` already return estimates that are post-processing
//!   of their own DP releases (singular values of the last noisy iterate, noisy eigenvalues of
//!   the noisy covariance, Laplace eigenvalues, exact values on public data); they cost nothing
//!   more.
//! - For the others an extra share `eigenvalue_share` (default 0.1) of the job's ρ is spent on
//!   noisy Rayleigh quotients of the released basis Q (itself a DP release, so adaptive
//!   composition applies): λ̂_i = q_iᵀ A q_i + N(0, s²), i = 1..k, s = Δ/sqrt(2ρ_e) (Gaussian
//!   mechanism, Bun & Steinke 2016 Prop. 1.6).
//!
//! Sensitivity of v(A) = (q_iᵀ A q_i)_i for a fixed orthonormal Q:
//! - records, A = Σ_x x xᵀ: one row contributes w(x) = ((q_iᵀx)²)_i, with
//!   ‖w‖₂ ≤ ‖w‖₁ = ‖Qᵀx‖² ≤ ‖x‖² ≤ β². `add_remove`: Δ = β². `replace_one`: w(x), w(x') ≥ 0
//!   entrywise, so ‖w − w'‖² ≤ ‖w‖² + ‖w'‖² ≤ 2β⁴ and Δ = √2·β².
//! - matrix, A' = A + C: |diag(QᵀCQ)|₂ ≤ ‖QᵀCQ‖_F ≤ ‖C‖_F ≤ sqrt(Σ_i ‖C_i:‖₁²) ≤ u (Nicolas et
//!   al. eq. 12), so Δ = u.
//!
//! After private centring (see [`super::centering`]) the rows are re-clipped to β, so the same
//! bounds hold. After adaptive clipping at the released c (see [`super::clipping`]) they hold
//! with c in place of β, and the release is recalibrated to c at the same ρ_e
//! ([`EigenvalueConfig::at_bounds`]). q_iᵀAq_i is computed for records as ‖X q_i‖² without forming A.

use serde::{Deserialize, Serialize};

use super::{ConfigError, DataInput, NoiseScale, RunEnv, RunError};
use crate::dataset::{DataContext, Neighbours};
use crate::linalg::{Matrix, matmul, projected_energy};
use crate::privacy::Cost;

/// Default share of the job's ρ spent on the Rayleigh quotients.
pub const DEFAULT_EIGENVALUE_SHARE: f64 = 0.1;
/// Audit label of the Rayleigh-quotient noise.
pub const RELEASE: &str = "eigenvalue";

/// Whether `algorithm` returns eigenvalue estimates at no extra cost (its catalog entry's
/// `releases_eigenvalues`).
pub fn releases_eigenvalues(algorithm: &str) -> bool {
    super::find(algorithm).is_some_and(|a| a.info().releases_eigenvalues)
}

/// The extra release, fixed at submission and stored in the job's configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EigenvalueConfig {
    /// ρ_e spent (the exact cost of the release).
    pub rho: f64,
    /// Δ of the vector of Rayleigh quotients (see the module doc).
    pub sensitivity: f64,
    /// Noise sd per quotient.
    pub noise_sd: f64,
}

/// Δ of (q_iᵀ A q_i)_i under the dataset's relation.
pub fn sensitivity(ctx: &DataContext) -> f64 {
    match ctx.neighbours {
        Neighbours::AddRemove { beta, .. } => beta * beta,
        Neighbours::ReplaceOne { beta, .. } => std::f64::consts::SQRT_2 * beta * beta,
        Neighbours::Entry { u } => u,
    }
}

/// Validates a share in (0, 1), reporting on `field`.
pub fn check_share(value: &serde_json::Value, field: &str) -> Result<f64, ConfigError> {
    match value.as_f64() {
        Some(s) if s > 0.0 && s < 1.0 => Ok(s),
        _ => Err(ConfigError::invalid(
            field,
            "must be a number strictly between 0 and 1",
        )),
    }
}

/// Calibrates the release to ρ_e = `share`·`rho_job`.
pub fn configure(share: f64, ctx: &DataContext, rho_job: f64) -> EigenvalueConfig {
    calibrated(ctx, share * rho_job)
}

/// The release under `ctx`'s bounds at cost at most `rho_e`.
fn calibrated(ctx: &DataContext, rho_e: f64) -> EigenvalueConfig {
    let sensitivity = sensitivity(ctx);
    let noise_sd = super::centering::calibrate_sd(sensitivity, rho_e);
    EigenvalueConfig {
        rho: Cost::gaussian(sensitivity, noise_sd).rho,
        sensitivity,
        noise_sd,
    }
}

impl EigenvalueConfig {
    /// The same release under the bounds of `ctx` (the context after adaptive clipping at the
    /// released c ≤ β), calibrated to the ρ_e this configuration was charged. Clipped rows have
    /// ‖x‖ ≤ c, so Δ is c² (√2·c² for `replace_one`) instead of β², and the noise shrinks by
    /// (c/β)² at a cost that stays at most ρ_e.
    pub fn at_bounds(&self, ctx: &DataContext) -> EigenvalueConfig {
        calibrated(ctx, self.rho)
    }

    /// ρ_e = Δ²/(2s²): one Gaussian mechanism on the k-vector of quotients.
    pub fn cost(&self) -> Cost {
        Cost::gaussian(self.sensitivity, self.noise_sd)
    }

    pub fn noise_scale(&self, k: usize) -> NoiseScale {
        NoiseScale::gaussian(
            RELEASE,
            self.noise_sd,
            self.sensitivity,
            k,
            "eigenvalue estimates: Gaussian noise on the Rayleigh quotient of each output direction",
        )
    }

    /// λ̂_i = q_iᵀ A q_i + N(0, s²) for the columns of `basis`.
    pub fn release(
        &self,
        input: DataInput<'_>,
        basis: &Matrix,
        env: &mut RunEnv<'_>,
    ) -> Result<Vec<f64>, RunError> {
        let exact = rayleigh_quotients(input, basis)?;
        let query = Matrix::from_column_slice(exact.len(), 1, &exact);
        let noisy = env.gaussian_release(RELEASE, query, self.sensitivity, self.noise_sd)?;
        Ok(noisy.as_slice().to_vec())
    }
}

/// q_iᵀ A q_i for each column q_i of `q` (records: A = XᵀX, computed as ‖X q_i‖² in one
/// streaming pass).
pub fn rayleigh_quotients(input: DataInput<'_>, q: &Matrix) -> Result<Vec<f64>, RunError> {
    match input {
        DataInput::Records { xt } if xt.nrows() == q.nrows() => Ok(projected_energy(xt, q)),
        DataInput::Matrix { a } if a.nrows() == q.nrows() && a.ncols() == q.nrows() => {
            let aq = matmul(a, q);
            Ok(q.column_iter()
                .zip(aq.column_iter())
                .map(|(c, ac)| c.dot(&ac))
                .collect())
        }
        DataInput::Sparse { a } if a.n() == q.nrows() => {
            let aq = a.times(q);
            Ok(q.column_iter()
                .zip(aq.column_iter())
                .map(|(c, ac)| c.dot(&ac))
                .collect())
        }
        _ => Err(RunError::Failed(
            "the data does not match the dimension of the basis".into(),
        )),
    }
}

#[cfg(test)]
#[path = "eigenvalues_tests.rs"]
mod tests;
