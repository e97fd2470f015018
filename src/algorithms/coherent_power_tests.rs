//! Tests of `coherent_power`: cost and calibration, parameters, the run contract, convergence,
//! coherence failures and the search, and a statistical audit of every noise draw against an
//! independent replay of Hardt & Roth Fig. 2/3.

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rand_distr::{Distribution, StandardNormal};
use serde_json::json;

use super::*;
use crate::algorithms::testing::{
    assert_basis_contract, assert_cancellation_stops_the_noise, assert_fails_cleanly, assert_invalid_fields,
    assert_matches_exact, assert_object_errors, ctx, exact_top, gaussian, input_for, invalid_field,
    mean_sin_theta, registry_and_direct_runs, rejected, run_audited, run_with_progress, seeded,
    spiked_matrix, spiked_records, target,
};
use crate::algorithms::{DynAlgorithm, find};
use crate::dataset::Neighbours;
use crate::linalg::subspace::sin_theta;
use crate::privacy::testing::{check_gaussian_scale, check_laplace_scale};

/// Records clipped to β = 4 by `spiked_records`; α = √30·β, the default for d = 30.
const AR: Neighbours = Neighbours::AddRemove {
    beta: 4.0,
    alpha: 21.908_902_300_206_645,
};
const RO: Neighbours = Neighbours::ReplaceOne {
    beta: 4.0,
    alpha: 21.908_902_300_206_645,
};
const EN: Neighbours = Neighbours::Entry { u: 1.5 };

/// u_eff straight from the docs/design/algorithms.md table (`row_norm` column), written independently of
/// `sensitivity.rs`: u, αβ, 2αβ.
fn spec_u_eff(neighbours: &Neighbours) -> f64 {
    match *neighbours {
        Neighbours::Entry { u } => u,
        Neighbours::AddRemove { beta, alpha } => alpha * beta,
        Neighbours::ReplaceOne { beta, alpha } => 2.0 * alpha * beta,
    }
}

/// The spec's round sensitivity with coherence bound C: u·sqrt(C/d) for matrices; for records
/// β² under both relations (docs/design/algorithms.md, "Decisions after the first implementation"), or the
/// coherence form αβ·sqrt(C/d) / 2αβ·sqrt(C/d) where that is smaller.
fn spec_round_delta(neighbours: &Neighbours, c: f64, d: usize) -> f64 {
    let coherent = spec_u_eff(neighbours) * (c / d as f64).sqrt();
    match *neighbours {
        Neighbours::Entry { .. } => coherent,
        Neighbours::AddRemove { beta, .. } | Neighbours::ReplaceOne { beta, .. } => {
            (beta * beta).min(coherent)
        }
    }
}

/// The spec's σ̂ sensitivity: u for matrices, β² for records (min with u_eff).
fn spec_estimate_delta(neighbours: &Neighbours) -> f64 {
    match *neighbours {
        Neighbours::Entry { u } => u,
        Neighbours::AddRemove { beta, .. } | Neighbours::ReplaceOne { beta, .. } => {
            (beta * beta).min(spec_u_eff(neighbours))
        }
    }
}

fn params(k: usize, iterations: u32, bound: Option<f64>, search: bool) -> CoherentPowerParams {
    CoherentPowerParams {
        k,
        iterations: Some(iterations),
        coherence_bound: bound,
        coherence_search: search,
        eigenvalue_share: None,
    }
}

fn config(
    k: usize,
    iterations: u32,
    candidates: Vec<f64>,
    multiplier: f64,
    epsilon: f64,
) -> CoherentPowerConfig {
    CoherentPowerConfig {
        k,
        iterations,
        coherence_search: candidates.len() > 1,
        coherence_candidates: candidates,
        eigenvalue_share: 0.1,
        multiplier,
        eigenvalue_epsilon: epsilon,
    }
}

/// The data input and the dense matrix A it stands for.
fn data(neighbours: Neighbours, d: usize, n: usize, seed: u64) -> (Matrix, Matrix) {
    match neighbours {
        Neighbours::Entry { .. } => {
            let a = spiked_matrix(seed, d, &[50.0, 30.0, 20.0], 0.2);
            (a.clone(), a)
        }
        _ => {
            let xt = spiked_records(seed, d, n, &[9.0, 6.0, 4.0], 0.3, 4.0);
            let gram = gram_t(&xt);
            (xt, gram)
        }
    }
}

// ---- Cost and calibration. ----

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
    let ar = Neighbours::AddRemove {
        beta: 4.0,
        alpha: 2.0,
    };
    let ro = Neighbours::ReplaceOne {
        beta: 4.0,
        alpha: 2.0,
    };
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

// ---- Parameters and description. ----

#[test]
fn defaults_are_filled_in() {
    let (d, rho) = (16, 0.9);
    let c = ctx(d, None, EN);
    let prepared = CoherentPower
        .prepare(json!({"k": 2, "coherence_bound": 4}), &c, &target(rho))
        .expect("valid");
    assert_eq!(prepared.config["iterations"], DEFAULT_ITERATIONS);
    assert_eq!(prepared.config["eigenvalue_share"], DEFAULT_EIGENVALUE_SHARE);
    assert_eq!(prepared.config["coherence_search"], false);
    assert_eq!(prepared.config["coherence_candidates"], json!([4.0]));
    assert!((prepared.cost.rho - rho).abs() <= 1e-9 * rho);
    // One Gaussian scale per candidate, then the Laplace one.
    let noise = &prepared.noise;
    assert_eq!(noise.len(), 2);
    let multiplier = prepared.config["multiplier"].as_f64().expect("number");
    let epsilon = prepared.config["eigenvalue_epsilon"].as_f64().expect("number");
    assert_eq!(
        (noise[0].release.as_str(), noise[0].distribution.as_str()),
        (RELEASE, "gaussian")
    );
    assert_eq!(noise[0].count, 2 * DEFAULT_ITERATIONS as usize);
    assert_eq!(noise[0].multiplier, multiplier);
    // u·sqrt(C/d) = 1.5·sqrt(4/16) = 0.75.
    assert!((noise[0].sensitivity.expect("fixed") - 0.75).abs() < 1e-15);
    assert_eq!(
        (noise[1].release.as_str(), noise[1].distribution.as_str()),
        (EIGENVALUE_RELEASE, "laplace")
    );
    assert_eq!((noise[1].count, noise[1].sensitivity), (2, Some(1.5)));
    assert!((noise[1].multiplier - 1.0 / epsilon).abs() < 1e-12 / epsilon);

    // The search without a bound runs up to d.
    let prepared = CoherentPower
        .prepare(json!({"k": 1, "coherence_search": true}), &c, &target(rho))
        .expect("valid");
    assert_eq!(
        prepared.config["coherence_candidates"],
        json!([1.0, 2.0, 4.0, 8.0, 16.0])
    );
    assert_eq!(prepared.noise.len(), 6);
    assert!((prepared.cost.rho - rho).abs() <= 1e-9 * rho);
}

#[test]
fn invalid_parameters_name_their_field() {
    let c = ctx(6, None, AR);
    let cases = [
        (json!({"k": 0, "coherence_bound": 2}), "params.k"),
        (json!({"k": 7, "coherence_bound": 2}), "params.k"),
        (json!({"k": "two", "coherence_bound": 2}), "params.k"),
        (json!({"k": 2, "coherence_bound": 0.5}), "params.coherence_bound"),
        (json!({"k": 2, "coherence_bound": 7}), "params.coherence_bound"),
        (json!({"k": 2, "coherence_bound": -1}), "params.coherence_bound"),
        (json!({"k": 2, "coherence_bound": "4"}), "params.coherence_bound"),
        (
            json!({"k": 2, "coherence_bound": 0, "coherence_search": true}),
            "params.coherence_bound",
        ),
        (
            json!({"k": 2, "coherence_bound": 2, "iterations": 0}),
            "params.iterations",
        ),
        (
            json!({"k": 2, "coherence_bound": 2, "iterations": 1001}),
            "params.iterations",
        ),
        (
            json!({"k": 2, "coherence_bound": 2, "iterations": 2.5}),
            "params.iterations",
        ),
        (
            json!({"k": 2, "coherence_bound": 2, "eigenvalue_share": 0}),
            "params.eigenvalue_share",
        ),
        (
            json!({"k": 2, "coherence_bound": 2, "eigenvalue_share": 1}),
            "params.eigenvalue_share",
        ),
        (
            json!({"k": 2, "coherence_bound": 2, "eigenvalue_share": -0.1}),
            "params.eigenvalue_share",
        ),
        (
            json!({"k": 2, "coherence_bound": 2, "eigenvalue_share": 1.5}),
            "params.eigenvalue_share",
        ),
        (
            json!({"k": 2, "coherence_bound": 2, "coherence_search": "yes"}),
            "params.coherence_search",
        ),
    ];
    assert_invalid_fields(&CoherentPower, &c, &target(1.0), cases);
    // Missing k and unknown fields are errors on the parameter object, naming the field.
    assert_object_errors(
        &CoherentPower,
        &c,
        [
            (json!({}), "`k`"),
            (json!(null), "`k`"),
            (json!({"k": 2, "coherence_bound": 2, "p": 3}), "`p`"),
        ],
    );
    // NaN cannot come through JSON, but configure rejects it too (positive-form checks).
    let nan_bound = CoherentPower.configure(params(2, 3, Some(f64::NAN), false), &c, &target(1.0));
    assert_eq!(
        invalid_field(&nan_bound.expect_err("NaN C")),
        "params.coherence_bound"
    );
    let nan_share = CoherentPowerParams {
        eigenvalue_share: Some(f64::NAN),
        ..params(2, 3, Some(2.0), false)
    };
    let e = CoherentPower
        .configure(nan_share, &c, &target(1.0))
        .expect_err("NaN share");
    assert_eq!(invalid_field(&e), "params.eigenvalue_share");
    // The budget and the bounds are validated too.
    for rho in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let e = rejected(&CoherentPower, json!({"k": 2, "coherence_bound": 2}), &c, rho);
        assert_eq!(invalid_field(&e), "rho");
    }
    let bad = ctx(6, None, Neighbours::Entry { u: f64::NAN });
    let e = rejected(&CoherentPower, json!({"k": 2, "coherence_bound": 2}), &bad, 1.0);
    assert_eq!(invalid_field(&e), "bounds.entry_bound");
    let bad = ctx(
        6,
        None,
        Neighbours::ReplaceOne {
            beta: 1.0,
            alpha: 0.0,
        },
    );
    let e = rejected(&CoherentPower, json!({"k": 2, "coherence_bound": 2}), &bad, 1.0);
    assert_eq!(invalid_field(&e), "bounds.row_l1_bound");
}

/// coherent_power supports every kind and relation (the eq.-12 bound u_eff exists for all
/// three), so `prepare` never answers `Unsupported`; the listing describes every parameter.
#[test]
fn info_is_complete_and_every_kind_is_supported() {
    let info = Algorithm::info(&CoherentPower);
    assert_eq!(info.name, "coherent_power");
    assert!(!info.public_only);
    assert!(find("coherent_power").is_some(), "registered");
    assert!(!info.summary.is_empty() && info.source.contains("Fig. 2") && info.source.contains("Remark 4.5"));
    assert!(info.privacy.contains("ρ"));
    for neighbours in [AR, RO, EN] {
        assert!(info.kinds.contains(&neighbours.kind()) && info.relations.contains(&neighbours.relation()));
        let prepared = CoherentPower.prepare(
            json!({"k": 1, "coherence_bound": 3}),
            &ctx(4, None, neighbours),
            &target(1.0),
        );
        assert!(prepared.is_ok(), "{neighbours:?}: {prepared:?}");
    }
    let schema = crate::algorithms::parameters::schema_of::<CoherentPowerParams>();
    assert_eq!(
        crate::algorithms::parameters::property_names(&schema),
        [
            "coherence_bound",
            "coherence_search",
            "eigenvalue_share",
            "iterations",
            "k"
        ]
    );
    // Every listed name is a real parameter: an object using all of them parses.
    let all = json!({"k": 1, "iterations": 3, "coherence_bound": 2, "coherence_search": true, "eigenvalue_share": 0.2});
    assert!(
        CoherentPower
            .prepare(all, &ctx(4, None, EN), &target(1.0))
            .is_ok()
    );
}

// ---- Running. ----

#[test]
fn output_is_orthonormal_with_fixed_signs() {
    let (d, n, k) = (15, 120, 4);
    for neighbours in [AR, RO, EN] {
        let (m, _) = data(neighbours, d, n, 3);
        let c = ctx(d, Some(n), neighbours);
        for rho in [0.01, 1e6] {
            for search in [false, true] {
                let config = CoherentPower
                    .configure(params(k, 6, Some(d as f64), search), &c, &target(rho))
                    .expect("valid");
                let (out, _) = run_audited(&CoherentPower, input_for(&neighbours, &m), &config, &c, 5);
                let out = out.expect("run");
                assert_basis_contract(&out.basis, d, k);
                let values = out.eigenvalues.expect("released estimates");
                assert_eq!(values.len(), k);
                assert!(values.iter().all(|v| v.is_finite()));
            }
        }
    }
}

#[test]
fn converges_to_the_exact_subspace_at_huge_rho() {
    let (d, n, k) = (30, 400, 3);
    for neighbours in [AR, RO, EN] {
        let (m, dense) = data(neighbours, d, n, 7);
        let c = ctx(d, Some(n), neighbours);
        for search in [false, true] {
            let config = CoherentPower
                .configure(params(k, 100, Some(d as f64), search), &c, &target(1e12))
                .expect("valid");
            let (out, _) = run_audited(&CoherentPower, input_for(&neighbours, &m), &config, &c, 9);
            let case = (neighbours, search);
            assert_matches_exact(&out.expect("run"), &dense, k, (1e-4, 1e-5), case);
        }
    }
}

#[test]
fn error_decreases_as_rho_grows() {
    let (d, n, k) = (30, 400, 3);
    let (xt, gram) = data(AR, d, n, 7);
    let exact = exact_top(&gram, k);
    let c = ctx(d, None, AR);
    // The tight β² sensitivity makes ρ = 1 already accurate (sin θ ≈ 0.3); start lower.
    let rhos = [1e-2, 1.0, 1e2, 1e4, 1e6];
    let errors: Vec<f64> = rhos
        .iter()
        .map(|&rho| {
            let config = CoherentPower
                .configure(params(k, 10, Some(d as f64), false), &c, &target(rho))
                .expect("valid");
            mean_sin_theta(&CoherentPower, &xt, &config, &c, &exact, 4)
        })
        .collect();
    assert!(errors.windows(2).all(|w| w[1] < w[0]), "errors {errors:?}");
    assert!(errors[0] > 0.5 && errors[4] < 1e-2, "errors {errors:?}");
}

/// A coherent matrix: top eigenvectors e₁ and e₂ (coherence μ = d), plus a small symmetric
/// perturbation.
fn coherent_matrix(d: usize) -> Matrix {
    let mut a = spiked_matrix(61, d, &[0.0], 0.05);
    a[(0, 0)] += 50.0;
    a[(1, 1)] += 30.0;
    a
}

#[test]
fn coherence_violation_fails_cleanly() {
    let d = 40;
    let a = coherent_matrix(d);
    let c = ctx(d, None, EN);
    let config = CoherentPower
        .configure(params(2, 30, Some(9.0), false), &c, &target(1e6))
        .expect("valid");
    let mut after_noise = 0;
    for seed in 0..20 {
        let (out, audit) = run_audited(&CoherentPower, DataInput::Matrix { a: &a }, &config, &c, seed);
        let Err(RunError::Failed(message)) = out else {
            panic!("seed {seed}: expected a coherence failure, got {out:?}");
        };
        assert!(message.starts_with("coherence bound exceeded"), "{message}");
        assert!(
            message.contains("C = 9 (d = 40") && message.contains("charge stands"),
            "{message}"
        );
        assert!(message.contains("component 1 of 2"), "{message}");
        // Only power-iteration noise was drawn: the failure comes before any estimate.
        assert!(audit.draws.iter().all(|draw| draw.label == RELEASE));
        after_noise += usize::from(!audit.draws.is_empty());
    }
    // x₀ usually passes the check (|z_i| ≤ 3); the first noisy iterate ≈ e₁ does not.
    assert!(
        after_noise >= 10,
        "only {after_noise} of 20 runs drew noise before failing"
    );

    // The search finds C = d = 40 (the only candidate e₁ satisfies) and recovers e₁, e₂.
    let config = CoherentPower
        .configure(params(2, 30, None, true), &c, &target(1e10))
        .expect("valid");
    assert_eq!(config.coherence_candidates.len(), 7);
    let (out, audit) = run_audited(&CoherentPower, DataInput::Matrix { a: &a }, &config, &c, 3);
    let out = out.expect("the search succeeds");
    assert_basis_contract(&out.basis, d, 2);
    let err = sin_theta(&out.basis, &exact_top(&a, 2));
    assert!(err < 1e-3, "sin θ = {err:e}");
    let rounds = audit.draws.iter().filter(|draw| draw.label == RELEASE).count();
    assert!(
        rounds > 2 * 30,
        "failed candidates drew noise too ({rounds} rounds)"
    );
    // A search that stops below d fails with every candidate named.
    let config = CoherentPower
        .configure(params(1, 30, Some(20.0), true), &c, &target(1e6))
        .expect("valid");
    let (out, _) = run_audited(&CoherentPower, DataInput::Matrix { a: &a }, &config, &c, 3);
    let Err(RunError::Failed(message)) = out else {
        panic!("expected a coherence failure, got {out:?}");
    };
    assert!(
        message.contains("every candidate C = 1, 2, 4, 8, 16, 20"),
        "{message}"
    );
}

#[test]
fn progress_is_reported_and_cancellation_stops_the_run() {
    let (d, n) = (10, 50);
    let xt = spiked_records(3, d, n, &[4.0], 0.3, 2.0);
    let c = ctx(d, Some(n), AR);
    let config = CoherentPower
        .configure(params(2, 5, Some(d as f64), false), &c, &target(1.0))
        .expect("valid");
    let input = DataInput::Records { xt: (&xt).into() };
    let (out, calls, _) = run_with_progress(&CoherentPower, input, &config, &c, 1, |_, _| false);
    out.expect("run");
    assert_eq!(calls, (1..=10).map(|l| (l, 10)).collect::<Vec<_>>());

    // With the search: monotone, and ends at m·T·k.
    let config = CoherentPower
        .configure(params(2, 5, None, true), &c, &target(1.0))
        .expect("valid");
    let total = 2 * 5 * config.coherence_candidates.len() as u32;
    let (out, calls, _) = run_with_progress(&CoherentPower, input, &config, &c, 1, |_, _| false);
    out.expect("run");
    assert!(calls.windows(2).all(|w| w[0].0 < w[1].0), "{calls:?}");
    assert!(calls.iter().all(|&(_, t)| t == total));
    assert_eq!(calls.last(), Some(&(total, total)));

    let config = CoherentPower
        .configure(params(2, 5, Some(d as f64), false), &c, &target(1.0))
        .expect("valid");
    assert_cancellation_stops_the_noise(&CoherentPower, input, &config, &c);
}

#[test]
fn mismatched_input_or_stale_config_fails_cleanly() {
    let xt = spiked_records(3, 6, 20, &[4.0], 0.3, 2.0);
    let a = spiked_matrix(3, 6, &[4.0], 0.1);
    let good = config(2, 2, vec![6.0], 1.0, 1.0);
    let cases = [
        (DataInput::Matrix { a: &a }, ctx(6, None, AR), good.clone()),
        (
            DataInput::Records { xt: (&xt).into() },
            ctx(6, None, EN),
            good.clone(),
        ),
        (
            DataInput::Records { xt: (&xt).into() },
            ctx(7, None, AR),
            good.clone(),
        ),
        (DataInput::Matrix { a: &a }, ctx(5, None, EN), good.clone()),
        // Stored configurations that no longer fit.
        (
            DataInput::Records { xt: (&xt).into() },
            ctx(6, None, AR),
            config(7, 2, vec![6.0], 1.0, 1.0),
        ),
        (
            DataInput::Records { xt: (&xt).into() },
            ctx(6, None, AR),
            config(2, 0, vec![6.0], 1.0, 1.0),
        ),
        (
            DataInput::Records { xt: (&xt).into() },
            ctx(6, None, AR),
            config(2, 2, vec![], 1.0, 1.0),
        ),
        (
            DataInput::Records { xt: (&xt).into() },
            ctx(6, None, AR),
            config(2, 2, vec![7.0], 1.0, 1.0),
        ),
        (
            DataInput::Records { xt: (&xt).into() },
            ctx(6, None, AR),
            config(2, 2, vec![0.5], 1.0, 1.0),
        ),
        (
            DataInput::Matrix { a: &a },
            ctx(6, None, EN),
            config(2, 2, vec![6.0], f64::NAN, 1.0),
        ),
        (
            DataInput::Matrix { a: &a },
            ctx(6, None, EN),
            config(2, 2, vec![6.0], 1.0, 0.0),
        ),
        (
            DataInput::Matrix { a: &a },
            ctx(6, None, Neighbours::Entry { u: f64::INFINITY }),
            good.clone(),
        ),
    ];
    for (i, (input, c, config)) in cases.into_iter().enumerate() {
        assert_fails_cleanly(&CoherentPower, input, &config, &c, i);
    }
}

#[test]
fn registry_round_trip_matches_a_direct_run() {
    let (d, n) = (12, 60);
    let xt = spiked_records(5, d, n, &[4.0, 2.0], 0.3, 2.0);
    let c = ctx(d, Some(n), RO);
    let prepared = CoherentPower
        .prepare(
            json!({"k": 2, "iterations": 3, "coherence_bound": 12, "eigenvalue_share": 0.2}),
            &c,
            &target(0.7),
        )
        .expect("valid");
    let p = CoherentPowerParams {
        eigenvalue_share: Some(0.2),
        ..params(2, 3, Some(12.0), false)
    };
    let config = CoherentPower.configure(p, &c, &target(0.7)).expect("valid");
    let (via_registry, direct) =
        registry_and_direct_runs(&CoherentPower, &prepared.config, &config, &xt, &c, 4);
    assert_eq!(via_registry.basis, direct.basis);
    assert_eq!(via_registry.eigenvalues, direct.eigenvalues);
}

#[test]
fn dense_and_factored_records_paths_agree() {
    // d large relative to n: A is never formed; n large relative to d: A is formed once.
    let wide = spiked_records(2, 40, 10, &[3.0], 0.3, 2.0);
    let c = ctx(40, None, AR);
    let op = Deflated::new(DataInput::Records { xt: (&wide).into() }, &c, 50).expect("fits");
    assert!(matches!(op.base, Operator::Records(_)));
    let tall = spiked_records(2, 8, 500, &[3.0], 0.3, 2.0);
    let c = ctx(8, None, AR);
    let op = Deflated::new(DataInput::Records { xt: (&tall).into() }, &c, 50).expect("fits");
    assert!(matches!(op.base, Operator::Dense(_)));
    // Both compute A_i·x = (XᵀX − Σ σ̂ v vᵀ)·x.
    let mut rng = seeded(3);
    let v = thin_qr_q(&gaussian(&mut rng, 8, 2));
    let removed: Vec<(f64, Matrix)> = vec![
        (5.0, v.columns(0, 1).into_owned()),
        (-2.0, v.columns(1, 1).into_owned()),
    ];
    let x = gaussian(&mut rng, 8, 1);
    let gram = gram_t(&tall);
    let explicit =
        &gram - v.column(0) * v.column(0).transpose() * 5.0 + v.column(1) * v.column(1).transpose() * 2.0;
    let want = &explicit * &x;
    for base in [
        Operator::Dense(std::borrow::Cow::Borrowed(&gram)),
        Operator::Records((&tall).into()),
    ] {
        let op = Deflated {
            base,
            removed: removed.clone(),
        };
        assert!((op.apply(&x) - &want).amax() < 1e-10 * want.amax());
    }
}

// ---- Statistical audit of the noise actually drawn. ----

/// Draws normalised by the spec's scale, and the largest relative gap between the recorded
/// scale and the spec's.
#[derive(Default)]
struct AuditReport {
    gaussian: Vec<f64>,
    gaussian_scale_error: f64,
    per_draw: Vec<Result<(), String>>,
    laplace: Vec<f64>,
    laplace_scale_error: f64,
}

/// Runs coherent_power (round noise scaled by `gauss_factor`, Laplace scale by `laplace_factor`;
/// 1 = calibrated) with an audit, and replays Fig. 3/Fig. 2 independently on the dense A with
/// the audited draws: same x₀ stream (a ChaCha20 seeded from the run's generator), the
/// coherence check, x' = A_{i−1}x + g, σ̂ = ‖A_{i−1}v‖ + ℓ, A_i = A_{i−1} − σ̂vvᵀ. The output must
/// be the replay's (so the audited noise is the noise used), and every draw is compared with
/// the spec's scale: sd = s·Δ_C with s = sqrt(m·T·k/(2(1−η)ρ)) ([`spec_round_delta`]), Laplace
/// b = Δ_σ/ε'' with ε'' = sqrt(2ηρ/k) ([`spec_estimate_delta`]). x₀ = z/‖z‖.
#[allow(clippy::too_many_arguments)]
fn audit_run(
    neighbours: Neighbours,
    m: &Matrix,
    dense: &Matrix,
    p: CoherentPowerParams,
    rho: f64,
    seed: u64,
    gauss_factor: f64,
    laplace_factor: f64,
    report: &mut AuditReport,
) {
    let d = dense.nrows();
    let c = ctx(d, None, neighbours);
    let (k, iterations) = (p.k, p.iterations.expect("explicit T"));
    let share = p.eigenvalue_share.unwrap_or(0.1);
    let c_max = p.coherence_bound.unwrap_or(d as f64);
    let search = p.coherence_search;
    let mut config = CoherentPower.configure(p, &c, &target(rho)).expect("valid");
    config.multiplier *= gauss_factor;
    config.eigenvalue_epsilon /= laplace_factor;
    let (out, audit) = run_audited(&CoherentPower, input_for(&neighbours, m), &config, &c, seed);
    let out = out.expect("run");

    // The spec's candidates and scales, computed here.
    let candidates: Vec<f64> = if search {
        let mut v: Vec<f64> = (0..)
            .map(|i| 2.0_f64.powi(i))
            .take_while(|&x| x < c_max)
            .collect();
        v.push(c_max);
        v
    } else {
        vec![c_max]
    };
    let mt = candidates.len() as f64 * f64::from(iterations);
    let s = (mt * k as f64 / (2.0 * (1.0 - share) * rho)).sqrt();
    let b = spec_estimate_delta(&neighbours) / (2.0 * share * rho / k as f64).sqrt();

    let mut starts = ChaCha20Rng::from_rng(&mut seeded(seed));
    let mut draws = audit.draws.iter();
    let mut a = dense.clone();
    let mut vectors = Matrix::zeros(d, k);
    let mut estimates = Vec::new();
    for i in 0..k {
        let mut found = None;
        for &cand in &candidates {
            let z = Matrix::from_fn(d, 1, |_, _| StandardNormal.sample(&mut starts));
            let mut x = &z / z.norm();
            let sd = s * spec_round_delta(&neighbours, cand, d);
            let mut complete = true;
            for _ in 0..iterations {
                if x.amax().powi(2) > cand / d as f64 {
                    complete = false;
                    break;
                }
                let draw = draws.next().expect("a round's draw");
                assert_eq!(
                    (draw.label, draw.distribution, draw.values.len()),
                    (RELEASE, "gaussian", d)
                );
                report.gaussian_scale_error = report
                    .gaussian_scale_error
                    .max(crate::privacy::testing::scale_excess(draw.scale, sd));
                report.per_draw.push(check_gaussian_scale(&draw.values, sd));
                report.gaussian.extend(draw.values.iter().map(|v| v / sd));
                let y = (&a * &x).map(|q| crate::privacy::testing::on_grid(q, draw.grid))
                    + Matrix::from_column_slice(d, 1, &draw.values);
                x = &y / y.norm();
            }
            if complete {
                found = Some(x);
                break;
            }
        }
        let v = found.expect("the replay completes where the run did");
        let draw = draws.next().expect("the estimate's draw");
        assert_eq!(
            (draw.label, draw.distribution, draw.values.len()),
            (EIGENVALUE_RELEASE, "laplace", 1)
        );
        report.laplace_scale_error = report
            .laplace_scale_error
            .max(crate::privacy::testing::scale_excess(draw.scale, b));
        report.laplace.push(draw.values[0] / b);
        let sigma = crate::privacy::testing::on_grid((&a * &v).norm(), draw.grid) + draw.values[0];
        a -= &v * v.transpose() * sigma;
        vectors.set_column(i, &v.column(0));
        estimates.push(sigma);
    }
    assert!(draws.next().is_none(), "the run drew more noise than the replay");
    let mut replayed = thin_qr_q(&vectors);
    fix_signs(&mut replayed);
    let gap = (&out.basis - &replayed).amax();
    assert!(gap < 1e-8, "output differs from the replay by {gap:e}");
    for (got, want) in out.eigenvalues.expect("released").iter().zip(&estimates) {
        assert!(
            (got - want).abs() <= 1e-8 * want.abs().max(1.0),
            "{got} vs {want}"
        );
    }
}

/// One larger run per relation: T·k rounds of d = 100 Gaussian draws each.
fn gaussian_audit(neighbours: Neighbours, search: bool, factor: f64, seed: u64) -> AuditReport {
    let (d, n) = (100, 300);
    let (m, dense) = data(neighbours, d, n, 13);
    let bound = if search { None } else { Some(d as f64) };
    let mut report = AuditReport::default();
    audit_run(
        neighbours,
        &m,
        &dense,
        params(3, 20, bound, search),
        0.8,
        seed,
        factor,
        1.0,
        &mut report,
    );
    report
}

#[test]
fn gaussian_noise_matches_spec() {
    let cases = [(AR, false), (RO, false), (EN, false), (EN, true), (AR, true)];
    for (seed, (neighbours, search)) in (21..).zip(cases) {
        let report = gaussian_audit(neighbours, search, 1.0, seed);
        assert!(
            report.gaussian_scale_error < 1e-6,
            "recorded sd off by {:e}",
            report.gaussian_scale_error
        );
        for (t, r) in report.per_draw.iter().enumerate() {
            assert!(r.is_ok(), "{neighbours:?} round {}: {r:?}", t + 1);
        }
        assert!(report.gaussian.len() >= 6000);
        let pooled = check_gaussian_scale(&report.gaussian, 1.0);
        assert!(pooled.is_ok(), "{neighbours:?} search {search}: {pooled:?}");
    }
}

/// The same check catches round noise 10 % too small.
#[test]
fn under_noised_rounds_fail_the_gaussian_audit() {
    let cases = [(AR, false), (RO, false), (EN, false), (EN, true)];
    for (seed, (neighbours, search)) in (31..).zip(cases) {
        let report = gaussian_audit(neighbours, search, 0.9, seed);
        assert!(
            check_gaussian_scale(&report.gaussian, 1.0).is_err(),
            "{neighbours:?} search {search}: under-noising went unnoticed"
        );
    }
}

/// Many small runs over all three relations: k estimates each, 3 000 Laplace draws in all.
fn laplace_audit(factor: f64) -> AuditReport {
    // C = d: a unit x₀ (and every unit iterate) passes the check.
    let (d, n, k) = (30, 60, 6);
    let mut report = AuditReport::default();
    for run in 0..500_u64 {
        let neighbours = [AR, RO, EN][(run % 3) as usize];
        let (m, dense) = data(neighbours, d, n, 100 + run % 7);
        let p = CoherentPowerParams {
            eigenvalue_share: Some(0.3),
            ..params(k, 2, Some(d as f64), false)
        };
        audit_run(neighbours, &m, &dense, p, 2.0, run, 1.0, factor, &mut report);
    }
    report
}

#[test]
fn laplace_noise_matches_spec() {
    let report = laplace_audit(1.0);
    assert_eq!(report.laplace.len(), 3000);
    let result = check_laplace_scale(&report.laplace, 1.0);
    assert!(result.is_ok(), "{result:?}");
    assert!(
        report.laplace_scale_error < 1e-6,
        "recorded scale off by {:e}",
        report.laplace_scale_error
    );
}

/// The same check catches singular-value estimates with 1.2× too little noise (b/1.2:
/// z ≈ (1/1.2 − 1)·√3000 = −9.1, threshold 5).
#[test]
fn under_noised_estimates_fail_the_laplace_audit() {
    let report = laplace_audit(1.0 / 1.2);
    assert!(
        check_laplace_scale(&report.laplace, 1.0).is_err(),
        "under-noising went unnoticed"
    );
}

/// The unit start: at small d and C = d the coherence check no longer fails by chance (it did
/// with Fig. 2's N(0, 1/d)^d start, whose squared entries exceed 1 = C/d with probability
/// about d·P(|Z| > √d), 5 % at d = 5), on records and matrices, at a generous budget.
#[test]
fn unit_start_never_fails_the_check_at_small_d() {
    // The old start would have failed: count its violations on the same stream of z's.
    let mut rng = seeded(90);
    let old_failures = (0..2000)
        .filter(|_| {
            let z = Matrix::from_fn(5, 1, |_, _| StandardNormal.sample(&mut rng));
            (&z / 5f64.sqrt()).amax().powi(2) > 1.0
        })
        .count();
    assert!(old_failures > 20, "{old_failures}");
    for d in 5..=10 {
        for neighbours in [AR, RO, EN] {
            let (m, _) = data(neighbours, d, 40, 200 + d as u64);
            let c = ctx(d, Some(40), neighbours);
            let config = CoherentPower
                .configure(params(2, 10, Some(d as f64), false), &c, &target(1e4))
                .expect("valid");
            for seed in 0..40 {
                let (out, _) = run_audited(&CoherentPower, input_for(&neighbours, &m), &config, &c, seed);
                let out = out.unwrap_or_else(|e| panic!("d = {d}, {neighbours:?}, seed {seed}: {e:?}"));
                assert_basis_contract(&out.basis, d, 2);
            }
        }
    }
}

#[test]
fn the_default_coherence_bound_is_d() {
    let c = ctx(6, Some(10), RO);
    let prepared = CoherentPower
        .prepare(json!({"k": 2}), &c, &target(1.0))
        .expect("defaults work");
    assert_eq!(prepared.config["coherence_candidates"], json!([6.0]));
}
