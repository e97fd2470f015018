//! Seeded random matrices and comparison helpers for the linalg tests.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use super::{Matrix, Vector};

/// m×n matrix of independent standard normals drawn from `ChaCha8Rng::seed_from_u64(seed)`.
pub(crate) fn gaussian(m: usize, n: usize, seed: u64) -> Matrix {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Matrix::from_fn(m, n, |_, _| StandardNormal.sample(&mut rng))
}

/// d×k matrix with orthonormal columns (nalgebra's QR of a Gaussian matrix, as an independent
/// reference to the kernels under test).
pub(crate) fn orthonormal(d: usize, k: usize, seed: u64) -> Matrix {
    let q = gaussian(d, k, seed).qr().q();
    q.columns(0, k).into_owned()
}

/// Symmetric d×d matrix Q·diag(spectrum)·Qᵀ with a random orthogonal Q.
pub(crate) fn with_spectrum(spectrum: &[f64], seed: u64) -> Matrix {
    let d = spectrum.len();
    let q = orthonormal(d, d, seed);
    let scaled = Matrix::from_fn(d, d, |i, j| q[(i, j)] * spectrum[j]);
    let a = &scaled * q.transpose();
    (&a + a.transpose()) * 0.5
}

/// Largest absolute entry.
pub(crate) fn max_abs(m: &Matrix) -> f64 {
    m.iter().fold(0.0, |acc, x| acc.max(x.abs()))
}

/// Largest absolute entrywise difference.
pub(crate) fn max_diff(a: &Matrix, b: &Matrix) -> f64 {
    assert_eq!(a.shape(), b.shape());
    max_abs(&(a - b))
}

/// Textbook triple-loop `a·b`, and `|a|·|b|` for the entrywise rounding bound
/// |fl(ab) − ab| ≤ γ_k (|a||b|), γ_k ≈ k·ε (Higham, Accuracy and Stability, eq. 3.13).
pub(crate) fn naive_product(a: &Matrix, b: &Matrix) -> (Matrix, Matrix) {
    let (m, k, n) = (a.nrows(), a.ncols(), b.ncols());
    assert_eq!(b.nrows(), k);
    let mut c = Matrix::zeros(m, n);
    let mut bound = Matrix::zeros(m, n);
    for j in 0..n {
        for i in 0..m {
            let (mut s, mut t) = (0.0, 0.0);
            for l in 0..k {
                s += a[(i, l)] * b[(l, j)];
                t += (a[(i, l)] * b[(l, j)]).abs();
            }
            c[(i, j)] = s;
            bound[(i, j)] = t;
        }
    }
    (c, bound)
}

/// Asserts |got − want| ≤ 2·(k+1)·ε·bound entrywise (both our kernel and the reference round).
pub(crate) fn assert_product_close(got: &Matrix, want: &Matrix, bound: &Matrix, k: usize) {
    assert_eq!(got.shape(), want.shape());
    let gamma = 2.0 * (k as f64 + 1.0) * f64::EPSILON;
    for ((g, w), b) in got.iter().zip(want.iter()).zip(bound.iter()) {
        assert!(
            (g - w).abs() <= gamma * b + f64::MIN_POSITIVE,
            "{g} vs {w} (bound {})",
            gamma * b
        );
    }
}

/// ‖QᵀQ − I‖_max computed with nalgebra (independent of the kernels).
pub(crate) fn orthonormality_reference(q: &Matrix) -> f64 {
    let g = q.transpose() * q;
    max_diff(&g, &Matrix::identity(g.nrows(), g.ncols()))
}

/// True when `v` is non-increasing.
pub(crate) fn is_decreasing(v: &Vector) -> bool {
    v.as_slice().windows(2).all(|w| w[0] >= w[1])
}
