//! Tests of `analyze_gauss`: cost and calibration, parameters, convergence, the run contract,
//! and an audit of the noise matrix against an independent replay of the eigen-decomposition.

use serde_json::json;

use super::*;
use crate::algorithms::testing::{
    AR, RO, assert_basis_contract, assert_errors_fall, assert_fails_cleanly, assert_invalid_fields,
    assert_object_errors, assert_run_fails, ctx, exact_top, input_and_dense, invalid_field, k_out_of_range,
    on_every_relation, rejected, ro, run_audited, spiked_matrix, spiked_records, target,
};
use crate::algorithms::{DataInput, DynAlgorithm};
use crate::linalg::subspace::sin_theta;
use crate::linalg::{Matrix, sym_eig};
use crate::privacy::testing::check_gaussian_scale;

/// A matrix dataset with u = 3 (the shared `EN` has u = 1).
const EN: Neighbours = Neighbours::Entry { u: 3.0 };

#[test]
fn cost_is_delta_squared_over_two_sigma_squared() {
    let cfg = |noise_sd| AnalyzeGaussConfig { k: 1, noise_sd };
    // add_remove, β = 2: Δ = 4, σ = 1 → 16/2 = 8.
    assert_eq!(
        AnalyzeGauss.cost(&cfg(1.0), &ctx(5, None, AR)),
        Cost::gaussian_zcdp(8.0)
    );
    // replace_one, β = 1: Δ = √2, σ = 0.5 → 2/(2·0.25) = 4.
    let ro = ctx(5, None, ro(1.0, 2.0));
    assert!((AnalyzeGauss.cost(&cfg(0.5), &ro).rho - 4.0).abs() < 1e-14);
    // matrix, u = 3: Δ = 3, σ = 3 → 9/18 = 0.5.
    assert_eq!(
        AnalyzeGauss.cost(&cfg(3.0), &ctx(5, None, EN)),
        Cost::gaussian_zcdp(0.5)
    );
}

#[test]
fn configure_then_cost_returns_the_target() {
    for neighbours in [AR, RO, EN] {
        let c = ctx(10, None, neighbours);
        for rho in [1e-8, 1e-3, 0.1, 1.0, 3.7, 1e6] {
            let config = AnalyzeGauss
                .configure(AnalyzeGaussParams { k: 2 }, &c, &target(rho))
                .expect("valid");
            let cost = AnalyzeGauss.cost(&config, &c);
            assert!(
                cost.rho <= rho && (rho - cost.rho) / rho <= 1e-12,
                "{} vs {rho}",
                cost.rho
            );
            let sd = sensitivity(&neighbours) / (2.0 * rho).sqrt();
            assert!((config.noise_sd - sd).abs() / sd <= 1e-12);
        }
    }
}

#[test]
fn invalid_parameters_name_their_field() {
    let c = ctx(6, None, AR);
    assert_invalid_fields(
        &AnalyzeGauss,
        &c,
        &target(1.0),
        k_out_of_range(6)
            .into_iter()
            .chain([(json!({"k": "two"}), "params.k"), (json!({"k": -2}), "params.k")]),
    );
    assert_object_errors(
        &AnalyzeGauss,
        &c,
        [(json!({}), "`k`"), (json!({"k": 2, "p": 4}), "`p`")],
    );
    assert_eq!(
        invalid_field(&rejected(&AnalyzeGauss, json!({"k": 2}), &c, f64::NAN)),
        "rho"
    );
    let bad = ctx(6, None, Neighbours::Entry { u: 0.0 });
    assert_eq!(
        invalid_field(&rejected(&AnalyzeGauss, json!({"k": 2}), &bad, 1.0)),
        "bounds.entry_bound"
    );
}

/// analyze_gauss supports every kind and relation, so `prepare` never answers `Unsupported`.
/// (`clip: "none"`: the noise checked is the release's own, not the default clip's search.)
#[test]
fn every_kind_and_relation_is_supported() {
    for neighbours in [AR, RO, EN] {
        let params = json!({"k": 2, "clip": "none"});
        let prepared = AnalyzeGauss.prepare(params, &ctx(4, None, neighbours), &target(0.5));
        let prepared = prepared.expect("supported");
        assert!((prepared.cost.rho - 0.5).abs() <= 1e-12);
        let noise = &prepared.noise[0];
        assert_eq!(
            (noise.count, noise.sensitivity),
            (1, Some(sensitivity(&neighbours)))
        );
        assert!(
            (noise.multiplier - 1.0).abs() < 1e-12,
            "σ/Δ = 1/sqrt(2ρ) = 1 at ρ = 0.5"
        );
    }
}

#[test]
fn output_is_orthonormal_sorted_and_converges() {
    let (d, n, k) = (20, 200, 3);
    on_every_relation((31, 32), d, n, |neighbours, input, dense, c| {
        let mut errors = Vec::new();
        for rho in [1e-3, 1e-1, 10.0, 1e3, 1e12] {
            let config = AnalyzeGauss
                .configure(AnalyzeGaussParams { k }, c, &target(rho))
                .expect("valid");
            let (out, _) = run_audited(&AnalyzeGauss, input, &config, c, 33);
            let out = out.expect("run");
            assert_basis_contract(&out.basis, d, k);
            let values = out.eigenvalues.expect("released");
            assert!(values.windows(2).all(|w| w[0] >= w[1]), "{values:?}");
            errors.push(sin_theta(&out.basis, &exact_top(dense, k)));
        }
        assert_errors_fall(&errors, 0.5, 1e-3, neighbours);
    });
}

/// Audits the noise against σ = Δ/sqrt(2ρ) computed here from the spec (Δ = β², √2β², u),
/// and checks that the output is exactly the eigen-decomposition of A + E for the audited E.
fn audit_noise(neighbours: Neighbours, factor: f64) -> Result<(), String> {
    let (d, n, k, rho) = (80, 150, 4, 0.3_f64);
    let xt = spiked_records(41, d, n, &[6.0, 4.0], 0.3, 2.0);
    let a = spiked_matrix(42, d, &[40.0, 30.0], 0.3);
    let (input, dense) = input_and_dense(&neighbours, &xt, &a);
    let spec_delta = match neighbours {
        Neighbours::AddRemove { beta, .. } => beta * beta,
        Neighbours::ReplaceOne { beta, .. } => 2.0_f64.sqrt() * beta * beta,
        Neighbours::Entry { u } => u,
    };
    let spec_sd = spec_delta / (2.0 * rho).sqrt();
    let c = ctx(d, None, neighbours);
    let mut config = AnalyzeGauss
        .configure(AnalyzeGaussParams { k }, &c, &target(rho))
        .expect("valid");
    config.noise_sd *= factor;
    let (out, audit) = run_audited(&AnalyzeGauss, input, &config, &c, 43);
    let out = out.expect("run");
    assert_eq!(audit.draws.len(), 1);
    let draw = &audit.draws[0];
    assert_eq!(
        (draw.label, draw.distribution, draw.values.len()),
        (RELEASE, "gaussian", d * (d + 1) / 2)
    );
    // Rebuild E from the audited upper triangle (column by column) and redo the maths.
    let mut e = Matrix::zeros(d, d);
    let mut values = draw.values.iter();
    for j in 0..d {
        for i in 0..=j {
            let v = *values.next().expect("enough draws");
            e[(i, j)] = v;
            e[(j, i)] = v;
        }
    }
    let eig = sym_eig(&(dense.map(|q| crate::privacy::testing::on_grid(q, draw.grid)) + e));
    assert!(sin_theta(&out.basis, &eig.vectors.columns(0, k).into_owned()) < 1e-8);
    for (got, want) in out.eigenvalues.expect("released").iter().zip(eig.values.iter()) {
        assert!((got - want).abs() <= 1e-9 * want.abs().max(1.0));
    }
    if factor == 1.0 {
        assert!(
            crate::privacy::testing::is_widened(draw.scale, spec_sd),
            "recorded sd {} vs spec {spec_sd}",
            draw.scale
        );
    }
    check_gaussian_scale(&draw.values, spec_sd)
}

#[test]
fn noise_matches_spec() {
    for neighbours in [AR, RO, EN] {
        let result = audit_noise(neighbours, 1.0);
        assert!(result.is_ok(), "{neighbours:?}: {result:?}");
    }
}

/// The same check catches a mechanism that adds 10 % too little noise.
#[test]
fn under_noised_run_fails_the_audit() {
    for neighbours in [AR, RO, EN] {
        assert!(
            audit_noise(neighbours, 0.9).is_err(),
            "{neighbours:?}: under-noising went unnoticed"
        );
    }
}

#[test]
fn mismatched_input_fails_cleanly() {
    let xt = spiked_records(3, 6, 20, &[4.0], 0.3, 2.0);
    let config = AnalyzeGaussConfig { k: 2, noise_sd: 1.0 };
    for c in [ctx(6, None, EN), ctx(5, None, AR)] {
        assert_fails_cleanly(
            &AnalyzeGauss,
            DataInput::Records { xt: (&xt).into() },
            &config,
            &c,
            c,
        );
    }
    let bad = AnalyzeGaussConfig { k: 7, noise_sd: 1.0 };
    assert_run_fails(
        &AnalyzeGauss,
        DataInput::Records { xt: (&xt).into() },
        &bad,
        &ctx(6, None, AR),
    );
}

#[test]
fn info_describes_the_algorithm() {
    let info = AnalyzeGauss::INFO;
    assert_eq!(info.name, "analyze_gauss");
    assert!(!info.public_only && info.source.contains("Dwork"));
    let schema = crate::algorithms::parameters::schema_of::<AnalyzeGaussParams>();
    assert_eq!(crate::algorithms::parameters::property_names(&schema), ["k"]);
    assert_eq!(schema["required"], serde_json::json!(["k"]));
}
