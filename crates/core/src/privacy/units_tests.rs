//! Tests of the ledger's integer units: rounding direction, the snap, and admission.

use proptest::prelude::*;

use super::*;

/// Admits as many of `charges` as the rule allows, in order, then an adversarial last charge of
/// exactly the remaining units' real value; returns the real-valued sum of the admitted ones.
fn admitted_sum(budget: f64, charges: &[f64]) -> f64 {
    let budget_u = budget_units(budget, RHO_UNIT);
    let mut spent = 0_i64;
    let mut sum = 0.0;
    let mut admit = |c: f64, spent: &mut i64| {
        let units = charge_units(c, RHO_UNIT);
        if admits(*spent, units, budget_u) {
            *spent += units;
            sum += c;
        }
    };
    for &c in charges {
        admit(c, &mut spent);
    }
    let remainder = RhoUnits(budget_u - spent).to_real();
    admit(remainder, &mut spent);
    sum
}

#[test]
fn budget_of_one_holds_exactly_ten_charges_of_a_tenth() {
    let budget = budget_units(1.0, RHO_UNIT);
    let tenth = charge_units(0.1, RHO_UNIT);
    assert_eq!(budget, 1_000_000_000_000);
    assert_eq!(tenth, 100_000_000_000);
    let mut spent = 0;
    for i in 0..10 {
        assert!(admits(spent, tenth, budget), "charge {} refused", i + 1);
        spent += tenth;
    }
    assert!(
        !admits(spent, tenth, budget),
        "an 11th charge of 0.1 was admitted"
    );
    // Even the smallest positive charge is refused once the budget is used up.
    assert!(!admits(spent, charge_units(f64::from_bits(1), RHO_UNIT), budget));
}

#[test]
fn decimal_sums_that_float_addition_overshoots_still_fit() {
    // 0.1 + 0.1 + 0.1 = 0.30000000000000004 > 0.3 in f64, but three charges of 0.1 fit 0.3.
    let budget = budget_units(0.3, RHO_UNIT);
    assert_eq!(budget, 3 * charge_units(0.1, RHO_UNIT));
    assert_eq!(budget_units(0.7, RHO_UNIT), 7 * charge_units(0.1, RHO_UNIT));
    assert_eq!(
        budget_units(1e-5, DELTA_UNIT),
        10 * charge_units(1e-6, DELTA_UNIT)
    );
    // Quotients that are not integers in f64 and need the snap (values from python3):
    // 0.07 / 1e-12 = 70000000000.00002, 3e-8 / 1e-12 = 29999.999999999996,
    // 1e-6 / 1e-18 = 999999999999.9999.
    assert!(admits(
        0,
        charge_units(0.07, RHO_UNIT),
        budget_units(0.07, RHO_UNIT)
    ));
    assert_eq!(budget_units(3e-8, RHO_UNIT), 3 * charge_units(1e-8, RHO_UNIT));
    assert_eq!(budget_units(1e-6, DELTA_UNIT), 1_000_000_000_000);
}

#[test]
fn charges_round_up_and_budgets_round_down() {
    // 1.5 units: a charge costs 2, a budget holds 1.
    assert_eq!(charge_units(1.5e-12, RHO_UNIT), 2);
    assert_eq!(budget_units(1.5e-12, RHO_UNIT), 1);
    // 0.3 units beside a grid point (relative distance 3e-12 ≫ SNAP): no snapping.
    let v = 0.1 + 0.3e-12;
    assert_eq!(charge_units(v, RHO_UNIT), 100_000_000_001);
    assert_eq!(budget_units(v, RHO_UNIT), 100_000_000_000);
    // Within the snap (2e-16 relative): taken as the grid point both ways.
    let w = 0.1 * (1.0 + 2e-16);
    assert_eq!(charge_units(w, RHO_UNIT), 100_000_000_000);
    assert_eq!(budget_units(w, RHO_UNIT), 100_000_000_000);
    // A tiny positive charge costs a whole unit; it does not snap to 0.
    assert_eq!(charge_units(1e-27, RHO_UNIT), 1);
    assert_eq!(charge_units(f64::from_bits(1), DELTA_UNIT), 1);
    assert_eq!(budget_units(1e-27, RHO_UNIT), 0);
}

#[test]
fn zero_charge_is_zero_units() {
    assert_eq!(charge_units(0.0, RHO_UNIT), 0);
    assert_eq!(charge_units(-0.0, RHO_UNIT), 0);
    assert_eq!(RhoUnits::checked_charge(0.0), Ok(RhoUnits(0)));
    assert_eq!(DeltaUnits::checked_charge(0.0), Ok(DeltaUnits(0)));
    assert!(admits(0, 0, 0));
}

#[test]
fn invalid_amounts_are_never_free() {
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1e-300, -1.0] {
        assert_eq!(charge_units(bad, RHO_UNIT), i64::MAX, "charge {bad}");
        assert_eq!(budget_units(bad, RHO_UNIT), 0, "budget {bad}");
        assert!(RhoUnits::checked_charge(bad).is_err());
        assert!(DeltaUnits::checked_charge(bad).is_err());
        assert!(RhoUnits::checked_budget(bad).is_err());
        assert!(DeltaUnits::checked_budget(bad).is_err());
    }
    // Beyond the i64 range: saturates, and admission does not overflow.
    assert_eq!(charge_units(1e300, RHO_UNIT), i64::MAX);
    assert!(!admits(1, i64::MAX, i64::MAX));
    assert!(!admits(i64::MAX, 1, i64::MAX));
    assert!(!admits(-5, 1, 10));
    assert!(!admits(0, -5, 10));
}

#[test]
fn max_rho_is_respected() {
    assert_eq!(
        RhoUnits::checked_charge(MAX_RHO),
        Ok(RhoUnits(1_000_000_000_000_000_000))
    );
    assert_eq!(
        RhoUnits::checked_budget(MAX_RHO),
        Ok(RhoUnits(1_000_000_000_000_000_000))
    );
    let err = RhoUnits::checked_charge(MAX_RHO.next_up()).expect_err("above MAX_RHO");
    assert!(
        matches!(err, PrivacyError::Range { quantity: "rho", .. }),
        "{err:?}"
    );
    assert!(RhoUnits::checked_budget(2.0 * MAX_RHO).is_err());
    // A full budget plus a full charge still fits in i64 (and is refused).
    let max = budget_units(MAX_RHO, RHO_UNIT);
    assert!(admits(0, max, max));
    assert!(!admits(max, max, max));
}

#[test]
fn delta_must_be_below_one() {
    assert!(DeltaUnits::checked_charge(1.0).is_err());
    assert!(DeltaUnits::checked_budget(1.0).is_err());
    let just_below = 1.0_f64.next_down();
    assert_eq!(
        DeltaUnits::checked_budget(just_below),
        Ok(DeltaUnits(999_999_999_999_999_872))
    );
    assert_eq!(
        DeltaUnits::checked_charge(1e-6),
        Ok(DeltaUnits(1_000_000_000_000))
    );
    let err = DeltaUnits::checked_charge(1.5).expect_err("δ ≥ 1");
    assert_eq!(
        err.to_string(),
        "delta must be a finite number in [0, 1) (got 1.5)"
    );
}

#[test]
fn charge_units_never_forgive_more_than_the_snap() {
    // Decimal charges, powers of ten, and values just beside grid points.
    let mut values = vec![
        0.1,
        0.2,
        0.3,
        0.7,
        1.0 / 3.0,
        1e-12,
        3e-12,
        0.123456789,
        12345.678,
        MAX_RHO,
    ];
    for k in -12..=6 {
        let v = 10f64.powi(k);
        values.extend([
            v,
            v.next_up(),
            v.next_down(),
            v * (1.0 + 1e-14),
            v * (1.0 - 1e-14),
        ]);
    }
    for c in values {
        let u = charge_units(c, RHO_UNIT);
        assert!(
            u as f64 * RHO_UNIT >= c * (1.0 - 1.5e-14),
            "charge {c:e}: {u} units"
        );
        let b = budget_units(c, RHO_UNIT);
        assert!(
            b as f64 * RHO_UNIT <= c * (1.0 + 1.5e-14),
            "budget {c:e}: {b} units"
        );
        assert!(b <= u);
    }
}

proptest! {
    /// No sequence of admitted charges sums above the budget (docs/design/privacy.md §2).
    #[test]
    fn admitted_charges_never_exceed_the_budget(
        log_budget in -6.0_f64..6.0,
        fractions in proptest::collection::vec(-4.0_f64..0.0, 1..200),
        divisor in 1_u32..20,
        on_grid in proptest::bool::ANY,
    ) {
        let budget = 10f64.powf(log_budget);
        // Random charges (or, half the time, the same rounded to whole units, so that rounding
        // up loses nothing and any slack in the budget shows in the sum); then the budget split
        // into equal decimal-looking parts, which are the cases the snap exists for.
        let mut charges: Vec<f64> = fractions
            .iter()
            .map(|f| budget * 10f64.powf(*f))
            .map(|c| if on_grid { (c / RHO_UNIT).floor() * RHO_UNIT } else { c })
            .collect();
        charges.extend(std::iter::repeat_n(budget / divisor as f64, divisor as usize + 1));
        let sum = admitted_sum(budget, &charges);
        prop_assert!(sum <= budget * (1.0 + 1e-12), "budget {budget:e}, admitted {sum:e}");
    }

    /// Every charge costs at least the charge, less the documented snap tolerance.
    #[test]
    fn charge_units_cover_the_charge(log_c in -12.0_f64..6.0) {
        let c = 10f64.powf(log_c);
        let u = charge_units(c, RHO_UNIT);
        prop_assert!(u >= 1);
        prop_assert!(u as f64 * RHO_UNIT >= c * (1.0 - 1.5e-14));
        let d = charge_units(c * 1e-6, DELTA_UNIT);
        prop_assert!(d as f64 * DELTA_UNIT >= c * 1e-6 * (1.0 - 1.5e-14));
    }
}

#[test]
fn one_reads_back_as_one() {
    // The number of units in one is derived from the unit (no second constant to drift).
    assert_eq!(RHO_UNIT, 1e-12);
    assert_eq!(DELTA_UNIT, 1e-18);
    assert_eq!(RhoUnits(1_000_000_000_000).to_real(), 1.0);
    assert_eq!(DeltaUnits(1_000_000_000_000).to_real(), 1e-6);
    assert_eq!(DeltaUnits(1_000_000_000_000_000_000).to_real(), 1.0);
    assert_eq!(RhoUnits::charge(0.1).to_real(), 0.1);
    assert_eq!(RhoUnits::budget(1.0), RhoUnits(1_000_000_000_000));
}
