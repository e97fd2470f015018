//! PrivRange: private top-eigenvalue estimate of a batch's gradient spread (Düngler & Sanyal
//! 2025 Alg. 6, = Liu et al. 2022a Alg. 4).
//!
//! Input: the batch's gradients g_1, …, g_B (d-vectors), (ε, δ), the number k' of subsets.
//! 1. g̃_i = g_{2i} − g_{2i−1}, i = 1..⌊B/2⌋ (line 1): pairwise differences remove the mean.
//! 2. Cut the g̃_i into k' consecutive subsets G_j of b = ⌊⌊B/2⌋/k'⌋ (line 3; leftovers unused).
//! 3. λ^(j) = top eigenvalue of (1/b)·G_j G_jᵀ (line 4).
//! 4. Run the (ε, δ) stability histogram ([`super::stability_histogram`]) on the λ^(j) over the
//!    geometric bins [2^{i/4}, 2^{(i+1)/4}), i ∈ Z (line 5); return the kept bin's left end
//!    Λ̂ = 2^{i/4}, or ⊥ (lines 7–11).
//!
//! Privacy: one record is one g_i, hence one g̃, one subset and one λ^(j); the histogram's input
//! changes by one value, so PrivRange is (ε, δ)-DP. A λ^(j) that is 0 (a subset of identical
//! gradients) falls in a bin of its own; if that bin wins, the spread estimate is 0, which gives
//! PrivMean no interval to work with, so it is reported as ⊥ too.
//!
//! The number of subsets is k' = C₁·log(1/(δτ))/ε in the paper with C₁ unspecified; the caller
//! fixes it (see [`super::KDpPcaConfig::range_subsets`]).

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
}

/// The fewest subsets for which PrivRange keeps a bin with probability ≥ 1 − τ when all k'
/// estimates share that bin: k' + Lap(2/ε) ≤ 1 + 2·ln(2/δ)/ε has probability
/// ½·exp(−(k' − threshold)·ε/2), which is ≤ τ iff k' ≥ 1 + 2·ln(1/(δτ))/ε. This is the paper's
/// k' = C₁·log(1/(δτ))/ε (line 3) with C₁ = 2, plus one.
pub fn minimum_subsets(histogram: &StabilityHistogram, tau: f64) -> f64 {
    1.0 + 2.0 * (-histogram.delta.ln() - tau.ln()) / histogram.epsilon
}

/// The geometric bin of λ: `Some(i)` with 2^{i/4} ≤ λ < 2^{(i+1)/4}, or `None` for the bin of
/// λ = 0 (and of anything not finite and positive, which finite data cannot produce). A fixed
/// function of each value, so any rounding in it does not affect privacy.
pub fn geometric_bin(lambda: f64) -> Option<i64> {
    if !(lambda > 0.0 && lambda.is_finite()) {
        return None;
    }
    let edge = |i: i64| (i as f64 / 4.0).exp2();
    let mut i = (4.0 * lambda.log2()).floor() as i64;
    while edge(i) > lambda {
        i -= 1;
    }
    while edge(i + 1) <= lambda {
        i += 1;
    }
    Some(i)
}

/// The left end 2^{i/4} of geometric bin i.
pub fn bin_left_end(i: i64) -> f64 {
    (i as f64 / 4.0).exp2()
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
    let counts = count(estimates.into_iter().map(geometric_bin));
    Ok(cal
        .histogram
        .select(&counts, RANGE_HISTOGRAM, env)
        .flatten()
        .map(bin_left_end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithms::testing::{gaussian, seeded, with_audited_env};

    #[test]
    fn minimum_subsets_clear_the_threshold_with_probability_one_minus_tau() {
        let h = StabilityHistogram {
            epsilon: 0.5,
            delta: 0.005,
        };
        let tau = 1e-3;
        // 1 + 2·ln(1/(0.005·0.001))/0.5 = 1 + 4·ln(2e5).
        let k = minimum_subsets(&h, tau);
        assert!((k - (1.0 + 4.0 * 2e5_f64.ln())).abs() < 1e-12);
        // P(k + Lap(2/ε) ≤ threshold) = ½·exp(−(k − threshold)·ε/2) = τ exactly.
        let p = 0.5 * (-(k - h.threshold()) * h.epsilon / 2.0).exp();
        assert!((p - tau).abs() < 1e-15, "{p}");
    }

    #[test]
    fn geometric_bins_contain_their_values() {
        for lambda in [1e-300, 1e-5, 0.3, 1.0, 2.0_f64.powf(0.25), 1.5, 7.0, 1e6, 1e300] {
            let i = geometric_bin(lambda).expect("positive");
            assert!(
                bin_left_end(i) <= lambda && lambda < bin_left_end(i + 1),
                "{lambda}: {i}"
            );
        }
        assert_eq!(geometric_bin(1.0), Some(0));
        assert_eq!(geometric_bin(2.0), Some(4));
        assert_eq!(geometric_bin(0.5), Some(-4));
        assert_eq!(geometric_bin(0.0), None);
        assert_eq!(geometric_bin(f64::NAN), None);
    }

    #[test]
    fn subset_estimates_are_top_eigenvalues_of_the_differences() {
        let (d, batch) = (5, 26);
        let g = gaussian(&mut seeded(1), d, batch);
        // 13 pairs, 3 subsets of 4 (one pair unused).
        let values = subset_eigenvalues(&g, 3).expect("fits");
        for (j, value) in values.iter().enumerate() {
            let mut c = Matrix::zeros(d, d);
            for i in 4 * j..4 * j + 4 {
                let diff = g.column(2 * i + 1) - g.column(2 * i);
                c += &diff * diff.transpose() / 4.0;
            }
            let want = crate::linalg::sym_eig(&c).values[0];
            assert!((value - want).abs() < 1e-12 * want, "{value} vs {want}");
        }
        // b = 1 and b > d take the other two paths.
        let one = subset_eigenvalues(&g, 13).expect("fits");
        assert!((one[0] - (g.column(1) - g.column(0)).norm_squared()).abs() < 1e-12);
        let wide = subset_eigenvalues(&g, 1).expect("fits");
        assert!(wide[0] > 0.0);
        assert!(subset_eigenvalues(&g, 14).is_err());
    }

    fn run(g: &Matrix, cal: &RangeCalibration, seed: u64) -> Option<f64> {
        let (lambda, _) = with_audited_env(seed, |env| priv_range(g, cal, env));
        lambda.expect("runs")
    }

    /// Gradients with covariance s²·I_d: differences have covariance 2s²·I, so with large
    /// subsets Λ̂ lands within a bin (factor 2^{1/4}) of 2s².
    #[test]
    fn estimates_the_spread_and_reports_bottom() {
        let (d, batch, s) = (4, 40_000, 3.0);
        let g = gaussian(&mut seeded(2), d, batch) * s + Matrix::from_element(d, batch, 100.0);
        let cal = RangeCalibration {
            histogram: StabilityHistogram {
                epsilon: 5.0,
                delta: 1e-6,
            },
            subsets: 20,
        };
        let lambda = run(&g, &cal, 3).expect("not ⊥");
        // λ_max of a 4-dim sample covariance of 1 000 differences: 2s² = 18 times at most (1 + √(4/1000))² ≈ 1.13.
        assert!(
            (18.0 / 2.0_f64.sqrt()..18.0 * 2.0_f64.sqrt()).contains(&lambda),
            "{lambda}"
        );
        assert_eq!(lambda, bin_left_end(geometric_bin(lambda).expect("positive")));
        // Identical gradients: every estimate is 0, which is ⊥.
        let flat = Matrix::from_element(d, batch, 1.0);
        assert_eq!(run(&flat, &cal, 4), None);
        // Too few subsets to clear the threshold 1 + 2·ln(2e6)/5 ≈ 6.8: ⊥.
        let few = RangeCalibration { subsets: 3, ..cal };
        assert_eq!(run(&g, &few, 5), None);
    }
}
