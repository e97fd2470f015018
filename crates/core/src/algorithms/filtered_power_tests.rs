use std::borrow::Cow;

use super::*;
use crate::linalg::subspace::orthonormality_error;
use crate::linalg::testing::{orthonormal, planted_partition, with_spectrum};
use crate::linalg::{init_threads, sym_eig};

/// The exact top-k eigenvectors in magnitude of a symmetric `a`.
fn top_by_magnitude(a: &Matrix, k: usize) -> Matrix {
    let eig = sym_eig(a);
    let mut order: Vec<usize> = (0..eig.values.len()).collect();
    order.sort_by(|&i, &j| eig.values[j].abs().total_cmp(&eig.values[i].abs()));
    Matrix::from_fn(a.nrows(), k, |r, c| eig.vectors[(r, order[c])])
}

/// sin of the largest principal angle between span(u) and span(v) (both orthonormal).
fn largest_sine(u: &Matrix, v: &Matrix) -> f64 {
    let c = u.transpose() * v;
    let smallest_cos = c.singular_values().iter().copied().fold(f64::INFINITY, f64::min);
    (1.0 - smallest_cos.min(1.0).powi(2)).max(0.0).sqrt()
}

/// The leading k left singular vectors of Y, as the job's Rayleigh–Ritz step takes them.
fn basis_of(y: &Matrix, k: usize) -> Matrix {
    let svd = y.clone().svd(true, false);
    let u = svd.u.expect("u");
    let mut order: Vec<usize> = (0..svd.singular_values.len()).collect();
    order.sort_by(|&i, &j| svd.singular_values[j].total_cmp(&svd.singular_values[i]));
    Matrix::from_fn(y.nrows(), k, |r, c| u[(r, order[c])])
}

/// Products a plain power run (X ← Q(A·X)) needs to meet the same residual rule.
fn plain_power_products(op: &Operator<'_>, mut x: Matrix, k: usize, cap: u32) -> u32 {
    for products in 1..=cap {
        let y = op.apply(&x);
        let ritz = ritz_pairs(&x, &y).expect("Ritz pairs");
        let top = ritz.values[0].abs();
        if residuals(&x, &y, &ritz, k)
            .iter()
            .all(|&r| r <= RESIDUAL_TOLERANCE * top)
        {
            return products;
        }
        x = tall::orthonormal_columns(&y);
    }
    cap + 1
}

#[test]
fn the_filtered_run_reaches_the_top_subspace_of_a_graph_with_fewer_products_than_plain_power() {
    init_threads(0);
    let (n, k, p) = (900, 5, 10);
    let csr = planted_partition(n, k, 0.05, 0.01, 11);
    let a = csr.view().expect("valid CSR");
    let op = Operator::Sparse(a);
    let start = orthonormal(n, p, 3);
    let mut reports = Vec::new();
    let run = run(&op, start.clone(), k, 200, |done| {
        reports.push(done);
        Ok(())
    })
    .expect("runs");
    assert!(run.converged, "converged within {} products", run.products);
    assert_eq!(
        reports,
        (1..=run.products).collect::<Vec<_>>(),
        "one report per product"
    );
    let dense = a.to_dense();
    let exact = top_by_magnitude(&dense, k);
    let basis = basis_of(&run.y, k);
    assert!(orthonormality_error(&basis) < 1e-10);
    // Davis–Kahan: residuals r_i ≤ tol·|λ₁| bound the sine by ‖R‖_F/gap ≤ √k·tol·|λ₁|/gap,
    // gap = λ_k − λ_{k+1} (a PSD matrix here, so magnitudes are the values).
    let values = sym_eig(&dense).values;
    let bound = (k as f64).sqrt() * RESIDUAL_TOLERANCE * values[0] / (values[k - 1] - values[k]);
    let sine = largest_sine(&basis, &exact);
    assert!(sine <= 1.5 * bound, "largest angle sine {sine}, bound {bound}");
    let plain = plain_power_products(&op, start, k, 400);
    assert!(
        f64::from(run.products) * 1.5 <= f64::from(plain),
        "filtered {} products against plain {plain}",
        run.products
    );
}

#[test]
fn an_indefinite_matrix_gives_the_subspace_of_the_largest_magnitudes_as_the_power_method_does() {
    // Eigenvalues of both signs: the top 3 in magnitude are −9, 8 and −7.
    let mut spectrum = vec![-9.0, 8.0, -7.0, 3.0, -2.5, 2.0];
    spectrum.extend((0..54).map(|i| 0.5 - f64::from(i) / 54.0));
    let a = with_spectrum(&spectrum, 5);
    let op = Operator::Dense(Cow::Borrowed(&a));
    let k = 3;
    let run = run(&op, orthonormal(60, 6, 8), k, 100, |_| Ok(())).expect("runs");
    assert!(run.converged);
    let sine = largest_sine(&basis_of(&run.y, k), &top_by_magnitude(&a, k));
    assert!(sine < 1e-3, "largest angle sine {sine}");
}

#[test]
fn the_product_budget_bounds_the_run_and_a_rank_deficient_block_stays_finite() {
    let (n, k, p) = (900, 5, 10);
    let csr = planted_partition(n, k, 0.05, 0.01, 11);
    let op = Operator::Sparse(csr.view().expect("valid CSR"));
    for cap in [1, 2, 5] {
        let run = run(&op, orthonormal(n, p, 3), k, cap, |_| Ok(())).expect("runs");
        assert_eq!((run.products, run.converged), (cap, false), "cap {cap}");
    }
    // Rank 2 with a block of 4: b = |θ₄| = 0, so plain power steps; converges at once.
    let a = with_spectrum(&[5.0, 4.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], 2);
    let op = Operator::Dense(Cow::Borrowed(&a));
    let run = run(&op, orthonormal(8, 4, 1), 2, 50, |_| Ok(())).expect("runs");
    assert!(run.converged && run.y.iter().all(|v| v.is_finite()));
    // A cancelled job: the progress error ends the run.
    let stop = run_cancelled(&op);
    assert!(matches!(stop, Err(RunError::Cancelled)), "{stop:?}");
}

fn run_cancelled(op: &Operator<'_>) -> Result<Converged, RunError> {
    run(op, orthonormal(8, 4, 1), 2, 50, |_| Err(RunError::Cancelled))
}
