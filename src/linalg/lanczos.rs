//! The top k eigenpairs of a large symmetric operator known only through products A·X: block
//! Lanczos with full reorthogonalisation and explicit restarts (Golub & Van Loan, *Matrix
//! Computations*, 4th ed., §10.3.6 block Lanczos, §10.1 Rayleigh–Ritz). `exact` uses it on
//! sparse datasets, where forming A densely is out of the question.
//!
//! One cycle, from an orthonormal n×b block V:
//! 1. the Krylov basis Q = [Q₀ = V, Q₁, …, Q_{s−1}], Q_{j+1} = orth(A·Q_j) against every earlier
//!    block, twice, with a QR between (the "twice is enough" rule; a rank-deficient block is
//!    completed by its QR and the completion is orthogonalised too);
//! 2. Rayleigh–Ritz: H = Qᵀ(AQ) (the products A·Q_j are kept, so no extra product), its
//!    eigenpairs (θ, Y) in decreasing order, Ritz vectors X = Q·Y and A·X = (AQ)·Y;
//! 3. stop when ‖A·x_i − θ_i·x_i‖ ≤ tol·max(|θ|) for each of the first k; else restart with the
//!    first b Ritz vectors.
//!
//! Cost per cycle: s products A·Q_j (O(nnz·b) each on a sparse A) and O(n·(sb)²) for the
//! reorthogonalisation and the Ritz vectors. Memory: Q and AQ, 2·n·s·b values.

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
    /// Extra columns beyond k in each block (they speed convergence past clustered eigenvalues).
    pub extra: usize,
    /// The Krylov basis is kept to about this many columns (at least 3 blocks).
    pub basis_columns: usize,
}

impl Default for LanczosOptions {
    fn default() -> Self {
        LanczosOptions {
            tolerance: 1e-7,
            max_cycles: 300,
            extra: 10,
            basis_columns: 160,
        }
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
/// starting from the n×b block `start` (b = k + `options.extra`, capped at n; any full-rank
/// block, e.g. Gaussian). `progress(cycle, max_cycles)` runs after each cycle and may stop the
/// iteration.
///
/// For n < 3b the operator is applied to the identity and decomposed densely (n is then tiny).
pub fn top_eigenpairs<E>(
    apply: &dyn Fn(&Matrix) -> Matrix,
    start: &Matrix,
    k: usize,
    options: &LanczosOptions,
    progress: &mut dyn FnMut(u32, u32) -> Result<(), E>,
) -> Result<TopEigen, LanczosStop<E>> {
    let n = start.nrows();
    let b = start.ncols();
    if !(k >= 1 && k <= b && b <= n) {
        return Err(LanczosStop::Failed(LinalgError::NotSquare { nrows: n, ncols: b }));
    }
    if n < 3 * b {
        let a = apply(&Matrix::identity(n, n));
        let a = (&a + a.transpose()) * 0.5;
        let eig = try_sym_eig(&a).map_err(LanczosStop::Failed)?;
        progress(1, 1).map_err(LanczosStop::Stopped)?;
        return Ok(TopEigen {
            values: eig.values.iter().take(k).copied().collect(),
            vectors: eig.vectors.columns(0, k).into_owned(),
        });
    }
    let steps = (options.basis_columns / b).clamp(3, n / b);
    let mut v = thin_qr_q(start);
    for cycle in 1..=options.max_cycles {
        let (q, aq) = krylov_basis(apply, &v, steps);
        let (values, x, ax) = rayleigh_ritz(&q, &aq, b)?;
        progress(cycle, options.max_cycles).map_err(LanczosStop::Stopped)?;
        if converged(&values, &x, &ax, k, options.tolerance) {
            return Ok(TopEigen {
                values: values[..k].to_vec(),
                vectors: x.columns(0, k).into_owned(),
            });
        }
        v = x;
    }
    Err(LanczosStop::Failed(LinalgError::NoConvergence(
        "block Lanczos iteration",
    )))
}

/// Q (n × s·b, orthonormal, Q₀ = `v`) and A·Q.
fn krylov_basis(apply: &dyn Fn(&Matrix) -> Matrix, v: &Matrix, steps: usize) -> (Matrix, Matrix) {
    let (n, b) = v.shape();
    let mut q = Matrix::zeros(n, steps * b);
    let mut aq = Matrix::zeros(n, steps * b);
    q.columns_mut(0, b).copy_from(v);
    for j in 0..steps {
        let block = q.columns(j * b, b).into_owned();
        let w = apply(&block);
        aq.columns_mut(j * b, b).copy_from(&w);
        if j + 1 == steps {
            break;
        }
        let filled = (j + 1) * b;
        let mut w = w;
        orthogonalise(&q, filled, &mut w);
        let mut next = thin_qr_q(&w);
        orthogonalise(&q, filled, &mut next);
        let next = thin_qr_q(&next);
        q.columns_mut(filled, b).copy_from(&next);
    }
    (q, aq)
}

/// w ← w − Q₍:filled₎·(Q₍:filled₎ᵀ·w), the projection off the first `filled` columns of q.
fn orthogonalise(q: &Matrix, filled: usize, w: &mut Matrix) {
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
}

/// The Ritz values (decreasing) of A on span(Q), and the first b Ritz vectors X and A·X.
fn rayleigh_ritz<E>(q: &Matrix, aq: &Matrix, b: usize) -> Result<(Vec<f64>, Matrix, Matrix), LanczosStop<E>> {
    let m = q.ncols();
    let mut h = Matrix::zeros(m, m);
    let par = par_for(work(m, q.nrows(), m));
    matmul(
        view_mut(&mut h),
        Accum::Replace,
        view(q).transpose(),
        view(aq),
        1.0,
        par,
    );
    let h = (&h + h.transpose()) * 0.5;
    let eig = try_sym_eig(&h).map_err(LanczosStop::Failed)?;
    let y = eig.vectors.columns(0, b).into_owned();
    let times = |basis: &Matrix| {
        let mut out = Matrix::zeros(basis.nrows(), b);
        let par = par_for(work(basis.nrows(), m, b));
        matmul(
            view_mut(&mut out),
            Accum::Replace,
            view(basis),
            view(&y),
            1.0,
            par,
        );
        out
    };
    Ok((eig.values.iter().copied().collect(), times(q), times(aq)))
}

/// Whether ‖A·x_i − θ_i·x_i‖ ≤ tol·max|θ| for i < k.
fn converged(values: &[f64], x: &Matrix, ax: &Matrix, k: usize, tolerance: f64) -> bool {
    let scale = values.iter().fold(f64::MIN_POSITIVE, |m, v| m.max(v.abs()));
    (0..k).all(|i| {
        let residual = (ax.column(i) - x.column(i) * values[i]).norm();
        residual <= tolerance * scale
    })
}

#[cfg(test)]
#[path = "lanczos_tests.rs"]
mod tests;
