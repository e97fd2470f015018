use super::*;
use crate::linalg::testing::{gaussian, max_abs, max_diff, planted_partition};
use crate::linalg::{init_threads, matmul};

#[test]
fn the_product_matches_the_dense_product_sequential_and_parallel() {
    init_threads(0);
    for (n, p) in [(1usize, 1usize), (37, 3), (600, 20)] {
        let csr = planted_partition(n, 4, 0.2, 0.02, n as u64);
        let a = csr.view().expect("valid CSR");
        let x = gaussian(n, p, 7);
        let dense = a.to_dense();
        let want = matmul(&dense, &x);
        let got = a.times(&x);
        // Each entry is a sum of at most n products of values ≤ 1: rounding ≤ n·ε·max|x|.
        let tol = 4.0 * n as f64 * f64::EPSILON * max_abs(&x);
        assert!(max_diff(&got, &want) <= tol, "n={n}, p={p}");
    }
}

#[test]
fn a_product_large_enough_to_run_in_parallel_agrees_with_the_sequential_rows() {
    init_threads(0);
    let csr = planted_partition(1500, 10, 0.05, 0.005, 3);
    let a = csr.view().expect("valid CSR");
    let x = gaussian(1500, 128, 9);
    assert!(
        a.nnz() * 128 >= SPARSE_PRODUCT_MIN_WORK,
        "the test must take the parallel path"
    );
    let got = a.times(&x);
    for i in [0usize, 1, 749, 1499] {
        let (cols, vals) = a.row(i);
        for c in 0..128 {
            let want: f64 = cols.iter().zip(vals).map(|(&j, &v)| v * x[(j as usize, c)]).sum();
            assert!((got[(i, c)] - want).abs() <= 1e-12, "row {i}, column {c}");
        }
    }
}

#[test]
fn malformed_arrays_are_refused() {
    let ok = CsrView::new(2, &[0, 1, 2], &[1, 0], &[1.0, 1.0]);
    assert!(ok.is_ok());
    for (row_ptr, col_idx, values, why) in [
        (&[0, 1][..], &[1][..], &[1.0][..], "short row_ptr"),
        (
            &[0, 1, 2][..],
            &[2, 0][..],
            &[1.0, 1.0][..],
            "column out of range",
        ),
        (&[0, 2, 2][..], &[1, 1][..], &[1.0, 1.0][..], "repeated column"),
        (&[0, 2, 1][..], &[0, 1][..], &[1.0, 1.0][..], "decreasing row_ptr"),
        (&[0, 1, 3][..], &[0, 1][..], &[1.0, 1.0][..], "row_ptr past nnz"),
    ] {
        assert!(CsrView::new(2, row_ptr, col_idx, values).is_err(), "{why}");
    }
}

#[test]
fn triplets_become_sorted_rows() {
    let csr = Csr::from_triplets(3, vec![(2, 0, 3.0), (0, 2, 3.0), (1, 1, 2.0), (0, 0, 1.0)]);
    assert_eq!(csr.row_ptr, vec![0, 2, 3, 4]);
    assert_eq!(csr.col_idx, vec![0, 2, 1, 0]);
    assert_eq!(csr.values, vec![1.0, 3.0, 2.0, 3.0]);
}

#[test]
fn every_width_of_one_pass_and_the_splits_above_it_match_the_dense_product() {
    // One pass covers up to ROW_PASS_MAX columns; wider blocks are split into passes.
    let csr = planted_partition(50, 3, 0.3, 0.05, 4);
    let a = csr.view().expect("valid CSR");
    let dense = a.to_dense();
    for p in (1..=ROW_PASS_MAX + 3).chain([2 * ROW_PASS_MAX + 1]) {
        let x = gaussian(50, p, p as u64);
        let got = a.times(&x);
        let tol = 4.0 * 50.0 * f64::EPSILON * max_abs(&x);
        assert!(max_diff(&got, &matmul(&dense, &x)) <= tol, "p={p}");
    }
}
