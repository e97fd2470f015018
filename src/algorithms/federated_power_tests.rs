//! Tests of `federated_power`: calibration and cost, validation, the simulated protocol's
//! output against exact PCA, dropouts, and the noise actually carried by each released sum.

use serde_json::json;

use super::*;
use crate::algorithms::noisy_power::{NoisyPower, NoisyPowerConfig};
use crate::algorithms::testing::{
    AR, RO, assert_basis_contract, ctx, exact_top, run_audited, spiked_records, target, with_audited_env,
};
use crate::federation::simulate::{self, shard_ranges};
use crate::linalg::subspace::sin_theta;
use crate::linalg::{gram_t, gram_t_times};
use crate::privacy::testing::check_gaussian_scale;

fn configured(value: serde_json::Value, c: &DataContext, rho: f64) -> FederatedPowerConfig {
    let p: FederatedPowerParams = serde_json::from_value(value).expect("valid params");
    FederatedPower
        .configure(p, c, &target(rho))
        .expect("valid configuration")
}

#[test]
fn cost_is_noisy_power_cost_and_never_exceeds_the_target() {
    let c = ctx(20, Some(400), RO);
    for (rho, l) in [(0.5, 40), (0.1, 4), (2.0, 1), (1e-3, 200)] {
        let cfg = configured(
            json!({"k": 3, "iterations": l, "sites": 4, "threshold": 3}),
            &c,
            rho,
        );
        let cost = FederatedPower.cost(&cfg, &c);
        assert!(
            cost.rho <= rho && cost.rho > rho * (1.0 - 1e-12),
            "ρ {rho}: cost {cost:?}"
        );
        assert_eq!(cost.delta, 0.0);
        // Same multiplier as the central algorithm at the same (ρ, L).
        let central: NoisyPowerConfig = NoisyPower
            .configure(
                serde_json::from_value(json!({"k": 3, "iterations": l})).expect("params"),
                &c,
                &target(rho),
            )
            .expect("valid");
        assert_eq!(cfg.multiplier, central.multiplier);
        // Hand-worked: m = sqrt(L/(2ρ)).
        assert!((cfg.multiplier - (f64::from(l) / (2.0 * rho)).sqrt()).abs() < 1e-9 * cfg.multiplier);
    }
}

#[test]
fn defaults_threshold_and_fixed_point() {
    assert_eq!(default_threshold(2), 2);
    assert_eq!(default_threshold(3), 2);
    assert_eq!(default_threshold(4), 3);
    assert_eq!(default_threshold(10), 7);
    let c = ctx(30, Some(900), AR);
    let cfg = configured(json!({"k": 2}), &c, 0.5);
    assert_eq!((cfg.sites, cfg.threshold, cfg.p), (DEFAULT_SITES, 2, 4));
    assert!(fixed_point::fits(
        cfg.total_bound(&c.neighbours),
        cfg.fraction_bits
    ));
    assert!(
        !fixed_point::fits(cfg.total_bound(&c.neighbours), cfg.fraction_bits + 1) || cfg.fraction_bits == 40
    );
}

#[test]
fn bad_parameters_are_refused_with_their_field() {
    let c = ctx(10, Some(100), RO);
    let refuse = |value: serde_json::Value, field: &str| {
        let p: FederatedPowerParams = serde_json::from_value(value.clone()).expect("parses");
        match FederatedPower.configure(p, &c, &target(1.0)) {
            Err(ConfigError::Invalid { field: f, .. }) => assert_eq!(f, field, "{value}"),
            other => panic!("{value}: expected an invalid {field}, got {other:?}"),
        }
    };
    refuse(json!({"k": 2, "threshold": 1}), "params.threshold");
    refuse(json!({"k": 2, "sites": 3, "threshold": 4}), "params.threshold");
    refuse(json!({"k": 2, "sites": 1}), "params.sites");
    refuse(json!({"k": 2, "sites": 65}), "params.sites");
    refuse(json!({"k": 2, "iterations": 201}), "params.iterations");
    refuse(json!({"k": 11}), "params.k");
    refuse(json!({"k": 2, "fraction_bits": 60}), "params.fraction_bits");
    refuse(
        json!({"k": 2, "max_site_samples": 1_000_000_000_000_u64, "fraction_bits": 40}),
        "params.fraction_bits",
    );
    refuse(
        json!({"k": 2, "dropouts": [{"site": 4, "round": 1}]}),
        "params.dropouts[0]",
    );
    refuse(
        json!({"k": 2, "dropouts": [{"site": 1, "round": 0}]}),
        "params.dropouts[0]",
    );
    let too_few = ctx(10, Some(2), RO);
    let p: FederatedPowerParams = serde_json::from_value(json!({"k": 2})).expect("parses");
    assert!(FederatedPower.configure(p, &too_few, &target(1.0)).is_err());
}

#[test]
fn a_wrapping_fixed_point_choice_is_caught_by_the_bound() {
    // The bound really is what limits the sum: S·(n_max·β² + 40σ)·2^f < 2^62.
    let c = ctx(10, Some(100), AR);
    let cfg = configured(json!({"k": 2, "max_site_samples": 1000}), &c, 1.0);
    let total = cfg.total_bound(&c.neighbours);
    assert!(total * 2f64.powi(cfg.fraction_bits as i32) < 2f64.powi(62));
    let beta = 2.0;
    assert!(total >= 3.0 * 1000.0 * beta * beta);
}

/// Runs the simulation with an audit; returns the output and the replayed releases.
fn simulate_audited(
    xt: &Matrix,
    cfg: &FederatedPowerConfig,
    neighbours: &Neighbours,
    seed: u64,
) -> (simulate::SimulatedRun, crate::privacy::noise::RecordingAudit) {
    let (run, audit) = with_audited_env(seed, |env| simulate::run(xt, cfg, neighbours, env));
    (run.expect("simulation runs"), audit)
}

#[test]
fn simulation_converges_to_exact_pca_as_the_budget_grows() {
    let (d, n, k) = (30, 3000, 3);
    let xt = spiked_records(31, d, n, &[9.0, 6.0, 4.0], 0.3, 2.0);
    let a = gram_t(&xt);
    let top = exact_top(&a, k);
    let c = ctx(d, Some(n), RO);
    let mut errors = Vec::new();
    for rho in [0.01, 1.0, 1e4] {
        let cfg = configured(
            json!({"k": k, "iterations": 8, "sites": 5, "threshold": 3}),
            &c,
            rho,
        );
        let (run, _) = simulate_audited(&xt, &cfg, &c.neighbours, 7);
        assert_basis_contract(&run.output.basis, d, k);
        errors.push(sin_theta(&run.output.basis, &top));
        assert_eq!(run.report.rounds.len(), 8);
    }
    assert!(
        errors[2] < 1e-3,
        "large budget must recover the top subspace: {errors:?}"
    );
    assert!(errors[0] > errors[2], "{errors:?}");
}

#[test]
fn simulation_matches_central_noisy_power_utility() {
    // Same ρ and L: the federated run's sum carries the central noise (|U| = t here, so
    // exactly it); their captured energies agree within sampling error.
    let (d, n, k) = (40, 4000, 3);
    let xt = spiked_records(41, d, n, &[9.0, 6.0, 4.0], 0.4, 2.0);
    let a = gram_t(&xt);
    let top_energy: f64 = {
        let e = crate::linalg::sym_eig(&a);
        e.values.iter().take(k).sum()
    };
    let energy = |q: &Matrix| (q.transpose() * &a * q).trace() / top_energy;
    let c = ctx(d, Some(n), RO);
    let (mut fed, mut central) = (0.0, 0.0);
    let reps = 5;
    for seed in 0..reps {
        let cfg = configured(
            json!({"k": k, "iterations": 10, "sites": 4, "threshold": 4}),
            &c,
            0.5,
        );
        let (run, _) = simulate_audited(&xt, &cfg, &c.neighbours, 100 + seed);
        fed += energy(&run.output.basis) / reps as f64;
        let np: NoisyPowerConfig = NoisyPower
            .configure(
                serde_json::from_value(json!({"k": k, "iterations": 10})).expect("p"),
                &c,
                &target(0.5),
            )
            .expect("valid");
        let (out, _) = run_audited(
            &NoisyPower,
            DataInput::Records { xt: (&xt).into() },
            &np,
            &c,
            200 + seed,
        );
        central += energy(&out.expect("runs").basis) / reps as f64;
    }
    assert!(
        (fed - central).abs() < 0.05,
        "federated {fed:.4} vs central {central:.4}"
    );
}

#[test]
fn dropouts_are_survived_down_to_t_and_fail_below() {
    let (d, n, k) = (12, 600, 2);
    let xt = spiked_records(51, d, n, &[9.0, 4.0], 0.3, 2.0);
    let c = ctx(d, Some(n), RO);
    let cfg = configured(
        json!({"k": k, "iterations": 5, "sites": 5, "threshold": 3,
               "dropouts": [{"site": 2, "round": 3}, {"site": 5, "round": 1}]}),
        &c,
        1.0,
    );
    let (run, _) = simulate_audited(&xt, &cfg, &c.neighbours, 3);
    assert_basis_contract(&run.output.basis, d, k);
    let survivors: Vec<usize> = run.report.rounds.iter().map(|r| r.survivors.len()).collect();
    assert_eq!(survivors, vec![4, 4, 3, 3, 3]);
    assert_eq!(run.report.rounds[2].dropped, vec![2]);
    assert!((run.report.achieved_multiplier - cfg.multiplier).abs() < 1e-12);
    let too_many = configured(
        json!({"k": k, "iterations": 5, "sites": 5, "threshold": 3,
               "dropouts": [{"site": 1, "round": 2}, {"site": 2, "round": 2}, {"site": 3, "round": 4}]}),
        &c,
        1.0,
    );
    let (failed, _) = with_audited_env(4, |env| simulate::run(&xt, &too_many, &c.neighbours, env));
    match failed {
        Err(RunError::Failed(m)) => assert!(m.contains("survivors"), "{m}"),
        other => panic!("expected a failure below t, got {:?}", other.map(|r| r.report)),
    }
}

/// Checks each released sum's noise: Y_r − Σ_{s∈U_r} A_s·X_{r−1} against sd m·Δ(X)·sqrt(|U_r|/t),
/// where m is computed here from the spec (sqrt(L/(2ρ))) and the per-site draws against
/// m·Δ/√t. Returns the pooled check of the released sums' noise, normalised by the central
/// sd m·Δ: calibrated runs reach at least it, an under-noised one does not.
fn audit_released_noise(factor: f64) -> (Result<(), String>, Result<(), String>) {
    let (d, n, k, l, rho, sites, t) = (25, 1500, 3, 6, 0.8, 5_u32, 3_u32);
    let xt = spiked_records(61, d, n, &[9.0, 6.0, 4.0], 0.3, 2.0);
    let c = ctx(d, Some(n), RO);
    let mut cfg = configured(
        json!({"k": k, "iterations": l, "sites": sites, "threshold": t, "sensitivity": "rank_one",
               "dropouts": [{"site": 4, "round": 1}, {"site": 5, "round": 1}]}),
        &c,
        rho,
    );
    cfg.multiplier *= factor;
    let (run, audit) = simulate_audited(&xt, &cfg, &c.neighbours, 9);
    let m_spec = (f64::from(l) / (2.0 * rho)).sqrt();
    let shards = shard_ranges(n, sites as usize);
    let mut per_site = Vec::new();
    let mut released = Vec::new();
    // Draws arrive site by site within each round, survivors in index order.
    let mut draws = audit.draws.iter();
    let mut iterate: Option<Matrix> = None;
    for (r, y) in run.releases.iter().enumerate() {
        let record = &run.report.rounds[r];
        let mut exact = Matrix::zeros(d, cfg.p);
        let mut noise_sum = Matrix::zeros(d, cfg.p);
        for &s in &record.survivors {
            let draw = draws.next().expect("one draw per survivor");
            assert_eq!((draw.label, draw.values.len()), (RELEASE, d * cfg.p));
            noise_sum += Matrix::from_column_slice(d, cfg.p, &draw.values);
            let range = shards[s as usize - 1].clone();
            let shard = xt.columns(range.start, range.len()).into_owned();
            if let Some(it) = &iterate {
                exact += gram_t_times(&shard, it);
            }
            per_site.push((draw.scale, draw.values.clone()));
        }
        let delta = std::f64::consts::SQRT_2 * 4.0; // rank_one under replace_one, β = 2
        let central_sd = m_spec * delta;
        if iterate.is_some() {
            // The release minus the survivors' exact products is the released noise (up to
            // the 2^-f rounding of the fixed-point encoding).
            let noise = y - &exact;
            assert!(
                (&noise - &noise_sum).amax() < 1e-6 * central_sd,
                "release noise is not the audited noise"
            );
            released.extend(noise.iter().map(|v| v / central_sd));
        }
        iterate = Some(crate::linalg::thin_qr_q(y));
        for (scale, _) in per_site.iter().rev().take(record.survivors.len()) {
            let expected = m_spec * delta / f64::from(t).sqrt();
            assert!(
                crate::privacy::testing::is_widened(*scale, expected) || factor != 1.0,
                "site sd {scale} vs {expected}"
            );
        }
    }
    let site_pool: Vec<f64> = per_site
        .iter()
        .flat_map(|(_, v)| {
            v.iter()
                .map(|x| x * f64::from(t).sqrt() / (m_spec * std::f64::consts::SQRT_2 * 4.0))
        })
        .collect();
    (
        check_gaussian_scale(&site_pool, 1.0),
        check_gaussian_scale(&released, 1.0),
    )
}

#[test]
fn released_sums_carry_the_central_noise() {
    let (sites, sums) = audit_released_noise(1.0);
    assert!(sites.is_ok(), "per-site draws: {sites:?}");
    assert!(sums.is_ok(), "released sums: {sums:?}");
}

/// The twin: sites that split the noise over all S sites instead of t (σ²/S each) leave a
/// t-survivor sum with variance t/S·σ², 0.6σ² here; the same check catches it.
#[test]
fn under_noised_twin_fails_the_release_audit() {
    let factor = (3.0_f64 / 5.0).sqrt();
    let (sites, sums) = audit_released_noise(factor);
    assert!(sites.is_err(), "per-site under-noising went unnoticed");
    assert!(sums.is_err(), "released-sum under-noising went unnoticed");
}
