//! Nicolas et al. 2024, Approximation 5.1 (eq. 19–20, derived in App. A.4): the theoretical
//! ratio r(k, n) = E[Δ₀ᵃ]/E[Δ₀ᵇ] of the two first-iteration sensitivity bounds for X₀ = Q(Ω),
//! Ω an n×k standard Gaussian. Used by `benches/sensitivity_fig1.rs`; tested in
//! `tests/figures.rs`. Nothing here is part of the service.

#![allow(dead_code)]

/// The F(1, n) mean μ = n/(n − 2) and variance σ² = 2n²(n − 1)/((n − 2)²(n − 4)) that App. A.4
/// approximates n·Q_ij² by (n > 4).
fn f_moments(n: f64) -> (f64, f64) {
    let mu = n / (n - 2.0);
    let sigma2 = 2.0 * n * n * (n - 1.0) / ((n - 2.0).powi(2) * (n - 4.0));
    (mu, sigma2)
}

/// E[Δ₀ᵃ]² ≈ sqrt(2σ²·log(kn)·k²/n²) + kμ/n (eq. 19).
pub fn hardt_price_sq(k: usize, n: usize) -> f64 {
    let (k, n) = (k as f64, n as f64);
    let (mu, sigma2) = f_moments(n);
    (2.0 * sigma2 * (k * n).ln() * k * k / (n * n)).sqrt() + k * mu / n
}

/// E[Δ₀ᵇ]² ≈ sqrt(2σ²·log(n)·k/n²) + kμ/n (eq. 20).
pub fn row_norm_sq(k: usize, n: usize) -> f64 {
    let (k, n) = (k as f64, n as f64);
    let (mu, sigma2) = f_moments(n);
    (2.0 * sigma2 * n.ln() * k / (n * n)).sqrt() + k * mu / n
}

/// r(k, n) ≈ sqrt(eq. 19 / eq. 20), the paper's green curve in Figures 1–2.
pub fn theoretical_ratio(k: usize, n: usize) -> f64 {
    (hardt_price_sq(k, n) / row_norm_sq(k, n)).sqrt()
}
