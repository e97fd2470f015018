//! The private clip of a live `federated_power` study (issue 38; docs/design/federation.md,
//! "Private clipping in studies"): before the power rounds, [`STEPS`] secure-sum rounds run the
//! noisy binary search of [`super::study_clip`] (`Method::Search`), one count per round, and the
//! power rounds are then calibrated to the c it releases instead of the declared β.
//!
//! Round s ≤ T: the coordinator publishes the step's c (the bracket's middle, a function of the
//! earlier noisy sums) and the quantile q. Site j sends clamp(S_j(c), ±n_max) + N(0, σ²/t),
//! S_j(c) = Σ_{i at j} (1[‖x_i‖₂ ≤ t(c)] − q), fixed-point encoded and masked like a power
//! round. Clamping is 1-Lipschitz and n_max public, so the sum keeps the search's sensitivity
//! (1, or max(q, 1 − q) under `add_remove`) and any t sites' sum carries noise of sd ≥ σ: the
//! central search's release, and its cost T·Δ²/(2σ²) (`clipping::cost_of`).
//!
//! What the site accepts. Under `replace_one` Δ = 1 whatever q is, so the coordinator may fix q
//! when the rounds open, from the roster's pooled public n by the central `auto` rule
//! ([`PowerClip::quantile_for`]); the site accepts any q in the rule's range. Under
//! `add_remove` Δ depends on q and q is the configuration's. Every step's c lies in
//! [β·2^−8, β], and so must the c of every power round ([`PowerClip::check_c`]): the fixed-point
//! encoding of the power rounds is exact down to that floor. A coordinator may choose c freely
//! inside the range without touching privacy: each power round is a Gaussian mechanism on rows
//! clipped at its own c with noise calibrated to Δ(c), of ρ = 1/(2m²) whatever c is, and c is
//! part of what every site signs (the round's iterate hash), so no two sites of one round can be
//! shown different c's.

use serde::{Deserialize, Serialize};

use super::clipping::{AUTO_QUANTILE, AUTO_SHARE, STEPS, score};
use super::study_clip::{COUNT_RELEASE, ClipBounds, Method, StudyClip};
use super::{ConfigError, RunEnv};
use crate::dataset::Neighbours;
use crate::federation::fixed_point::{self, FixedPoint};
use crate::privacy::Cost;

/// Noise draws are range-checked at this many sds, as the power rounds' are.
use crate::federation::fixed_point::NOISE_TAIL_SDS as TAIL_SDS;
/// Largest fraction-bit count the counts' encoding takes (it needs far fewer: σ ≥ ~1).
const MAX_COUNT_FRACTION_BITS: u32 = 30;

/// A study's private clip, calibrated and stored in its configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PowerClip {
    /// The search, calibrated to its share of the study's ρ.
    pub search: StudyClip,
    /// Fraction bits of the counts' fixed-point encoding.
    pub fraction_bits: u32,
    /// q follows the central `auto` rule on the roster's pooled n, fixed when the rounds open
    /// (`replace_one` with `clip: "auto"`); otherwise `search.quantile` is q.
    pub auto_quantile: bool,
    /// The study's whole ρ, which the `auto` rule reads.
    pub study_rho: f64,
}

/// What a study asked for, before calibration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ClipAsk {
    /// The central `auto` rule.
    Auto,
    /// A stated quantile and share of ρ.
    Quantile { quantile: f64, share: f64 },
}

/// The expected sensitivity of one count for the relation of `neighbours` and quantile `q`.
fn count_sensitivity(neighbours: &Neighbours, q: f64) -> f64 {
    match neighbours {
        Neighbours::AddRemove { .. } => q.max(1.0 - q),
        _ => 1.0,
    }
}

impl PowerClip {
    /// Calibrates the search for `ask` on a study of ρ = `rho`, d = `d`, threshold t, at most
    /// `sites` sites of at most `max_site_samples` records each.
    pub fn configure(
        ask: ClipAsk,
        rho: f64,
        neighbours: &Neighbours,
        d: usize,
        sites: u32,
        threshold: u32,
        max_site_samples: u64,
    ) -> Result<PowerClip, ConfigError> {
        let add_remove = matches!(neighbours, Neighbours::AddRemove { .. });
        let (quantile, share, auto_quantile) = match ask {
            ClipAsk::Auto => (AUTO_QUANTILE, AUTO_SHARE, !add_remove),
            ClipAsk::Quantile { quantile, share } => (quantile, share, false),
        };
        let search = StudyClip::configure(Method::Search, quantile, share, rho, neighbours, d, threshold)?;
        let total = count_total_bound(&search, sites, max_site_samples);
        let fraction_bits = fixed_point::max_fraction_bits(total, MAX_COUNT_FRACTION_BITS)
            .filter(|&f| {
                crate::federation::fixed_point::encoding_is_exact(f, search.site_sd() * (1.0 - 1e-12))
            })
            .ok_or_else(|| {
                ConfigError::invalid(
                    "params.clip",
                    "the clip's counts have no fixed-point encoding that keeps their noise and cannot wrap; \
                     lower max_site_samples or use clip: none",
                )
            })?;
        Ok(PowerClip {
            search,
            fraction_bits,
            auto_quantile,
            study_rho: rho,
        })
    }

    /// The rounds the clip takes before the power rounds.
    pub fn rounds(&self) -> u32 {
        STEPS
    }

    /// The search's cost.
    pub fn cost(&self) -> Cost {
        self.search.cost()
    }

    /// What a site accepts of the search's steps.
    pub fn bounds(&self) -> ClipBounds {
        ClipBounds {
            upper: self.search.upper,
            quantile: self.search.quantile,
            auto_quantile: self.auto_quantile,
        }
    }

    /// The lowest c the search can release: the floor of its bracket.
    pub fn floor(&self) -> f64 {
        self.bounds().floor()
    }

    /// q for a roster holding `pooled_n` records ([`ClipBounds::quantile_for`]).
    pub fn quantile_for(&self, pooled_n: Option<u64>, k: usize) -> f64 {
        self.bounds()
            .quantile_for(pooled_n, self.study_rho, self.search.d, k)
    }

    /// Checks the q a coordinator sent for a step.
    pub fn check_quantile(&self, q: f64) -> Result<(), String> {
        self.bounds().check_quantile(q)
    }

    /// Checks a c the coordinator sent (a step's, or a power round's).
    pub fn check_c(&self, c: f64) -> Result<(), String> {
        self.bounds().check_c(c)
    }

    /// Checks the stored search against the study it claims to belong to (what a site
    /// verifies at join): the method, β, d and t, the sensitivity its relation needs, and an
    /// exact, non-wrapping encoding. Returns the search's cost, recomputed from the noise at
    /// the needed sensitivity.
    pub fn check(
        &self,
        neighbours: &Neighbours,
        d: usize,
        sites: u32,
        threshold: u32,
        max_site_samples: u64,
    ) -> Result<Cost, String> {
        let s = &self.search;
        let beta = match *neighbours {
            Neighbours::ReplaceOne { beta, .. } | Neighbours::AddRemove { beta, .. } => beta,
            Neighbours::Entry { .. } => return Err("a clip needs records".into()),
        };
        let add_remove = matches!(neighbours, Neighbours::AddRemove { .. });
        if s.method != Method::Search || s.upper != beta || s.d != d || s.threshold != threshold {
            return Err("the study's clip does not match its terms".into());
        }
        if self.auto_quantile && add_remove {
            return Err("under add_remove the clip quantile must be fixed".into());
        }
        if !(s.quantile > 0.0 && s.quantile < 1.0 && s.noise_sd > 0.0 && s.noise_sd.is_finite()) {
            return Err("the study's clip noise is not valid".into());
        }
        let sensitivity = count_sensitivity(neighbours, s.quantile);
        if s.sensitivity != sensitivity {
            return Err("the study's clip states another sensitivity than its relation needs".into());
        }
        let total = count_total_bound(s, sites, max_site_samples);
        if !(self.fraction_bits <= MAX_COUNT_FRACTION_BITS
            && fixed_point::fits(total, self.fraction_bits)
            && crate::federation::fixed_point::encoding_is_exact(self.fraction_bits, s.site_sd()))
        {
            return Err(
                "the study's clip counts have an encoding that could wrap or round away noise".into(),
            );
        }
        Ok(super::clipping::cost_of(STEPS, sensitivity, s.noise_sd))
    }

    /// A site's step: its clamped part of S(c) at quantile `q` over its rows' `norms`, plus
    /// N(0, σ²/t), encoded.
    pub fn site_count(
        &self,
        norms: &[f64],
        c: f64,
        q: f64,
        max_site_samples: u64,
        env: &mut RunEnv<'_>,
    ) -> Result<Vec<u64>, String> {
        let s = &self.search;
        let clamp = max_site_samples as f64;
        let value = score(norms, c, q, s.d).clamp(-clamp, clamp);
        let sd = s.site_sd();
        let noisy = env
            .gaussian_scalar_release(COUNT_RELEASE, value, s.sensitivity, sd)
            .map_err(|e| e.to_string())?;
        let fixed = FixedPoint::new(self.fraction_bits).map_err(|e| e.to_string())?;
        let bound = count_entry_bound(s, max_site_samples);
        Ok(vec![fixed.encode(noisy, bound).map_err(|e| e.to_string())?])
    }

    /// The noisy sum S(c) from the unmasked words.
    pub fn decode(&self, sum: &[u64]) -> Option<f64> {
        let fixed = FixedPoint::new(self.fraction_bits).ok()?;
        match sum {
            [w] => Some(fixed.decode(*w)).filter(|v| v.is_finite()),
            _ => None,
        }
    }
}

/// Bound on one site's encoded count: n_max plus the tail of its noise.
fn count_entry_bound(search: &StudyClip, max_site_samples: u64) -> f64 {
    max_site_samples as f64 + (TAIL_SDS + 1.0) * search.site_sd()
}

/// Bound on the sum over all sites.
fn count_total_bound(search: &StudyClip, sites: u32, max_site_samples: u64) -> f64 {
    f64::from(sites) * count_entry_bound(search, max_site_samples)
}

#[cfg(test)]
#[path = "power_clip_tests.rs"]
mod tests;
