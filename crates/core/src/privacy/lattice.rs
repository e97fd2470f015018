//! Releases on a grid: the query is rounded to the grid h·Z and integer noise is added, so the
//! released value is h·(round(q/h) + Z) and every bit of it is a function of two integers.
//! Design notes and the derivation: `docs/design/noise.md`.
//!
//! **Grid.** h = 2^(⌊log₂ s⌋ − [`GRID_BITS`]) for the calibrated noise scale s (σ or b): a power
//! of two, so q/h and h·k are exact in floating point, and s/h ∈ [2³⁰, 2³¹). The grid is a
//! function of public parameters only.
//!
//! **Sensitivity rounded up to the grid.** Rounding each of the m coordinates to the nearest
//! grid point moves it by at most h/2, so for neighbours x, x' the integer vectors k = round(q/h)
//! satisfy ‖k(x) − k(x')‖₂ ≤ Δ₂/h + √m and ‖k(x) − k(x')‖₁ ≤ Δ₁/h + m. Saturating k at the i64
//! range (i128) is a 1-Lipschitz clamp and changes neither bound.
//!
//! **Gaussian** (zCDP). CKS 2020 Thm. 14 (multivariate discrete Gaussian): if k has integer
//! L2 sensitivity at most Δ_Z, then k + Z with Z_j iid N_Z(0, σ_Z²) is (Δ_Z²/(2σ_Z²))-zCDP. The
//! mechanism was charged ρ = Δ₂²/(2σ²) for a noise sd σ, so we take
//! σ_Z ≥ σ·(1 + √m·h/Δ₂)/h, which gives Δ_Z²/(2σ_Z²) ≤ (Δ₂ + √m·h)²/(2σ²(1 + √m·h/Δ₂)²) = ρ:
//! the ledger's charge is never under-stated. σ_Z² is rounded up to an integer t·m (see
//! [`super::discrete`]); the floating-point steps before it carry an upward margin of 2⁻⁴⁰,
//! far above their rounding error (a few units of 2⁻⁵³).
//!
//! **Laplace** (pure DP). The discrete Laplace with integer scale t on an integer query of L1
//! sensitivity Δ_Z is (Δ_Z/t)-DP (the geometric mechanism, Ghosh–Roughgarden–Sundararajan 2009;
//! CKS 2020 §1). The mechanism was charged ε = Δ₁/b, so t ≥ b·(1 + m·h/Δ₁)/h.
//!
//! The utility cost is the factor 1 + √m·h/Δ₂ on the noise (1 + m·h/Δ₁ for Laplace), with
//! h/σ ≤ 2⁻³⁰: for analyze_gauss at d = 1000 (m = 500 500) and ρ = 10⁻³ it is 1 + 1.5·10⁻⁵.

use super::discrete::{DiscreteGaussian, DiscreteLaplace};

/// Bits of the grid below the noise scale: s/h ∈ [2^GRID_BITS, 2^(GRID_BITS+1)).
pub const GRID_BITS: i32 = 30;

/// Upward safety margin on every floating-point quantity that sets a noise scale.
const MARGIN: f64 = 1.0 + 1.0 / (1u64 << 40) as f64;

/// A noise calibration that cannot be put on a grid.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LatticeError {
    #[error("the noise scale must be finite and > 0, got {0}")]
    Scale(f64),
    #[error("the sensitivity must be finite and > 0, got {0}")]
    Sensitivity(f64),
    #[error("the noise scale {0} is outside the range the grid supports")]
    Range(f64),
}

/// 2^e for e in the normal range, built from its bits (exact and the same on every machine).
fn power_of_two(e: i32) -> f64 {
    let e = e.clamp(-1022, 1023);
    f64::from_bits(((e + 1023) as u64) << 52)
}

/// ⌊log₂ s⌋ for a finite, positive, normal s, from its exponent bits.
fn floor_log2(s: f64) -> i32 {
    ((s.to_bits() >> 52) & 0x7ff) as i32 - 1023
}

/// The grid h for a noise scale s (σ or b): 2^(⌊log₂ s⌋ − GRID_BITS), at least 2⁻¹⁰²².
pub fn grid_for(scale: f64) -> Result<f64, LatticeError> {
    let valid = scale > 0.0 && scale.is_finite();
    if !valid {
        return Err(LatticeError::Scale(scale));
    }
    if !scale.is_normal() {
        return Err(LatticeError::Range(scale));
    }
    Ok(power_of_two(floor_log2(scale) - GRID_BITS))
}

fn check_sensitivity(sensitivity: f64) -> Result<(), LatticeError> {
    let valid = sensitivity > 0.0 && sensitivity.is_finite();
    if valid {
        Ok(())
    } else {
        Err(LatticeError::Sensitivity(sensitivity))
    }
}

/// round(q/h) as an integer, saturating at the i128 range (|q| up to 2⁹⁶·σ; NaN stays NaN:
/// `None`).
pub fn to_grid(q: f64, h: f64) -> Option<i128> {
    if q.is_nan() {
        return None;
    }
    Some((q / h).round() as i128)
}

/// h·(k + z) for a rounded query k and integer noise z; a NaN query stays NaN so that callers'
/// finiteness checks still fire.
pub fn release_value(k: Option<i128>, z: i128, h: f64) -> f64 {
    match k {
        Some(k) => k.saturating_add(z) as f64 * h,
        None => f64::NAN,
    }
}

/// Replaces each coordinate q of `query` by h·(round(q/h) + z) for a fresh integer draw z of
/// `noise`, and returns the noise h·z that was added, in order.
fn release_on_grid(h: f64, query: &mut [f64], mut noise: impl FnMut() -> i128) -> Vec<f64> {
    query
        .iter_mut()
        .map(|q| {
            let z = noise();
            *q = release_value(to_grid(*q, h), z, h);
            z as f64 * h
        })
        .collect()
}

/// The discrete Gaussian release of an m-coordinate query with L2 sensitivity Δ₂, calibrated
/// to the continuous mechanism's sd σ (the cost that was charged is ρ = Δ₂²/(2σ²)).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GaussianLattice {
    grid: f64,
    sampler: DiscreteGaussian,
}

impl GaussianLattice {
    pub fn new(sd: f64, sensitivity: f64, coordinates: usize) -> Result<Self, LatticeError> {
        let grid = grid_for(sd)?;
        check_sensitivity(sensitivity)?;
        let inflation = 1.0 + (coordinates.max(1) as f64).sqrt() * grid / sensitivity;
        Self::on_grid(sd * inflation, grid)
    }

    /// Noise of sd at least `sd` on the given grid, with no sensitivity penalty: for callers
    /// that account for the rounding themselves (CAPE widens all its terms at once).
    pub fn on_grid(sd: f64, grid: f64) -> Result<Self, LatticeError> {
        let valid = sd > 0.0 && sd.is_finite();
        if !valid {
            return Err(LatticeError::Scale(sd));
        }
        let grid_ok = grid > 0.0 && grid.is_normal();
        if !grid_ok {
            return Err(LatticeError::Range(sd));
        }
        let sd_z = sd / grid;
        let variance = (sd_z * sd_z * MARGIN).ceil();
        // DiscreteGaussian checks its own limit (t·m ≤ 2¹²⁵) on the rounded-up parameters.
        let fits = variance.is_finite() && variance < power_of_two(124);
        if !fits {
            return Err(LatticeError::Range(sd));
        }
        let sampler =
            DiscreteGaussian::with_variance_at_least(variance as u128).ok_or(LatticeError::Range(sd))?;
        Ok(Self { grid, sampler })
    }

    /// The grid step h.
    pub fn grid(&self) -> f64 {
        self.grid
    }

    /// The sd of the noise actually added, h·√(t·m) (≥ the calibrated σ).
    pub fn sd(&self) -> f64 {
        self.grid * (self.sampler.variance() as f64).sqrt()
    }

    /// One integer noise draw Z ~ N_Z(0, t·m).
    pub fn sample(&self, rng: &mut dyn rand::RngCore) -> i128 {
        self.sampler.sample(rng)
    }

    /// Replaces each coordinate q of `query` by h·(round(q/h) + Z) and returns the noise h·Z
    /// that was added, in order (for audits).
    pub fn release(&self, rng: &mut dyn rand::RngCore, query: &mut [f64]) -> Vec<f64> {
        release_on_grid(self.grid, query, || self.sampler.sample(rng))
    }
}

/// The discrete Laplace release of an m-coordinate query with L1 sensitivity Δ₁, calibrated to
/// the continuous mechanism's scale b (the cost that was charged is ε = Δ₁/b).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LaplaceLattice {
    grid: f64,
    sampler: DiscreteLaplace,
}

impl LaplaceLattice {
    pub fn new(scale: f64, sensitivity: f64, coordinates: usize) -> Result<Self, LatticeError> {
        let grid = grid_for(scale)?;
        check_sensitivity(sensitivity)?;
        let inflation = 1.0 + coordinates.max(1) as f64 * grid / sensitivity;
        Self::with_scale(scale * inflation, grid, scale)
    }

    /// For integer-valued queries: the grid is min(h, 1), a power of two that divides 1, so the
    /// queries are on the grid, round(q/h) = q/h exactly and Δ_Z = Δ₁/h: no penalty, and the
    /// scale does not depend on the number of coordinates.
    pub fn for_integers(scale: f64, sensitivity: f64) -> Result<Self, LatticeError> {
        let grid = grid_for(scale)?.min(1.0);
        check_sensitivity(sensitivity)?;
        Self::with_scale(scale, grid, scale)
    }

    /// Integer scale t = ⌈b/h⌉ (with the margin) on the grid h for a scale b that already
    /// carries any rounding penalty; errors name the calibrated `scale`.
    fn with_scale(b: f64, grid: f64, scale: f64) -> Result<Self, LatticeError> {
        let t = (b / grid * MARGIN).ceil();
        let fits = t.is_finite() && t < power_of_two(64);
        if !fits {
            return Err(LatticeError::Range(scale));
        }
        let sampler = DiscreteLaplace::new(t as u128).ok_or(LatticeError::Range(scale))?;
        Ok(Self { grid, sampler })
    }

    pub fn grid(&self) -> f64 {
        self.grid
    }

    /// The scale of the noise actually added, h·t (≥ the calibrated b).
    pub fn scale(&self) -> f64 {
        self.grid * self.sampler.scale() as f64
    }

    /// As [`GaussianLattice::release`], with discrete Laplace noise.
    pub fn release(&self, rng: &mut dyn rand::RngCore, query: &mut [f64]) -> Vec<f64> {
        release_on_grid(self.grid, query, || self.sampler.sample(rng))
    }
}

#[cfg(test)]
#[path = "lattice_tests.rs"]
mod tests;
