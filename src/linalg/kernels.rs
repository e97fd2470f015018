//! Kernels: Gram, products and the sign rule; the decompositions live in [`super::qr`],
//! [`super::eigen`] and [`super::svd`] and are re-exported here.
//!
//! Every product runs in faer on zero-copy views of the nalgebra operands (see [`super::view`]),
//! on the global rayon pool when the work is large enough ([`super::threads::par_for`]).
//!
//! # Panics
//! The products panic when the operands' inner dimensions disagree, as nalgebra's `*` does:
//! that is a bug in the caller, not bad input.

use faer::linalg::matmul::{self, triangular, triangular::BlockStructure};
use faer::{Accum, MatRef, Par};
use rayon::prelude::*;

use super::Matrix;
use super::threads::{par_for, work};
use super::view::{view, view_mut};

pub use super::eigen::{SymEig, sym_eig, try_sym_eig, try_sym_eigenvalues};
pub use super::qr::thin_qr_q;
pub use super::svd::{ThinSvd, thin_svd, try_thin_svd};

/// Bytes of Xᵀ per record block in [`gram_t_times`]: small enough for the block to stay in a
/// core's L2 cache between its two products (measured in docs/performance-linalg.md).
const BLOCK_BYTES: usize = 256 * 1024;

/// `XᵀX` for records held transposed: given `xt` = Xᵀ (d×n), returns the d×d Gram matrix
/// Σ_i x_i x_iᵀ = xt·xtᵀ. Computes the lower triangle only (d²n/2 multiply-adds) and mirrors it,
/// so the result is exactly symmetric.
pub fn gram_t(xt: &Matrix) -> Matrix {
    let (d, n) = xt.shape();
    let mut g = Matrix::zeros(d, d);
    let x = view(xt);
    triangular::matmul(
        view_mut(&mut g),
        BlockStructure::TriangularLower,
        Accum::Replace,
        x,
        BlockStructure::Rectangular,
        x.transpose(),
        BlockStructure::Rectangular,
        1.0,
        par_for(work(d, d, n) / 2),
    );
    g.fill_upper_triangle_with_lower_triangle();
    g
}

/// `A·V` for the Gram matrix A = XᵀX of records held transposed (`xt` = Xᵀ, d×n; `v` d×p),
/// without forming A: Σ_b X_bᵀ(X_b V) over blocks b of records, O(ndp) instead of O(nd² + d²p).
///
/// This is the data access of the power-method family (algorithms.md, "Sensitivities shared by
/// the power-method family": the released quantity is A·X). The records are split into one
/// contiguous part per pool thread (a single part below [`super::threads::PRODUCT_MIN_WORK`]);
/// each thread walks its part in cache-sized blocks so X is read from memory once, and the
/// per-part sums are added in part order, so the result is reproducible for a given thread
/// count.
pub fn gram_t_times(xt: &Matrix, v: &Matrix) -> Matrix {
    let (d, n) = xt.shape();
    let p = v.ncols();
    assert_eq!(
        v.nrows(),
        d,
        "gram_t_times: xt is {d}×{n} but v has {} rows",
        v.nrows()
    );
    let (x, v) = (view(xt), view(v));
    let parts = match par_for(work(2 * n, d, p)) {
        Par::Seq => 1,
        Par::Rayon(threads) => threads.get().min(n),
    };
    if parts <= 1 {
        return gram_times_part(x, v);
    }
    let chunk = n.div_ceil(parts);
    let partials: Vec<Matrix> = (0..parts)
        .into_par_iter()
        .map(|t| {
            let start = (t * chunk).min(n);
            gram_times_part(x.subcols(start, chunk.min(n - start)), v)
        })
        .collect();
    partials
        .into_iter()
        .fold(Matrix::zeros(d, p), |acc, part| acc + part)
}

/// Σ_b X_bᵀ(X_b V) for the records (columns) of `x`, sequentially, block by block.
fn gram_times_part(x: MatRef<'_, f64>, v: MatRef<'_, f64>) -> Matrix {
    let (d, n, p) = (x.nrows(), x.ncols(), v.ncols());
    let block = (BLOCK_BYTES / (8 * d.max(1))).clamp(16, 4096);
    let mut out = Matrix::zeros(d, p);
    let mut scores = faer::Mat::<f64>::zeros(block.min(n), p);
    let mut start = 0;
    while start < n {
        let len = block.min(n - start);
        let records = x.subcols(start, len);
        let mut s = scores.as_mut().subrows_mut(0, len);
        matmul::matmul(s.as_mut(), Accum::Replace, records.transpose(), v, 1.0, Par::Seq);
        matmul::matmul(view_mut(&mut out), Accum::Add, records, s.as_ref(), 1.0, Par::Seq);
        start += len;
    }
    out
}

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

/// Deterministic sign rule of algorithms.md: flip each column so that its largest-magnitude
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
mod tests {
    use super::*;
    use crate::linalg::testing::{assert_product_close, gaussian, max_abs, max_diff, naive_product};

    /// (m, k, n) shapes: scalars, vectors, square, tall, wide, one big enough to run in parallel.
    const SHAPES: [(usize, usize, usize); 9] = [
        (1, 1, 1),
        (1, 7, 1),
        (7, 1, 5),
        (5, 5, 5),
        (40, 3, 2),
        (3, 40, 50),
        (33, 65, 17),
        (150, 120, 130),
        (1, 300, 200),
    ];

    #[test]
    fn matmul_matches_the_triple_loop() {
        for (s, &(m, k, n)) in SHAPES.iter().enumerate() {
            let (a, b) = (gaussian(m, k, 10 + s as u64), gaussian(k, n, 20 + s as u64));
            let (want, bound) = naive_product(&a, &b);
            assert_product_close(&matmul(&a, &b), &want, &bound, k);
        }
    }

    #[test]
    fn matmul_tn_matches_the_triple_loop() {
        for (s, &(m, k, n)) in SHAPES.iter().enumerate() {
            let (a, b) = (gaussian(k, m, 30 + s as u64), gaussian(k, n, 40 + s as u64));
            let (want, bound) = naive_product(&a.transpose(), &b);
            assert_product_close(&matmul_tn(&a, &b), &want, &bound, k);
        }
    }

    #[test]
    fn gram_t_is_symmetric_and_matches_the_triple_loop() {
        for (s, &(d, n)) in [(1, 1), (1, 9), (6, 1), (8, 8), (3, 200), (90, 400), (260, 40)]
            .iter()
            .enumerate()
        {
            let xt = gaussian(d, n, 50 + s as u64);
            let g = gram_t(&xt);
            let (want, bound) = naive_product(&xt, &xt.transpose());
            assert_product_close(&g, &want, &bound, n);
            assert_eq!(g, g.transpose(), "gram_t must be exactly symmetric");
            assert!(g.diagonal().iter().all(|&x| x >= 0.0));
        }
    }

    #[test]
    fn gram_t_times_equals_the_formed_gram_product() {
        // Several record blocks, an uneven last block, and (d=100) enough work to split the records.
        for (s, &(d, n, p)) in [
            (1, 1, 1),
            (4, 3, 1),
            (10, 50, 10),
            (20, 5000, 3),
            (100, 5003, 5),
            (1, 20, 4),
        ]
        .iter()
        .enumerate()
        {
            let (xt, v) = (gaussian(d, n, 60 + s as u64), gaussian(d, p, 70 + s as u64));
            let got = gram_t_times(&xt, &v);
            let a = &xt * xt.transpose();
            let want = &a * &v;
            // Both are sums of n·d products of entries of size O(1): scale by the |·| bound.
            let bound = (xt.abs() * xt.abs().transpose()) * v.abs();
            let gamma = 4.0 * (n + d) as f64 * f64::EPSILON;
            assert!(
                max_diff(&got, &want) <= gamma * max_abs(&bound),
                "d={d} n={n} p={p}"
            );
        }
    }

    #[test]
    fn empty_inner_dimension_gives_zeros() {
        let (a, b) = (Matrix::zeros(3, 0), Matrix::zeros(0, 4));
        assert_eq!(matmul(&a, &b), Matrix::zeros(3, 4));
        assert_eq!(matmul_tn(&b, &Matrix::zeros(0, 2)), Matrix::zeros(4, 2));
        assert_eq!(gram_t(&a), Matrix::zeros(3, 3));
        assert_eq!(gram_t_times(&a, &Matrix::zeros(3, 2)), Matrix::zeros(3, 2));
    }

    #[test]
    fn fix_signs_makes_the_largest_entry_positive_first_on_ties() {
        let mut q = Matrix::from_column_slice(
            3,
            4,
            &[
                0.1, -0.9, 0.3, // largest negative -> flipped
                0.5, 0.2, -0.1, // largest positive -> kept
                -0.5, 0.5, 0.0, // tie: first (negative) wins -> flipped
                0.0, 0.0, 0.0, // zero column -> untouched
            ],
        );
        fix_signs(&mut q);
        let want = Matrix::from_column_slice(
            3,
            4,
            &[-0.1, 0.9, -0.3, 0.5, 0.2, -0.1, 0.5, -0.5, 0.0, 0.0, 0.0, 0.0],
        );
        assert_eq!(q, want);
    }

    #[test]
    fn fix_signs_is_idempotent_and_removes_sign_ambiguity() {
        let mut q = gaussian(30, 6, 7);
        let mut flipped = q.clone();
        flipped.column_mut(2).neg_mut();
        flipped.column_mut(5).neg_mut();
        fix_signs(&mut q);
        fix_signs(&mut flipped);
        assert_eq!(q, flipped);
        let again = {
            let mut r = q.clone();
            fix_signs(&mut r);
            r
        };
        assert_eq!(again, q);
    }
}
