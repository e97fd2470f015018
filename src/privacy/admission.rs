//! The ledger's admission rule, as a pure function of integer amounts (docs/design/privacy.md §2).
//!
//! A budget is either stated in zCDP (ρ_max, with an optional cap δ_max on the δ of
//! approximate parts) or as (ε, δ). Spending is kept in the ledger's integer units in three
//! sums: all ρ, the part of it not spent by Gaussian mechanisms ("other"), and δ.
//!
//! - **zCDP budget** ([`Rule::Zcdp`]): admit iff Σρ ≤ ρ_max and Σδ ≤ δ_max, in units.
//! - **(ε, δ) budget** with no other ρ and no δ spent, new charge included
//!   ([`Rule::ExactGaussian`]): the charges so far compose to one Gaussian mechanism with
//!   μ = sqrt(2Σρ) (Dong–Roth–Su 2019); admit iff its exact curve (Balle & Wang 2018) has
//!   δ(ε; μ) ≤ δ. At (1, 1e-5) that allows Σρ up to 0.0359.
//! - **(ε, δ) budget otherwise** ([`Rule::Cks`]): admit iff the CKS 2020 conversion of Σρ at
//!   δ − Σδ_j is ≤ ε (0.0306 at (1, 1e-5) with no δ spent). CKS is sound for any zCDP
//!   mechanism, so it may also admit a Gaussian-only sequence; the exact rule is tried first.
//!
//! Both conditions are monotone in every sum, so admitting a job is one conditional update of
//! the sums; the store re-checks the sums it read in the same statement (compare-and-set).
//!
//! Rounding: charges are rounded up to units before they get here, so the real spend is at
//! most `units × unit`; the converted totals are nudged up once more for the division.

use serde::Serialize;

use super::gaussian_curve::{delta_upper, max_gaussian_rho, mu_of_rho};
use super::units::{DELTA_UNIT, RHO_UNIT, admits, budget_units, from_units};
use super::{Delta, rho_to_epsilon};

/// Nudge for converting a units total back to a real amount: one division's rounding, with
/// a wide margin.
const UP: f64 = 1.0 + 8.0 * f64::EPSILON;

/// A dataset's budget, as the admission rule sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Budget {
    /// ρ_max and δ_max in units.
    Zcdp { rho_units: i64, delta_units: i64 },
    /// The owner's stated (ε, δ).
    EpsilonDelta { epsilon: f64, delta: f64 },
}

/// Amounts in ledger units: a dataset's spending, or one charge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Spending {
    /// All ρ.
    pub rho_units: i64,
    /// The part of `rho_units` not spent by Gaussian mechanisms.
    pub other_rho_units: i64,
    /// δ of approximate-DP parts.
    pub delta_units: i64,
}

impl Spending {
    /// The sum, or `None` on overflow or a negative amount.
    pub fn checked_add(self, other: Spending) -> Option<Spending> {
        let parts = [
            self.rho_units,
            self.other_rho_units,
            self.delta_units,
            other.rho_units,
            other.other_rho_units,
            other.delta_units,
        ];
        if parts.iter().any(|&p| p < 0) {
            return None;
        }
        Some(Spending {
            rho_units: self.rho_units.checked_add(other.rho_units)?,
            other_rho_units: self.other_rho_units.checked_add(other.other_rho_units)?,
            delta_units: self.delta_units.checked_add(other.delta_units)?,
        })
    }

    /// Whether every part is Gaussian (the exact curve applies).
    pub fn is_gaussian_only(&self) -> bool {
        self.other_rho_units == 0 && self.delta_units == 0
    }

    /// The units of a job's [`super::Cost`]: ρ and δ rounded up; the non-Gaussian part rounded
    /// up, at least one unit whenever it is positive (so that it can never round away), and never
    /// more than ρ's units (which the schema requires).
    pub fn of_cost(cost: &super::Cost) -> Spending {
        let rho_units = super::units::charge_units(cost.rho, RHO_UNIT);
        let delta_units = super::units::charge_units(cost.delta, DELTA_UNIT);
        // other_rho ≤ rho, so its rounded-up units never exceed ρ's; a δ-only part needs no
        // flag here (δ > 0 already excludes the exact curve).
        let other_rho_units = if cost.other_rho > 0.0 {
            super::units::charge_units(cost.other_rho, RHO_UNIT)
                .max(1)
                .min(rho_units)
        } else {
            0
        };
        Spending {
            rho_units,
            other_rho_units,
            delta_units,
        }
    }
}

/// Which rule admitted a charge (shown in the ledger).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// ρ_max/δ_max of a zCDP budget.
    Zcdp,
    /// The exact Gaussian curve of an (ε, δ) budget.
    ExactGaussian,
    /// The CKS 2020 conversion of an (ε, δ) budget.
    Cks,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::Zcdp => "zcdp",
            Rule::ExactGaussian => "exact_gaussian",
            Rule::Cks => "cks",
        }
    }

    pub fn parse(s: &str) -> Option<Rule> {
        match s {
            "zcdp" => Some(Rule::Zcdp),
            "exact_gaussian" => Some(Rule::ExactGaussian),
            "cks" => Some(Rule::Cks),
            _ => None,
        }
    }
}

/// Whether total spending `total` (charges so far plus the new one) fits `budget`, and under
/// which rule. `None`: refused.
pub fn admit_total(budget: &Budget, total: Spending) -> Option<Rule> {
    match *budget {
        Budget::Zcdp {
            rho_units,
            delta_units,
        } => (admits(0, total.rho_units, rho_units) && admits(0, total.delta_units, delta_units))
            .then_some(Rule::Zcdp),
        Budget::EpsilonDelta { epsilon, delta } => {
            if total.rho_units < 0 || total.other_rho_units < 0 || total.delta_units < 0 {
                return None;
            }
            let rho = from_units(total.rho_units, RHO_UNIT) * UP;
            if total.is_gaussian_only() && delta_upper(epsilon, mu_of_rho(rho)) <= delta {
                return Some(Rule::ExactGaussian);
            }
            let available = delta - from_units(total.delta_units, DELTA_UNIT) * UP;
            let Ok(available) = Delta::new(available) else {
                return None;
            };
            (rho_to_epsilon(rho, available) <= epsilon).then_some(Rule::Cks)
        }
    }
}

/// Whether `charge` fits on top of `spent`, and under which rule.
pub fn admit(budget: &Budget, spent: Spending, charge: Spending) -> Option<Rule> {
    admit_total(budget, spent.checked_add(charge)?)
}

/// The largest ρ (units) a **Gaussian-only** total could reach under `budget`, given the δ and
/// other ρ already spent: what is left for Gaussian jobs is this minus the ρ spent. Used to
/// show the remaining budget and, at creation, as the dataset's ρ ceiling (with nothing spent
/// it is the exact-Gaussian maximum, the largest any rule admits).
pub fn rho_capacity_units(budget: &Budget, spent: Spending) -> i64 {
    match *budget {
        Budget::Zcdp { rho_units, .. } => rho_units,
        Budget::EpsilonDelta { epsilon, delta } => {
            // Bisection on units: admission is monotone in the ρ total.
            let fits = |units: i64| {
                admit_total(
                    budget,
                    Spending {
                        rho_units: units,
                        ..spent
                    },
                )
                .is_some()
            };
            let mut hi = budget_units(max_gaussian_rho(epsilon, delta), RHO_UNIT).saturating_add(2);
            if fits(hi) {
                return hi;
            }
            let mut lo = 0_i64;
            if !fits(lo) {
                return 0;
            }
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if fits(mid) {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            lo
        }
    }
}

#[cfg(test)]
#[path = "admission_tests.rs"]
mod tests;
