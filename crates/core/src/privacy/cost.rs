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
    /// An amount for the ledger (a charge or a budget, where 0 is allowed) is out of range.
    #[error("{quantity} must be a finite number in {range} (got {value})")]
    Range {
        quantity: &'static str,
        value: f64,
        range: &'static str,
    },
    #[error("{0}")]
    Other(String),
}

/// Rounds a calibrated noise scale up, one ulp at a time, while the cost it gives still
/// `exceeds` the budget: a scale from its closed form can cost an ulp or two more than planned
/// in floating point, and calibration rounds against the user (docs/design/privacy.md §2).
pub fn round_up_while(mut scale: f64, exceeds: impl Fn(f64) -> bool) -> f64 {
    while exceeds(scale) {
        scale = scale.next_up();
    }
    scale
}

/// A privacy parameter: a newtype over `f64` whose constructor accepts the values for which
/// `$valid` holds (stated in positive form, so that NaN is rejected) and refuses the others
/// with the `PrivacyError` variant of the same name.
macro_rules! parameter {
    ($(#[$doc:meta])* $name:ident, |$value:ident| $valid:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize)]
        pub struct $name(f64);

        impl $name {
            pub fn new($value: f64) -> Result<Self, PrivacyError> {
                if $valid {
                    Ok(Self($value))
                } else {
                    Err(PrivacyError::$name($value))
                }
            }
            pub fn get(self) -> f64 {
                self.0
            }
        }
    };
}

parameter!(
    /// zCDP parameter ρ: finite and strictly positive.
    Rho,
    |value| value > 0.0 && value.is_finite()
);

parameter!(
    /// Pure-DP parameter ε: finite and strictly positive.
    Epsilon,
    |value| value > 0.0 && value.is_finite()
);

parameter!(
    /// Approximate-DP parameter δ ∈ (0, 1).
    Delta,
    |value| value > 0.0 && value < 1.0
);

/// What a job is allowed to spend, as the analyst stated it and normalised to zCDP.
///
/// `rho` is the zCDP budget of the job. `delta` is the approximate-DP δ the job may spend on
/// (ε, δ)-DP subroutines (stability histograms); algorithms that are pure zCDP ignore it and
/// charge δ = 0.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PrivacyTarget {
    pub rho: f64,
    pub delta: Option<f64>,
    /// The ε of a target stated as (ε, δ): a promise about the whole job. The registry
    /// calibrates the job to the ρ targets of [`super::target::calibrations`] and keeps the
    /// first whose cost is (ε, δ)-DP ([`super::target::within`]; docs/design/privacy.md §2.4).
    #[serde(default)]
    pub epsilon: Option<f64>,
    /// Set only by the service, for a job on a public dataset that states no privacy target:
    /// it is then priced at the public default ρ (`app::pricing::PUBLIC_DEFAULT_PRIVACY`), and an
    /// algorithm may run with no noise at all (`noisy_power` does, and only then may stop when
    /// it has converged; docs/design/algorithms.md). False for every stated target.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub public_default: bool,
}

impl PrivacyTarget {
    /// A target stated directly as ρ (and optionally the δ approximate parts may use).
    pub fn from_rho(rho: Rho, delta: Option<Delta>) -> Self {
        Self {
            rho: rho.get(),
            delta: delta.map(Delta::get),
            epsilon: None,
            public_default: false,
        }
    }

    /// A target stated as (ε, δ); `rho` is the CKS 2020 conversion at δ (see
    /// [`crate::privacy::convert::epsilon_delta_to_rho`]), what algorithms that are neither
    /// Gaussian-only nor approximate are calibrated to.
    pub fn from_epsilon_delta(epsilon: Epsilon, delta: Delta) -> Self {
        Self {
            rho: super::epsilon_delta_to_rho(epsilon, delta),
            delta: Some(delta.get()),
            epsilon: Some(epsilon.get()),
            public_default: false,
        }
    }
}

/// The privacy cost of a job: δ-approximate ρ-zCDP.
///
/// `other_rho` is the part of `rho` that does **not** come from Gaussian mechanisms
/// (0 ≤ it ≤ `rho`). A composition of Gaussian mechanisms alone is exactly one Gaussian
/// mechanism (μ-GDP with μ = sqrt(2Σρ), Dong–Roth–Su 2019), which the ledger's tight rule for
/// (ε, δ) budgets uses (docs/design/privacy.md §2). Keeping the non-Gaussian part (rather than the Gaussian
/// one) means a tiny non-Gaussian charge can never be absorbed by rounding: `other_rho > 0`
/// survives any sum. Anything not known to be Gaussian counts as other ρ.
///
/// The constructors are total and conservative: parameters for which no finite guarantee holds
/// (NaN, a zero or negative noise scale, an infinite sensitivity) give an infinite cost, which
/// the ledger refuses (see [`Cost::check`] and [`crate::privacy::units`]). Composition
/// propagates NaN rather than dropping it.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Cost {
    pub rho: f64,
    pub delta: f64,
    /// The part of `rho` not spent by Gaussian mechanisms.
    pub other_rho: f64,
}

impl Cost {
    pub const ZERO: Cost = Cost {
        rho: 0.0,
        delta: 0.0,
        other_rho: 0.0,
    };

    /// A zCDP cost ρ (δ = 0) of a mechanism that is not Gaussian, or not known to be.
    pub fn zcdp(rho: f64) -> Self {
        Self {
            rho,
            delta: 0.0,
            other_rho: rho,
        }
    }

    /// The cost ρ of a composition of Gaussian mechanisms only (e.g. L noisy power iterations,
    /// ρ = L/(2s²)).
    pub fn gaussian_zcdp(rho: f64) -> Self {
        Self {
            other_rho: 0.0,
            ..Self::zcdp(rho)
        }
    }

    /// Whether every part of this cost is a Gaussian mechanism (no δ, no other ρ): then the
    /// exact Gaussian curve applies to it.
    pub fn is_gaussian_only(&self) -> bool {
        self.delta == 0.0 && self.other_rho == 0.0
    }

    /// Cost of the Gaussian mechanism with L2 sensitivity `sensitivity` and per-coordinate
    /// noise standard deviation `sd`: ρ = Δ² / (2 s²) (Bun & Steinke 2016, Prop. 1.6).
    ///
    /// Δ = 0 costs nothing (the release does not depend on the data; any s ≥ 0), and s = +∞
    /// costs nothing; a negative, infinite or NaN Δ, or an s that is not > 0, costs +∞.
    pub fn gaussian(sensitivity: f64, sd: f64) -> Self {
        if sensitivity == 0.0 && sd >= 0.0 {
            return Self::ZERO;
        }
        if !(sensitivity >= 0.0 && sensitivity.is_finite() && sd > 0.0) {
            return Self::gaussian_zcdp(f64::INFINITY);
        }
        // (Δ/s)² / 2 rather than Δ²/(2s²): no spurious overflow or underflow of the squares.
        let ratio = sensitivity / sd;
        Self::gaussian_zcdp(ratio * ratio / 2.0)
    }

    /// An ε-DP mechanism is (ε²/2)-zCDP (Bun & Steinke 2016, Prop. 1.4). ε = 0 costs nothing;
    /// a negative or NaN ε costs +∞.
    pub fn pure(epsilon: f64) -> Self {
        Self::zcdp(half_square(epsilon))
    }

    /// An (ε, δ)-DP subroutine, charged as δ-approximate (ε²/2)-zCDP (docs/design/privacy.md §2). A
    /// negative or NaN ε costs ρ = +∞; a δ outside [0, 1] costs δ = +∞.
    pub fn approximate(epsilon: f64, delta: f64) -> Self {
        let delta = if (0.0..=1.0).contains(&delta) {
            delta
        } else {
            f64::INFINITY
        };
        let rho = half_square(epsilon);
        Self {
            rho,
            delta,
            other_rho: rho,
        }
    }

    /// The exponential mechanism with parameter ε (score sensitivity Δ, concentration ε/(2Δ),
    /// or ε/Δ for a monotone score) has bounded range, so it is (ε²/8)-zCDP (Cesar & Rogers
    /// 2021; docs/design/privacy.md §2). Charge each draw separately and add the ρ's. A negative or NaN ε
    /// costs +∞.
    pub fn exponential_mechanism(epsilon: f64) -> Self {
        Self::zcdp(half_square(epsilon) / 4.0)
    }

    /// Sequential (adaptive) composition: ρ's add, δ's add.
    pub fn then(self, other: Cost) -> Cost {
        Cost {
            rho: self.rho + other.rho,
            delta: self.delta + other.delta,
            other_rho: self.other_rho + other.other_rho,
        }
    }

    /// Parallel composition over disjoint parts of the records: the maximum. Unlike
    /// [`f64::max`], a NaN on either side gives NaN (it must not be silently dropped).
    pub fn parallel(self, other: Cost) -> Cost {
        // Each part bounds the same records' loss; the non-Gaussian share of the maximum is at
        // most the larger non-Gaussian share, so the result is Gaussian-only iff both parts are.
        Cost {
            rho: nan_max(self.rho, other.rho),
            delta: nan_max(self.delta, other.delta),
            other_rho: nan_max(self.other_rho, other.other_rho),
        }
    }

    /// Sequential composition of many costs (a fold of [`Cost::then`]).
    pub fn sum(costs: impl IntoIterator<Item = Cost>) -> Cost {
        costs.into_iter().fold(Cost::ZERO, Cost::then)
    }

    /// The cost, if it is a chargeable amount: ρ finite in [0, MAX_RHO] and δ finite in
    /// [0, 1). Deserialised or composed costs should pass through this before reaching the
    /// ledger.
    pub fn check(self) -> Result<Cost, PrivacyError> {
        super::units::check_rho(self.rho)?;
        super::units::check_delta(self.delta)?;
        if !(0.0..=self.rho).contains(&self.other_rho) {
            return Err(PrivacyError::Range {
                quantity: "other_rho",
                value: self.other_rho,
                range: "[0, rho]",
            });
        }
        Ok(self)
    }
}

/// ε²/2 for ε ≥ 0 (including +∞); +∞ for a negative or NaN ε.
fn half_square(epsilon: f64) -> f64 {
    if epsilon >= 0.0 {
        epsilon * epsilon / 2.0
    } else {
        f64::INFINITY
    }
}

/// The maximum, propagating NaN.
fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

#[cfg(test)]
#[path = "cost_tests.rs"]
mod tests;
