//! Exact samplers for the discrete Laplace and the discrete Gaussian distributions on Z, in
//! integer arithmetic only (Canonne, Kamath & Steinke 2020, "The Discrete Gaussian for
//! Differential Privacy", §5: Algorithm 1 for Bernoulli(exp(−γ)), Algorithm 2 for the discrete
//! Laplace, Algorithm 3 for the discrete Gaussian).
//!
//! Nothing here touches floating point: every probability is a ratio of integers and every
//! random choice is a uniform integer drawn by rejection, so the output distribution is exactly
//! the stated one (no low-bit artefacts for an attacker to read, Mironov 2012) and the output
//! sequence for a given random stream is the same on every machine.
//!
//! - Discrete Laplace with integer scale t: P[Y = y] ∝ exp(−|y|/t).
//! - Discrete Gaussian N_Z(0, σ²) with σ² = t·m (t, m positive integers): P[Y = y] ∝
//!   exp(−y²/(2σ²)). Algorithm 3 proposes Y from the discrete Laplace with scale t and accepts it
//!   with probability exp(−(|Y| − σ²/t)²/(2σ²)); writing σ² = t·m makes σ²/t = m an integer, so
//!   the exponent is B²/(2tm) with B = ||Y| − m| and stays within 128-bit integers. Any t > 0 is
//!   correct: proposal × acceptance = exp(−|y|/t)·exp(−(|y| − σ²/t)²/(2σ²)) =
//!   exp(−y²/(2σ²))·exp(−σ²/(2t²)), proportional to the target; t ≈ σ keeps the acceptance
//!   rate near 0.7.
//!
//! The running time depends only on the random stream and the public parameters (t, m), never
//! on the query the noise is added to.
//!
//! [`super::lattice`] turns a real-valued σ² or scale into (t, m) or t rounded up.

use rand::RngCore;

/// Largest t·m accepted for a discrete Gaussian, so that 2·t·m fits in a u128 with room.
const MAX_VARIANCE: u128 = 1 << 125;

/// Uniform integer in [0, n), n ≥ 1: rejection from the smallest power of two ≥ n, so it is
/// exactly uniform (no modulo bias); fewer than two words are drawn on average.
fn uniform_below(rng: &mut dyn RngCore, n: u128) -> u128 {
    if n <= 1 {
        return 0;
    }
    let bits = 128 - (n - 1).leading_zeros();
    let mask = if bits == 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    };
    loop {
        let word = if bits <= 32 {
            u128::from(rng.next_u32())
        } else if bits <= 64 {
            u128::from(rng.next_u64())
        } else {
            (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64())
        };
        let x = word & mask;
        if x < n {
            return x;
        }
    }
}

/// Bernoulli(n/d) for 0 ≤ n ≤ d, d ≥ 1.
fn bernoulli(rng: &mut dyn RngCore, n: u128, d: u128) -> bool {
    uniform_below(rng, d) < n
}

/// Bernoulli(exp(−n/d)) for n ≤ d (γ = n/d ∈ [0, 1]), CKS Algorithm 1, first part: K is the
/// index of the first failure of Bernoulli(γ/k), k = 1, 2, …, and the answer is "K is odd".
/// Bernoulli(γ/k) is drawn as Bernoulli(n/d) ∧ Bernoulli(1/k), so d·k never overflows.
fn bernoulli_exp_fraction(rng: &mut dyn RngCore, n: u128, d: u128) -> bool {
    let mut k: u128 = 1;
    loop {
        let success = bernoulli(rng, 1, k) && bernoulli(rng, n, d);
        if !success {
            return k % 2 == 1;
        }
        k += 1;
    }
}

/// Bernoulli(exp(−n/d)) for any n ≥ 0, d ≥ 1, CKS Algorithm 1: ⌊γ⌋ draws of Bernoulli(e⁻¹),
/// stopping at the first failure, then Bernoulli(exp(−(γ − ⌊γ⌋))).
pub fn bernoulli_exp(rng: &mut dyn RngCore, n: u128, d: u128) -> bool {
    debug_assert!(d >= 1);
    let whole = n / d;
    let mut i: u128 = 0;
    while i < whole {
        if !bernoulli_exp_fraction(rng, 1, 1) {
            return false;
        }
        i += 1;
    }
    bernoulli_exp_fraction(rng, n % d, d)
}

/// Bernoulli(exp(−b²/d)) for b of any size: exp(−b²/d) = exp(−b/d)^b, so it is b independent
/// Bernoulli(exp(−b/d)) draws that must all succeed (the first failure ends it). Used only when
/// b² would overflow; the probability of getting there is below exp(−2⁶⁰) for the scales used.
fn bernoulli_exp_square(rng: &mut dyn RngCore, b: u128, d: u128) -> bool {
    if let Some(square) = b.checked_mul(b) {
        return bernoulli_exp(rng, square, d);
    }
    let mut i: u128 = 0;
    while i < b {
        if !bernoulli_exp(rng, b, d) {
            return false;
        }
        i += 1;
    }
    true
}

/// The discrete Laplace distribution on Z with integer scale t ≥ 1: P[Y = y] ∝ exp(−|y|/t).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiscreteLaplace {
    scale: u128,
}

impl DiscreteLaplace {
    /// `None` when the scale is 0 or too large to sample without overflow (≥ 2⁶⁴).
    pub fn new(scale: u128) -> Option<Self> {
        let fits = scale >= 1 && scale <= u128::from(u64::MAX);
        fits.then_some(Self { scale })
    }

    pub fn scale(&self) -> u128 {
        self.scale
    }

    /// One draw, CKS Algorithm 2 with s = 1: X = U + t·V with U uniform on {0..t−1} kept with
    /// probability exp(−U/t) and V geometric (P[V ≥ v] = e^{−v}), then a random sign, rejecting
    /// the negative zero so that 0 is not counted twice.
    pub fn sample(&self, rng: &mut dyn RngCore) -> i128 {
        let t = self.scale;
        loop {
            let u = uniform_below(rng, t);
            if !bernoulli_exp(rng, u, t) {
                continue;
            }
            let mut v: u128 = 0;
            while bernoulli_exp_fraction(rng, 1, 1) {
                v += 1;
            }
            // t < 2⁶⁴ and v < 2⁶⁴ (v ≥ 2⁶⁴ has probability e^{−2⁶⁴}); saturate rather than wrap.
            let x = u.saturating_add(t.saturating_mul(v)).min(i128::MAX as u128) as i128;
            let negative = bernoulli(rng, 1, 2);
            if negative && x == 0 {
                continue;
            }
            return if negative { -x } else { x };
        }
    }
}

/// The discrete Gaussian N_Z(0, σ²) with σ² = t·m for positive integers t, m.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiscreteGaussian {
    proposal: DiscreteLaplace,
    /// σ²/t.
    m: u128,
}

impl DiscreteGaussian {
    /// σ² = t·m. `None` when t or m is 0, t ≥ 2⁶⁴, or t·m > 2¹²⁵.
    pub fn new(t: u128, m: u128) -> Option<Self> {
        let proposal = DiscreteLaplace::new(t)?;
        let fits = m >= 1 && t.checked_mul(m).is_some_and(|v| v <= MAX_VARIANCE);
        fits.then_some(Self { proposal, m })
    }

    /// The smallest convenient parameterisation with σ² ≥ `variance`: t = ⌊√variance⌋ + 1 and
    /// m = ⌈variance / t⌉, so t·m ≥ variance and t·m < variance + t (relative excess < 1/σ).
    pub fn with_variance_at_least(variance: u128) -> Option<Self> {
        let t = isqrt(variance) + 1;
        let m = variance.div_ceil(t).max(1);
        Self::new(t, m)
    }

    /// σ² = t·m, exactly.
    pub fn variance(&self) -> u128 {
        self.proposal.scale * self.m
    }

    /// (t, m).
    pub fn parameters(&self) -> (u128, u128) {
        (self.proposal.scale, self.m)
    }

    /// One draw, CKS Algorithm 3: Y ~ discrete Laplace(t), accepted with probability
    /// exp(−(|Y| − m)²/(2tm)).
    pub fn sample(&self, rng: &mut dyn RngCore) -> i128 {
        let t = self.proposal.scale;
        let denominator = 2 * t * self.m;
        loop {
            let y = self.proposal.sample(rng);
            let b = y.unsigned_abs().abs_diff(self.m);
            if bernoulli_exp_square(rng, b, denominator) {
                return y;
            }
        }
    }
}

/// ⌊√n⌋ for a u128, by Newton's method on integers (exact).
pub fn isqrt(n: u128) -> u128 {
    if n < 2 {
        return n;
    }
    // Start above the root: 2^⌈bits/2⌉.
    let bits = 128 - n.leading_zeros();
    let mut x: u128 = 1 << bits.div_ceil(2);
    loop {
        let y = (x + n / x) / 2;
        if y >= x {
            return x;
        }
        x = y;
    }
}

#[cfg(test)]
#[path = "discrete_tests.rs"]
mod tests;
