//! Tests of `dp_oja` (cost, calibration, validation, refusal, convergence, noise audit).

use serde_json::json;

use super::*;
use crate::algorithms::DynAlgorithm;
use crate::algorithms::testing::{
    assert_basis_contract, assert_fails_cleanly, assert_invalid_fields, assert_replace_one_records_only, ctx,
    exact_top, registry_and_direct_runs, rejected_field, run_on_records, run_with_progress,
    sign_spiked_records, target,
};
use crate::linalg::subspace::sin_theta;
use crate::linalg::{Matrix, Vector, gram_t};
use crate::privacy::testing::check_gaussian_scale;

const BETA: f64 = 6.0;
const RO: Neighbours = Neighbours::ReplaceOne {
    beta: BETA,
    alpha: 20.0,
};

fn params(k: usize) -> DpOjaParams {
    DpOjaParams {
        k,
        clip: None,
        learning_rate: None,
    }
}

#[test]
fn cost_is_one_over_two_a_squared() {
    let config = |noise_multiplier| DpOjaConfig {
        k: 2,
        clip: 3.0,
        learning_rate: DEFAULT_LEARNING_RATE,
        noise_multiplier,
        updates: 10,
    };
    let c = ctx(5, Some(20), RO);
    // a = 1 → 1/2; a = 0.5 → 2; a = 10 → 0.005. No δ.
    assert_eq!(DpOja.cost(&config(1.0), &c), Cost::zcdp(0.5));
    assert_eq!(DpOja.cost(&config(0.5), &c), Cost::zcdp(2.0));
    assert!((DpOja.cost(&config(10.0), &c).rho - 0.005).abs() < 1e-15);
}

#[test]
fn configure_then_cost_returns_the_target() {
    let c = ctx(10, Some(1000), RO);
    for rho in [1e-8, 1e-3, 0.1, 1.0, 3.7, 1e6] {
        let config = DpOja.configure(params(2), &c, &target(rho)).expect("valid");
        let cost = DpOja.cost(&config, &c);
        assert!(
            cost.rho <= rho && (rho - cost.rho) / rho <= 1e-12,
            "{} vs {rho}",
            cost.rho
        );
        assert_eq!(cost.delta, 0.0);
        let a = 1.0 / (2.0 * rho).sqrt();
        assert!((config.noise_multiplier - a).abs() <= 1e-12 * a);
    }
}

#[test]
fn defaults_are_filled_in() {
    let c = ctx(10, Some(1001), RO);
    let prepared = DpOja.prepare(json!({"k": 3}), &c, &target(0.5)).expect("valid");
    let config: DpOjaConfig = serde_json::from_value(prepared.config).expect("config");
    assert_eq!(config.clip, BETA * BETA);
    assert_eq!(
        config.learning_rate,
        LearningRate {
            offset: 1.0,
            slope: 1.0
        }
    );
    assert_eq!(config.updates, 333);
    assert_eq!(config.noise_multiplier, 1.0);
    let noise = &prepared.noise[0];
    assert_eq!(
        (noise.count, noise.sensitivity, noise.multiplier),
        (999, Some(2.0 * BETA * BETA), 1.0)
    );
    // A δ in the target is accepted and not spent.
    let with_delta = PrivacyTarget {
        rho: 0.5,
        delta: Some(1e-5),
        epsilon: None,
    };
    let prepared = DpOja
        .prepare(json!({"k": 1, "clip": 2.5}), &c, &with_delta)
        .expect("valid");
    assert_eq!(prepared.cost.delta, 0.0);
}

#[test]
fn invalid_parameters_name_their_field() {
    let c = ctx(10, Some(100), RO);
    assert_invalid_fields(
        &DpOja,
        &c,
        &target(1.0),
        [
            (json!({"k": 0}), "params.k"),
            (json!({"k": 11}), "params.k"),
            (json!({"k": 2, "clip": 0.0}), "params.clip"),
            (json!({"k": 2, "clip": -1.0}), "params.clip"),
            (json!({"k": 2, "clip": "big"}), "params.clip"),
            (
                json!({"k": 2, "learning_rate": {"offset": 1.0, "slope": -2.0}}),
                "params.learning_rate.slope",
            ),
            (
                json!({"k": 2, "learning_rate": {"offset": 0.0, "slope": 0.0}}),
                "params.learning_rate",
            ),
        ],
    );
    let e = DpOja
        .prepare(json!({"k": 2, "batch_size": 3}), &c, &target(1.0))
        .expect_err("unknown");
    assert!(e.to_string().contains("`batch_size`"), "{e}");
    let few = ctx(10, Some(3), RO);
    assert_eq!(
        rejected_field(&DpOja, json!({"k": 4}), &few, &target(1.0)),
        "params.k"
    );
    assert_eq!(rejected_field(&DpOja, json!({"k": 2}), &c, &target(0.0)), "rho");
}

#[test]
fn refuses_matrices_and_add_remove() {
    let [_, add_remove] = assert_replace_one_records_only(&DpOja, &target(1.0));
    let Err(ConfigError::Unsupported(why)) = DpOja.configure(params(1), &add_remove, &target(1.0)) else {
        panic!("add_remove accepted");
    };
    assert!(why.contains("replace_one"), "{why}");
}

#[test]
fn clip_caps_the_norm_only_above_the_threshold() {
    let mut v = Vector::from_column_slice(&[3.0, 4.0]);
    clip(&mut v, 10.0);
    assert_eq!(v, Vector::from_column_slice(&[3.0, 4.0]));
    clip(&mut v, 2.5);
    assert!((v - Vector::from_column_slice(&[1.5, 2.0])).amax() < 1e-15);
    let mut zero = Vector::zeros(3);
    clip(&mut zero, 1.0);
    assert_eq!(zero, Vector::zeros(3));
}

/// d = 20, k = 2, n = 20 000, huge budget: orthonormal, signs fixed, close to the exact top-2.
#[test]
fn converges_to_the_exact_subspace_at_huge_budget() {
    let (d, n, k) = (20, 20_000, 2);
    let xt = sign_spiked_records(21, d, n, &[10.0, 5.0], 0.3, BETA);
    let c = ctx(d, Some(n), RO);
    let config = DpOja.configure(params(k), &c, &target(1e12)).expect("valid");
    let (out, _) = run_on_records(&DpOja, &xt, &config, &c, 22);
    let out = out.expect("run");
    assert_basis_contract(&out.basis, d, k);
    assert!(out.eigenvalues.is_none());
    let err = sin_theta(&out.basis, &exact_top(&gram_t(&xt), k));
    assert!(err < 0.05, "sin θ = {err}");
}

#[test]
fn error_decreases_as_the_budget_grows() {
    let (d, n, k) = (20, 20_000, 2);
    let xt = sign_spiked_records(23, d, n, &[10.0, 5.0], 0.3, BETA);
    let exact = exact_top(&gram_t(&xt), k);
    let c = ctx(d, Some(n), RO);
    let errors: Vec<f64> = [1.0, 1e2, 1e4, 1e12]
        .iter()
        .map(|&rho| {
            let config = DpOja.configure(params(k), &c, &target(rho)).expect("valid");
            let (out, _) = run_on_records(&DpOja, &xt, &config, &c, 24);
            sin_theta(&out.expect("run").basis, &exact)
        })
        .collect();
    assert!(errors.windows(2).all(|w| w[1] < w[0]), "errors {errors:?}");
    assert!(errors[0] > 0.3 && errors[3] < 0.05, "errors {errors:?}");
}

#[test]
fn progress_is_reported_and_cancellation_stops_the_run() {
    let (d, n) = (4, 3000);
    let xt = sign_spiked_records(25, d, n, &[3.0], 0.3, BETA);
    let c = ctx(d, Some(n), RO);
    let config = DpOja.configure(params(2), &c, &target(1.0)).expect("valid");
    let mut reports = 0;
    let cancel_third = |_: u32, _: u32| {
        reports += 1;
        reports == 3
    };
    let (out, seen, _) = run_with_progress(
        &DpOja,
        DataInput::Records { xt: &xt },
        &config,
        &c,
        26,
        cancel_third,
    );
    assert_eq!(out.err(), Some(RunError::Cancelled));
    // Every 1024 updates and at the end of each round (1500 updates per round).
    assert_eq!(seen, [(1024, 3000), (1500, 3000), (2048, 3000)]);
}

#[test]
fn mismatched_input_fails_cleanly() {
    let (d, n) = (6, 200);
    let xt = sign_spiked_records(27, d, n, &[4.0], 0.3, BETA);
    let c = ctx(d, Some(n), RO);
    let config = DpOja.configure(params(2), &c, &target(1.0)).expect("valid");
    let a = Matrix::identity(d, d);
    for (input, context) in [
        (DataInput::Records { xt: &xt }, ctx(d, Some(n + 2), RO)),
        (DataInput::Records { xt: &xt }, ctx(d - 1, Some(n), RO)),
        (DataInput::Matrix { a: &a }, c),
        (
            DataInput::Records { xt: &xt },
            ctx(d, None, Neighbours::Entry { u: 1.0 }),
        ),
    ] {
        assert_fails_cleanly(&DpOja, input, &config, &context, context);
    }
    let bad = DpOjaConfig {
        noise_multiplier: 0.0,
        ..config
    };
    assert!(matches!(
        run_on_records(&DpOja, &xt, &bad, &c, 1).0,
        Err(RunError::Failed(_))
    ));
}

#[test]
fn registry_round_trip_matches_a_direct_run() {
    let (d, n) = (8, 600);
    let xt = sign_spiked_records(28, d, n, &[4.0, 2.0], 0.3, BETA);
    let c = ctx(d, Some(n), RO);
    let prepared = DpOja
        .prepare(json!({"k": 2, "clip": 20.0}), &c, &target(3.0))
        .expect("valid");
    let config = DpOja
        .configure(
            DpOjaParams {
                k: 2,
                clip: Some(20.0),
                learning_rate: None,
            },
            &c,
            &target(3.0),
        )
        .expect("valid");
    let (via_registry, direct) = registry_and_direct_runs(&DpOja, &prepared.config, &config, &xt, &c, 29);
    assert_eq!(via_registry.basis, direct.basis);
}

/// Runs dp_oja with the multiplier scaled by `factor` (1 = calibrated) and checks every draw
/// against sd = 2c/sqrt(2ρ) computed here from the spec (sensitivity 2c, ρ = 1/(2a²)).
fn audit_noise(clip: f64, factor: f64) -> Result<(), String> {
    let (d, n, k, rho) = (10, 3000, 2, 0.7_f64);
    let xt = sign_spiked_records(30, d, n, &[6.0, 3.0], 0.3, BETA);
    let c = ctx(d, Some(n), RO);
    let mut config = DpOja
        .configure(
            DpOjaParams {
                k,
                clip: Some(clip),
                learning_rate: None,
            },
            &c,
            &target(rho),
        )
        .expect("valid");
    config.noise_multiplier *= factor;
    let (out, audit) = run_on_records(&DpOja, &xt, &config, &c, 31);
    out.expect("run");
    assert_eq!(audit.draws.len(), n, "one draw per update");
    let sd = 2.0 * clip / (2.0 * rho).sqrt();
    let mut values = Vec::with_capacity(n * d);
    for draw in &audit.draws {
        assert_eq!(
            (draw.label, draw.distribution, draw.values.len()),
            (RELEASE, "gaussian", d)
        );
        values.extend(&draw.values);
    }
    check_gaussian_scale(&values, sd)
}

#[test]
fn noise_matches_spec() {
    for clip in [BETA * BETA, 3.0] {
        let result = audit_noise(clip, 1.0);
        assert!(result.is_ok(), "c = {clip}: {result:?}");
    }
}

/// The same check catches 10 % too little noise.
#[test]
fn under_noised_run_fails_the_audit() {
    for clip in [BETA * BETA, 3.0] {
        assert!(
            audit_noise(clip, 0.9).is_err(),
            "c = {clip}: under-noising went unnoticed"
        );
    }
}

#[test]
fn info_describes_the_algorithm() {
    let info = Algorithm::info(&DpOja);
    assert_eq!(info.name, "dp_oja");
    assert_eq!(info.kinds, [Kind::Records]);
    assert_eq!(info.relations, [Relation::ReplaceOne]);
    assert!(!info.public_only && info.source.contains("Alg. 3"));
    assert!(info.privacy.contains("1/(2a²)"));
    let names: Vec<(&str, bool)> = info.params.iter().map(|p| (p.name, p.required)).collect();
    assert_eq!(names, [("k", true), ("clip", false), ("learning_rate", false)]);
    assert!(info.params.iter().all(|p| p.required || p.default.is_some()));
}
