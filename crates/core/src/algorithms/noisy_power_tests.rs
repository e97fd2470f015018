//! Tests of `noisy_power`: cost and calibration, parameters, the run contract, convergence,
//! progress and cancellation, and a statistical audit of every noise draw against an
//! independent replay of Alg. 1.

use super::*;
use crate::algorithms::DataInput;
use crate::algorithms::DynAlgorithm;
use crate::algorithms::operator::gram_is_cheaper;
use crate::algorithms::testing::{
    AR, EN, RO, ar, assert_basis_contract, assert_cancellation_stops_the_noise, assert_draws_calibrated,
    assert_errors_fall, assert_fails_cleanly, assert_invalid_fields, assert_k_required_and_unknown_refused,
    assert_matches_exact, assert_registry_matches_direct, assert_run_fails, ctx, exact_top, gaussian,
    input_and_dense, invalid_field, mean_sin_theta, on_every_relation, rejected, run_audited,
    run_with_progress, seeded, spiked_matrix, spiked_records, spiked_with_ctx, target,
};
use crate::dataset::Neighbours;
use crate::linalg::subspace::{orthonormality_error, sin_theta};
use crate::linalg::{CsrView, gram_t, matmul, thin_qr_q};
use crate::linalg::{matmul_tn, thin_svd};
use crate::privacy::testing::check_gaussian_scale;

fn params(k: usize, p: usize, iterations: u32, sensitivity: SensitivityMode) -> NoisyPowerParams {
    NoisyPowerParams {
        k,
        p: Some(p),
        iterations: Some(iterations),
        sensitivity,
    }
}

// ---- Cost and calibration. ----

#[test]
fn cost_is_l_over_two_s_squared() {
    let c = ctx(10, None, AR);
    let cfg = |iterations, multiplier| NoisyPowerConfig {
        k: 2,
        p: 4,
        iterations,
        sensitivity: SensitivityMode::Auto,
        multiplier,
        until_converged: false,
    };
    // 4 / (2·2²) = 0.5; 1 / (2·0.5²) = 2; 10 / (2·10²) = 0.05.
    assert_eq!(NoisyPower.cost(&cfg(4, 2.0), &c), Cost::gaussian_zcdp(0.5));
    assert_eq!(NoisyPower.cost(&cfg(1, 0.5), &c), Cost::gaussian_zcdp(2.0));
    assert_eq!(NoisyPower.cost(&cfg(10, 10.0), &c), Cost::gaussian_zcdp(0.05));
}

#[test]
fn configure_then_cost_returns_the_target() {
    for neighbours in [AR, RO, EN] {
        let c = ctx(20, None, neighbours);
        for rho in [1e-8, 1e-3, 0.1, 0.5, 1.0, 3.7, 1e4, 1e6] {
            for iterations in [1, 2, 4, 17, 1000] {
                let p = params(3, 6, iterations, SensitivityMode::RowNorm);
                let config = NoisyPower.configure(p, &c, &target(rho)).expect("valid");
                let cost = NoisyPower.cost(&config, &c);
                assert!(cost.rho <= rho, "cost {} above target {rho}", cost.rho);
                assert!((rho - cost.rho) / rho <= 1e-12);
                assert_eq!(cost.delta, 0.0);
                let s = (f64::from(iterations) / (2.0 * rho)).sqrt();
                assert!((config.multiplier - s).abs() / s <= 1e-12);
            }
        }
    }
}

#[test]
fn defaults_are_filled_in() {
    let full = NoisyPowerParams {
        k: 3,
        p: None,
        iterations: None,
        sensitivity: SensitivityMode::Auto,
    };
    let config = NoisyPower
        .configure(full.clone(), &ctx(30, None, AR), &target(1.0))
        .expect("valid");
    assert_eq!(
        (config.k, config.p, config.iterations),
        (3, 6, DEFAULT_ITERATIONS)
    );
    assert_eq!(config.sensitivity, SensitivityMode::Auto);
    // p = min(d, 2k) when 2k > d.
    let config = NoisyPower
        .configure(full, &ctx(5, None, AR), &target(1.0))
        .expect("valid");
    assert_eq!(config.p, 5);
    // Through the registry: an empty object is missing k, null parameters likewise.
    let prepared = NoisyPower.prepare(serde_json::json!({"k": 2}), &ctx(8, None, EN), &target(1.0));
    let prepared = prepared.expect("valid");
    assert_eq!(prepared.config["p"], 4);
    assert_eq!(prepared.config["iterations"], 4);
    assert_eq!(prepared.config["sensitivity"], "auto");
    assert!((prepared.cost.rho - 1.0).abs() <= 1e-12);
    assert_eq!(prepared.noise.len(), 1);
    assert_eq!(prepared.noise[0].count, 4);
    assert_eq!(prepared.noise[0].sensitivity, None);
}

#[test]
fn noise_scale_shows_fixed_rank_one_sensitivity() {
    let c = ctx(10, None, RO);
    let config = NoisyPower
        .configure(params(2, 4, 3, SensitivityMode::RankOne), &c, &target(1.5))
        .expect("valid");
    let scales = NoisyPower.noise_scales(&config, &c);
    assert_eq!(scales.len(), 1);
    assert_eq!(scales[0].release, RELEASE);
    assert_eq!(scales[0].distribution, "gaussian");
    assert_eq!(scales[0].count, 3);
    assert_eq!(scales[0].multiplier, config.multiplier);
    // √2·β² with β = 2.
    let expected = 2.0_f64.sqrt() * 4.0;
    assert!((scales[0].sensitivity.expect("fixed") - expected).abs() < 1e-14);
}

#[test]
fn invalid_parameters_name_their_field() {
    use serde_json::json;
    let c = ctx(6, None, AR);
    let cases = [
        (json!({"k": 0}), "params.k"),
        (json!({"k": 7}), "params.k"),
        (json!({"k": 3, "p": 2}), "params.p"),
        (json!({"k": 3, "p": 7}), "params.p"),
        (json!({"k": 2, "iterations": 0}), "params.iterations"),
        (json!({"k": 2, "iterations": 1001}), "params.iterations"),
        (json!({"k": "three"}), "params.k"),
        (json!({"k": -1}), "params.k"),
        (json!({"k": 2.5}), "params.k"),
        (json!({"k": 2, "p": "4"}), "params.p"),
        (json!({"k": 2, "iterations": 1.5}), "params.iterations"),
        (json!({"k": 2, "sensitivity": "frobenius"}), "params.sensitivity"),
        (json!({"k": 2, "sensitivity": 1}), "params.sensitivity"),
    ];
    assert_invalid_fields(&NoisyPower, &c, &target(1.0), cases);
    // Missing k and unknown fields are errors on the parameter object; the message names them.
    assert_k_required_and_unknown_refused(&NoisyPower, &c, json!({"k": 2, "q": 3}), "q");
    // rank_one does not apply to matrices.
    let e = rejected(
        &NoisyPower,
        json!({"k": 2, "sensitivity": "rank_one"}),
        &ctx(6, None, EN),
        1.0,
    );
    assert_eq!(invalid_field(&e), "params.sensitivity");
    // The budget and the bounds are validated too (NaN included).
    for rho in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e-320] {
        assert_eq!(
            invalid_field(&rejected(&NoisyPower, json!({"k": 2}), &c, rho)),
            "rho"
        );
    }
    let bad = ctx(6, None, ar(f64::NAN, 1.0));
    assert_eq!(
        invalid_field(&rejected(&NoisyPower, json!({"k": 2}), &bad, 1.0)),
        "bounds.row_norm_bound"
    );
}

/// noisy_power supports every kind and relation, so `prepare` never answers `Unsupported`.
#[test]
fn every_kind_and_relation_is_supported() {
    let info = NoisyPower::INFO;
    assert!(!info.public_only);
    for neighbours in [AR, RO, EN] {
        assert!(info.kinds.contains(&neighbours.kind()) && info.relations.contains(&neighbours.relation()));
        let prepared = NoisyPower.prepare(
            serde_json::json!({"k": 1}),
            &ctx(4, None, neighbours),
            &target(1.0),
        );
        assert!(prepared.is_ok(), "{neighbours:?}: {prepared:?}");
    }
}

// ---- Running. ----

#[test]
fn path_choice_follows_the_flop_counts() {
    // n·d² + L·d²·p vs 2·L·n·d·p.
    assert!(gram_is_cheaper(1000, 10, 4, 4)); // 101 600 ≤ 320 000
    assert!(!gram_is_cheaper(100, 1000, 4, 4)); // 100 016 000 > 3 200 000
    assert!(!gram_is_cheaper(usize::MAX, usize::MAX, 1, 1));
    // Both operators compute the same A·V.
    let xt = spiked_records(1, 7, 9, &[3.0], 0.5, 10.0);
    let v = gaussian(&mut seeded(2), 7, 3);
    let dense = Operator::Dense(std::borrow::Cow::Owned(gram_t(&xt))).apply(&v);
    let factored = Operator::Records((&xt).into()).apply(&v);
    let naive = matmul(&xt, &matmul_tn(&xt, &v));
    assert!((&dense - factored).amax() < 1e-12 && (dense - naive).amax() < 1e-12);
}

#[test]
fn gram_cheaper_edge_is_exact() {
    // d(n + L·p) ≤ 2·L·n·p at equality: n = 10, d = 10, p = 1, L = 5 → 150 vs 100 (not
    // cheaper); n = 10, d = 5, p = 1, L = 5 → 75 ≤ 100 (cheaper).
    assert!(!gram_is_cheaper(10, 10, 1, 5));
    assert!(gram_is_cheaper(10, 5, 1, 5));
}

#[test]
fn output_is_orthonormal_with_fixed_signs() {
    let (d, n) = (15, 120);
    let xt = spiked_records(3, d, n, &[5.0, 3.0], 0.3, 3.0);
    let a = spiked_matrix(4, d, &[8.0, 5.0], 0.1);
    for (neighbours, input) in [
        (AR, DataInput::Records { xt: (&xt).into() }),
        (RO, DataInput::Records { xt: (&xt).into() }),
        (EN, DataInput::Matrix { a: &a }),
    ] {
        for mode in [
            SensitivityMode::Auto,
            SensitivityMode::RowNorm,
            SensitivityMode::HardtPrice,
        ] {
            for rho in [0.01, 1e6] {
                let c = ctx(d, Some(n), neighbours);
                let config = NoisyPower
                    .configure(params(4, 6, 3, mode), &c, &target(rho))
                    .expect("valid");
                let (out, _) = run_audited(&NoisyPower, input, &config, &c, 5);
                let out = out.expect("run");
                assert_basis_contract(&out.basis, d, 4);
                let values = out.eigenvalues.expect("released singular values");
                assert_eq!(values.len(), 4);
                assert!(values.windows(2).all(|w| w[0] >= w[1]) && values[3] >= 0.0);
            }
        }
    }
}

#[test]
fn converges_to_the_exact_subspace_at_huge_rho() {
    let (d, n, k) = (30, 400, 3);
    on_every_relation((7, 8), d, n, |neighbours, input, dense, c| {
        let p = NoisyPowerParams {
            k,
            p: None,
            iterations: None,
            sensitivity: SensitivityMode::Auto,
        };
        let config = NoisyPower.configure(p, c, &target(1e12)).expect("valid");
        let (out, _) = run_audited(&NoisyPower, input, &config, c, 9);
        assert_matches_exact(&out.expect("run"), dense, k, (1e-3, 1e-4), neighbours);
    });
}

#[test]
fn error_decreases_as_rho_grows() {
    let (d, n, k) = (30, 400, 3);
    let xt = spiked_records(7, d, n, &[9.0, 6.0, 4.0], 0.3, 4.0);
    let exact = exact_top(&gram_t(&xt), k);
    let c = ctx(d, Some(n), AR);
    let rhos = [1e-4, 1e-2, 1.0, 1e2, 1e4];
    let errors: Vec<f64> = rhos
        .iter()
        .map(|&rho| {
            let config = NoisyPower
                .configure(params(k, 6, 4, SensitivityMode::Auto), &c, &target(rho))
                .expect("valid");
            mean_sin_theta(&NoisyPower, &xt, &config, &c, &exact, 4)
        })
        .collect();
    assert_errors_fall(&errors, 0.5, 1e-2, rhos);
}

#[test]
fn progress_is_reported_and_cancellation_stops_the_run() {
    let (d, n) = (10, 50);
    let (xt, c) = spiked_with_ctx(3, (d, n), &[4.0], 0.3, AR);
    let config = NoisyPower
        .configure(params(2, 3, 5, SensitivityMode::Auto), &c, &target(1.0))
        .expect("valid");
    let input = DataInput::Records { xt: (&xt).into() };
    let (out, calls, _) = run_with_progress(&NoisyPower, input, &config, &c, 1, |_, _| false);
    out.expect("run");
    assert_eq!(calls, (1..=5).map(|l| (l, 5)).collect::<Vec<_>>());

    assert_cancellation_stops_the_noise(&NoisyPower, input, &config, &c);
}

#[test]
fn mismatched_input_fails_cleanly() {
    let xt = spiked_records(3, 6, 20, &[4.0], 0.3, 2.0);
    let a = spiked_matrix(3, 6, &[4.0], 0.1);
    let config = NoisyPowerConfig {
        k: 2,
        p: 3,
        iterations: 2,
        sensitivity: SensitivityMode::Auto,
        multiplier: 1.0,
        until_converged: false,
    };
    let cases = [
        (DataInput::Matrix { a: &a }, ctx(6, None, AR)),
        (DataInput::Records { xt: (&xt).into() }, ctx(6, None, EN)),
        (DataInput::Records { xt: (&xt).into() }, ctx(7, None, AR)),
        (DataInput::Matrix { a: &a }, ctx(5, None, EN)),
    ];
    for (i, (input, c)) in cases.into_iter().enumerate() {
        assert_fails_cleanly(&NoisyPower, input, &config, &c, i);
    }
    // A stored configuration that no longer fits (k > p, rank_one on a matrix) fails too.
    let bad = NoisyPowerConfig {
        k: 4,
        ..config.clone()
    };
    assert_run_fails(
        &NoisyPower,
        DataInput::Records { xt: (&xt).into() },
        &bad,
        &ctx(6, None, AR),
    );
    let bad = NoisyPowerConfig {
        sensitivity: SensitivityMode::RankOne,
        ..config
    };
    assert_run_fails(&NoisyPower, DataInput::Matrix { a: &a }, &bad, &ctx(6, None, EN));
}

#[test]
fn registry_round_trip_matches_a_direct_run() {
    let (d, n) = (12, 60);
    let (xt, c) = spiked_with_ctx(5, (d, n), &[4.0, 2.0], 0.3, RO);
    let config = NoisyPower
        .configure(params(2, 4, 3, SensitivityMode::RowNorm), &c, &target(0.7))
        .expect("valid");
    let job_params = serde_json::json!({"k": 2, "p": 4, "iterations": 3, "sensitivity": "row_norm"});
    assert_registry_matches_direct(&NoisyPower, job_params, &target(0.7), &config, &xt, &c, 4);
}

// ---- Statistical audit of the noise actually drawn. ----

/// Δ(X) straight from the docs/design/algorithms.md table, written independently of `sensitivity.rs`.
fn spec_delta(neighbours: &Neighbours, mode: SensitivityMode, x: &Matrix) -> f64 {
    let root_p = (x.ncols() as f64).sqrt();
    let max_row = x.row_iter().map(|r| r.norm()).fold(0.0, f64::max);
    let max_abs = x.amax();
    let (row_norm, rank_one, hardt_price) = match *neighbours {
        Neighbours::Entry { u } => (u * max_row, f64::INFINITY, u * root_p * max_abs),
        Neighbours::AddRemove { beta, alpha } => (
            alpha * beta * max_row,
            beta * beta,
            alpha * beta * root_p * max_abs,
        ),
        Neighbours::ReplaceOne { beta, alpha } => (
            2.0 * alpha * beta * max_row,
            2.0_f64.sqrt() * beta * beta,
            2.0 * alpha * beta * root_p * max_abs,
        ),
    };
    match mode {
        SensitivityMode::RowNorm => row_norm,
        SensitivityMode::RankOne => rank_one,
        SensitivityMode::HardtPrice => hardt_price,
        SensitivityMode::Auto => row_norm.min(rank_one).min(hardt_price),
    }
}

struct AuditReport {
    /// Largest relative gap between the recorded and the spec's sd.
    scale_error: f64,
    per_draw: Vec<Result<(), String>>,
    /// All draws, each divided by its spec sd, against N(0, 1).
    pooled: Result<(), String>,
}

/// Runs noisy_power (multiplier scaled by `factor`, 1 = calibrated) with an audit and checks
/// the drawn noise against sd = sqrt(L/(2ρ))·Δ(X_{l−1}) computed here from the spec. The
/// iterates are replayed from the audit: X₀ from the same seed, then Y_l = A·X_{l−1} + G_l
/// with the recorded G_l and X_l = Q(Y_l); the output must be Y_L's Rayleigh–Ritz basis,
/// which shows the audited noise is the noise that was used.
fn audit_noise(neighbours: Neighbours, mode: SensitivityMode, factor: f64) -> AuditReport {
    let (d, n, k, p, iterations, rho, seed): (usize, usize, usize, usize, u32, f64, u64) =
        (60, 300, 5, 10, 5, 0.8, 21);
    let xt = spiked_records(13, d, n, &[6.0, 4.0, 3.0], 0.3, 2.0);
    let a = spiked_matrix(14, d, &[40.0, 30.0, 20.0], 0.3);
    let (input, dense) = input_and_dense(&neighbours, &xt, &a);
    let c = ctx(d, None, neighbours);
    let mut config = NoisyPower
        .configure(params(k, p, iterations, mode), &c, &target(rho))
        .expect("valid");
    config.multiplier *= factor;
    let (out, audit) = run_audited(&NoisyPower, input, &config, &c, seed);
    let out = out.expect("run");
    assert_eq!(audit.draws.len(), iterations as usize);

    let s_spec = (f64::from(iterations) / (2.0 * rho)).sqrt();
    let mut x = initial_iterate(&mut seeded(seed), d, p);
    let mut y = Matrix::zeros(d, p);
    let (mut scale_error, mut per_draw, mut pooled) = (0.0_f64, Vec::new(), Vec::new());
    for draw in &audit.draws {
        assert_eq!(
            (draw.label, draw.distribution, draw.values.len()),
            (RELEASE, "gaussian", d * p)
        );
        let sd = s_spec * spec_delta(&neighbours, mode, &x);
        scale_error = scale_error.max(crate::privacy::testing::scale_excess(draw.scale, sd));
        per_draw.push(check_gaussian_scale(&draw.values, sd));
        pooled.extend(draw.values.iter().map(|v| v / sd));
        y = (&dense * &x).map(|q| crate::privacy::testing::on_grid(q, draw.grid))
            + Matrix::from_column_slice(d, p, &draw.values);
        x = thin_qr_q(&y);
    }
    let replayed = thin_svd(&y).u.columns(0, k).into_owned();
    assert!(
        sin_theta(&out.basis, &replayed) < 1e-8,
        "output is not the replayed Rayleigh–Ritz basis"
    );
    AuditReport {
        scale_error,
        per_draw,
        pooled: check_gaussian_scale(&pooled, 1.0),
    }
}

/// Every iteration's noise matches the spec, in every sensitivity mode.
#[test]
fn noise_matches_spec() {
    for (neighbours, mode) in [
        (AR, SensitivityMode::RankOne),
        (RO, SensitivityMode::RankOne),
        (RO, SensitivityMode::RowNorm),
        (AR, SensitivityMode::HardtPrice),
        (EN, SensitivityMode::RowNorm),
        (AR, SensitivityMode::Auto),
        (EN, SensitivityMode::Auto),
    ] {
        let report = audit_noise(neighbours, mode, 1.0);
        let case = (neighbours, mode);
        assert_draws_calibrated(report.scale_error, &report.per_draw, case);
        assert!(report.pooled.is_ok(), "{case:?}: {:?}", report.pooled);
    }
}

/// The same check catches a mechanism that adds 10 % too little noise.
#[test]
fn under_noised_run_fails_the_audit() {
    for (neighbours, mode) in [
        (RO, SensitivityMode::RankOne),
        (AR, SensitivityMode::RowNorm),
        (EN, SensitivityMode::Auto),
    ] {
        let report = audit_noise(neighbours, mode, 0.9);
        assert!(
            report.pooled.is_err(),
            "{neighbours:?} {mode:?}: under-noising went unnoticed"
        );
    }
}

// ---- No privacy at all: no noise, and on a sparse matrix iterate until converged. ----

/// What the service gives a job on a public dataset that states no privacy target.
fn no_target() -> PrivacyTarget {
    PrivacyTarget {
        public_default: true,
        ..target(crate::privacy::units::MAX_RHO)
    }
}

fn k_only(k: usize, iterations: Option<u32>) -> NoisyPowerParams {
    NoisyPowerParams {
        k,
        p: None,
        iterations,
        sensitivity: SensitivityMode::Auto,
    }
}

/// A planted partition of `d` nodes in `k` groups (sparse), and its contexts: public sparse,
/// private sparse, public dense.
fn partition(d: usize, k: usize) -> (crate::linalg::sparse::Csr, [DataContext; 3]) {
    let csr = crate::linalg::testing::planted_partition(d, k, 0.08, 0.005, 3);
    let public = DataContext {
        public: true,
        sparse: true,
        ..ctx(d, None, EN)
    };
    let private = DataContext {
        public: false,
        ..public
    };
    let dense_public = DataContext {
        sparse: false,
        ..public
    };
    (csr, [public, private, dense_public])
}

/// Runs `config` on the sparse `a`; (output, iterations run as counted by the progress
/// reports, noise releases drawn, the `iterations_run` release if any).
fn run_counted(
    a: CsrView<'_>,
    config: &NoisyPowerConfig,
    c: &DataContext,
) -> (Result<Output, RunError>, usize, usize, Option<serde_json::Value>) {
    let ((out, released), audit) = crate::algorithms::testing::with_audited_env(7, |env| {
        let out = NoisyPower.run(
            config,
            Run {
                input: DataInput::Sparse { a },
                ctx: c,
                env,
            },
        );
        (out, env.released().to_vec())
    });
    let (_, reports, _) = run_with_progress(&NoisyPower, DataInput::Sparse { a }, config, c, 7, |_, _| false);
    let draws = audit.draws.iter().filter(|d| d.label == RELEASE).count();
    let ran = released
        .iter()
        .find(|(name, _)| *name == ITERATIONS_RUN)
        .map(|(_, v)| v.clone());
    (out, reports.len(), draws, ran)
}

#[test]
fn only_a_job_without_privacy_is_noiseless_and_may_stop_on_convergence() {
    let (d, k) = (600, 5);
    let (_, [public, private, dense_public]) = partition(d, k);
    let configure = |iterations, c: &DataContext, t: &PrivacyTarget| {
        NoisyPower.configure(k_only(k, iterations), c, t).expect("valid")
    };
    // No privacy target on a public sparse matrix, no L: no noise, free, to convergence.
    let config = configure(None, &public, &no_target());
    assert_eq!(
        (config.iterations, config.until_converged, config.multiplier),
        (PUBLIC_SPARSE_ITERATIONS, true, 0.0)
    );
    assert_eq!(NoisyPower.cost(&config, &public), Cost::ZERO);
    assert!(NoisyPower.noise_scales(&config, &public).is_empty());
    // With L given: no noise, but exactly L. A dense public matrix: no noise, L = 4.
    for (iterations, c, expected) in [(Some(7), &public, 7), (None, &dense_public, DEFAULT_ITERATIONS)] {
        let config = configure(iterations, c, &no_target());
        assert_eq!(
            (config.iterations, config.until_converged, config.multiplier),
            (expected, false, 0.0)
        );
    }
    // Any stated target, even on a public dataset, and any private dataset: noise, and a fixed
    // L (4 by default) whatever the data.
    for (c, t) in [
        (&public, target(1e6)),
        (&public, target(0.5)),
        (&private, target(0.5)),
        (&private, no_target()),
    ] {
        let config = configure(None, c, &t);
        assert_eq!(
            (config.iterations, config.until_converged),
            (DEFAULT_ITERATIONS, false),
            "{c:?} {t:?}"
        );
        assert!(config.multiplier > 0.0, "{c:?} {t:?}");
        assert_eq!(
            NoisyPower.cost(&config, c).rho,
            cost_of(DEFAULT_ITERATIONS, config.multiplier)
        );
        let stored = serde_json::to_value(&config).expect("serialises");
        assert!(
            stored.get("until_converged").is_none(),
            "absent when false: {stored}"
        );
    }
}

#[test]
fn a_public_job_without_privacy_stops_early_on_an_easy_matrix_with_an_accurate_basis() {
    let (d, k) = (600, 5);
    let (csr, [public, ..]) = partition(d, k);
    let a = csr.view().expect("valid CSR");
    let config = NoisyPower
        .configure(k_only(k, None), &public, &no_target())
        .expect("valid");
    let dense = a.to_dense();
    let best: f64 = crate::linalg::sym_eig(&dense).values.iter().take(k).sum();
    let energy = |basis: &Matrix| (basis.transpose() * &dense * basis).trace();
    let (out, reports, draws, ran) = run_counted(a, &config, &public);
    let basis = out.expect("runs").basis;
    assert_eq!(draws, 0, "no noise without privacy");
    let ran = ran
        .expect("the iterations run are released")
        .as_u64()
        .expect("a count") as usize;
    assert!(
        ran > 1 && ran < PUBLIC_SPARSE_ITERATIONS as usize,
        "stopped after {ran} of {PUBLIC_SPARSE_ITERATIONS}"
    );
    assert_eq!(
        reports,
        ran + 1,
        "one progress report per product, and the last at 100 %"
    );
    assert!(
        energy(&basis) >= (1.0 - 1e-3) * best,
        "captured {} of {best}",
        energy(&basis)
    );
    assert!(orthonormality_error(&basis) < 1e-10);
    // At L = 4 the same matrix is far from converged: the default matters.
    let fixed = NoisyPower
        .configure(k_only(k, Some(DEFAULT_ITERATIONS)), &public, &no_target())
        .expect("valid");
    let (out, ..) = run_counted(a, &fixed, &public);
    assert!(
        energy(&out.expect("runs").basis) < energy(&basis),
        "L = 4 captures less"
    );
}

#[test]
fn a_private_job_runs_exactly_its_configured_iterations() {
    let (d, k) = (600, 5);
    let (csr, [public, private, _]) = partition(d, k);
    let a = csr.view().expect("valid CSR");
    // The default L and a given one, on the easy matrix where a noiseless run stops after a
    // few: every iteration runs and draws its noise, at any ρ.
    for (iterations, rho) in [(None, 0.5), (None, 1e6), (Some(30), 1e6)] {
        let config = NoisyPower
            .configure(k_only(k, iterations), &private, &target(rho))
            .expect("valid");
        let (out, reports, draws, ran) = run_counted(a, &config, &private);
        out.expect("runs");
        let expected = iterations.unwrap_or(DEFAULT_ITERATIONS) as usize;
        assert_eq!(
            (reports, draws, ran),
            (expected, expected, None),
            "{iterations:?} ρ {rho}"
        );
    }
    // A stored configuration carrying the stopping rule does not stop a run that draws noise
    // (on a public dataset with a stated target, or a private one) ...
    let mut noisy = NoisyPower
        .configure(k_only(k, Some(PUBLIC_SPARSE_ITERATIONS)), &public, &target(1e6))
        .expect("valid");
    noisy.until_converged = true;
    for c in [&public, &private] {
        let (out, reports, draws, ran) = run_counted(a, &noisy, c);
        out.expect("runs");
        let all = PUBLIC_SPARSE_ITERATIONS as usize;
        assert_eq!((reports, draws, ran), (all, all, None), "{c:?}");
    }
    // ... and a run without noise is refused on a private dataset, before any draw.
    let noiseless = NoisyPower
        .configure(k_only(k, None), &public, &no_target())
        .expect("valid");
    let (out, reports, draws, _) = run_counted(a, &noiseless, &private);
    assert!(matches!(out, Err(RunError::Failed(_))), "{out:?}");
    assert_eq!((reports, draws), (0, 0));
}
