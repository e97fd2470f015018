//! PrivRange: private top-eigenvalue estimate of a batch's gradient spread (Düngler & Sanyal
//! 2025 Alg. 6, = Liu et al. 2022a Alg. 4).
//!
//! Input: the batch's gradients g_1, …, g_B (d-vectors), (ε_R, δ_R), the number k' of subsets.
//! 1. g̃_i = g_{2i} − g_{2i−1}, i = 1..⌊B/2⌋ (line 1): pairwise differences remove the mean.
//! 2. Cut the g̃_i into k' consecutive subsets G_j of b = ⌊⌊B/2⌋/k'⌋ (line 3; leftovers unused).
//! 3. λ^(j) = top eigenvalue of (1/b)·G_j G_jᵀ (line 4).
//! 4. Run the (ε_R, δ_R) stability histogram ([`super::stability_histogram`]) on the λ^(j) over
//!    geometric bins [r^i, r^{i+1}), i ∈ Z, r = 2^{w/4} (line 5, where the paper has w = 1);
//!    return the kept bin's left end Λ̂ = r^i, or ⊥ (lines 7–11).
//!
//! Privacy: one record is one g_i, hence one g̃, one subset and one λ^(j); the histogram's input
//! changes by one value, so PrivRange is (ε_R, δ_R)-DP whatever the bins are (they are a fixed
//! partition of (0, ∞) chosen before seeing the data). A λ^(j) that is 0 (a subset of identical
//! gradients) falls in a bin of its own; if that bin wins, the spread estimate is 0, which gives
//! PrivMean no interval to work with, so it is reported as ⊥ too.
//!
//! Why the bins are wider than the paper's (docs/k_dp_pca.md, "Why PrivRange returned ⊥"). The
//! histogram keeps a bin only if it holds about k'_min = 1 + 2·ln(1/(δ_R·τ))/ε_R of the k'
//! estimates, so the estimates must agree to within one bin. With the paper's quarter-octave
//! bins (ratio 2^{1/4} ≈ 1.19, 0.17 in ln) that needs each λ^(j) to be accurate to a few per
//! cent, i.e. subsets of hundreds of pair differences and batches of thousands of records. At
//! B = √n the estimates are single pair differences, λ^(j) = ‖g̃‖², whose logarithm spreads
//! like the log of a χ²₂ variable (sd π/√6 ≈ 1.28 in ln, 7 quarter-octave bins): the modal bin
//! holds ~6 % of them and never reaches the threshold. Bins of ratio r = 4 (w = 8) hold about
//! half of the averages of b ≥ 4 pair differences (log-sd ≈ 1.28/√b ≤ ln 4/2), and nearly all at the default b ≥ 16. The price is a
//! coarser Λ̂: the left end is within a factor r below the kept estimates, so PrivMean's
//! truncation radius R ∝ sqrt(Λ̂) is at most √r = 2 times smaller than with exact Λ (it still
//! has the factor 3·ln^a(Bd/τ) ≈ 50 of slack), and its noise is never larger.
//!
//! The number of subsets is k' = C₁·log(1/(δτ))/ε in the paper with C₁ unspecified; the caller
//! fixes it as max(2·⌈k'_min⌉, 16) (see [`minimum_subsets`] and [`super::KDpPcaConfig`]).

use super::stability_histogram::{StabilityHistogram, count};
use crate::algorithms::{RunEnv, RunError};
use crate::linalg::{Matrix, gram_t, matmul_tn, try_sym_eigenvalues};

/// Audit label of PrivRange's Laplace draws.
pub const RANGE_HISTOGRAM: &str = "priv_range_histogram";

/// PrivRange's privacy parameters and shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RangeCalibration {
    pub histogram: StabilityHistogram,
    /// k', the number of subsets (1 ≤ k' ≤ ⌊B/2⌋).
    pub subsets: usize,
    /// w: each geometric bin spans w quarter octaves (ratio 2^{w/4}; the paper's w = 1).
    pub bin_quarter_octaves: u32,
}

/// The fewest estimates a bin must hold for PrivRange to keep it with probability ≥ 1 − τ:
/// c + Lap(2/ε) ≤ 1 + 2·ln(2/δ)/ε has probability ½·exp(−(c − threshold)·ε/2), which is ≤ τ
/// iff c ≥ 1 + 2·ln(1/(δτ))/ε. This is the paper's k' = C₁·log(1/(δτ))/ε (line 3) with
/// C₁ = 2, plus one. The default k' is twice its ceiling, so that the estimates may split over
/// two neighbouring bins and one of them still holds k'_min.
pub fn minimum_subsets(histogram: &StabilityHistogram, tau: f64) -> f64 {
    1.0 + 2.0 * (-histogram.delta.ln() - tau.ln()) / histogram.epsilon
}

/// The paper's bin width (Alg. 6 line 5): one quarter octave, ratio 2^{1/4}.
pub const PAPER_BIN_QUARTER_OCTAVES: u32 = 1;
/// Our default bin width: eight quarter octaves, ratio 4 (module docs).
pub const DEFAULT_BIN_QUARTER_OCTAVES: u32 = 8;

/// The geometric bin of λ for bins of `w` quarter octaves: `Some(i)` with
/// 2^{iw/4} ≤ λ < 2^{(i+1)w/4}, or `None` for the bin of λ = 0 (and of anything not finite and
/// positive, which finite data cannot produce). A fixed function of each value, so any rounding
/// in it does not affect privacy.
pub fn geometric_bin(lambda: f64, w: u32) -> Option<i64> {
    if !(lambda > 0.0 && lambda.is_finite() && w >= 1) {
        return None;
    }
    let edge = |i: i64| bin_left_end(i, w);
    let mut i = (4.0 * lambda.log2() / f64::from(w)).floor() as i64;
    while edge(i) > lambda {
        i -= 1;
    }
    while edge(i + 1) <= lambda {
        i += 1;
    }
    Some(i)
}

/// The left end 2^{iw/4} of geometric bin i (bins of `w` quarter octaves).
pub fn bin_left_end(i: i64, w: u32) -> f64 {
    (i as f64 * f64::from(w) / 4.0).exp2()
}

/// The top eigenvalue of (1/b)·G·Gᵀ for a d×b block G, through the smaller of the two Gram
/// matrices (GᵀG and GGᵀ share their non-zero eigenvalues).
fn top_eigenvalue(block: &Matrix) -> Result<f64, RunError> {
    let (d, b) = block.shape();
    let top = if b == 1 {
        block.norm_squared()
    } else {
        let gram = if b <= d {
            matmul_tn(block, block)
        } else {
            gram_t(block)
        };
        let values = try_sym_eigenvalues(&gram)
            .map_err(|_| RunError::Failed("PrivRange: an eigenvalue computation failed".into()))?;
        values.iter().copied().fold(0.0, f64::max)
    };
    Ok(top / b as f64)
}

/// The per-subset estimates λ^(1), …, λ^(k') (Alg. 6 lines 1–4) for the d×B gradients `g`.
pub fn subset_eigenvalues(g: &Matrix, subsets: usize) -> Result<Vec<f64>, RunError> {
    let (d, batch) = g.shape();
    let pairs = batch / 2;
    let b = pairs.checked_div(subsets).unwrap_or(0);
    if b == 0 {
        return Err(RunError::Failed(
            "PrivRange: the batch has fewer pairs than subsets".into(),
        ));
    }
    (0..subsets)
        .map(|j| {
            let block = Matrix::from_fn(d, b, |r, c| {
                let i = j * b + c;
                g[(r, 2 * i + 1)] - g[(r, 2 * i)]
            });
            top_eigenvalue(&block)
        })
        .collect()
}

/// Alg. 6: Λ̂ = the left end of the histogram's bin, or `None` for ⊥.
pub fn priv_range(g: &Matrix, cal: &RangeCalibration, env: &mut RunEnv<'_>) -> Result<Option<f64>, RunError> {
    let estimates = subset_eigenvalues(g, cal.subsets)?;
    let w = cal.bin_quarter_octaves;
    let counts = count(estimates.into_iter().map(|l| geometric_bin(l, w)));
    Ok(cal
        .histogram
        .select(&counts, RANGE_HISTOGRAM, env)?
        .flatten()
        .map(|i| bin_left_end(i, w)))
}

#[cfg(test)]
#[path = "priv_range_tests.rs"]
mod tests;
