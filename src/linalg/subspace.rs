//! Subspace metrics used by tests, experiments and the utility report (docs/design/algorithms.md,
//! "Utility metrics"). All cost O(d·k²) except [`captured_energy`], which needs Σ's spectrum.

use super::{Matrix, matmul, matmul_tn, thin_svd, try_sym_eigenvalues};

/// ‖QᵀQ − I‖_max: how far the columns of `q` are from orthonormal.
pub fn orthonormality_error(q: &Matrix) -> f64 {
    let g = matmul_tn(q, q);
    let mut worst = 0.0_f64;
    for j in 0..g.ncols() {
        for i in 0..g.nrows() {
            let target = if i == j { 1.0 } else { 0.0 };
            worst = worst.max((g[(i, j)] - target).abs());
        }
    }
    worst
}

/// The basis every job returns must be orthonormal to 1e-10 (docs/design/algorithms.md, the
/// output contract). Floating-point drift in long iterations or eigensolvers can leave a basis
/// that is orthonormal only to ~1e-9; such a basis is re-orthonormalised by a thin QR, each
/// column's sign matched to the column it came from, so the columns stay (to the drift) the
/// ones the algorithm released. This is post-processing of the released basis and costs no
/// privacy. `None` when the basis is too far from orthonormal (beyond `1e-6`) to be drift: a
/// numerical failure the caller must report, not hide.
pub fn polish_orthonormal(basis: Matrix) -> Option<Matrix> {
    const CONTRACT: f64 = 1e-10;
    const DRIFT: f64 = 1e-6;
    // Checked first: `f64::max` in the error skips NaN.
    if !basis.iter().all(|v| v.is_finite()) {
        return None;
    }
    let error = orthonormality_error(&basis);
    if !error.is_finite() || error > DRIFT {
        return None;
    }
    if error <= CONTRACT / 100.0 {
        return Some(basis);
    }
    let mut q = super::qr::thin_qr_q(&basis);
    for j in 0..q.ncols() {
        if q.column(j).dot(&basis.column(j)) < 0.0 {
            q.column_mut(j).neg_mut();
        }
    }
    (orthonormality_error(&q) <= CONTRACT).then_some(q)
}

/// (I − QQᵀ)U = U − Q(QᵀU), the part of span(u) outside span(q) (q orthonormal).
fn residual(q: &Matrix, u: &Matrix) -> Matrix {
    u - matmul(q, &matmul_tn(q, u))
}

/// Sine of the largest principal angle between span(q) and span(u) (both orthonormal, same
/// number of columns): ‖(I − QQᵀ)U‖₂ (seed 000 eq. 14), clamped to [0, 1].
pub fn sin_theta(q: &Matrix, u: &Matrix) -> f64 {
    let s = thin_svd(&residual(q, u)).s;
    s.iter().cloned().fold(0.0, f64::max).min(1.0)
}

/// Captured-energy ratio tr(QᵀΣQ) / Σ_{i≤k} λ_i(Σ) (seed 003 q(V), seed 004 Def. 1), k = q.ncols().
/// NaN when Σ is not square and finite.
pub fn captured_energy(q: &Matrix, sigma: &Matrix) -> f64 {
    let k = q.ncols();
    // tr(QᵀΣQ) = Σ_j q_jᵀ(Σq_j): the entrywise inner product of Q and ΣQ.
    let captured = q.dot(&matmul(sigma, q));
    let best = match try_sym_eigenvalues(sigma) {
        Ok(values) => values.iter().take(k).sum(),
        Err(_) => f64::NAN,
    };
    captured / best
}

/// Projection error ‖QQᵀ − UUᵀ‖_F / √k (seed 004 lower bound), k = q.ncols(), for q and u with
/// orthonormal columns. Uses ‖QQᵀ − UUᵀ‖_F² = ‖(I − QQᵀ)U‖_F² + ‖(I − UUᵀ)Q‖_F² (both sides
/// equal k_q + k_u − 2‖QᵀU‖_F² for orthonormal bases), which never forms a d×d matrix and stays
/// accurate when the subspaces nearly coincide.
pub fn projection_error(q: &Matrix, u: &Matrix) -> f64 {
    let squared = residual(q, u).norm_squared() + residual(u, q).norm_squared();
    squared.sqrt() / (q.ncols() as f64).sqrt()
}

#[cfg(test)]
mod tests {
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
}
