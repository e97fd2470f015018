//! Tests of `k_dp_pca` (cost, calibration, validation, refusal, convergence, noise audit).

use serde_json::json;

use super::*;
use crate::algorithms::testing::{
    ar, assert_audit_catches_under_noise, assert_bad_inputs_fail, assert_basis_contract,
    assert_converges_on_records, assert_invalid_k_and_fields, assert_registry_matches_direct,
    assert_replace_one_records_only, ctx, exact_top, invalid_field, rejected_field, ro, run_on_records,
    run_prepared_audited, run_with_progress, schema_listing, sign_spiked_records,
};
use crate::algorithms::{DataInput, DynAlgorithm};
use crate::linalg::subspace::{captured_energy, sin_theta};
use crate::linalg::{Matrix, gram_t};
use crate::privacy::testing::{check_gaussian_scale, check_laplace_scale};

const BETA: f64 = 6.0;
const RO: Neighbours = ro(BETA, 20.0);

fn target(rho: f64, delta: f64) -> PrivacyTarget {
    PrivacyTarget {
        public_default: false,
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
        range_bin_quarter_octaves: None,
    }
}

/// What the registry gives k_dp_pca for a job stated as (ε, δ): δ/2 for the histograms and ρ
/// = the CKS conversion of ε at δ/2 (docs/design/privacy.md §2.4).
fn eps_target(epsilon: f64, delta: f64) -> PrivacyTarget {
    let [_, _, approximate] = crate::privacy::target::calibrations(
        crate::privacy::Epsilon::new(epsilon).expect("ε"),
        crate::privacy::Delta::new(delta).expect("δ"),
    );
    approximate
}

fn prepare(
    params: serde_json::Value,
    c: &DataContext,
    t: &PrivacyTarget,
) -> Result<KDpPcaConfig, ConfigError> {
    // These tests read the algorithm's own configuration: no default clip (issue 21).
    let mut params = params;
    if let serde_json::Value::Object(map) = &mut params {
        map.entry("clip").or_insert_with(|| "none".into());
    }
    let prepared = KDpPca.prepare(params, c, t)?;
    Ok(serde_json::from_value(prepared.config).expect("config round-trips"))
}

// ---- Cost and calibration. ----

/// The cost is the derivation of the module docs: ρ/16 to PrivRange, ρ/16 over the d PrivMean
/// histograms, 7ρ/8 to the Gaussian; half the job's δ to the histograms, half of that to each
/// family, ρ the CKS conversion of ε at the other half. Checked against values computed here
/// from the target, and the whole job is (ε, δ)-DP by the rule privacy.md §2.4 states.
#[test]
fn cost_equals_the_derivation() {
    let (d, n) = (30, 2_000_000);
    let c = ctx(d, Some(n), RO);
    for (epsilon, delta) in [(20.0, 1e-5), (10.0, 1e-5), (1.0, 0.01), (50.0, 1e-8)] {
        let t = eps_target(epsilon, delta);
        let Ok(config) = KDpPca.configure(params(3), &c, &t) else {
            assert!(epsilon < 2.0, "refused at ε = {epsilon}");
            continue;
        };
        let rho = crate::privacy::epsilon_delta_to_rho(
            crate::privacy::Epsilon::new(epsilon).unwrap(),
            crate::privacy::Delta::new(delta / 2.0).unwrap(),
        );
        assert!(t.rho <= rho && rho - t.rho <= 2e-12, "{t:?} vs {rho}");
        let rho = t.rho;
        let delta = delta / 2.0;
        let b = config.budget;
        let close = |x: f64, want: f64| (x - want).abs() <= 1e-12 * want;
        assert!(close(b.range_epsilon, (2.0 * rho / 16.0).sqrt()), "{b:?}");
        assert!(
            close(b.histogram_epsilon, (2.0 * rho / 16.0 / d as f64).sqrt()),
            "{b:?}"
        );
        assert!(close(b.gaussian_rho, 0.875 * rho), "{b:?}");
        assert!(close(b.range_delta, delta / 2.0) && close(b.histogram_delta, delta / 2.0 / d as f64));
        let cost = KDpPca.cost(&config, &c);
        // (ε_R²/2 + d·ε_h²/2 + ρ_g, δ_R + d·δ_h), the Gaussian part tracked as such.
        let want =
            b.range_epsilon.powi(2) / 2.0 + d as f64 * b.histogram_epsilon.powi(2) / 2.0 + b.gaussian_rho;
        assert!(close(cost.rho, want) && cost.rho <= rho, "{cost:?} vs {rho}");
        assert!(close(cost.rho, rho), "the whole ρ is used: {cost:?}");
        assert!(close(cost.rho - cost.other_rho, 0.875 * rho), "{cost:?}");
        assert!(cost.delta <= delta && close(cost.delta, delta), "{cost:?}");
        // The whole job keeps the stated (ε, δ): CKS at δ minus the histograms' δ.
        let left = crate::privacy::Delta::new(2.0 * delta - cost.delta).unwrap();
        assert!(
            crate::privacy::rho_to_epsilon(cost.rho, left) <= epsilon,
            "{cost:?}"
        );
    }
}

#[test]
fn configure_then_cost_stays_within_the_target() {
    let c = ctx(10, Some(100_000_000), RO);
    for rho in [1e-3, 0.02, 0.5, 1.0, 3.7, 1e4] {
        for delta in [1e-10, 1e-5, 0.01] {
            {
                let t = target(rho / 3.0, delta);
                let limit = rho / 3.0;
                let Ok(config) = KDpPca.configure(params(2), &c, &t) else {
                    assert!(limit < 0.1, "refused at ρ = {limit}");
                    continue;
                };
                let cost = KDpPca.cost(&config, &c);
                assert!(
                    cost.rho <= limit && (limit - cost.rho) / limit <= 1e-9,
                    "{cost:?} vs {limit}"
                );
                assert!(cost.delta <= delta && (delta - cost.delta) / delta <= 1e-9);
                assert!(cost.check().is_ok());
            }
        }
    }
}

/// The default batch is the smallest one PrivRange can clear with 16 pairs per subset:
/// ⌊B/2⌋ ≥ 16·max(2·⌈k'_min⌉, 16), and B − 1 does not satisfy it; where that leaves fewer than
/// 4 steps (ε 10 and 20 here), it is max(⌊m/4⌋, the smallest B with 6 pairs per subset).
/// Computed here from the formula.
#[test]
fn default_batch_size_is_the_smallest_that_clears() {
    let (d, n, k) = (30, 20_000, 3);
    let c = ctx(d, Some(n), RO);
    let m = n / k;
    let mut short = 0;
    for epsilon in [10.0, 20.0, 50.0, 100.0, 200.0, 300.0] {
        let delta = 1e-5;
        let t = eps_target(epsilon, delta);
        let config = KDpPca.configure(params(k), &c, &t).expect("valid");
        // ε_R = sqrt(2·ρ/16), δ_R = half of the histograms' δ/2.
        let eps_r = (2.0 * t.rho / 16.0).sqrt();
        let needed = |batch: usize, pairs: f64| {
            let tau = 0.01 / (2.0 * (m / batch) as f64);
            let kmin = (1.0 + 2.0 * (1.0 / (delta / 4.0 * tau)).ln() / eps_r).ceil();
            ((batch / 2) as f64) >= pairs * (2.0 * kmin).max(16.0)
        };
        let smallest = |pairs: f64| (2..=m).find(|&b| needed(b, pairs)).expect("clears");
        let b = config.batch_size;
        eprintln!(
            "ε = {epsilon}: B = {b}, T = {}, k' = {}, ε_R = {:.4}",
            config.steps, config.range_subsets, config.budget.range_epsilon
        );
        let roomy = smallest(16.0);
        if m / roomy >= 4 {
            assert_eq!(b, roomy, "ε = {epsilon}");
            assert!(config.range_subsets * MIN_PAIRS_PER_SUBSET <= b / 2);
        } else {
            short += 1;
            assert_eq!(b, smallest(6.0).max(m / 4), "ε = {epsilon}");
            assert!(config.steps >= 4 || needed(b, 6.0) && !needed(b - 1, 6.0));
            assert!(config.range_subsets * FEWEST_PAIRS_PER_SUBSET <= b / 2);
        }
        assert_eq!(config.steps, m / b);
    }
    assert!(short >= 1, "no budget here exercises the short-schedule branch");
    // Too small a budget for n: refused, naming the n and the budget that would do.
    let Err(e) = KDpPca.configure(params(k), &c, &eps_target(5.0, 1e-5)) else {
        panic!("accepted");
    };
    let text = e.to_string();
    eprintln!("{text}");
    assert_eq!(invalid_field(&e), "privacy");
    assert!(
        text.contains("needs at least n =") && text.contains("a budget of at least"),
        "{text}"
    );
}

#[test]
fn delta_is_required() {
    let c = ctx(10, Some(10_000), RO);
    let none = PrivacyTarget {
        public_default: false,
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

/// App. G.1's K = a = 1, τ = 0.01; η_t = (k + 2)·ln n/(β²·t); w = 8; k' = max(2·⌈k'_min⌉, 16).
#[test]
fn defaults_and_explicit_values() {
    let (d, n) = (30, 40_000);
    let c = ctx(d, Some(n), RO);
    let (rho, delta) = (2.0, 0.01);
    let config = prepare(json!({"k": 2}), &c, &target(rho, delta)).expect("valid");
    assert_eq!(
        (
            config.tail_scale,
            config.tail_exponent,
            config.failure_probability,
            config.range_bin_quarter_octaves
        ),
        (1.0, 1.0, 0.01, 8)
    );
    let scale = BETA * BETA / (4.0 * (n as f64).ln());
    assert_eq!(config.learning_rate.offset, 0.0);
    assert!((config.learning_rate.slope - scale).abs() < 1e-12);
    let tau = 0.01 / (2.0 * config.steps as f64);
    let kmin = (1.0 + 2.0 * (1.0 / (0.005 * tau)).ln() / 0.5).ceil();
    assert_eq!(config.range_subsets as f64, (2.0 * kmin).max(16.0));
    // Explicit values are kept.
    let explicit = prepare(
        json!({"k": 1, "batch_size": 4000, "learning_rate": {"offset": 0.5, "slope": 2.0}, "tail_scale": 2.0,
               "tail_exponent": 0.5, "failure_probability": 0.1, "range_subsets": 120, "range_bin_quarter_octaves": 1}),
        &c,
        &target(rho, delta),
    )
    .expect("valid");
    assert_eq!(
        (
            explicit.batch_size,
            explicit.steps,
            explicit.range_subsets,
            explicit.range_bin_quarter_octaves
        ),
        (4000, 10, 120, 1)
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
    assert_invalid_k_and_fields(
        &KDpPca,
        &c,
        &t,
        [
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
            (
                json!({"k": 2, "range_bin_quarter_octaves": 0}),
                "params.range_bin_quarter_octaves",
            ),
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
    let xt = sign_spiked_records(1, (d, n), &[10.0, 5.0], 0.3, BETA);
    let c = ctx(d, Some(n), RO);
    let config = KDpPca
        .configure(params(k), &c, &target(1e12, 1e-6))
        .expect("valid");
    assert_converges_on_records(&KDpPca, &xt, &config, &c, k, 2, 0.05);
}

/// The error shrinks as the budget grows: the mean sin θ over three datasets and seeds. (Single
/// runs are not monotone: the adaptive truncation and Oja's random start make each run's error
/// fluctuate.)
#[test]
fn error_decreases_as_the_budget_grows() {
    let (d, n, k) = (20, 20_000, 2);
    let c = ctx(d, Some(n), RO);
    let data: Vec<(u64, Matrix)> = [1_u64, 3, 5]
        .iter()
        .map(|&seed| (seed, sign_spiked_records(seed, (d, n), &[10.0, 5.0], 0.3, BETA)))
        .collect();
    let errors: Vec<f64> = [2.0, 1e12]
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
    assert!(errors[1] < errors[0] && errors[1] < 0.15, "errors {errors:?}");
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
    let xt = sign_spiked_records(6, (d, n), &[4.0], 0.3, BETA);
    let c = ctx(d, Some(n), RO);
    let config = prepare(json!({"k": 2, "batch_size": 100}), &c, &target(1e6, 1e-6)).expect("valid");
    let input = DataInput::Records { xt: (&xt).into() };
    let (out, seen, _) = run_with_progress(&KDpPca, input, &config, &c, 7, |done, _| done == 3);
    assert_eq!(out.err(), Some(RunError::Cancelled));
    assert_eq!(seen, [(1, 20), (2, 20), (3, 20)]);
}

#[test]
fn mismatched_input_fails_cleanly() {
    let (d, n) = (6, 2000);
    let xt = sign_spiked_records(8, (d, n), &[4.0], 0.3, BETA);
    let c = ctx(d, Some(n), RO);
    let config = prepare(json!({"k": 2, "batch_size": 100}), &c, &target(1e6, 1e-6)).expect("valid");
    let mismatched = [
        ctx(d, Some(n + 1), RO),
        ctx(d + 1, Some(n), RO),
        ctx(d, Some(n), ar(1.0, 2.0)),
    ];
    let bad = KDpPcaConfig {
        range_subsets: 51,
        ..config.clone()
    };
    assert_bad_inputs_fail(&KDpPca, &xt, &config, &bad, &c, mismatched);
}

#[test]
fn registry_round_trip_matches_a_direct_run() {
    let (d, n) = (8, 3000);
    let xt = sign_spiked_records(9, (d, n), &[4.0, 2.0], 0.3, BETA);
    let c = ctx(d, Some(n), RO);
    let t = target(1e4, 1e-6);
    // `clip: "none"`: the round trip of k_dp_pca's own configuration, not the clip wrapper.
    let prepared = KDpPca
        .prepare(json!({"k": 2, "batch_size": 150, "clip": "none"}), &c, &t)
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
    let job_params = json!({"k": 2, "batch_size": 150});
    assert_registry_matches_direct(&KDpPca, job_params, &t, &config, &xt, &c, 10);
}

// ---- Statistical audit of the noise actually drawn. ----

struct AuditReport {
    /// PrivRange draws against Laplace(2/ε_R), ε_R = sqrt(2·ρ/16).
    range: Result<(), String>,
    /// PrivMean histogram draws against Laplace(2/ε_h), ε_h = sqrt(2·ρ/16/d).
    histogram: Result<(), String>,
}

/// Runs k_dp_pca at ρ = 5e5, δ = 1e-3 (a budget at which the iterates converge, so PrivRange
/// never returns ⊥ on this data; the checks are scale-free) with every release's budget
/// multiplied by `factor` in the stored configuration (1 = calibrated; > 1 under-noises) and
/// checks the noise against values computed here from the target.
fn audit_noise(factor: f64) -> AuditReport {
    let (d, n, k, batch, rho, delta) = (16, 40_000, 2, 200, 5e5_f64, 1e-3);
    let xt = sign_spiked_records(11, (d, n), &[8.0], 0.1, BETA);
    let c = ctx(d, Some(n), RO);
    let mut config = prepare(json!({"k": k, "batch_size": batch}), &c, &target(rho, delta)).expect("valid");
    config.budget.range_epsilon *= factor;
    config.budget.histogram_epsilon *= factor;
    config.budget.gaussian_rho *= factor * factor;
    let (out, audit) = run_on_records(&KDpPca, &xt, &config, &c, 12);
    out.expect("run");

    let eps_r = (2.0 * rho / 16.0).sqrt();
    let eps_h = (2.0 * rho / 16.0 / d as f64).sqrt();
    let (mut range, mut histogram, mut gaussian) = (Vec::new(), Vec::new(), 0);
    for draw in &audit.draws {
        match draw.label {
            RANGE_HISTOGRAM => range.extend(&draw.values),
            MEAN_HISTOGRAM => histogram.extend(&draw.values),
            MEAN_NOISE => gaussian += 1,
            other => panic!("unexpected label {other}"),
        }
    }
    assert_eq!(gaussian, 2 * 100, "one Gaussian draw per step");
    AuditReport {
        range: check_laplace_scale(&range, 2.0 / eps_r),
        histogram: check_laplace_scale(&histogram, 2.0 / eps_h),
    }
}

#[test]
fn noise_matches_the_calibration() {
    let report = audit_noise(1.0);
    assert!(report.range.is_ok(), "{:?}", report.range);
    assert!(report.histogram.is_ok(), "{:?}", report.histogram);
}

/// The same checks catch a run whose histograms have 44 % too little noise (1/1.8). A
/// converged run draws only about one PrivRange Laplace value per step (one non-empty bin),
/// 200 here, too few to see 20 %; the histogram module's own audit checks 20 % and 10 % errors
/// on larger samples, and `end_to_end_gaussian` below checks the Gaussian draws of whole runs.
#[test]
fn under_noised_run_fails_the_audit() {
    let report = audit_noise(1.8);
    assert!(report.range.is_err(), "PrivRange under-noising went unnoticed");
    assert!(
        report.histogram.is_err(),
        "PrivMean histogram under-noising went unnoticed"
    );
}

/// PrivMean's Gaussian draws of whole runs, against a scale derived here from public inputs
/// only: the target ρ, d, B, n, k, K, a, τ and a Λ̂ fixed by the data's design.
///
/// The records are c·z with z uniform on the unit sphere of R^4, so for every ω and projector
/// P of the run, the pair differences of g = P·x·(xᵀω) have second moment
/// 2c⁴·(P + 2ωωᵀ)/(d(d+2)), top eigenvalue 6c⁴/(d(d+2)) = 2 for c⁴ = 8: the geometric centre of
/// PrivRange's bin [1, 4) (ratio-4 bins), a factor 2 from either edge, where 62 pairs per
/// subset put every subset estimate. So Λ̂ = 1 at every step (the test fails, rather than
/// passes, if it is not), and each Gaussian draw must be N(0, σ²) per coordinate with
/// σ = 2·3K·ln^a(Bd/τ')·sqrt(d)/B / sqrt(2·(7/8)ρ). The stored configuration's ρ_g is
/// multiplied by `factor²` (1 = as calibrated; > 1 under-noises by `factor`); the draws are
/// checked, never the scale the run reports.
fn end_to_end_gaussian(factor: f64) -> Result<(), String> {
    let (d, n, k, batch, rho, delta) = (4, 80_000, 2, 2_000, 5e5_f64, 1e-3);
    let c = ctx(d, Some(n), RO);
    let mut config = prepare(json!({"k": k, "batch_size": batch}), &c, &target(rho, delta)).expect("valid");
    config.budget.gaussian_rho *= factor * factor;
    let scale = 8.0_f64.powf(0.25);
    let mut values = Vec::new();
    for seed in 0..8 {
        let mut xt =
            crate::algorithms::testing::gaussian(&mut crate::algorithms::testing::seeded(40 + seed), d, n);
        for mut column in xt.column_iter_mut() {
            let norm = column.norm();
            column *= scale / norm;
        }
        let (out, audit) = run_on_records(&KDpPca, &xt, &config, &c, 60 + seed);
        out.map_err(|e| format!("run failed: {e}"))?;
        values.extend(
            audit
                .draws
                .iter()
                .filter(|draw| draw.label == MEAN_NOISE)
                .flat_map(|draw| draw.values.iter().copied()),
        );
    }
    let steps = n / k / batch;
    assert_eq!(values.len(), 8 * k * steps * d);
    let tau = 0.01 / (2.0 * steps as f64);
    let radius = 3.0 * ((batch * d) as f64 / tau).ln();
    // Δ = min(2R·sqrt(d), 2β²)/B: here the gradient bound, 2β²/B.
    let sensitivity = (2.0 * radius * (d as f64).sqrt()).min(2.0 * BETA * BETA) / batch as f64;
    assert!(sensitivity < 2.0 * radius * (d as f64).sqrt() / batch as f64 / 2.0);
    let sd = sensitivity / (2.0 * 0.875 * rho).sqrt();
    check_gaussian_scale(&values, sd)
}

/// End to end, the Gaussian draws have the scale the target implies; the twin, a configuration
/// whose Gaussian has 1/1.2 of the noise (ρ_g × 1.44), fails.
#[test]
fn end_to_end_gaussian_draws_have_the_scale_the_target_implies() {
    assert_audit_catches_under_noise(end_to_end_gaussian, 1.2);
}

/// PrivMean's Gaussian, as configured for the judged setting (ρ = 50, δ = 1e-5, d = 30), at a
/// fixed Λ̂: its draws pass `check_gaussian_scale` against σ = min(2R·sqrt(d), 2β²)/B/sqrt(2·7ρ/8)
/// computed here, and a configuration with ρ_g 1.25² times too large (20 % too little noise)
/// fails it.
fn gaussian_scale_check(factor: f64) -> Result<(), String> {
    let (d, n, k, rho) = (30, 20_000, 3, 50.0);
    let c = ctx(d, Some(n), RO);
    let mut config = KDpPca
        .configure(params(k), &c, &target(rho, 1e-5))
        .expect("valid");
    config.budget.gaussian_rho *= factor * factor;
    let cal = config.calibration(&c).mean;
    let batch = config.batch_size;
    let g = crate::algorithms::testing::gaussian(&mut crate::algorithms::testing::seeded(3), d, batch);
    let lambda: f64 = 4.0;
    let tau = 0.01 / (2.0 * config.steps as f64);
    let radius = 3.0 * lambda.sqrt() * ((batch * d) as f64 / tau).ln();
    let rho_g = 0.875 * rho;
    // G = β².
    let sensitivity = (2.0 * radius * (d as f64).sqrt()).min(2.0 * BETA * BETA) / batch as f64;
    let sd = sensitivity / (2.0 * rho_g).sqrt();
    let mut values = Vec::new();
    for seed in 0..40 {
        let (_, audit) = crate::algorithms::testing::with_audited_env(100 + seed, |env| {
            priv_mean(&g, lambda, &cal, env).expect("runs")
        });
        for draw in audit.draws.iter().filter(|d| d.label == MEAN_NOISE) {
            values.extend(&draw.values);
        }
    }
    assert_eq!(values.len(), 40 * d);
    check_gaussian_scale(&values, sd)
}

/// PrivMean's Gaussian has the calibrated scale; 20 % too little noise fails the check.
#[test]
fn priv_mean_gaussian_has_the_calibrated_scale() {
    assert_audit_catches_under_noise(gaussian_scale_check, 1.25);
}

#[test]
fn info_describes_the_algorithm() {
    let info = KDpPca::INFO;
    assert_eq!(info.name, "k_dp_pca");
    assert_eq!(
        (info.kinds, info.relations),
        ([Kind::Records].as_slice(), [Relation::ReplaceOne].as_slice())
    );
    assert!(!info.public_only && info.source.contains("Düngler") && info.source.contains("Alg. 7"));
    assert!(info.privacy.contains("δ"));
    let schema = schema_listing::<KDpPcaParams>(&[
        "batch_size",
        "failure_probability",
        "k",
        "learning_rate",
        "range_bin_quarter_octaves",
        "range_subsets",
        "tail_exponent",
        "tail_scale",
    ]);
    assert_eq!(schema["required"], serde_json::json!(["k"]));
}

// ---- The judged cases: n = 20 000, d = 30, k = 3, clear eigengap, defaults. ----

/// Captured energy tr(QᵀΣ̂Q)/Σ_{i≤k}λ_i(Σ̂) of k_dp_pca at the service's defaults (`clip`
/// included) and the target (ρ, 1e-5),
/// Σ̂ = XᵀX/n of the clipped records, for runs seeded 1..=runs. (These budgets were first
/// stated as ε = 20, 10 and 50 when k_dp_pca ran at ρ = ε²/2; as (ε, δ) statements they are
/// about (293, 1e-5), (96, 1e-5) and (1487, 1e-5): docs/k_dp_pca.md.)
fn judged_energies(xt: &Matrix, beta: f64, rho: f64, public: bool, runs: u64) -> Vec<f64> {
    let (d, n) = xt.shape();
    let mut c = ctx(
        d,
        Some(n),
        Neighbours::ReplaceOne {
            beta,
            alpha: beta * (d as f64).sqrt(),
        },
    );
    c.public = public;
    // Through the registry, so the defaults include `clip: "auto"` (issue 21 §1).
    let prepared = KDpPca
        .prepare(json!({"k": 3}), &c, &target(rho, 1e-5))
        .expect("defaults are accepted");
    let sigma = gram_t(xt) / n as f64;
    (1..=runs)
        .map(|seed| {
            let (out, _) = run_prepared_audited(
                &KDpPca,
                &prepared.config,
                DataInput::Records { xt: xt.into() },
                &c,
                seed,
            );
            let basis = out.expect("no ⊥ on easy data").basis;
            assert_basis_contract(&basis, d, 3);
            captured_energy(&basis, &sigma)
        })
        .collect()
}

/// Sign-spiked records (App. G.1's model, one sign per spike), Λ = (10, 6, 3), σ = 0.3, clipped
/// at β = 6 (no row is clipped), and Gaussian-spiked ones with the same Σ clipped at β = 6.
fn judged_data() -> [(Matrix, f64, &'static str); 2] {
    let (d, n) = (30, 20_000);
    [
        (
            sign_spiked_records(21, (d, n), &[10.0, 6.0, 3.0], 0.3, BETA),
            BETA,
            "sign",
        ),
        (
            crate::algorithms::testing::spiked_records(22, d, n, &[10.0, 6.0, 3.0], 0.3, BETA),
            BETA,
            "gaussian",
        ),
    ]
}

#[test]
fn public_data_at_rho_200_captures_95_percent() {
    for (xt, beta, name) in judged_data() {
        let energies = judged_energies(&xt, beta, 200.0, true, 3);
        eprintln!("ρ = 200, {name}: {energies:?}");
        let floor = if name == "sign" { 0.95 } else { 0.9 };
        assert!(energies.iter().all(|e| *e >= floor), "{name}: {energies:?}");
        let mean = energies.iter().sum::<f64>() / energies.len() as f64;
        assert!(mean >= 0.95, "{name}: {energies:?}");
    }
}

/// The claim is about a typical run, not every run: a private run is random, and over 40 seeds
/// of the "gaussian" data 2 fall below 0.9 (0.80 and 0.88; the rest ≥ 0.93). So: over 10 seeded
/// runs, the median captures ≥ 0.9, at most one run falls below 0.9, and none below 0.75 (a
/// broken mechanism or an over-noised default fails all three).
#[test]
fn private_data_at_rho_50_captures_90_percent() {
    for (xt, beta, name) in judged_data() {
        let mut energies = judged_energies(&xt, beta, 50.0, false, 10);
        eprintln!("ρ = 50, {name}: {energies:?}");
        energies.sort_by(f64::total_cmp);
        let median = (energies[4] + energies[5]) / 2.0;
        assert!(median >= 0.9, "{name}: {energies:?}");
        assert!(energies[1] >= 0.9, "{name}: {energies:?}");
        assert!(energies[0] >= 0.75, "{name}: {energies:?}");
    }
}

/// The reproduction of the old ⊥: at ε = 50, the previous defaults (B = ⌊√n⌋ = 141, one pair
/// difference per subset, quarter-octave bins) fail at the first step on this easy data; the
/// new defaults do not.
#[test]
fn old_defaults_return_bottom_and_new_ones_do_not() {
    let (xt, beta, _) = judged_data().into_iter().next().expect("data");
    let (d, n) = xt.shape();
    let c = ctx(d, Some(n), Neighbours::ReplaceOne { beta, alpha: 100.0 });
    // The old calibration: ε = sqrt(2ρ) of the CKS-converted target, ε/2 to PrivRange, 64
    // subsets of one pair each over ratio-2^{1/4} bins.
    let stated = PrivacyTarget::from_epsilon_delta(
        crate::privacy::Epsilon::new(50.0).unwrap(),
        crate::privacy::Delta::new(1e-5).unwrap(),
    );
    let old_range_epsilon = (2.0 * stated.rho).sqrt() / 2.0;
    let mut old = prepare(
        json!({"k": 3, "batch_size": 141, "range_subsets": 64, "range_bin_quarter_octaves": 1}),
        &c,
        &target(1250.0, 1e-5),
    )
    .expect("valid");
    old.budget.range_epsilon = old_range_epsilon;
    old.budget.range_delta = 5e-6;
    for seed in 0..3 {
        match run_on_records(&KDpPca, &xt, &old, &c, seed).0 {
            Err(RunError::Failed(m)) => assert!(m.contains("PrivRange returned ⊥"), "{m}"),
            other => panic!("old defaults did not fail: {other:?}"),
        }
    }
    let energies = judged_energies(&xt, beta, 1250.0, false, 3);
    assert!(energies.iter().all(|e| *e >= 0.95), "{energies:?}");
}

/// Extreme but valid parameters are refused with a message, never a panic (the hostile API
/// test found an integer overflow in the refusal's arithmetic).
#[test]
fn extreme_parameters_are_refused_cleanly() {
    let c = ctx(30, Some(2_000), RO);
    for (p, t) in [
        (
            json!({"k": 3, "failure_probability": 1e-300}),
            target(1e-300, 1e-300),
        ),
        (json!({"k": 1, "failure_probability": 5e-324}), target(1e-12, 0.5)),
        (json!({"k": 30}), target(1e-3, 1e-12)),
    ] {
        let e = KDpPca.prepare(p, &c, &t).expect_err("refused");
        assert!(e.to_string().contains("k_dp_pca cannot run"), "{e}");
    }
}
