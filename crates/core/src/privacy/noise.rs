//! Noise for every release a mechanism makes. Each release goes through these functions, so
//! that tests can audit the noise actually drawn against the calibrated scale.
//!
//! The noise is discrete (docs/design/privacy.md §4; `docs/design/noise.md`): the query is rounded to a
//! grid h·Z and a discrete Gaussian or discrete Laplace integer is added, sampled exactly with
//! integer arithmetic ([`super::discrete`], Canonne–Kamath–Steinke 2020). The sensitivity is
//! rounded up to the grid and the noise widened to match ([`super::lattice`]), so each release
//! costs no more than the continuous mechanism its cost was computed for: ρ = Δ₂²/(2σ²) for
//! the Gaussian, ε = Δ₁/b for the Laplace. No floating-point sampler remains, so the low bits of
//! a release carry nothing about the data (Mironov 2012).

use rand::RngCore;

use super::lattice::{GaussianLattice, LaplaceLattice, LatticeError};
use crate::linalg::Matrix;

/// One batch of noise drawn by a mechanism, as seen by an audit.
#[derive(Debug, Clone)]
pub struct NoiseDraw {
    /// Which release of the algorithm this is (e.g. "power_iteration").
    pub label: &'static str,
    /// "gaussian" or "laplace".
    pub distribution: &'static str,
    /// The scale of the noise drawn: the standard deviation for Gaussian noise, the scale b
    /// for Laplace noise (the calibrated scale widened by the grid's sensitivity rounding, a
    /// relative 10⁻⁵ or less in practice).
    pub scale: f64,
    /// The grid step h of the release (0 for draws that are not on a grid, e.g. Bingham
    /// directions): the release is round(q/h)·h plus the noise.
    pub grid: f64,
    /// The noise values that were added, multiples of the release's grid (column-major for matrices; for a symmetric matrix,
    /// only the independent upper triangle including the diagonal).
    pub values: Vec<f64>,
}

/// Receives every noise draw. Production passes none; tests record the draws and check their
/// empirical scale against an independently computed expectation.
pub trait NoiseAudit {
    fn record(&mut self, draw: NoiseDraw);
}

/// A recording audit for tests and experiments.
#[derive(Debug, Default)]
pub struct RecordingAudit {
    pub draws: Vec<NoiseDraw>,
}

impl NoiseAudit for RecordingAudit {
    fn record(&mut self, draw: NoiseDraw) {
        self.draws.push(draw);
    }
}

/// Releases `query` (m coordinates, L2 sensitivity `sensitivity`) with discrete Gaussian noise
/// calibrated to sd `sd`: each q becomes h·(round(q/h) + Z). Returns the noise added (h·Z, in
/// order) and the sd actually used (≥ `sd`, see [`GaussianLattice`]).
pub fn gaussian_release(
    rng: &mut dyn RngCore,
    query: &mut [f64],
    sensitivity: f64,
    sd: f64,
) -> Result<Release, LatticeError> {
    gaussian_block_release(rng, query, sensitivity, sd, query.len())
}

/// As [`gaussian_release`] for one block of a release that is drawn in several calls (e.g. the
/// messages of all agents stacked, whose sensitivity is stated jointly): `coordinates` is the
/// size of the whole release, which sets the grid penalty √m·h (a block's own size would
/// under-state it).
pub fn gaussian_block_release(
    rng: &mut dyn RngCore,
    query: &mut [f64],
    sensitivity: f64,
    sd: f64,
    coordinates: usize,
) -> Result<Release, LatticeError> {
    let lattice = GaussianLattice::new(sd, sensitivity, coordinates.max(query.len()))?;
    let noise = lattice.release(rng, query);
    Ok(Release {
        scale: lattice.sd(),
        grid: lattice.grid(),
        noise,
    })
}

/// Releases `query` (m coordinates, L1 sensitivity `sensitivity`) with discrete Laplace noise
/// calibrated to scale `b`. As [`gaussian_release`].
pub fn laplace_release(
    rng: &mut dyn RngCore,
    query: &mut [f64],
    sensitivity: f64,
    b: f64,
) -> Result<Release, LatticeError> {
    let lattice = LaplaceLattice::new(b, sensitivity, query.len())?;
    let noise = lattice.release(rng, query);
    Ok(Release {
        scale: lattice.scale(),
        grid: lattice.grid(),
        noise,
    })
}

/// Releases integer-valued `counts` (L1 sensitivity `sensitivity`) with discrete Laplace noise
/// on a grid h ≤ 1 that divides 1: the counts are on the grid already, so there is no rounding
/// penalty and the scale does not depend on the number of counts (which may be data-dependent,
/// as the non-empty bins of a histogram are). Non-integer entries are rounded like any query,
/// without the penalty: callers must pass integers.
pub fn laplace_count_release(
    rng: &mut dyn RngCore,
    counts: &mut [f64],
    sensitivity: f64,
    b: f64,
) -> Result<Release, LatticeError> {
    let lattice = LaplaceLattice::for_integers(b, sensitivity)?;
    let noise = lattice.release(rng, counts);
    Ok(Release {
        scale: lattice.scale(),
        grid: lattice.grid(),
        noise,
    })
}

/// Releases the symmetric d×d matrix `a` through its upper triangle (diagonal included, column
/// by column, d(d+1)/2 coordinates whose L2 sensitivity is `sensitivity`) with discrete Gaussian
/// noise, mirrored below the diagonal. The noise is reported in the same order.
pub fn gaussian_symmetric_release(
    rng: &mut dyn RngCore,
    a: &mut Matrix,
    sensitivity: f64,
    sd: f64,
) -> Result<Release, LatticeError> {
    let d = a.nrows().min(a.ncols());
    let mut upper: Vec<f64> = Vec::with_capacity(d * (d + 1) / 2);
    for j in 0..d {
        for i in 0..=j {
            upper.push(a[(i, j)]);
        }
    }
    let release = gaussian_release(rng, &mut upper, sensitivity, sd)?;
    let mut values = upper.into_iter();
    for j in 0..d {
        for i in 0..=j {
            let v = values.next().unwrap_or(f64::NAN);
            a[(i, j)] = v;
            a[(j, i)] = v;
        }
    }
    Ok(release)
}

/// What one release drew: the noise added to each coordinate and the scale actually used (the
/// sd for Gaussian noise, the scale b for Laplace noise; never below the calibrated one).
#[derive(Debug, Clone)]
pub struct Release {
    pub scale: f64,
    /// The grid step h: the released values and the noise are multiples of it.
    pub grid: f64,
    pub noise: Vec<f64>,
}

#[cfg(test)]
#[path = "noise_tests.rs"]
mod tests;
