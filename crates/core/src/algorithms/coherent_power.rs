//! `coherent_power`: private power iteration under a coherence bound (Hardt & Roth 2013,
//! "Beyond worst-case analysis in private singular vector computation"), Fig. 2 (PPI) for one
//! vector, Fig. 3 (rank-k) for k vectors by deflation, Remark 4.5 for searching the bound C.
//!
//! # One vector: PPI (Fig. 2)
//! x₀ = z/‖z‖₂ with z ~ N(0, I_d): Fig. 2 line 2's Gaussian start normalised to unit length
//! (docs/design/algorithms.md, "Decisions after the first implementation"; public randomness, no privacy
//! cost; the direction is the same uniform one as Fig. 2's). For t = 1..T:
//! (a) if ‖x_{t−1}‖∞² > C/d, stop with a "coherence bound exceeded" failure (line 3a);
//! (b) g_t ~ N(0, (s·Δ_C)²)^d with Δ_C the round sensitivity below (line 3b: the paper's
//!     variance C·σ²/n is the case Δ_C = sqrt(C/n), σ = s);
//! (c) x'_t = A·x_{t−1} + g_t; (d) x_t = x'_t/‖x'_t‖₂. Output x_T.
//!
//! Sensitivity of round t, coherence form. A neighbouring change turns A into A + E, and E obeys eq. 12 of
//! Nicolas et al. (our `entry` relation) with the bound u_eff: sqrt(Σ_i ‖E_i:‖₁²) ≤ u_eff, so
//! ‖E·x‖₂² = Σ_i (E_i:·x)² ≤ Σ_i ‖E_i:‖₁²·‖x‖∞² ≤ u_eff²·‖x‖∞².
//! Step (a) has just checked ‖x_{t−1}‖∞ ≤ sqrt(C/d), and x_{t−1} is a post-processing of x₀
//! (data-independent) and of the earlier releases, so the release A·x_{t−1} + g_t is a Gaussian
//! mechanism with L2 sensitivity Δ = u_eff·sqrt(C/d) and noise sd s·Δ: (1/(2s²))-zCDP
//! (Bun & Steinke 2016 Prop. 1.6). This is the paper's calibration: its neighbours (Def. 2.1)
//! change one entry by at most 1, E = α·e_s·e_tᵀ, ‖E·x‖₂ = abs(α)·abs(x_t) ≤ ‖x‖∞ ≤ sqrt(C/n),
//! hence its per-coordinate variance C·σ²/n; Def. 2.1 is the case u = 1 of eq. 12 (one row of E
//! with L1 norm abs(α) ≤ 1). Whether step (a) stops depends only on released values, so stopping
//! (and reporting the round) is post-processing too. It is the `row_norm` bound of
//! docs/design/algorithms.md with p = 1 (max_i ‖X_i:‖₂ = ‖x‖∞), evaluated at its worst case sqrt(C/d) so the
//! noise is fixed in advance, as in the paper.
//!
//! u_eff, the eq.-12 bound of one change (docs/design/algorithms.md sensitivity table, `row_norm` column):
//! - `matrix`, relation `entry`: u;
//! - `records` `add_remove` (A = Σ_i x_i x_iᵀ): E = xxᵀ, ‖E_i:‖₁ = abs(x_i)·‖x‖₁, so
//!   sqrt(Σ_i ‖E_i:‖₁²) = ‖x‖₂·‖x‖₁ ≤ β·α;
//! - `records` `replace_one`: E = xxᵀ − yyᵀ, by the triangle inequality ≤ 2αβ.
//!
//! Sensitivity of round t, rank-one form (records only; docs/design/algorithms.md, "Decisions after the
//! first implementation"). For any unit vector v:
//! - `add_remove`: ‖xxᵀv‖₂ = ‖x‖₂·abs(xᵀv) ≤ ‖x‖₂² ≤ β²;
//! - `replace_one`: E = xxᵀ − yyᵀ with xxᵀ, yyᵀ positive semi-definite, so
//!   −yyᵀ ⪯ E ⪯ xxᵀ: every eigenvalue of E lies in [−‖y‖₂², ‖x‖₂²], hence
//!   ‖E·v‖₂ ≤ ‖E‖₂ ≤ max(‖x‖₂², ‖y‖₂²) ≤ β² (not 2β²: the two rank-one terms cannot add up
//!   along one direction beyond the larger of them).
//!
//! x_{t−1} is a unit vector (step (d), or x₀), so Δ = β² under both relations, whatever C.
//!
//! The round noise uses Δ_C = u_eff·sqrt(C/d) for matrices and min(β², u_eff·sqrt(C/d)) for
//! records: both are valid bounds, so their minimum is (docs/design/algorithms.md, `auto`). With the
//! default α = √d·β, u_eff·sqrt(C/d) ≥ β²·√C ≥ β², so records use β²; the coherence form
//! wins only for an L1 bound α well below √d·β and a small C.
//!
//! # Rank k by deflation (Fig. 3)
//! A₀ = A; for i = 1..k: v_i = PPI(A_{i−1}); σ̂_i = ‖A_{i−1}·v_i‖₂ + Lap(Δ_σ/ε'') (line 3b);
//! A_i = A_{i−1} − σ̂_i·v_i·v_iᵀ (line 3c). Output the Q factor of [v_1 … v_k] (re-orthonormalised,
//! deflation order kept, signs fixed) and σ̂_1..σ̂_k as `eigenvalues`.
//! A_{i−1} − A differs from A by released quantities only, so A_{i−1}'s neighbour is again
//! A_{i−1} + E. The scalar ‖A_{i−1}·v_i‖₂ moves by at most ‖E·v_i‖₂ (triangle inequality),
//! which is ≤ u_eff·‖v_i‖∞ ≤ u_eff (v_i is a unit vector, and x_T is not re-checked against C)
//! and, for records, ≤ β² (rank-one form above). So Δ_σ = u (matrix) or min(β², u_eff)
//! (records; β² whenever α ≥ β), and Lap(Δ_σ/ε'') is ε''-DP, i.e. (ε''²/2)-zCDP (Bun & Steinke
//! Prop. 1.4). The paper's Lap(1/ε') is the case Δ_σ = 1.
//! σ̂_i = ‖A_{i−1}v_i‖ estimates the magnitude of the eigenvalue found; for positive
//! semi-definite A (every Gram matrix) that is the eigenvalue. On a matrix whose dominant
//! eigenvalue is negative, power iteration finds it and deflation by +σ̂ does not remove it
//! (Fig. 3 as published); the output is then not the top-k by value.
//!
//! # Cost
//! Adaptive composition (Bun & Steinke 2016 Lemma 1.7) over k vectors, each with T Gaussian rounds
//! and one Laplace release: ρ = k·(T/(2s²) + ε''²/2) (docs/design/algorithms.md `coherent_power`). The
//! ledger is told which part is which: k·m·T/(2s²) is Gaussian (each round is a Gaussian
//! mechanism of noise sd s·Δ_C, Bun & Steinke Prop. 1.6) and k·ε''²/2 is pure DP (Laplace).
//! Given ρ_job: ρ_v = ρ_job/k per vector, a share η (default 0.1) of it for σ̂:
//! ε'' = sqrt(2ηρ_v), s = sqrt(T/(2(1−η)ρ_v)), nudged so the cost never exceeds ρ_job.
//!
//! # Searching C (Remark 4.5)
//! With `coherence_search: true`, each vector tries C = 1, 2, 4, …, 2^{⌈log₂C_max⌉−1} and finally
//! C_max (default d; the user's `coherence_bound` when given), in increasing order, each try a
//! fresh PPI from a fresh x₀, and keeps the first that completes T rounds. That is m =
//! ⌈log₂C_max⌉ + 1 candidates (m = 1 for C_max = 1); each of them is the PPI above with its own
//! C. Which candidates actually run depends on (released) failures, so the charge must cover all
//! of them up front: ρ = k·(m·T/(2s²) + ε''²/2), and s = sqrt(m·T/(2(1−η)ρ_v)). The paper
//! scales (ε, δ) down by log n per execution; under zCDP the noise grows by √m instead.
//!
//! # Notes
//! - Fig. 2's x₀ ~ N(0, 1/d)^d is not a unit vector, so even C = d failed step (a) at round 1
//!   with probability about d·P(abs(Z) > √d) per try (6e-3 at d = 12, 0.05 at d = 5). The unit
//!   x₀ has ‖x₀‖∞² ≤ ‖x₀‖₂² = 1 = d/d, so C = d never fails, and no iterate does either.
//!
//! # Randomness
//! Each x₀ comes from a ChaCha20 generator seeded once from `env.rng()` at the start of the run
//! (x₀ is data-independent, not privacy noise); every g_t goes through `env.gaussian_noise`
//! under [`RELEASE`] and every Laplace draw through `env.laplace_noise` under
//! [`EIGENVALUE_RELEASE`].

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rand_distr::{Distribution, StandardNormal};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::calibration::{check_opening, choose_iterations};
use super::operator::Operator;
use super::sensitivity::change_l1_bound;
use super::{
    Algorithm, AlgorithmInfo, Cancelled, ConfigError, DataInput, NoiseScale, Output, Run, RunEnv, RunError,
    catalog, ensure_fits,
};
use crate::dataset::{DataContext, Neighbours};
use crate::linalg::{Matrix, fix_signs, thin_qr_q};
use crate::privacy::{Cost, PrivacyTarget};

/// Default number of rounds T per vector. The paper's T = 4·ln σ₁(A) (Lemma 3.5) depends on the
/// data. A single vector has no oversampling, so it needs more rounds than `noisy_power`'s 4:
/// ten rounds shrink the noiseless error by (λ₂/λ₁)¹⁰ (1e-3 at a ratio of 1/2), and at a fixed
/// budget the noise sd grows only like √T (√10 ≈ 3.2 times that of a single round).
pub const DEFAULT_ITERATIONS: u32 = 10;
/// Largest accepted T (bounds the job's run time).
pub const MAX_ITERATIONS: u32 = 1000;
/// Default share η of each vector's budget spent on its singular-value estimate (docs/design/algorithms.md).
pub const DEFAULT_EIGENVALUE_SHARE: f64 = 0.1;
/// Audit label of the power-iteration releases A·x_{t−1} + g_t.
pub const RELEASE: &str = "power_iteration";
/// Audit label of the singular-value releases σ̂_i.
pub const EIGENVALUE_RELEASE: &str = "singular_value";

/// Private power iteration under a coherence bound, rank k by deflation.
#[derive(Debug, Clone, Copy, Default)]
pub struct CoherentPower;

/// What the client sends.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CoherentPowerParams {
    /// Target rank: number of principal components returned (1 ≤ k ≤ d).
    #[schemars(range(min = 1))]
    pub k: usize,
    /// Power-iteration rounds T per component (1–1000). At a fixed budget the noise grows like
    /// √T.
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_ITERATIONS), extend("default" = DEFAULT_ITERATIONS))]
    pub iterations: Option<u32>,
    /// Public upper bound C on the coherence (1 ≤ C ≤ d): every iterate must satisfy
    /// ‖x‖∞² ≤ C/d, else the job fails. The default d is the trivial bound (never fails, no
    /// noise reduction); a smaller C cuts the noise by √(C/d). With coherence_search it caps the
    /// search. Default: d.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub coherence_bound: Option<f64>,
    /// Remark 4.5: for each component try C = 1, 2, 4, … up to coherence_bound (default d) and
    /// keep the first that succeeds; all m = ⌈log₂C⌉ + 1 tries are charged up front.
    #[serde(default)]
    pub coherence_search: bool,
    /// Share of each component's budget spent on its private singular-value estimate (strictly
    /// between 0 and 1).
    #[serde(default)]
    #[schemars(extend("default" = DEFAULT_EIGENVALUE_SHARE, "exclusiveMinimum" = 0, "exclusiveMaximum" = 1))]
    pub eigenvalue_share: Option<f64>,
}

/// Every parameter fixed and the noise calibrated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoherentPowerConfig {
    pub k: usize,
    pub iterations: u32,
    /// The coherence bounds each vector tries, in order: \[C\] without the search,
    /// [1, 2, 4, …, C_max] with it.
    pub coherence_candidates: Vec<f64>,
    pub coherence_search: bool,
    pub eigenvalue_share: f64,
    /// The noise multiplier s: round noise sd = s·Δ_C ([`round_sensitivity`]).
    pub multiplier: f64,
    /// ε'' of each singular-value estimate: Laplace scale Δ_σ/ε'' ([`estimate_sensitivity`]).
    pub eigenvalue_epsilon: f64,
}

/// ρ = k·(m·T/(2s²) + ε''²/2) (docs/design/algorithms.md `coherent_power`; m = 1 without the search),
/// as the ledger's [`Cost`]: the k·m·T rounds are Gaussian (ρ = 1/(2s²) each, Bun & Steinke
/// 2016 Prop. 1.6), the k Laplace estimates pure ε''-DP (ε''²/2 each, Prop. 1.4).
fn cost_of(k: usize, candidates: usize, iterations: u32, multiplier: f64, epsilon: f64) -> Cost {
    let rounds = k as f64 * candidates as f64 * f64::from(iterations);
    let gaussian = Cost::gaussian_zcdp(rounds / (2.0 * multiplier * multiplier));
    let laplace = Cost::sum((0..k).map(|_| Cost::pure(epsilon)));
    gaussian.then(laplace)
}

/// β², the rank-one bound on ‖E·v‖ for unit v under both record relations (module docs);
/// `None` for matrices.
fn rank_one_bound(neighbours: &Neighbours) -> Option<f64> {
    match *neighbours {
        Neighbours::AddRemove { beta, .. } | Neighbours::ReplaceOne { beta, .. } => Some(beta * beta),
        Neighbours::Entry { .. } => None,
    }
}

/// Δ_C, the L2 sensitivity of one round A·x + g with coherence bound C (module docs): u·sqrt(C/d)
/// for matrices, min(β², u_eff·sqrt(C/d)) for records (β² under both relations, since
/// ‖(xxᵀ − yyᵀ)v‖ ≤ max(‖x‖², ‖y‖²)·‖v‖ for PSD rank-one terms).
pub fn round_sensitivity(neighbours: &Neighbours, c: f64, d: usize) -> f64 {
    let coherent = change_l1_bound(neighbours) * (c / d as f64).sqrt();
    rank_one_bound(neighbours).map_or(coherent, |b| b.min(coherent))
}

/// Δ_σ, the sensitivity of the scalar ‖A_{i−1}·v_i‖ (module docs): u for matrices,
/// min(β², u_eff) for records.
pub fn estimate_sensitivity(neighbours: &Neighbours) -> f64 {
    let u_eff = change_l1_bound(neighbours);
    rank_one_bound(neighbours).map_or(u_eff, |b| b.min(u_eff))
}

/// (s, ε'') from ρ_job: ρ_v = ρ/k, ε'' = sqrt(2ηρ_v), s = sqrt(m·T/(2(1−η)ρ_v)); then s nudged
/// up and ε'' down (never the other way) until `cost_of` ≤ ρ in floating point too.
fn calibrate(k: usize, candidates: usize, iterations: u32, share: f64, rho: f64) -> (f64, f64) {
    let per_vector = rho / k as f64;
    let rounds = candidates as f64 * f64::from(iterations);
    let mut epsilon = (2.0 * share * per_vector).sqrt();
    let mut multiplier = (rounds / (2.0 * (1.0 - share) * per_vector)).sqrt();
    while cost_of(k, candidates, iterations, multiplier, epsilon).rho > rho {
        multiplier = multiplier.next_up();
        epsilon = epsilon.next_down();
    }
    (multiplier, epsilon)
}

/// Remark 4.5's candidates up to `c_max` ≥ 1: 1, 2, 4, … while below `c_max`, then `c_max`.
pub fn coherence_candidates(c_max: f64) -> Vec<f64> {
    let mut out = Vec::new();
    let mut c = 1.0;
    while c < c_max {
        out.push(c);
        c *= 2.0;
    }
    out.push(c_max);
    out
}

/// Parses the bound C or C_max, 1 ≤ C ≤ d (positive form: NaN fails). Without a bound, C = d:
/// the trivial bound every unit vector meets (‖x‖∞² ≤ ‖x‖₂² = 1 = d/d), so the default never
/// fails the coherence check; it buys no noise reduction (√(C/d) = 1), which a smaller public C
/// does (issue 10: every algorithm must work at its defaults).
fn check_coherence(bound: Option<f64>, search: bool, d: usize) -> Result<Vec<f64>, ConfigError> {
    let field = "params.coherence_bound";
    let c = bound.unwrap_or(d as f64);
    if !(c >= 1.0 && c <= d as f64) {
        return Err(ConfigError::invalid(
            field,
            format!("must satisfy 1 ≤ C ≤ d = {d} (got {c})"),
        ));
    }
    Ok(if search { coherence_candidates(c) } else { vec![c] })
}

/// A ← A − Σ_j σ̂_j·v_j·v_jᵀ applied as an operator x ↦ A_i·x (d×1 columns).
struct Deflated<'a> {
    base: Operator<'a>,
    /// (σ̂_j, v_j) of the vectors found so far: released values only.
    removed: Vec<(f64, Matrix)>,
}

impl<'a> Deflated<'a> {
    /// Forms A = XᵀX once when that is cheaper than `applications` factored products
    /// ([`Operator::new`] with p = 1); checks the input against the public shape and kind.
    fn new(input: DataInput<'a>, ctx: &DataContext, applications: u64) -> Result<Self, RunError> {
        let applications = u32::try_from(applications).unwrap_or(u32::MAX);
        Ok(Self {
            base: Operator::new(input, ctx, 1, applications)?,
            removed: Vec::new(),
        })
    }

    /// A_i·x = A·x − Σ_j σ̂_j·v_j·(v_jᵀx) (Fig. 3 line 3c, without forming A_i).
    fn apply(&self, x: &Matrix) -> Matrix {
        let mut y = self.base.apply(x);
        for (sigma, v) in &self.removed {
            y -= v * (sigma * v.dot(x));
        }
        y
    }
}

/// x₀ = z/‖z‖₂ with z ~ N(0, I_d) drawn from `rng` (data-independent): a uniformly random unit
/// vector, Fig. 2 line 2's start normalised (module docs).
fn unit_start(rng: &mut ChaCha20Rng, d: usize) -> Result<Matrix, RunError> {
    let z = Matrix::from_fn(d, 1, |_, _| StandardNormal.sample(&mut *rng));
    let norm = z.norm();
    if !(norm > 0.0 && norm.is_finite()) {
        return Err(RunError::Failed("the random start vector vanished".into()));
    }
    Ok(z / norm)
}

/// How one PPI run ended.
enum Ppi {
    Done(Matrix),
    /// Step (a) stopped it before round `round`.
    CoherenceExceeded {
        round: u32,
    },
}

/// The run's progress in rounds: m·T rounds are reserved for each vector, and the rounds a
/// failed or skipped candidate did not use are counted as done when it is abandoned.
struct Progress {
    done: u64,
    total: u64,
}

impl Progress {
    /// Reports done/total, scaled into u32 when the total does not fit.
    fn report(&self, env: &mut RunEnv<'_>) -> Result<(), Cancelled> {
        let scale = self.total.div_ceil(u64::from(u32::MAX)).max(1);
        let narrow = |v: u64| u32::try_from(v / scale).unwrap_or(u32::MAX);
        env.progress(narrow(self.done), narrow(self.total))
    }
}

/// One PPI (Fig. 2) on `op` from `x0` with coherence bound `c`, round sensitivity Δ_C
/// `delta` and round noise sd `sd`.
#[allow(clippy::too_many_arguments)]
fn ppi(
    op: &Deflated<'_>,
    x0: Matrix,
    c: f64,
    delta: f64,
    sd: f64,
    iterations: u32,
    env: &mut RunEnv<'_>,
    progress: &mut Progress,
) -> Result<Ppi, RunError> {
    let d = x0.nrows();
    let limit = c / d as f64;
    let mut x = x0;
    for t in 1..=iterations {
        // (a) ‖x_{t−1}‖∞² ≤ C/d, written so that NaN fails.
        let coherent = x.amax().powi(2) <= limit;
        if !coherent {
            return Ok(Ppi::CoherenceExceeded { round: t });
        }
        // (b), (c): x'_t = A_{i−1}·x_{t−1} + g_t.
        let released = env.gaussian_release(RELEASE, op.apply(&x), delta, sd)?;
        let norm = released.norm();
        if !(norm > 0.0 && norm.is_finite()) {
            return Err(RunError::Failed(
                "numerical overflow in the power iteration".into(),
            ));
        }
        // (d) x_t = x'_t/‖x'_t‖.
        x = released / norm;
        progress.done += 1;
        progress.report(env)?;
    }
    Ok(Ppi::Done(x))
}

/// The "coherence bound exceeded" failure for vector `i` (1-based). Everything it states is a
/// function of the public configuration and of released iterates.
fn coherence_failure(i: usize, k: usize, candidates: &[f64], round: u32, d: usize) -> RunError {
    let tried = match candidates {
        [c] => format!("C = {c}"),
        _ => format!(
            "every candidate C = {}",
            candidates
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    RunError::Failed(format!(
        "coherence bound exceeded: while computing component {i} of {k}, a noisy iterate had a squared entry above C/d \
         with {tried} (d = {d}; last check failed before round {round}). The privacy charge stands. \
         Retry with a larger coherence_bound or with coherence_search: true."
    ))
}

/// Whether a stored configuration can run on a dataset of dimension `d`.
fn fits(config: &CoherentPowerConfig, d: usize) -> bool {
    let positive = |v: f64| v > 0.0 && v.is_finite();
    config.k >= 1
        && config.k <= d
        && (1..=MAX_ITERATIONS).contains(&config.iterations)
        && !config.coherence_candidates.is_empty()
        && config
            .coherence_candidates
            .iter()
            .all(|&c| c >= 1.0 && c <= d as f64)
        && positive(config.multiplier)
        && positive(config.eigenvalue_epsilon)
}

impl Algorithm for CoherentPower {
    const INFO: &'static AlgorithmInfo = &catalog::COHERENT_POWER;
    type Params = CoherentPowerParams;
    type Config = CoherentPowerConfig;

    fn configure(
        &self,
        params: CoherentPowerParams,
        ctx: &DataContext,
        target: &PrivacyTarget,
    ) -> Result<CoherentPowerConfig, ConfigError> {
        let rho = check_opening(ctx, target, params.k)?;
        let d = ctx.d;
        let k = params.k;
        let iterations = choose_iterations(params.iterations, DEFAULT_ITERATIONS, MAX_ITERATIONS, "")?;
        let share = params.eigenvalue_share.unwrap_or(DEFAULT_EIGENVALUE_SHARE);
        if !(share > 0.0 && share < 1.0) {
            return Err(ConfigError::invalid(
                "params.eigenvalue_share",
                format!("must lie strictly between 0 and 1 (got {share})"),
            ));
        }
        let candidates = check_coherence(params.coherence_bound, params.coherence_search, d)?;
        let (multiplier, epsilon) = calibrate(k, candidates.len(), iterations, share, rho);
        let calibrated = multiplier > 0.0
            && multiplier.is_finite()
            && epsilon > 0.0
            && epsilon.is_finite()
            && cost_of(k, candidates.len(), iterations, multiplier, epsilon).rho <= rho;
        if !calibrated {
            return Err(ConfigError::invalid(
                "rho",
                "is too small or too large to calibrate the noise in floating point",
            ));
        }
        Ok(CoherentPowerConfig {
            k,
            iterations,
            coherence_candidates: candidates,
            coherence_search: params.coherence_search,
            eigenvalue_share: share,
            multiplier,
            eigenvalue_epsilon: epsilon,
        })
    }

    /// ρ = k·(m·T/(2s²) + ε''²/2), independent of the data; the first term is Gaussian, the
    /// second Laplace (module docs, "Cost").
    fn cost(&self, config: &CoherentPowerConfig, _ctx: &DataContext) -> Cost {
        cost_of(
            config.k,
            config.coherence_candidates.len(),
            config.iterations,
            config.multiplier,
            config.eigenvalue_epsilon,
        )
    }

    fn noise_scales(&self, config: &CoherentPowerConfig, ctx: &DataContext) -> Vec<NoiseScale> {
        let tries = config.coherence_candidates.len() > 1;
        let mut scales: Vec<NoiseScale> = config
            .coherence_candidates
            .iter()
            .map(|&c| {
                let delta = round_sensitivity(&ctx.neighbours, c, ctx.d);
                NoiseScale {
                    release: RELEASE.into(),
                    distribution: "gaussian".into(),
                    multiplier: config.multiplier,
                    sensitivity: Some(delta),
                    count: config.k * config.iterations as usize,
                    description: format!(
                        "Gaussian noise added to A·x in each of T = {} rounds for each of {} components{}, coherence bound C = {c}: sd = multiplier × Δ_C = {:.6e} (Δ_C = u·sqrt(C/d) for matrices, min(β², u_eff·sqrt(C/d)) for records).",
                        config.iterations,
                        config.k,
                        if tries { " (at most; later candidates run only if earlier ones fail)" } else { "" },
                        config.multiplier * delta
                    ),
                }
            })
            .collect();
        let delta_sigma = estimate_sensitivity(&ctx.neighbours);
        scales.push(NoiseScale {
            release: EIGENVALUE_RELEASE.into(),
            distribution: "laplace".into(),
            multiplier: 1.0 / config.eigenvalue_epsilon,
            sensitivity: Some(delta_sigma),
            count: config.k,
            description: format!(
                "Laplace noise added to ‖A_(i−1)·v_i‖ for each of {} components: scale Δ_σ/ε'' = {:.6e} (Δ_σ = u for matrices, min(β², u_eff) for records; ε'' = {:.6e}).",
                config.k,
                delta_sigma / config.eigenvalue_epsilon,
                config.eigenvalue_epsilon
            ),
        });
        scales
    }

    /// Runs Fig. 3 with Fig. 2 (and Remark 4.5's search when configured).
    fn run(&self, config: &CoherentPowerConfig, run: Run<'_, '_>) -> Result<Output, RunError> {
        let Run { input, ctx, env } = run;
        let d = ctx.d;
        let delta_sigma = estimate_sensitivity(&ctx.neighbours);
        ensure_fits(fits(config, d) && delta_sigma > 0.0 && delta_sigma.is_finite())?;
        let (k, iterations) = (config.k, config.iterations);
        let candidates = &config.coherence_candidates;
        let rounds_per_vector = candidates.len() as u64 * u64::from(iterations);
        let mut op = Deflated::new(input, ctx, k as u64 * (rounds_per_vector + 1))?;
        let mut starts = ChaCha20Rng::from_rng(&mut env.rng());
        let laplace_scale = delta_sigma / config.eigenvalue_epsilon;
        if !(laplace_scale > 0.0 && laplace_scale.is_finite()) {
            return Err(RunError::Failed(
                "noise scale is not a finite positive number".into(),
            ));
        }
        let mut progress = Progress {
            done: 0,
            total: k as u64 * rounds_per_vector,
        };
        let mut vectors = Matrix::zeros(d, k);
        let mut estimates = Vec::with_capacity(k);
        for i in 0..k {
            let v = find_component(&op, config, ctx, &mut starts, env, &mut progress, (i, k))?;
            // σ̂_i = ‖A_{i−1}·v_i‖ + Lap(Δ_σ/ε'') (Fig. 3 line 3b).
            let sigma = env.laplace_scalar_release(
                EIGENVALUE_RELEASE,
                op.apply(&v).norm(),
                delta_sigma,
                laplace_scale,
            )?;
            if !sigma.is_finite() {
                return Err(RunError::Failed(
                    "numerical overflow in the singular-value estimate".into(),
                ));
            }
            vectors.set_column(i, &v.column(0));
            estimates.push(sigma);
            // A_i = A_{i−1} − σ̂_i·v_i·v_iᵀ (Fig. 3 line 3c).
            op.removed.push((sigma, v));
            // Skip the rounds reserved for candidates that did not need to run.
            let reserved = (i as u64 + 1) * rounds_per_vector;
            if progress.done != reserved {
                progress.done = reserved;
                progress.report(env)?;
            }
        }
        // Re-orthonormalise in deflation order: column j of Q spans v_1..v_j's new direction.
        let mut basis = thin_qr_q(&vectors);
        if !basis.iter().all(|v| v.is_finite()) {
            return Err(RunError::Failed(
                "re-orthonormalisation of the components failed".into(),
            ));
        }
        fix_signs(&mut basis);
        Ok(Output {
            basis,
            eigenvalues: Some(estimates),
        })
    }
}

/// Component `i` of `k` (0-based): the private power iteration from a fresh start at each
/// coherence candidate in turn (Fig. 3 line 3a), until one finishes without exceeding its
/// candidate; the progress of a candidate that stopped early is reported as spent.
fn find_component(
    op: &Deflated<'_>,
    config: &CoherentPowerConfig,
    ctx: &DataContext,
    starts: &mut ChaCha20Rng,
    env: &mut RunEnv<'_>,
    progress: &mut Progress,
    (i, k): (usize, usize),
) -> Result<Matrix, RunError> {
    let d = ctx.d;
    let candidates = &config.coherence_candidates;
    let mut last_round = 0;
    for &c in candidates {
        // x₀ = z/‖z‖, z ~ N(0, I_d) (Fig. 2 line 2, normalised), fresh for every try.
        let x0 = unit_start(starts, d)?;
        let delta = round_sensitivity(&ctx.neighbours, c, d);
        let sd = config.multiplier * delta;
        if !(sd > 0.0 && sd.is_finite()) {
            return Err(RunError::Failed(
                "noise scale is not a finite positive number".into(),
            ));
        }
        let before = progress.done;
        match ppi(op, x0, c, delta, sd, config.iterations, env, progress)? {
            Ppi::Done(x) => return Ok(x),
            Ppi::CoherenceExceeded { round } => {
                last_round = round;
                progress.done = before + u64::from(config.iterations);
                progress.report(env)?;
            }
        }
    }
    Err(coherence_failure(i + 1, k, candidates, last_round, d))
}

#[cfg(test)]
#[path = "coherent_power_tests.rs"]
mod tests;
