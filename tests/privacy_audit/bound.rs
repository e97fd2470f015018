//! The distinguishing test and its ε lower bound (Jagielski et al. 2020; Nasr et al. 2021).
//!
//! Each trial of a mechanism on dataset D (side 0) or its neighbour D' (side 1) yields a vector
//! of scalar statistics of the output. A test is an event S = {statistic j ≥ τ} or
//! {statistic j ≤ τ}; (ε, δ)-DP implies P[M(D') ∈ S] ≤ e^ε·P[M(D) ∈ S] + δ, and the same with the
//! sides swapped, so ε ≥ ln((P_a − δ)/P_b). The test (statistic, τ, direction, which side is
//! "a") is chosen on the first half of the trials; the second half, independent of the choice,
//! gives one-sided Clopper–Pearson bounds P_a ≥ lower, P_b ≤ upper, each failing with
//! probability ≤ α/2, so the reported ε lower bound is below the true ε with probability
//! ≥ 1 − α.

use super::stats::{cp_lower, cp_upper};

/// The probability that one audit's ε lower bound overstates the mechanism's true ε.
pub const ALPHA: f64 = 1e-5;
/// Thresholds tried per statistic while choosing the test (quantiles of the first half).
const THRESHOLDS: usize = 48;

/// The trials of one audit: `side0[i]` and `side1[i]` are the statistics of trial i on D and D'.
pub struct Samples {
    pub side0: Vec<Vec<f64>>,
    pub side1: Vec<Vec<f64>>,
}

/// One event of the form {statistic ≥ τ} or {statistic ≤ τ}; `side1_is_a`: the bound is
/// ln((P_{D'}[S] − δ)/P_D[S]) when true, ln((P_D[S] − δ)/P_{D'}[S]) when false.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Test {
    pub statistic: usize,
    pub threshold: f64,
    pub at_least: bool,
    pub side1_is_a: bool,
}

/// What the held-out half says about the chosen test.
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    pub test: Test,
    /// ε lower bound at the audit δ (0 when nothing is shown; never negative).
    pub epsilon: f64,
    /// Events counted on the held-out half: on side a, on side b, out of `trials` each.
    pub hits_a: u64,
    pub hits_b: u64,
    pub trials: u64,
    /// The δ of the bound.
    pub delta: f64,
}

impl Test {
    fn contains(&self, value: f64) -> bool {
        // NaN (a statistic the output does not have) is in neither kind of event.
        if self.at_least {
            value >= self.threshold
        } else {
            value <= self.threshold
        }
    }

    fn count(&self, rows: &[Vec<f64>]) -> u64 {
        rows.iter().filter(|r| self.contains(r[self.statistic])).count() as u64
    }
}

/// ln((lower(a) − δ)/upper(b)), at confidence α/2 per side; 0 when that is not positive.
pub fn epsilon_from_counts(hits_a: u64, hits_b: u64, trials: u64, delta: f64, alpha: f64) -> f64 {
    let p_a = cp_lower(hits_a, trials, alpha / 2.0) - delta;
    let p_b = cp_upper(hits_b, trials, alpha / 2.0);
    if p_a > 0.0 && p_b > 0.0 {
        (p_a / p_b).ln().max(0.0)
    } else {
        0.0
    }
}

/// The candidate thresholds of statistic j: quantiles of the pooled, finite values.
fn thresholds(a: &[Vec<f64>], b: &[Vec<f64>], j: usize) -> Vec<f64> {
    let mut values: Vec<f64> = a
        .iter()
        .chain(b)
        .map(|r| r[j])
        .filter(|v| v.is_finite())
        .collect();
    values.sort_by(f64::total_cmp);
    values.dedup();
    if values.len() <= THRESHOLDS {
        return values;
    }
    let mut picked: Vec<f64> = (0..THRESHOLDS)
        .map(|i| values[i * (values.len() - 1) / (THRESHOLDS - 1)])
        .collect();
    picked.dedup();
    picked
}

/// Evaluates `test`, fixed before the trials were drawn, on all of `samples`: with no selection
/// half, every trial goes into the bound. Valid for any mechanism at confidence 1 − α; powerful
/// when the test is the likelihood-ratio test of the mechanism's known output distribution.
pub fn audit_fixed(samples: &Samples, test: Test, delta: f64) -> Bound {
    let (h0, h1) = (test.count(&samples.side0), test.count(&samples.side1));
    let (hits_a, hits_b) = if test.side1_is_a { (h1, h0) } else { (h0, h1) };
    let n = samples.side0.len() as u64;
    Bound {
        test,
        epsilon: epsilon_from_counts(hits_a, hits_b, n, delta, ALPHA),
        hits_a,
        hits_b,
        trials: n,
        delta,
    }
}

/// Φ(x), the standard normal distribution function.
pub fn normal_cdf(x: f64) -> f64 {
    0.5 * libm::erfc(-x / std::f64::consts::SQRT_2)
}

/// The likelihood-ratio test of a Gaussian mechanism, in units of the charged noise: the
/// statistic is the output projected on the direction from D's mean to D''s, divided by the
/// noise sd the charge implies, so that under the charge it is N(0, 1) on D and N(μ, 1) on D'
/// (μ = sqrt(2ρ)). The event is {statistic ≥ τ} on D' against D; τ is the one that maximizes
/// the expected bound from `trials` trials per side against the 2×-ρ twin (noise variance
/// halved: N(0, ½) and N(μ, ½)). Chosen from the model alone, before any trial, so the bound
/// stays valid for whatever the mechanism really is.
pub fn gaussian_threshold(mu: f64, trials: u64, delta: f64) -> f64 {
    let sd = std::f64::consts::FRAC_1_SQRT_2;
    let n = trials as f64;
    let mut best = (f64::NEG_INFINITY, mu / 2.0);
    for i in 0..=200 {
        let tau = -1.0 + (mu + 4.0) * f64::from(i) / 200.0;
        let p1 = normal_cdf((mu - tau) / sd);
        let p0 = normal_cdf(-tau / sd);
        let eps = epsilon_from_counts((p1 * n) as u64, (p0 * n).ceil() as u64, trials, delta, ALPHA);
        if eps > best.0 {
            best = (eps, tau);
        }
    }
    best.1
}

/// Chooses the test with the largest bound on `select` (both halves of the data are the caller's
/// split) and evaluates it on `holdout`.
pub fn audit(select: &Samples, holdout: &Samples, delta: f64) -> Bound {
    let statistics = select.side0.first().map_or(0, Vec::len);
    let trials = select.side0.len() as u64;
    let mut best: Option<(f64, Test)> = None;
    for statistic in 0..statistics {
        for threshold in thresholds(&select.side0, &select.side1, statistic) {
            for at_least in [true, false] {
                let probe = Test {
                    statistic,
                    threshold,
                    at_least,
                    side1_is_a: true,
                };
                let (h0, h1) = (probe.count(&select.side0), probe.count(&select.side1));
                for (side1_is_a, ha, hb) in [(true, h1, h0), (false, h0, h1)] {
                    let eps = epsilon_from_counts(ha, hb, trials, delta, ALPHA);
                    if best.is_none_or(|(e, _)| eps > e) {
                        best = Some((eps, Test { side1_is_a, ..probe }));
                    }
                }
            }
        }
    }
    let test = best.map_or(
        Test {
            statistic: 0,
            threshold: f64::INFINITY,
            at_least: true,
            side1_is_a: true,
        },
        |(_, t)| t,
    );
    let (h0, h1) = (test.count(&holdout.side0), test.count(&holdout.side1));
    let (hits_a, hits_b) = if test.side1_is_a { (h1, h0) } else { (h0, h1) };
    let n = holdout.side0.len() as u64;
    Bound {
        test,
        epsilon: epsilon_from_counts(hits_a, hits_b, n, delta, ALPHA),
        hits_a,
        hits_b,
        trials: n,
        delta,
    }
}
