//! The ledger's integer units. Spending is stored as integers so that sums are exact and
//! admission is a comparison of integers. Every conversion rounds against the user: charges
//! up, budgets down (docs/design/privacy.md §2).
//!
//! Decimal inputs such as ρ = 0.1 are not exact in binary floating point; a value whose
//! quotient by the unit lies within [`SNAP`] (64 ulps, relative) of a non-zero integer is taken
//! as that integer before rounding, so that a budget of 1.0 holds exactly ten charges of 0.1.
//! Beyond that snap, charges round up to the next unit and budgets round down. Consequences,
//! checked by the tests:
//! - a charge c costs `charge_units(c)·unit ≥ c·(1 − 1.5e-14)` (the snap, 1.42e-14, plus two
//!   roundings of the division and the product): the snap may forgive at most 1.5e-14 of a
//!   charge, far below the accuracy with which any noise scale is computed;
//! - a positive charge always costs at least one unit (nothing snaps to 0 but 0 itself);
//! - admitted charges sum to at most `B·(1 + 3e-14)` for a budget B (proptest: `B·(1 + 1e-12)`).
//!
//! Amounts travel as [`RhoUnits`] and [`DeltaUnits`], from the store to the site client; the
//! functions on bare `i64` below are their arithmetic, generic over the unit.
//!
//! `charge_units` and `budget_units` are total: a NaN, infinite or negative charge saturates to
//! `i64::MAX` (never admitted) and such a budget becomes 0 (admits nothing). Callers that want
//! an error instead use `checked_charge` and `checked_budget`.

use serde::Serialize;

use super::PrivacyError;

/// Ledger units in one ρ: the one statement of the unit's size (exact in f64).
const RHO_UNITS_IN_ONE: f64 = 1e12;
/// Ledger units in one δ (exact in f64; `1.0 / 1e-18` is not: it is 1e18 − 128).
const DELTA_UNITS_IN_ONE: f64 = 1e18;
/// One ledger unit of ρ, 1e-12.
pub const RHO_UNIT: f64 = 1.0 / RHO_UNITS_IN_ONE;
/// One ledger unit of δ, 1e-18.
pub const DELTA_UNIT: f64 = 1.0 / DELTA_UNITS_IN_ONE;
/// Largest ρ budget (and charge) a dataset may have: 1e18 units, so that `spent + charge` of two
/// amounts in range stays below `i64::MAX` ≈ 9.2e18 (and [`admits`] checks the sum anyway).
pub const MAX_RHO: f64 = 1e6;

/// Tolerance for snapping to the grid, relative to the value in units (64 ulps ≈ 1.42e-14).
pub const SNAP: f64 = 64.0 * f64::EPSILON;

/// `value / unit`, snapped to the nearest non-zero integer when within [`SNAP`] of it.
fn scaled(value: f64, unit: f64) -> f64 {
    let x = value / unit;
    let nearest = x.round();
    if (x - nearest).abs() <= SNAP * nearest.abs() {
        nearest
    } else {
        x
    }
}

/// A charge in units, rounded up. A NaN, infinite or negative charge (a bug upstream) saturates
/// to `i64::MAX`, which no budget admits; values above the i64 range saturate likewise.
pub fn charge_units(value: f64, unit: f64) -> i64 {
    if !(value >= 0.0 && value.is_finite()) {
        return i64::MAX;
    }
    // `as` saturates at i64::MAX for values beyond the range.
    scaled(value, unit).ceil() as i64
}

/// A budget in units, rounded down. A NaN, infinite or negative budget becomes 0 (admits
/// nothing).
pub fn budget_units(value: f64, unit: f64) -> i64 {
    if !(value >= 0.0 && value.is_finite()) {
        return 0;
    }
    scaled(value, unit).floor() as i64
}

/// Units back to a real value. Divides by the number of units in one (an exact integer), so
/// that 2·10¹¹ units of 1e-12 read as 0.2, not 0.19999999999999998 as the product
/// `units × 1e-12` would: the quotient of two exact values is correctly rounded.
fn from_units(units: i64, units_in_one: f64) -> f64 {
    units as f64 / units_in_one
}

/// The ledger's admission rule, `spent + charge <= budget`, without overflow: a sum beyond
/// `i64::MAX` or a negative amount is refused.
pub fn admits(spent: i64, charge: i64, budget: i64) -> bool {
    if spent < 0 || charge < 0 {
        return false;
    }
    spent.checked_add(charge).is_some_and(|total| total <= budget)
}

/// ρ as a ledger amount: finite, in [0, MAX_RHO].
pub(super) fn check_rho(value: f64) -> Result<f64, PrivacyError> {
    if (0.0..=MAX_RHO).contains(&value) {
        Ok(value)
    } else {
        Err(PrivacyError::Range {
            quantity: "rho",
            value,
            range: "[0, 1e6]",
        })
    }
}

/// δ as a ledger amount: finite, in [0, 1).
pub(super) fn check_delta(value: f64) -> Result<f64, PrivacyError> {
    if (0.0..1.0).contains(&value) {
        Ok(value)
    } else {
        Err(PrivacyError::Range {
            quantity: "delta",
            value,
            range: "[0, 1)",
        })
    }
}

/// The ledger amounts: one newtype per quantity, so that ρ units never meet δ units and a
/// count of units never passes for a real value. The database and the JSON views see the inner
/// `i64` (`.0`, serialised transparently); conversions go through the methods below.
macro_rules! ledger_amount {
    ($name:ident, $unit:ident, $in_one:ident, $check:ident, $what:literal) => {
        #[doc = concat!("An amount of ", $what, " in ledger units of [`", stringify!($unit), "`].")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
        #[serde(transparent)]
        pub struct $name(pub i64);

        impl $name {
            /// No units.
            pub const ZERO: $name = $name(0);

            /// A charge of `real`, rounded **up** (see [`charge_units`]: total, saturating).
            pub fn charge(real: f64) -> $name {
                $name(charge_units(real, $unit))
            }

            /// A budget of `real`, rounded **down** (see [`budget_units`]: total, 0 for invalid).
            pub fn budget(real: f64) -> $name {
                $name(budget_units(real, $unit))
            }

            /// A charge of `real` (rounded up), after checking that it is a valid amount.
            pub fn checked_charge(real: f64) -> Result<$name, PrivacyError> {
                $check(real).map($name::charge)
            }

            /// A budget of `real` (rounded down), after checking that it is a valid amount.
            pub fn checked_budget(real: f64) -> Result<$name, PrivacyError> {
                $check(real).map($name::budget)
            }

            /// The real value: the units divided by the (exact) number of units in one, so
            /// that 2·10¹¹ ρ units read as 0.2, not 0.19999999999999998.
            pub fn to_real(self) -> f64 {
                from_units(self.0, $in_one)
            }

            /// The sum, or `None` on overflow.
            pub fn checked_add(self, other: $name) -> Option<$name> {
                self.0.checked_add(other.0).map($name)
            }

            /// Whether `charge` fits on top of `spent` within this budget (see [`admits`]).
            pub fn admits(self, spent: $name, charge: $name) -> bool {
                admits(spent.0, charge.0, self.0)
            }
        }

        impl std::ops::Sub for $name {
            type Output = $name;
            fn sub(self, other: $name) -> $name {
                $name(self.0 - other.0)
            }
        }
    };
}

ledger_amount!(RhoUnits, RHO_UNIT, RHO_UNITS_IN_ONE, check_rho, "ρ");
ledger_amount!(DeltaUnits, DELTA_UNIT, DELTA_UNITS_IN_ONE, check_delta, "δ");

impl RhoUnits {
    /// Whether this is a valid ρ budget for a dataset: positive and at most [`MAX_RHO`].
    pub fn is_valid_budget(self) -> bool {
        self.0 > 0 && self <= RhoUnits::budget(MAX_RHO)
    }
}

impl DeltaUnits {
    /// Whether this is a valid δ budget for a dataset: in [0, 1).
    pub fn is_valid_budget(self) -> bool {
        self.0 >= 0 && self < DeltaUnits::budget(1.0)
    }
}

#[cfg(test)]
#[path = "units_tests.rs"]
mod tests;
