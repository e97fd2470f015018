//! Conversions between zCDP ρ and (ε, δ)-DP (docs/design/privacy.md §2).
//!
//! Both directions round against the user. ρ → ε returns an upper bound on the ε the formulas
//! give, with an allowance for floating-point error added; (ε, δ) → ρ returns a ρ whose
//! forward conversion is certified to be at most ε. Hence the round trip
//! `rho_to_epsilon(epsilon_delta_to_rho(ε, δ), δ) <= ε` holds exactly, in floating point.

use super::{Delta, Epsilon};

/// Relative allowance for floating-point error when evaluating an ε bound: each bound is a sum
/// of a few terms, each computed to within a few ulps, so its error is below this multiple of
/// the sum of the terms' magnitudes.
const ROUNDING: f64 = 16.0 * f64::EPSILON;

/// Search interval for t = ln(a − 1) in the CKS minimisation: a − 1 ∈ [e⁻⁴⁰, e⁴⁰]. For ρ in the
/// ledger's range (1e-12 ≤ ρ ≤ 1e6) and δ from 1e-300 to 0.999 the minimiser lies inside (the
/// tests compare with a brute-force grid there); where it does not, the value found is still a
/// valid, if looser, bound, and the Bun–Steinke bound is taken when it is tighter.
const T_RANGE: (f64, f64) = (-40.0, 40.0);

/// Golden-section steps: the interval shrinks by 0.618 per step, so 200 steps reach machine
/// precision on an interval of width 80 with a wide margin.
const GOLDEN_STEPS: usize = 200;

/// ln(1/δ), computed as −ln δ so that a subnormal δ does not overflow 1/δ.
fn log_inv_delta(delta: Delta) -> f64 {
    -delta.get().ln()
}

/// (ε, δ) → ρ: the largest ρ whose conversion by [`rho_to_epsilon`] (the tighter of
/// Bun–Steinke 2016 Prop. 1.3 and CKS 2020 Prop. 12, rounded up) is at most ε at δ
/// (docs/design/privacy.md §2: "the tightest sound inverse"; at (1, 1e-5) ρ = 0.0306 where the
/// Bun–Steinke inverse alone gives 0.0208).
///
/// Start from the Bun–Steinke inverse ρ = (sqrt(ln(1/δ) + ε) − sqrt(ln(1/δ)))², evaluated as
/// (ε / (sqrt(ln(1/δ) + ε) + sqrt(ln(1/δ))))² without cancellation and nudged down until
/// certified; then bisect between it and a ρ that is not certified. The result is always a
/// certified point (rounded down), so `rho_to_epsilon(result, δ) <= ε` holds exactly in
/// floating point. It is finite and ≥ 0; it is 0 only if ε is so small (below about 1e-150)
/// that ρ underflows, in which case a budget of it admits nothing.
pub fn epsilon_delta_to_rho(epsilon: Epsilon, delta: Delta) -> f64 {
    let eps = epsilon.get();
    let certified = |rho: f64| rho_to_epsilon(rho, delta) <= eps;
    let l = log_inv_delta(delta);
    let root = eps / ((l + eps).sqrt() + l.sqrt());
    let mut lo = (root * root).min(f64::MAX);
    let mut step = f64::EPSILON;
    while !certified(lo) {
        if step >= 1.0 {
            return 0.0;
        }
        lo -= lo * step;
        step *= 2.0;
    }
    // Every bound here is at least ρ (a·ρ with a > 1 plus a non-negative rest at the optimum,
    // or ρ + 2·sqrt(ρ·ln(1/δ))), so ε itself is not certified unless rounding says otherwise.
    let mut hi = eps.max(lo * 2.0);
    for _ in 0..64 {
        if !certified(hi) {
            break;
        }
        lo = hi;
        hi *= 2.0;
    }
    if certified(hi) {
        return lo;
    }
    bisect(lo, hi, BISECTION_STEPS, certified).0
}

/// Bisection of [lo, hi] for the boundary of a monotone predicate that holds at and below it
/// (`below(lo)` holds and `below(hi)` does not): at most `steps` halvings, stopping early when
/// the midpoint is no longer strictly inside. Returns the final (lo, hi): `lo` is the largest
/// point found where `below` holds, `hi` the smallest where it does not.
pub(crate) fn bisect(mut lo: f64, mut hi: f64, steps: usize, below: impl Fn(f64) -> bool) -> (f64, f64) {
    for _ in 0..steps {
        let mid = lo + (hi - lo) / 2.0;
        if mid <= lo || mid >= hi {
            break;
        }
        if below(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo, hi)
}

/// Bisection steps of [`epsilon_delta_to_rho`]: enough to reach adjacent floats from any
/// bracket in f64 range.
const BISECTION_STEPS: usize = 2_100;

/// ρ → ε at a given δ: the tighter of Bun–Steinke 2016 Prop. 1.3,
/// ε = ρ + 2·sqrt(ρ·ln(1/δ)), and Canonne–Kamath–Steinke 2020 (Prop. 12 form)
/// ε = inf_{a>1} [ a·ρ + ( ln(1/δ) + (a−1)·ln(1−1/a) − ln(a) ) / (a−1) ].
///
/// Both are evaluated with an upward allowance for rounding, and the result is clamped at 0
/// (an (ε, δ) guarantee with ε < 0 implies (0, δ)). ρ = 0 gives 0; ρ = +∞, a negative ρ or NaN
/// gives +∞ (no guarantee is claimed). Does not add any approximate δ spent: see
/// [`crate::privacy::plan::describe`].
pub fn rho_to_epsilon(rho: f64, delta: Delta) -> f64 {
    if rho >= 0.0 {
        let l = log_inv_delta(delta);
        bun_steinke_epsilon(rho, l).min(cks_epsilon(rho, l)).max(0.0)
    } else {
        f64::INFINITY
    }
}

/// Bun–Steinke 2016 Prop. 1.3, ε = ρ + 2·sqrt(ρ·ln(1/δ)), rounded up. The product is taken
/// under separate square roots so that it cannot overflow for ρ in f64 range.
fn bun_steinke_epsilon(rho: f64, log_inv_delta: f64) -> f64 {
    (rho + 2.0 * rho.sqrt() * log_inv_delta.sqrt()) * (1.0 + ROUNDING)
}

/// Upper bound on the CKS 2020 (Prop. 12 form) objective at order a = 1 + eᵗ.
///
/// With a − 1 = eᵗ, ln(1 − 1/a) = −ln(1 + e⁻ᵗ) and ln a = ln(1 + eᵗ), so the objective is
/// (1 + eᵗ)·ρ + ln(1/δ)·e⁻ᵗ − ln(1 + e⁻ᵗ) − e⁻ᵗ·ln(1 + eᵗ): every term is computed without
/// cancellation for all t (in particular a → 1 and a → ∞). The rounding allowance is relative to
/// the sum of the terms' magnitudes.
fn cks_objective(t: f64, rho: f64, log_inv_delta: f64) -> f64 {
    let a_minus_1 = t.exp();
    let inv = (-t).exp();
    let terms = [
        (1.0 + a_minus_1) * rho,
        log_inv_delta * inv,
        -inv.ln_1p(),
        -a_minus_1.ln_1p() * inv,
    ];
    let value: f64 = terms.iter().sum();
    let magnitude: f64 = terms.iter().map(|x| x.abs()).sum();
    value + ROUNDING * magnitude
}

/// Minimises the CKS objective over t = ln(a − 1) ∈ [`T_RANGE`] by golden-section search (the
/// objective is unimodal in t; the tests compare the result with a brute-force grid). Returns +∞
/// unless ρ is positive and finite. Any a > 1 gives a valid bound, so the value at the point
/// found is sound even if the search stopped short of the true infimum.
fn cks_epsilon(rho: f64, log_inv_delta: f64) -> f64 {
    if !(rho > 0.0 && rho.is_finite()) {
        return f64::INFINITY;
    }
    let f = |t: f64| cks_objective(t, rho, log_inv_delta);
    let (mut lo, mut hi) = T_RANGE;
    let g = (5.0_f64.sqrt() - 1.0) / 2.0;
    let mut x1 = hi - g * (hi - lo);
    let mut x2 = lo + g * (hi - lo);
    let (mut f1, mut f2) = (f(x1), f(x2));
    for _ in 0..GOLDEN_STEPS {
        if f1 < f2 {
            hi = x2;
            x2 = x1;
            f2 = f1;
            x1 = hi - g * (hi - lo);
            f1 = f(x1);
        } else {
            lo = x1;
            x1 = x2;
            f1 = f2;
            x2 = lo + g * (hi - lo);
            f2 = f(x2);
        }
    }
    // A NaN objective (not expected for finite ρ > 0) must not win the minimum.
    let best = f1.min(f2);
    if best.is_nan() { f64::INFINITY } else { best }
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
