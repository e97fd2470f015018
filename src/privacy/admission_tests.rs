//! Admission under both kinds of budget, with the worked case and a property test that
//! no admitted sequence breaks the owner's stated (ε, δ).

use proptest::prelude::*;

use super::*;
use crate::privacy::Cost;
use crate::privacy::units::charge_units;

fn eps_delta(epsilon: f64, delta: f64) -> Budget {
    Budget::EpsilonDelta { epsilon, delta }
}

fn gaussian(rho: f64) -> Spending {
    Spending::of_cost(&Cost::gaussian_zcdp(rho))
}

#[test]
fn three_gaussian_jobs_fit_in_epsilon_one_and_a_fourth_does_not() {
    // The case: (ε, δ) = (1, 1e-5) admits three analyze_gauss jobs of ρ = 0.0119
    // (Σρ = 0.0357 ≤ 0.0359 by the exact curve) and refuses a fourth of ρ = 0.001.
    let budget = eps_delta(1.0, 1e-5);
    let mut spent = Spending::default();
    for _ in 0..3 {
        assert_eq!(admit(&budget, spent, gaussian(0.0119)), Some(Rule::ExactGaussian));
        spent = spent.checked_add(gaussian(0.0119)).unwrap();
    }
    assert_eq!(admit(&budget, spent, gaussian(0.001)), None);
    // CKS alone would have stopped at 0.0306: the second job plus a Laplace release is refused.
    let two = gaussian(0.0119).checked_add(gaussian(0.0119)).unwrap();
    let laplace = Spending::of_cost(&Cost::pure(0.1)); // ρ = 0.005, total 0.0288 ≤ 0.0306
    assert_eq!(admit(&budget, two, laplace), Some(Rule::Cks));
    let laplace = Spending::of_cost(&Cost::pure(0.1_f64.hypot(0.05))); // ρ = 0.00625: 0.03005
    assert_eq!(admit(&budget, two, laplace), Some(Rule::Cks));
    let laplace = Spending::of_cost(&Cost::pure(0.15)); // ρ = 0.01125: 0.03505 > 0.0306
    assert_eq!(admit(&budget, two, laplace), None);
}

#[test]
fn capacity_follows_the_rule_in_force() {
    let budget = eps_delta(1.0, 1e-5);
    let gauss = rho_capacity_units(&budget, Spending::default());
    assert_eq!(gauss / 100_000_000, 359); // 0.0359…
    let mixed = Spending::of_cost(&Cost::pure(0.01));
    let cks = rho_capacity_units(&budget, mixed);
    assert_eq!(cks / 100_000_000, 305); // 0.0305…, CKS
    // Spending δ lowers the CKS capacity further.
    let approx = Spending::of_cost(&Cost::approximate(0.01, 5e-6));
    assert!(rho_capacity_units(&budget, approx) < cks);
    let zcdp = Budget::Zcdp {
        rho_units: 42,
        delta_units: 0,
    };
    assert_eq!(rho_capacity_units(&zcdp, Spending::default()), 42);
}

#[test]
fn delta_charges_need_delta_left() {
    let budget = eps_delta(10.0, 1e-5);
    let k_dp = Spending::of_cost(&Cost::approximate(1.0, 1e-5));
    // All of δ spent on the approximate part: nothing is left for the conversion.
    assert_eq!(admit(&budget, Spending::default(), k_dp), None);
    let k_dp = Spending::of_cost(&Cost::approximate(1.0, 5e-6));
    assert_eq!(admit(&budget, Spending::default(), k_dp), Some(Rule::Cks));
    // zCDP budgets keep their δ cap.
    let zcdp = Budget::Zcdp {
        rho_units: charge_units(1.0, RHO_UNIT),
        delta_units: charge_units(1e-6, DELTA_UNIT),
    };
    assert_eq!(admit(&zcdp, Spending::default(), k_dp), None);
    let small = Spending::of_cost(&Cost::approximate(1.0, 1e-6));
    assert_eq!(admit(&zcdp, Spending::default(), small), Some(Rule::Zcdp));
}

#[test]
fn other_units_flag_any_non_gaussian_part() {
    assert!(gaussian(0.3).is_gaussian_only());
    let tiny = Spending::of_cost(&Cost::gaussian_zcdp(0.5).then(Cost::pure(1e-9)));
    assert_eq!(tiny.other_rho_units, 1);
    assert!(!tiny.is_gaussian_only());
    let approx = Spending::of_cost(&Cost::approximate(0.0, 1e-9));
    assert!(!approx.is_gaussian_only());
    // A δ-only cost has no ρ: its non-Gaussian units stay within ρ's (the schema's CHECK).
    assert_eq!((approx.rho_units, approx.other_rho_units), (0, 0));
    assert_eq!(
        Spending::default().checked_add(Spending {
            rho_units: -1,
            ..Default::default()
        }),
        None
    );
    assert_eq!(
        Spending {
            rho_units: i64::MAX,
            ..Default::default()
        }
        .checked_add(gaussian(1.0)),
        None
    );
}

/// CKS 2020 (Prop. 12 form) by brute force over a log grid of orders a: independent of the
/// golden-section search the service uses (any a > 1 gives a valid bound, so the grid minimum
/// is an upper bound on the true ε, and the check below is sound).
fn cks_grid(rho: f64, delta: f64) -> f64 {
    let l = -delta.ln();
    let objective = |x: f64| {
        let a = 1.0 + 10f64.powf(x);
        a * rho + (l + (a - 1.0) * (1.0 - 1.0 / a).ln() - a.ln()) / (a - 1.0)
    };
    // A coarse log grid of a − 1 over [1e-6, 1e6], then a fine one around its best point.
    let step = 12.0 / 4000.0;
    let coarse = (0..=4000).map(|i| -6.0 + step * i as f64);
    let best = coarse.fold((f64::INFINITY, 0.0), |(v, x0), x| {
        let fx = objective(x);
        if fx < v { (fx, x) } else { (v, x0) }
    });
    (0..=4000)
        .map(|i| best.1 - step + 2.0 * step * i as f64 / 4000.0)
        .map(objective)
        .fold(best.0, f64::min)
}

/// Φ by the complementary error function of the C library's algorithm family, evaluated in
/// a second way: the Abramowitz–Stegun-free continued fraction is overkill here, so we take
/// erfc from libm but evaluate δ at the real (unrounded) total without the rounding nudges.
fn exact_delta(epsilon: f64, rho: f64) -> f64 {
    let mu = (2.0 * rho).sqrt();
    let phi = |x: f64| 0.5 * libm::erfc(-x / std::f64::consts::SQRT_2);
    phi(-epsilon / mu + mu / 2.0) - epsilon.exp() * phi(-epsilon / mu - mu / 2.0)
}

#[derive(Debug, Clone, Copy)]
enum Job {
    Gaussian(f64),
    Laplace(f64),
    Approximate(f64, f64),
}

fn job_strategy() -> impl Strategy<Value = Job> {
    prop_oneof![
        4 => (1e-5_f64..0.02).prop_map(Job::Gaussian),
        1 => (1e-3_f64..0.2).prop_map(Job::Laplace),
        1 => ((1e-3_f64..0.2), (1e-8_f64..3e-6)).prop_map(|(e, d)| Job::Approximate(e, d)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// No sequence the ledger admits violates the stated (ε, δ): a Gaussian-only sequence is
    /// checked against the exact curve at its real total, any other against CKS (by brute
    /// force) at δ minus the approximate δ spent. Charges are the real, unrounded costs.
    #[test]
    fn admitted_sequences_keep_the_stated_guarantee(
        epsilon in 0.1_f64..4.0,
        log_delta in -9.0_f64..-3.0,
        jobs in proptest::collection::vec(job_strategy(), 1..40),
    ) {
        let delta = 10f64.powf(log_delta);
        let budget = eps_delta(epsilon, delta);
        let mut spent = Spending::default();
        let mut total = Cost::ZERO;
        for job in jobs {
            let cost = match job {
                Job::Gaussian(rho) => Cost::gaussian_zcdp(rho),
                Job::Laplace(eps) => Cost::pure(eps),
                Job::Approximate(eps, d) => Cost::approximate(eps, d),
            };
            let charge = Spending::of_cost(&cost);
            if admit(&budget, spent, charge).is_some() {
                spent = spent.checked_add(charge).unwrap();
                total = total.then(cost);
            }
        }
        if total.rho == 0.0 {
            return Ok(());
        }
        if total.is_gaussian_only() {
            let d = exact_delta(epsilon, total.rho);
            prop_assert!(d <= delta * (1.0 + 1e-9), "exact δ {d} > {delta} at Σρ = {}", total.rho);
        } else {
            let left = delta - total.delta;
            prop_assert!(left > 0.0);
            let e = cks_grid(total.rho, left).min(total.rho + 2.0 * (total.rho * -left.ln()).sqrt());
            prop_assert!(e <= epsilon * (1.0 + 1e-6), "CKS ε {e} > {epsilon} at Σρ = {}", total.rho);
        }
    }
}
