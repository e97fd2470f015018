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
mod tests {
    use super::*;
    use crate::algorithms::testing::with_audited_env;
    use crate::privacy::noise::RecordingAudit;
    use crate::privacy::testing::check_laplace_scale;

    fn run_select(
        hist: StabilityHistogram,
        counts: &BTreeMap<i64, usize>,
        seed: u64,
    ) -> (Option<i64>, RecordingAudit) {
        with_audited_env(seed, |env| {
            hist.select(counts, "test_histogram", env).expect("calibrated")
        })
    }

    #[test]
    fn threshold_and_scale_are_the_karwa_vadhan_values() {
        let h = StabilityHistogram {
            epsilon: 0.5,
            delta: 0.01,
        };
        // 1 + 2·ln(200)/0.5 = 1 + 4·5.298317366548036.
        assert!((h.threshold() - 22.193269466192144).abs() < 1e-12);
        assert_eq!(h.scale(), 4.0);
        let tiny = StabilityHistogram {
            epsilon: 1.0,
            delta: 1e-320,
        };
        assert!(tiny.threshold().is_finite());
    }

    #[test]
    fn counts_non_empty_bins() {
        let c = count([3_i64, -1, 3, 7, 3, -1]);
        assert_eq!(c.into_iter().collect::<Vec<_>>(), [(-1, 2), (3, 3), (7, 1)]);
    }

    #[test]
    fn picks_the_dominant_bin_and_returns_bottom_below_threshold() {
        let h = StabilityHistogram {
            epsilon: 1.0,
            delta: 1e-3,
        };
        // Threshold 1 + 2·ln(2000) ≈ 16.2; Laplace(2) noise.
        let counts = count((0..200).map(|i| if i < 150 { 4_i64 } else { i64::from(i % 5) }));
        let (bin, audit) = run_select(h, &counts, 1);
        assert_eq!(bin, Some(4));
        assert_eq!(audit.draws.len(), 1);
        assert_eq!(audit.draws[0].values.len(), counts.len());
        let sparse = count(0..40_i64);
        assert_eq!(run_select(h, &sparse, 2).0, None);
        assert_eq!(run_select(h, &BTreeMap::new(), 3).0, None);
    }

    /// A bin holding a single value (the neighbour's extra bin) is kept with probability δ/4.
    #[test]
    fn a_lone_value_is_kept_with_probability_delta_over_four() {
        let h = StabilityHistogram {
            epsilon: 1.0,
            delta: 0.2,
        };
        let counts = count([0_i64]);
        let trials = 20_000;
        let kept = (0..trials)
            .filter(|&s| run_select(h, &counts, 100 + s).0.is_some())
            .count() as f64;
        let p = h.delta / 4.0;
        let sd = (p * (1.0 - p) / trials as f64).sqrt();
        assert!(((kept / trials as f64) - p).abs() < 5.0 * sd, "kept {kept}");
    }

    /// The audit sees Laplace(2/ε) noise; 10 % too little noise is caught.
    fn audit(factor: f64) -> Result<(), String> {
        let epsilon = 0.7;
        let h = StabilityHistogram {
            epsilon: epsilon / factor,
            delta: 1e-4,
        };
        let counts = count((0..6000_i64).flat_map(|b| [b, b]));
        let (_, audit) = run_select(h, &counts, 9);
        let values: Vec<f64> = audit.draws.iter().flat_map(|d| d.values.clone()).collect();
        assert_eq!(values.len(), 6000);
        check_laplace_scale(&values, 2.0 / epsilon)
    }

    #[test]
    fn noise_has_the_calibrated_scale() {
        assert!(audit(1.0).is_ok(), "{:?}", audit(1.0));
    }

    #[test]
    fn under_noised_histogram_fails_the_audit() {
        assert!(audit(0.9).is_err());
    }
}
