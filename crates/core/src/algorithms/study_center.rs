//! Private centring in studies (issue 38; docs/design/federation.md "Private centring in
//! studies"): the sites release the central private mean's statistics as a sum of per-site
//! vectors (what secure aggregation computes) with distributed noise, the coordinator divides,
//! and every later round maps each row to clip(x − μ̂) before it is used.
//!
//! **The release.** One secure-sum round of d (or d + 1) values. Site j sends
//! S_j = P(Σ_{x at j} x) (its rows are clipped to β at load) and, under `add_remove`, the count
//! clamp(n_j, 0, n_max), each coordinate with Gaussian noise of sd σ/√t, t the study's
//! threshold. P projects onto the L2 ball of radius n_max·β and the clamp onto [0, n_max]: both
//! are non-expansive (a projection onto a convex set is 1-Lipschitz), so a record added,
//! removed or replaced at one site moves the survivors' sum by at most the central
//! sensitivities, and the other sites' vectors do not move (a record lives at one site). With
//! n_j ≤ n_max, the case under `replace_one`, neither changes anything. Any t or more sites'
//! sum carries noise of variance at least σ² per coordinate: the central mechanism of
//! [`super::centering`] exactly, with its sensitivities, its split of ρ_c and its cost
//! (Bun & Steinke 2016, Prop. 1.6: ρ = Δ²/(2σ²) per release):
//! - `replace_one`: Δ_S = 2β, σ = 2β/√(2ρ_c); μ̂ = S̃/n, n the pooled public n of the round's
//!   survivors;
//! - `add_remove`: ρ_c in halves, Δ_S = β, Δ_n = 1; μ̂ = S̃/max(ñ, 1).
//!
//! **After it.** Given the released μ̂, x ↦ clip(x − μ̂) (to β and α) is a fixed per-row map, so
//! every later round's sensitivity holds unchanged, and its cost composes sequentially with
//! ρ_c. Which μ̂ the coordinator hands out is post-processing as far as privacy goes: a site
//! checks only that it is d finite numbers ([`check_center`]); the round signature covers it
//! (`federation::transcript::round_bytes`), so no two sites of a round see different centres.
//!
//! **Encoding.** Fixed point on 2^−f, f chosen as for the clip's counts: the largest f at which
//! the sum over every invited site cannot wrap (each coordinate at most n_max·β plus 41 of its
//! noise sds) and that keeps the sites' noise exact ([`crate::federation::fixed_point::encoding_is_exact`]).

use serde::{Deserialize, Serialize};

use super::centering::{self, COUNT_RELEASE, CenterConfig, CenterRequest, SUM_RELEASE};
use super::{ConfigError, RunEnv};
use crate::dataset::{DataContext, Neighbours};
use crate::federation::fixed_point::{self, FixedPoint};
use crate::linalg::Matrix;
use crate::privacy::Cost;

/// Noise draws are range-checked at this many sds, as the power rounds' are.
use crate::federation::fixed_point::NOISE_TAIL_SDS as TAIL_SDS;
/// Largest fraction-bit count the centre's encoding takes.
const MAX_CENTER_FRACTION_BITS: u32 = 40;

/// A study's private centre, calibrated and stored in its configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StudyCenter {
    /// The central calibration ([`centering::configure`]): ρ_c, the sum's sensitivity and the
    /// sds σ any `threshold` sites' sum carries (a given centre: the public vector).
    pub center: CenterConfig,
    /// t: the number of sites whose noise covers the release.
    pub threshold: u32,
    /// Fraction bits of the sum's fixed-point encoding.
    pub fraction_bits: u32,
}

/// The central calibration's parts, for a private centre.
struct Private {
    sum_sensitivity: f64,
    noise_sd: f64,
    count_noise_sd: Option<f64>,
}

fn bad(message: impl Into<String>) -> ConfigError {
    ConfigError::invalid("params.center", message)
}

/// Checks a centre the coordinator sent: d finite numbers.
pub fn check_center(mu: &[f64], d: usize) -> Result<(), String> {
    if mu.len() != d {
        return Err(format!(
            "the centre holds {} values; the study has d = {d}",
            mu.len()
        ));
    }
    if !mu.iter().all(|v| v.is_finite()) {
        return Err("the centre holds a value that is not a finite number".into());
    }
    Ok(())
}

impl StudyCenter {
    /// Calibrates `request` on a study of ρ = `rho_job` over `ctx` (d and the relation with
    /// its bounds), any `threshold` of at most `sites` sites of at most `max_site_samples`
    /// records each carrying the noise.
    pub fn configure(
        request: CenterRequest,
        ctx: &DataContext,
        rho_job: f64,
        sites: u32,
        threshold: u32,
        max_site_samples: u64,
    ) -> Result<StudyCenter, ConfigError> {
        if threshold == 0 || sites < threshold {
            return Err(bad("the study's threshold must lie in 1..=sites"));
        }
        let center = centering::configure(request, ctx, rho_job)?;
        let mut study = StudyCenter {
            center,
            threshold,
            fraction_bits: 0,
        };
        if let Some(private) = study.private() {
            let beta = upper(&ctx.neighbours).map_err(bad)?;
            let total = total_bound(&private, beta, threshold, sites, max_site_samples);
            study.fraction_bits = fixed_point::max_fraction_bits(total, MAX_CENTER_FRACTION_BITS)
                .filter(|&f| exact(f, &private, threshold))
                .ok_or_else(|| {
                    bad(
                        "the centre's sum has no fixed-point encoding that keeps its noise and cannot wrap; \
                         lower max_site_samples",
                    )
                })?;
        }
        Ok(study)
    }

    fn private(&self) -> Option<Private> {
        match self.center {
            CenterConfig::Private {
                sum_sensitivity,
                noise_sd,
                count_noise_sd,
                ..
            } => Some(Private {
                sum_sensitivity,
                noise_sd,
                count_noise_sd,
            }),
            CenterConfig::Given { .. } => None,
        }
    }

    /// Whether the centre is released by a secure-sum round (a private mean), not given.
    pub fn is_private(&self) -> bool {
        self.private().is_some()
    }

    /// The secure-sum rounds the centre takes: 1 for a private mean, 0 for a given centre.
    pub fn rounds(&self) -> u32 {
        u32::from(self.is_private())
    }

    /// The given centre (public from the start), if this is one.
    pub fn given(&self) -> Option<&[f64]> {
        match &self.center {
            CenterConfig::Given { vector } => Some(vector),
            CenterConfig::Private { .. } => None,
        }
    }

    /// Values per contribution of the centre's round: d, and the count under `add_remove`.
    pub fn len(&self, d: usize) -> usize {
        match self.private() {
            Some(p) => d + usize::from(p.count_noise_sd.is_some()),
            None => 0,
        }
    }

    /// The cost, recomputed from the stored noise.
    pub fn cost(&self) -> Cost {
        self.center.cost()
    }

    /// Checks the stored centre against the study it claims to belong to (what a site verifies
    /// at join): the sensitivities and split of its relation, t, a positive noise, and an
    /// encoding exact and without wrap over `sites` sites of at most `max_site_samples` records.
    /// A given centre must hold d finite numbers. Returns the cost, from the noise.
    pub fn check(
        &self,
        neighbours: &Neighbours,
        d: usize,
        sites: u32,
        threshold: u32,
        max_site_samples: u64,
    ) -> Result<Cost, String> {
        let Some(private) = self.private() else {
            check_center(self.given().unwrap_or_default(), d)?;
            return Ok(Cost::ZERO);
        };
        let beta = upper(neighbours)?;
        let add_remove = matches!(neighbours, Neighbours::AddRemove { .. });
        let sensitivity = if add_remove { beta } else { 2.0 * beta };
        if private.sum_sensitivity != sensitivity || private.count_noise_sd.is_some() != add_remove {
            return Err("the study's centre states another sensitivity than its relation needs".into());
        }
        let positive = |sd: f64| sd > 0.0 && sd.is_finite();
        if !(positive(private.noise_sd) && private.count_noise_sd.is_none_or(positive)) {
            return Err("the study's centre noise is not valid".into());
        }
        if self.threshold != threshold {
            return Err("the study's centre is calibrated for another threshold".into());
        }
        let total = total_bound(&private, beta, threshold, sites, max_site_samples);
        if !(self.fraction_bits <= MAX_CENTER_FRACTION_BITS
            && fixed_point::fits(total, self.fraction_bits)
            && exact(self.fraction_bits, &private, threshold))
        {
            return Err("the study's centre has an encoding that could wrap or round away noise".into());
        }
        Ok(self.cost())
    }

    /// A site's release: the projected sum of its rows `xt` (d×n, a record per column, each of
    /// norm ≤ β) and, under `add_remove`, its clamped count, each plus N(0, σ²/t), encoded.
    pub fn site_release(
        &self,
        xt: &Matrix,
        beta: f64,
        max_site_samples: u64,
        env: &mut RunEnv<'_>,
    ) -> Result<Vec<u64>, String> {
        let private = self.private().ok_or("a given centre has no release")?;
        let d = xt.nrows();
        let radius = max_site_samples as f64 * beta;
        let mut sum = Matrix::from_iterator(d, 1, (0..d).map(|i| xt.row(i).sum()));
        let norm = sum.norm();
        if norm > radius {
            sum *= radius / norm;
        }
        let site = |sd: f64| sd / f64::from(self.threshold).sqrt();
        let noisy = env
            .gaussian_release(SUM_RELEASE, sum, private.sum_sensitivity, site(private.noise_sd))
            .map_err(|e| e.to_string())?;
        let mut values = noisy.as_slice().to_vec();
        if let Some(sd) = private.count_noise_sd {
            let count = (xt.ncols() as f64).min(max_site_samples as f64);
            values.push(
                env.gaussian_scalar_release(COUNT_RELEASE, count, 1.0, site(sd))
                    .map_err(|e| e.to_string())?,
            );
        }
        let fixed = FixedPoint::new(self.fraction_bits).map_err(|e| e.to_string())?;
        let bounds = entry_bounds(&private, beta, self.threshold, max_site_samples);
        values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let bound = if i < d { bounds.0 } else { bounds.1 };
                fixed.encode(*v, bound).map_err(|e| e.to_string())
            })
            .collect()
    }

    /// μ̂ from the unmasked sum of a round over `d` features: S̃/n with `public_n` the
    /// survivors' pooled n (`replace_one`), else S̃/max(ñ, 1).
    pub fn decode(&self, sum: &[u64], d: usize, public_n: Option<u64>) -> Result<Vec<f64>, String> {
        let private = self.private().ok_or("a given centre has no release")?;
        if sum.len() != self.len(d) {
            return Err("the unmasked centre has the wrong length".into());
        }
        let values = FixedPoint::new(self.fraction_bits)
            .map_err(|e| e.to_string())?
            .decode_all(sum);
        let n = match private.count_noise_sd {
            Some(_) => values[d].max(1.0),
            None => match public_n {
                Some(n) if n > 0 => n as f64,
                _ => return Err("the centre's survivors report no records".into()),
            },
        };
        let mu: Vec<f64> = values[..d].iter().map(|s| s / n).collect();
        check_center(&mu, d)?;
        Ok(mu)
    }
}

/// β of a records relation.
fn upper(neighbours: &Neighbours) -> Result<f64, String> {
    match *neighbours {
        Neighbours::ReplaceOne { beta, .. } | Neighbours::AddRemove { beta, .. } => Ok(beta),
        Neighbours::Entry { .. } => Err("centring applies to records only".into()),
    }
}

/// Bounds on one site's encoded sum coordinate and count: n_max·β (n_max) plus the tail of the
/// noise.
fn entry_bounds(private: &Private, beta: f64, threshold: u32, max_site_samples: u64) -> (f64, f64) {
    let root_t = f64::from(threshold).sqrt();
    let n_max = max_site_samples as f64;
    let tail = |sd: f64| (TAIL_SDS + 1.0) * sd / root_t;
    (
        n_max * beta + tail(private.noise_sd),
        n_max + private.count_noise_sd.map_or(0.0, tail),
    )
}

/// Bound on any coordinate of the sum over all `sites`.
fn total_bound(private: &Private, beta: f64, threshold: u32, sites: u32, max_site_samples: u64) -> f64 {
    let (sum, count) = entry_bounds(private, beta, threshold, max_site_samples);
    f64::from(sites) * sum.max(count)
}

/// Whether f keeps every site's noise exact (the smaller sd decides).
fn exact(fraction_bits: u32, private: &Private, threshold: u32) -> bool {
    let root_t = f64::from(threshold).sqrt();
    let smallest = private
        .count_noise_sd
        .map_or(private.noise_sd, |sd| sd.min(private.noise_sd));
    crate::federation::fixed_point::encoding_is_exact(fraction_bits, smallest / root_t * (1.0 - 1e-12))
}

#[cfg(test)]
#[path = "study_center_tests.rs"]
mod tests;
