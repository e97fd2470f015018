//! The environment a run draws randomness from and reports progress to.

use rand::RngCore;

use super::RunError;
use crate::linalg::Matrix;
use crate::privacy::lattice::{GaussianLattice, LatticeError};
use crate::privacy::noise::{self, NoiseAudit, NoiseDraw, Release};

/// A calibration the grid cannot hold (non-positive or out-of-range scale or sensitivity) is a
/// clean failure; the message names only public parameters.
fn calibration(e: LatticeError) -> RunError {
    RunError::Failed(format!("noise calibration: {e}"))
}

/// The job was cancelled while running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled;

/// Randomness, noise and progress for one run. Mechanisms draw all their noise through the
/// `*_release` methods, which report each draw to the audit when one is attached (tests).
pub struct RunEnv<'a> {
    rng: &'a mut dyn RngCore,
    progress: &'a mut dyn FnMut(u32, u32) -> Result<(), Cancelled>,
    audit: Option<&'a mut dyn NoiseAudit>,
    released: Vec<(&'static str, serde_json::Value)>,
}

impl<'a> RunEnv<'a> {
    pub fn new(
        rng: &'a mut dyn RngCore,
        progress: &'a mut dyn FnMut(u32, u32) -> Result<(), Cancelled>,
    ) -> Self {
        Self {
            rng,
            progress,
            audit: None,
            released: Vec::new(),
        }
    }

    /// Record a named DP release that is returned with the result (e.g. the adaptive clip
    /// norm, a federated run's achieved noise level, tensor components). Only DP values, their
    /// post-processing, or public facts may be recorded (docs/design/privacy.md §3).
    pub fn record_release(&mut self, name: &'static str, value: impl Into<serde_json::Value>) {
        self.released.push((name, value.into()));
    }

    /// The releases recorded so far, in order.
    pub fn released(&self) -> &[(&'static str, serde_json::Value)] {
        &self.released
    }

    /// Attach an audit that sees every noise draw (tests and experiments only).
    pub fn with_audit(mut self, audit: &'a mut dyn NoiseAudit) -> Self {
        self.audit = Some(audit);
        self
    }

    /// Randomness that is not privacy noise (initial iterates, permutations).
    pub fn rng(&mut self) -> &mut dyn RngCore {
        self.rng
    }

    /// Report progress (`done` of `total` steps); returns `Err(Cancelled)` when the job has
    /// been cancelled, which the algorithm must propagate.
    pub fn progress(&mut self, done: u32, total: u32) -> Result<(), Cancelled> {
        (self.progress)(done, total)
    }

    fn audit(
        &mut self,
        label: &'static str,
        distribution: &'static str,
        scale: f64,
        grid: f64,
        values: Vec<f64>,
    ) {
        if let Some(audit) = self.audit.as_deref_mut() {
            audit.record(NoiseDraw {
                label,
                distribution,
                scale,
                grid,
                values,
            });
        }
    }

    fn audited(&mut self, label: &'static str, distribution: &'static str, release: Release) {
        if self.audit.is_some() {
            self.audit(label, distribution, release.scale, release.grid, release.noise);
        }
    }

    /// Releases `query` (any shape; its L2 sensitivity, over all entries, is `sensitivity`) with
    /// discrete Gaussian noise calibrated to sd `sd` (cost ρ = Δ²/(2·sd²)); see
    /// [`crate::privacy::noise::gaussian_release`].
    pub fn gaussian_release(
        &mut self,
        label: &'static str,
        mut query: Matrix,
        sensitivity: f64,
        sd: f64,
    ) -> Result<Matrix, RunError> {
        let release =
            noise::gaussian_release(self.rng, query.as_mut_slice(), sensitivity, sd).map_err(calibration)?;
        self.audited(label, "gaussian", release);
        Ok(query)
    }

    /// Releases one block of a release drawn in several calls whose L2 sensitivity is stated
    /// over all `coordinates` of it (e.g. the stacked messages of all agents).
    pub fn gaussian_block_release(
        &mut self,
        label: &'static str,
        mut query: Matrix,
        sensitivity: f64,
        sd: f64,
        coordinates: usize,
    ) -> Result<Matrix, RunError> {
        let release =
            noise::gaussian_block_release(self.rng, query.as_mut_slice(), sensitivity, sd, coordinates)
                .map_err(calibration)?;
        self.audited(label, "gaussian", release);
        Ok(query)
    }

    /// `len` integer draws from `lattice`'s discrete Gaussian, for mechanisms that assemble
    /// their release on the grid themselves (CAPE). The audit sees h·Z.
    pub fn lattice_gaussian_noise(
        &mut self,
        label: &'static str,
        lattice: &GaussianLattice,
        len: usize,
    ) -> Vec<i128> {
        let draws: Vec<i128> = (0..len).map(|_| lattice.sample(self.rng)).collect();
        if self.audit.is_some() {
            let values = draws.iter().map(|z| *z as f64 * lattice.grid()).collect();
            self.audit(label, "gaussian", lattice.sd(), lattice.grid(), values);
        }
        draws
    }

    /// Releases the symmetric matrix `a` through its upper triangle (diagonal included; L2
    /// sensitivity of those d(d+1)/2 entries `sensitivity`), mirrored below the diagonal.
    pub fn gaussian_symmetric_release(
        &mut self,
        label: &'static str,
        mut a: Matrix,
        sensitivity: f64,
        sd: f64,
    ) -> Result<Matrix, RunError> {
        let release =
            noise::gaussian_symmetric_release(self.rng, &mut a, sensitivity, sd).map_err(calibration)?;
        self.audited(label, "gaussian", release);
        Ok(a)
    }

    /// Releases one number with discrete Gaussian noise.
    pub fn gaussian_scalar_release(
        &mut self,
        label: &'static str,
        value: f64,
        sensitivity: f64,
        sd: f64,
    ) -> Result<f64, RunError> {
        let mut query = [value];
        let release = noise::gaussian_release(self.rng, &mut query, sensitivity, sd).map_err(calibration)?;
        self.audited(label, "gaussian", release);
        Ok(query[0])
    }

    /// Releases one number with discrete Laplace noise calibrated to scale `b` (ε = Δ₁/b).
    pub fn laplace_scalar_release(
        &mut self,
        label: &'static str,
        value: f64,
        sensitivity: f64,
        b: f64,
    ) -> Result<f64, RunError> {
        let mut query = vec![value];
        query = self.laplace_vector_release(label, query, sensitivity, b)?;
        Ok(query[0])
    }

    /// Releases `values` (L1 sensitivity `sensitivity` over all of them) with discrete Laplace
    /// noise calibrated to scale `b`, reported to the audit as one batch.
    pub fn laplace_vector_release(
        &mut self,
        label: &'static str,
        mut values: Vec<f64>,
        sensitivity: f64,
        b: f64,
    ) -> Result<Vec<f64>, RunError> {
        let release = noise::laplace_release(self.rng, &mut values, sensitivity, b).map_err(calibration)?;
        self.audited(label, "laplace", release);
        Ok(values)
    }

    /// Releases integer counts (e.g. histogram bins; their number may depend on the data) with
    /// discrete Laplace noise on a grid that divides 1, so the counts need no rounding and the
    /// scale does not depend on how many there are. `counts` must hold integers.
    pub fn laplace_count_release(
        &mut self,
        label: &'static str,
        mut counts: Vec<f64>,
        sensitivity: f64,
        b: f64,
    ) -> Result<Vec<f64>, RunError> {
        let release =
            noise::laplace_count_release(self.rng, &mut counts, sensitivity, b).map_err(calibration)?;
        self.audited(label, "laplace", release);
        Ok(counts)
    }

    /// One draw of the exponential mechanism on the unit sphere of R^q whose score is the
    /// quadratic form Σ_j μ_j y_j², μ = `scores` (the eigenvalues of the score matrix, y in its
    /// eigenbasis): density ∝ exp(concentration·Σ_j μ_j y_j²), a Bingham distribution sampled
    /// exactly by [`super::bingham`]. The audit sees the drawn unit vector y (distribution
    /// "bingham", scale = the concentration).
    pub fn bingham_noise(
        &mut self,
        label: &'static str,
        scores: &[f64],
        concentration: f64,
    ) -> Result<super::bingham::BinghamDraw, super::bingham::BinghamError> {
        let bingham = super::bingham::Bingham::exponential_mechanism(scores, concentration)?;
        let draw = bingham.sample(self.rng)?;
        if self.audit.is_some() {
            self.audit(label, "bingham", concentration, 0.0, draw.direction.clone());
        }
        Ok(draw)
    }
}
