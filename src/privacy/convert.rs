//! Conversions between zCDP ρ and (ε, δ)-DP (privacy.md §2).

use super::{Delta, Epsilon};

/// (ε, δ) → ρ: the inverse of Bun–Steinke Prop. 1.3, ρ = (sqrt(ln(1/δ) + ε) − sqrt(ln(1/δ)))².
/// A ρ-zCDP mechanism with this ρ is (ε, δ)-DP.
pub fn epsilon_delta_to_rho(epsilon: Epsilon, delta: Delta) -> f64 {
    let l = (1.0 / delta.get()).ln();
    let r = (l + epsilon.get()).sqrt() - l.sqrt();
    r * r
}

/// ρ → ε at a given δ: the tighter of Bun–Steinke Prop. 1.3, ε = ρ + 2·sqrt(ρ·ln(1/δ)), and
/// the Canonne–Kamath–Steinke 2020 bound (Prop. 12 form)
/// ε = inf_{a>1} [ a·ρ + ( ln(1/δ) + (a−1)·ln(1−1/a) − ln(a) ) / (a−1) ].
pub fn rho_to_epsilon(rho: f64, delta: Delta) -> f64 {
    let l = (1.0 / delta.get()).ln();
    let bun_steinke = rho + 2.0 * (rho * l).sqrt();
    bun_steinke.min(cks_epsilon(rho, l))
}

/// The CKS objective at Rényi order a > 1.
fn cks_objective(a: f64, rho: f64, log_inv_delta: f64) -> f64 {
    a * rho + (log_inv_delta + (a - 1.0) * (1.0 - 1.0 / a).ln() - a.ln()) / (a - 1.0)
}

/// Minimises the CKS objective over a > 1 by golden-section search on ln(a − 1); the
/// objective is unimodal there. Returns +∞ when ρ is not positive.
fn cks_epsilon(rho: f64, log_inv_delta: f64) -> f64 {
    if !(rho > 0.0) {
        return f64::INFINITY;
    }
    let f = |t: f64| cks_objective(1.0 + t.exp(), rho, log_inv_delta);
    let (mut lo, mut hi) = (-30.0_f64, 30.0_f64);
    let g = (5.0_f64.sqrt() - 1.0) / 2.0;
    let mut x1 = hi - g * (hi - lo);
    let mut x2 = lo + g * (hi - lo);
    let (mut f1, mut f2) = (f(x1), f(x2));
    for _ in 0..200 {
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
    // Any a > 1 gives a valid bound, so the value at the found point is sound even if the
    // search stopped short of the true infimum.
    f1.min(f2)
}
