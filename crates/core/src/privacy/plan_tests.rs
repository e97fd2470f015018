//! Tests of the planning helpers with hand-worked numbers.

use proptest::prelude::*;

use super::*;

fn delta(value: f64) -> Delta {
    Delta::new(value).expect("valid delta")
}

#[test]
fn gaussian_sd_matches_hand_values() {
    // s = Δ / sqrt(2ρ): (Δ, ρ) = (1, 0.5) → 1; (1, 0.02) → 5; (2, 0.125) → 4; (0.3, 4.5) → 0.1.
    for (sensitivity, rho, expected) in [
        (1.0, 0.5, 1.0),
        (1.0, 0.02, 5.0),
        (2.0, 0.125, 4.0),
        (0.3, 4.5, 0.1),
    ] {
        let sd = gaussian_sd(sensitivity, rho);
        assert!(
            sd >= expected * (1.0 - 2.0 * f64::EPSILON),
            "Δ={sensitivity}, ρ={rho}: {sd}"
        );
        assert!(
            sd <= expected * (1.0 + 4.0 * f64::EPSILON),
            "Δ={sensitivity}, ρ={rho}: {sd}"
        );
        assert!(Cost::gaussian(sensitivity, sd).rho <= rho);
    }
}

#[test]
fn gaussian_sd_of_degenerate_inputs() {
    assert_eq!(gaussian_sd(0.0, 0.5), 0.0);
    assert_eq!(Cost::gaussian(0.0, gaussian_sd(0.0, 0.5)).rho, 0.0);
    for (sensitivity, rho) in [
        (1.0, 0.0),
        (1.0, -1.0),
        (1.0, f64::NAN),
        (1.0, f64::INFINITY),
        (f64::NAN, 1.0),
        (-1.0, 1.0),
        (f64::INFINITY, 1.0),
    ] {
        assert_eq!(
            gaussian_sd(sensitivity, rho),
            f64::INFINITY,
            "Δ = {sensitivity}, ρ = {rho}"
        );
    }
    // Overflow of the quotient is conservative: infinite noise, zero cost.
    assert_eq!(gaussian_sd(1e300, 1e-300), f64::INFINITY);
    // Extremes that do not overflow stay certified.
    for (sensitivity, rho) in [(1e-300, 1e-12), (1e150, 1e6), (f64::MIN_POSITIVE, f64::MAX)] {
        let sd = gaussian_sd(sensitivity, rho);
        assert!(sd.is_finite() && sd > 0.0, "Δ = {sensitivity}, ρ = {rho}: {sd}");
        assert!(Cost::gaussian(sensitivity, sd).rho <= rho);
    }
}

#[test]
fn describe_converts_and_adds_the_spent_delta() {
    // ρ = 0.5 at δ = 1e-6: CKS 2020 gives ε = 5.2215344445301690534 (mpmath; see
    // convert_tests.rs), tighter than Bun–Steinke's 5.7565.
    let pure = describe(Cost::zcdp(0.5), delta(1e-6)).expect("valid cost");
    assert_eq!(
        (pure.rho, pure.delta_spent, pure.delta, pure.total_delta),
        (0.5, 0.0, 1e-6, 1e-6)
    );
    assert!(pure.epsilon_at_delta >= 5.221_534_444_530_169);
    assert!(pure.epsilon_at_delta <= 5.221_534_444_530_169 * (1.0 + 1e-12));
    // An (ε = 1, δ = 1e-7) subroutine: ρ = 0.5 and δ = 1e-7 on top of the conversion δ.
    let approx = describe(Cost::approximate(1.0, 1e-7), delta(1e-6)).expect("valid cost");
    assert_eq!(approx.rho, 0.5);
    assert_eq!(approx.delta_spent, 1e-7);
    assert!((approx.total_delta - 1.1e-6).abs() < 1e-20);
    assert_eq!(approx.epsilon_at_delta, pure.epsilon_at_delta);
    // Nothing spent: ε = 0.
    assert_eq!(
        describe(Cost::ZERO, delta(1e-6)).expect("valid").epsilon_at_delta,
        0.0
    );
}

#[test]
fn describe_refuses_unchargeable_costs() {
    for bad in [
        Cost::zcdp(f64::NAN),
        Cost::zcdp(-0.1),
        Cost::zcdp(2e6),
        Cost::gaussian(1.0, 0.0),
        Cost {
            rho: 0.1,
            delta: 1.0,
            other_rho: 0.0,
        },
    ] {
        assert!(
            matches!(describe(bad, delta(1e-6)), Err(PrivacyError::Range { .. })),
            "{bad:?}"
        );
    }
}

#[test]
fn conversions_serialise_with_their_field_names() {
    let c = describe(Cost::zcdp(0.5), delta(1e-6)).expect("valid cost");
    let json = serde_json::to_value(c).expect("serialisable");
    for field in ["rho", "delta_spent", "delta", "epsilon_at_delta", "total_delta"] {
        assert!(
            json.get(field).is_some_and(serde_json::Value::is_number),
            "{field} in {json}"
        );
    }
}

proptest! {
    /// Calibrating with `gaussian_sd` never costs more than planned, and wastes only rounding.
    #[test]
    fn gaussian_sd_is_certified(log_sensitivity in -6.0_f64..6.0, log_rho in -12.0_f64..6.0) {
        let (sensitivity, rho) = (10f64.powf(log_sensitivity), 10f64.powf(log_rho));
        let sd = gaussian_sd(sensitivity, rho);
        let cost = Cost::gaussian(sensitivity, sd).rho;
        prop_assert!(cost <= rho, "Δ = {sensitivity}, ρ = {rho}: cost {cost}");
        prop_assert!(cost >= rho * (1.0 - 1e-14), "Δ = {sensitivity}, ρ = {rho}: cost {cost}");
    }
}
