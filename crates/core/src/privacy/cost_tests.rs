//! Tests of the privacy quantities and of cost arithmetic, with hand-worked numbers.

use super::*;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 4.0 * f64::EPSILON * b.abs()
}

#[test]
fn gaussian_cost_is_sensitivity_squared_over_twice_the_variance() {
    // Δ = 1, s = 1: ρ = 1/2. Δ = 2, s = 4: ρ = 4/32 = 0.125. Δ = 0.3, s = 0.1: ρ = 9/2 = 4.5.
    assert_eq!(
        Cost::gaussian(1.0, 1.0),
        Cost {
            rho: 0.5,
            delta: 0.0,
            other_rho: 0.0
        }
    );
    assert_eq!(Cost::gaussian(2.0, 4.0).rho, 0.125);
    assert!(close(Cost::gaussian(0.3, 0.1).rho, 4.5));
    // Inverse of s = Δ/sqrt(2ρ): Δ = 1, ρ = 0.02 gives s = 5, and back.
    assert!(close(Cost::gaussian(1.0, 5.0).rho, 0.02));
    // No spurious overflow of Δ² or underflow of s².
    assert!(close(Cost::gaussian(1e200, 1e200).rho, 0.5));
    assert!(close(Cost::gaussian(1e-200, 1e-200).rho, 0.5));
}

#[test]
fn gaussian_cost_of_degenerate_parameters_is_conservative() {
    assert_eq!(Cost::gaussian(0.0, 1.0).rho, 0.0);
    assert_eq!(Cost::gaussian(0.0, 0.0).rho, 0.0);
    assert_eq!(Cost::gaussian(0.0, f64::NAN).rho, f64::INFINITY);
    assert_eq!(Cost::gaussian(1.0, f64::INFINITY).rho, 0.0);
    for (sensitivity, sd) in [
        (1.0, 0.0),
        (1.0, -1.0),
        (1.0, f64::NAN),
        (f64::NAN, 1.0),
        (-1.0, 1.0),
        (f64::INFINITY, 1.0),
        (1.0, 1e-300),
    ] {
        assert_eq!(
            Cost::gaussian(sensitivity, sd).rho,
            f64::INFINITY,
            "Δ = {sensitivity}, s = {sd}"
        );
    }
}

#[test]
fn pure_and_approximate_costs() {
    // ε = 1 → ρ = 0.5; ε = 0.2 → ρ = 0.02; ε = 3 → ρ = 4.5.
    assert_eq!(
        Cost::pure(1.0),
        Cost {
            rho: 0.5,
            delta: 0.0,
            other_rho: 0.5
        }
    );
    assert!(close(Cost::pure(0.2).rho, 0.02));
    assert_eq!(
        Cost::approximate(3.0, 1e-6),
        Cost {
            rho: 4.5,
            delta: 1e-6,
            other_rho: 4.5,
        }
    );
    assert_eq!(Cost::pure(0.0), Cost::ZERO);
    assert_eq!(Cost::pure(-1.0).rho, f64::INFINITY);
    assert_eq!(Cost::pure(f64::NAN).rho, f64::INFINITY);
    assert_eq!(Cost::approximate(1.0, f64::NAN).delta, f64::INFINITY);
    assert_eq!(Cost::approximate(1.0, -1e-9).delta, f64::INFINITY);
    assert_eq!(Cost::approximate(f64::NAN, 1e-9).rho, f64::INFINITY);
}

#[test]
fn sequential_composition_adds() {
    // 0.5 + 0.125 + 4.5 = 5.125 (all exact in binary); δ: 1e-6 + 0 + 2e-6.
    let a = Cost::gaussian(1.0, 1.0);
    let b = Cost::gaussian(2.0, 4.0);
    let c = Cost::approximate(3.0, 2e-6);
    let total = a.then(b).then(Cost::approximate(0.0, 1e-6)).then(c);
    assert_eq!(total.rho, 5.125);
    assert!(close(total.delta, 3e-6));
    assert_eq!(Cost::sum([a, b, c]), a.then(b).then(c));
    assert_eq!(Cost::sum([]), Cost::ZERO);
    // k iterations of the same Gaussian release cost k·ρ.
    assert_eq!(Cost::sum(std::iter::repeat_n(b, 8)).rho, 1.0);
}

#[test]
fn parallel_composition_takes_the_maximum() {
    let a = Cost {
        rho: 0.5,
        delta: 1e-6,
        other_rho: 0.0,
    };
    let b = Cost {
        rho: 0.25,
        delta: 1e-5,
        other_rho: 0.0,
    };
    assert_eq!(
        a.parallel(b),
        Cost {
            rho: 0.5,
            delta: 1e-5,
            other_rho: 0.0,
        }
    );
    assert_eq!(b.parallel(a), a.parallel(b));
    assert_eq!(a.parallel(Cost::ZERO), a);
    // A NaN part must not vanish from the maximum.
    assert!(
        a.parallel(Cost {
            rho: f64::NAN,
            delta: 0.0,
            other_rho: 0.0,
        })
        .rho
        .is_nan()
    );
    assert!(
        Cost {
            rho: 0.0,
            delta: f64::NAN,
            other_rho: 0.0,
        }
        .parallel(a)
        .delta
        .is_nan()
    );
}

#[test]
fn check_accepts_ledger_amounts_only() {
    assert_eq!(Cost::ZERO.check(), Ok(Cost::ZERO));
    assert!(
        Cost {
            rho: 1e6,
            delta: 0.5,
            other_rho: 0.0,
        }
        .check()
        .is_ok()
    );
    for bad in [
        Cost {
            rho: f64::NAN,
            delta: 0.0,
            other_rho: 0.0,
        },
        Cost {
            rho: f64::INFINITY,
            delta: 0.0,
            other_rho: 0.0,
        },
        Cost {
            rho: -1.0,
            delta: 0.0,
            other_rho: 0.0,
        },
        Cost {
            rho: 2e6,
            delta: 0.0,
            other_rho: 0.0,
        },
        Cost {
            rho: 1.0,
            delta: 1.0,
            other_rho: 0.0,
        },
        Cost {
            rho: 1.0,
            delta: f64::NAN,
            other_rho: 0.0,
        },
        Cost::gaussian(1.0, 0.0),
    ] {
        assert!(bad.check().is_err(), "{bad:?}");
    }
}

#[test]
fn constructors_reject_out_of_range_values() {
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0, -1.0] {
        assert!(matches!(Rho::new(bad), Err(PrivacyError::Rho(_))), "ρ = {bad}");
        assert!(
            matches!(Epsilon::new(bad), Err(PrivacyError::Epsilon(_))),
            "ε = {bad}"
        );
        assert!(
            matches!(Delta::new(bad), Err(PrivacyError::Delta(_))),
            "δ = {bad}"
        );
    }
    for bad in [1.0, 1.5, f64::INFINITY] {
        assert!(Delta::new(bad).is_err(), "δ = {bad}");
    }
    assert_eq!(Rho::new(0.5).map(Rho::get), Ok(0.5));
    assert_eq!(Epsilon::new(1e-300).map(Epsilon::get), Ok(1e-300));
    assert_eq!(Delta::new(1e-300).map(Delta::get), Ok(1e-300));
    assert_eq!(
        Delta::new(1.0_f64.next_down()).map(Delta::get),
        Ok(1.0_f64.next_down())
    );
    assert_eq!(
        Rho::new(f64::NAN).expect_err("NaN").to_string(),
        "rho must be a finite number > 0 (got NaN)"
    );
}

#[test]
fn targets_from_epsilon_delta_convert_once() {
    let eps = Epsilon::new(1.0).expect("valid");
    let delta = Delta::new(1e-5).expect("valid");
    let target = PrivacyTarget::from_epsilon_delta(eps, delta);
    // ε = 1, δ = 1e-5 → ρ = 0.030556595197639566, the CKS inverse (see convert_tests.rs).
    assert!((target.rho - 0.030_556_595_197_639_566).abs() < 1e-12);
    assert_eq!(target.delta, Some(1e-5));
    assert_eq!(target.epsilon, Some(1.0));
    let rho = Rho::new(0.3).expect("valid");
    assert_eq!(
        PrivacyTarget::from_rho(rho, None),
        PrivacyTarget {
            public_default: false,
            rho: 0.3,
            delta: None,
            epsilon: None
        }
    );
}

#[test]
fn gaussian_parts_are_tracked_through_composition() {
    let g = Cost::gaussian(1.0, 2.0);
    assert!(g.is_gaussian_only());
    assert_eq!(g.other_rho, 0.0);
    assert!(Cost::gaussian_zcdp(0.3).is_gaussian_only());
    // Laplace (pure ε), the exponential mechanism and approximate parts are "other" ρ.
    assert!(!Cost::pure(1.0).is_gaussian_only());
    assert!(!Cost::zcdp(0.1).is_gaussian_only());
    let mixed = g.then(Cost::pure(1.0));
    assert_eq!(mixed.rho, g.rho + 0.5);
    assert_eq!(mixed.other_rho, 0.5);
    // A non-Gaussian part below the ulp of the total is not absorbed.
    assert!(!Cost::gaussian_zcdp(0.5).then(Cost::pure(1e-9)).is_gaussian_only());
    assert!(!mixed.is_gaussian_only());
    // Gaussian-only sums stay Gaussian-only, exactly.
    let sum = Cost::sum(std::iter::repeat_n(Cost::gaussian_zcdp(0.1), 7));
    assert!(sum.is_gaussian_only());
    // A δ > 0 excludes the exact Gaussian curve even when all ρ is Gaussian.
    assert!(!g.then(Cost::approximate(0.0, 1e-6)).is_gaussian_only());
    // Parallel composition: Gaussian-only iff both sides are.
    assert!(g.parallel(Cost::gaussian_zcdp(0.01)).is_gaussian_only());
    assert!(!g.parallel(Cost::pure(0.01)).is_gaussian_only());
    // check() refuses a non-Gaussian part larger than the whole.
    assert!(
        Cost {
            rho: 0.1,
            delta: 0.0,
            other_rho: 0.2
        }
        .check()
        .is_err()
    );
}

#[test]
fn exponential_mechanism_costs_epsilon_squared_over_eight() {
    // Cesar & Rogers 2021: bounded range, ε²/8 per draw. ε = 2 → 0.5; ε = 1 → 0.125.
    assert_eq!(Cost::exponential_mechanism(2.0).rho, 0.5);
    assert_eq!(Cost::exponential_mechanism(1.0).rho, 0.125);
    assert!(!Cost::exponential_mechanism(1.0).is_gaussian_only());
    assert_eq!(Cost::exponential_mechanism(-1.0).rho, f64::INFINITY);
}

/// The loop `round_up_while` replaced in every calibration (analyze_gauss, centering,
/// clipping, dp_oja, noisy_power), kept here as the reference.
fn old_round_up(mut scale: f64, exceeds: impl Fn(f64) -> bool) -> f64 {
    while exceeds(scale) {
        scale = scale.next_up();
    }
    scale
}

#[test]
fn round_up_while_steps_one_ulp_at_a_time_until_the_cost_fits() {
    // Three ulps above 1 is the first scale that does not exceed.
    let target = 1.0f64.next_up().next_up().next_up();
    assert_eq!(round_up_while(1.0, |s| s < target), target);
    // Already within budget: unchanged.
    assert_eq!(round_up_while(2.5, |_| false), 2.5);
}

#[test]
fn round_up_while_gives_the_numbers_of_the_loops_it_replaced() {
    // σ = Δ/sqrt(2ρ) over a grid of Δ and ρ, rounded until Cost::gaussian(Δ, σ) ≤ ρ, the way
    // the calibrations do it; the closed form overshoots by an ulp for some of them.
    let mut stepped = 0;
    for i in 1..=60 {
        for j in 1..=60 {
            let delta = 0.013 * f64::from(i);
            let rho = 0.0071 * f64::from(j);
            let start = delta / (2.0 * rho).sqrt();
            let exceeds = |sd: f64| Cost::gaussian(delta, sd).rho > rho;
            let new = round_up_while(start, exceeds);
            assert_eq!(new.to_bits(), old_round_up(start, exceeds).to_bits());
            assert!(!exceeds(new));
            if new != start {
                stepped += 1;
                assert!(exceeds(new.next_down()));
            }
        }
    }
    assert!(
        stepped > 0,
        "no input needed rounding: the comparison proved nothing"
    );
}
