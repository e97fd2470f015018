//! Tests of `eigen_sampling`: the cost formula, the calibration, the sensitivities, validation,
//! refusal, the output contract, convergence, and statistical audits of both kinds of noise.

use rand::Rng;
use rand_chacha::ChaCha20Rng;
use serde_json::json;

use super::*;
use crate::algorithms::DynAlgorithm;
use crate::algorithms::bingham::tests::{
    check_concentration, check_uniform, pair_cos, pair_pit, uniform_to_laplace,
};
use crate::algorithms::testing::{
    AR, EN, RO, ar, assert_basis_contract, assert_errors_fall, assert_fails_cleanly,
    assert_invalid_k_and_fields, assert_object_errors, assert_recorded_scale, assert_run_fails, ctx,
    exact_top, gaussian, gaussian_vector, invalid_field, rejected, ro, run_on_records, run_with_progress,
    seeded, spiked_records, spiked_with_ctx, target,
};
use crate::dataset::Relation;
use crate::linalg::subspace::sin_theta;
use crate::linalg::{matmul, sym_eig, thin_qr_q};
use crate::privacy::testing::check_laplace_scale;

fn params(k: usize, share: Option<f64>) -> EigenSamplingParams {
    EigenSamplingParams {
        k,
        eigenvalue_share: share,
    }
}

fn config_of(k: usize, eigenvalue_epsilon: f64, vector_epsilon: f64) -> EigenSamplingConfig {
    EigenSamplingConfig {
        k,
        eigenvalue_epsilon,
        vector_epsilon,
    }
}

// ---- Cost, calibration, sensitivities. ----

#[test]
fn cost_is_laplace_half_square_plus_draws_eighth_square() {
    // d = 10, k = 2 (m = 2): ρ = 1²/2 + 2·2²/8 = 0.5 + 1 = 1.5; nothing Gaussian.
    let cost = EigenSampling.cost(&config_of(2, 1.0, 2.0), &ctx(10, None, AR));
    assert_eq!(cost, Cost::zcdp(1.5));
    assert_eq!(cost.other_rho, cost.rho);
    // k = d = 3: only m = 2 vectors are drawn: 0.2²/2 + 2·0.4²/8 = 0.02 + 0.04 = 0.06.
    let cost = EigenSampling
        .cost(&config_of(3, 0.2, 0.4), &ctx(3, Some(9), RO))
        .rho;
    assert!((cost - 0.06).abs() < 1e-15, "{cost}");
    // d = 1: no vector is drawn, only ε₀ = 0.6 → 0.18.
    let cost = EigenSampling
        .cost(&config_of(1, 0.6, 123.0), &ctx(1, None, AR))
        .rho;
    assert!((cost - 0.18).abs() < 1e-15, "{cost}");
    // No eigenvalues: 4 draws of ε_v = 2 → 4·4/8 = 2, summed per draw (never (Σε)²/2 = 32).
    assert_eq!(
        EigenSampling.cost(&config_of(4, 0.0, 2.0), &ctx(5, None, RO)),
        Cost::zcdp(2.0)
    );
    assert_eq!(
        EigenSampling
            .cost(&config_of(4, 0.0, 0.5), &ctx(5, None, RO))
            .delta,
        0.0
    );
}

#[test]
fn sensitivities_are_the_hand_worked_ones() {
    // β = 2: score β² = 4 under both relations; eigenvalues β² = 4 and 2β² = 8.
    assert_eq!(score_sensitivity(&AR), Some(4.0));
    assert_eq!(score_sensitivity(&RO), Some(4.0));
    assert_eq!(eigenvalue_sensitivity(&AR), Some(4.0));
    assert_eq!(eigenvalue_sensitivity(&RO), Some(8.0));
    assert_eq!(
        (score_sensitivity(&EN), eigenvalue_sensitivity(&EN)),
        (None, None)
    );
    assert_eq!(sampled_vectors(3, 10), 3);
    assert_eq!(sampled_vectors(5, 5), 4);
    assert_eq!(sampled_vectors(1, 1), 0);
}

/// A uniformly random unit vector in R^d.
fn unit(rng: &mut ChaCha20Rng, d: usize) -> Vector {
    let z = gaussian_vector(rng, d);
    &z / z.norm()
}

fn l1_distance(a: &Vector, b: &Vector, k: usize) -> f64 {
    a.iter().zip(b.iter()).take(k).map(|(x, y)| (x - y).abs()).sum()
}

/// The bounds hold on actual neighbours (rows on the boundary ‖x‖ = β), and Δ₁ = 2β² is
/// attained under replace_one.
#[test]
fn sensitivities_hold_on_random_neighbours() {
    let mut rng = seeded(5);
    let (d, n, beta) = (6, 12, 1.5);
    let ar = Neighbours::AddRemove { beta, alpha: 10.0 };
    let ro = Neighbours::ReplaceOne { beta, alpha: 10.0 };
    for _ in 0..300 {
        let mut xt = gaussian(&mut rng, d, n);
        for mut col in xt.column_iter_mut() {
            let norm = col.norm();
            col *= beta * rng.random::<f64>() / norm;
        }
        let c = gram_t(&xt);
        let x = unit(&mut rng, d) * beta;
        let y: Vector = xt.column(0) * 1.0;
        let added = &c + &x * x.transpose();
        let replaced = &added - &y * y.transpose();
        let (lc, la, lr) = (
            sym_eig(&c).values,
            sym_eig(&added).values,
            sym_eig(&replaced).values,
        );
        let tol = 1e-9;
        for k in [1, 3, d] {
            assert!(l1_distance(&lc, &la, k) <= eigenvalue_sensitivity(&ar).expect("records") + tol);
            assert!(l1_distance(&lc, &lr, k) <= eigenvalue_sensitivity(&ro).expect("records") + tol);
        }
        for _ in 0..10 {
            let u = unit(&mut rng, d);
            let change = |m: &Matrix| (u.transpose() * m * &u)[(0, 0)] - (u.transpose() * &c * &u)[(0, 0)];
            assert!(change(&added).abs() <= score_sensitivity(&ar).expect("records") + tol);
            assert!(change(&replaced).abs() <= score_sensitivity(&ro).expect("records") + tol);
        }
    }
    // C = diag(3, 1)β², replace y = βe₁ by x = βe₂: eigenvalues (3, 1)β² → (2, 2)β², L1 = 2β².
    let c = Matrix::from_diagonal(&Vector::from_vec(vec![3.0, 1.0])) * (beta * beta);
    let swapped = &c + Matrix::from_diagonal(&Vector::from_vec(vec![-1.0, 1.0])) * (beta * beta);
    let distance = l1_distance(&sym_eig(&c).values, &sym_eig(&swapped).values, 2);
    assert!((distance - eigenvalue_sensitivity(&ro).expect("records")).abs() < 1e-12);
}

#[test]
fn configure_then_cost_returns_the_target() {
    for neighbours in [AR, RO] {
        for (d, k) in [(10, 3), (10, 10), (2, 1), (50, 7)] {
            let c = ctx(d, None, neighbours);
            let m = sampled_vectors(k, d) as f64;
            for share in [0.0, 0.1, 0.5, 0.9] {
                for rho in [1e-8, 1e-3, 0.1, 0.5, 1.0, 3.7, 1e4, 1e6] {
                    let config = EigenSampling
                        .configure(params(k, Some(share)), &c, &target(rho))
                        .expect("valid");
                    let cost = EigenSampling.cost(&config, &c);
                    assert!(cost.rho <= rho, "cost {} above target {rho}", cost.rho);
                    assert!((rho - cost.rho) / rho <= 1e-12, "{} vs {rho}", cost.rho);
                    assert_eq!(cost.delta, 0.0);
                    // ε₀²/2 = share·ρ and m·ε_v²/8 = (1 − share)·ρ.
                    let e0 = (2.0 * share * rho).sqrt();
                    assert!((config.eigenvalue_epsilon - e0).abs() <= 1e-12 * e0.max(1e-300));
                    let ev = (8.0 * (1.0 - share) * rho / m).sqrt();
                    assert!((config.vector_epsilon - ev).abs() <= 1e-12 * ev);
                    // Each draw gets more ε than the pure-DP split (1 − share)·sqrt(2ρ)/m did.
                    assert!(config.vector_epsilon > (1.0 - share) * (2.0 * rho).sqrt() / m);
                }
            }
        }
    }
    // d = 1: nothing to draw, only ε₀ (its share·ρ = 1) is spent and charged.
    let c = ctx(1, None, AR);
    let config = EigenSampling
        .configure(params(1, Some(0.5)), &c, &target(2.0))
        .expect("valid");
    assert_eq!(config.vector_epsilon, 0.0);
    assert!((EigenSampling.cost(&config, &c).rho - 1.0).abs() < 1e-12);
}

#[test]
fn defaults_and_noise_scales() {
    let c = ctx(8, Some(100), RO);
    let prepared = EigenSampling
        .prepare(json!({"k": 2, "clip": "none"}), &c, &target(0.5))
        .expect("valid");
    // ρ = 1/2, share 1/2: ε₀ = sqrt(2·0.25) = sqrt(1/2); ε_v = sqrt(8·0.25/2) = 1.
    let e0 = 0.5_f64.sqrt();
    assert!((prepared.config["eigenvalue_epsilon"].as_f64().expect("number") - e0).abs() < 1e-12);
    assert!((prepared.config["vector_epsilon"].as_f64().expect("number") - 1.0).abs() < 1e-12);
    assert!((prepared.cost.rho - 0.5).abs() < 1e-12);
    let [values, vectors] = &prepared.noise[..] else {
        panic!("two releases expected: {:?}", prepared.noise)
    };
    assert_eq!(
        (
            values.release.as_str(),
            values.distribution.as_str(),
            values.count
        ),
        (EIGENVALUE_RELEASE, "laplace", 2)
    );
    // b = Δ₁/ε₀: multiplier 1/ε₀ = sqrt(2) times Δ₁ = 2β² = 8.
    assert!((values.multiplier - 2.0_f64.sqrt()).abs() < 1e-12 && values.sensitivity == Some(8.0));
    assert_eq!(
        (
            vectors.release.as_str(),
            vectors.distribution.as_str(),
            vectors.count
        ),
        (EIGENVECTOR_RELEASE, "bingham", 2)
    );
    // replace_one: temperature 2Δ/ε_v, multiplier 2/ε_v = 2 times Δ = β² = 4.
    assert!((vectors.multiplier - 2.0).abs() < 1e-12 && vectors.sensitivity == Some(4.0));
    // add_remove (monotone score): temperature Δ/ε_v, multiplier 1/ε_v = 1.
    let monotone = EigenSampling
        .prepare(json!({"k": 2, "clip": "none"}), &ctx(8, None, AR), &target(0.5))
        .expect("valid");
    assert!((monotone.noise[1].multiplier - 1.0).abs() < 1e-12);
    // No eigenvalues at share 0; k = d draws d − 1 vectors.
    let prepared = EigenSampling
        .prepare(
            json!({"k": 8, "eigenvalue_share": 0.0, "clip": "none"}),
            &c,
            &target(0.5),
        )
        .expect("valid");
    assert_eq!(prepared.noise.len(), 1);
    assert_eq!(
        (prepared.noise[0].release.as_str(), prepared.noise[0].count),
        (EIGENVECTOR_RELEASE, 7)
    );
    // All of ρ = 1/2 on 7 draws: ε_v = sqrt(8·0.5/7).
    let ev = (4.0_f64 / 7.0).sqrt();
    assert!((prepared.config["vector_epsilon"].as_f64().expect("number") - ev).abs() < 1e-12);
}

#[test]
fn invalid_parameters_name_their_field() {
    let c = ctx(6, None, AR);
    assert_invalid_k_and_fields(
        &EigenSampling,
        &c,
        &target(1.0),
        [
            (json!({"k": "two"}), "params.k"),
            (json!({"k": -1}), "params.k"),
            (json!({"k": 2.5}), "params.k"),
            (
                json!({"k": 2, "eigenvalue_share": -0.1}),
                "params.eigenvalue_share",
            ),
            (
                json!({"k": 2, "eigenvalue_share": 1.0}),
                "params.eigenvalue_share",
            ),
            (json!({"k": 2, "eigenvalue_share": 3}), "params.eigenvalue_share"),
            (
                json!({"k": 2, "eigenvalue_share": "half"}),
                "params.eigenvalue_share",
            ),
        ],
    );
    assert_object_errors(
        &EigenSampling,
        &c,
        [
            (json!({}), "`k`"),
            (json!({"k": 2, "iterations": 4}), "`iterations`"),
        ],
    );
    for bad in [f64::NAN, 0.0, -1.0, f64::INFINITY] {
        assert_eq!(
            invalid_field(&rejected(&EigenSampling, json!({"k": 2}), &c, bad)),
            "rho"
        );
    }
    let bad = ctx(6, None, ro(0.0, 1.0));
    assert_eq!(
        invalid_field(&rejected(&EigenSampling, json!({"k": 2}), &bad, 1.0)),
        "bounds.row_norm_bound"
    );
}

#[test]
fn matrix_datasets_are_refused() {
    let c = ctx(6, None, EN);
    let e = rejected(&EigenSampling, json!({"k": 2}), &c, 1.0);
    assert!(
        matches!(e, ConfigError::Unsupported(ref m) if m.contains("eigen_sampling")),
        "{e}"
    );
    // Also when configure is called directly, without the registry's check.
    let e = EigenSampling
        .configure(params(2, None), &c, &target(1.0))
        .expect_err("refused");
    assert!(matches!(e, ConfigError::Unsupported(_)), "{e}");
    for neighbours in [AR, RO] {
        assert!(
            EigenSampling
                .prepare(json!({"k": 2}), &ctx(6, None, neighbours), &target(1.0))
                .is_ok()
        );
    }
}

#[test]
fn info_is_complete() {
    let info = EigenSampling::INFO;
    assert_eq!(info.name, "eigen_sampling");
    assert!(!info.summary.is_empty() && info.source.contains("Amin") && info.source.contains("Kent"));
    assert_eq!(info.kinds, vec![Kind::Records]);
    assert_eq!(info.relations, vec![Relation::ReplaceOne, Relation::AddRemove]);
    assert!(info.privacy.contains("ε₀²/2 + m·ε_v²/8") && !info.public_only);
    let schema = crate::algorithms::parameters::schema_of::<EigenSamplingParams>();
    assert_eq!(
        crate::algorithms::parameters::property_names(&schema),
        ["eigenvalue_share", "k"]
    );
    assert_eq!(schema["required"], json!(["k"]));
    let share = &schema["properties"]["eigenvalue_share"];
    assert_eq!(share["default"], json!(0.5));
    assert_eq!(
        (&share["minimum"], &share["exclusiveMaximum"]),
        (&json!(0), &json!(1))
    );
    assert_eq!(schema["properties"]["k"]["minimum"], json!(1));
    assert!(crate::algorithms::find("eigen_sampling").is_some(), "registered");
}

// ---- Runs. ----

#[test]
fn output_is_orthonormal_and_converges() {
    let (d, n, k) = (20, 400, 3);
    let xt = spiked_records(61, d, n, &[9.0, 6.0, 4.0], 0.3, 4.0);
    let gram = gram_t(&xt);
    let exact = exact_top(&gram, k);
    let beta = 4.0;
    for neighbours in [ar(beta, 20.0), ro(beta, 20.0)] {
        let c = ctx(d, Some(n), neighbours);
        let mut errors = Vec::new();
        for (s, rho) in [1e-3, 10.0, 1e4, 1e8, 1e20].into_iter().enumerate() {
            let config = EigenSampling
                .configure(params(k, None), &c, &target(rho))
                .expect("valid");
            let (out, audit) = run_on_records(&EigenSampling, &xt, &config, &c, 70 + s as u64);
            let out = out.expect("run");
            assert_basis_contract(&out.basis, d, k);
            assert_eq!(
                audit.draws.len(),
                1 + k,
                "one eigenvalue batch and k vector draws"
            );
            errors.push(sin_theta(&out.basis, &exact));
        }
        assert_errors_fall(&errors, 0.5, 1e-4, neighbours);
    }
}

#[test]
fn eigenvalues_converge_are_sorted_and_optional() {
    let (d, n, k) = (12, 300, 4);
    let xt = spiked_records(62, d, n, &[8.0, 5.0, 3.0, 2.0], 0.3, 3.0);
    let exact = sym_eig(&gram_t(&xt)).values;
    let c = ctx(d, Some(n), RO);
    let config = EigenSampling
        .configure(params(k, None), &c, &target(1e16))
        .expect("valid");
    let (out, _) = run_on_records(&EigenSampling, &xt, &config, &c, 63);
    let values = out.expect("run").eigenvalues.expect("released");
    assert_eq!(values.len(), k);
    for (got, want) in values.iter().zip(exact.iter()) {
        assert!((got - want).abs() <= 1e-6 * want, "{got} vs {want}");
    }
    // At a small budget the noisy values are still sorted and non-negative.
    let config = EigenSampling
        .configure(params(k, None), &c, &target(1e-4))
        .expect("valid");
    let (out, _) = run_on_records(&EigenSampling, &xt, &config, &c, 64);
    let values = out.expect("run").eigenvalues.expect("released");
    assert!(
        values.windows(2).all(|w| w[0] >= w[1]) && values.iter().all(|&v| v >= 0.0),
        "{values:?}"
    );
    // Share 0: no eigenvalue release at all.
    let config = EigenSampling
        .configure(params(k, Some(0.0)), &c, &target(1.0))
        .expect("valid");
    let (out, audit) = run_on_records(&EigenSampling, &xt, &config, &c, 65);
    assert!(out.expect("run").eigenvalues.is_none());
    assert!(audit.draws.iter().all(|draw| draw.label == EIGENVECTOR_RELEASE));
}

#[test]
fn full_rank_draws_all_but_the_last_vector() {
    let (d, n) = (5, 40);
    let (xt, c) = spiked_with_ctx(66, (d, n), &[4.0, 2.0], 0.5, AR);
    let config = EigenSampling
        .configure(params(d, None), &c, &target(0.5))
        .expect("valid");
    let (out, audit) = run_on_records(&EigenSampling, &xt, &config, &c, 67);
    assert_basis_contract(&out.expect("run").basis, d, d);
    let vectors: Vec<_> = audit
        .draws
        .iter()
        .filter(|draw| draw.label == EIGENVECTOR_RELEASE)
        .collect();
    assert_eq!(vectors.len(), d - 1);
    // Each draw lives on the sphere of the remaining subspace: dimension d, d − 1, …, 2.
    for (i, draw) in vectors.iter().enumerate() {
        assert_eq!(draw.values.len(), d - i);
    }
}

#[test]
fn wrong_input_and_cancellation_are_clean_failures() {
    let xt = spiked_records(68, 6, 30, &[3.0], 0.5, 2.0);
    let c = ctx(6, Some(30), RO);
    let config = EigenSampling
        .configure(params(2, None), &c, &target(1.0))
        .expect("valid");
    let a = Matrix::identity(6, 6);
    assert_fails_cleanly(
        &EigenSampling,
        DataInput::Matrix { a: &a },
        &config,
        &c,
        "matrix input",
    );
    let records = || DataInput::Records { xt: (&xt).into() };
    assert_run_fails(&EigenSampling, records(), &config, &ctx(7, None, RO));
    assert_run_fails(&EigenSampling, records(), &config_of(2, 0.5, -1.0), &c);
    // A cancelled job stops at the first progress report.
    let input = DataInput::Records { xt: (&xt).into() };
    let (out, _, _) = run_with_progress(&EigenSampling, input, &config, &c, 2, |_, _| true);
    assert_eq!(out.err(), Some(RunError::Cancelled));
}

// ---- Statistical audits of the noise. ----
//
// The audit rule (docs/design/noise.md, "Audits"): the scale is derived here from public
// inputs (ρ, the share, β, the relation), never from the run's configuration or audit record;
// the draws themselves are tested; and a twin under-noised by 1.2× fails the same test.

/// What an eigenvalue audit found: the largest relative excess of an audited Laplace scale
/// over the spec's (∞ when below it) and the scale test of all draws.
struct EigenvalueAudit {
    scale_excess: f64,
    draws: usize,
    check: Result<(), String>,
}

/// Laplace eigenvalue noise against b = Δ₁/ε₀, ε₀ = sqrt(2·share·ρ), computed here from the
/// spec, with the released values rebuilt from the audited noise. k = d = 8 and 600 runs give
/// 4 800 draws: the scale test's z is ≈ (b_true/b − 1)·√n, −11.5 for b/1.2 and −6.3 for b/1.1
/// (threshold 5). `factor` multiplies the configured ε₀ (factor > 1: under-noised by `factor`).
fn audit_eigenvalues(neighbours: Neighbours, factor: f64) -> EigenvalueAudit {
    let (d, n, k, rho, share, runs) = (8, 60, 8, 0.3_f64, 0.5, 600);
    let xt = spiked_records(81, d, n, &[5.0, 3.0], 0.5, 2.0);
    let exact = sym_eig(&gram_t(&xt)).values;
    let c = ctx(d, Some(n), neighbours);
    let spec_delta = match neighbours {
        Neighbours::AddRemove { beta, .. } => beta * beta,
        Neighbours::ReplaceOne { beta, .. } => 2.0 * beta * beta,
        Neighbours::Entry { .. } => unreachable!("records only"),
    };
    let spec_b = spec_delta / (2.0 * share * rho).sqrt();
    let mut config = EigenSampling
        .configure(params(k, Some(share)), &c, &target(rho))
        .expect("valid");
    config.eigenvalue_epsilon *= factor;
    let (mut noise, mut scale_excess) = (Vec::new(), 0.0_f64);
    for seed in 0..runs {
        let (out, audit) = run_on_records(&EigenSampling, &xt, &config, &c, 900 + seed);
        let values = out.expect("run").eigenvalues.expect("released");
        let draws: Vec<_> = audit
            .draws
            .iter()
            .filter(|draw| draw.label == EIGENVALUE_RELEASE)
            .collect();
        assert_eq!(draws.len(), 1);
        assert_eq!((draws[0].distribution, draws[0].values.len()), ("laplace", k));
        scale_excess = scale_excess.max(crate::privacy::testing::scale_excess(draws[0].scale, spec_b));
        let mut rebuilt: Vec<f64> = exact
            .iter()
            .zip(&draws[0].values)
            .map(|(l, z)| (crate::privacy::testing::on_grid(*l, draws[0].grid) + z).max(0.0))
            .collect();
        rebuilt.sort_by(|a, b| b.total_cmp(a));
        assert_eq!(values, rebuilt, "released values = sort(max(λ + noise, 0))");
        noise.extend_from_slice(&draws[0].values);
    }
    EigenvalueAudit {
        scale_excess,
        draws: noise.len(),
        check: check_laplace_scale(&noise, spec_b),
    }
}

#[test]
fn eigenvalue_noise_has_the_calibrated_scale() {
    for neighbours in [AR, RO] {
        let audit = audit_eigenvalues(neighbours, 1.0);
        assert_eq!(audit.draws, 4800);
        audit.check.unwrap_or_else(|e| panic!("{neighbours:?}: {e}"));
        assert_recorded_scale(audit.scale_excess, neighbours);
    }
}

/// Laplace noise 1.2× too small fails the scale test on the draws (and the recorded scale).
#[test]
fn under_noised_eigenvalues_fail_the_audit() {
    for neighbours in [AR, RO] {
        let audit = audit_eigenvalues(neighbours, 1.2);
        assert!(audit.check.is_err(), "{neighbours:?}: b/1.2 went unnoticed");
        assert!(audit.scale_excess.is_infinite(), "{neighbours:?}");
    }
}

/// The top two eigenpairs of C restricted to the orthogonal complement of `earlier` (columns).
/// C is PSD, so pushing span(earlier) to a negative eigenvalue leaves the complement on top.
fn restricted_top_two(c: &Matrix, earlier: &Matrix) -> ([f64; 2], Matrix) {
    let d = c.nrows();
    let pp = matmul(earlier, &earlier.transpose());
    let proj = Matrix::identity(d, d) - &pp;
    let shift = 2.0 * (c.trace() + 1.0);
    let restricted = &proj * c * &proj - pp * shift;
    let e = sym_eig(&restricted);
    ([e.values[0], e.values[1]], e.vectors.columns(0, 2).into_owned())
}

/// What a vector audit found: the KS and Laplace-scale tests of the pair PITs (the shape of the
/// distribution), the concentration score test, and the largest relative difference of an
/// audited concentration from the spec's.
struct VectorAudit {
    pairs: usize,
    shape: Result<(), String>,
    concentration: Result<(), String>,
    recorded_error: f64,
}

/// The exponential-mechanism draws against the concentration computed here from the spec
/// (ε_v = sqrt(8(1 − share)ρ/m), m = d − 1; t = ε_v/β² under add_remove, ε_v/(2β²) under
/// replace_one), using only the data and the output basis: for draw i, the top two
/// eigenvectors (w₁, w₂) of C restricted to the complement of the earlier outputs give a
/// coordinate pair whose conditional angle is exactly von Mises(κ) with κ = r²·t·(μ₁ − μ₂)/2
/// under the exponential mechanism ([`pair_pit`], [`pair_cos`]). Two tests on the draws:
/// - shape: the PITs are Uniform(0, 1) (KS, and as a Laplace scale test);
/// - concentration: the score test [`check_concentration`] of a common factor on κ. With
///   k = d = 6 (5 draws a run) and 1 200 runs, 6 000 pairs.
///
/// `factor` multiplies the configured ε_v, hence the concentration (factor > 1: under-noised).
fn audit_vectors(neighbours: Neighbours, factor: f64) -> VectorAudit {
    let (d, n, k, rho, runs) = (6, 60, 6, 20.0_f64, 1200);
    let m = d - 1;
    // Five spikes a factor 2 apart: every draw's top gap is wide, so every pair has κ of a few
    // or more, where a pair carries the most information about the concentration.
    let xt = spiked_records(82, d, n, &[8.0, 4.0, 2.0, 1.0, 0.5], 0.1, 1.0);
    let gram = gram_t(&xt);
    let c = ctx(d, Some(n), neighbours);
    let beta = match neighbours {
        Neighbours::AddRemove { beta, .. } | Neighbours::ReplaceOne { beta, .. } => beta,
        Neighbours::Entry { .. } => unreachable!("records only"),
    };
    let epsilon_v = (8.0 * 0.5 * rho / m as f64).sqrt();
    let t = match neighbours {
        Neighbours::AddRemove { .. } => epsilon_v / (beta * beta),
        _ => epsilon_v / (2.0 * beta * beta),
    };
    let mut config = EigenSampling
        .configure(params(k, None), &c, &target(rho))
        .expect("valid");
    config.vector_epsilon *= factor;
    let (mut pits, mut pairs, mut recorded_error) = (Vec::new(), Vec::new(), 0.0_f64);
    for seed in 0..runs {
        let (out, audit) = run_on_records(&EigenSampling, &xt, &config, &c, 2000 + seed);
        let basis = out.expect("run").basis;
        let draws: Vec<_> = audit
            .draws
            .iter()
            .filter(|draw| draw.label == EIGENVECTOR_RELEASE)
            .collect();
        assert_eq!(draws.len(), m);
        for (i, draw) in draws.iter().enumerate() {
            assert_eq!((draw.distribution, draw.values.len()), ("bingham", d - i));
            let norm = draw.values.iter().map(|v| v * v).sum::<f64>();
            assert!((norm - 1.0).abs() < 1e-12);
            recorded_error = recorded_error.max((draw.scale - t).abs() / t);
            let earlier = basis.columns(0, i).into_owned();
            let ([mu1, mu2], w) = restricted_top_two(&gram, &earlier);
            let v = basis.column(i);
            let (y1, y2) = (w.column(0).dot(&v), w.column(1).dot(&v));
            pits.push(pair_pit(y1, y2, -t * mu1, -t * mu2));
            pairs.push(pair_cos(y1, y2, -t * mu1, -t * mu2));
        }
    }
    let laplace: Vec<f64> = pits.iter().map(|&u| uniform_to_laplace(u)).collect();
    let shape = match (check_uniform(&pits), check_laplace_scale(&laplace, 1.0)) {
        (Ok(()), Ok(())) => Ok(()),
        (uniform, scale) => Err(format!("uniformity: {uniform:?}; scale: {scale:?}")),
    };
    VectorAudit {
        pairs: pairs.len(),
        shape,
        concentration: check_concentration(&pairs),
        recorded_error,
    }
}

const VECTOR_CASES: [Neighbours; 2] = [ar(1.0, 3.0), ro(1.0, 3.0)];

#[test]
fn eigenvector_draws_have_the_calibrated_concentration() {
    for neighbours in VECTOR_CASES {
        let audit = audit_vectors(neighbours, 1.0);
        assert_eq!(audit.pairs, 6000);
        audit
            .concentration
            .unwrap_or_else(|e| panic!("{neighbours:?}: {e}"));
        audit.shape.unwrap_or_else(|e| panic!("{neighbours:?}: {e}"));
        assert!(
            audit.recorded_error <= 1e-12,
            "{neighbours:?}: audited concentration off by {:e}",
            audit.recorded_error
        );
    }
}

/// Concentration × 1.2 (ε_v × 1.2) fails the concentration test on the draws.
#[test]
fn under_noised_eigenvectors_fail_the_audit() {
    for neighbours in VECTOR_CASES {
        let audit = audit_vectors(neighbours, 1.2);
        assert!(
            audit.concentration.is_err(),
            "{neighbours:?}: concentration × 1.2 went unnoticed"
        );
    }
}

/// The add_remove draws use twice the replace_one concentration at the same ε_v (monotone
/// score), and the configured draw costs ε_v²/8 each.
#[test]
fn add_remove_concentration_is_twice_replace_one() {
    let ar = ar(3.0, 9.0);
    let ro = ro(3.0, 9.0);
    assert_eq!(concentration(&ar, 0.9), Some(0.1));
    assert_eq!(concentration(&ro, 0.9), Some(0.05));
    assert_eq!(concentration(&EN, 0.9), None);
    let c = ctx(10, None, ar);
    let config = EigenSampling
        .configure(params(3, Some(0.0)), &c, &target(0.75))
        .expect("valid");
    // All of ρ on 3 draws: ε_v²/8 = 0.25 each, ε_v = sqrt(2).
    assert!((config.vector_epsilon - 2.0_f64.sqrt()).abs() < 1e-12);
    assert!((EigenSampling.cost(&config, &c).rho - 0.75).abs() < 1e-12);
}

/// The deflation keeps an orthonormal frame orthogonal to the drawn vector and compresses C
/// onto it exactly: P_{i+1}ᵀ C P_{i+1} = C_{i+1}.
#[test]
fn deflation_is_an_exact_compression() {
    let mut rng = seeded(9);
    let d = 7;
    let g = gaussian(&mut rng, d, d);
    let c = &g * g.transpose();
    let frame = thin_qr_q(&gaussian(&mut rng, d, d));
    let compressed = frame.transpose() * &c * &frame;
    for sign in [1.0, -1.0] {
        let u = unit(&mut rng, d) * sign;
        let (next_frame, next_c) = deflate(&frame, &compressed, &u);
        assert_eq!(next_frame.shape(), (d, d - 1));
        let gram = next_frame.transpose() * &next_frame;
        assert!((gram - Matrix::identity(d - 1, d - 1)).amax() < 1e-14);
        assert!((next_frame.transpose() * (&frame * &u)).amax() < 1e-14);
        let want = next_frame.transpose() * &c * &next_frame;
        assert!((next_c - want).amax() < 1e-12 * c.amax());
    }
}
