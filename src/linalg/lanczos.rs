//! The top k eigenpairs of a large symmetric operator known only through products A·X:
//! thick-restart block Lanczos with full reorthogonalisation (Wu & Simon, "Thick-restart
//! Lanczos method for large symmetric eigenvalue problems", SIMAX 22, 2000; in block form as
//! the Krylov–Schur restart of Stewart 2001; Golub & Van Loan, *Matrix Computations*, 4th ed.,
//! §10.3.6 block Lanczos, §10.1 Rayleigh–Ritz). `exact` uses it on sparse datasets, where
//! forming A densely is out of the question.
//!
//! The basis V (n × m, orthonormal) grows by blocks of b columns: Q_next = orth(A·Q_j) against
//! every column so far, twice, with a QR between ("twice is enough"; a rank-deficient block is
//! completed by its QR and the completion is orthogonalised too). The projected matrix
//! T = VᵀAV is filled from the Gram–Schmidt coefficients (no extra product). When V is full:
//! 1. Rayleigh–Ritz: T's eigenpairs (θ, Y) in decreasing order;
//! 2. the residual of the Ritz pair (θ_i, V·y_i) is W·y_i restricted to the last block, where
//!    W is the last block's orthogonalised image (A·V = V·T + W·E_lastᵀ), so its norm costs no
//!    product; stop when ‖A·x_i − θ_i·x_i‖ ≤ tol·max|θ| for each of the first k;
//! 3. else **thick restart**: keep the first l ≥ k Ritz vectors V·Y₍:l₎ (T becomes diag(θ₍:l₎)),
//!    append orth(W) and continue. Unlike an explicit restart from b vectors, the kept Ritz
//!    vectors carry what was learnt, which matters on clustered eigenvalues.
//!
//! Cost per cycle: (m − l)/b products A·Q_j (O(nnz·b) each on a sparse A), O(n·m·b) per block
//! for the reorthogonalisation and O(n·m·l) for the restart. Memory: V, n·m values.

use faer::Accum;
use faer::linalg::matmul::matmul;

use super::error::LinalgError;
use super::threads::{par_for, work};
use super::view::{view, view_mut};
use super::{Matrix, thin_qr_q, try_sym_eig};

/// Stopping rule and sizes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LanczosOptions {
    /// Relative residual: ‖A·x_i − θ_i·x_i‖ ≤ `tolerance`·max_j |θ_j|.
    pub tolerance: f64,
    /// Most restarts before giving up ([`LinalgError::NoConvergence`]).
    pub max_cycles: u32,
    /// The block size b callers draw their start block with ([`LanczosOptions::block_size`]):
    /// an eigenvalue of multiplicity above b may be missed, a larger b costs more products.
    pub block: usize,
    /// The basis holds at most this many columns (raised to k + 2b when that is more).
    pub basis_columns: usize,
}

impl Default for LanczosOptions {
    fn default() -> Self {
        LanczosOptions {
            tolerance: 1e-7,
            max_cycles: 300,
            block: 4,
            basis_columns: 48,
        }
    }
}

impl LanczosOptions {
    /// The columns of the start block for the top k of an n×n operator: `block`, at most n.
    pub fn block_size(&self, n: usize) -> usize {
        self.block.max(1).min(n)
    }
}

/// The top k eigenpairs: `values` in decreasing order, column i of `vectors` the unit
/// eigenvector of `values[i]`.
#[derive(Debug, Clone)]
pub struct TopEigen {
    pub values: Vec<f64>,
    pub vectors: Matrix,
}

/// Why the iteration stopped without a result.
#[derive(Debug, Clone, PartialEq)]
pub enum LanczosStop<E> {
    /// A decomposition failed or the residuals did not fall below the tolerance in time.
    Failed(LinalgError),
    /// `progress` asked to stop.
    Stopped(E),
}

/// The top k eigenpairs (largest eigenvalues) of the symmetric n×n operator `apply` (X ↦ A·X),
/// starting from the n×b block `start` (b = [`LanczosOptions::block_size`]; any full-rank
/// block, e.g. Gaussian; b may be below k). `progress(cycle, max_cycles)` runs after each
/// restart cycle and may stop the iteration.
///
/// When n is below the basis size plus b, the operator is applied to the identity and
/// decomposed densely (n is then tiny).
pub fn top_eigenpairs<E>(
    apply: &dyn Fn(&Matrix) -> Matrix,
    start: &Matrix,
    k: usize,
    options: &LanczosOptions,
    progress: &mut dyn FnMut(u32, u32) -> Result<(), E>,
) -> Result<TopEigen, LanczosStop<E>> {
    let n = start.nrows();
    let b = start.ncols();
    if !(k >= 1 && b >= 1 && k <= n && b <= n) {
        return Err(LanczosStop::Failed(LinalgError::NotSquare { nrows: n, ncols: b }));
    }
    if n < options.basis_columns.max(k + 2 * b) + b {
        let a = apply(&Matrix::identity(n, n));
        let a = (&a + a.transpose()) * 0.5;
        let eig = try_sym_eig(&a).map_err(LanczosStop::Failed)?;
        progress(1, 1).map_err(LanczosStop::Stopped)?;
        return Ok(TopEigen {
            values: eig.values.iter().take(k).copied().collect(),
            vectors: eig.vectors.columns(0, k).into_owned(),
        });
    }
    let m = options.basis_columns.max(k + 2 * b);
    let mut basis = Matrix::zeros(n, m);
    let mut t = Matrix::zeros(m, m);
    basis.columns_mut(0, b).copy_from(&thin_qr_q(start));
    // Columns `cur..cur + b` are the block to apply next; `filled` columns are in use.
    let (mut cur, mut filled) = (0, b);
    for cycle in 1..=options.max_cycles {
        let w = loop {
            let mut w = apply(&basis.columns(cur, b).into_owned());
            let mut c = orthogonalise(&basis, filled, &mut w);
            c += orthogonalise(&basis, filled, &mut w);
            // T₍:filled, cur..cur+b₎ = c and its mirror; the diagonal block symmetrised.
            t.view_mut((0, cur), (filled, b)).copy_from(&c);
            t.view_mut((cur, 0), (b, cur))
                .copy_from(&c.rows(0, cur).transpose());
            let diagonal = c.rows(cur, b);
            let diagonal = (diagonal + diagonal.transpose()) * 0.5;
            t.view_mut((cur, cur), (b, b)).copy_from(&diagonal);
            if filled + b > m {
                break w;
            }
            let next = orthonormal_completion(&basis, filled, &w);
            basis.columns_mut(filled, b).copy_from(&next);
            cur = filled;
            filled += b;
        };
        let eig = try_sym_eig(&t.view((0, 0), (filled, filled)).into_owned()).map_err(LanczosStop::Failed)?;
        progress(cycle, options.max_cycles).map_err(LanczosStop::Stopped)?;
        let residuals = residual_norms(&w, &eig.vectors.rows(cur, b).columns(0, k).into_owned());
        let scale = eig.values.iter().fold(f64::MIN_POSITIVE, |s, v| s.max(v.abs()));
        if residuals.iter().all(|&r| r <= options.tolerance * scale) {
            return Ok(TopEigen {
                values: eig.values.iter().take(k).copied().collect(),
                vectors: times(&basis, filled, &eig.vectors.columns(0, k).into_owned()),
            });
        }
        // Thick restart: the first l Ritz vectors, then orth(W).
        let l = ((filled + k) / 2).clamp(k, filled - b);
        let kept = times(&basis, filled, &eig.vectors.columns(0, l).into_owned());
        basis.columns_mut(0, l).copy_from(&kept);
        t.fill(0.0);
        for i in 0..l {
            t[(i, i)] = eig.values[i];
        }
        let next = orthonormal_completion(&basis, l, &w);
        basis.columns_mut(l, b).copy_from(&next);
        cur = l;
        filled = l + b;
    }
    Err(LanczosStop::Failed(LinalgError::NoConvergence(
        "block Lanczos iteration",
    )))
}

/// An orthonormal block spanning w's part off the first `filled` columns of q (completed by
/// the QR where w is rank-deficient), orthogonal to them.
fn orthonormal_completion(q: &Matrix, filled: usize, w: &Matrix) -> Matrix {
    let mut next = thin_qr_q(w);
    orthogonalise(q, filled, &mut next);
    orthogonalise(q, filled, &mut next);
    thin_qr_q(&next)
}

/// w ← w − Q₍:filled₎·(Q₍:filled₎ᵀ·w), the projection off the first `filled` columns of q;
/// returns the coefficients Q₍:filled₎ᵀ·w.
fn orthogonalise(q: &Matrix, filled: usize, w: &mut Matrix) -> Matrix {
    let (n, b) = w.shape();
    let basis = view(q).subcols(0, filled);
    let mut coefficients = Matrix::zeros(filled, b);
    matmul(
        view_mut(&mut coefficients),
        Accum::Replace,
        basis.transpose(),
        view(w),
        1.0,
        par_for(work(filled, n, b)),
    );
    matmul(
        view_mut(w),
        Accum::Add,
        basis,
        view(&coefficients),
        -1.0,
        par_for(work(n, filled, b)),
    );
    coefficients
}

/// Q₍:filled₎·Y.
fn times(q: &Matrix, filled: usize, y: &Matrix) -> Matrix {
    let mut out = Matrix::zeros(q.nrows(), y.ncols());
    matmul(
        view_mut(&mut out),
        Accum::Replace,
        view(q).subcols(0, filled),
        view(y),
        1.0,
        par_for(work(q.nrows(), filled, y.ncols())),
    );
    out
}

/// ‖W·y_i‖ for each column y_i of `y_last` (the Ritz vectors' last-block rows), through the
/// b×b Gram matrix WᵀW.
fn residual_norms(w: &Matrix, y_last: &Matrix) -> Vec<f64> {
    let gram = w.transpose() * w;
    (0..y_last.ncols())
        .map(|i| {
            let y = y_last.column(i);
            y.dot(&(&gram * y)).max(0.0).sqrt()
        })
        .collect()
}

#[cfg(test)]
#[path = "lanczos_tests.rs"]
mod tests;
