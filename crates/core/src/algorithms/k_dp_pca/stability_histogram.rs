//! The stability-based histogram learner of Karwa & Vadhan 2018 (the "DP histogram learner" of
//! Düngler & Sanyal 2025 Alg. 6 line 6 and Alg. 7 line 3, which leave it unspecified; the
//! choice is docs/design/algorithms.md's, `k_dp_pca`).
//!
//! Over a countable set of bins: add Laplace(2/ε) noise to the count of every non-empty bin,
//! keep the bins whose noisy count exceeds 1 + 2·ln(2/δ)/ε, and release the kept bin with the
//! largest noisy count, or ⊥ when none is kept. Only that bin (or ⊥) is released.
//!
//! Privacy, under `replace_one` (one value moves from one bin to another):
//! - bins non-empty in both datasets: the vector of their counts has L1 sensitivity 2 (two
//!   counts change by 1), so Laplace(2/ε) noise makes their noisy counts ε-DP;
//! - a bin non-empty in only one dataset has count 1 there, and is kept with probability
//!   P(Lap(2/ε) > 2·ln(2/δ)/ε) = ½·exp(−ln(2/δ)) = δ/4; at most two bins are in that case, so
//!   the total probability of an event the other dataset cannot produce is at most δ/2 ≤ δ.
//!
//! Hence the released bin, a post-processing of the kept noisy counts, is (ε, δ)-DP.

use std::collections::BTreeMap;

use crate::algorithms::{RunEnv, RunError};

/// A Karwa–Vadhan stability histogram with its (ε, δ).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StabilityHistogram {
    pub epsilon: f64,
    pub delta: f64,
}

impl StabilityHistogram {
    /// The Laplace scale 2/ε.
    pub fn scale(&self) -> f64 {
        2.0 / self.epsilon
    }

    /// The keep threshold 1 + 2·ln(2/δ)/ε (ln(2/δ) as ln 2 − ln δ, so a tiny δ cannot overflow).
    pub fn threshold(&self) -> f64 {
        1.0 + 2.0 * (std::f64::consts::LN_2 - self.delta.ln()) / self.epsilon
    }

    /// The released bin: among the bins of `counts` (all non-empty) whose noisy count exceeds
    /// [`StabilityHistogram::threshold`], the one with the largest noisy count; `None` is ⊥.
    /// One Laplace draw per non-empty bin, in key order, through `env` under `label`.
    pub fn select<K: Ord + Copy>(
        &self,
        counts: &BTreeMap<K, usize>,
        label: &'static str,
        env: &mut RunEnv<'_>,
    ) -> Result<Option<K>, RunError> {
        if counts.is_empty() {
            return Ok(None);
        }
        // Replacing one record moves one unit between two bins: L1 sensitivity 2. The number of
        // bins is data-dependent, so the counts go through the integer release (no per-bin
        // grid penalty; counts are exact on the grid).
        let exact: Vec<f64> = counts.values().map(|&c| c as f64).collect();
        let released = env.laplace_count_release(label, exact, 2.0, self.scale())?;
        let threshold = self.threshold();
        let mut best: Option<(K, f64)> = None;
        for (&bin, noisy) in counts.keys().zip(released) {
            let kept = noisy > threshold;
            let larger = best.is_none_or(|(_, b)| noisy > b);
            if kept && larger {
                best = Some((bin, noisy));
            }
        }
        Ok(best.map(|(bin, _)| bin))
    }
}

/// The counts of the non-empty bins among `bins`.
pub fn count<K: Ord>(bins: impl IntoIterator<Item = K>) -> BTreeMap<K, usize> {
    let mut counts = BTreeMap::new();
    for bin in bins {
        *counts.entry(bin).or_insert(0) += 1;
    }
    counts
}

#[cfg(test)]
#[path = "stability_histogram_tests.rs"]
mod tests;
