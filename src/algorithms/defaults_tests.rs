//! Issue 10's bar for defaults: on a public dataset (n 20 000, d 30, k 3, clear gap) with a huge
//! budget, every algorithm of the registry captures ≥ 0.95 of the top-k energy with nothing
//! but `k` given; `exact` runs with no privacy target and `k_dp_pca` gets (ρ 200, δ 1e-5).
//!
//! The one exception is `cape_agn`, whose `model` is a modelling assumption with no neutral
//! default: it gets `model: "mog"` with `sigma2: 0` (a mixture of point masses, i.e. moments of
//! the raw data), and nothing else. Its basis spans the recovered components a_i = λ_i·U·D^{1/2}·v_i,
//! which lie in the top-k eigenspace of the noisy second moment, so it must capture the energy
//! too, even though sign-symmetric spiked data has no third-moment structure to decompose.

use super::testing::{
    least_params, public_records_ctx, registry_target, run_prepared_audited, sign_spiked_records,
};
use super::{DataInput, registry};
use crate::linalg::gram_t;
use crate::linalg::subspace::captured_energy;

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
