//! Noise samplers. Every random perturbation a mechanism adds goes through these functions, so
//! that tests can audit the noise actually drawn against the calibrated scale.
//!
//! Limitation (privacy.md §4): these are floating-point samplers, which leak through their low
//! bits (Mironov 2012). The hardened target is a discrete-Gaussian sampler on a grid.

use rand::RngCore;
use rand_distr::{Distribution, StandardNormal};

use crate::linalg::Matrix;

/// One batch of noise drawn by a mechanism, as seen by an audit.
#[derive(Debug, Clone)]
pub struct NoiseDraw {
    /// Which release of the algorithm this is (e.g. "power_iteration").
    pub label: &'static str,
    /// "gaussian" or "laplace".
    pub distribution: &'static str,
    /// The scale the mechanism used: the standard deviation for Gaussian noise, the scale b
    /// for Laplace noise.
    pub scale: f64,
    /// The noise values that were added (column-major for matrices; for a symmetric matrix,
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

/// One draw from N(0, sd²). `sd` is the calibrated scale (finite, > 0); callers obtain it from
/// [`crate::privacy::plan::gaussian_sd`] or an algorithm's calibration, never from the data.
pub fn gaussian(rng: &mut dyn RngCore, sd: f64) -> f64 {
    let z: f64 = StandardNormal.sample(rng);
    sd * z
}

/// One draw from Laplace(0, b): density exp(-|x|/b) / (2b).
pub fn laplace(rng: &mut dyn RngCore, b: f64) -> f64 {
    // Difference of two independent Exp(1) variables is Laplace(0, 1).
    let e1: f64 = rand_distr::Exp1.sample(rng);
    let e2: f64 = rand_distr::Exp1.sample(rng);
    b * (e1 - e2)
}

/// A rows×cols matrix of iid N(0, sd²) entries.
pub fn gaussian_matrix(rng: &mut dyn RngCore, rows: usize, cols: usize, sd: f64) -> Matrix {
    Matrix::from_fn(rows, cols, |_, _| gaussian(rng, sd))
}

/// A symmetric d×d matrix whose upper triangle (diagonal included) is iid N(0, sd²), mirrored
/// below the diagonal. Returns the matrix and the independent draws (upper triangle, column by
/// column) for auditing.
pub fn gaussian_symmetric(rng: &mut dyn RngCore, d: usize, sd: f64) -> (Matrix, Vec<f64>) {
    let mut e = Matrix::zeros(d, d);
    let mut draws = Vec::with_capacity(d * (d + 1) / 2);
    for j in 0..d {
        for i in 0..=j {
            let v = gaussian(rng, sd);
            e[(i, j)] = v;
            e[(j, i)] = v;
            draws.push(v);
        }
    }
    (e, draws)
}

#[cfg(test)]
#[path = "noise_tests.rs"]
mod tests;
