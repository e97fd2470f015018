//! Exact sampling from the Bingham distribution on the unit sphere, by rejection from an angular
//! central Gaussian (ACG) envelope (Kent, Ganeiber & Mardia 2018, "A new unified approach for
//! the simulation of a wide class of directional distributions", JCGS 27(2):291–301; the
//! envelope inequality is their (3.4) and the equation for b their (3.6) in the numbering of the
//! author manuscript, White Rose eprint 123206, as OpenDP cites them; the paper is not in
//! ../shared/papers, so both are derived again below). It is the sampler Amin et al. 2019 use
//! for their exponential mechanism (their Alg. 2).
//!
//! Target, in the eigen-coordinates of its parameter matrix: on S^{q−1} ⊂ R^q,
//!
//!   f*(y) = exp(−Σ_j a_j y_j²),  a_j ≥ 0, min_j a_j = 0
//!
//! (adding a constant to every a_j multiplies f* by a constant on the sphere, so any finite a
//! is shifted to min 0). The exponential mechanism with score yᵀCy and concentration t is this
//! with a_j = t·(μ_max − μ_j) for the eigenvalues μ_j of C ([`Bingham::exponential_mechanism`]).
//!
//! Envelope. For b ∈ (0, q] let Ω = I + 2A/b (here diagonal: 1 + 2a_j/b) and
//! g*(y) = (yᵀΩy)^{−q/2}, the unnormalised density of the ACG, i.e. of z/‖z‖ for
//! z ~ N(0, Ω⁻¹). On the sphere yᵀΩy = 1 + 2s/b with s = yᵀAy ≥ 0, so
//!
//!   ln f*(y) − ln g*(y) = −s + (q/2)·ln(1 + 2s/b) ≤ −(q − b)/2 + (q/2)·ln(q/b) = ln M(b),
//!
//! the maximum over s ≥ 0 being at 1 + 2s/b = q/b (Kent et al. eq. 3.4). Hence f* ≤ M(b)·g*
//! with M(b) = exp(−(q − b)/2)·(q/b)^{q/2} for every b ∈ (0, q]: the sampler is exact whatever
//! b is, and b only sets the efficiency. A proposal y is accepted with probability
//! f*(y)/(M(b)·g*(y)) = exp(−s)·(1 + 2s/b)^{q/2}/M(b), evaluated in logarithms.
//!
//! Choice of b. The expected number of proposals per draw is M(b)·∫g*/∫f*, and
//! ∫g* ∝ det(Ω)^{−1/2} = Π_j (1 + 2a_j/b)^{−1/2}. Setting the derivative of its logarithm to 0
//! gives Kent et al. eq. 3.6,
//!
//!   Σ_j 1/(b + 2a_j) = 1,
//!
//! whose left side decreases in b, is ≥ 1 at b = 1 (the term of a_j = 0 is 1/b) and ≤ 1 at
//! b = q, so the root lies in [1, q]; [`solve_b`] finds it by safeguarded Newton steps.
//!
//! Efficiency. With this b the acceptance rate stays bounded away from 0 however large the a_j
//! become: in the concentrated limit (all a_j but one → ∞, b → 1) it tends to
//! Γ(q/2)·(2e)^{(q−1)/2}/(√π·q^{q/2}) ≈ sqrt(2/(e·q)) (0.66 at q = 2, 0.12 at q = 50, 0.038 at
//! q = 500; [`limit_acceptance`]), and it is larger for flatter a. Each proposal costs O(q)
//! because the work happens in the eigenbasis (Ω diagonal).
//!
//! Note on the DP libraries. diffprivlib (`mechanisms/bingham.py`) and OpenDP
//! (`extras/sklearn/_make_eigenvector`) accept with probability exp(−s)/(M·(yᵀΩy)^{q/2}),
//! dividing by (yᵀΩy)^{q/2} instead of multiplying. That samples the density
//! ∝ exp(−s)·(1 + 2s/b)^{−q}, not the Bingham distribution (so the exponential mechanism's
//! privacy proof does not cover it), and its acceptance rate collapses as the signal grows
//! (measured in docs/performance-eigen-sampling.md), which is why those implementations stall.
//! (Amin et al.'s paper is not in ../shared/papers, so whether their Alg. 2 prints the ratio
//! that way has not been checked.)
//!
//! The number of proposals is random and depends on a, so the run time is a (weak) side
//! channel, as for every rejection sampler. Unlike the Gaussian and Laplace releases of
//! [`crate::privacy::noise`] (discrete, on a grid), this sampler is floating-point and not
//! hardened against low-bit leakage.

use rand::{Rng, RngCore};
use rand_distr::{Distribution, StandardNormal};

/// Proposals tried before a draw gives up. At the worst acceptance rate the sampler can have
/// for q ≤ 10⁵ (≈ 0.0027, see [`limit_acceptance`]) the chance of reaching this is below
/// exp(−2.7·10⁴): hitting it means a bug, not bad luck.
pub const MAX_PROPOSALS: u64 = 10_000_000;

/// Newton/bisection steps allowed to [`solve_b`] (it converges in a few dozen).
const MAX_ROOT_STEPS: usize = 200;

/// The sampler's parameters are unusable, or it gave up. Messages never contain data values.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BinghamError {
    #[error("the Bingham distribution needs at least one dimension")]
    Empty,
    #[error("the Bingham parameters are not finite")]
    NonFinite,
    #[error("the concentration must be a finite number > 0")]
    Concentration,
    #[error("no proposal was accepted after {0} proposals")]
    Exhausted(u64),
}

/// One accepted draw.
#[derive(Debug, Clone, PartialEq)]
pub struct BinghamDraw {
    /// A unit vector of R^q, in the coordinates the parameters were given in.
    pub direction: Vec<f64>,
    /// Proposals drawn, the accepted one included (≥ 1).
    pub proposals: u64,
}

/// A Bingham distribution f*(y) = exp(−Σ_j a_j y_j²) on S^{q−1}, with its ACG envelope.
#[derive(Debug, Clone, PartialEq)]
pub struct Bingham {
    /// a_j − min a, all ≥ 0 with a zero among them.
    a: Vec<f64>,
    /// The envelope parameter b ∈ [1, q] (Kent et al. eq. 3.6).
    b: f64,
    /// ln M(b) (Kent et al. eq. 3.4).
    log_bound: f64,
    /// Standard deviations of the ACG's Gaussian: (1 + 2a_j/b)^{−1/2}.
    proposal_sd: Vec<f64>,
}

/// The root b ∈ [1, q] of Σ_j 1/(b + 2a_j) = 1 (Kent et al. eq. 3.6), for a_j ≥ 0 with
/// min a = 0. The left side is convex and decreasing in b, so Newton steps from b = 1 approach
/// the root from below; a bracket [lo, hi] guards them and a bisection replaces any step that
/// leaves it. Any b ∈ (0, q] gives a valid envelope, so rounding here never affects exactness.
pub fn solve_b(a: &[f64]) -> f64 {
    let q = a.len() as f64;
    let excess = |b: f64| {
        let (mut f, mut df) = (-1.0, 0.0);
        for &aj in a {
            let r = 1.0 / (b + 2.0 * aj);
            f += r;
            df -= r * r;
        }
        (f, df)
    };
    let (mut lo, mut hi) = (1.0_f64, q.max(1.0));
    let mut b = lo;
    for _ in 0..MAX_ROOT_STEPS {
        let (f, df) = excess(b);
        if f == 0.0 {
            break;
        }
        if f > 0.0 {
            lo = b;
        } else {
            hi = b;
        }
        let newton = b - f / df;
        let next = if newton > lo && newton < hi {
            newton
        } else {
            0.5 * (lo + hi)
        };
        if next == b || hi - lo <= 4.0 * f64::EPSILON * hi {
            break;
        }
        b = next;
    }
    b.clamp(1.0, q.max(1.0))
}

/// ln M(b) = −(q − b)/2 + (q/2)·ln(q/b), the envelope bound (Kent et al. eq. 3.4).
pub fn log_bound(q: usize, b: f64) -> f64 {
    let q = q as f64;
    -(q - b) / 2.0 + (q / 2.0) * (q / b).ln()
}

/// The acceptance rate in the concentrated limit (all a_j but one → ∞, b → 1):
/// Γ(q/2)·(2e)^{(q−1)/2}/(√π·q^{q/2}), from ∫f* ≈ 2·Π_{j≥2} sqrt(π/a_j) and
/// ∫g* ≈ |S^{q−1}|·Π_{j≥2} sqrt(b/(2a_j)). Evaluated with ln Γ by Stirling's series.
pub fn limit_acceptance(q: usize) -> f64 {
    let q = q as f64;
    let log = ln_gamma(q / 2.0) + (q - 1.0) / 2.0 * (2.0 * std::f64::consts::E).ln()
        - 0.5 * std::f64::consts::PI.ln()
        - q / 2.0 * q.ln();
    log.exp()
}

/// ln Γ(x) for x ≥ 0.5: shift up to x ≥ 15, then Stirling's series to x⁻⁷ (truncation
/// error below 1/(1188·15⁹) ≈ 2e-14).
fn ln_gamma(x: f64) -> f64 {
    let mut shift = 0.0;
    let mut x = x;
    while x < 15.0 {
        shift -= x.ln();
        x += 1.0;
    }
    let inv = 1.0 / x;
    let inv2 = inv * inv;
    let series = inv * (1.0 / 12.0 - inv2 * (1.0 / 360.0 - inv2 * (1.0 / 1260.0 - inv2 / 1680.0)));
    shift + (x - 0.5) * x.ln() - x + 0.5 * (2.0 * std::f64::consts::PI).ln() + series
}

impl Bingham {
    /// The Bingham distribution exp(−Σ_j a_j y_j²) for finite a (shifted to min 0).
    pub fn new(a: &[f64]) -> Result<Self, BinghamError> {
        if a.is_empty() {
            return Err(BinghamError::Empty);
        }
        if !a.iter().all(|v| v.is_finite()) {
            return Err(BinghamError::NonFinite);
        }
        let min = a.iter().copied().fold(f64::INFINITY, f64::min);
        let a: Vec<f64> = a.iter().map(|v| v - min).collect();
        if !a.iter().all(|v| v.is_finite()) {
            return Err(BinghamError::NonFinite);
        }
        let b = solve_b(&a);
        let proposal_sd = a.iter().map(|aj| 1.0 / (1.0 + 2.0 * aj / b).sqrt()).collect();
        Ok(Self {
            log_bound: log_bound(a.len(), b),
            a,
            b,
            proposal_sd,
        })
    }

    /// The exponential mechanism on S^{q−1} with score Σ_j μ_j y_j² and concentration t:
    /// density ∝ exp(t·Σ_j μ_j y_j²) = const·exp(−Σ_j t·(μ_max − μ_j)·y_j²).
    pub fn exponential_mechanism(scores: &[f64], concentration: f64) -> Result<Self, BinghamError> {
        if !(concentration > 0.0 && concentration.is_finite()) {
            return Err(BinghamError::Concentration);
        }
        if !scores.iter().all(|v| v.is_finite()) {
            return Err(BinghamError::NonFinite);
        }
        let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let a: Vec<f64> = scores.iter().map(|mu| concentration * (max - mu)).collect();
        Self::new(&a)
    }

    /// q, the dimension of the ambient space.
    pub fn dim(&self) -> usize {
        self.a.len()
    }

    /// The shifted parameters a_j (min 0).
    pub fn a(&self) -> &[f64] {
        &self.a
    }

    /// The envelope parameter b (Kent et al. eq. 3.6).
    pub fn b(&self) -> f64 {
        self.b
    }

    /// ln M(b) (Kent et al. eq. 3.4).
    pub fn log_bound(&self) -> f64 {
        self.log_bound
    }

    /// s = Σ_j a_j y_j² for a unit vector y.
    pub fn quadratic(&self, y: &[f64]) -> f64 {
        self.a.iter().zip(y).map(|(aj, yj)| aj * yj * yj).sum()
    }

    /// ln[f*(y)/(M(b)·g*(y))] = −s + (q/2)·ln(1 + 2s/b) − ln M(b) ≤ 0 for a unit vector y.
    pub fn log_acceptance(&self, y: &[f64]) -> f64 {
        let s = self.quadratic(y);
        let q = self.a.len() as f64;
        -s + 0.5 * q * (2.0 * s / self.b).ln_1p() - self.log_bound
    }

    /// One ACG proposal: z/‖z‖ with z_j ~ N(0, 1/(1 + 2a_j/b)), O(q).
    pub fn propose(&self, rng: &mut dyn RngCore) -> Vec<f64> {
        loop {
            let mut y: Vec<f64> = self
                .proposal_sd
                .iter()
                .map(|sd| {
                    let z: f64 = StandardNormal.sample(&mut *rng);
                    sd * z
                })
                .collect::<Vec<f64>>();
            let norm = y.iter().map(|v| v * v).sum::<f64>().sqrt();
            // ‖z‖ = 0 has probability 0 (the coordinate with a_j = 0 has sd 1); redraw then.
            if norm > 0.0 && norm.is_finite() {
                y.iter_mut().for_each(|v| *v /= norm);
                return y;
            }
        }
    }

    /// One exact draw: ACG proposals, each accepted with probability f*/(M·g*), until one is.
    pub fn sample(&self, rng: &mut dyn RngCore) -> Result<BinghamDraw, BinghamError> {
        for proposals in 1..=MAX_PROPOSALS {
            let y = self.propose(rng);
            // U ∈ (0, 1]; accept iff ln U ≤ ln[f*/(M·g*)].
            let u = 1.0 - rng.random::<f64>();
            if u.ln() <= self.log_acceptance(&y) {
                return Ok(BinghamDraw {
                    direction: y,
                    proposals,
                });
            }
        }
        Err(BinghamError::Exhausted(MAX_PROPOSALS))
    }
}

#[cfg(test)]
#[path = "bingham_tests.rs"]
pub(crate) mod tests;
