//! `k_dp_pca`: k-DP-PCA with adaptive noise (Düngler & Sanyal 2025, Alg. 1 with Alg. 2 as the
//! 1-PCA step, PrivRange = Alg. 6 and PrivMean = Alg. 7; docs/design/algorithms.md `k_dp_pca`).
//!
//! Alg. 1 ([`deflation`]): the records are shuffled by a uniformly random permutation and cut
//! into k parts of m = ⌊n/k⌋; round i runs Alg. 2 on part i with projector P_{i−1} and deflates,
//! P_i = P_{i−1} − u_i u_iᵀ. Each record gives A_i = x_i x_iᵀ.
//!
//! Alg. 2 (ModifiedDP-PCA) on a part: ω₀ = Pω'/‖Pω'‖, ω' uniform on the sphere; for
//! t = 1..T = ⌊m/B⌋, on the t-th batch of B records (disjoint):
//! - g_i = P·A_i·P·ω_{t−1} = P·x_i·(x_iᵀω_{t−1}) for the B records of the batch;
//! - Λ̂ = PrivRange({g_i}, (ε_R, δ_R), τ/(2T)) (line 3; [`priv_range()`]); ⊥ ends the job;
//! - ĝ = PrivMean({g_i}, Λ̂, (ε_h, δ_h) per coordinate and ρ_g, τ/(2T)) (line 4; [`priv_mean()`]);
//! - ω'_t = ω_{t−1} + η_t·P·ĝ, ω_t = P·ω'_t/‖P·ω'_t‖ (lines 5–6).
//!
//! The paper's lines 3–4 index both subroutines' inputs to the batch's first ⌊B/2⌋ records;
//! we give both the whole batch of B records, which is what the step's composition (below)
//! pays for. Logs are natural throughout.
//!
//! Privacy and cost (docs/k_dp_pca.md, "Cost"). The job gets a ρ target and the δ its
//! approximate parts may spend. For a job stated as (ε, δ) the registry gives it half of δ for
//! the histograms and ρ = the CKS 2020 conversion of ε at the other half, so that the whole job
//! (histograms' δ plus the conversion's δ) is (ε, δ)-DP (docs/design/privacy.md §2.4; 0.0284 at
//! (1, 1e-5)). [`Budget::split`] divides ρ, once, between the three kinds of release of a step,
//! each charged in the ledger's zCDP terms:
//! - PrivRange's histogram at (ε_R, δ_R): δ_R-approximate (ε_R²/2)-zCDP, ρ_R = ρ/16, δ_R = δ/2;
//! - PrivMean's d per-coordinate histograms at (ε_h, δ_h): d·ε_h²/2 = ρ_H = ρ/16, d·δ_h = δ/2;
//! - PrivMean's Gaussian: ρ_g = (Δ/σ)²/2 = 7ρ/8, charged in ρ directly (Cost::gaussian).
//!
//! A step composes them sequentially (ρ's add, δ's add: Bun & Steinke 2016 Lemma 1.7 and its
//! approximate form), so it is δ-approximate ρ-zCDP on its own batch. Batches are disjoint
//! within a round and parts are disjoint across rounds, and a step's other inputs (ω_{t−1}, P)
//! are post-processing of earlier releases, so the job costs what one step costs (parallel
//! composition over disjoint records; Alg. 1's privacy, Thm 2):
//! `Cost::approximate(ε_R, δ_R).then(d × Cost::approximate(ε_h, δ_h)).then(Cost::gaussian(Δ, σ))`
//! = (ρ_R + ρ_H + ρ_g, δ_R + d·δ_h) ≤ (ρ, δ). This is the paper's per-step (ε, δ) split of
//! Alg. 2 (ε/2 to each subroutine, Alg. 7's advanced composition over coordinates) done in zCDP,
//! which composes more tightly and keeps the Gaussian part exact.
//!
//! Why the shares: the histograms only have to clear their keep thresholds
//! 1 + 2·ln(2/δ)/ε, which fall like 1/sqrt(ρ_share) and only decide whether a step works at
//! all, while the Gaussian's sd ∝ 1/sqrt(ρ_g) is the privacy error of every step. A sixteenth to
//! each histogram family costs a factor 4 in their thresholds against the whole budget (PrivRange
//! then wants 4× larger batches, which also cut each step's Gaussian noise by 4), and keeps the
//! Gaussian's sd within sqrt(8/7) ≈ 1.07 of spending everything on it.
//!
//! Default batch size ([`default_batch_size`]): the smallest B for which PrivRange can clear
//! its threshold: ⌊B/2⌋ ≥ b_min·k' with k' = max(2·⌈k'_min⌉, 16) subsets of at least
//! b_min = 16 pair differences each, k'_min = 1 + 2·ln(1/(δ_R·τ'))/ε_R, τ' = τ/(2T), T = ⌊⌊n/k⌋/B⌋.
//! When that B leaves fewer than 4 steps per round (small budgets), the batch shrinks to
//! ⌊m/4⌋, but not below the smallest B with 6 pairs per subset ([`MIN_STEPS`],
//! [`FEWEST_PAIRS_PER_SUBSET`]). It depends only on public n, k, d, ε, δ, τ. If even B = ⌊n/k⌋
//! does not satisfy the b_min = 16 rule, the job is refused with the n or budget it would need.
//!
//! Clipping. The privacy argument does not use a norm bound on the records: PrivMean's
//! truncation bounds each step's sensitivity. The service still clips every row to ‖x‖₂ ≤ β
//! (and ‖x‖₁ ≤ α) at upload; that per-row map is fixed and public, so it neither helps nor
//! hurts the guarantee, but a β below the data's typical norm biases A_i = x_i x_iᵀ towards
//! small records. β appears here only in the default learning rate, as a public scale, so a β
//! far above the data's norms slows the default schedule (`default_learning_rate`).

pub mod deflation;
pub mod priv_mean;
pub mod priv_range;
pub mod stability_histogram;

/// PrivRange's subset count: the one stated (`params.range_subsets`), else the default for the
/// minimum the budget needs at this batch size; at least that minimum and at most ⌊B/2⌋ pairs,
/// else a 422 naming the field to change.
fn range_subsets(
    stated: Option<usize>,
    budget: &Budget,
    failure_probability: f64,
    m: usize,
    batch_size: usize,
) -> Result<usize, ConfigError> {
    let pairs = batch_size / 2;
    let minimum = subsets_needed(budget, failure_probability, m, batch_size);
    let subsets = stated.unwrap_or(default_subsets(minimum).min(pairs as f64) as usize);
    if subsets as f64 >= minimum && subsets <= pairs {
        return Ok(subsets);
    }
    let field = if stated.is_some() {
        "params.range_subsets"
    } else {
        "params.batch_size"
    };
    Err(ConfigError::invalid(
        field,
        format!(
            "PrivRange needs at least {minimum} subsets at this budget (ε_R = {:.4}, δ_R = {:e}) and at most ⌊B/2⌋ = {pairs} (got {subsets} subsets with batch_size {batch_size}); raise batch_size (to at least {}) or the budget",
            budget.range_epsilon,
            budget.range_delta,
            2.0 * minimum
        ),
    ))
}

#[cfg(test)]
#[path = "k_dp_pca_tests.rs"]
mod tests;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use self::deflation::{LearningRate, Parts, Projector, gather, gradients, public_n, records};
use self::priv_mean::{MEAN_HISTOGRAM, MEAN_NOISE, MeanCalibration, priv_mean};
use self::priv_range::{
    DEFAULT_BIN_QUARTER_OCTAVES, RANGE_HISTOGRAM, RangeCalibration, minimum_subsets, priv_range,
};
use self::stability_histogram::StabilityHistogram;
use super::calibration::{check_k, target_rho};
use super::{Algorithm, AlgorithmInfo, ConfigError, NoiseScale, Output, Run, RunError, catalog, ensure_fits};
use crate::dataset::{DataContext, Kind, Neighbours, Relation};
use crate::privacy::{Cost, PrivacyTarget};

/// K of Assumption A.4, App. G.1's value for the spiked covariance model.
pub const DEFAULT_TAIL_SCALE: f64 = 1.0;
/// a of Assumption A.4, App. G.1's value.
pub const DEFAULT_TAIL_EXPONENT: f64 = 1.0;
/// τ, the failure probability of the whole 1-PCA step (App. G.1 sets ζ = 0.01 for all methods).
pub const DEFAULT_FAILURE_PROBABILITY: f64 = 0.01;
/// Share of the job's ρ spent on PrivRange's histograms (module docs, "Why the shares").
pub const RANGE_SHARE: f64 = 0.0625;
/// Share of the job's ρ spent on PrivMean's per-coordinate histograms.
pub const MEAN_HISTOGRAM_SHARE: f64 = 0.0625;
/// b_min: the default batch gives every PrivRange subset at least this many pair differences,
/// so that its top-eigenvalue estimate is an average (log-sd ≈ 1.28/√b, ≈ 0.3 at b = 16, well
/// inside a ratio-4 bin of width ln 4 ≈ 1.39; priv_range's module docs). b = 4 is the least
/// for which the estimates agree at all; 16 is what docs/k_dp_pca.md measured to work: the
/// larger batch also lowers each step's noise (∝ 1/B) more than the fewer steps cost.
pub const MIN_PAIRS_PER_SUBSET: usize = 16;
/// The fewest steps per round the default batch aims at: when batches of
/// [`MIN_PAIRS_PER_SUBSET`] pairs per subset leave fewer, the default batch shrinks to
/// ⌊m/4⌋ (but not below [`FEWEST_PAIRS_PER_SUBSET`] pairs per subset). One step of Alg. 2 from
/// a random start is ω₁ ∝ ω₀ + η₁·ĝ, which lifts a direction of gap g over the bulk by a factor
/// of about 1 + η₁·g; with the default η₁ (a guessed gap, `default_learning_rate`) that is of
/// the order of the √d by which a random start favours the bulk, so one step leaves the later
/// directions half random; Oja's 1/t schedule compounds over steps, ∏ₜ(1 + η₁·g/t)
/// (docs/k_dp_pca.md, "Default batch size": 1 step captures 0.76–0.79 on issue 21's data at
/// (ε 10, δ 10⁻⁵), 3 steps 0.98, 4 steps 0.99).
pub const MIN_STEPS: usize = 4;
/// The fewest pair differences per PrivRange subset the default batch may use to reach
/// [`MIN_STEPS`] (log-sd of a subset's estimate ≈ 1.28/√6 ≈ 0.52, inside a ratio-4 bin of width
/// ln 4 ≈ 1.39). 4 is the least at which the estimates agree at all, and 3.5 returned ⊥ in 1 of
/// 20 runs on issue 21's data; 6 leaves a margin (docs/k_dp_pca.md, "Default batch size").
pub const FEWEST_PAIRS_PER_SUBSET: usize = 6;
/// The default number of PrivRange subsets is at least this many, so that the modal bin is
/// decided by more than a handful of estimates when the budget is large (k'_min → 1).
pub const MIN_SUBSETS: usize = 16;

/// k-DP-PCA.
#[derive(Debug, Clone, Copy, Default)]
pub struct KDpPca;

/// What the client sends.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KDpPcaParams {
    /// Target rank: number of principal components returned (1 ≤ k ≤ d).
    #[schemars(range(min = 1))]
    pub k: usize,
    /// B, records per step (2 ≤ B ≤ ⌊n/k⌋); each round takes T = ⌊⌊n/k⌋/B⌋ steps. A larger B
    /// lowers each step's noise (∝ 1/B) but leaves fewer steps. Default: the smallest B whose
    /// ⌊B/2⌋ pair differences fill PrivRange's k' = max(2·⌈k'_min⌉, 16) subsets with at least
    /// 16 pairs each (k'_min = 1 + 2·ln(1/(δ_R·τ'))/ε_R); if that leaves fewer than 4 steps,
    /// ⌊⌊n/k⌋/4⌋, but at least the smallest B with 6 pairs per subset.
    #[serde(default)]
    #[schemars(range(min = 2))]
    pub batch_size: Option<usize>,
    /// {"offset": o, "slope": s}: η_t = 1/(o + s·t) at step t of each round (both ≥ 0,
    /// o + s > 0). App. G.1 uses o = 20σλ_i, s = (λ_i − λ_{i+1})/ln n, which needs the
    /// spectrum; the default takes σ → 0 and the public guess β²/(k + 2) for the eigengap.
    /// Default: o = 0, s = β²/((k + 2)·ln n).
    #[serde(default)]
    pub learning_rate: Option<LearningRate>,
    /// K of Assumption A.4 (sub-Weibull tail of the gradients), > 0: scales PrivMean's bin
    /// width 2^{1/4}·K·sqrt(Λ̂)·ln²(25) and truncation radius 3K·sqrt(Λ̂)·ln^a(Bd/τ'). App.
    /// G.1: 1.
    #[serde(default)]
    #[schemars(extend("default" = DEFAULT_TAIL_SCALE, "exclusiveMinimum" = 0))]
    pub tail_scale: Option<f64>,
    /// a of Assumption A.4 (a = 1 for sub-Gaussian data), > 0: the power of the log in the
    /// truncation radius. App. G.1: 1.
    #[serde(default)]
    #[schemars(extend("default" = DEFAULT_TAIL_EXPONENT, "exclusiveMinimum" = 0))]
    pub tail_exponent: Option<f64>,
    /// τ ∈ (0, 1): each PrivRange/PrivMean call gets τ/(2T); sets the truncation radius and the
    /// default number of PrivRange subsets. App. G.1: 0.01.
    #[serde(default)]
    #[schemars(extend("default" = DEFAULT_FAILURE_PROBABILITY, "exclusiveMinimum" = 0, "exclusiveMaximum" = 1))]
    pub failure_probability: Option<f64>,
    /// k', PrivRange's number of subsets (Alg. 6 line 3). At least k'_min = 1 +
    /// 2·ln(1/(δ_R·τ'))/ε_R (ε_R = sqrt(2·ρ/16), δ_R = δ/2, τ' = τ/(2T)), for which the
    /// histogram keeps a bin holding all of them with probability ≥ 1 − τ', and at most ⌊B/2⌋.
    /// Default: min(⌊B/2⌋, max(2·⌈k'_min⌉, 16)), so the estimates may split over two bins.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub range_subsets: Option<usize>,
    /// w: PrivRange's geometric bins [2^{iw/4}, 2^{(i+1)w/4}) span w quarter octaves (1..=64).
    /// The paper's w = 1 (ratio 2^{1/4}) needs subset estimates accurate to a few per cent,
    /// which batches of √n records cannot give; w = 8 (ratio 4) lets averages of ≥ 4 pair
    /// differences agree, at the price of a Λ̂ up to 4× below the spread (truncation radius up
    /// to 2× smaller).
    #[serde(default)]
    #[schemars(range(min = 1, max = 64), extend("default" = DEFAULT_BIN_QUARTER_OCTAVES))]
    pub range_bin_quarter_octaves: Option<u32>,
}

/// The privacy parameters of every step's releases (module docs, "Privacy and cost").
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// ε_R of PrivRange's histogram.
    pub range_epsilon: f64,
    /// δ_R of PrivRange's histogram.
    pub range_delta: f64,
    /// ε_h of each of PrivMean's d per-coordinate histograms.
    pub histogram_epsilon: f64,
    /// δ_h of each of PrivMean's d per-coordinate histograms.
    pub histogram_delta: f64,
    /// ρ_g of PrivMean's Gaussian mechanism (σ = Δ/sqrt(2ρ_g)).
    pub gaussian_rho: f64,
}

impl Budget {
    /// Splits a step's (ρ, δ) for d features: ρ_R = ρ/16, ρ_H = ρ/16 (ε_h = sqrt(2ρ_H/d)),
    /// ρ_g = the rest; δ_R = δ/2, δ_h = δ/(2d). Every part is then nudged down until the
    /// composed [`Budget::cost`] (computed exactly as the ledger will see it) is ≤ (ρ, δ).
    pub fn split(rho: f64, delta: f64, d: usize) -> Self {
        let dims = d.max(1) as f64;
        let rho_range = rho * RANGE_SHARE;
        let rho_histograms = rho * MEAN_HISTOGRAM_SHARE;
        let mut budget = Self {
            range_epsilon: (2.0 * rho_range).sqrt(),
            range_delta: delta / 2.0,
            histogram_epsilon: (2.0 * rho_histograms / dims).sqrt(),
            histogram_delta: delta / 2.0 / dims,
            gaussian_rho: rho - rho_range - rho_histograms,
        };
        for _ in 0..64 {
            let cost = budget.cost(d);
            let fits = cost.rho <= rho && cost.delta <= delta;
            if fits {
                break;
            }
            budget.range_epsilon = budget.range_epsilon.next_down();
            budget.histogram_epsilon = budget.histogram_epsilon.next_down();
            budget.gaussian_rho *= 1.0 - 1e-14;
            budget.range_delta = budget.range_delta.next_down();
            budget.histogram_delta *= 1.0 - 1e-14;
        }
        budget
    }

    /// 1/sqrt(2ρ_g): PrivMean's σ = multiplier × Δ.
    pub fn noise_multiplier(&self) -> f64 {
        1.0 / (2.0 * self.gaussian_rho).sqrt()
    }

    /// The cost of one step, which is the job's (module docs):
    /// approximate(ε_R, δ_R) then d × approximate(ε_h, δ_h) then gaussian(Δ, σ).
    pub fn cost(&self, d: usize) -> Cost {
        let range = Cost::approximate(self.range_epsilon, self.range_delta);
        let coordinate = Cost::approximate(self.histogram_epsilon, self.histogram_delta);
        let histograms = Cost::sum(std::iter::repeat_n(coordinate, d));
        // σ = multiplier·Δ for every Λ̂, so Δ = 1 gives the step's ratio Δ/σ.
        range
            .then(histograms)
            .then(Cost::gaussian(1.0, self.noise_multiplier()))
    }

    fn is_valid(&self) -> bool {
        let positive = |v: f64| v > 0.0 && v.is_finite();
        let probability = |v: f64| v > 0.0 && v < 1.0;
        positive(self.range_epsilon)
            && positive(self.histogram_epsilon)
            && positive(self.gaussian_rho)
            && probability(self.range_delta)
            && probability(self.histogram_delta)
    }
}

/// Every parameter fixed. The noise scales follow from the budget and the constants by
/// [`KDpPcaConfig::calibration`]; PrivMean's Gaussian also scales with each step's Λ̂.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KDpPcaConfig {
    pub k: usize,
    /// B.
    pub batch_size: usize,
    /// T = ⌊⌊n/k⌋/B⌋, the steps of each round.
    pub steps: usize,
    pub learning_rate: LearningRate,
    /// K.
    pub tail_scale: f64,
    /// a.
    pub tail_exponent: f64,
    /// τ.
    pub failure_probability: f64,
    /// k'.
    pub range_subsets: usize,
    /// w: PrivRange's bins span w quarter octaves.
    pub range_bin_quarter_octaves: u32,
    /// The privacy parameters of every step (and so of the job).
    pub budget: Budget,
}

/// The calibrated subroutines of one step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepCalibration {
    pub range: RangeCalibration,
    pub mean: MeanCalibration,
}

impl KDpPcaConfig {
    /// τ/(2T), the failure probability each subroutine call receives (Alg. 2 lines 3–4).
    pub fn call_failure_probability(&self) -> f64 {
        self.failure_probability / (2.0 * self.steps as f64)
    }

    /// PrivRange at (ε_R, δ_R) with k' subsets; PrivMean with (ε_h, δ_h) histograms, ρ_g and
    /// gradients bounded by β² (‖P·x·(xᵀω)‖ ≤ ‖x‖² ≤ β²; [`mod@priv_mean`] module docs).
    pub fn calibration(&self, ctx: &DataContext) -> StepCalibration {
        let b = &self.budget;
        StepCalibration {
            range: RangeCalibration {
                histogram: StabilityHistogram {
                    epsilon: b.range_epsilon,
                    delta: b.range_delta,
                },
                subsets: self.range_subsets,
                bin_quarter_octaves: self.range_bin_quarter_octaves,
            },
            mean: MeanCalibration {
                histogram: StabilityHistogram {
                    epsilon: b.histogram_epsilon,
                    delta: b.histogram_delta,
                },
                gaussian_rho: b.gaussian_rho,
                gradient_bound: row_bound(ctx).powi(2),
                tail_scale: self.tail_scale,
                tail_exponent: self.tail_exponent,
                failure_probability: self.call_failure_probability(),
            },
        }
    }

    /// Whether the configuration is internally consistent for d features and n records.
    fn fits(&self, d: usize, n: usize) -> bool {
        let positive = |v: f64| v > 0.0 && v.is_finite();
        let k_ok = self.k >= 1 && self.k <= d;
        let steps_ok =
            k_ok && self.batch_size >= 2 && self.steps >= 1 && self.steps == n / self.k / self.batch_size;
        let subsets_ok = self.range_subsets >= 1 && self.range_subsets <= self.batch_size / 2;
        let bins_ok = self.range_bin_quarter_octaves >= 1 && self.range_bin_quarter_octaves <= 64;
        let tails_ok = positive(self.tail_scale) && positive(self.tail_exponent);
        let tau_ok = self.failure_probability > 0.0 && self.failure_probability < 1.0;
        let lr_ok = self.learning_rate.check("learning_rate").is_ok();
        steps_ok && subsets_ok && bins_ok && self.budget.is_valid() && tails_ok && tau_ok && lr_ok
    }
}

/// k'_min = 1 + 2·ln(1/(δ_R·τ'))/ε_R for batches of B records (τ' = τ/(2T), T = ⌊m/B⌋ ≥ 1):
/// the count a bin needs to be kept with probability ≥ 1 − τ' ([`minimum_subsets`]).
fn subsets_needed(budget: &Budget, tau: f64, m: usize, batch: usize) -> f64 {
    let steps = (m / batch).max(1) as f64;
    let histogram = StabilityHistogram {
        epsilon: budget.range_epsilon,
        delta: budget.range_delta,
    };
    minimum_subsets(&histogram, tau / (2.0 * steps)).ceil()
}

/// Whether batches of B records let PrivRange clear its threshold: ⌊B/2⌋ pairs hold
/// k' = 2·k'_min subsets of at least `pairs_per_subset` pairs each.
fn range_clears(budget: &Budget, tau: f64, m: usize, batch: usize, pairs_per_subset: usize) -> bool {
    let needed = default_subsets(subsets_needed(budget, tau, m, batch)) * pairs_per_subset as f64;
    batch >= 2 && batch <= m && (batch / 2) as f64 >= needed
}

/// The default k' for a given k'_min: max(2·k'_min, [`MIN_SUBSETS`]).
fn default_subsets(minimum: f64) -> f64 {
    (2.0 * minimum).max(MIN_SUBSETS as f64)
}

/// The smallest B ∈ [2, m] with `range_clears` at `pairs_per_subset`, or `None` when even
/// B = m = ⌊n/k⌋ does not. The condition is monotone in B (a larger B has more pairs and fewer
/// steps, so a larger τ' and a smaller k'_min), so a bisection finds it.
fn smallest_clearing(budget: &Budget, tau: f64, m: usize, pairs_per_subset: usize) -> Option<usize> {
    if !range_clears(budget, tau, m, m, pairs_per_subset) {
        return None;
    }
    let (mut lo, mut hi) = (1, m);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if range_clears(budget, tau, m, mid, pairs_per_subset) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

/// The default batch size, a function of the public m = ⌊n/k⌋, ρ, δ and τ only:
/// B₁₆ = the smallest B whose subsets get [`MIN_PAIRS_PER_SUBSET`] pairs each; if that leaves
/// T = ⌊m/B₁₆⌋ ≥ [`MIN_STEPS`] steps, B₁₆; otherwise max(B₆, ⌊m/[`MIN_STEPS`]⌋), B₆ the
/// smallest B whose subsets get [`FEWEST_PAIRS_PER_SUBSET`] pairs. `None` (a refusal) when
/// even B₁₆ = m does not clear: the admitted budgets and n are those of the B₁₆ rule.
pub fn default_batch_size(budget: &Budget, tau: f64, m: usize) -> Option<usize> {
    let roomy = smallest_clearing(budget, tau, m, MIN_PAIRS_PER_SUBSET)?;
    if m / roomy >= MIN_STEPS {
        return Some(roomy);
    }
    let tight = smallest_clearing(budget, tau, m, FEWEST_PAIRS_PER_SUBSET).unwrap_or(roomy);
    Some(tight.max(m / MIN_STEPS).min(roomy))
}

/// The refusal when no batch size works: what n, or what budget, would.
fn infeasible(budget: &Budget, rho: f64, delta: f64, tau: f64, k: usize, n: usize) -> ConfigError {
    let m = n / k;
    // At T = 1 (B = m), k'_min is the smallest it gets.
    let needed = subsets_needed(budget, tau, m, m);
    // In f64: an extreme τ or budget can make these exceed usize (they are only reported).
    let records = 2.0 * MIN_PAIRS_PER_SUBSET as f64 * default_subsets(needed);
    // The most subsets B = m can hold, and the largest k'_min that leaves room for 2·k'_min.
    let most = m / 2 / MIN_PAIRS_PER_SUBSET;
    let capacity = (most / 2) as f64;
    let budget_hint = if most >= MIN_SUBSETS && capacity >= 2.0 {
        let ln = -budget.range_delta.ln() - (tau / 2.0).ln();
        let range_epsilon = 2.0 * ln / (capacity - 1.0);
        // Rounded up (and nudged past the split's rounding), so the hint is enough.
        let rho_needed =
            (range_epsilon * range_epsilon / 2.0 / RANGE_SHARE * (1.0 + 1e-9) * 1e4).ceil() / 1e4;
        format!(
            ", or a budget of at least ρ = {rho_needed} (ε = {:.4})",
            ((2.0 * rho_needed).sqrt() * 1e4).ceil() / 1e4
        )
    } else {
        String::new()
    };
    ConfigError::invalid(
        "privacy",
        format!(
            "k_dp_pca cannot run at this budget (ρ = {rho:.4}, δ = {delta:e}) on n = {} records: PrivRange needs {needed} agreeing subsets (ε_R = {:.4}, δ_R = {:e}), hence batches of at least {records:.0} records, more than ⌊n/k⌋ = {m}; it needs at least n = {:.0} records{budget_hint}",
            n,
            budget.range_epsilon,
            budget.range_delta,
            records * k as f64
        ),
    )
}

/// The job's δ, required by the (ε, δ) subroutines.
fn target_delta(target: &PrivacyTarget) -> Result<f64, ConfigError> {
    match target.delta {
        Some(delta) if delta > 0.0 && delta < 1.0 => Ok(delta),
        Some(_) => Err(ConfigError::invalid(
            "privacy.delta",
            "must lie in the open interval (0, 1)",
        )),
        None => Err(ConfigError::invalid(
            "privacy.delta",
            "k_dp_pca is (ε, δ)-DP (stability histograms): the job's privacy target must include delta",
        )),
    }
}

/// The default learning rate: offset 0, slope β²/((k + 2)·ln n), i.e. η_t = (k + 2)·ln n/(β²·t).
/// This is App. G.1's η_t = 1/(20σλ_i + (λ_i − λ_{i+1})·t/ln n) in the low-noise limit σ → 0
/// (where k-DP-PCA is meant to shine) with the unknown eigengap, which would leak if read from
/// the data, replaced by a public guess: clipped rows have tr Σ ≤ β², so k spikes with clear
/// gaps above a small bulk have gaps of order β²/(k + 2). A guess too large by a factor of a few
/// only slows convergence (docs/k_dp_pca.md measures the factor); users who know the gap should
/// pass App. G.1's schedule.
fn default_learning_rate(ctx: &DataContext, n: usize, k: usize) -> LearningRate {
    let beta = row_bound(ctx);
    LearningRate {
        offset: 0.0,
        slope: beta * beta / ((k + 2) as f64 * (n.max(3) as f64).ln()),
    }
}

/// β, the records' L2 row bound (u for a matrix context, which k-DP-PCA refuses).
fn row_bound(ctx: &DataContext) -> f64 {
    match ctx.neighbours {
        Neighbours::ReplaceOne { beta, .. } | Neighbours::AddRemove { beta, .. } => beta,
        Neighbours::Entry { u } => u,
    }
}

fn positive_param(value: Option<f64>, default: f64, field: &str) -> Result<f64, ConfigError> {
    let v = value.unwrap_or(default);
    if v > 0.0 && v.is_finite() {
        Ok(v)
    } else {
        Err(ConfigError::invalid(field, "must be a finite number > 0"))
    }
}

impl Algorithm for KDpPca {
    const INFO: &'static AlgorithmInfo = &catalog::K_DP_PCA;
    type Params = KDpPcaParams;
    type Config = KDpPcaConfig;

    fn configure(
        &self,
        params: KDpPcaParams,
        ctx: &DataContext,
        target: &PrivacyTarget,
    ) -> Result<KDpPcaConfig, ConfigError> {
        let n = public_n(Self::INFO.name, ctx)?;
        let rho = target_rho(target)?;
        let delta = target_delta(target)?;
        let d = ctx.d;
        let k = params.k;
        check_k(k, d)?;
        let m = n / k;
        let learning_rate = params
            .learning_rate
            .unwrap_or_else(|| default_learning_rate(ctx, n, k))
            .check("params.learning_rate")?;
        let tail_scale = positive_param(params.tail_scale, DEFAULT_TAIL_SCALE, "params.tail_scale")?;
        let tail_exponent = positive_param(
            params.tail_exponent,
            DEFAULT_TAIL_EXPONENT,
            "params.tail_exponent",
        )?;
        let failure_probability = params.failure_probability.unwrap_or(DEFAULT_FAILURE_PROBABILITY);
        if !(failure_probability > 0.0 && failure_probability < 1.0) {
            return Err(ConfigError::invalid(
                "params.failure_probability",
                "must lie in the open interval (0, 1)",
            ));
        }
        let bins = params
            .range_bin_quarter_octaves
            .unwrap_or(DEFAULT_BIN_QUARTER_OCTAVES);
        if !(1..=64).contains(&bins) {
            return Err(ConfigError::invalid(
                "params.range_bin_quarter_octaves",
                "must be an integer in 1..=64",
            ));
        }
        let budget = Budget::split(rho, delta, d);
        if !budget.is_valid() {
            return Err(ConfigError::invalid("rho", "must be a finite number > 0"));
        }
        let batch_size = match params.batch_size {
            Some(b) if b >= 2 && b <= m => b,
            Some(b) => {
                return Err(ConfigError::invalid(
                    "params.batch_size",
                    format!("must satisfy 2 ≤ batch_size ≤ ⌊n/k⌋ = {m} (got {b})"),
                ));
            }
            None => default_batch_size(&budget, failure_probability, m)
                .ok_or_else(|| infeasible(&budget, rho, delta, failure_probability, k, n))?,
        };
        let subsets = range_subsets(params.range_subsets, &budget, failure_probability, m, batch_size)?;
        Ok(KDpPcaConfig {
            k,
            batch_size,
            steps: m / batch_size,
            learning_rate,
            tail_scale,
            tail_exponent,
            failure_probability,
            range_subsets: subsets,
            range_bin_quarter_octaves: bins,
            budget,
        })
    }

    /// One step's cost, which is the job's (module docs, "Privacy and cost"):
    /// approximate(ε_R, δ_R) then d × approximate(ε_h, δ_h) then gaussian(Δ, σ).
    fn cost(&self, config: &KDpPcaConfig, ctx: &DataContext) -> Cost {
        config.budget.cost(ctx.d)
    }

    fn noise_scales(&self, config: &KDpPcaConfig, ctx: &DataContext) -> Vec<NoiseScale> {
        let cal = config.calibration(ctx);
        let steps = config.k * config.steps;
        vec![
            NoiseScale {
                release: RANGE_HISTOGRAM.into(),
                distribution: "laplace".into(),
                multiplier: 1.0 / cal.range.histogram.epsilon,
                sensitivity: Some(2.0),
                count: steps,
                description: format!(
                    "PrivRange: Laplace noise of scale {:.6e} on each non-empty bin of a histogram of {} top-eigenvalue estimates (bins of ratio 2^({}/4)); bins kept above {:.4}.",
                    cal.range.histogram.scale(),
                    config.range_subsets,
                    config.range_bin_quarter_octaves,
                    cal.range.histogram.threshold()
                ),
            },
            NoiseScale {
                release: MEAN_HISTOGRAM.into(),
                distribution: "laplace".into(),
                multiplier: 1.0 / cal.mean.histogram.epsilon,
                sensitivity: Some(2.0),
                count: steps * ctx.d,
                description: format!(
                    "PrivMean: one histogram per coordinate, Laplace noise of scale {:.6e} on each non-empty bin; bins kept above {:.4} (else the coordinate is centred at 0).",
                    cal.mean.histogram.scale(),
                    cal.mean.histogram.threshold()
                ),
            },
            NoiseScale {
                release: MEAN_NOISE.into(),
                distribution: "gaussian".into(),
                multiplier: cal.mean.noise_multiplier(),
                sensitivity: None,
                count: steps,
                description: format!(
                    "PrivMean: Gaussian noise on the truncated batch mean, sd = multiplier × 6K·sqrt(Λ̂)·ln^a(Bd/τ')·sqrt(d)/B = {:.6e} × sqrt(Λ̂), Λ̂ the step's private PrivRange estimate.",
                    cal.mean.noise_sd(1.0, config.batch_size, ctx.d)
                ),
            },
        ]
    }

    /// Alg. 1 with Alg. 2. The permutation and each round's ω₀ come from `env.rng()`; all
    /// noise goes through `env` under [`RANGE_HISTOGRAM`], [`MEAN_HISTOGRAM`] and [`MEAN_NOISE`].
    fn run(&self, config: &KDpPcaConfig, run: Run<'_, '_>) -> Result<Output, RunError> {
        let Run { input, ctx, env } = run;
        let d = ctx.d;
        let n = ctx.n.unwrap_or(0);
        ensure_fits(
            ctx.kind() == Kind::Records && ctx.relation() == Relation::ReplaceOne && config.fits(d, n),
        )?;
        let xt = records(input, ctx, n)?;
        let (k, batch, steps) = (config.k, config.batch_size, config.steps);
        let cal = config.calibration(ctx);
        let parts = Parts::shuffle(env.rng(), n, k);
        let total = u32::try_from(k * steps).unwrap_or(u32::MAX);
        let mut projector = Projector::identity(d);
        for round in 0..k {
            let part = parts.part(round);
            let mut omega = projector.start(env.rng())?;
            for t in 1..=steps {
                let g = gradients(&gather(xt, &part[(t - 1) * batch..t * batch]), &omega, &projector);
                let Some(lambda) = priv_range(&g, &cal.range, env)? else {
                    return Err(RunError::Failed(format!(
                        "PrivRange returned ⊥ (no stable range) in round {} at step {t} of {steps}: its {} subset estimates did not agree on a bin; the charge stands. A larger batch_size (more pairs per subset) or budget helps.",
                        round + 1,
                        config.range_subsets
                    )));
                };
                let mut step = priv_mean(&g, lambda, &cal.mean, env)?;
                projector.apply_vector(&mut step);
                omega = projector.normalize(omega + step * config.learning_rate.at(t))?;
                let done = u32::try_from(round * steps + t).unwrap_or(u32::MAX);
                env.progress(done, total)?;
            }
            projector.push(&omega);
        }
        Ok(Output {
            basis: projector.into_basis(),
            eigenvalues: None,
        })
    }
}
