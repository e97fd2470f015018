//! The exact privacy curve of the Gaussian mechanism (docs/design/privacy.md §2, "Tight accounting for
//! Gaussian-only budgets").
//!
//! A composition of Gaussian mechanisms with zCDP costs ρ_1..ρ_m is exactly one Gaussian
//! mechanism with μ = sqrt(2Σρ_i) (μ-GDP, Dong, Roth & Su 2019, Cor. 3.3: each ρ-zCDP Gaussian
//! release with ρ = Δ²/(2s²) is (Δ/s)-GDP, and μ's compose as sqrt(Σμ_i²)). Its tight (ε, δ)
//! curve is Balle & Wang 2018, Thm. 8:
//!
//!   δ(ε; μ) = Φ(−ε/μ + μ/2) − e^ε·Φ(−ε/μ − μ/2).
//!
//! Every function here rounds against the user: [`delta_upper`] is an upper bound on δ(ε; μ)
//! in floating point, and [`max_gaussian_rho`] returns a ρ whose certified δ is within the
//! target.

use super::convert::bisect;

/// Relative allowance for rounding in Φ (libm's erfc is accurate to about 1 ulp) and in the
/// products; 1e-12 is generous.
const SLACK: f64 = 1e-12;

/// Φ(x), the standard normal CDF, as erfc(−x/√2)/2 (accurate in both tails).
fn normal_cdf(x: f64) -> f64 {
    0.5 * libm::erfc(-x / std::f64::consts::SQRT_2)
}

/// An upper bound on δ(ε; μ) for the μ-GDP Gaussian mechanism at ε ≥ 0 (Balle & Wang 2018,
/// Thm. 8). μ = 0 gives 0; a NaN or negative input, or μ = +∞, gives 1 (no guarantee).
///
/// The first term is rounded up and the subtracted term down. The subtracted term is computed
/// as exp(ε + ln Φ(·)) so that e^ε cannot overflow; where Φ(·) underflows to 0 it is dropped,
/// which only makes the bound larger.
pub fn delta_upper(epsilon: f64, mu: f64) -> f64 {
    if !(epsilon >= 0.0 && mu >= 0.0 && mu.is_finite()) {
        return 1.0;
    }
    if mu == 0.0 {
        return 0.0;
    }
    if epsilon == f64::INFINITY {
        return 0.0;
    }
    let a = -epsilon / mu + mu / 2.0;
    let b = -epsilon / mu - mu / 2.0;
    let first = normal_cdf(a) * (1.0 + SLACK);
    let tail = normal_cdf(b);
    let second = if tail > 0.0 {
        (epsilon + tail.ln()).exp() * (1.0 - SLACK)
    } else {
        0.0
    };
    (first - second).clamp(0.0, 1.0)
}

/// μ = sqrt(2ρ) for a total zCDP cost ρ of Gaussian mechanisms.
pub fn mu_of_rho(rho: f64) -> f64 {
    (2.0 * rho).sqrt()
}

/// The smallest ε with δ(ε; μ) ≤ δ, for display: the exact (ε, δ) of a Gaussian-only total.
/// Rounded up (bisection on the certified bound); +∞ if no ε up to 1e6 suffices.
pub fn epsilon_for(mu: f64, delta: f64) -> f64 {
    if !(delta > 0.0) || !(mu >= 0.0) {
        return f64::INFINITY;
    }
    if mu == 0.0 {
        return 0.0;
    }
    let ok = |eps: f64| delta_upper(eps, mu) <= delta;
    if ok(0.0) {
        return 0.0;
    }
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    while !ok(hi) {
        lo = hi;
        hi *= 2.0;
        if hi > 1e6 {
            return f64::INFINITY;
        }
    }
    bisect(lo, hi, 200, |eps| !ok(eps)).1
}

/// The largest total ρ of Gaussian mechanisms whose exact curve stays within (ε, δ):
/// δ(ε; sqrt(2ρ)) ≤ δ (docs/design/privacy.md §2; at (1, 1e-5) about 0.0359). Rounded down: the result is
/// a certified point of the bisection. 0 if nothing positive is certified.
pub fn max_gaussian_rho(epsilon: f64, delta: f64) -> f64 {
    if !(epsilon > 0.0 && delta > 0.0 && delta < 1.0) {
        return 0.0;
    }
    let ok = |rho: f64| delta_upper(epsilon, mu_of_rho(rho)) <= delta;
    // δ(ε; μ) increases with μ; bracket the boundary by doubling.
    let (mut lo, mut hi) = (0.0_f64, epsilon.max(1e-12));
    while ok(hi) {
        lo = hi;
        hi *= 2.0;
        if hi > 1e12 {
            return lo;
        }
    }
    bisect(lo, hi, 2_100, ok).0
}

#[cfg(test)]
#[path = "gaussian_curve_tests.rs"]
mod tests;
