//! What a job's (ε, δ) target promises, and what a cost achieves (docs/design/privacy.md §2.4).
//!
//! A target stated as (ε, δ) is a promise about the whole job, whatever algorithm runs. A cost
//! is (ε, δ)-DP by the rule that fits it:
//!
//! - **Gaussian-only** (no other ρ, no δ): all its releases are Gaussian mechanisms with noise
//!   fixed before the run, so they compose to one Gaussian with μ = sqrt(2ρ) (Dong–Roth–Su
//!   2019, Cor. 3.3); the job is (ε, δ)-DP iff the exact curve has δ(ε; μ) ≤ δ (Balle & Wang
//!   2018). At (1, 1e-5): ρ up to 0.0359.
//! - **otherwise**: δ-approximate ρ-zCDP with approximate δ_j is (ε, δ_j + δ')-DP when the CKS
//!   2020 conversion of ρ at δ' is ≤ ε; the job is (ε, δ)-DP iff that holds at δ' = δ − δ_j.
//!
//! [`within`] states that rule, [`achieved`] reports the (ε, δ) a cost amounts to, and
//! [`calibrations`] lists the ρ targets an algorithm is tried at, in order: the exact Gaussian
//! maximum, the CKS conversion at δ (no approximate parts), and the CKS conversion at the half
//! of δ the approximate parts leave (they get the other half, [`APPROXIMATE_SHARE`]).

use serde::Serialize;

use super::gaussian_curve::{delta_upper, epsilon_for, max_gaussian_rho, mu_of_rho};
use super::units::RhoUnits;
use super::{Cost, Delta, Epsilon, PrivacyTarget, epsilon_delta_to_rho, rho_to_epsilon};

/// The share of a job's δ given to its approximate-DP parts (stability histograms); the rest
/// is the δ at which ρ converts to ε. Both sides use their δ only through ln(1/δ): halving
/// either moves it by ln 2, about 6 % of ln(1/δ) at δ = 1e-5, so an even split keeps both
/// within that of what they would get alone.
pub const APPROXIMATE_SHARE: f64 = 0.5;

/// Whether `cost` is (ε, δ)-DP by the rules of the module docs.
pub fn within(cost: &Cost, epsilon: f64, delta: f64) -> bool {
    if !(cost.rho >= 0.0 && cost.delta >= 0.0 && cost.other_rho >= 0.0) {
        return false;
    }
    if cost.rho == 0.0 {
        return cost.delta <= delta;
    }
    if cost.is_gaussian_only() {
        return delta_upper(epsilon, mu_of_rho(cost.rho)) <= delta;
    }
    match Delta::new(delta - cost.delta) {
        Ok(left) => rho_to_epsilon(cost.rho, left) <= epsilon,
        Err(_) => false,
    }
}

/// The (ε, δ) a cost amounts to, stated at a given δ.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Achieved {
    /// The smallest ε (rounded up) for which the whole cost is (ε, `delta`)-DP: by the exact
    /// Gaussian curve when every part is Gaussian, else by CKS 2020 at `delta` minus the
    /// approximate δ spent.
    pub epsilon: f64,
    /// The δ of the statement: the job's stated δ (or the display δ); when the approximate δ
    /// spent is not below it, that δ plus the approximate δ.
    pub delta: f64,
}

/// The (ε, δ) that `cost` achieves, stated at `delta` when the approximate δ spent leaves room
/// for a conversion, else at `delta` + the approximate δ.
pub fn achieved(cost: &Cost, delta: f64) -> Achieved {
    let Ok(at) = Delta::new(delta) else {
        return Achieved {
            epsilon: f64::INFINITY,
            delta,
        };
    };
    if cost.rho == 0.0 {
        return Achieved {
            epsilon: 0.0,
            delta: delta.max(cost.delta),
        };
    }
    if cost.is_gaussian_only() {
        return Achieved {
            epsilon: epsilon_for(mu_of_rho(cost.rho), delta),
            delta,
        };
    }
    match Delta::new(delta - cost.delta) {
        Ok(left) => Achieved {
            epsilon: rho_to_epsilon(cost.rho, left),
            delta,
        },
        Err(_) => Achieved {
            epsilon: rho_to_epsilon(cost.rho, at),
            delta: delta + cost.delta,
        },
    }
}

/// A ρ rounded down to the ledger's units, one unit below: a cost calibrated to it is charged
/// (in units, rounded up) no more than the certified ρ, so what the ledger shows stays within
/// the target too.
fn below_in_units(rho: f64) -> f64 {
    RhoUnits((RhoUnits::budget(rho).0 - 1).max(0)).to_real()
}

/// The ρ targets an algorithm is calibrated to for a job stated as (ε, δ), in the order they
/// are tried (docs/design/privacy.md §2.4); the first configuration whose cost is [`within`]
/// (ε, δ) runs:
/// 1. the exact Gaussian maximum at (ε, δ) with no δ for approximate parts (Gaussian-only
///    algorithms: 0.0359 at (1, 1e-5));
/// 2. the CKS conversion at δ with no δ for approximate parts (other zCDP algorithms: 0.0306);
/// 3. the CKS conversion at δ/2, with δ/2 for approximate parts (`k_dp_pca`: 0.0284).
pub fn calibrations(epsilon: Epsilon, delta: Delta) -> [PrivacyTarget; 3] {
    let gaussian = max_gaussian_rho(epsilon.get(), delta.get());
    let zcdp = epsilon_delta_to_rho(epsilon, delta);
    let share = delta.get() * APPROXIMATE_SHARE;
    let approximate = Delta::new(delta.get() - share).map_or(0.0, |d| epsilon_delta_to_rho(epsilon, d));
    let rho_target = |rho: f64, delta: Option<f64>| PrivacyTarget {
        public_default: false,
        rho: below_in_units(rho),
        delta,
        epsilon: None,
    };
    [
        rho_target(gaussian, None),
        rho_target(zcdp, None),
        rho_target(approximate, Some(share)),
    ]
}

#[cfg(test)]
#[path = "target_tests.rs"]
mod tests;
