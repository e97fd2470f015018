//! Data-free planning helpers behind `POST /v1/privacy/plan` (docs/design/architecture.md): the noise a
//! Gaussian release needs for a target ρ, and how a cost reads as (ε, δ). Pure functions of
//! public numbers; nothing here sees data.

use serde::Serialize;

use super::{Cost, Delta, PrivacyError, rho_to_epsilon};

/// Per-coordinate standard deviation s of the Gaussian mechanism with L2 sensitivity Δ that
/// costs at most ρ: s = Δ / sqrt(2ρ), the inverse of ρ = Δ² / (2 s²) (Bun & Steinke 2016,
/// Prop. 1.6; docs/design/privacy.md §2).
///
/// Rounded up: the result is nudged until `Cost::gaussian(Δ, s).rho <= ρ` holds in floating
/// point, so a mechanism calibrated with it never costs more than planned. Total and
/// conservative: Δ = 0 needs no noise (0); if Δ is not finite and ≥ 0, or ρ is not finite and
/// > 0, no finite noise is certified and the result is +∞.
pub fn gaussian_sd(sensitivity: f64, rho: f64) -> f64 {
    if !(sensitivity >= 0.0 && sensitivity.is_finite() && rho > 0.0 && rho.is_finite()) {
        return f64::INFINITY;
    }
    if sensitivity == 0.0 {
        return 0.0;
    }
    // Δ / sqrt(2ρ) as (Δ / sqrt 2) / sqrt ρ: no overflow of 2ρ, no underflow of Δ² anywhere.
    let mut sd = sensitivity / std::f64::consts::SQRT_2 / rho.sqrt();
    // A few ulps at most; the bound keeps the loop finite even so.
    for _ in 0..64 {
        if Cost::gaussian(sensitivity, sd).rho <= rho {
            return sd;
        }
        sd = sd.next_up();
    }
    f64::INFINITY
}

/// A privacy cost in both languages: zCDP and (ε, δ)-DP.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Conversions {
    /// zCDP ρ of the cost.
    pub rho: f64,
    /// Approximate-DP δ the cost spends on (ε, δ) subroutines (0 for pure zCDP).
    pub delta_spent: f64,
    /// The δ at which ρ is converted to ε.
    pub delta: f64,
    /// ε such that ρ-zCDP implies (ε, `delta`)-DP: the tighter of Bun–Steinke 2016 Prop. 1.3
    /// and Canonne–Kamath–Steinke 2020 Prop. 12, rounded up.
    pub epsilon_at_delta: f64,
    /// The δ of the full statement: the cost is (`epsilon_at_delta`, `total_delta`)-DP, with
    /// `total_delta = delta + delta_spent` (δ-approximate zCDP adds its δ; docs/design/privacy.md §2).
    pub total_delta: f64,
}

/// Describes `cost` as (ε, δ)-DP at conversion δ `delta`. Fails if the cost is not a chargeable
/// amount (see [`Cost::check`]): NaN, negative, infinite, ρ above the ledger maximum, or δ ≥ 1.
pub fn describe(cost: Cost, delta: Delta) -> Result<Conversions, PrivacyError> {
    let cost = cost.check()?;
    Ok(Conversions {
        rho: cost.rho,
        delta_spent: cost.delta,
        delta: delta.get(),
        epsilon_at_delta: rho_to_epsilon(cost.rho, delta),
        total_delta: delta.get() + cost.delta,
    })
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
