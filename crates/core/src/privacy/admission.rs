//! The ledger's admission rule, as a pure function of integer amounts (docs/design/privacy.md
//! §2.6).
//!
//! A budget is either stated in zCDP (ρ_max, with an optional cap δ_max on the δ of
//! approximate parts) or as (ε, δ). Spending is kept in the ledger's integer units in three
//! sums: all ρ, the part of it not spent by Gaussian mechanisms ("other"), and δ.
//!
//! - **zCDP budget** ([`Rule::Zcdp`]): admit iff Σρ ≤ ρ_max and Σδ ≤ δ_max, in units.
//! - **(ε, δ) budget**: a union bound over two filters (privacy.md §2.6). The δ is split
//!   into δ_A = δ/2 for the exact Gaussian curve and δ_B = δ/2 for CKS, of which a fixed cap
//!   δ_cap = δ/10 ([`APPROXIMATE_DELTA_SHARE`]) is all the approximate parts may ever spend:
//!   - totals with no other ρ and no δ, new charge included ([`Rule::ExactGaussian`]): admit
//!     iff the exact curve of one Gaussian with μ = sqrt(2Σρ) (Dong–Roth–Su 2019; Balle &
//!     Wang 2018) has δ(ε; μ) ≤ δ_A, or the CKS condition below holds. At (1, 1e-5): 0.0331.
//!   - otherwise ([`Rule::Cks`]): Σδ_j ≤ δ_cap and the CKS 2020 conversion of Σρ at
//!     δ_B − δ_cap is ≤ ε. At (1, 1e-5): 0.0278.
//!
//!   For every adaptive strategy, the transcripts that end Gaussian-only beyond the CKS
//!   capacity are those of a Gaussian-DP filter at δ_A (Smith & Thakurta 2022), all others
//!   those of a zCDP filter with fixed caps at δ_B (Feldman & Zrnic 2021; Whitehouse et al.
//!   2023), so the whole interaction is (ε, δ_A + δ_B)-DP. The caps must not depend on the
//!   path: a δ cap that moved with the δ_j spent on each path would not be covered (the
//!   tests show a tree that breaks the certificate under such a rule and under the old
//!   "exact at δ, else CKS at δ − Σδ_j" rule).
//!
//! Both conditions are monotone in every sum, so admitting a job is one conditional update of
//! the sums; the store re-checks the sums it read in the same statement (compare-and-set).
//!
//! Rounding: charges are rounded up to units before they get here, so the real spend is at
//! most `units × unit`; the converted totals are nudged up once more for the division.

use serde::Serialize;

use super::gaussian_curve::{delta_upper, max_gaussian_rho, mu_of_rho};
use super::units::{DeltaUnits, RhoUnits};
use super::{Delta, rho_to_epsilon};

/// Nudge for converting a units total back to a real amount: one division's rounding, with
/// a wide margin.
const UP: f64 = 1.0 + 8.0 * f64::EPSILON;

/// δ_A / δ: the share of an (ε, δ) budget's δ that the exact-Gaussian filter uses; δ_B, the
/// rest, goes to the CKS filter (privacy.md §2.6).
pub const EXACT_DELTA_SHARE: f64 = 0.5;

/// δ_cap / δ: the fixed share of an (ε, δ) budget's δ that approximate-DP parts (stability
/// histograms) may spend in total; it comes out of δ_B, so CKS converts at δ_B − δ_cap. Fixed
/// per dataset, never per path (privacy.md §2.6): a tenth costs mixed sequences about 2 % of
/// their ρ (0.0278 instead of 0.0284 at (1, 1e-5)) and leaves room for `k_dp_pca` jobs whose
/// stated δ is up to δ/5 (they give half of it to their histograms).
pub const APPROXIMATE_DELTA_SHARE: f64 = 0.1;

/// The three δ's of an (ε, δ) budget: (δ_A, δ at which CKS converts, δ_cap).
pub fn delta_split(delta: f64) -> (f64, f64, f64) {
    let exact = delta * EXACT_DELTA_SHARE;
    let cap = delta * APPROXIMATE_DELTA_SHARE;
    // δ_B − δ_cap, computed from δ so that δ_A + δ_conv + δ_cap ≤ δ holds after rounding.
    let conversion = (delta - exact - cap) * (1.0 - 4.0 * f64::EPSILON);
    (exact, conversion, cap)
}

/// The δ units approximate parts may spend in total under `budget`.
pub fn delta_capacity_units(budget: &Budget) -> DeltaUnits {
    match *budget {
        Budget::Zcdp { delta_units, .. } => delta_units,
        Budget::EpsilonDelta { delta, .. } => DeltaUnits::budget(delta_split(delta).2),
    }
}

/// A dataset's budget, as the admission rule sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Budget {
    /// ρ_max and δ_max in units.
    Zcdp {
        rho_units: RhoUnits,
        delta_units: DeltaUnits,
    },
    /// The owner's stated (ε, δ).
    EpsilonDelta { epsilon: f64, delta: f64 },
}

/// Amounts in ledger units: a dataset's spending, or one charge (a job's cost). This is what
/// travels between pricing, the store and the views.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Spending {
    /// All ρ.
    pub rho_units: RhoUnits,
    /// The part of `rho_units` not spent by Gaussian mechanisms.
    pub other_rho_units: RhoUnits,
    /// δ of approximate-DP parts.
    pub delta_units: DeltaUnits,
}

impl Spending {
    /// The sum, or `None` on overflow or a negative amount.
    pub fn checked_add(self, other: Spending) -> Option<Spending> {
        if self.has_negative() || other.has_negative() {
            return None;
        }
        Some(Spending {
            rho_units: self.rho_units.checked_add(other.rho_units)?,
            other_rho_units: self.other_rho_units.checked_add(other.other_rho_units)?,
            delta_units: self.delta_units.checked_add(other.delta_units)?,
        })
    }

    /// Whether any part is below zero (never a valid amount).
    pub fn has_negative(&self) -> bool {
        self.rho_units.0 < 0 || self.other_rho_units.0 < 0 || self.delta_units.0 < 0
    }

    /// Whether every part is Gaussian (the exact curve applies).
    pub fn is_gaussian_only(&self) -> bool {
        self.other_rho_units == RhoUnits::ZERO && self.delta_units == DeltaUnits::ZERO
    }

    /// The units of a job's [`super::Cost`]: ρ and δ rounded up; the non-Gaussian part rounded
    /// up, at least one unit whenever it is positive (so that it can never round away), and never
    /// more than ρ's units (which the schema requires).
    pub fn of_cost(cost: &super::Cost) -> Spending {
        let rho_units = RhoUnits::charge(cost.rho);
        let delta_units = DeltaUnits::charge(cost.delta);
        // other_rho ≤ rho, so its rounded-up units never exceed ρ's; a δ-only part needs no
        // flag here (δ > 0 already excludes the exact curve).
        let other_rho_units = if cost.other_rho > 0.0 {
            RhoUnits::charge(cost.other_rho).max(RhoUnits(1)).min(rho_units)
        } else {
            RhoUnits::ZERO
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
        } => (rho_units.admits(RhoUnits::ZERO, total.rho_units)
            && delta_units.admits(DeltaUnits::ZERO, total.delta_units))
        .then_some(Rule::Zcdp),
        Budget::EpsilonDelta { epsilon, delta } => {
            if total.has_negative() {
                return None;
            }
            let (exact, conversion, _) = delta_split(delta);
            if !delta_capacity_units(budget).admits(DeltaUnits::ZERO, total.delta_units) {
                return None;
            }
            let rho = total.rho_units.to_real() * UP;
            let Ok(conversion) = Delta::new(conversion) else {
                return None;
            };
            let cks = rho_to_epsilon(rho, conversion) <= epsilon;
            if total.is_gaussian_only() {
                // Gaussian-only: inside the CKS capacity (filter B) or beyond it, by the exact
                // curve at δ_A (filter A).
                return (cks || delta_upper(epsilon, mu_of_rho(rho)) <= exact).then_some(Rule::ExactGaussian);
            }
            cks.then_some(Rule::Cks)
        }
    }
}

/// Whether `charge` fits on top of `spent`, and under which rule.
pub fn admit(budget: &Budget, spent: Spending, charge: Spending) -> Option<Rule> {
    admit_total(budget, spent.checked_add(charge)?)
}

/// The largest ρ (units) a **Gaussian-only** total could reach under `budget`, given the δ and
/// other ρ already spent: what is left for Gaussian jobs is this minus the ρ spent (the caller
/// clamps at 0: a dataset that spent under an older, looser rule may be above it). Used to show
/// the remaining budget. It never exceeds the dataset's stored ceiling for an (ε, δ) budget,
/// `max_gaussian_rho(ε, δ)` (the exact curve at the whole δ), which the bisection starts from.
pub fn rho_capacity_units(budget: &Budget, spent: Spending) -> RhoUnits {
    match *budget {
        Budget::Zcdp { rho_units, .. } => rho_units,
        Budget::EpsilonDelta { epsilon, delta } => {
            // Bisection on units: admission is monotone in the ρ total.
            let fits = |units: i64| {
                admit_total(
                    budget,
                    Spending {
                        rho_units: RhoUnits(units),
                        ..spent
                    },
                )
                .is_some()
            };
            let mut hi = RhoUnits::budget(max_gaussian_rho(epsilon, delta))
                .0
                .saturating_add(2);
            if fits(hi) {
                return RhoUnits(hi);
            }
            let mut lo = 0_i64;
            if !fits(lo) {
                return RhoUnits::ZERO;
            }
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if fits(mid) {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            RhoUnits(lo)
        }
    }
}

#[cfg(test)]
#[path = "admission_tests.rs"]
mod tests;
