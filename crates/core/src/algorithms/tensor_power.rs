//! Symmetric third-order tensors for `cape_agn`: a packed layout of the C(D+2, 3) unique
//! entries, the multilinear projection T(W, W, W), and the robust tensor power method with
//! deflation (Anandkumar, Ge, Hsu, Kakade & Telgarsky 2014, Alg. 1; Imtiaz & Sarwate eq. (3)).
//!
//! **Packed layout.** Entry (i, j, k) with i ≤ j ≤ k sits at index C(k+2, 3) + C(j+1, 2) + i,
//! i.e. k outermost, then j, then i (the third-order analogue of
//! [`crate::algorithms::cape_noise::pack_upper`]). A symmetric tensor is the same number at every
//! permutation of its index, so the packed vector holds each value once; its L2 norm is at
//! most the Frobenius norm of the full tensor (off-diagonal values appear 3 or 6 times there).
//! That is why a Frobenius-norm sensitivity bound is a valid L2 bound for the packed release.

use rand::RngCore;
use rand_distr::{Distribution, StandardNormal};

use crate::linalg::Matrix;

/// C(d+2, 3): the number of unique entries of a symmetric d×d×d tensor.
pub fn packed_len(d: usize) -> usize {
    d * (d + 1) * (d + 2) / 6
}

/// Index of entry (i, j, k), i ≤ j ≤ k, in the packed layout (module docs).
pub fn packed_index(i: usize, j: usize, k: usize) -> usize {
    packed_len(k) + j * (j + 1) / 2 + i
}

/// Calls `f(index, i, j, k)` for every i ≤ j ≤ k < d, in packed order.
pub fn for_each_packed(d: usize, mut f: impl FnMut(usize, usize, usize, usize)) {
    let mut idx = 0;
    for k in 0..d {
        for j in 0..=k {
            for i in 0..=j {
                f(idx, i, j, k);
                idx += 1;
            }
        }
    }
}

/// The dense d³ tensor (index i + d·j + d²·k) of a packed symmetric tensor.
pub fn unpack(packed: &[f64], d: usize) -> Result<Vec<f64>, String> {
    if packed.len() != packed_len(d) {
        return Err(format!(
            "a packed symmetric {d}×{d}×{d} tensor has {} entries, not {}",
            packed_len(d),
            packed.len()
        ));
    }
    let mut dense = vec![0.0; d * d * d];
    for_each_packed(d, |idx, i, j, k| {
        let v = packed[idx];
        for (a, b, c) in [(i, j, k), (i, k, j), (j, i, k), (j, k, i), (k, i, j), (k, j, i)] {
            dense[a + d * (b + d * c)] = v;
        }
    });
    Ok(dense)
}

/// The packed unique entries (i ≤ j ≤ k) of a dense symmetric d³ tensor.
pub fn pack(dense: &[f64], d: usize) -> Vec<f64> {
    let mut out = vec![0.0; packed_len(d)];
    for_each_packed(d, |idx, i, j, k| out[idx] = dense[i + d * (j + d * k)]);
    out
}

/// T(W, W, W) = Σ_{ijk} T_ijk W_i:⊗W_j:⊗W_k: (Imtiaz & Sarwate App. B-C) for a dense d³
/// tensor and W d×K: three mode products, d³K + d²K² + dK³ multiply–adds. Dense K³ result.
pub fn multilinear(dense: &[f64], d: usize, w: &Matrix) -> Vec<f64> {
    let kk = w.ncols();
    // Mode 3: t1[i, j, c] = Σ_k T[i, j, k] W[k, c].
    let mut t1 = vec![0.0; d * d * kk];
    for c in 0..kk {
        for k in 0..d {
            let wkc = w[(k, c)];
            if wkc == 0.0 {
                continue;
            }
            let src = &dense[d * d * k..d * d * (k + 1)];
            let dst = &mut t1[d * d * c..d * d * (c + 1)];
            for (o, s) in dst.iter_mut().zip(src) {
                *o += wkc * s;
            }
        }
    }
    // Mode 2: t2[i, b, c] = Σ_j t1[i, j, c] W[j, b].
    let mut t2 = vec![0.0; d * kk * kk];
    for c in 0..kk {
        for b in 0..kk {
            for j in 0..d {
                let wjb = w[(j, b)];
                for i in 0..d {
                    t2[i + d * (b + kk * c)] += wjb * t1[i + d * (j + d * c)];
                }
            }
        }
    }
    // Mode 1: out[a, b, c] = Σ_i t2[i, b, c] W[i, a].
    let mut out = vec![0.0; kk * kk * kk];
    for c in 0..kk {
        for b in 0..kk {
            for a in 0..kk {
                let mut s = 0.0;
                for i in 0..d {
                    s += w[(i, a)] * t2[i + d * (b + kk * c)];
                }
                out[a + kk * (b + kk * c)] = s;
            }
        }
    }
    out
}

/// The packed K-dimensional projection T(W, W, W) of a packed d-dimensional symmetric tensor.
pub fn project_packed(packed: &[f64], d: usize, w: &Matrix) -> Result<Vec<f64>, String> {
    let dense = unpack(packed, d)?;
    Ok(pack(&multilinear(&dense, d, w), w.ncols()))
}

/// T(I, u, u)_a = Σ_bc T_abc u_b u_c for a dense K³ tensor.
fn apply_iuu(t: &[f64], k: usize, u: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; k];
    for c in 0..k {
        for b in 0..k {
            let ubc = u[b] * u[c];
            for (a, o) in out.iter_mut().enumerate() {
                *o += t[a + k * (b + k * c)] * ubc;
            }
        }
    }
    out
}

/// T(u, u, u).
fn value(t: &[f64], k: usize, u: &[f64]) -> f64 {
    apply_iuu(t, k, u).iter().zip(u).map(|(a, b)| a * b).sum()
}

fn normalised(v: Vec<f64>) -> Option<Vec<f64>> {
    let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    (norm > 0.0 && norm.is_finite()).then(|| v.into_iter().map(|x| x / norm).collect())
}

/// Settings of the robust tensor power method: `starts` random starts (L), `iterations`
/// power steps each (N), and N more steps from the best start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PowerSettings {
    pub starts: usize,
    pub iterations: usize,
}

/// One robust eigenpair (λ, v) of an orthogonally decomposable tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct Eigenpair {
    pub value: f64,
    pub vector: Vec<f64>,
}

/// The robust tensor power method with deflation (Anandkumar et al. 2014, Alg. 1) on a dense
/// symmetric K³ tensor: for each of `count` components, `starts` uniform random unit starts are
/// each iterated `iterations` times by u ↦ T(I,u,u)/‖T(I,u,u)‖ (Imtiaz & Sarwate eq. (3)); the
/// start with the largest T(u,u,u) is iterated `iterations` more times, λ = T(u,u,u), and
/// T ← T − λ·u⊗u⊗u. An odd tensor has T(−u,−u,−u) = −T(u,u,u), so a negative λ (noise) is
/// turned positive by flipping u. The randomness is public (no privacy cost).
pub fn tensor_power(
    packed: &[f64],
    k: usize,
    count: usize,
    settings: PowerSettings,
    rng: &mut dyn RngCore,
) -> Result<Vec<Eigenpair>, String> {
    let mut t = unpack(packed, k)?;
    let mut pairs = Vec::with_capacity(count);
    let iterate = |t: &[f64], mut u: Vec<f64>, steps: usize| -> Vec<f64> {
        for _ in 0..steps {
            match normalised(apply_iuu(t, k, &u)) {
                Some(next) => u = next,
                None => break,
            }
        }
        u
    };
    for _ in 0..count {
        let mut best: Option<(f64, Vec<f64>)> = None;
        for _ in 0..settings.starts.max(1) {
            let start: Vec<f64> = (0..k).map(|_| StandardNormal.sample(rng)).collect();
            let Some(start) = normalised(start) else {
                continue;
            };
            let u = iterate(&t, start, settings.iterations);
            let score = value(&t, k, &u);
            if best.as_ref().is_none_or(|(s, _)| score > *s) {
                best = Some((score, u));
            }
        }
        let (_, u) = best.ok_or("no usable random start")?;
        let mut u = iterate(&t, u, settings.iterations);
        let mut lambda = value(&t, k, &u);
        if lambda < 0.0 {
            u.iter_mut().for_each(|x| *x = -*x);
            lambda = -lambda;
        }
        if !lambda.is_finite() || u.iter().any(|x| !x.is_finite()) {
            return Err("the tensor power method did not produce finite values".into());
        }
        for c in 0..k {
            for b in 0..k {
                for a in 0..k {
                    t[a + k * (b + k * c)] -= lambda * u[a] * u[b] * u[c];
                }
            }
        }
        pairs.push(Eigenpair {
            value: lambda,
            vector: u,
        });
    }
    Ok(pairs)
}

/// The paper's error metric (Imtiaz & Sarwate §VI-B, from their ref. \[21\]):
/// q^comp = (1/K) Σ_k min_{k'} ‖â_k − a_{k'}‖₂, estimated components `estimated` against the
/// true `truth` (each a vector of length D). Lower is better; 0 is perfect recovery.
pub fn q_comp(estimated: &[Vec<f64>], truth: &[Vec<f64>]) -> f64 {
    if estimated.is_empty() {
        return f64::NAN;
    }
    let dist = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum::<f64>().sqrt();
    estimated
        .iter()
        .map(|a| truth.iter().map(|b| dist(a, b)).fold(f64::INFINITY, f64::min))
        .sum::<f64>()
        / estimated.len() as f64
}
