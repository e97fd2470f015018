//! Tests of the noise-scale checks themselves: they give clear errors on unusable input.

use super::*;

/// Deterministic values with mean 0 and mean square 1 (±1, alternating).
fn unit_signs(n: usize) -> Vec<f64> {
    (0..n).map(|i| if i % 2 == 0 { 1.0 } else { -1.0 }).collect()
}

#[test]
fn tiny_samples_are_refused() {
    for n in [0, 1, 2, 99] {
        let err = check_gaussian_scale(&unit_signs(n), 1.0).expect_err("too few draws");
        assert_eq!(err, format!("need at least 100 draws, got {n}"));
        let err = check_laplace_scale(&unit_signs(n), 1.0).expect_err("too few draws");
        assert_eq!(err, format!("need at least 100 draws, got {n}"));
    }
    // 100 exactly is enough: ±1 has mean 0 and Σx² = n, a perfect N(0, 1) second moment.
    check_gaussian_scale(&unit_signs(100), 1.0).expect("100 draws are accepted");
    // …and Σ|x|/b = n, a perfect Laplace(0, 1) first absolute moment.
    check_laplace_scale(&unit_signs(100), 1.0).expect("100 draws are accepted");
}

#[test]
fn bad_expected_scales_are_refused() {
    let values = unit_signs(200);
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let err = check_gaussian_scale(&values, bad).expect_err("bad sd");
        assert!(err.starts_with("expected sd must be finite and > 0"), "{err}");
        let err = check_laplace_scale(&values, bad).expect_err("bad scale");
        assert!(err.starts_with("expected scale must be finite and > 0"), "{err}");
    }
}

#[test]
fn non_finite_draws_are_refused() {
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let mut values = unit_signs(200);
        values[17] = bad;
        let err = check_gaussian_scale(&values, 1.0).expect_err("non-finite draw");
        assert_eq!(err, format!("draw 17 is not finite ({bad})"));
        assert!(check_laplace_scale(&values, 1.0).is_err());
    }
}

#[test]
fn zero_noise_is_refused() {
    // A mechanism that forgot to add noise: all draws 0.
    let zeros = vec![0.0; 1_000];
    assert!(
        check_gaussian_scale(&zeros, 1.0)
            .expect_err("no noise")
            .contains("empirical sd")
    );
    assert!(
        check_laplace_scale(&zeros, 1.0)
            .expect_err("no noise")
            .contains("empirical scale")
    );
}
