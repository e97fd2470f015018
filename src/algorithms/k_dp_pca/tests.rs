//! Tests of `k_dp_pca` (cost, calibration, validation, refusal, convergence, noise audit).

use serde_json::json;

use super::*;
use crate::algorithms::DynAlgorithm;
use crate::algorithms::testing::{
    assert_basis_contract, assert_fails_cleanly, assert_invalid_fields, assert_replace_one_records_only, ctx,
    exact_top, invalid_field, registry_and_direct_runs, rejected_field, run_on_records, run_with_progress,
    sign_spiked_records,
};
use crate::linalg::subspace::sin_theta;
use crate::linalg::{Matrix, gram_t};
use crate::privacy::testing::{check_gaussian_scale, check_laplace_scale};

const BETA: f64 = 6.0;
const RO: Neighbours = Neighbours::ReplaceOne {
    beta: BETA,
    alpha: 20.0,
};

fn target(rho: f64, delta: f64) -> PrivacyTarget {
    PrivacyTarget {
        rho,
        delta: Some(delta),
        epsilon: None,
    }
}

fn params(k: usize) -> KDpPcaParams {
    KDpPcaParams {
        k,
        batch_size: None,
        learning_rate: None,
        tail_scale: None,
        tail_exponent: None,
        failure_probability: None,
        range_subsets: None,
    }
}

fn prepare(
    params: serde_json::Value,
    c: &DataContext,
    t: &PrivacyTarget,
) -> Result<KDpPcaConfig, ConfigError> {
    let prepared = KDpPca.prepare(params, c, t)?;
    Ok(serde_json::from_value(prepared.config).expect("config round-trips"))
}

// ---- Cost and calibration. ----

#[test]
fn cost_is_epsilon_squared_over_two_and_delta() {
    let config = |epsilon, delta| KDpPcaConfig {
        k: 1,
        batch_size: 10,
        steps: 1,
        learning_rate: LearningRate {
            offset: 1.0,
            slope: 1.0,
        },
        tail_scale: 1.0,
        tail_exponent: 1.0,
        failure_probability: 0.01,
        range_subsets: 5,
        epsilon,
        delta,
    };
    let c = ctx(5, Some(10), RO);
    // ε = 1, δ = 0.01 → ρ = 1/2; ε = 2 → ρ = 2; ε = 0.3 → ρ = 0.045.
    assert_eq!(
        KDpPca.cost(&config(1.0, 0.01), &c),
        Cost {
            rho: 0.5,
            delta: 0.01,
            other_rho: 0.5,
        }
    );
    assert_eq!(
        KDpPca.cost(&config(2.0, 1e-6), &c),
        Cost {
            rho: 2.0,
            delta: 1e-6,
            other_rho: 2.0,
        }
    );
    assert!((KDpPca.cost(&config(0.3, 0.1), &c).rho - 0.045).abs() < 1e-15);
}

#[test]
fn configure_then_cost_returns_the_target() {
    let c = ctx(10, Some(100_000_000), RO);
    for rho in [1e-3, 0.02, 0.5, 1.0, 3.7, 1e4] {
        for delta in [1e-10, 1e-5, 0.01] {
            let config = KDpPca
                .configure(params(2), &c, &target(rho, delta))
                .expect("valid");
            let cost = KDpPca.cost(&config, &c);
            assert!(
                cost.rho <= rho && (rho - cost.rho) / rho <= 1e-9,
                "{} vs {rho}",
                cost.rho
            );
            assert_eq!(cost.delta, delta);
            assert!((config.epsilon - (2.0 * rho).sqrt()).abs() <= 1e-12 * config.epsilon);
        }
    }
}

#[test]
fn delta_is_required() {
    let c = ctx(10, Some(10_000), RO);
    let none = PrivacyTarget {
        rho: 1.0,
        delta: None,
        epsilon: None,
    };
    assert_eq!(
        rejected_field(&KDpPca, json!({"k": 1}), &c, &none),
        "privacy.delta"
    );
    for bad in [0.0, 1.0, -0.1, f64::NAN] {
        assert_eq!(
            rejected_field(&KDpPca, json!({"k": 1}), &c, &target(1.0, bad)),
            "privacy.delta",
            "{bad}"
        );
    }
    assert_eq!(
        rejected_field(&KDpPca, json!({"k": 1}), &c, &target(f64::NAN, 0.01)),
        "rho"
    );
}

/// App. G.1's defaults: B = ⌊√n⌋, K = a = 1, τ = 0.01; η_t = ln n/(β²·t); the subsets rule
/// min(⌊B/2⌋, max(64, 4·minimum)) with minimum = ⌈1 + 2·ln(1/(δ'τ'))/ε'⌉.
#[test]
fn defaults_follow_app_g1() {
    let (d, n) = (30, 40_000);
    let c = ctx(d, Some(n), RO);
    let (rho, delta) = (2.0, 0.01);
    let config = prepare(json!({"k": 2}), &c, &target(rho, delta)).expect("valid");
    assert_eq!(config.batch_size, 200);
    assert_eq!(config.steps, 100);
    assert_eq!(
        (
            config.tail_scale,
            config.tail_exponent,
            config.failure_probability
        ),
        (1.0, 1.0, 0.01)
    );
    let scale = BETA * BETA / (n as f64).ln();
    assert_eq!(config.learning_rate.offset, 0.0);
    assert!((config.learning_rate.slope - scale).abs() < 1e-12);
    // ε = 2: ε' = 1, δ' = 0.005, τ' = 0.01/200 = 5e-5 → minimum = ⌈1 + 2·ln(4e6)⌉ = ⌈31.4⌉ = 32.
    let minimum = (1.0 + 2.0 * (1.0 / (0.005 * 5e-5_f64)).ln()).ceil();
    assert_eq!(minimum, 32.0);
    assert_eq!(config.range_subsets, 100, "min(⌊200/2⌋, 4·32)");
    // A large budget: the floor of 64 applies (4·2 = 8 would be the rule).
    let big = prepare(json!({"k": 2}), &c, &target(1e6, delta)).expect("valid");
    assert_eq!(big.range_subsets, 64);
    // Explicit values are kept.
    let explicit = prepare(
        json!({"k": 1, "batch_size": 500, "learning_rate": {"offset": 0.5, "slope": 2.0}, "tail_scale": 2.0,
               "tail_exponent": 0.5, "failure_probability": 0.1, "range_subsets": 60}),
        &c,
        &target(rho, delta),
    )
    .expect("valid");
    assert_eq!(
        (explicit.batch_size, explicit.steps, explicit.range_subsets),
        (500, 80, 60)
    );
    assert_eq!(
        explicit.learning_rate,
        LearningRate {
            offset: 0.5,
            slope: 2.0
        }
    );
    assert_eq!(
        (
            explicit.tail_scale,
            explicit.tail_exponent,
            explicit.failure_probability
        ),
        (2.0, 0.5, 0.1)
    );
}

#[test]
fn invalid_parameters_name_their_field() {
    let c = ctx(10, Some(10_000), RO);
    let t = target(2.0, 0.01);
    assert_invalid_fields(
        &KDpPca,
        &c,
        &t,
        [
            (json!({"k": 0}), "params.k"),
            (json!({"k": 11}), "params.k"),
            (json!({"k": 2, "batch_size": 1}), "params.batch_size"),
            (json!({"k": 2, "batch_size": 5001}), "params.batch_size"),
            (json!({"k": 2, "batch_size": 20}), "params.batch_size"),
            (
                json!({"k": 2, "batch_size": 400, "range_subsets": 201}),
                "params.range_subsets",
            ),
            (
                json!({"k": 2, "batch_size": 400, "range_subsets": 10}),
                "params.range_subsets",
            ),
            (json!({"k": 2, "tail_scale": 0.0}), "params.tail_scale"),
            (json!({"k": 2, "tail_exponent": -1.0}), "params.tail_exponent"),
            (
                json!({"k": 2, "failure_probability": 1.0}),
                "params.failure_probability",
            ),
            (
                json!({"k": 2, "failure_probability": 0.0}),
                "params.failure_probability",
            ),
            (
                json!({"k": 2, "learning_rate": {"offset": -1.0, "slope": 1.0}}),
                "params.learning_rate.offset",
            ),
            (
                json!({"k": 2, "learning_rate": {"offset": 0.0, "slope": 0.0}}),
                "params.learning_rate",
            ),
            (
                json!({"k": 2, "learning_rate": {"offset": 1.0}}),
                "params.learning_rate",
            ),
            (json!({"k": "two"}), "params.k"),
        ],
    );
    let e = KDpPca
        .prepare(json!({"k": 2, "steps": 3}), &c, &t)
        .expect_err("unknown field");
    assert!(
        invalid_field(&e).starts_with("params") && e.to_string().contains("`steps`"),
        "{e}"
    );
    // The batch-size error says what PrivRange needs.
    let e = KDpPca
        .prepare(json!({"k": 2, "batch_size": 20}), &c, &t)
        .expect_err("too small");
    assert!(e.to_string().contains("PrivRange needs at least"), "{e}");
}

/// Matrices and `add_remove` are refused, by `prepare` (the listing) and by `configure` with
/// the reason.
#[test]
fn refuses_matrices_and_add_remove() {
    let t = target(1.0, 0.01);
    let [matrix, add_remove] = assert_replace_one_records_only(&KDpPca, &t);
    let Err(ConfigError::Unsupported(why)) = KDpPca.configure(params(1), &add_remove, &t) else {
        panic!("add_remove accepted");
    };
    assert!(why.contains("replace_one") && why.contains("positional"), "{why}");
    let Err(ConfigError::Unsupported(why)) = KDpPca.configure(params(1), &matrix, &t) else {
        panic!("matrix accepted");
    };
    assert!(why.contains("records"), "{why}");
}

// ---- Runs. ----

/// d = 20, k = 2, n = 20 000, huge budget: the output is orthonormal with fixed signs and
/// within a small angle of the exact top-2 eigenvectors of XᵀX.
#[test]
fn converges_to_the_exact_subspace_at_huge_budget() {
    let (d, n, k) = (20, 20_000, 2);
    let xt = sign_spiked_records(1, d, n, &[10.0, 5.0], 0.3, BETA);
    let c = ctx(d, Some(n), RO);
    let config = KDpPca
        .configure(params(k), &c, &target(1e12, 1e-6))
        .expect("valid");
    let (out, _) = run_on_records(&KDpPca, &xt, &config, &c, 2);
    let out = out.expect("run");
    assert_basis_contract(&out.basis, d, k);
    assert!(out.eigenvalues.is_none());
    let err = sin_theta(&out.basis, &exact_top(&gram_t(&xt), k));
    assert!(err < 0.05, "sin θ = {err}");
}

/// The error shrinks as the budget grows: the mean sin θ over three datasets and seeds, from
/// near 1 to small. (Single runs are not monotone: the adaptive truncation and Oja's random
/// start make each run's error fluctuate.)
#[test]
fn error_decreases_as_the_budget_grows() {
    let (d, n, k) = (20, 20_000, 2);
    let c = ctx(d, Some(n), RO);
    let data: Vec<(u64, Matrix)> = [1_u64, 3, 5]
        .iter()
        .map(|&seed| (seed, sign_spiked_records(seed, d, n, &[10.0, 5.0], 0.3, BETA)))
        .collect();
    let errors: Vec<f64> = [2e2, 2e4, 2e5, 1e12]
        .iter()
        .map(|&rho| {
            let config = KDpPca
                .configure(params(k), &c, &target(rho, 1e-6))
                .expect("valid");
            let total: f64 = data
                .iter()
                .map(|(seed, xt)| {
                    let (out, _) = run_on_records(&KDpPca, xt, &config, &c, seed + 1);
                    sin_theta(&out.expect("run").basis, &exact_top(&gram_t(xt), k))
                })
                .sum();
            total / data.len() as f64
        })
        .collect();
    assert!(errors.windows(2).all(|w| w[1] < w[0]), "errors {errors:?}");
    assert!(errors[0] > 0.5 && errors[3] < 0.15, "errors {errors:?}");
}

/// ⊥ from PrivRange ends the run with a clear failure, after noise has been drawn.
#[test]
fn priv_range_bottom_fails_the_job_cleanly() {
    let (d, n) = (10, 4000);
    // Constant records: every difference is 0, so every estimate falls in the zero bin.
    let xt = Matrix::from_element(d, n, 0.5);
    let c = ctx(d, Some(n), RO);
    let config = KDpPca
        .configure(params(1), &c, &target(50.0, 1e-3))
        .expect("valid");
    let (out, audit) = run_on_records(&KDpPca, &xt, &config, &c, 5);
    match out {
        Err(RunError::Failed(message)) => assert!(message.contains("PrivRange returned ⊥"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(audit.draws.len(), 1, "one histogram draw, then the job stops");
    assert_eq!(audit.draws[0].label, RANGE_HISTOGRAM);
}

#[test]
fn progress_is_reported_and_cancellation_stops_the_run() {
    let (d, n) = (6, 2000);
    let xt = sign_spiked_records(6, d, n, &[4.0], 0.3, BETA);
    let c = ctx(d, Some(n), RO);
    let config = prepare(json!({"k": 2, "batch_size": 100}), &c, &target(1e6, 1e-6)).expect("valid");
    let input = DataInput::Records { xt: &xt };
    let (out, seen, _) = run_with_progress(&KDpPca, input, &config, &c, 7, |done, _| done == 3);
    assert_eq!(out.err(), Some(RunError::Cancelled));
    assert_eq!(seen, [(1, 20), (2, 20), (3, 20)]);
}

#[test]
fn mismatched_input_fails_cleanly() {
    let (d, n) = (6, 2000);
    let xt = sign_spiked_records(8, d, n, &[4.0], 0.3, BETA);
    let c = ctx(d, Some(n), RO);
    let config = prepare(json!({"k": 2, "batch_size": 100}), &c, &target(1e6, 1e-6)).expect("valid");
    let a = Matrix::identity(d, d);
    for (input, context) in [
        (DataInput::Records { xt: &xt }, ctx(d, Some(n + 1), RO)),
        (DataInput::Records { xt: &xt }, ctx(d + 1, Some(n), RO)),
        (DataInput::Matrix { a: &a }, c),
        (
            DataInput::Records { xt: &xt },
            ctx(
                d,
                Some(n),
                Neighbours::AddRemove {
                    beta: 1.0,
                    alpha: 2.0,
                },
            ),
        ),
    ] {
        assert_fails_cleanly(&KDpPca, input, &config, &context, context);
    }
    let bad = KDpPcaConfig {
        range_subsets: 51,
        ..config
    };
    assert!(matches!(
        run_on_records(&KDpPca, &xt, &bad, &c, 1).0,
        Err(RunError::Failed(_))
    ));
}

#[test]
fn registry_round_trip_matches_a_direct_run() {
    let (d, n) = (8, 3000);
    let xt = sign_spiked_records(9, d, n, &[4.0, 2.0], 0.3, BETA);
    let c = ctx(d, Some(n), RO);
    let t = target(1e4, 1e-6);
    let prepared = KDpPca
        .prepare(json!({"k": 2, "batch_size": 150}), &c, &t)
        .expect("valid");
    assert_eq!(
        prepared.cost,
        KDpPca.cost(
            &serde_json::from_value(prepared.config.clone()).expect("config"),
            &c
        )
    );
    assert_eq!(prepared.noise.len(), 3);
    let config = prepare(json!({"k": 2, "batch_size": 150}), &c, &t).expect("valid");
    let (via_registry, direct) = registry_and_direct_runs(&KDpPca, &prepared.config, &config, &xt, &c, 10);
    assert_eq!(via_registry.basis, direct.basis);
}

// ---- Statistical audit of the noise actually drawn. ----

struct AuditReport {
    /// PrivRange draws against Laplace(4/ε) (its ε' = ε/2).
    range: Result<(), String>,
    /// PrivMean histogram draws against Laplace(2/ε_h), ε_h solved independently.
    histogram: Result<(), String>,
    /// Whether every Gaussian draw's sd is unit·sqrt(Λ̂) for Λ̂ on PrivRange's grid 2^{i/4},
    /// with unit = 6K·ln^a(Bd/τ')·sqrt(d)/B/sqrt(2ρ_g) computed here.
    gaussian_on_grid: bool,
    /// All Gaussian draws, each over its sd, against N(0, 1).
    gaussian: Result<(), String>,
}

/// Runs k_dp_pca at ε = 1000, δ = 1e-3 (a budget at which the iterates converge, so PrivRange
/// never returns ⊥ on this data; the checks are scale-free) with ε multiplied by `factor` in the stored configuration
/// (1 = calibrated; > 1 under-noises every release) and checks the noise against values
/// computed here from the target.
fn audit_noise(factor: f64) -> AuditReport {
    let (d, n, k, batch, rho, delta) = (16, 40_000, 2, 200, 5e5_f64, 1e-3);
    // One spike and little noise: the gradients' differences have nearly χ²_d norms, so
    // PrivRange's estimates concentrate and it never returns ⊥ here.
    let xt = sign_spiked_records(11, d, n, &[8.0], 0.1, BETA);
    let c = ctx(d, Some(n), RO);
    let mut config = prepare(json!({"k": k, "batch_size": batch}), &c, &target(rho, delta)).expect("valid");
    config.epsilon *= factor;
    let (out, audit) = run_on_records(&KDpPca, &xt, &config, &c, 12);
    out.expect("run");

    let epsilon = (2.0 * rho).sqrt();
    let steps = (n / k / batch) as f64;
    let tau = 0.01 / (2.0 * steps);
    let eps_h =
        crate::algorithms::k_dp_pca::priv_mean::tests::spec_histogram_epsilon(epsilon / 4.0, d, delta / 8.0);
    let rho_g = crate::algorithms::k_dp_pca::priv_mean::tests::spec_rho(epsilon / 4.0, delta / 4.0);
    let radius_unit = 3.0 * ((batch * d) as f64 / tau).ln();
    let unit_sd = 2.0 * radius_unit * (d as f64).sqrt() / batch as f64 / (2.0 * rho_g).sqrt();

    let (mut range, mut histogram, mut gaussian) = (Vec::new(), Vec::new(), Vec::new());
    let mut on_grid = true;
    for draw in &audit.draws {
        match draw.label {
            RANGE_HISTOGRAM => range.extend(&draw.values),
            MEAN_HISTOGRAM => histogram.extend(&draw.values),
            MEAN_NOISE => {
                assert_eq!((draw.distribution, draw.values.len()), ("gaussian", d));
                let exponent = 4.0 * (draw.scale / unit_sd).powi(2).log2();
                on_grid &= (exponent - exponent.round()).abs() < 1e-6;
                gaussian.extend(draw.values.iter().map(|v| v / draw.scale));
            }
            other => panic!("unexpected label {other}"),
        }
    }
    assert_eq!(gaussian.len(), 2 * 100 * d, "one Gaussian draw per step");
    AuditReport {
        range: check_laplace_scale(&range, 4.0 / epsilon),
        histogram: check_laplace_scale(&histogram, 2.0 / eps_h),
        gaussian_on_grid: on_grid,
        gaussian: check_gaussian_scale(&gaussian, 1.0),
    }
}

#[test]
fn noise_matches_the_calibration() {
    let report = audit_noise(1.0);
    assert!(report.range.is_ok(), "{:?}", report.range);
    assert!(report.histogram.is_ok(), "{:?}", report.histogram);
    assert!(report.gaussian_on_grid, "Gaussian sd off the expected grid");
    assert!(report.gaussian.is_ok(), "{:?}", report.gaussian);
}

/// The same checks catch a run whose every release has 20 % too little noise.
#[test]
fn under_noised_run_fails_the_audit() {
    let report = audit_noise(1.25);
    assert!(report.range.is_err(), "PrivRange under-noising went unnoticed");
    assert!(
        report.histogram.is_err(),
        "PrivMean histogram under-noising went unnoticed"
    );
    assert!(
        !report.gaussian_on_grid,
        "PrivMean Gaussian under-noising went unnoticed"
    );
}

#[test]
fn info_describes_the_algorithm() {
    let info = Algorithm::info(&KDpPca);
    assert_eq!(info.name, "k_dp_pca");
    assert_eq!(
        (info.kinds.as_slice(), info.relations.as_slice()),
        ([Kind::Records].as_slice(), [Relation::ReplaceOne].as_slice())
    );
    assert!(!info.public_only && info.source.contains("Düngler") && info.source.contains("Alg. 7"));
    assert!(info.privacy.contains("δ"));
    let names: Vec<&str> = info.params.iter().map(|p| p.name).collect();
    assert_eq!(
        names,
        [
            "k",
            "batch_size",
            "learning_rate",
            "tail_scale",
            "tail_exponent",
            "failure_probability",
            "range_subsets"
        ]
    );
    for p in &info.params {
        assert!(!p.description.is_empty());
        assert_eq!(p.required, p.name == "k");
        assert!(p.required || p.default.is_some(), "{} has no default", p.name);
    }
}
