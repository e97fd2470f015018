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

/// How stated eigenvalues decay ([`decay_eigenvalues`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decay {
    /// λ_i = top·rate^(i−1), rate in (0, 1].
    Geometric,
    /// λ_i = top·i^(−rate), rate > 0 (at most [`MAX_POWER_LAW_EXPONENT`]).
    PowerLaw,
}

/// The largest power-law exponent a decay model takes: beyond it λ₂/λ₁ < 10⁻⁶, a spectrum of one
/// direction, which `eigenvalues: [top]` states more plainly.
pub const MAX_POWER_LAW_EXPONENT: f64 = 20.0;

/// The eigenvalues of a decay model: `count` (1 to [`MAX_STATED`]) of them, λ₁ = `top` > 0, the
/// rest following `model` with `rate`. The noise floor and d are checked with them by
/// [`Scenario::new`].
pub fn decay_eigenvalues(model: Decay, top: f64, rate: f64, count: usize) -> Result<Vec<f64>, ScenarioError> {
    if !(top.is_finite() && top > 0.0) {
        return Err(bad("decay.top", "must be a finite number > 0"));
    }
    if !(1..=MAX_STATED).contains(&count) {
        return Err(bad(
            "decay.count",
            format!(
                "between 1 and {MAX_STATED} eigenvalues (and at most d); the noise floor covers the rest"
            ),
        ));
    }
    match model {
        Decay::Geometric if rate > 0.0 && rate <= 1.0 => {
            Ok((0..count).map(|i| top * rate.powi(i as i32)).collect())
        }
        Decay::Geometric => Err(bad("decay.rate", "a geometric decay's ratio must lie in (0, 1]")),
        Decay::PowerLaw if rate > 0.0 && rate <= MAX_POWER_LAW_EXPONENT => {
            Ok((1..=count).map(|i| top * (i as f64).powf(-rate)).collect())
        }
        Decay::PowerLaw => Err(bad(
            "decay.rate",
            format!("a power law's exponent must lie in (0, {MAX_POWER_LAW_EXPONENT}]"),
        )),
    }
}

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
        self.draw_with_rotation(d, m, beta, seed).0
    }

    /// [`Scenario::draw`], with U_r, the d×r directions of the listed eigenvalues.
    fn draw_with_rotation(&self, d: usize, m: usize, beta: f64, seed: u64) -> (Matrix, Matrix) {
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
        (xt, u)
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

/// How many noise standard deviations a released eigenvalue must stand above zero to be
/// listed in a scenario from a private spectrum ([`Scenario::from_private_spectrum`]).
pub const SIGNAL_SDS: f64 = 3.0;

impl Scenario {
    /// The scenario a private spectrum states (issue 41, docs/design/forecast.md "A paid private
    /// spectrum"), by post-processing only: `released` are the d eigenvalue estimates of
    /// C = XᵀX/n in the order of the true spectrum (entry i estimates the i-th largest, each
    /// with independent noise of sd `sd`), not re-sorted.
    ///
    /// The first r entries are listed (clamped at 0, sorted), where r counts the estimates above
    /// [`SIGNAL_SDS`]·sd (at least 1, at most min(d, [`MAX_STATED`])), and the noise floor is
    /// the mean of the other d − r entries, clamped at 0: a fixed set of entries, so its sum
    /// is unbiased and its noise shrinks as 1/√(d − r), where sorting the noisy values and
    /// reading the tail off them would list the largest noise draws as eigenvalues.
    pub fn from_private_spectrum(released: &[f64], sd: f64) -> Result<Self, ScenarioError> {
        let d = released.len();
        if d == 0 || released.iter().any(|v| !v.is_finite()) || !(sd.is_finite() && sd >= 0.0) {
            return Err(bad("eigenvalues", "the private spectrum is empty or not finite"));
        }
        let above = released.iter().filter(|v| **v > SIGNAL_SDS * sd).count();
        let r = above.clamp(1, d.min(MAX_STATED));
        let mut listed: Vec<f64> = released[..r].iter().map(|v| v.max(0.0)).collect();
        listed.sort_by(|a, b| b.total_cmp(a));
        let rest = &released[r..];
        let floor = if rest.is_empty() {
            0.0
        } else {
            (rest.iter().sum::<f64>() / rest.len() as f64).max(0.0)
        };
        Self::new(listed, floor, d)
    }
}

/// The spectrum of clipped records `xt` (d×m) along the directions `u` (d×r) they were drawn
/// with: c_i = ‖Xu_i‖²/m for each listed direction, then the mean over the other d − r
/// directions, (‖X‖_F² − Σ_i ‖Xu_i‖²)/(m·(d − r)) (0 when r = d). Clipping scales each record,
/// so U's directions stay eigenvectors in expectation; O(m·d·r), no eigendecomposition.
pub fn spectrum_along(xt: &Matrix, u: &Matrix, d: usize) -> Vec<f64> {
    let m = xt.ncols().max(1) as f64;
    let projected = u.transpose() * xt;
    let mut values: Vec<f64> = projected.row_iter().map(|row| row.norm_squared() / m).collect();
    let listed: f64 = values.iter().sum();
    let total = xt.norm_squared() / m;
    let r = u.ncols();
    values.push(if r < d {
        ((total - listed) / (d - r) as f64).max(0.0)
    } else {
        0.0
    });
    values
}

/// Rounds of [`Scenario::matched_to_clip`]'s fixed point.
pub const MATCH_ROUNDS: usize = 20;
/// The exponent of each round's correction in [`Scenario::matched_to_clip`].
pub const MATCH_RELAXATION: f64 = 2.0;
/// Relative error at which [`Scenario::matched_to_clip`] stops early.
pub const MATCH_TOLERANCE: f64 = 0.01;
/// The largest share of β² a matched spectrum's trace may take (a clipped record has
/// ‖x‖² ≤ β², so tr C ≤ β²; a noisy estimate above is scaled down to this first).
pub const MATCH_MAX_TRACE: f64 = 0.98;

impl Scenario {
    /// The scenario whose records, once clipped to `beta`, have this scenario's spectrum (issue
    /// 41, docs/design/forecast.md "A paid private spectrum"). A private spectrum is the
    /// spectrum of records already clipped at upload; drawing Gaussian records with it and
    /// clipping them again would shrink it a second time (most where the records' norms reach
    /// β), and forecast too little. Clipping a Gaussian of covariance U·diag(s)·Uᵀ keeps U's
    /// directions as eigenvectors, so s is found by the fixed point s_i ← s_i·(t_i/c_i(s))^ω, where
    /// t is this scenario's spectrum and c(s) the spectrum of `m` clipped records drawn from s
    /// along its directions ([`spectrum_along`]; the floor as the mean of the rest), for up to
    /// [`MATCH_ROUNDS`] rounds or until every value is within [`MATCH_TOLERANCE`] (each correction
    /// raised to [`MATCH_RELAXATION`]).
    pub fn matched_to_clip(&self, d: usize, m: usize, beta: f64, seed: u64) -> Scenario {
        let r = self.eigenvalues.len();
        let mut target: Vec<f64> = self.eigenvalues.clone();
        target.push(if r < d { self.noise_floor } else { 0.0 });
        let trace: f64 = self.eigenvalues.iter().sum::<f64>() + self.noise_floor * (d - r.min(d)) as f64;
        let most = MATCH_MAX_TRACE * beta * beta;
        if trace > most && trace > 0.0 {
            target.iter_mut().for_each(|v| *v *= most / trace);
        }
        let mut current = Scenario {
            eigenvalues: target[..r].to_vec(),
            noise_floor: target[r],
        };
        for _ in 0..MATCH_ROUNDS {
            // The same seed every round: c(s) is then a smooth function of s and the fixed
            // point is not chasing sampling noise.
            let (xt, u) = current.draw_with_rotation(d, m, beta, seed);
            let got = spectrum_along(&xt, &u, d);
            let mut worst: f64 = 0.0;
            let mut next = current.clone();
            for (i, (want, have)) in target.iter().zip(&got).enumerate() {
                if *want <= 0.0 || *have <= 0.0 {
                    continue;
                }
                worst = worst.max((have / want - 1.0).abs());
                let value = if i < r {
                    &mut next.eigenvalues[i]
                } else {
                    &mut next.noise_floor
                };
                // Over-relaxed (the clip saturates as the scale grows, so plain ratios crawl
                // towards a trace near β²).
                *value *= (want / have).powf(MATCH_RELAXATION);
            }
            if worst < MATCH_TOLERANCE {
                break;
            }
            current = next;
        }
        current
    }
}
