//! Parsed privacy quantities and the cost of a job.

use serde::{Deserialize, Serialize};

/// A privacy quantity was out of range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PrivacyError {
    #[error("rho must be a finite number > 0 (got {0})")]
    Rho(f64),
    #[error("epsilon must be a finite number > 0 (got {0})")]
    Epsilon(f64),
    #[error("delta must lie in the open interval (0, 1) (got {0})")]
    Delta(f64),
    #[error("{0}")]
    Other(String),
}

/// zCDP parameter ρ: finite and strictly positive.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize)]
pub struct Rho(f64);

impl Rho {
    pub fn new(value: f64) -> Result<Self, PrivacyError> {
        // Positive form so that NaN is rejected.
        if value > 0.0 && value.is_finite() {
            Ok(Self(value))
        } else {
            Err(PrivacyError::Rho(value))
        }
    }
    pub fn get(self) -> f64 {
        self.0
    }
}

/// Pure-DP parameter ε: finite and strictly positive.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize)]
pub struct Epsilon(f64);

impl Epsilon {
    pub fn new(value: f64) -> Result<Self, PrivacyError> {
        if value > 0.0 && value.is_finite() {
            Ok(Self(value))
        } else {
            Err(PrivacyError::Epsilon(value))
        }
    }
    pub fn get(self) -> f64 {
        self.0
    }
}

/// Approximate-DP parameter δ ∈ (0, 1).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize)]
pub struct Delta(f64);

impl Delta {
    pub fn new(value: f64) -> Result<Self, PrivacyError> {
        if value > 0.0 && value < 1.0 {
            Ok(Self(value))
        } else {
            Err(PrivacyError::Delta(value))
        }
    }
    pub fn get(self) -> f64 {
        self.0
    }
}

/// What a job is allowed to spend, as the analyst stated it and normalised to zCDP.
///
/// `rho` is the zCDP budget of the job. `delta` is the approximate-DP δ the job may spend on
/// (ε, δ)-DP subroutines (stability histograms); algorithms that are pure zCDP ignore it and
/// charge δ = 0.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PrivacyTarget {
    pub rho: f64,
    pub delta: Option<f64>,
}

impl PrivacyTarget {
    /// A target stated directly as ρ (and optionally the δ approximate parts may use).
    pub fn from_rho(rho: Rho, delta: Option<Delta>) -> Self {
        Self { rho: rho.get(), delta: delta.map(Delta::get) }
    }

    /// A target stated as (ε, δ): converted to ρ with the inverse of Bun–Steinke Prop. 1.3
    /// (see [`crate::privacy::convert::epsilon_delta_to_rho`]); δ stays available to
    /// approximate parts.
    pub fn from_epsilon_delta(epsilon: Epsilon, delta: Delta) -> Self {
        Self { rho: super::epsilon_delta_to_rho(epsilon, delta), delta: Some(delta.get()) }
    }
}

/// The privacy cost of a job: δ-approximate ρ-zCDP.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Cost {
    pub rho: f64,
    pub delta: f64,
}

impl Cost {
    pub const ZERO: Cost = Cost { rho: 0.0, delta: 0.0 };

    pub fn zcdp(rho: f64) -> Self {
        Self { rho, delta: 0.0 }
    }

    /// Cost of the Gaussian mechanism with L2 sensitivity `sensitivity` and per-coordinate
    /// noise standard deviation `sd`: ρ = Δ² / (2 s²) (Bun & Steinke 2016, Prop. 1.6).
    pub fn gaussian(sensitivity: f64, sd: f64) -> Self {
        Self::zcdp(sensitivity * sensitivity / (2.0 * sd * sd))
    }

    /// An ε-DP mechanism is (ε²/2)-zCDP (Bun & Steinke 2016, Prop. 1.4).
    pub fn pure(epsilon: f64) -> Self {
        Self::zcdp(epsilon * epsilon / 2.0)
    }

    /// An (ε, δ)-DP subroutine, charged as δ-approximate (ε²/2)-zCDP (privacy.md §2).
    pub fn approximate(epsilon: f64, delta: f64) -> Self {
        Self { rho: epsilon * epsilon / 2.0, delta }
    }

    /// Sequential (adaptive) composition: ρ's add, δ's add.
    pub fn then(self, other: Cost) -> Cost {
        Cost { rho: self.rho + other.rho, delta: self.delta + other.delta }
    }

    /// Parallel composition over disjoint parts of the records: the maximum.
    pub fn parallel(self, other: Cost) -> Cost {
        Cost { rho: self.rho.max(other.rho), delta: self.delta.max(other.delta) }
    }

    /// Sequential composition of many costs (a fold of [`Cost::then`]).
    pub fn sum(costs: impl IntoIterator<Item = Cost>) -> Cost {
        costs.into_iter().fold(Cost::ZERO, Cost::then)
    }
}
