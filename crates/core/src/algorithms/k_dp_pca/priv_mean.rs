//! PrivMean: private mean of a batch's gradients with truncation around a private centre
//! (Düngler & Sanyal 2025 Alg. 7, = Liu et al. 2022a Alg. 5).
//!
//! Input: gradients g_1, …, g_B ∈ R^d, the range estimate Λ̂ of PrivRange, (ε, δ), the tail
//! parameters K, a of Assumption A.4 and a failure probability τ. Logs are natural.
//! 1. υ = 2^{1/4}·K·sqrt(Λ̂)·ln²(25) (line 1), the width of the bins (ℓυ, (ℓ+1)υ], ℓ ∈ Z.
//! 2. For each coordinate j (lines 2–8): an (ε_h, δ_h) stability histogram of {g_ij}_i
//!    ([`super::stability_histogram`]) gives a bin (l, l + υ]; ḡ_j = l. The coordinate is
//!    truncated to [ḡ_j − R, ḡ_j + R] with R = 3·K·sqrt(Λ̂)·ln^a(B·d/τ) (line 6).
//! 3. μ̂ = (1/B)·Σ_i g̃_i + N(0, σ²·I_d) (line 9).
//!
//! When a coordinate's histogram releases ⊥ (no bin clears the threshold, which happens when
//! B is small next to 2·ln(2/δ_h)/ε_h) the paper says nothing; we centre that coordinate's
//! interval at ḡ_j = 0. That is a post-processing of the released ⊥ and keeps the interval
//! width 2R, so the sensitivity bound below is unchanged.
//!
//! Privacy of one call, on one batch (one record changes one gradient g_i):
//! - Histograms: d of them, each on one coordinate of the same B gradients, so each one's input
//!   changes by one value and each is (ε_h, δ_h)-DP (Karwa–Vadhan), charged as δ_h-approximate
//!   (ε_h²/2)-zCDP (docs/design/privacy.md §2). Their d-fold adaptive composition is δ-approximate zCDP
//!   with ρ_H = d·ε_h²/2 and δ_H = d·δ_h (composition of approximate zCDP, Bun & Steinke 2016
//!   §8; docs/design/privacy.md §2).
//!   This replaces the paper's (ε/(4·sqrt(2d·ln(4/δ))), δ/(4d)) per coordinate (Alg. 7 line 3),
//!   which is the same composition done with the advanced composition theorem in (ε, δ) terms;
//!   zCDP composition is never worse and needs no slack δ'.
//! - Gaussian: given the centres, let T be the truncation to the box Π_j [ḡ_j − R, ḡ_j + R].
//!   Replacing one gradient g_i by g_i' moves the mean by ‖T(g_i) − T(g_i')‖/B. Both images lie
//!   in the box, so this is at most its diameter 2R·sqrt(d)/B (the paper's bound). T is the
//!   Euclidean projection onto a closed convex set, hence 1-Lipschitz, so it is also at most
//!   ‖g_i − g_i'‖/B ≤ 2G/B when every gradient has ‖g_i‖ ≤ G. For k-DP-PCA's gradients
//!   g_i = P·x_i·(x_iᵀω), with ‖P‖ ≤ 1, ‖ω‖ = 1 and ‖x_i‖ ≤ β, G = β²; each gradient is
//!   clipped to G before use (a no-op in exact arithmetic that makes the bound hold in floating
//!   point too). So Δ = min(2R·sqrt(d), 2G)/B, which for real data is usually 2G/B: R grows
//!   with K·ln^a(B·d/τ) and sqrt(d) where G does not. With
//!   σ = Δ/sqrt(2ρ_g) the release is ρ_g-zCDP (Bun & Steinke 2016 Prop. 1.6), charged in ρ
//!   directly ([`crate::privacy::Cost::gaussian`]). The paper's σ = 12·K·sqrt(Λ̂)·ln^a(Bd/τ)·
//!   sqrt(2d·ln(2.5/δ))/(εB) (Alg. 7 line 9) is the classical (ε/2, δ/2) Gaussian mechanism
//!   with the same Δ, valid only for ε/2 < 1; Δ/s is the same for every Λ̂, so the charge
//!   ρ_g = (Δ/σ)²/2 does not depend on the data.
//!
//! Sequential composition of the two parts: δ_H-approximate (ρ_H + ρ_g)-zCDP. How the job's
//! budget is split between them is [`super::KDpPcaConfig`]'s business.

use super::stability_histogram::{StabilityHistogram, count};
use crate::algorithms::{RunEnv, RunError};
use crate::linalg::clip::clip_columns_l2;
use crate::linalg::{Matrix, Vector};

/// Audit label of the per-coordinate histograms' Laplace draws.
pub const MEAN_HISTOGRAM: &str = "priv_mean_histogram";
/// Audit label of the Gaussian noise added to the truncated mean.
pub const MEAN_NOISE: &str = "priv_mean_noise";

/// PrivMean's privacy parameters and constants for one call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeanCalibration {
    /// The (ε_h, δ_h) histogram run on each coordinate (d of them per call).
    pub histogram: StabilityHistogram,
    /// ρ_g of the Gaussian part (σ = Δ/sqrt(2ρ_g)).
    pub gaussian_rho: f64,
    /// G, the L2 bound every gradient is clipped to (β² for k-DP-PCA; module docs). Finite, > 0.
    pub gradient_bound: f64,
    /// K of Assumption A.4.
    pub tail_scale: f64,
    /// a of Assumption A.4.
    pub tail_exponent: f64,
    /// τ, the failure probability this call is given.
    pub failure_probability: f64,
}

impl MeanCalibration {
    /// υ = 2^{1/4}·K·sqrt(Λ̂)·ln²(25) (Alg. 7 line 1).
    pub fn bin_width(&self, lambda: f64) -> f64 {
        let log = 25.0_f64.ln();
        2.0_f64.powf(0.25) * self.tail_scale * lambda.sqrt() * log * log
    }

    /// R = 3·K·sqrt(Λ̂)·ln^a(B·d/τ) (Alg. 7 line 6), the truncation radius.
    pub fn radius(&self, lambda: f64, batch: usize, d: usize) -> f64 {
        let log = (batch as f64).ln() + (d as f64).ln() - self.failure_probability.ln();
        3.0 * self.tail_scale * lambda.sqrt() * log.powf(self.tail_exponent)
    }

    /// Δ = min(2R·sqrt(d), 2G)/B, the L2 sensitivity of the truncated mean of gradients
    /// clipped to G (module docs).
    pub fn sensitivity(&self, lambda: f64, batch: usize, d: usize) -> f64 {
        let box_diameter = 2.0 * self.radius(lambda, batch, d) * (d as f64).sqrt();
        box_diameter.min(2.0 * self.gradient_bound) / batch as f64
    }

    /// 1/sqrt(2ρ_g): σ = multiplier × Δ.
    pub fn noise_multiplier(&self) -> f64 {
        1.0 / (2.0 * self.gaussian_rho).sqrt()
    }

    /// σ = Δ/sqrt(2ρ_g).
    pub fn noise_sd(&self, lambda: f64, batch: usize, d: usize) -> f64 {
        self.sensitivity(lambda, batch, d) * self.noise_multiplier()
    }
}

/// The bin (ℓυ, (ℓ+1)υ] of x: ℓ = ⌈x/υ⌉ − 1 (a fixed function of each value; `as` saturates).
pub fn coordinate_bin(x: f64, width: f64) -> i64 {
    ((x / width).ceil() - 1.0) as i64
}

/// Alg. 7 on the d×B gradients `g` with range estimate `lambda` = Λ̂ > 0.
pub fn priv_mean(
    g: &Matrix,
    lambda: f64,
    cal: &MeanCalibration,
    env: &mut RunEnv<'_>,
) -> Result<Vector, RunError> {
    let (d, batch) = g.shape();
    let width = cal.bin_width(lambda);
    let radius = cal.radius(lambda, batch, d);
    let sd = cal.noise_sd(lambda, batch, d);
    let usable = [width, radius, sd, cal.gradient_bound]
        .iter()
        .all(|v| *v > 0.0 && v.is_finite());
    if !(usable && batch >= 1) {
        return Err(RunError::Failed(
            "PrivMean: the range estimate gives no usable interval or noise scale".into(),
        ));
    }
    let mut g = g.clone();
    clip_columns_l2(&mut g, cal.gradient_bound);
    let mut centre = Vector::zeros(d);
    for j in 0..d {
        let counts = count(g.row(j).iter().map(|&x| coordinate_bin(x, width)));
        if let Some(bin) = cal.histogram.select(&counts, MEAN_HISTOGRAM, env)? {
            centre[j] = bin as f64 * width;
        }
    }
    let mut mean = Vector::zeros(d);
    for col in g.column_iter() {
        for j in 0..d {
            mean[j] += col[j].max(centre[j] - radius).min(centre[j] + radius);
        }
    }
    mean /= batch as f64;
    let query = Matrix::from_column_slice(d, 1, mean.as_slice());
    let released = env.gaussian_release(MEAN_NOISE, query, cal.sensitivity(lambda, batch, d), sd)?;
    Ok(Vector::from_column_slice(released.as_slice()))
}

#[cfg(test)]
#[path = "priv_mean_tests.rs"]
pub(crate) mod tests;
