//! Issue 10's bar for defaults: on a public dataset (n 20 000, d 30, k 3, clear gap) with a huge
//! budget, every algorithm of the registry captures ≥ 0.95 of the top-k energy with nothing
//! but `k` given; `exact` runs with no privacy target and `k_dp_pca` gets (ρ 200, δ 1e-5).
//!
//! The one exception is `cape_agn`, whose `model` is a modelling assumption with no neutral
//! default: it gets `model: "mog"` with `sigma2: 0` (a mixture of point masses, i.e. moments of
//! the raw data), and nothing else. Its basis spans the recovered components a_i = λ_i·U·D^{1/2}·v_i,
//! which lie in the top-k eigenspace of the noisy second moment, so it must capture the energy
//! too, even though sign-symmetric spiked data has no third-moment structure to decompose.

use serde_json::{Value, json};

use super::testing::{
    least_params, public_records_ctx, registry_target, run_prepared_audited, sign_spiked_records,
    spiked_records,
};
use super::{DataInput, find, registry};
use crate::dataset::DataContext;
use crate::linalg::subspace::captured_energy;
use crate::linalg::{Matrix, gram_t};
use crate::privacy::{Delta, Epsilon, PrivacyTarget};

#[test]
fn every_algorithm_captures_95_percent_at_defaults_with_a_huge_budget() {
    let (d, n, k, beta) = (30, 20_000, 3, 6.0);
    let xt = sign_spiked_records(11, (d, n), &[10.0, 6.0, 3.0], 0.3, beta);
    let sigma = gram_t(&xt) / n as f64;
    let ctx = public_records_ctx(d, n, beta);
    for algorithm in registry() {
        let name = algorithm.info().name;
        // ρ 1e6: what the service gives a public job without a privacy target (http::jobs).
        let target = registry_target(name, 1e6);
        let prepared = algorithm
            .prepare(least_params(name, k), &ctx, &target)
            .unwrap_or_else(|e| panic!("{name} refuses its defaults: {e}"));
        let (out, _) = run_prepared_audited(
            *algorithm,
            &prepared.config,
            DataInput::Records { xt: (&xt).into() },
            &ctx,
            5,
        );
        let out = out.unwrap_or_else(|e| panic!("{name} fails at its defaults: {e}"));
        let captured = captured_energy(&out.basis, &sigma);
        assert!(captured >= 0.95, "{name}: captured {captured}");
    }
}

/// Issue 21's Gaussian-amplitude setting: n 20 000, d 30, k 3, variances 16, 9, 4 against 0.09,
/// Gaussian amplitudes, β = the largest row norm (the typical row is about 0.3 of it).
fn gaussian_amplitude_data() -> (Matrix, Matrix, f64) {
    let (d, n) = (30, 20_000);
    let xt = spiked_records(21, d, n, &[16.0, 9.0, 4.0], 0.3, f64::INFINITY);
    let beta = xt.column_iter().map(|c| c.norm()).fold(0.0, f64::max) * (1.0 + 1e-12);
    let sigma = gram_t(&xt) / n as f64;
    (xt, sigma, beta)
}

/// Mean captured energy of `name` with only `k` (and `extra`) over `seeds`, at `target`.
fn mean_captured(
    name: &str,
    extra: &Value,
    public: bool,
    target: &PrivacyTarget,
    seeds: std::ops::Range<u64>,
) -> f64 {
    let (xt, sigma, beta) = gaussian_amplitude_data();
    let (d, n) = (xt.nrows(), xt.ncols());
    let ctx = if public {
        public_records_ctx(d, n, beta)
    } else {
        DataContext {
            public: false,
            ..public_records_ctx(d, n, beta)
        }
    };
    let algorithm = find(name).expect("registered");
    let mut params = json!({ "k": 3 });
    if let (Value::Object(p), Value::Object(e)) = (&mut params, extra) {
        p.extend(e.clone());
    }
    let prepared = algorithm
        .prepare(params, &ctx, target)
        .unwrap_or_else(|e| panic!("{name} refuses: {e}"));
    let runs = seeds.clone().count() as f64;
    seeds
        .map(|seed| {
            let (out, _) = run_prepared_audited(
                algorithm,
                &prepared.config,
                DataInput::Records { xt: (&xt).into() },
                &ctx,
                seed,
            );
            captured_energy(&out.expect("runs").basis, &sigma)
        })
        .sum::<f64>()
        / runs
}

fn epsilon_target(epsilon: f64) -> PrivacyTarget {
    PrivacyTarget::from_epsilon_delta(
        Epsilon::new(epsilon).expect("valid"),
        Delta::new(1e-5).expect("valid"),
    )
}

// Issue 21's goals on Gaussian-amplitude rows, at the defaults (only k; `clip` defaults to
// "auto"). Measured when written (3 seeds): k_dp_pca 0.99 at (ε 20, δ 1e-5) public (0.56 with
// clip "none"), dp_oja 0.996 at ρ 10 (0.886 with "none"). k_dp_pca at (ε 10, δ 1e-5) private
// captured 0.76–0.79 while its default batch left T = 1 step per round; with at least 3–4 steps
// (k_dp_pca::MIN_STEPS; docs/k_dp_pca.md "Default batch size") it captures 0.96 on seeds 0–3
// (0.98 over seeds 0–19) and 0.69 with clip "none".

#[test]
fn k_dp_pca_defaults_on_gaussian_amplitude_rows_public() {
    let captured = mean_captured("k_dp_pca", &json!({}), true, &epsilon_target(20.0), 0..3);
    assert!(captured >= 0.95, "{captured}");
}

#[test]
fn k_dp_pca_defaults_on_gaussian_amplitude_rows_private() {
    let captured = mean_captured("k_dp_pca", &json!({}), false, &epsilon_target(10.0), 0..4);
    let unclipped = mean_captured(
        "k_dp_pca",
        &json!({"clip": "none"}),
        false,
        &epsilon_target(10.0),
        0..4,
    );
    assert!(captured >= 0.9, "{captured}");
    assert!(captured >= unclipped + 0.2, "{captured} vs {unclipped} unclipped");
}

#[test]
fn dp_oja_defaults_on_gaussian_amplitude_rows() {
    let rho10 = PrivacyTarget {
        public_default: false,
        rho: 10.0,
        delta: None,
        epsilon: None,
    };
    let captured = mean_captured("dp_oja", &json!({}), false, &rho10, 0..3);
    assert!(captured >= 0.97, "{captured}");
}
