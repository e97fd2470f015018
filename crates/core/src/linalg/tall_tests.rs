//! Tests of the tall-skinny kernels against the dense ones.

use super::*;
use crate::linalg::matmul_tn;
use crate::linalg::subspace::orthonormality_error;
use crate::linalg::testing::gaussian;

#[test]
fn gram_matches_the_dense_product_across_chunks() {
    // Above the parallel threshold and not a multiple of the chunk.
    let (a, b) = (
        gaussian(3 * CHUNK_ROWS + 17, 20, 1),
        gaussian(3 * CHUNK_ROWS + 17, 7, 2),
    );
    let error = (gram_tn(&a, &b) - matmul_tn(&a, &b)).abs().max();
    assert!(error < 1e-10, "{error}");
    let small = gaussian(5, 3, 3);
    assert!((gram_tn(&small, &small) - matmul_tn(&small, &small)).abs().max() < 1e-12);
}

#[test]
fn cholesky_qr2_is_orthonormal_with_the_span_and_order_of_householder() {
    let n = 2 * CHUNK_ROWS + 5;
    // Columns of very different scales (condition number ≈ 10⁵): still the fast path.
    let mut y = gaussian(n, 12, 4);
    for (j, mut column) in y.column_iter_mut().enumerate() {
        column *= 10f64.powi(-(j as i32) / 2);
    }
    let q = cholesky_qr2(&y).expect("well enough conditioned");
    assert!(orthonormality_error(&q) < 1e-13, "{}", orthonormality_error(&q));
    let householder = thin_qr_q(&y);
    // The first j columns span the same space (Gram–Schmidt order): |⟨q_j, h_j⟩| = 1.
    let overlap = matmul_tn(&q, &householder);
    for j in 0..12 {
        assert!(
            (overlap[(j, j)].abs() - 1.0).abs() < 1e-9,
            "column {j}: {}",
            overlap[(j, j)]
        );
    }
}

#[test]
fn a_rank_deficient_block_falls_back_on_householder() {
    let n = 500;
    let mut y = gaussian(n, 6, 5);
    let copy = y.column(0).clone_owned();
    y.set_column(3, &copy);
    assert!(cholesky_qr2(&y).is_none());
    let q = orthonormal_columns(&y);
    assert_eq!(q.shape(), (n, 6));
    assert!(orthonormality_error(&q) < 1e-12);
}
