//! The checks and choices every `configure` of the PCA algorithms shares (issue 37: they lived
//! in `noisy_power.rs`): the job's ρ, 1 ≤ k ≤ d, the iteration rank p and count L with their
//! defaults, the power-method family's opening checks, and the refusal of a ρ so small that the
//! calibrated noise overflows. Each reports its failure on the parameter at fault.

use super::ConfigError;
use super::sensitivity::check_bounds;
use crate::dataset::DataContext;
use crate::privacy::PrivacyTarget;

/// The job's ρ, checked finite and strictly positive.
pub(crate) fn target_rho(target: &PrivacyTarget) -> Result<f64, ConfigError> {
    if target.rho > 0.0 && target.rho.is_finite() {
        Ok(target.rho)
    } else {
        Err(ConfigError::invalid("rho", "must be a finite number > 0"))
    }
}

/// Checks 1 ≤ k ≤ d, reporting the failure on `params.k`.
pub(crate) fn check_k(k: usize, d: usize) -> Result<(), ConfigError> {
    if k >= 1 && k <= d {
        Ok(())
    } else {
        Err(ConfigError::invalid(
            "params.k",
            format!("must satisfy 1 ≤ k ≤ d = {d} (got {k})"),
        ))
    }
}

/// The checks every `configure` of the power-method family opens with, in this order: the
/// dataset's bounds, the job's ρ (returned) and 1 ≤ k ≤ d.
pub(crate) fn check_opening(ctx: &DataContext, target: &PrivacyTarget, k: usize) -> Result<f64, ConfigError> {
    check_bounds(&ctx.neighbours)?;
    let rho = target_rho(target)?;
    check_k(k, ctx.d)?;
    Ok(rho)
}

/// The iteration rank p: `p`, or min(d, 2k) by default, checked k ≤ p ≤ d on `params.p`.
pub(crate) fn choose_p(p: Option<usize>, k: usize, d: usize) -> Result<usize, ConfigError> {
    let p = p.unwrap_or(d.min(2 * k));
    if p >= k && p <= d {
        Ok(p)
    } else {
        Err(ConfigError::invalid(
            "params.p",
            format!("must satisfy k = {k} ≤ p ≤ d = {d} (got {p})"),
        ))
    }
}

/// The number of iterations L: `iterations`, or `default`, checked 1 ≤ L ≤ `max` on
/// `params.iterations`; `context` ends the message (e.g. " for a federated run").
pub(crate) fn choose_iterations(
    iterations: Option<u32>,
    default: u32,
    max: u32,
    context: &str,
) -> Result<u32, ConfigError> {
    let iterations = iterations.unwrap_or(default);
    if (1..=max).contains(&iterations) {
        Ok(iterations)
    } else {
        Err(ConfigError::invalid(
            "params.iterations",
            format!("must satisfy 1 ≤ iterations ≤ {max}{context} (got {iterations})"),
        ))
    }
}

/// Refuses a target whose calibrated noise is not `finite` (a ρ so small that the noise
/// overflows f64), reporting the failure on `rho`.
pub(crate) fn check_calibrated(finite: bool) -> Result<(), ConfigError> {
    if finite {
        Ok(())
    } else {
        Err(ConfigError::invalid(
            "rho",
            "is too small to calibrate noise in floating point",
        ))
    }
}
