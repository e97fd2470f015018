//! Worst-case neighbouring pairs and the scalar statistics read off an output.
//!
//! The pair: the rest of the data is zero rows (so the output is noise on one side and noise
//! plus the canary on the other, the largest relative effect), and the canary is a row of norm
//! exactly β along the last axis e_d, orthogonal to everything else:
//! - `replace_one`: D's last row is β·e_1, D' replaces it by β·e_d (the change xxᵀ − yyᵀ with
//!   x ⊥ y, Frobenius norm √2·β², the rank-one sensitivity);
//! - `add_remove`: D' is D plus the canary row, appended last (it lands in the last shard of the
//!   simulated protocols);
//! - `entry` (matrices): A = 0 and A' = u·e_d e_dᵀ (sqrt(Σ_i ‖C_i:‖₁²) = u).

use privpca::algorithms::Output;
use privpca::dataset::Neighbours;
use privpca::linalg::Matrix;

/// A neighbouring pair in the form the algorithms take (records as Xᵀ, d×n; or the matrix),
/// with the directions the statistics look along.
#[derive(Clone)]
pub struct Pair {
    pub side0: Matrix,
    pub side1: Matrix,
    /// Unit direction of the canary.
    pub canary: Vec<f64>,
    /// Unit direction of the row the canary replaced (replace_one), if any.
    pub replaced: Option<Vec<f64>>,
    /// A and A' (the Gram matrices of the two sides, or the matrices), for the conditional
    /// likelihood-ratio statistic of an eigenvalue release; None where no test reads it.
    pub grams: Option<(Matrix, Matrix)>,
}

fn axis(d: usize, i: usize) -> Vec<f64> {
    (0..d).map(|j| if j == i { 1.0 } else { 0.0 }).collect()
}

/// The pair of the module docs for `n` records (n of D; D' has n + 1 under add_remove) of
/// dimension d, or a d×d matrix.
pub fn pair(neighbours: &Neighbours, d: usize, n: usize) -> Pair {
    let last = d - 1;
    match *neighbours {
        Neighbours::ReplaceOne { beta, .. } => {
            let mut side0 = Matrix::zeros(d, n);
            let mut side1 = Matrix::zeros(d, n);
            side0[(0, n - 1)] = beta;
            side1[(last, n - 1)] = beta;
            Pair {
                side0,
                side1,
                canary: axis(d, last),
                replaced: (d > 1).then(|| axis(d, 0)),
                grams: None,
            }
        }
        Neighbours::AddRemove { beta, .. } => {
            let side0 = Matrix::zeros(d, n);
            let mut side1 = Matrix::zeros(d, n + 1);
            side1[(last, n)] = beta;
            Pair {
                side0,
                side1,
                canary: axis(d, last),
                replaced: None,
                grams: None,
            }
        }
        Neighbours::Entry { u } => {
            let side0 = Matrix::zeros(d, d);
            let mut side1 = Matrix::zeros(d, d);
            side1[(last, last)] = u;
            Pair {
                side0,
                side1,
                canary: axis(d, last),
                replaced: None,
                grams: None,
            }
        }
    }
}

/// Names of the statistics of [`statistics`], in order.
pub const STATISTICS: [&str; 9] = [
    "failed",
    "|<q1,c>|",
    "sum_j <q_j,c>^2",
    "sum_j l_j <q_j,c>^2",
    "sum_j l_j (<q_j,c>^2 - <q_j,r>^2)",
    "l_1",
    "sum_j l_j",
    "<q1,c>^2 - <q1,r>^2",
    "eigenvalue release given Q, on A'-A",
];

/// The statistics of one run's result (c the canary direction, r the replaced row's, l_j the
/// released eigenvalues, q_j the basis columns). A failed run is 1 in "failed" and NaN
/// elsewhere; a statistic the output cannot give (no eigenvalues, no r) is NaN.
pub fn statistics(result: &Result<Output, String>, pair: &Pair) -> Vec<f64> {
    let nan = f64::NAN;
    let Ok(out) = result else {
        let mut v = vec![nan; STATISTICS.len()];
        v[0] = 1.0;
        return v;
    };
    let q = &out.basis;
    let dot = |j: usize, dir: &[f64]| -> f64 { q.column(j).iter().zip(dir).map(|(a, b)| a * b).sum() };
    let k = q.ncols();
    let c = &pair.canary;
    let on_c: Vec<f64> = (0..k).map(|j| dot(j, c).powi(2)).collect();
    let on_r: Option<Vec<f64>> = pair
        .replaced
        .as_ref()
        .map(|r| (0..k).map(|j| dot(j, r).powi(2)).collect());
    let lambda = out.eigenvalues.as_ref().filter(|l| l.len() >= k);
    let weighted =
        |w: &[f64]| -> f64 { lambda.map_or(nan, |l| w.iter().zip(l.iter()).map(|(a, b)| a * b).sum()) };
    let first = if k > 0 { dot(0, c).abs() } else { nan };
    let contrast: Option<Vec<f64>> = on_r
        .as_ref()
        .map(|r| on_c.iter().zip(r).map(|(a, b)| a - b).collect());
    vec![
        0.0,
        first,
        on_c.iter().sum(),
        weighted(&on_c),
        contrast.as_ref().map_or(nan, |w| weighted(w)),
        lambda.and_then(|l| l.first().copied()).unwrap_or(nan),
        lambda.map_or(nan, |l| l.iter().sum()),
        match (&on_r, k > 0) {
            (Some(r), true) => on_c[0] - r[0],
            _ => nan,
        },
        given_basis(q, lambda.map(|l| l.as_slice()), pair.grams.as_ref()),
    ]
}

/// The eigenvalue release λ̂_j = q_jᵀ A q_j + noise, given the released basis Q (released
/// first, so by adaptive composition the eigenvalues are a Gaussian or Laplace release of
/// (q_jᵀ A q_j)_j at fixed Q), projected on the unit direction of its difference between the
/// sides: w_j = q_jᵀ(A' − A)q_j, statistic Σ_j (λ̂_j − q_jᵀ A q_j)·w_j/‖w‖. Its mean is 0 on D
/// and ‖w‖ on D' (‖w‖ ≤ the release's sensitivity, equal to it when Q is aligned with the
/// difference). NaN without eigenvalues, Gram matrices or difference.
fn given_basis(q: &Matrix, lambda: Option<&[f64]>, grams: Option<&(Matrix, Matrix)>) -> f64 {
    let (Some(lambda), Some((a0, a1))) = (lambda, grams) else {
        return f64::NAN;
    };
    let quad = |a: &Matrix, j: usize| -> f64 {
        let v = q.column(j);
        (a * v).dot(&v)
    };
    let k = q.ncols().min(lambda.len());
    let w: Vec<f64> = (0..k).map(|j| quad(a1, j) - quad(a0, j)).collect();
    let norm = w.iter().map(|x| x * x).sum::<f64>().sqrt();
    if norm == 0.0 {
        return f64::NAN;
    }
    (0..k).map(|j| (lambda[j] - quad(a0, j)) * w[j]).sum::<f64>() / norm
}
