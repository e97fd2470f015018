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
//! `charge_units` and `budget_units` are total: a NaN, infinite or negative charge saturates to
//! `i64::MAX` (never admitted) and such a budget becomes 0 (admits nothing). Callers that want
//! an error instead use the `checked_*` functions.

use super::PrivacyError;

/// One ledger unit of ρ.
pub const RHO_UNIT: f64 = 1e-12;
/// One ledger unit of δ.
pub const DELTA_UNIT: f64 = 1e-18;
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

/// Units back to a real value. Divides by the number of units per 1 (an exact integer for our
/// units), so that 2·10¹¹ units of 1e-12 read as 0.2, not 0.19999999999999998 as the product
/// `units × 1e-12` would: the quotient of two exact values is correctly rounded.
pub fn from_units(units: i64, unit: f64) -> f64 {
    units as f64 / (1.0 / unit).round()
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

/// A ρ **charge** in units (rounded up), after checking that ρ is finite and in [0, MAX_RHO].
pub fn checked_rho_units(value: f64) -> Result<i64, PrivacyError> {
    check_rho(value).map(|v| charge_units(v, RHO_UNIT))
}

/// A δ **charge** in units (rounded up), after checking that δ is finite and in [0, 1).
pub fn checked_delta_units(value: f64) -> Result<i64, PrivacyError> {
    check_delta(value).map(|v| charge_units(v, DELTA_UNIT))
}

/// A ρ **budget** in units (rounded down), after checking that ρ is finite and in [0, MAX_RHO].
pub fn checked_rho_budget_units(value: f64) -> Result<i64, PrivacyError> {
    check_rho(value).map(|v| budget_units(v, RHO_UNIT))
}

/// A δ **budget** in units (rounded down), after checking that δ is finite and in [0, 1).
pub fn checked_delta_budget_units(value: f64) -> Result<i64, PrivacyError> {
    check_delta(value).map(|v| budget_units(v, DELTA_UNIT))
}

#[cfg(test)]
#[path = "units_tests.rs"]
mod tests;
