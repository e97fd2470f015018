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
#[path = "subspace_tests.rs"]
mod tests;
