//! The private clip of a live `cape_pca` study (issue 38; docs/design/cape.md, "Private
//! clipping"): the same noisy binary search as a `federated_power` study's
//! ([`super::power_clip`]), each of its T = 8 steps a CAPE stage of its own that releases one
//! count, S_j(c) = Σ_{i at j} (1[‖x_i‖₂ ≤ t(c)] − q), with the correlated noise of
//! [`super::cape_noise`] at Δ = 1 (or max(q, 1 − q) under `add_remove`); then the Gram stage on
//! the rows clipped at the released c, calibrated to Δ(c) = Δ(β)·(c/β)² (the analyze_gauss Δ,
//! β² or √2·β², evaluated at c).
//!
//! The ρ split (both sides compute it, [`CapeClip::shares`]): each step is calibrated to
//! f·ρ/T of the charged ρ (f the clip's share, 0.1 by default), the Gram stage to the rest,
//! nudged down until the T + 1 shares sum to at most ρ as evaluated. Each stage's cost against
//! the aggregator's joint view is at most its share (cape.md, "Accounting"), so the study costs
//! at most ρ (zCDP composes by addition).

use serde::{Deserialize, Serialize};

use super::ConfigError;
use super::clipping::{AUTO_QUANTILE, AUTO_SHARE, STEPS};
use super::power_clip::ClipAsk;
use super::study_clip::ClipBounds;
use crate::dataset::Neighbours;

/// A `cape_pca` study's clip, as stored in its configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapeClip {
    /// q (the median placeholder when `auto_quantile`).
    pub quantile: f64,
    /// f: the share of the study's ρ the T steps take together.
    pub share: f64,
    /// q follows the central rule on the roster's pooled n, fixed when the stages open
    /// (`replace_one` with `clip: "auto"`).
    pub auto_quantile: bool,
    /// β, the declared bound: the top of the search's range.
    pub upper: f64,
    /// d, for the clip's margin and the auto rule.
    pub d: usize,
    /// The study's whole ρ, which the auto rule reads.
    pub study_rho: f64,
}

/// Δ of one count under `neighbours` at quantile `q`.
pub fn count_sensitivity(neighbours: &Neighbours, q: f64) -> f64 {
    match neighbours {
        Neighbours::AddRemove { .. } => q.max(1.0 - q),
        _ => 1.0,
    }
}

/// The Gram stage's Δ at clip norm `c`, from its Δ at the declared β: Δ(β)·(c/β)². Both sides
/// evaluate this same expression, so they derive the same lattice bit for bit.
pub fn gram_sensitivity_at(delta_beta: f64, beta: f64, c: f64) -> f64 {
    let ratio = c / beta;
    delta_beta * ratio * ratio
}

impl CapeClip {
    /// The clip `ask` asks for on a study of ρ = `rho` under `neighbours` with d features.
    pub fn configure(
        ask: ClipAsk,
        rho: f64,
        neighbours: &Neighbours,
        d: usize,
    ) -> Result<CapeClip, ConfigError> {
        let (upper, add_remove) = match *neighbours {
            Neighbours::ReplaceOne { beta, .. } => (beta, false),
            Neighbours::AddRemove { beta, .. } => (beta, true),
            Neighbours::Entry { .. } => {
                return Err(ConfigError::invalid(
                    "params.clip",
                    "private clipping applies to records only",
                ));
            }
        };
        let (quantile, share, auto_quantile) = match ask {
            ClipAsk::Auto => (AUTO_QUANTILE, AUTO_SHARE, !add_remove),
            ClipAsk::Quantile { quantile, share } => (quantile, share, false),
        };
        let clip = CapeClip {
            quantile,
            share,
            auto_quantile,
            upper,
            d,
            study_rho: rho,
        };
        clip.check(neighbours, d)
            .map_err(|e| ConfigError::invalid("params.clip", e))?;
        Ok(clip)
    }

    /// The steps before the Gram stage.
    pub fn steps(&self) -> u32 {
        STEPS
    }

    /// What a site accepts of the steps.
    pub fn bounds(&self) -> ClipBounds {
        ClipBounds {
            upper: self.upper,
            quantile: self.quantile,
            auto_quantile: self.auto_quantile,
        }
    }

    /// q for a roster holding `pooled_n` records ([`ClipBounds::quantile_for`]).
    pub fn quantile_for(&self, pooled_n: Option<u64>, k: usize) -> f64 {
        self.bounds().quantile_for(pooled_n, self.study_rho, self.d, k)
    }

    /// (each step's share, the Gram stage's share) of the charged ρ: f·ρ/T each, and the rest,
    /// nudged down until the T + 1 shares sum to at most ρ as evaluated.
    pub fn shares(&self, charged: f64) -> (f64, f64) {
        self.shares_after(charged, 0.0)
    }

    /// [`CapeClip::shares`] after `spent` of the charged ρ went to earlier stages (a private
    /// centre's): f·ρ/T each step (a share of the whole ρ, as a central job's options are),
    /// and the rest, nudged down until `spent` and the T + 1 shares, summed in stage order,
    /// are at most ρ as evaluated.
    pub fn shares_after(&self, charged: f64, spent: f64) -> (f64, f64) {
        let steps = f64::from(STEPS);
        let step = charged * self.share / steps;
        // The shares summed in stage order, as the stages compose.
        let before = (0..STEPS).fold(spent, |total, _| total + step);
        let mut rest = charged - spent - steps * step;
        while before + rest > charged {
            rest = rest.next_down();
        }
        (step, rest)
    }

    /// The site's check of the stored clip against the study's terms: β, d, a share in (0, 1),
    /// q in (0, 1), and q fixed under `add_remove` (where Δ depends on it).
    pub fn check(&self, neighbours: &Neighbours, d: usize) -> Result<(), String> {
        let beta = match *neighbours {
            Neighbours::ReplaceOne { beta, .. } | Neighbours::AddRemove { beta, .. } => beta,
            Neighbours::Entry { .. } => return Err("a clip needs records".into()),
        };
        if self.upper != beta || self.d != d {
            return Err("the study's clip does not match its terms".into());
        }
        if !(self.share > 0.0 && self.share < 1.0 && self.quantile > 0.0 && self.quantile < 1.0) {
            return Err("the clip's share and quantile must lie in (0, 1)".into());
        }
        if self.auto_quantile && matches!(neighbours, Neighbours::AddRemove { .. }) {
            return Err("under add_remove the clip quantile must be fixed".into());
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "cape_clip_tests.rs"]
mod tests;
