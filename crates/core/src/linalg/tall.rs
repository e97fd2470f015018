//! Tall-skinny kernels for n×p blocks with n ≫ p (the iterates of the power method on a sparse
//! matrix: n up to 10⁸, p ≈ 20), in chunks of rows on the rayon pool.
//!
//! faer's parallel products and QR synchronise their halves through spinning barriers
//! (`spindle`); for `noisy_power` at n = 10⁵, p = 20 a profile of the release service under
//! load put a quarter of all samples in those spins (docs/performance-sparse.md, 2026-11-29).
//! Here each chunk is one sequential faer call, the chunks are rayon tasks (which sleep rather
//! than spin when they wait), and partial sums are added in chunk order, so the results do not
//! depend on the number of threads.

use faer::linalg::matmul::matmul;
use faer::{Accum, Par};
use rayon::prelude::*;

use super::threads::{PRODUCT_MIN_WORK, work};
use super::view::{view, view_mut};
use super::{Matrix, thin_qr_q};

/// Rows per task: a chunk of a 20-column block is 640 KiB.
const CHUNK_ROWS: usize = 4096;

/// How far (Frobenius norm) from the identity the Gram matrix of the first pass's Q₁ may be
/// for the second pass to be trusted: then every eigenvalue of Q₁ᵀQ₁ lies in [0.5, 1.5], so
/// cond(Q₁) ≤ √3, and the second pass's Q₂ = Q₁·R₁⁻¹ is orthonormal to working precision
/// (its error is O(ε·cond(Q₁)²); Yamamoto, Nakatsukasa, Yanagisawa & Fukaya, ETNA 44, 2015,
/// §3). In floating point the first pass alone leaves an error of O(ε·cond(y)²).
pub const SECOND_PASS_WITHIN: f64 = 0.5;

/// The minimum chunks per task for `work` multiply-adds: all of them (sequential) below
/// [`PRODUCT_MIN_WORK`], else one.
fn sequential_below(work: usize) -> usize {
    if work < PRODUCT_MIN_WORK { usize::MAX } else { 1 }
}

/// aᵀ·b for n×p `a` and n×q `b`: the chunks' products summed in chunk order.
///
/// # Panics
/// When a and b differ in their number of rows (a bug in the caller).
pub fn gram_tn(a: &Matrix, b: &Matrix) -> Matrix {
    assert_eq!(a.nrows(), b.nrows(), "aᵀ·b: a and b must have as many rows");
    let (p, q) = (a.ncols(), b.ncols());
    let parts: Vec<Matrix> = view(a)
        .par_row_chunks(CHUNK_ROWS)
        .zip(view(b).par_row_chunks(CHUNK_ROWS))
        .with_min_len(sequential_below(work(a.nrows(), p, q)))
        .map(|(a, b)| {
            let mut c = Matrix::zeros(p, q);
            matmul(view_mut(&mut c), Accum::Replace, a.transpose(), b, 1.0, Par::Seq);
            c
        })
        .collect();
    parts.into_iter().fold(Matrix::zeros(p, q), |sum, c| sum + c)
}

/// y·m for n×p `y` and a small p×q `m`, chunk by chunk of rows.
fn times_small(y: &Matrix, m: &Matrix) -> Matrix {
    let mut out = Matrix::zeros(y.nrows(), m.ncols());
    let minimum = sequential_below(work(y.nrows(), y.ncols(), m.ncols()));
    view_mut(&mut out)
        .par_row_chunks_mut(CHUNK_ROWS)
        .zip(view(y).par_row_chunks(CHUNK_ROWS))
        .with_min_len(minimum)
        .for_each(|(out, y)| matmul(out, Accum::Replace, y, view(m), 1.0, Par::Seq));
    out
}

/// y·R⁻¹ where RᵀR = g is the Cholesky factorisation of g = yᵀy; `None` when g is not
/// numerically positive definite or R⁻¹ is not finite.
fn cholesky_pass(y: &Matrix, g: Matrix) -> Option<Matrix> {
    let p = g.nrows();
    let r = g.cholesky()?.l().transpose();
    let r_inverse = r.solve_upper_triangular(&Matrix::identity(p, p))?;
    if !r_inverse.iter().all(|v| v.is_finite()) {
        return None;
    }
    Some(times_small(y, &r_inverse))
}

/// Orthonormal columns spanning those of y (n×p, p ≤ n), in the Gram–Schmidt order of
/// [`thin_qr_q`] (column j of the result lies in the span of the first j + 1 columns of y):
/// CholeskyQR2 (Fukaya, Nakatsukasa, Yanagisawa & Yamamoto 2014; Yamamoto et al. 2015,
/// Alg. 2.2): G = yᵀy = RᵀR, Q₁ = y·R⁻¹, then the same on Q₁. Four reads of y-sized blocks in
/// row chunks instead of a Householder QR. It needs cond(y) ≲ ε^{-1/2}; when the first
/// Cholesky fails or Q₁ is not close to orthonormal ([`SECOND_PASS_WITHIN`]), it falls back on
/// the Householder [`thin_qr_q`]. The column signs are those of a positive diagonal R.
pub fn orthonormal_columns(y: &Matrix) -> Matrix {
    cholesky_qr2(y).unwrap_or_else(|| thin_qr_q(y))
}

fn cholesky_qr2(y: &Matrix) -> Option<Matrix> {
    let p = y.ncols();
    if p == 0 || p > y.nrows() {
        return None;
    }
    let first = cholesky_pass(y, gram_tn(y, y))?;
    let g = gram_tn(&first, &first);
    let distance = (&g - Matrix::identity(p, p)).norm();
    if !(distance <= SECOND_PASS_WITHIN) {
        return None;
    }
    cholesky_pass(&first, g)
}

#[cfg(test)]
#[path = "tall_tests.rs"]
mod tests;
