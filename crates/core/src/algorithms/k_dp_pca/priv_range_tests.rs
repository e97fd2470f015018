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
        for w in [1, 3, 8] {
            let i = geometric_bin(lambda, w).expect("positive");
            assert!(
                bin_left_end(i, w) <= lambda && lambda < bin_left_end(i + 1, w),
                "{lambda}: {i}"
            );
        }
    }
    assert_eq!(geometric_bin(1.0, 1), Some(0));
    assert_eq!(geometric_bin(2.0, 1), Some(4));
    assert_eq!(geometric_bin(0.5, 1), Some(-4));
    assert_eq!(geometric_bin(3.9, 8), Some(0));
    assert_eq!(geometric_bin(4.0, 8), Some(1));
    assert_eq!(geometric_bin(0.25, 8), Some(-1));
    assert_eq!(geometric_bin(0.0, 8), None);
    assert_eq!(geometric_bin(f64::NAN, 1), None);
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
        bin_quarter_octaves: PAPER_BIN_QUARTER_OCTAVES,
    };
    let lambda = run(&g, &cal, 3).expect("not ⊥");
    // λ_max of a 4-dim sample covariance of 1 000 differences: 2s² = 18 times at most (1 + √(4/1000))² ≈ 1.13.
    assert!(
        (18.0 / 2.0_f64.sqrt()..18.0 * 2.0_f64.sqrt()).contains(&lambda),
        "{lambda}"
    );
    assert_eq!(
        lambda,
        bin_left_end(geometric_bin(lambda, 1).expect("positive"), 1)
    );
    // Ratio-4 bins: Λ̂ is the left end 4^i ≤ 18 of the kept bin, i.e. 16.
    let wide = RangeCalibration {
        bin_quarter_octaves: DEFAULT_BIN_QUARTER_OCTAVES,
        ..cal
    };
    assert_eq!(run(&g, &wide, 3), Some(16.0));
    // Identical gradients: every estimate is 0, which is ⊥.
    let flat = Matrix::from_element(d, batch, 1.0);
    assert_eq!(run(&flat, &cal, 4), None);
    // Too few subsets to clear the threshold 1 + 2·ln(2e6)/5 ≈ 6.8: ⊥.
    let few = RangeCalibration { subsets: 3, ..cal };
    assert_eq!(run(&g, &few, 5), None);
}
