use super::*;
use crate::linalg::testing::{
    gaussian, is_decreasing, max_abs, max_diff, orthonormality_reference, with_spectrum,
};
use crate::linalg::threads::DECOMPOSITION_MIN_WORK;

/// Reconstruction, orthonormality and ordering, with tolerances c·d·ε·‖A‖.
fn check(a: &Matrix) -> SymEig {
    let d = a.nrows();
    let e = try_sym_eig(a).expect("finite square input");
    assert_eq!((e.values.len(), e.vectors.shape()), (d, (d, d)));
    assert!(is_decreasing(&e.values), "d={d}: not decreasing");
    let tol = 20.0 * d as f64 * f64::EPSILON;
    assert!(orthonormality_reference(&e.vectors) <= tol, "d={d}: VᵀV ≠ I");
    let scale = max_abs(a).max(f64::MIN_POSITIVE) * d as f64;
    let rebuilt = &e.vectors * Matrix::from_diagonal(&e.values) * e.vectors.transpose();
    assert!(max_diff(&rebuilt, a) <= tol * scale, "d={d}: V·diag(λ)·Vᵀ ≠ A");
    e
}

#[test]
fn recovers_a_known_spectrum_in_decreasing_order() {
    for (s, &d) in [1usize, 2, 5, 33, 160].iter().enumerate() {
        // Mixed signs, unsorted, with a repeated eigenvalue when d ≥ 3.
        let spectrum: Vec<f64> = (0..d).map(|i| ((i * 7919) % d) as f64 - d as f64 / 3.0).collect();
        let e = check(&with_spectrum(&spectrum, 200 + s as u64));
        let mut want = spectrum.clone();
        want.sort_by(|x, y| y.total_cmp(x));
        let tol = 50.0 * d as f64 * f64::EPSILON * max_abs(&Matrix::from_column_slice(d, 1, &want));
        for (got, want) in e.values.iter().zip(&want) {
            assert!((got - want).abs() <= tol, "d={d}: {got} vs {want}");
        }
    }
}

#[test]
fn large_enough_to_run_in_parallel() {
    let d = (DECOMPOSITION_MIN_WORK as f64).cbrt().ceil() as usize + 1;
    assert!(work(d, d, d) >= DECOMPOSITION_MIN_WORK);
    let spectrum: Vec<f64> = (0..d).map(|i| (i as f64).sin() * 10.0).collect();
    check(&with_spectrum(&spectrum, 250));
}

#[test]
fn gram_matrices_decompose_and_match_eigenvalues_only() {
    for (s, &(d, n)) in [(8, 3), (60, 200), (210, 300)].iter().enumerate() {
        let x = gaussian(d, n, 300 + s as u64);
        let a = &x * x.transpose();
        let e = check(&a);
        let values = try_sym_eigenvalues(&a).expect("finite square input");
        let tol = 50.0 * d as f64 * f64::EPSILON * e.values[0];
        assert!((&values - &e.values).amax() <= tol);
        // Rank ≤ n: the trailing d − n eigenvalues are zero up to rounding.
        for &v in e.values.iter().skip(n) {
            assert!(v.abs() <= tol);
        }
    }
}

#[test]
fn only_the_lower_triangle_is_read() {
    let a = with_spectrum(&[3.0, 1.0, -2.0, 0.5], 5);
    let mut lower = a.clone();
    lower[(0, 3)] = 1e6;
    lower[(1, 2)] = -7.0;
    let (e, f) = (sym_eig(&a), sym_eig(&lower));
    assert!((&e.values - &f.values).amax() <= 1e-12);
}

#[test]
fn bad_input_is_a_typed_error_or_nan() {
    assert_eq!(
        try_sym_eig(&Matrix::zeros(2, 3)).err(),
        Some(LinalgError::NotSquare { nrows: 2, ncols: 3 })
    );
    let mut a = Matrix::identity(3, 3);
    a[(2, 1)] = f64::NAN;
    assert_eq!(try_sym_eig(&a).err(), Some(LinalgError::NonFinite));
    a[(2, 1)] = f64::INFINITY;
    assert_eq!(try_sym_eigenvalues(&a).err(), Some(LinalgError::NonFinite));
    let e = sym_eig(&a);
    assert_eq!(e.vectors.shape(), (3, 3));
    assert!(e.values.iter().chain(e.vectors.iter()).all(|x| x.is_nan()));
}

#[test]
fn empty_matrix_has_empty_decomposition() {
    let e = try_sym_eig(&Matrix::zeros(0, 0)).expect("empty is fine");
    assert_eq!((e.values.len(), e.vectors.shape()), (0, (0, 0)));
}
