//! Private clipping in studies (issue 38; docs/design/federation.md "Private clipping in
//! studies"): the sites agree on a clip norm c ≤ β from a private quantile of their pooled row
//! norms, computed as a sum of per-site vectors (what secure aggregation computes) with
//! distributed noise, and each site clips its rows at c before it contributes. The protocol is
//! then calibrated to c instead of the declared β, as a central job's `clip` option does
//! ([`super::clipping`]).
//!
//! Both mechanisms below release sums over records, so a site's vector is its records' part of
//! the sum plus Gaussian noise of sd σ/√t, t the study's threshold: any t or more sites' sum
//! carries noise of variance at least σ², the calibrated amount, whatever the others do. The
//! masks of secure aggregation cancel in the sum, so the coordinator learns the noisy sum only.
//! A row is inside the clip at c when ‖x‖₂ ≤ t(c) = c·(1 − margin(d)), the test of
//! [`crate::linalg::clip::clip_l2`], as in the central search.
//!
//! **One round: a histogram over a public grid** ([`Method::Histogram`]). The grid is
//! c_j = β·2^(−L + L·j/B), j = 0..=B ([`BINS`] = B = 32, L = [`LOG2_RANGE`] = 8), the central
//! search's range at a quarter of its resolution in log₂. Entry j ≤ B counts the rows with
//! t(c_{j−1}) < ‖x‖₂ ≤ t(c_j) (t(c_{−1}) = −∞), entry B + 1 the rest. One row moves from one
//! entry to another under `replace_one` (L2 sensitivity Δ = √2) and in or out of one entry under
//! `add_remove` (Δ = 1). One Gaussian release: ρ = Δ²/(2σ²) (Bun & Steinke 2016, Prop. 1.6),
//! σ = Δ/√(2ρ). c is read off the noisy sum by post-processing: the first c_j whose noisy
//! cumulative count reaches q·n (n public, else the noisy total), β if none does.
//!
//! **T rounds: the central noisy binary search, summed** ([`Method::Search`]). Step s releases
//! S(c) = Σ_i (1[‖x_i‖₂ ≤ t(c)] − q) + N(0, σ²), each site sending its records' part of the sum:
//! the central search's release exactly, with its sensitivity (1, or max(q, 1 − q) under
//! `add_remove`) and cost ρ = T·Δ²/(2σ²), T = [`STEPS`] = 8 adaptively chosen steps.
//!
//! Which to use: `study_clip_tests.rs` measures both at the same share of ρ (docs/design/
//! federation.md has the figures).

use serde::{Deserialize, Serialize};

use super::clipping::{
    AUTO_MAX_TAIL, AUTO_MIN_TAIL, AUTO_QUANTILE, AUTO_SHARE, Bracket, LOG2_RANGE, STEPS, auto_tail, cost_of,
    score,
};
use super::{ConfigError, RunEnv, RunError};
use crate::dataset::Neighbours;
use crate::linalg::clip::margin;
use crate::privacy::Cost;
use crate::privacy::cost::round_up_while;

/// Bins of the histogram's grid over [β·2^−L, β].
pub const BINS: usize = 32;
/// Audit label of a site's noisy histogram.
pub const HISTOGRAM_RELEASE: &str = "study_clip_histogram";
/// Audit label of a site's noisy count in one step of the search.
pub const COUNT_RELEASE: &str = "study_clip_count";

/// How the sites compute the quantile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// One round: a noisy histogram of the norms over a public geometric grid.
    Histogram,
    /// [`STEPS`] rounds: the central noisy binary search, each count summed over the sites.
    Search,
}

/// A study's private clip, calibrated: what every site and the coordinator compute with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StudyClip {
    pub method: Method,
    /// q: the share of the pooled rows the clip should leave as they are.
    pub quantile: f64,
    /// The share of the study's ρ spent on the clip.
    pub share: f64,
    /// ρ of the clip, recomputed from the noise ([`StudyClip::cost`]).
    pub rho: f64,
    /// β: the declared bound, the grid's top.
    pub upper: f64,
    /// Δ of one release (the histogram, or one step's count).
    pub sensitivity: f64,
    /// σ: the sd per entry of the noise any `threshold` sites' sum carries.
    pub noise_sd: f64,
    /// t: the number of sites whose noise covers the release.
    pub threshold: u32,
    /// d, for the clip's margin.
    pub d: usize,
}

fn bad(message: impl Into<String>) -> ConfigError {
    ConfigError::invalid("clip", message)
}

impl StudyClip {
    /// Calibrates `method` for the `quantile` q to ρ_c = `share`·`rho_job` on records under
    /// `neighbours` (β, relation) with `d` features, any `threshold` sites carrying the noise.
    pub fn configure(
        method: Method,
        quantile: f64,
        share: f64,
        rho_job: f64,
        neighbours: &Neighbours,
        d: usize,
        threshold: u32,
    ) -> Result<StudyClip, ConfigError> {
        let (upper, add_remove) = match *neighbours {
            Neighbours::ReplaceOne { beta, .. } => (beta, false),
            Neighbours::AddRemove { beta, .. } => (beta, true),
            Neighbours::Entry { .. } => return Err(bad("private clipping applies to records only")),
        };
        if !(quantile > 0.0 && quantile < 1.0) {
            return Err(bad("the clip quantile must lie in (0, 1)"));
        }
        if !(share > 0.0 && share < 1.0) {
            return Err(bad("the clip's share of ρ must lie in (0, 1)"));
        }
        let rho = share * rho_job;
        if !(rho > 0.0 && rho.is_finite()) {
            return Err(bad("the clip's share of ρ must be a positive, finite amount"));
        }
        if threshold == 0 || d == 0 || !(upper > 0.0 && upper.is_finite()) {
            return Err(bad("the study's threshold, d and β must be positive"));
        }
        let (sensitivity, releases) = match (method, add_remove) {
            (Method::Histogram, false) => (2f64.sqrt(), 1),
            (Method::Histogram, true) => (1.0, 1),
            (Method::Search, false) => (1.0, STEPS),
            (Method::Search, true) => (quantile.max(1.0 - quantile), STEPS),
        };
        // σ = Δ·sqrt(T/(2ρ_c)), nudged up so that T·Δ²/(2σ²) ≤ ρ_c in floating point too.
        let noise_sd = round_up_while(
            super::centering::calibrate_sd(sensitivity, rho / f64::from(releases)),
            |sd| cost_of(releases, sensitivity, sd).rho > rho,
        );
        let mut clip = StudyClip {
            method,
            quantile,
            share,
            rho: 0.0,
            upper,
            sensitivity,
            noise_sd,
            threshold,
            d,
        };
        clip.rho = clip.cost().rho;
        Ok(clip)
    }

    /// The central `auto` rule on the study's public facts ([`super::clipping::auto_choice`]):
    /// the quantile from n, d, k and ρ when n is public, the median when it is not, the share
    /// [`AUTO_SHARE`]; `None` (no clip) where the central rule would not clip.
    pub fn auto(
        method: Method,
        n: Option<usize>,
        k: usize,
        rho_job: f64,
        neighbours: &Neighbours,
        d: usize,
        threshold: u32,
    ) -> Result<Option<StudyClip>, ConfigError> {
        let quantile = match n {
            Some(n) => match auto_tail(n, d, rho_job, k, 1.0) {
                Some(tail) => 1.0 - tail,
                None => return Ok(None),
            },
            None => AUTO_QUANTILE,
        };
        Self::configure(method, quantile, AUTO_SHARE, rho_job, neighbours, d, threshold).map(Some)
    }

    /// The cost, recomputed from the stored noise.
    pub fn cost(&self) -> Cost {
        let releases = match self.method {
            Method::Histogram => 1,
            Method::Search => STEPS,
        };
        cost_of(releases, self.sensitivity, self.noise_sd)
    }

    /// The sd of one site's noise: σ/√t.
    pub fn site_sd(&self) -> f64 {
        self.noise_sd / f64::from(self.threshold).sqrt()
    }

    /// The norm below which the clip at `c` leaves a row as it is.
    fn inside(&self, c: f64) -> f64 {
        c * (1.0 - margin(self.d))
    }

    /// The histogram's grid c_0..=c_B.
    pub fn edges(&self) -> Vec<f64> {
        (0..=BINS)
            .map(|j| self.upper * (-LOG2_RANGE + LOG2_RANGE * j as f64 / BINS as f64).exp2())
            .collect()
    }

    /// A site's histogram of its rows' `norms` (B + 2 counts, module doc), before noise.
    pub fn histogram(&self, norms: &[f64]) -> Vec<f64> {
        let limits: Vec<f64> = self.edges().iter().map(|c| self.inside(*c)).collect();
        let mut counts = vec![0.0; BINS + 2];
        for r in norms {
            // The first entry whose limit holds the norm; BINS + 1 when none does.
            let j = limits.partition_point(|limit| limit < r);
            counts[j] += 1.0;
        }
        counts
    }

    /// A site's noisy histogram: its counts plus N(0, (σ/√t)²) per entry.
    pub fn histogram_share(&self, norms: &[f64], env: &mut RunEnv<'_>) -> Result<Vec<f64>, RunError> {
        let counts = crate::linalg::Matrix::from_vec(BINS + 2, 1, self.histogram(norms));
        let noisy = env.gaussian_release(HISTOGRAM_RELEASE, counts, self.sensitivity, self.site_sd())?;
        Ok(noisy.as_slice().to_vec())
    }

    /// c from the noisy sum of the sites' histograms: the first c_j whose cumulative count
    /// reaches q·n (`n` public, else the noisy total, at least 1), β if none does.
    pub fn read_histogram(&self, sum: &[f64], n: Option<usize>) -> f64 {
        let total = n.map_or_else(|| sum.iter().sum::<f64>(), |n| n as f64).max(1.0);
        let goal = self.quantile * total;
        let mut cumulative = 0.0;
        for (c, count) in self.edges().iter().zip(sum) {
            cumulative += count;
            if cumulative >= goal {
                return *c;
            }
        }
        self.upper
    }

    /// A site's part of S(c) in one step of the search, before noise
    /// (`clipping::score` on its rows).
    pub fn score(&self, norms: &[f64], c: f64) -> f64 {
        score(norms, c, self.quantile, self.d)
    }

    /// A site's noisy part of S(c): its score plus N(0, (σ/√t)²).
    pub fn score_share(&self, norms: &[f64], c: f64, env: &mut RunEnv<'_>) -> Result<f64, RunError> {
        env.gaussian_scalar_release(
            COUNT_RELEASE,
            self.score(norms, c),
            self.sensitivity,
            self.site_sd(),
        )
    }

    /// Runs the whole mechanism over the sites' `norms` in one process (no dropouts): each
    /// site's noisy vector, summed as secure aggregation sums them. Returns c.
    pub fn simulate(
        &self,
        norms: &[Vec<f64>],
        n: Option<usize>,
        env: &mut RunEnv<'_>,
    ) -> Result<f64, RunError> {
        match self.method {
            Method::Histogram => {
                let mut sum = vec![0.0; BINS + 2];
                for site in norms {
                    for (total, v) in sum.iter_mut().zip(self.histogram_share(site, env)?) {
                        *total += v;
                    }
                }
                Ok(self.read_histogram(&sum, n))
            }
            Method::Search => {
                let mut search = Bracket::new(self.upper);
                for _ in 0..STEPS {
                    let c = search.next_c();
                    let mut sum = 0.0;
                    for site in norms {
                        sum += self.score_share(site, c, env)?;
                    }
                    search.absorb(sum);
                }
                Ok(search.c())
            }
        }
    }
}

/// A study's search on the coordinator: the bracket, the q the steps count at (fixed when the
/// study's rounds open) and the noisy sums released so far (public, DP releases). Shared by the
/// protocols that clip (`federated_power`, `cape_pca`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClipProgress {
    pub bracket: Bracket,
    pub quantile: f64,
    /// The noisy S(c) of each finished step, in order.
    pub counts: Vec<f64>,
}

/// The clip as a study's report shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClipReport {
    /// The clip norm the study used (`None` while the search runs).
    pub clip_norm: Option<f64>,
    pub quantile: f64,
    /// The search's steps: the c counted at and the noisy S(c) released.
    pub steps: Vec<ClipStep>,
}

/// One step of the search.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClipStep {
    pub c: f64,
    pub noisy_count: f64,
}

impl ClipProgress {
    /// The whole bracket under β = `upper`, counting at `quantile`.
    pub fn new(upper: f64, quantile: f64) -> ClipProgress {
        ClipProgress {
            bracket: Bracket::new(upper),
            quantile,
            counts: Vec::new(),
        }
    }

    /// Whether a step is still to run.
    pub fn searching(&self) -> bool {
        (self.counts.len() as u32) < STEPS
    }

    /// The open step's [c, q].
    pub fn step(&self) -> [f64; 2] {
        [self.bracket.next_c(), self.quantile]
    }

    /// A step's noisy S(c) moves the bracket.
    pub fn absorb(&mut self, noisy: f64) {
        self.bracket.absorb(noisy);
        self.counts.push(noisy);
    }

    /// The released c, once every step ran.
    pub fn clip_norm(&self) -> Option<f64> {
        (!self.searching()).then(|| self.bracket.c())
    }

    /// Whether a kept search can belong to a study: at most [`STEPS`] counts, q in (0, 1).
    pub fn valid(&self) -> bool {
        self.counts.len() as u32 <= STEPS && self.quantile > 0.0 && self.quantile < 1.0
    }

    /// The report, the steps replayed from β = `upper`.
    pub fn report(&self, upper: f64) -> ClipReport {
        let mut bracket = Bracket::new(upper);
        let steps = self
            .counts
            .iter()
            .map(|&noisy_count| {
                let c = bracket.next_c();
                bracket.absorb(noisy_count);
                ClipStep { c, noisy_count }
            })
            .collect();
        ClipReport {
            clip_norm: self.clip_norm(),
            quantile: self.quantile,
            steps,
        }
    }
}

/// What a site accepts of a live study's search, whatever protocol carries it (docs/design/
/// federation.md, "Private clipping in studies"): c within the bracket's range, and q.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClipBounds {
    /// β, the top of the range.
    pub upper: f64,
    /// The configured q (the median placeholder when `auto_quantile`).
    pub quantile: f64,
    /// q follows the central `auto` rule on the roster's pooled n (`replace_one`).
    pub auto_quantile: bool,
}

impl ClipBounds {
    /// The lowest c the search can release: the floor of its bracket, β·2^−8.
    pub fn floor(&self) -> f64 {
        self.upper * (-LOG2_RANGE).exp2()
    }

    /// q for a roster holding `pooled_n` records (public under `replace_one`) in a study of
    /// ρ = `rho`, d and k: the central rule's 1 − tail(n, d, ρ, k), or 1 − `AUTO_MIN_TAIL` where
    /// the central rule would not clip (the study set the clip's share aside when it was
    /// created, before n was known; clipping the top 2 % then costs little and uses it).
    pub fn quantile_for(&self, pooled_n: Option<u64>, rho: f64, d: usize, k: usize) -> f64 {
        match (self.auto_quantile, pooled_n) {
            (true, Some(n)) => 1.0 - auto_tail(n as usize, d, rho, k, 1.0).unwrap_or(AUTO_MIN_TAIL),
            _ => self.quantile,
        }
    }

    /// Checks the q a coordinator sent for a step: in the auto rule's range [0.5, 0.98] when q
    /// follows it (Δ = 1 whatever q is), else exactly the configured one.
    pub fn check_quantile(&self, q: f64) -> Result<(), String> {
        let ok = if self.auto_quantile {
            ((1.0 - AUTO_MAX_TAIL)..=(1.0 - AUTO_MIN_TAIL)).contains(&q)
        } else {
            q == self.quantile
        };
        if ok {
            Ok(())
        } else {
            Err(format!("the clip quantile q = {q} is not one this study allows"))
        }
    }

    /// Checks a c the coordinator sent (a step's, or the one the study clips at).
    pub fn check_c(&self, c: f64) -> Result<(), String> {
        if c >= self.floor() && c <= self.upper {
            Ok(())
        } else {
            Err(format!(
                "the clip norm c = {c} lies outside [{:e}, {}]",
                self.floor(),
                self.upper
            ))
        }
    }
}

#[cfg(test)]
#[path = "study_clip_tests.rs"]
mod tests;
