//! Seeded random matrices and comparison helpers for the linalg tests.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use super::clip::clip_columns_l2;
use super::{Matrix, RecordStats, Records, Vector};

/// m×n matrix of independent standard normals drawn from `ChaCha8Rng::seed_from_u64(seed)`.
pub fn gaussian(m: usize, n: usize, seed: u64) -> Matrix {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Matrix::from_fn(m, n, |_, _| StandardNormal.sample(&mut rng))
}

/// d×k matrix with orthonormal columns (nalgebra's QR of a Gaussian matrix, as an independent
/// reference to the kernels under test).
pub fn orthonormal(d: usize, k: usize, seed: u64) -> Matrix {
    let q = gaussian(d, k, seed).qr().q();
    q.columns(0, k).into_owned()
}

/// Symmetric d×d matrix Q·diag(spectrum)·Qᵀ with a random orthogonal Q.
pub fn with_spectrum(spectrum: &[f64], seed: u64) -> Matrix {
    let d = spectrum.len();
    let q = orthonormal(d, d, seed);
    let scaled = Matrix::from_fn(d, d, |i, j| q[(i, j)] * spectrum[j]);
    let a = &scaled * q.transpose();
    (&a + a.transpose()) * 0.5
}

/// Largest absolute entry.
pub fn max_abs(m: &Matrix) -> f64 {
    m.iter().fold(0.0, |acc, x| acc.max(x.abs()))
}

/// Largest absolute entrywise difference.
pub fn max_diff(a: &Matrix, b: &Matrix) -> f64 {
    assert_eq!(a.shape(), b.shape());
    max_abs(&(a - b))
}

/// Textbook triple-loop `a·b`, and `|a|·|b|` for the entrywise rounding bound
/// |fl(ab) − ab| ≤ γ_k (|a||b|), γ_k ≈ k·ε (Higham, Accuracy and Stability, eq. 3.13).
pub fn naive_product(a: &Matrix, b: &Matrix) -> (Matrix, Matrix) {
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
pub fn assert_product_close(got: &Matrix, want: &Matrix, bound: &Matrix, k: usize) {
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
pub fn orthonormality_reference(q: &Matrix) -> f64 {
    let g = q.transpose() * q;
    max_diff(&g, &Matrix::identity(g.nrows(), g.ncols()))
}

/// True when `v` is non-increasing.
pub fn is_decreasing(v: &Vector) -> bool {
    v.as_slice().windows(2).all(|w| w[0] >= w[1])
}

/// Σx² − c², with the sum and c² in double-double arithmetic (error-free products by FMA,
/// error-free sums by TwoSum): its sign says whether the exact ‖x‖₂ exceeds c, far below the
/// ulp level at which rounding decides it. For moderate magnitudes (no underflow of x²).
pub fn exact_l2_excess(x: &[f64], c: f64) -> f64 {
    let two_sum = |a: f64, b: f64| {
        let s = a + b;
        let bb = s - a;
        (s, (a - (s - bb)) + (b - bb))
    };
    let (mut hi, mut lo) = (0.0_f64, 0.0_f64);
    for &v in x {
        let p = v * v;
        let e = v.mul_add(v, -p);
        let (s, err) = two_sum(hi, p);
        hi = s;
        lo += err + e;
    }
    let cc = c * c;
    let ce = c.mul_add(c, -cc);
    let (s, err) = two_sum(hi, -cc);
    s + (err + lo - ce)
}

/// Whether the exact ‖x‖₂ of the stored floats exceeds `c` (see [`exact_l2_excess`]).
pub fn exceeds_l2_exactly(x: &[f64], c: f64) -> bool {
    exact_l2_excess(x, c) > 0.0
}

/// Rows that a naive x·(c/‖x‖₂) leaves just outside the ball: `count` random Gaussian rows of
/// length `d` (seeded), each scaled to a random norm in (c, 10c); returned as columns of a
/// d×count matrix, with the bound c. The caller checks how many the naive scaling breaks.
pub fn rows_beyond(d: usize, count: usize, c: f64, seed: u64) -> Matrix {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut m = Matrix::from_fn(d, count, |_, _| StandardNormal.sample(&mut rng));
    for mut col in m.column_iter_mut() {
        let u: f64 = rand::Rng::random(&mut rng);
        let norm = col.norm();
        col *= c * (1.0 + 9.0 * u) / norm;
    }
    m
}

/// [`rows_beyond`], with how many of them the naive scaling ([`naive_scaled_columns`]) leaves
/// beyond c.
pub fn adversarial_rows(d: usize, count: usize, c: f64, seed: u64) -> (Matrix, usize) {
    let rows = rows_beyond(d, count, c, seed);
    let broken = columns_beyond(&naive_scaled_columns(&rows, c), c);
    (rows, broken)
}

/// Calls `check(d, c, rows)` with 2000 [`adversarial_rows`] for each (d, c) of a grid of
/// dimensions and bounds (seeds `seed`, `seed + 1`, …), and asserts that the naive scaling left
/// at least one of all those rows beyond its bound: that the search found what it looks for.
pub fn on_adversarial_rows(seed: u64, mut check: impl FnMut(usize, f64, &Matrix)) {
    let mut broken = 0;
    for (i, (d, c)) in [(3, 1.0), (10, 0.7), (40, 2.0_f64.sqrt()), (100, 13.0)]
        .into_iter()
        .enumerate()
    {
        let (rows, naive) = adversarial_rows(d, 2000, c, seed + i as u64);
        broken += naive;
        check(d, c, &rows);
    }
    assert!(broken > 0, "the search found no adversarial row");
}

/// x·(c/‖x‖₂) with nalgebra's norm, per column: the scaling without a margin.
pub fn naive_scaled_columns(m: &Matrix, c: f64) -> Matrix {
    let mut out = m.clone();
    for mut col in out.column_iter_mut() {
        let norm = col.norm();
        if norm > c {
            col *= c / norm;
        }
    }
    out
}

/// Columns of `m` whose norm exceeds `c`: by nalgebra's computed norm, by
/// [`super::clip::l2_norm`], or exactly.
pub fn columns_beyond(m: &Matrix, c: f64) -> usize {
    m.column_iter()
        .filter(|col| {
            let x: Vec<f64> = col.iter().copied().collect();
            col.norm() > c || super::clip::l2_norm(&x) > c || exceeds_l2_exactly(&x, c)
        })
        .count()
}

/// The lazy normalised adjacency (I + D^-½·W·D^-½)/2 of a planted-partition graph on `n` nodes
/// in `communities` equal groups (edge probability `p_in` inside a group, `p_out` across), as
/// CSR: symmetric, positive semi-definite, eigenvalues in [0, 1]. Isolated nodes keep only the
/// diagonal ½.
pub fn planted_partition(
    n: usize,
    communities: usize,
    p_in: f64,
    p_out: f64,
    seed: u64,
) -> super::sparse::Csr {
    use rand::Rng;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut edges = Vec::new();
    for i in 0..n {
        for j in i + 1..n {
            let p = if i % communities == j % communities {
                p_in
            } else {
                p_out
            };
            if rng.random::<f64>() < p {
                edges.push((i, j));
            }
        }
    }
    super::sparse::Csr::lazy_normalised_adjacency(n, &edges)
}

/// n records of d features (d×n) with norms spread over two decades, a few zero records and
/// ties (records 3 and 4 equal records 1 and 2; n ≥ 5).
pub fn spread(d: usize, n: usize, seed: u64) -> Matrix {
    let mut xt = gaussian(d, n, seed);
    for (i, mut column) in xt.column_iter_mut().enumerate() {
        column *= 10f64.powf(2.0 * ((i * 37) % n) as f64 / n as f64);
    }
    for i in [0, n / 2] {
        xt.column_mut(i).fill(0.0);
    }
    for (to, from) in [(3, 1), (4, 2)] {
        let copy = xt.column(from).clone_owned();
        xt.column_mut(to).copy_from(&copy);
    }
    xt
}

/// The statistics of `xt` clipped at c by the one clipping function, in one direct pass.
pub fn clipped_directly(xt: &Matrix, c: f64) -> RecordStats {
    let mut clipped = xt.clone();
    clip_columns_l2(&mut clipped, c);
    RecordStats::of(Records::from(&clipped))
}
