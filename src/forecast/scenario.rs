//! A spectrum scenario (issue 41, "Interface") and the synthetic records drawn from it.
//!
//! The scenario means rows x ~ N(0, U·diag(λ)·Uᵀ): the stated eigenvalues λ₁, …, λ_r followed
//! by the noise floor f up to d, U a uniformly random rotation, rows clipped to β as uploads
//! clip ([`crate::linalg::clip::clip_columns_l2`]). Only the first r columns U_r of U matter:
//! the covariance is U_r·diag(λ)·U_rᵀ + f·(I − U_r·U_rᵀ), so a row is
//!
//!   x = U_r·(√λ ⊙ z₁) + √f·(z₂ − U_r·U_rᵀ·z₂),   z₁ ~ N(0, I_r), z₂ ~ N(0, I_d),
//!
//! O(d·r) work per row instead of the O(d²) of a full rotation, and U_r is the Q factor of a
//! d×r Gaussian matrix with the signs of R's diagonal made positive, which is uniform on the
//! Stiefel manifold (Mezzadri 2007, §5).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rand_distr::StandardNormal;
use rayon::prelude::*;

use crate::linalg::clip::clip_columns_l2;
use crate::linalg::{Matrix, thin_qr_q};

/// The largest number of stated eigenvalues (the rest of the spectrum is the noise floor).
pub const MAX_STATED: usize = 100;

/// A validated spectrum scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    eigenvalues: Vec<f64>,
    noise_floor: f64,
}

/// Why a scenario is not one.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ScenarioError {
    /// The field at fault, relative to the scenario object.
    pub field: &'static str,
    pub message: String,
}

fn bad(field: &'static str, message: impl Into<String>) -> ScenarioError {
    ScenarioError {
        field,
        message: message.into(),
    }
}

impl Scenario {
    /// Checks the stated eigenvalues (1 to min(d, [`MAX_STATED`]) of them, finite, ≥ 0) and the
    /// noise floor (finite, ≥ 0) for `d` features; the spectrum must not be all zero.
    pub fn new(eigenvalues: Vec<f64>, noise_floor: f64, d: usize) -> Result<Self, ScenarioError> {
        if eigenvalues.is_empty() {
            return Err(bad("eigenvalues", "state at least one eigenvalue"));
        }
        let most = d.min(MAX_STATED);
        if eigenvalues.len() > most {
            return Err(bad(
                "eigenvalues",
                format!(
                    "at most {most} eigenvalues (min of d = {d} and {MAX_STATED}); the noise floor covers the rest"
                ),
            ));
        }
        if let Some(i) = eigenvalues.iter().position(|v| !(v.is_finite() && *v >= 0.0)) {
            return Err(bad(
                "eigenvalues",
                format!("eigenvalue {i} must be a finite number ≥ 0"),
            ));
        }
        if !(noise_floor.is_finite() && noise_floor >= 0.0) {
            return Err(bad("noise_floor", "must be a finite number ≥ 0"));
        }
        if eigenvalues.iter().all(|v| *v == 0.0) && (noise_floor == 0.0 || eigenvalues.len() == d) {
            return Err(bad(
                "eigenvalues",
                "the spectrum is all zero: there is nothing to capture",
            ));
        }
        Ok(Self {
            eigenvalues,
            noise_floor,
        })
    }

    pub fn eigenvalues(&self) -> &[f64] {
        &self.eigenvalues
    }

    pub fn noise_floor(&self) -> f64 {
        self.noise_floor
    }

    /// `m` records of `d` features drawn from the scenario and clipped to `beta`, as Xᵀ (d×m),
    /// reproducible from `seed` (and independent of the thread count: each block of columns has
    /// its own stream).
    pub fn draw(&self, d: usize, m: usize, beta: f64, seed: u64) -> Matrix {
        let r = self.eigenvalues.len();
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let g = Matrix::from_fn(d, r, |_, _| rng.sample::<f64, _>(StandardNormal));
        let u = signed_q(&g);
        let scales: Vec<f64> = self.eigenvalues.iter().map(|v| v.sqrt()).collect();
        let floor = self.noise_floor.sqrt();
        let mut xt = Matrix::zeros(d, m);
        const BLOCK: usize = 512;
        xt.as_mut_slice()
            .par_chunks_mut(d * BLOCK)
            .enumerate()
            .for_each(|(b, block)| {
                let mut rng = ChaCha20Rng::seed_from_u64(seed);
                rng.set_stream(1 + b as u64);
                let cols = block.len() / d;
                let z1 = Matrix::from_fn(r, cols, |i, _| scales[i] * rng.sample::<f64, _>(StandardNormal));
                let mut z2 = Matrix::from_fn(d, cols, |_, _| floor * rng.sample::<f64, _>(StandardNormal));
                // z₂ − U·(Uᵀz₂) + U·(√λ ⊙ z₁) = z₂ + U·(√λ ⊙ z₁ − Uᵀz₂).
                let mut coefficients = z1;
                coefficients -= u.transpose() * &z2;
                z2 += &u * coefficients;
                block.copy_from_slice(z2.as_slice());
            });
        clip_columns_l2(&mut xt, beta);
        xt
    }
}

/// The Q factor of `g` with its columns' signs chosen so that R's diagonal is positive: Haar
/// distributed when `g` is Gaussian.
fn signed_q(g: &Matrix) -> Matrix {
    let mut q = thin_qr_q(g);
    for j in 0..q.ncols() {
        // R's diagonal entry j is q_jᵀ g_j.
        if q.column(j).dot(&g.column(j)) < 0.0 {
            q.column_mut(j).neg_mut();
        }
    }
    q
}
