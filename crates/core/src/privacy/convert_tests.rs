//! Tests of the ρ ↔ (ε, δ) conversions against independently computed values.

use proptest::prelude::*;

use super::*;
use crate::privacy::testing::assert_tight_above;

fn delta(value: f64) -> Delta {
    Delta::new(value).expect("valid delta")
}

fn epsilon(value: f64) -> Epsilon {
    Epsilon::new(value).expect("valid epsilon")
}

/// The CKS objective evaluated naively in a (no reparametrisation, no rounding allowance): an
/// independent implementation for the brute-force comparison.
fn naive_cks(a: f64, rho: f64, l: f64) -> f64 {
    a * rho + (l + (a - 1.0) * (1.0 - 1.0 / a).ln() - a.ln()) / (a - 1.0)
}

/// Minimum of [`naive_cks`] over a log-spaced grid of a − 1 ∈ [e⁻³⁰, e³⁰] (step 0.003 in ln).
fn grid_min(rho: f64, l: f64) -> f64 {
    let steps = 20_000;
    (0..=steps)
        .map(|i| {
            let t = -30.0 + 60.0 * i as f64 / steps as f64;
            naive_cks(1.0 + t.exp(), rho, l)
        })
        .fold(f64::INFINITY, f64::min)
}

const RHOS: [f64; 8] = [1e-12, 1e-6, 1e-3, 0.1, 1.0, 10.0, 1e3, 1e6];
const DELTAS: [f64; 7] = [1e-300, 1e-12, 1e-6, 1e-2, 0.5, 0.9, 0.999];

/// Calls `check(ρ, δ, ln(1/δ))` at every point of the grid [`RHOS`] × [`DELTAS`].
fn on_the_grid(mut check: impl FnMut(f64, f64, f64)) {
    for rho in RHOS {
        for d in DELTAS {
            check(rho, d, log_inv_delta(delta(d)));
        }
    }
}

#[test]
fn epsilon_delta_to_rho_matches_hand_values() {
    // Reference: the largest ρ with min(Bun–Steinke, CKS)(ρ, δ) ≤ ε, by 200 bisection steps in
    // mpmath at 50 digits, the CKS infimum found by mpmath.findroot on the derivative of the
    // Prop. 12 objective. ε = 1, δ = 1e-5: ρ = 0.030556595197639565886 (docs/design/privacy.md §2: 0.0306;
    // the Bun–Steinke inverse alone gives 0.020819938339535461).
    let cases = [
        (1.0, 1e-5, 0.030_556_595_197_639_566),
        (0.1, 1e-9, 1.771_384_471_850_209e-4),
        (10.0, 1e-6, 1.539_278_763_866_728_5),
    ];
    for (eps, d, reference) in cases {
        let rho = epsilon_delta_to_rho(epsilon(eps), delta(d));
        // Rounded down, but only by the rounding allowance of the forward conversion.
        assert!(
            rho <= reference * (1.0 + 4.0 * f64::EPSILON),
            "ε={eps}, δ={d}: {rho} > {reference}"
        );
        assert!(
            rho >= reference * (1.0 - 1e-11),
            "ε={eps}, δ={d}: {rho} ≪ {reference}"
        );
    }
}

#[test]
fn rho_to_epsilon_matches_hand_values() {
    // References (mpmath, 50 digits): Bun–Steinke ε = ρ + 2·sqrt(ρ·ln(1/δ)); CKS ε = the
    // Prop. 12 objective at its stationary point a* found by mpmath.findroot on its derivative.
    // ρ = 0.5, δ = 1e-6: BS = 0.5 + 2·sqrt(0.5·13.815510557964274) = 5.7565217697569319872;
    // CKS = 5.2215344445301690534 at a* = 5.90700944973.
    let cases = [
        (0.5, 1e-6, 5.756_521_769_756_932, 5.221_534_444_530_169),
        (0.01, 1e-5, 0.688_614_042_441_511_2, 0.545_725_548_274_002_4),
        (2.0, 1e-10, 15.572_280_848_830_224, 14.870_678_006_813_747),
    ];
    for (rho, d, bs_reference, cks_reference) in cases {
        let l = log_inv_delta(delta(d));
        let case = format!("ρ={rho}, δ={d}");
        assert_tight_above(
            bun_steinke_epsilon(rho, l),
            bs_reference,
            1e-14,
            format!("BS, {case}"),
        );
        // An upper bound on the infimum, tight to the search and rounding allowance.
        assert_tight_above(rho_to_epsilon(rho, delta(d)), cks_reference, 1e-12, case);
    }
}

#[test]
fn cks_minimiser_matches_brute_force_grid() {
    on_the_grid(|rho, d, l| {
        let found = cks_epsilon(rho, l);
        let grid = grid_min(rho, l);
        // At least as good as the grid (up to the rounding allowance)…
        assert!(
            found <= grid + 1e-12 * grid.abs().max(1e-3),
            "ρ={rho}, δ={d}: {found} > grid {grid}"
        );
        // …and not below it by more than the grid's discretisation error: the search did not
        // report a value below the objective's infimum.
        assert!(
            found >= grid - 1e-5 * grid.abs().max(1e-6),
            "ρ={rho}, δ={d}: {found} ≪ grid {grid}"
        );
    });
}

#[test]
fn cks_is_never_worse_than_bun_steinke() {
    on_the_grid(|rho, d, l| {
        let cks = cks_epsilon(rho, l);
        let bs = bun_steinke_epsilon(rho, l);
        assert!(cks <= bs, "ρ={rho}, δ={d}: CKS {cks} > BS {bs}");
        assert!(rho_to_epsilon(rho, delta(d)) <= bs);
    });
}

#[test]
fn zero_and_invalid_rho() {
    let d = delta(1e-6);
    assert_eq!(rho_to_epsilon(0.0, d), 0.0);
    assert_eq!(rho_to_epsilon(-0.0, d), 0.0);
    for bad in [-1e-300, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        assert_eq!(rho_to_epsilon(bad, d), f64::INFINITY, "ρ = {bad}");
    }
}

#[test]
fn extreme_inputs_give_no_nan_and_stay_conservative() {
    let deltas = [
        f64::from_bits(1),
        f64::MIN_POSITIVE,
        1e-300,
        1e-6,
        0.5,
        1.0_f64.next_down(),
    ];
    let rhos = [
        f64::from_bits(1),
        1e-300,
        1e-30,
        1e-12,
        1.0,
        1e6,
        1e30,
        1e300,
        f64::MAX,
    ];
    for d in deltas {
        let d = delta(d);
        assert!(log_inv_delta(d).is_finite() && log_inv_delta(d) > 0.0);
        for rho in rhos {
            let eps = rho_to_epsilon(rho, d);
            assert!(eps >= 0.0, "ρ={rho}, δ={}: ε = {eps}", d.get());
            // Finite up to the point where ρ itself is near overflow.
            if rho <= 1e300 {
                assert!(eps.is_finite(), "ρ={rho}, δ={}: ε = {eps}", d.get());
            }
            // Never above the (rounded-up) Bun–Steinke bound.
            assert!(eps <= bun_steinke_epsilon(rho, log_inv_delta(d)));
        }
        for eps in [
            f64::from_bits(1),
            1e-300,
            1e-100,
            1e-10,
            1.0,
            1e10,
            1e300,
            f64::MAX,
        ] {
            let rho = epsilon_delta_to_rho(epsilon(eps), d);
            assert!(rho.is_finite() && rho >= 0.0, "ε={eps}, δ={}: ρ = {rho}", d.get());
            assert!(
                rho_to_epsilon(rho, d) <= eps,
                "ε={eps}, δ={}: round trip",
                d.get()
            );
        }
    }
}

#[test]
fn tiny_delta_does_not_overflow_one_over_delta() {
    // 1/δ overflows for subnormal δ; −ln δ does not: ln(1/4.9e-324) = 744.44.
    let l = log_inv_delta(delta(f64::from_bits(1)));
    assert!((l - 744.440_071_921_381_2).abs() < 1e-9, "{l}");
    let rho = epsilon_delta_to_rho(epsilon(1.0), delta(f64::from_bits(1)));
    // Below the Bun–Steinke value ε²/(4·ln(1/δ)) for small ε, up to the CKS gain (< 2×).
    assert!(rho > 0.0 && rho < 2.0 / (4.0 * 744.0), "{rho}");
}

proptest! {
    /// The round trip never gains privacy budget, and loses only rounding error.
    #[test]
    fn round_trip_is_conservative(log_eps in -6.0_f64..3.0, log_delta in -300.0_f64..-0.01) {
        let (eps, d) = (10f64.powf(log_eps), delta(10f64.powf(log_delta)));
        let rho = epsilon_delta_to_rho(epsilon(eps), d);
        prop_assert!(rho > 0.0);
        prop_assert!(rho_to_epsilon(rho, d) <= eps);
        // Tight: the Bun–Steinke form at ρ is within rounding of ε.
        let bs_exact = rho + 2.0 * (rho * log_inv_delta(d)).sqrt();
        prop_assert!(bs_exact >= eps * (1.0 - 1e-12), "ε = {eps}, BS(ρ) = {bs_exact}");
    }

    /// ρ → ε is monotone in ρ (up to the rounding allowance).
    #[test]
    fn rho_to_epsilon_is_monotone(log_rho in -12.0_f64..6.0, factor in 1.0_f64..2.0, log_delta in -30.0_f64..-0.01) {
        let d = delta(10f64.powf(log_delta));
        let rho = 10f64.powf(log_rho);
        let lower = rho_to_epsilon(rho, d);
        let upper = rho_to_epsilon(rho * factor, d);
        prop_assert!(lower <= upper * (1.0 + 1e-12), "{lower} > {upper}");
    }
}
