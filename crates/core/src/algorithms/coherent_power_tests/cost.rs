//! Cost and calibration: the spec formula, the record sensitivities, configure then cost, the
//! coherence candidates.

use super::*;

/// A cost with `gaussian` from the power rounds and `laplace` from the σ̂ releases.
fn split(gaussian: f64, laplace: f64) -> Cost {
    Cost::gaussian_zcdp(gaussian).then(Cost::zcdp(laplace))
}

#[test]
fn cost_is_the_spec_formula() {
    let c = ctx(10, None, AR);
    // k·(m·T/(2s²) + ε''²/2): 2·(5/2 + 0.25/2) = 5 (Gaussian) + 0.25 (Laplace) = 5.25.
    let cost = CoherentPower.cost(&config(2, 5, vec![4.0], 1.0, 0.5), &c);
    assert_eq!(cost, split(5.0, 0.25));
    assert_eq!((cost.rho, cost.other_rho), (5.25, 0.25));
    // 1·(1/(2·0.25) + 4/2) = 2 + 2 = 4.
    assert_eq!(
        CoherentPower.cost(&config(1, 1, vec![1.0], 0.5, 2.0), &c),
        split(2.0, 2.0)
    );
    // Search over C_max = 6: m = 4 candidates; 3·(4·10/(2·4) + 1/2) = 15 + 1.5 = 16.5.
    let search = config(3, 10, vec![1.0, 2.0, 4.0, 6.0], 2.0, 1.0);
    assert_eq!(CoherentPower.cost(&search, &c), split(15.0, 1.5));
    assert!(!CoherentPower.cost(&search, &c).is_gaussian_only());
    // The cost does not depend on the relation or the bounds.
    assert_eq!(CoherentPower.cost(&search, &ctx(10, None, EN)), split(15.0, 1.5));
}

/// The tight record sensitivities: β² under both relations for the rounds and for σ̂ (the
/// coherence form only where it is smaller), u·sqrt(C/d) and u for matrices.
#[test]
fn record_sensitivities_are_beta_squared() {
    // β = 4, α = √30·β: β² = 16 ≤ αβ·sqrt(C/d) = 16·√C for every C ≥ 1 at d = 30 (equal at
    // C = 1, up to rounding).
    for c in [2.0, 4.0, 30.0] {
        assert_eq!(round_sensitivity(&AR, c, 30), 16.0);
        assert_eq!(round_sensitivity(&RO, c, 30), 16.0);
    }
    assert!((round_sensitivity(&AR, 1.0, 30) - 16.0).abs() < 1e-12);
    assert_eq!(round_sensitivity(&RO, 1.0, 30), 16.0);
    assert_eq!(
        (estimate_sensitivity(&AR), estimate_sensitivity(&RO)),
        (16.0, 16.0)
    );
    assert_eq!(round_sensitivity(&EN, 4.0, 16), 1.5 * 0.5);
    assert_eq!(estimate_sensitivity(&EN), 1.5);
    // A small L1 bound with a small C: the coherence form αβ·sqrt(C/d) = 2·4·0.1 = 0.8 wins
    // under add_remove, and 2αβ·sqrt(C/d) = 1.6 under replace_one.
    let ar = ar(4.0, 2.0);
    let ro = ro(4.0, 2.0);
    assert!((round_sensitivity(&ar, 1.0, 100) - 0.8).abs() < 1e-15);
    assert!((round_sensitivity(&ro, 1.0, 100) - 1.6).abs() < 1e-15);
    assert_eq!(estimate_sensitivity(&ar), 8.0);
    assert_eq!(estimate_sensitivity(&ro), 16.0);
}

/// ‖(xxᵀ − yyᵀ)v‖ ≤ β² for unit v on random rows of norm β (the PSD argument of the module
/// docs), attained by x = v = e₁, y ⊥ v; 2β² is never approached.
#[test]
fn replace_one_change_moves_a_unit_vector_by_at_most_beta_squared() {
    let mut rng = seeded(77);
    let (d, beta) = (6, 1.7_f64);
    let mut worst = 0.0_f64;
    for _ in 0..20_000 {
        let unit = |rng: &mut ChaCha20Rng| {
            let z = Matrix::from_fn(d, 1, |_, _| StandardNormal.sample(&mut *rng));
            &z / z.norm()
        };
        let (x, y, v) = (unit(&mut rng) * beta, unit(&mut rng) * beta, unit(&mut rng));
        let e = &x * x.transpose() - &y * y.transpose();
        worst = worst.max((e * &v).norm());
    }
    assert!(worst <= beta * beta * (1.0 + 1e-12), "{worst}");
    assert!(worst > 0.8 * beta * beta, "{worst}");
    let mut x = Matrix::zeros(d, 1);
    x[(0, 0)] = beta;
    let mut y = Matrix::zeros(d, 1);
    y[(1, 0)] = beta;
    let e = &x * x.transpose() - &y * y.transpose();
    let v = &x / beta;
    assert!(((e * v).norm() - beta * beta).abs() < 1e-12);
}

#[test]
fn configure_then_cost_returns_the_target() {
    let d = 30;
    for neighbours in [AR, RO, EN] {
        let c = ctx(d, None, neighbours);
        for rho in [1e-8, 1e-3, 0.1, 1.0, 3.7, 1e4, 1e8] {
            for (k, iterations, search, share) in [
                (1, 1, false, 0.1),
                (3, 10, false, 0.5),
                (3, 10, true, 0.1),
                (30, 1000, true, 0.9),
            ] {
                let p = CoherentPowerParams {
                    eigenvalue_share: Some(share),
                    ..params(k, iterations, Some(17.0), search)
                };
                let config = CoherentPower.configure(p, &c, &target(rho)).expect("valid");
                let cost = CoherentPower.cost(&config, &c);
                assert!(cost.rho <= rho, "cost {} above target {rho}", cost.rho);
                assert!((rho - cost.rho) / rho <= 1e-9, "cost {} vs {rho}", cost.rho);
                assert_eq!(cost.delta, 0.0);
                // Independently: m = ⌈log₂17⌉ + 1 = 6 with the search; ρ_v = ρ/k.
                let m = if search { 6.0 } else { 1.0 };
                let per_vector = rho / k as f64;
                let s = (m * f64::from(iterations) / (2.0 * (1.0 - share) * per_vector)).sqrt();
                let eps = (2.0 * share * per_vector).sqrt();
                assert_eq!(config.coherence_candidates.len() as f64, m);
                assert!((config.multiplier - s).abs() / s <= 1e-12);
                assert!((config.eigenvalue_epsilon - eps).abs() / eps <= 1e-12);
            }
        }
    }
    // The algorithm spends no δ even when the target allows some.
    let with_delta = PrivacyTarget {
        public_default: false,
        rho: 1.0,
        delta: Some(1e-6),
        epsilon: None,
    };
    let c = ctx(d, None, AR);
    let config = CoherentPower
        .configure(params(2, 5, Some(4.0), false), &c, &with_delta)
        .expect("valid");
    assert_eq!(CoherentPower.cost(&config, &c).delta, 0.0);
}

#[test]
fn candidates_follow_remark_4_5() {
    assert_eq!(coherence_candidates(1.0), vec![1.0]);
    assert_eq!(coherence_candidates(1.5), vec![1.0, 1.5]);
    assert_eq!(coherence_candidates(6.0), vec![1.0, 2.0, 4.0, 6.0]);
    assert_eq!(coherence_candidates(8.0), vec![1.0, 2.0, 4.0, 8.0]);
    assert_eq!(
        coherence_candidates(100.0),
        vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 100.0]
    );
    // m = ⌈log₂C_max⌉ + 1 over a range of integers.
    for c_max in 1..=1100_u32 {
        let m = coherence_candidates(f64::from(c_max)).len() as u32;
        assert_eq!(
            m,
            c_max.next_power_of_two().trailing_zeros() + 1,
            "C_max = {c_max}"
        );
    }
}
