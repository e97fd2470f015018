//! Generic job option `clip` (adaptive clipping, docs/design/privacy.md §2 and docs/design/algorithms.md "Decisions
//! after the first implementation"): spend a share of the job's ρ on a DP quantile c of the row
//! norms, clip every row at c ≤ β, and run the algorithm calibrated to c instead of β.
//!
//! Why: every algorithm's noise scales with β² (or αβ), and the declared β is the largest row
//! norm, while most rows are much shorter (2–7× on the scikit-learn datasets). Clipping at a
//! quantile trades a bias on the longest rows for a noise cut of (β/c)².
//!
//! **The quantile: a noisy binary search with the Gaussian mechanism.** The search runs on a
//! log-spaced grid of [β·2^−`LOG2_RANGE`, β]. Each of the T steps releases
//!
//!   S(c) = Σ_i (1[‖x_i‖₂ ≤ t(c)] − q) + N(0, σ²),   t(c) = c·(1 − margin(d)),
//!
//! (t(c) is the target of the clip at c, [`crate::linalg::clip::clip_l2`]: the indicator says
//! that the clip at c leaves x_i as it is) and moves down (c is above the q-quantile) if the
//! noisy S(c) > 0, up otherwise. Sensitivity
//! of S(c): under `replace_one` one indicator changes, |ΔS| ≤ 1; under `add_remove` one term
//! 1[·] − q ∈ {−q, 1 − q} appears or disappears, |ΔS| ≤ max(q, 1 − q). So each step is a
//! Gaussian mechanism with ρ_step = Δ²/(2σ²) (Bun & Steinke 2016, Prop. 1.6), and the T
//! adaptively chosen steps compose to ρ_q = T·Δ²/(2σ²), i.e. σ = Δ·sqrt(T/(2ρ_q)). The search
//! needs no n (so it works under `add_remove`), and because it is Gaussian, a dataset with an
//! (ε, δ) budget keeps its tight exact-Gaussian accounting.
//!
//! The released c is the upper end of the final bracket: a post-processing of the T releases.
//!
//! **How many records the clip shortens, bounded by the search.** If c < β, the bracket's upper
//! end moved down to c at some step, whose noisy S(c) was > 0: #{‖x_i‖ ≤ t(c)} − q·n + N > 0,
//! so the clip at c shortens fewer than (1 − q)·n + N records, with N that step's noise (and
//! lattice rounding: the count is released on `crate::privacy::lattice`, grid h ≤ σ·2⁻³⁰, sd σ
//! widened by the relative h/Δ ≤ σ/(2³⁰·Δ), Δ ≥ 1/2; the bound below only matters when 40σ < n,
//! where that widening is below n/2³⁰/20, 0.5 % even at n = 10⁸). N exceeds
//! [`TAIL_NOISE_SDS`]·σ with probability about Q(40) < 10⁻³⁴⁹ per step (Q(39) < 10⁻³³² covers
//! the widening and rounding with room to spare), so with n public,
//! m = ⌈(1 − q)·n + 40σ⌉ ([`ClipConfig::tail_bound`]) bounds the shortened records except with
//! probability < T·10⁻³⁴⁹ < 10⁻³⁰⁰. A job then derives the clipped statistics from the kept
//! XᵀX, Xᵀ1 with a correction over m records (`linalg::clip_tail`): its work is a function of
//! public n, q, σ, and the pages it reads are every page of the records, whatever the data
//! (`linalg::gather`); beyond m (never in practice) it makes a full pass, which is the only way the
//! data can reach its duration (docs/design/privacy.md §3.1).
//!
//! **The algorithm after clipping.** Given the released c, x ↦ x·min(1, c/‖x‖₂) is a fixed
//! row-by-row map, so neighbouring datasets map to neighbouring datasets under the same
//! relation, now with ‖x‖₂ ≤ c and ‖x‖₁ ≤ min(α, √d·c) (‖x‖₁ ≤ √d‖x‖₂, and scaling down keeps
//! the L1 clip). The algorithm is configured again at run time from the stored parameters with
//! these bounds and the same ρ; its cost is a function of its parameters and ρ only, which the
//! run checks, and it composes sequentially with ρ_q. The data stay stored clipped at β.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ConfigError, NoiseScale, RunEnv, RunError};
use crate::dataset::{DataContext, Kind, Neighbours};
use crate::linalg::clip::{clip_columns_l2, clip_l2, margin};
use crate::linalg::clip_tail::clipped_stats_by_tail;
use crate::linalg::{Matrix, RecordStats, Records, StatsAccumulator, stats_block_len};
use crate::privacy::cost::round_up_while;
use crate::privacy::{Cost, PrivacyTarget};
use rayon::prelude::*;

/// Audit label of the search's noisy counts.
pub const RELEASE: &str = "clip_quantile";
/// Steps of the binary search (T).
pub const STEPS: u32 = 8;
/// The grid spans [β·2^−8, β]: with 8 steps the bracket ends 2^(8/256) ≈ 2.2 % wide.
pub const LOG2_RANGE: f64 = 8.0;

/// Z of [`ClipConfig::tail_bound`]: noise sds above which the search's noise is never taken to be.
pub const TAIL_NOISE_SDS: f64 = 40.0;

/// `"auto"`'s share of the job's ρ for the search. See [`auto_choice`].
pub const AUTO_SHARE: f64 = 0.1;
/// `"auto"` without a public n (`add_remove`): the median.
pub const AUTO_QUANTILE: f64 = 0.5;
/// K in the tail 1 − q = K·F·√k·√d/(n·√ρ) of [`auto_tail`] (docs/utility.md "The clip rule").
pub const AUTO_TAIL_CONSTANT: f64 = 35.0;
/// Below this tail `"auto"` does not clip: the rows it would shorten are too few to matter
/// against the share of ρ the search costs.
pub const AUTO_MIN_TAIL: f64 = 0.02;
/// The lowest quantile `"auto"` clips at.
pub const AUTO_MAX_TAIL: f64 = 0.5;

/// The clip step of a job, fixed at submission and stored in its configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClipConfig {
    /// The target quantile q of the row norms.
    pub quantile: f64,
    /// Share of the job's ρ spent on the search.
    pub share: f64,
    /// ρ_q: the exact cost of the T releases.
    pub rho: f64,
    /// Sensitivity Δ of each noisy count (1, or max(q, 1 − q) under `add_remove`).
    pub sensitivity: f64,
    /// Noise sd σ of each count.
    pub noise_sd: f64,
    pub steps: u32,
    /// The declared bound β the search starts from.
    pub upper: f64,
    /// Whether `"auto"` chose this (recorded for the job).
    pub auto: bool,
    /// The algorithm's own parameters as submitted, to configure it again at c.
    pub algorithm_params: Value,
    /// The part of the job's target left to the algorithm.
    pub algorithm_target: PrivacyTarget,
}

/// What the client asked for, before calibration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ClipRequest {
    Quantile { quantile: f64, share: f64 },
    Auto,
}

fn bad(message: &str) -> ConfigError {
    ConfigError::invalid("params.clip", message)
}

// The published schema of `clip` is derived from this type (see `super::parameters`), so its
// doc comments are what clients read.
/// "none", "auto", or a quantile to clip at.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum ClipParam {
    Named(ClipMode),
    Quantile(QuantileClip),
}

/// "none": no clipping; "auto" (the default on records): a quantile chosen from the public n,
/// d, ρ and k at a tenth of the job's ρ, or no clipping where the noise is already small.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClipMode {
    None,
    Auto,
}

/// Clip at a DP quantile of the row norms.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuantileClip {
    /// The quantile q of the row norms to clip at, in (0, 1).
    #[schemars(extend("exclusiveMinimum" = 0, "exclusiveMaximum" = 1))]
    pub quantile: f64,
    /// Share f of the job's ρ spent on finding it, in (0, 1).
    #[schemars(extend("exclusiveMinimum" = 0, "exclusiveMaximum" = 1))]
    pub share: f64,
}

/// Validates the `clip` option: `{"quantile": q, "share": f}` with q, f in (0, 1), `"auto"`, or
/// `"none"`/absent. Records datasets only.
pub fn request(clip: Option<ClipParam>, ctx: &DataContext) -> Result<Option<ClipRequest>, ConfigError> {
    let request = match clip {
        None | Some(ClipParam::Named(ClipMode::None)) => return Ok(None),
        Some(ClipParam::Named(ClipMode::Auto)) => ClipRequest::Auto,
        Some(ClipParam::Quantile(QuantileClip { quantile, share })) => {
            for (key, v) in [("quantile", quantile), ("share", share)] {
                if !(v > 0.0 && v < 1.0) {
                    return Err(ConfigError::invalid(
                        format!("params.clip.{key}"),
                        "must be a number strictly between 0 and 1",
                    ));
                }
            }
            ClipRequest::Quantile { quantile, share }
        }
    };
    if ctx.kind() != Kind::Records {
        return Err(bad(
            "adaptive clipping applies to records datasets only (matrices have no rows to clip)",
        ));
    }
    Ok(Some(request))
}

/// `"auto"`: the quantile q and share f to clip at, or `None` (do not clip), from public facts
/// only: n when it is public, d, the job's ρ, k, and the algorithm's noise factor F
/// ([`super::AlgorithmInfo::clip_noise_factor`]).
///
/// Bias against noise. Calibrated to a bound c, a Gram-matrix release adds noise of spectral
/// norm ≈ 2√d·c²/√ρ, while the clipped Gram matrix keeps a trace of at least (1 − q)·n·c²
/// (every row above the q-quantile has norm c). So the noise relative to the clipped signal
/// is at most 2√d/((1 − q)·n·√ρ) whatever the data, and a tail 1 − q proportional to
/// √d/(n·√ρ) keeps it at a fixed level, while clipping only the rows in that tail keeps the
/// bias small. The rule ([`auto_tail`]): 1 − q = K·F·√k·√d/(n·√ρ), at most 1/2 (the
/// median), at least the search's own resolution (3 sd of its noisy counts over n); no clip
/// when it falls below [`AUTO_MIN_TAIL`]. √k: the k-th eigenvalue, whose gap the noise must
/// not close, is a smaller part of the trace for larger k. K was fitted on the scikit-learn
/// datasets and synthetic Gaussian-amplitude data (docs/utility.md "The clip rule").
///
/// Under `add_remove` n is private; `"auto"` then clips at the median, as it always did.
pub fn auto_choice(ctx: &DataContext, rho: f64, k: usize, noise_factor: f64) -> Option<(f64, f64)> {
    let Some(n) = ctx.n else {
        return Some((AUTO_QUANTILE, AUTO_SHARE));
    };
    auto_tail(n, ctx.d, rho, k, noise_factor).map(|tail| (1.0 - tail, AUTO_SHARE))
}

/// The tail 1 − q of [`auto_choice`] for public n, or `None` for no clipping.
pub fn auto_tail(n: usize, d: usize, rho: f64, k: usize, noise_factor: f64) -> Option<f64> {
    let n = n as f64;
    let scale = (d as f64).sqrt() / (n * rho.sqrt());
    let tail = AUTO_TAIL_CONSTANT * noise_factor * (k.max(1) as f64).sqrt() * scale;
    if !(tail >= AUTO_MIN_TAIL) {
        // Also NaN (ρ = ∞ or n = 0 are refused elsewhere): no clip is the neutral choice.
        return None;
    }
    // The search's counts have sd sqrt(T/(2·f·ρ)) (Δ = 1); a quantile closer to 1 than three
    // of them over n is not resolved.
    let count_sd = (f64::from(STEPS) / (2.0 * AUTO_SHARE * rho)).sqrt();
    Some(tail.max(3.0 * count_sd / n).min(AUTO_MAX_TAIL))
}

/// The declared row-norm bound β of a records context.
fn beta(ctx: &DataContext) -> Option<f64> {
    match ctx.neighbours {
        Neighbours::ReplaceOne { beta, .. } | Neighbours::AddRemove { beta, .. } => Some(beta),
        Neighbours::Entry { .. } => None,
    }
}

/// Calibrates the search to ρ_q = `share`·ρ_job. `algorithm_params`/`algorithm_target` are
/// what the algorithm is configured with again at c.
pub fn configure(
    quantile: f64,
    share: f64,
    auto: bool,
    ctx: &DataContext,
    rho_job: f64,
    algorithm_params: Value,
    algorithm_target: PrivacyTarget,
) -> Result<ClipConfig, ConfigError> {
    let upper = beta(ctx).ok_or_else(|| bad("adaptive clipping applies to records datasets only"))?;
    let sensitivity = match ctx.neighbours {
        Neighbours::AddRemove { .. } => quantile.max(1.0 - quantile),
        _ => 1.0,
    };
    let rho_q = share * rho_job;
    if !(rho_q > 0.0 && rho_q.is_finite()) {
        return Err(bad(
            "the clip share of the job's ρ must be a positive, finite amount",
        ));
    }
    // σ = Δ·sqrt(T/(2ρ_q)), nudged up so that T·Δ²/(2σ²) ≤ ρ_q in floating point too.
    let noise_sd = round_up_while(
        super::centering::calibrate_sd(sensitivity, rho_q / f64::from(STEPS)),
        |sd| cost_of(STEPS, sensitivity, sd).rho > rho_q,
    );
    Ok(ClipConfig {
        quantile,
        share,
        rho: cost_of(STEPS, sensitivity, noise_sd).rho,
        sensitivity,
        noise_sd,
        steps: STEPS,
        upper,
        auto,
        algorithm_params,
        algorithm_target,
    })
}

/// T Gaussian releases of sensitivity Δ and sd σ: ρ = T·Δ²/(2σ²).
pub(crate) fn cost_of(steps: u32, sensitivity: f64, sd: f64) -> Cost {
    Cost::sum((0..steps).map(|_| Cost::gaussian(sensitivity, sd)))
}

/// S(c) before noise (module doc): Σ_i (1[‖x_i‖₂ ≤ t(c)] − q) over the rows' `norms`, with
/// t(c) = c·(1 − margin(d)), the test of the clip at c. A study's site computes its rows' part.
pub fn score(norms: &[f64], c: f64, quantile: f64, d: usize) -> f64 {
    let target = c * (1.0 - margin(d));
    let below = norms.iter().filter(|&&r| r <= target).count() as f64;
    below - quantile * norms.len() as f64
}

/// The search's bracket on e ∈ [−`LOG2_RANGE`, 0], c = β·2^e: each step counts at the middle
/// and moves down when the noisy S(c) is positive, up otherwise; the released c is the upper
/// end. Shared by the central search and a study's ([`super::study_clip`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bracket {
    upper: f64,
    lo: f64,
    hi: f64,
}

impl Bracket {
    /// The whole range under the declared bound `upper` = β.
    pub fn new(upper: f64) -> Self {
        Bracket {
            upper,
            lo: -LOG2_RANGE,
            hi: 0.0,
        }
    }

    /// The c the next step counts at: the bracket's middle.
    pub fn next_c(&self) -> f64 {
        self.upper * ((self.lo + self.hi) / 2.0).exp2()
    }

    /// Moves the bracket by the step's noisy S(c).
    pub fn absorb(&mut self, noisy: f64) {
        let mid = (self.lo + self.hi) / 2.0;
        if noisy > 0.0 {
            self.hi = mid;
        } else {
            self.lo = mid;
        }
    }

    /// The released c: the bracket's upper end.
    pub fn c(&self) -> f64 {
        self.upper * self.hi.exp2()
    }
}

impl ClipConfig {
    /// The search's cost, recomputed from the stored noise.
    pub fn cost(&self) -> Cost {
        cost_of(self.steps, self.sensitivity, self.noise_sd)
    }

    pub fn noise_scale(&self) -> NoiseScale {
        NoiseScale::gaussian(
            RELEASE,
            self.noise_sd,
            self.sensitivity,
            self.steps as usize,
            format!(
                "adaptive clipping: noisy binary search for the {} quantile of the row norms (one noisy count per step)",
                self.quantile
            ),
        )
    }

    /// m: how many records the clip at the released `c` shortens at most, for a public `n`,
    /// except with probability < 10⁻³⁰⁰ (module doc); `None` when n is private, or when c = β
    /// (no step released a count at c; the clip at β changes nothing the upload has not
    /// already clipped, but the caller does not rely on that).
    pub fn tail_bound(&self, n: Option<usize>, c: f64) -> Option<usize> {
        let n = n?;
        if !(c < self.upper) {
            return None;
        }
        let m = (1.0 - self.quantile) * n as f64 + TAIL_NOISE_SDS * self.noise_sd;
        // Finite: q ∈ (0, 1) and σ is finite; a NaN would give 0 here and then a full pass.
        Some((m.ceil() as usize).min(n))
    }

    /// Runs the search on the records (d×n, one record per column) and returns c.
    pub fn search<'a>(&self, xt: impl Into<Records<'a>>, env: &mut RunEnv<'_>) -> Result<f64, RunError> {
        let xt = xt.into();
        // Kept by the process for a stored dataset, so a repeated job makes no pass for them.
        let norms = xt.norms();
        let mut bracket = Bracket::new(self.upper);
        for _ in 0..self.steps {
            let s = score(&norms, bracket.next_c(), self.quantile, xt.d());
            bracket.absorb(env.gaussian_scalar_release(RELEASE, s, self.sensitivity, self.noise_sd)?);
        }
        Ok(bracket.c())
    }
}

/// The context after clipping at c: β = c and α = min(α, √d·c).
pub fn clipped_context(ctx: &DataContext, c: f64) -> DataContext {
    DataContext {
        neighbours: clipped_neighbours(&ctx.neighbours, ctx.d, c),
        ..*ctx
    }
}

/// The relation's bounds after clipping rows of d features at c: β = c and α = min(α, √d·c).
pub fn clipped_neighbours(neighbours: &Neighbours, d: usize, c: f64) -> Neighbours {
    let root_d = (d as f64).sqrt();
    match *neighbours {
        Neighbours::ReplaceOne { alpha, .. } => Neighbours::ReplaceOne {
            beta: c,
            alpha: alpha.min(root_d * c),
        },
        Neighbours::AddRemove { alpha, .. } => Neighbours::AddRemove {
            beta: c,
            alpha: alpha.min(root_d * c),
        },
        other => other,
    }
}

/// Every record scaled to ‖x‖₂ ≤ c (the L1 bound only gets looser relative to the norm), by
/// the shared [`crate::linalg::clip`] with its rounding margin, so the exact norm of every
/// stored row is ≤ c, the β the algorithm is configured with.
pub fn clip_rows<'a>(xt: impl Into<Records<'a>>, c: f64) -> Matrix {
    let mut out = xt.into().to_matrix();
    clip_columns_l2(&mut out, c);
    out
}

/// The statistics of `xt` clipped at c by one pass that copies and clips one segment of records
/// at a time ([`stats_block_len`] of them, into one buffer, on every core) and adds it to the
/// accumulator: the same work whatever c and the data, and no O(nd) copy.
fn clipped_stats_by_segments(xt: Records<'_>, c: f64) -> RecordStats {
    let (d, n) = (xt.d(), xt.n());
    let segment = stats_block_len(d).min(n);
    let mut acc = StatsAccumulator::new(d);
    let mut buffer = vec![0.0; d * segment];
    let mut start = 0;
    while start < n {
        let take = segment.min(n - start);
        let block = xt.block(start, take);
        let part = &mut buffer[..d * take];
        if d > 0 {
            part.par_chunks_exact_mut(d)
                .zip(block.as_slice().par_chunks_exact(d))
                .for_each(|(to, from)| {
                    to.copy_from_slice(from);
                    clip_l2(to, c);
                });
        }
        block.release();
        acc.add(Records::new(part, d, take));
        start += take;
    }
    acc.finish()
}

/// Records clipped at c, as a job's algorithm reads them.
///
/// When `xt` carries its kept statistics and the clip's bound m on the records it shortens is
/// known (n public), the clipped statistics are the kept ones corrected on m records
/// (`linalg::clip_tail`). Else, when `xt` carries its kept blocks (`linalg::clip_blocks`), the clipped records' statistics
/// (XᵀX, Xᵀ1, n) are derived from them instead of a pass over all n records: B − 1 kept blocks
/// added and one block of L = ⌈n/B⌉ records clipped directly, whatever c and the data are, so
/// the time a job takes does not depend on how many records the clip shortens (a private
/// count). Up to rounding they are the clipped records' own statistics, so the algorithm's
/// calibration to c is unchanged.
///
/// An algorithm whose catalog entry says the statistics suffice
/// ([`super::AlgorithmInfo::stats_suffice`]) gets those statistics (or, without blocks, those
/// of one pass that clips a segment at a time) and records whose values are all zero, never
/// written, so the allocator's fresh zero pages are never touched: no O(nd) copy. Any other
/// algorithm gets a clipped copy of the records ([`clip_rows`]), with the derived statistics
/// when blocks are kept. Either way nothing in the view is an unclipped value: a kernel that
/// read the zero records by mistake would read records of norm 0 ≤ c (a wrong answer, which the
/// catalog's test catches, not a leak). Which is made depends on the algorithm, on m and on
/// whether statistics and blocks are kept, never on the data, except that more than m shortened
/// records (probability < 10⁻³⁰⁰, module doc) turn the correction into the full pass.
#[derive(Debug)]
pub struct ClippedRecords {
    values: Vec<f64>,
    d: usize,
    n: usize,
    stats: Option<RecordStats>,
    copied: bool,
}

impl ClippedRecords {
    /// `xt` clipped at c; `stats_suffice`: the algorithm reads only the statistics when they
    /// are attached; `tail`: m of [`ClipConfig::tail_bound`], a public bound on the records the
    /// clip shortens.
    pub fn new<'a>(xt: impl Into<Records<'a>>, c: f64, stats_suffice: bool, tail: Option<usize>) -> Self {
        let xt = xt.into();
        let (d, n) = (xt.d(), xt.n());
        // The correction on the tail when the records' statistics are kept and it is less work
        // than the kept blocks' one direct block: a choice made on public m, n and d only.
        let tail = match (tail, xt.stats(), xt.clip_blocks()) {
            (Some(m), Some(raw), blocks) if blocks.is_none_or(|b| m <= b.block_len) => Some((m, raw)),
            _ => None,
        };
        let stats = tail
            .and_then(|(m, raw)| clipped_stats_by_tail(xt, raw, &xt.norms(), c, m))
            .or_else(|| xt.clip_blocks().map(|blocks| blocks.clipped_stats(xt, c).0))
            .filter(|stats| stats.fits(d, n));
        // Without kept blocks, an algorithm that reads only the statistics gets them from one
        // pass that clips a segment at a time, not from a clipped copy of all n records.
        let stats = match (stats, stats_suffice) {
            (None, true) => Some(clipped_stats_by_segments(xt, c)),
            (stats, _) => stats,
        };
        let copied = !stats_suffice;
        let values = if copied {
            clip_rows(xt, c).data.into()
        } else {
            // Zero pages: the allocator maps them on first touch, and nothing touches them.
            vec![0.0; d * n]
        };
        ClippedRecords {
            values,
            d,
            n,
            stats,
            copied,
        }
    }

    /// The clipped records, with their statistics when they were derived.
    pub fn records(&self) -> Records<'_> {
        let records = Records::new(&self.values, self.d, self.n);
        match &self.stats {
            Some(stats) => records.with_stats(stats),
            None => records,
        }
    }

    /// Whether the clipped records were copied (false: only their statistics are real).
    pub fn copied(&self) -> bool {
        self.copied
    }

    /// The clipped records' statistics, when derived: from kept blocks, or by the segmented
    /// pass for an algorithm that reads only the statistics.
    pub fn stats(&self) -> Option<&RecordStats> {
        self.stats.as_ref()
    }
}

#[cfg(test)]
#[path = "clipping_tests.rs"]
mod tests;
