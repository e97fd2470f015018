//! Tests of `federated_power`: calibration and cost, validation, the simulated protocol's
//! output against exact PCA, dropouts, and the noise actually carried by each released sum.

use serde_json::json;

use super::*;
use crate::algorithms::noisy_power::{NoisyPower, NoisyPowerConfig};
use crate::algorithms::testing::{
    AR, RO, ar, assert_audits_catch_under_noise, assert_basis_contract, ctx, exact_top, gaussian,
    run_on_records, seeded, spiked_records, spiked_with_ctx, target, with_audited_env,
};
use crate::dataset::Neighbours;
use crate::federation::fixed_point::{self, FixedPoint};
use crate::linalg::Matrix;
use crate::linalg::subspace::sin_theta;
use crate::linalg::thin_qr_q;
use crate::linalg::{gram_t, gram_t_times};
use crate::privacy::lattice::grid_for;
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
        !fixed_point::fits(cfg.total_bound(&c.neighbours), cfg.fraction_bits + 1) || cfg.fraction_bits >= 40
    );
    let min = cfg
        .min_fraction_bits(&c.neighbours, c.d)
        .expect("an exact encoding exists");
    assert!(cfg.fraction_bits >= min, "{} < {min}", cfg.fraction_bits);
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
    // Fewer records than sites is no error: shards may be empty.
    let too_few = ctx(10, Some(2), RO);
    let p: FederatedPowerParams = serde_json::from_value(json!({"k": 2})).expect("parses");
    assert!(FederatedPower.configure(p, &too_few, &target(1.0)).is_ok());
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
        let (out, _) = run_on_records(&NoisyPower, &xt, &np, &c, 200 + seed);
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
    let (xt, c) = spiked_with_ctx(51, (d, n), &[9.0, 4.0], 0.3, RO);
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
fn audit_released_noise(factor: f64) -> [(&'static str, Result<(), String>); 2] {
    let (d, n, k, l, rho, sites, t) = (25, 1500, 3, 6, 0.8, 5_u32, 3_u32);
    let (xt, c) = spiked_with_ctx(61, (d, n), &[9.0, 6.0, 4.0], 0.3, RO);
    let mut cfg = configured(
        json!({"k": k, "iterations": l, "sites": sites, "threshold": t, "sensitivity": "rank_one",
               "dropouts": [{"site": 4, "round": 1}, {"site": 5, "round": 1}]}),
        &c,
        rho,
    );
    cfg.multiplier *= factor;
    let (run, audit) = simulate_audited(&xt, &cfg, &c.neighbours, 9);
    let m_spec = (f64::from(l) / (2.0 * rho)).sqrt();
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
            let shard = shard_of(&xt, &run.assignment, s);
            if let Some(it) = &iterate {
                exact += gram_t_times(&shard, it);
            }
            per_site.push((draw.scale, draw.values.clone()));
        }
        let delta = std::f64::consts::SQRT_2 * 4.0; // rank_one under replace_one, β = 2
        let central_sd = m_spec * delta;
        if iterate.is_some() {
            // The release minus the survivors' exact products is the released noise (up to
            // the rounding of each product to the noise grid, 2^-30 of the sd, and floating
            // point: the fixed-point encoding is exact).
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
    [
        ("per-site draws", check_gaussian_scale(&site_pool, 1.0)),
        ("released sums", check_gaussian_scale(&released, 1.0)),
    ]
}

/// The released sums carry the central noise. The twin: sites that split the noise over all S
/// sites instead of t (σ²/S each) leave a t-survivor sum with variance t/S·σ², 0.6σ² here; the
/// same checks catch it.
#[test]
fn released_sums_carry_the_central_noise() {
    assert_audits_catch_under_noise(audit_released_noise, (3.0_f64 / 5.0).sqrt());
}

/// The records (columns of `xt`) that `assignment` puts at site `site` (1-based).
fn shard_of(xt: &Matrix, assignment: &[u8], site: u32) -> Matrix {
    let columns: Vec<usize> = (0..xt.ncols())
        .filter(|&j| u32::from(assignment[j]) + 1 == site)
        .collect();
    Matrix::from_fn(xt.nrows(), columns.len(), |i, j| xt[(i, columns[j])])
}

/// Issue 22: a step 2^-f coarser than the noise's grid rounds noise away (with Δ = 0.01,
/// ρ = 0.5, t = 4 and f = 0 the loss was KL ≈ 1.14 where 0.5 was charged). Such f is refused
/// by name; the default is always exact.
#[test]
fn fraction_bits_that_would_round_noise_away_are_refused() {
    let c = ctx(10, Some(100), RO);
    let refuse = |c: &DataContext, value: serde_json::Value, rho: f64| {
        let p: FederatedPowerParams = serde_json::from_value(value.clone()).expect("parses");
        match FederatedPower.configure(p, c, &target(rho)) {
            Err(ConfigError::Invalid { field, message }) => {
                assert_eq!(field, "params.fraction_bits", "{value}: {message}");
                message
            }
            other => panic!("{value}: expected params.fraction_bits, got {other:?}"),
        }
    };
    let message = refuse(&c, json!({"k": 2, "fraction_bits": 0}), 1.0);
    assert!(message.contains("round away"), "{message}");
    // The audit's case: β = 0.1 under add_remove (Δ = β² = 0.01), ρ = 0.5, t = 4.
    let small = ctx(10, None, ar(0.1, 0.3));
    refuse(
        &small,
        json!({"k": 2, "sites": 4, "threshold": 4, "fraction_bits": 0}),
        0.5,
    );
    for (neighbours, rho, sites, t, mode) in [
        (RO, 1.0, 3, 2, "auto"),
        (small.neighbours, 0.5, 4, 4, "auto"),
        (small.neighbours, 0.5, 4, 4, "row_norm"),
        (AR, 100.0, 10, 7, "hardt_price"),
        (AR, 1e-3, 64, 43, "rank_one"),
    ] {
        let c = ctx(10, None, neighbours);
        let cfg = configured(
            json!({"k": 2, "sites": sites, "threshold": t, "sensitivity": mode, "max_site_samples": 100_000}),
            &c,
            rho,
        );
        let min = cfg.min_fraction_bits(&neighbours, c.d).expect("exists");
        assert!(
            cfg.fraction_bits >= min,
            "{mode}: default {} < {min}",
            cfg.fraction_bits
        );
        // One bit fewer is refused; the smallest exact f is accepted.
        if min > 0 {
            refuse(
                &c,
                json!({"k": 2, "sites": sites, "threshold": t, "sensitivity": mode, "max_site_samples": 100_000, "fraction_bits": min - 1}),
                rho,
            );
        }
        // The bound is the grid of the smallest sd any accepted iterate can produce.
        let sd_min = cfg.site_sd(min_sensitivity(cfg.sensitivity, &neighbours, c.d, cfg.p));
        assert!(2f64.powi(-(min as i32)) <= grid_for(sd_min).expect("grid"));
        assert!(min == 0 || 2f64.powi(1 - min as i32) > grid_for(sd_min * (1.0 - 1e-12)).expect("grid"));
    }
}

/// What a site encodes is exactly its noisy release: decoding the words gives back every
/// released value bit for bit, so the sum the coordinator unmasks is the sum of the releases.
#[test]
fn a_site_encoding_is_exact() {
    let (d, n) = (12, 300);
    let xt = spiked_records(71, d, n, &[9.0, 4.0], 0.3, 2.0);
    for (neighbours, rho) in [(RO, 0.5), (AR, 50.0), (ar(0.1, 0.3), 0.5)] {
        let c = ctx(d, None, neighbours);
        let xt = match neighbours {
            Neighbours::AddRemove { beta, .. } if beta < 1.0 => &xt * (beta / 2.0),
            _ => xt.clone(),
        };
        let cfg = configured(
            json!({"k": 2, "sites": 4, "threshold": 3, "max_site_samples": 1000}),
            &c,
            rho,
        );
        let x = thin_qr_q(&gaussian(&mut seeded(3), d, cfg.p));
        let (words, _) = with_audited_env(5, |env| {
            site_contribution(&x, &cfg, &neighbours, env, |x| gram_t_times(&xt, x)).expect("contributes")
        });
        let (released, _) = with_audited_env(5, |env| {
            let delta = received_sensitivity(&x, &cfg, &neighbours, d).expect("accepted");
            env.gaussian_release(RELEASE, gram_t_times(&xt, &x), delta, cfg.site_sd(delta))
                .expect("releases")
        });
        let fixed = FixedPoint::new(cfg.fraction_bits).expect("valid");
        let decoded = fixed.decode_all(&words);
        assert_eq!(
            decoded.as_slice(),
            released.as_slice(),
            "f = {}",
            cfg.fraction_bits
        );
    }
}

/// The per-round check at the site: a configuration whose step is coarser than this round's
/// noise grid is refused before anything is drawn, whatever the coordinator configured.
#[test]
fn a_site_refuses_a_round_whose_encoding_would_drop_noise() {
    let d = 8;
    let c = ctx(d, None, RO);
    let mut cfg = configured(json!({"k": 2, "sites": 3, "max_site_samples": 100}), &c, 1.0);
    let x = thin_qr_q(&gaussian(&mut seeded(4), d, cfg.p));
    let xt = spiked_records(72, d, 50, &[4.0], 0.3, 2.0);
    cfg.fraction_bits = 0;
    let (result, audit) = with_audited_env(1, |env| {
        site_contribution(&x, &cfg, &RO, env, |x| gram_t_times(&xt, x))
    });
    let err = result.expect_err("refused");
    assert!(err.to_string().contains("round away"), "{err}");
    assert!(audit.draws.is_empty(), "noise was drawn");
}

/// A lying coordinator's iterate: c·Q (c² times the loss of a `rank_one` study), a
/// non-finite one, or one of the wrong shape is refused before any noise is drawn; an honest
/// Q is accepted and its Δ is the usual one.
#[test]
fn a_site_refuses_an_iterate_that_is_not_orthonormal() {
    let d = 10;
    let c = ctx(d, None, RO);
    let cfg = configured(
        json!({"k": 2, "sites": 3, "sensitivity": "rank_one", "max_site_samples": 100}),
        &c,
        1.0,
    );
    let q = thin_qr_q(&gaussian(&mut seeded(6), d, cfg.p));
    let xt = spiked_records(73, d, 40, &[4.0], 0.3, 2.0);
    let honest = received_sensitivity(&q, &cfg, &RO, d).expect("honest");
    let rank_one = std::f64::consts::SQRT_2 * 4.0;
    assert!(
        honest >= rank_one && honest <= rank_one * (1.0 + 1e-14),
        "{honest}"
    );
    let mut nan = q.clone();
    nan[(3, 1)] = f64::NAN;
    let wide = gaussian(&mut seeded(7), d, cfg.p + 1);
    for (bad, what) in [
        (&q * 2.0, "columns are not orthonormal"),
        (&q * (1.0 + 1e-8), "columns are not orthonormal"),
        (nan, "not a finite"),
        (thin_qr_q(&wide), "the iterate is"),
    ] {
        let (result, audit) = with_audited_env(1, |env| {
            site_contribution(&bad, &cfg, &RO, env, |x| gram_t_times(&xt, x))
        });
        let err = result.expect_err("refused").to_string();
        assert!(err.contains(what), "{err}");
        assert!(audit.draws.is_empty(), "noise was drawn for a refused iterate");
    }
    // Within the tolerance the rank_one bound grows with ‖X‖₂, so it still covers the product.
    let near = &q * (1.0 + 1e-10);
    let delta = received_sensitivity(&near, &cfg, &RO, d).expect("within tolerance");
    assert!(delta >= rank_one * (1.0 + 1e-10), "{delta}");
}

/// Issue 22: a simulated job with a small max_site_samples failed exactly when a shard was
/// larger (log₂ n such jobs recover a private n). Now products are clamped, nothing fails, and
/// shards with no records work.
#[test]
fn simulated_outcomes_do_not_depend_on_shard_sizes() {
    let d = 8;
    let c = ctx(d, None, AR);
    let cfg = configured(
        json!({"k": 2, "sites": 3, "iterations": 3, "max_site_samples": 10}),
        &c,
        1.0,
    );
    for n in [0, 1, 2, 30, 600] {
        let xt = spiked_records(74, d, n.max(1), &[4.0], 0.3, 2.0)
            .columns(0, n)
            .into_owned();
        let (run, _) = with_audited_env(8, |env| simulate::run(&xt, &cfg, &AR, env));
        let run = run.unwrap_or_else(|e| panic!("n = {n}: {e:?}"));
        assert_basis_contract(&run.output.basis, d, 2);
        assert_eq!(run.assignment.len(), n);
    }
}

/// The clamp is exact for a site within max_site_samples and bounds a larger one's product.
#[test]
fn clamping_changes_nothing_within_the_limit_and_bounds_beyond_it() {
    let d = 6;
    let c = ctx(d, None, AR);
    let xt = spiked_records(75, d, 400, &[4.0], 0.0, 2.0);
    let x = thin_qr_q(&gaussian(&mut seeded(9), d, 2));
    let within = configured(
        json!({"k": 1, "p": 2, "sites": 3, "max_site_samples": 400}),
        &c,
        1e6,
    );
    let beyond = configured(
        json!({"k": 1, "p": 2, "sites": 3, "max_site_samples": 4}),
        &c,
        1e6,
    );
    let decode = |cfg: &FederatedPowerConfig| {
        let (words, _) = with_audited_env(2, |env| {
            site_contribution(&x, cfg, &AR, env, |x| gram_t_times(&xt, x)).expect("contributes")
        });
        Matrix::from_column_slice(
            d,
            2,
            &FixedPoint::new(cfg.fraction_bits).expect("f").decode_all(&words),
        )
    };
    let exact = gram_t_times(&xt, &x);
    let sd = within.site_sd(received_sensitivity(&x, &within, &AR, d).expect("ok"));
    assert!((decode(&within) - &exact).amax() < 10.0 * sd);
    let clamp = beyond.signal_bound(&AR);
    assert!(
        exact.amax() > 2.0 * clamp,
        "the test needs a product beyond the clamp"
    );
    let sd = beyond.site_sd(received_sensitivity(&x, &beyond, &AR, d).expect("ok"));
    assert!(decode(&beyond).amax() <= clamp + 10.0 * sd);
}

/// One added record changes the membership of its own shard only: every other record stays
/// where it was (contiguous blocks by index moved records at every later boundary, so with a
/// dropout one record could change the survivor sum by many records).
#[test]
fn one_added_record_moves_no_other_record_between_shards() {
    let d = 5;
    let c = ctx(d, None, AR);
    let cfg = configured(
        json!({"k": 1, "sites": 4, "threshold": 3, "iterations": 2,
               "dropouts": [{"site": 2, "round": 1}]}),
        &c,
        1.0,
    );
    let xt = spiked_records(76, d, 200, &[4.0], 0.3, 2.0);
    let extra = spiked_records(77, d, 1, &[4.0], 0.3, 2.0);
    let at = 37;
    let mut with = Matrix::zeros(d, 201);
    with.columns_mut(0, at).copy_from(&xt.columns(0, at));
    with.column_mut(at).copy_from(&extra.column(0));
    with.columns_mut(at + 1, 200 - at)
        .copy_from(&xt.columns(at, 200 - at));
    // Same seed: the same per-job key, as for two neighbouring datasets in one world.
    let (before, _) = with_audited_env(10, |env| simulate::run(&xt, &cfg, &AR, env));
    let (after, _) = with_audited_env(10, |env| simulate::run(&with, &cfg, &AR, env));
    let (before, after) = (before.expect("runs"), after.expect("runs"));
    let mut moved: Vec<u8> = after.assignment.clone();
    moved.remove(at);
    assert_eq!(
        moved, before.assignment,
        "a record other than the added one changed shard"
    );
    let sizes: Vec<usize> = (0..4u8)
        .map(|s| before.assignment.iter().filter(|&&a| a == s).count())
        .collect();
    assert!(sizes.iter().all(|&k| k > 20), "a balanced split: {sizes:?}");
}
