//! Kernels: products and the sign rule; the streaming Gram kernels live in [`super::stream`],
//! the decompositions in [`super::qr`], [`super::eigen`] and [`super::svd`], all re-exported here.
//!
//! Every product runs in faer on zero-copy views of the nalgebra operands (see `super::view`),
//! on the global rayon pool when the work is large enough ([`super::threads::par_for`]).
//!
//! # Panics
//! The products panic when the operands' inner dimensions disagree, as nalgebra's `*` does:
//! that is a bug in the caller, not bad input.

use faer::Accum;
use faer::linalg::matmul;

use super::Matrix;
use super::threads::{par_for, work};
use super::view::{view, view_mut};

pub use super::eigen::{SymEig, sym_eig, try_sym_eig, try_sym_eigenvalues};
pub use super::qr::thin_qr_q;
pub use super::svd::{ThinSvd, thin_svd, try_thin_svd};

/// `a · b`.
pub fn matmul(a: &Matrix, b: &Matrix) -> Matrix {
    let mut c = Matrix::zeros(a.nrows(), b.ncols());
    let par = par_for(work(a.nrows(), a.ncols(), b.ncols()));
    matmul::matmul(view_mut(&mut c), Accum::Replace, view(a), view(b), 1.0, par);
    c
}

/// `aᵀ · b`, reading `a` through a transposed view (no copy, no nalgebra `tr_mul`).
pub fn matmul_tn(a: &Matrix, b: &Matrix) -> Matrix {
    let mut c = Matrix::zeros(a.ncols(), b.ncols());
    let par = par_for(work(a.ncols(), a.nrows(), b.ncols()));
    matmul::matmul(
        view_mut(&mut c),
        Accum::Replace,
        view(a).transpose(),
        view(b),
        1.0,
        par,
    );
    c
}

/// Deterministic sign rule of docs/design/algorithms.md: flip each column so that its largest-magnitude
/// entry is positive (ties: the first such entry).
pub fn fix_signs(q: &mut Matrix) {
    for mut col in q.column_iter_mut() {
        let mut best = 0.0_f64;
        for &v in col.iter() {
            if v.abs() > best.abs() {
                best = v;
            }
        }
        if best < 0.0 {
            col.neg_mut();
        }
    }
}

#[cfg(test)]
#[path = "kernels_tests.rs"]
mod tests;
