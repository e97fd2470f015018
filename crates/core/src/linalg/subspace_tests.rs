use super::*;
use crate::linalg::testing::{orthonormal, with_spectrum};

#[test]
fn orthonormality_error_is_zero_for_orthonormal_and_sees_scaling() {
    let q = orthonormal(50, 5, 1);
    assert!(orthonormality_error(&q) <= 1e-14);
    assert!((orthonormality_error(&(q * 1.1)) - 0.21).abs() <= 1e-12);
}

#[test]
fn polishing_restores_the_contract_and_keeps_the_columns() {
    let q = orthonormal(200, 6, 3);
    let drifted = &q + orthonormal(200, 6, 4) * 1e-8;
    assert!(orthonormality_error(&drifted) > 1e-10);
    let polished = polish_orthonormal(drifted).unwrap();
    assert!(orthonormality_error(&polished) <= 1e-14);
    assert!((&polished - &q).amax() <= 1e-7, "columns and signs kept");
    // Already orthonormal: returned as it is; far from it: refused.
    assert_eq!(polish_orthonormal(q.clone()).unwrap(), q);
    assert!(polish_orthonormal(&q * 1.01).is_none());
    let mut broken = q;
    broken[(0, 0)] = f64::NAN;
    assert!(polish_orthonormal(broken).is_none());
}

#[test]
fn sin_theta_is_zero_for_the_same_subspace_and_one_for_orthogonal_ones() {
    let (d, k) = (60, 4);
    let basis = orthonormal(d, 2 * k, 2);
    let (q, u) = (basis.columns(0, k).into_owned(), basis.columns(k, k).into_owned());
    // Same subspace in another basis: Q·R with R a random orthogonal k×k.
    let rotated = &q * orthonormal(k, k, 3);
    let tol = 10.0 * d as f64 * f64::EPSILON;
    assert!(sin_theta(&q, &rotated) <= tol);
    assert!((sin_theta(&q, &u) - 1.0).abs() <= tol);
    assert!(projection_error(&q, &rotated) <= tol);
    assert!((projection_error(&q, &u) - 2f64.sqrt()).abs() <= tol);
}

#[test]
fn sin_theta_of_a_known_rotation() {
    // span{e0} vs span{cos t e0 + sin t e1}.
    let t = 0.3_f64;
    let mut q = Matrix::zeros(3, 1);
    q[(0, 0)] = 1.0;
    let u = Matrix::from_column_slice(3, 1, &[t.cos(), t.sin(), 0.0]);
    assert!((sin_theta(&q, &u) - t.sin()).abs() <= 1e-15);
    // ‖QQᵀ − UUᵀ‖_F = √2·sin t for one dimension.
    assert!((projection_error(&q, &u) - 2f64.sqrt() * t.sin()).abs() <= 1e-15);
}

#[test]
fn projection_error_matches_the_explicit_formula() {
    for (s, &(d, k)) in [(5, 1), (30, 3), (80, 10)].iter().enumerate() {
        let q = orthonormal(d, k, 10 + s as u64);
        let u = orthonormal(d, k, 20 + s as u64);
        let explicit = (&q * q.transpose() - &u * u.transpose()).norm() / (k as f64).sqrt();
        assert!((projection_error(&q, &u) - explicit).abs() <= 10.0 * d as f64 * f64::EPSILON);
    }
}

#[test]
fn captured_energy_is_one_for_top_eigenvectors_and_less_otherwise() {
    let spectrum: Vec<f64> = (0..40).map(|i| 40.0 - i as f64).collect();
    let sigma = with_spectrum(&spectrum, 4);
    let top = crate::linalg::sym_eig(&sigma).vectors.columns(0, 3).into_owned();
    assert!((captured_energy(&top, &sigma) - 1.0).abs() <= 1e-12);
    let other = orthonormal(40, 3, 5);
    let ratio = captured_energy(&other, &sigma);
    assert!(ratio > 0.0 && ratio < 1.0);
    let mut bad = sigma.clone();
    bad[(0, 0)] = f64::NAN;
    assert!(captured_energy(&top, &bad).is_nan());
}
