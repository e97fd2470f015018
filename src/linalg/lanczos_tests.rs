use super::*;
use crate::linalg::sparse::CsrView;
use crate::linalg::testing::{gaussian, planted_partition, with_spectrum};
use crate::linalg::{init_threads, matmul, matmul_tn, sym_eig};

fn no_stop(_: u32, _: u32) -> Result<(), ()> {
    Ok(())
}

/// Lanczos with the default options and no stop.
fn default_run(
    apply: &dyn Fn(&Matrix) -> Matrix,
    start: &Matrix,
    k: usize,
) -> Result<TopEigen, LanczosStop<()>> {
    top_eigenpairs(apply, start, k, &LanczosOptions::default(), &mut no_stop)
}

/// Checks the Lanczos pairs against the dense eigendecomposition of `dense`: eigenvalues to
/// 1e-7·‖A‖, and each eigenvector's subspace (the columns of equal eigenvalue) captured.
fn check_against_dense(dense: &Matrix, got: &TopEigen, k: usize) {
    let want = sym_eig(dense);
    let scale = want.values.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
    for i in 0..k {
        assert!(
            (got.values[i] - want.values[i]).abs() <= 1e-7 * scale,
            "eigenvalue {i}: {} vs {}",
            got.values[i],
            want.values[i]
        );
    }
    let vtv = matmul_tn(&got.vectors, &got.vectors);
    assert!(
        (vtv - Matrix::identity(k, k)).abs().max() <= 1e-10,
        "not orthonormal"
    );
    // Captured energy of the top-k: Σ vᵢᵀAvᵢ against Σ λᵢ.
    let av = matmul(dense, &got.vectors);
    let energy: f64 = (0..k).map(|i| got.vectors.column(i).dot(&av.column(i))).sum();
    let best: f64 = want.values.iter().take(k).sum();
    assert!(
        (energy - best).abs() <= 1e-8 * best.abs().max(1.0),
        "energy {energy} vs {best}"
    );
}

#[test]
fn matches_the_dense_decomposition_of_a_sparse_graph_matrix() {
    init_threads(0);
    let csr = planted_partition(800, 10, 0.08, 0.004, 11);
    let a = csr.view().expect("valid CSR");
    let dense = a.to_dense();
    let options = LanczosOptions::default();
    for k in [1usize, 3, 10] {
        // The service's block size (below k at k = 10), and a block wider than k.
        for b in [options.block_size(800), k + 10] {
            let start = gaussian(800, b, 5);
            let apply = |x: &Matrix| a.times(x);
            let got = top_eigenpairs(&apply, &start, k, &options, &mut no_stop).expect("converges");
            check_against_dense(&dense, &got, k);
        }
    }
}

#[test]
fn handles_a_cluster_of_equal_eigenvalues_and_negative_ones() {
    let mut spectrum: Vec<f64> = (0..300).map(|i| -1.0 + 2.0 * (i as f64) / 300.0).collect();
    spectrum[..4].copy_from_slice(&[5.0, 5.0, 5.0, 4.0]);
    spectrum[299] = -10.0;
    let dense = with_spectrum(&spectrum, 4);
    let apply = |x: &Matrix| matmul(&dense, x);
    let got = default_run(&apply, &gaussian(300, 14, 1), 4).expect("converges");
    check_against_dense(&dense, &got, 4);
    assert!(
        (got.values[3] - 4.0).abs() < 1e-7,
        "the largest algebraic, not the largest magnitude"
    );
}

#[test]
fn a_tiny_matrix_is_decomposed_densely() {
    let csr = planted_partition(12, 2, 0.5, 0.1, 2);
    let a = csr.view().expect("valid CSR");
    let apply = |x: &Matrix| a.times(x);
    let got = default_run(&apply, &gaussian(12, 5, 3), 2).expect("dense path");
    check_against_dense(&a.to_dense(), &got, 2);
}

#[test]
fn progress_can_stop_it_and_no_convergence_is_an_error() {
    let csr = planted_partition(400, 4, 0.1, 0.01, 8);
    let a = csr.view().expect("valid CSR");
    let apply = |x: &Matrix| a.times(x);
    let start = gaussian(400, 12, 3);
    let mut stop = |cycle: u32, _| if cycle >= 1 { Err("stop") } else { Ok(()) };
    let stopped = top_eigenpairs(&apply, &start, 2, &LanczosOptions::default(), &mut stop);
    assert!(matches!(stopped, Err(LanczosStop::Stopped("stop"))));
    let hopeless = LanczosOptions {
        tolerance: 0.0,
        max_cycles: 2,
        ..LanczosOptions::default()
    };
    let failed = top_eigenpairs(&apply, &start, 2, &hopeless, &mut no_stop);
    assert!(matches!(
        failed,
        Err(LanczosStop::Failed(LinalgError::NoConvergence(_)))
    ));
}

#[test]
fn a_start_block_that_does_not_fit_is_refused() {
    let apply = |x: &Matrix| x.clone();
    let start = gaussian(50, 3, 1);
    assert!(matches!(
        top_eigenpairs(&apply, &start, 51, &LanczosOptions::default(), &mut no_stop),
        Err(LanczosStop::Failed(_))
    ));
    let _ = CsrView::new(0, &[0], &[], &[]).expect("the empty matrix is a valid CSR");
}

#[test]
fn a_sweep_subtracts_then_projects_in_parallel_chunks_as_the_plain_products_do() {
    init_threads(0);
    // 10 000 × 60 against 4 columns: above PRODUCT_MIN_WORK, so the chunks run in parallel,
    // and the last chunk is shorter than CHUNK_ROWS.
    let (n, m, b) = (10_000, 60, 4);
    assert!(work(n, m, b) >= PRODUCT_MIN_WORK && n % CHUNK_ROWS != 0);
    let q = gaussian(n, m, 1);
    let w0 = gaussian(n, b, 2);
    let c = gaussian(20, b, 3);
    let mut w = w0.clone();
    let (projection, squares) = sweep(&q, &mut w, Some((30, &c)), 5..45);
    let want_w = &w0 - q.columns(30, 20) * &c;
    let want_projection = q.columns(5, 40).transpose() * &want_w;
    assert!((&w - &want_w).abs().max() <= 1e-12 * want_w.abs().max());
    assert!((&projection - &want_projection).abs().max() <= 1e-10 * want_projection.abs().max());
    for (j, s) in squares.iter().enumerate() {
        let want = want_w.column(j).norm_squared();
        assert!((s - want).abs() <= 1e-12 * want, "column {j}");
    }
    // The first 20 columns of q replaced by Q₍:30₎·Y, in place.
    let y = gaussian(30, 20, 4);
    let want = q.columns(0, 30) * &y;
    let mut replaced = q.clone();
    replace_by_product(&mut replaced, 30, &y);
    assert!((replaced.columns(0, 20) - &want).abs().max() <= 1e-12 * want.abs().max());
    assert_eq!(replaced.columns(20, m - 20), q.columns(20, m - 20));
}
