//! Subspace metrics used by tests, experiments and the utility report (algorithms.md,
//! "Utility metrics").

use super::{Matrix, matmul_tn, sym_eig};

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

/// Sine of the largest principal angle between span(q) and span(u) (both orthonormal, same
/// number of columns): ‖(I − QQᵀ)U‖₂ (seed 000 eq. 14).
pub fn sin_theta(q: &Matrix, u: &Matrix) -> f64 {
    let residual = u - q * matmul_tn(q, u);
    let s = residual.clone().svd(false, false).singular_values;
    s.iter().cloned().fold(0.0, f64::max).min(1.0)
}

/// Captured-energy ratio tr(QᵀΣQ) / Σ_{i≤k} λ_i(Σ) (seed 003 q(V), seed 004 Def. 1).
pub fn captured_energy(q: &Matrix, sigma: &Matrix) -> f64 {
    let k = q.ncols();
    let captured = matmul_tn(q, &(sigma * q)).trace();
    let best: f64 = sym_eig(sigma).values.iter().take(k).sum();
    captured / best
}

/// Projection error ‖QQᵀ − UUᵀ‖_F / √k (seed 004 lower bound).
pub fn projection_error(q: &Matrix, u: &Matrix) -> f64 {
    let diff = q * q.transpose() - u * u.transpose();
    diff.norm() / (q.ncols() as f64).sqrt()
}
