use super::*;
use crate::linalg::testing::{gaussian, is_decreasing, max_abs, max_diff, orthonormality_reference};
use crate::linalg::threads::SVD_MIN_WORK;

fn check(y: &Matrix) {
    let (m, n) = y.shape();
    let r = m.min(n);
    let f = try_thin_svd(y).expect("finite input");
    assert_eq!((f.u.shape(), f.s.len(), f.v.shape()), ((m, r), r, (n, r)));
    assert!(
        is_decreasing(&f.s) && f.s.iter().all(|&x| x >= 0.0),
        "{m}×{n}: order"
    );
    let tol = 20.0 * m.max(n) as f64 * f64::EPSILON;
    assert!(orthonormality_reference(&f.u) <= tol, "{m}×{n}: UᵀU ≠ I");
    assert!(orthonormality_reference(&f.v) <= tol, "{m}×{n}: VᵀV ≠ I");
    let rebuilt = &f.u * Matrix::from_diagonal(&f.s) * f.v.transpose();
    let scale = max_abs(y).max(f64::MIN_POSITIVE) * r as f64;
    assert!(max_diff(&rebuilt, y) <= tol * scale, "{m}×{n}: U·diag(s)·Vᵀ ≠ Y");
    // Same singular values as nalgebra's independent implementation.
    let mut want: Vec<f64> = y.clone().singular_values().iter().copied().collect();
    want.sort_by(|a, b| b.total_cmp(a));
    for (got, want) in f.s.iter().zip(&want) {
        assert!(
            (got - want).abs() <= tol * want.max(f.s[0]),
            "{m}×{n}: {got} vs {want}"
        );
    }
}

#[test]
fn thin_svd_reconstructs_with_decreasing_singular_values() {
    let shapes = [
        (1, 1),
        (1, 6),
        (6, 1),
        (9, 9),
        (60, 8),
        (8, 60),
        (150, 130),
        (40, 170),
    ];
    for (s, &(m, n)) in shapes.iter().enumerate() {
        check(&gaussian(m, n, 400 + s as u64));
    }
}

#[test]
fn large_enough_to_run_in_parallel() {
    // Wide, so faer's transposed path runs too; m·n·m ≥ SVD_MIN_WORK.
    let m = 500;
    let n = SVD_MIN_WORK / (m * m) + 1;
    assert!(n > m && work(m, n, m) >= SVD_MIN_WORK);
    check(&gaussian(m, n, 450));
}

#[test]
fn rank_deficient_input_has_zero_tail() {
    let y = gaussian(40, 3, 1) * gaussian(3, 30, 2);
    check(&y);
    let f = thin_svd(&y);
    assert!(f.s.iter().skip(3).all(|&x| x <= 1e-12 * f.s[0]));
}

#[test]
fn bad_input_is_a_typed_error_or_nan() {
    let mut y = gaussian(4, 3, 9);
    y[(3, 2)] = f64::NEG_INFINITY;
    assert_eq!(try_thin_svd(&y).err(), Some(LinalgError::NonFinite));
    let f = thin_svd(&y);
    assert_eq!((f.u.shape(), f.s.len(), f.v.shape()), ((4, 3), 3, (3, 3)));
    assert!(f.s.iter().all(|x| x.is_nan()));
}

#[test]
fn empty_shapes_give_empty_factors() {
    let f = thin_svd(&Matrix::zeros(0, 5));
    assert_eq!((f.u.shape(), f.s.len(), f.v.shape()), ((0, 0), 0, (5, 0)));
}
