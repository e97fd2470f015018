//! The environment a run draws randomness from and reports progress to.

use rand::RngCore;

use crate::linalg::Matrix;
use crate::privacy::noise::{self, NoiseAudit, NoiseDraw};

/// The job was cancelled while running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled;

/// Randomness, noise and progress for one run. Mechanisms draw all their noise through the
/// `*_noise` methods, which report each draw to the audit when one is attached (tests).
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
    /// post-processing, or public facts may be recorded (privacy.md §3).
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

    fn audit(&mut self, label: &'static str, distribution: &'static str, scale: f64, values: Vec<f64>) {
        if let Some(audit) = self.audit.as_deref_mut() {
            audit.record(NoiseDraw {
                label,
                distribution,
                scale,
                values,
            });
        }
    }

    /// A rows×cols matrix of iid N(0, sd²) noise.
    pub fn gaussian_noise(&mut self, label: &'static str, rows: usize, cols: usize, sd: f64) -> Matrix {
        let g = noise::gaussian_matrix(self.rng, rows, cols, sd);
        if self.audit.is_some() {
            self.audit(label, "gaussian", sd, g.as_slice().to_vec());
        }
        g
    }

    /// A symmetric d×d noise matrix with iid N(0, sd²) upper triangle (diagonal included).
    pub fn gaussian_symmetric_noise(&mut self, label: &'static str, d: usize, sd: f64) -> Matrix {
        let (e, draws) = noise::gaussian_symmetric(self.rng, d, sd);
        self.audit(label, "gaussian", sd, draws);
        e
    }

    /// One draw of N(0, sd²) noise.
    pub fn gaussian_scalar_noise(&mut self, label: &'static str, sd: f64) -> f64 {
        let v = noise::gaussian(self.rng, sd);
        self.audit(label, "gaussian", sd, vec![v]);
        v
    }

    /// One draw of Laplace(0, b) noise.
    pub fn laplace_noise(&mut self, label: &'static str, b: f64) -> f64 {
        let v = noise::laplace(self.rng, b);
        self.audit(label, "laplace", b, vec![v]);
        v
    }

    /// `len` iid draws of Laplace(0, b) noise, reported to the audit as one batch.
    pub fn laplace_vector_noise(&mut self, label: &'static str, len: usize, b: f64) -> Vec<f64> {
        let values: Vec<f64> = (0..len).map(|_| noise::laplace(self.rng, b)).collect();
        if self.audit.is_some() {
            self.audit(label, "laplace", b, values.clone());
        }
        values
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
            self.audit(label, "bingham", concentration, draw.direction.clone());
        }
        Ok(draw)
    }
}
