//! The ledger's integer units. Spending is stored as integers so that sums are exact and
//! admission is a comparison of integers. Every conversion rounds against the user: charges
//! up, budgets down (privacy.md §2).
//!
//! Decimal inputs such as ρ = 0.1 are not exact in binary floating point; a value that lies
//! within 64 ulps of a grid point is taken as that grid point before rounding, so that a
//! budget of 1.0 holds exactly ten charges of 0.1. Beyond that snap (a relative error of at
//! most 1.5e-14, below the accuracy with which any noise scale is computed), charges round up
//! to the next unit and budgets round down.

/// One ledger unit of ρ.
pub const RHO_UNIT: f64 = 1e-12;
/// One ledger unit of δ.
pub const DELTA_UNIT: f64 = 1e-18;
/// Largest ρ budget (and charge) a dataset may have; keeps unit sums far from i64 overflow.
pub const MAX_RHO: f64 = 1e6;

/// Tolerance for snapping to the grid, relative to the value in units.
const SNAP: f64 = 64.0 * f64::EPSILON;

fn scaled(value: f64, unit: f64) -> f64 {
    let x = value / unit;
    let nearest = x.round();
    if (x - nearest).abs() <= SNAP * nearest.abs().max(1.0) { nearest } else { x }
}

/// A charge in units, rounded up. `value` must be finite and ≥ 0 (callers validate).
pub fn charge_units(value: f64, unit: f64) -> i64 {
    scaled(value, unit).ceil() as i64
}

/// A budget in units, rounded down. `value` must be finite and ≥ 0 (callers validate).
pub fn budget_units(value: f64, unit: f64) -> i64 {
    scaled(value, unit).floor().max(0.0) as i64
}

/// Units back to a real value (for display only; never used for admission).
pub fn from_units(units: i64, unit: f64) -> f64 {
    units as f64 * unit
}
