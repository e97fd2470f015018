//! Scaling a vector into a norm ball, with a margin for rounding (docs/design/privacy.md §1.2).
//! Every place that scales rows (or gradients) to a bound a sensitivity relies on goes through
//! [`clip_l2`] / [`clip_l1`]: the upload's clipping (`ingest::clip`), adaptive clipping
//! (`algorithms::clipping::clip_rows`), centring (`algorithms::centering::recentre`), the
//! consensus clip of `gossip_power` and the gradient clip of `dp_oja`.
//!
//! Why a margin: x·(c/‖x‖) is on the sphere only in exact arithmetic. The computed norm of a
//! d-vector can be below the exact one by a relative γ ≈ d·u (u = f64::EPSILON/2, Higham,
//! *Accuracy and Stability of Numerical Algorithms*, §3.1), and the scaling rounds each entry
//! again, so the naive scaled row often has a norm just above c (by an ulp or two, for a good
//! share of random rows). Rows are therefore scaled to c·(1 − (d + 8)·ε) in computed norm,
//! which makes the exact norm of the stored floats ≤ c, and so is any computed norm of them.
//! Rows already within that target are left bit for bit untouched.

use super::Matrix;

/// 2⁻⁶⁰⁰: a power of two, so multiplying by it is exact except for values that underflow.
const TINY_POW2: f64 = f64::from_bits((1023 - 600) << 52);

/// The relative safety margin for a vector of `len` entries: (len + 8)·ε covers the rounding
/// of the norm (≤ (len/2 + 4)·ε, scaled path included) and of the scaling itself.
pub fn margin(len: usize) -> f64 {
    (len as f64 + 8.0) * f64::EPSILON
}

/// Scales `row` so that ‖row‖₂ ≤ `bound` exactly (computed norm ≤ bound·(1 − margin)) if it
/// is above that; leaves it untouched otherwise. Values must be finite; `bound` finite, > 0.
pub fn clip_l2(row: &mut [f64], bound: f64) {
    clip_to(row, bound, l2_norm);
}

/// As [`clip_l2`] for the L1 norm.
pub fn clip_l1(row: &mut [f64], bound: f64) {
    clip_to(row, bound, l1_norm);
}

/// [`clip_l2`] applied to every column of `m` (records are stored d×n, one per column).
pub fn clip_columns_l2(m: &mut Matrix, bound: f64) {
    let d = m.nrows();
    if d == 0 {
        return;
    }
    m.as_mut_slice()
        .chunks_exact_mut(d)
        .for_each(|column| clip_l2(column, bound));
}

/// [`clip_l2`] then, if `alpha` is set, [`clip_l1`], on every column of `m`.
pub fn clip_columns(m: &mut Matrix, beta: f64, alpha: Option<f64>) {
    let d = m.nrows();
    if d == 0 {
        return;
    }
    for column in m.as_mut_slice().chunks_exact_mut(d) {
        clip_l2(column, beta);
        if let Some(alpha) = alpha {
            clip_l1(column, alpha);
        }
    }
}

/// [`clip_l2`] applied to every row of `m` (rows are strided, so each is copied out and back).
pub fn clip_rows_l2(m: &mut Matrix, bound: f64) {
    let mut row = vec![0.0; m.ncols()];
    for r in 0..m.nrows() {
        row.iter_mut()
            .zip(m.row(r).iter())
            .for_each(|(slot, v)| *slot = *v);
        clip_l2(&mut row, bound);
        m.row_mut(r).iter_mut().zip(&row).for_each(|(slot, v)| *slot = *v);
    }
}

/// Scales `row` so that `norm(row) ≤ bound·(1 − margin)` if it is above that.
fn clip_to(row: &mut [f64], bound: f64, norm: fn(&[f64]) -> f64) {
    let target = bound * (1.0 - margin(row.len()));
    let mut n = norm(row);
    if n.is_infinite() {
        // Only for norms beyond f64::MAX: bring the row into range exactly, then clip.
        row.iter_mut().for_each(|v| *v *= TINY_POW2);
        n = norm(row);
    }
    // Every row is multiplied (by 1 when within the target, which is exact), so clipping takes
    // the same time whether it shortens few rows or many: how many it shortens is private
    // (docs/design/privacy.md §1.2).
    let s = if n > target { target / n } else { 1.0 };
    row.iter_mut().for_each(|v| *v *= s);
}

/// ‖x‖₂, without spurious overflow or underflow (the plain sum of squares when it is safe,
/// the max-scaled form otherwise).
pub fn l2_norm(x: &[f64]) -> f64 {
    let s: f64 = x.iter().map(|v| v * v).sum();
    if s.is_finite() && s >= f64::MIN_POSITIVE {
        return s.sqrt();
    }
    let m = x.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    if m == 0.0 {
        return 0.0;
    }
    let t: f64 = x.iter().map(|v| (v / m) * (v / m)).sum();
    m * t.sqrt()
}

/// ‖x‖₁ (infinite only when the exact value exceeds f64::MAX).
pub fn l1_norm(x: &[f64]) -> f64 {
    x.iter().map(|v| v.abs()).sum()
}

#[cfg(test)]
#[path = "clip_tests.rs"]
mod tests;
