//! Tests of `cape_pca` (simulate mode): cost, unequal shards, validation, the aggregate's noise
//! against the calibration (and an under-noised twin), dropouts, and utility against the central
//! `analyze_gauss` at the same ρ and against exact PCA as ρ grows.

use serde_json::json;

use super::*;
use crate::algorithms::analyze_gauss::{AnalyzeGauss, AnalyzeGaussParams};
use crate::algorithms::cape_noise::tests::{Derived, TWIN};
use crate::algorithms::testing::{
    AR, EN, RO, assert_basis_contract, ctx, exact_top, invalid_field, run_on_records, spiked_records, target,
    with_audited_env,
};
use crate::linalg::subspace::{captured_energy, sin_theta};
use crate::privacy::testing::check_gaussian_scale;

fn configured(value: serde_json::Value, c: &DataContext, rho: f64) -> CapePcaConfig {
    let p: CapePcaParams = serde_json::from_value(value).expect("valid params");
    CapePca
        .configure(p, c, &target(rho))
        .expect("valid configuration")
}

fn refused(value: serde_json::Value, c: &DataContext) -> ConfigError {
    let p: CapePcaParams = serde_json::from_value(value).expect("parses");
    CapePca.configure(p, c, &target(0.5)).expect_err("refused")
}

#[test]
fn cost_equals_the_target_under_both_relations() {
    for neighbours in [RO, AR] {
        let c = ctx(20, Some(7000), neighbours);
        for (rho, sites) in [(0.002, 3), (0.5, 2), (10.0, 17)] {
            let cfg = configured(json!({"k": 2, "sites": sites}), &c, rho);
            let cost = CapePca.cost(&cfg, &c);
            assert!(
                cost.rho <= rho && cost.rho >= rho * (1.0 - 1e-9),
                "{cost:?} vs {rho}"
            );
            assert_eq!(cost.delta, 0.0);
            assert_eq!(cfg.noise.sensitivity, sensitivity(&neighbours));
        }
    }
}

#[test]
fn unequal_shards_follow_the_shares() {
    let ranges = shard_ranges(7000, 3, Some(&[1.0, 2.0, 4.0]));
    let sizes: Vec<usize> = ranges.iter().map(|r| r.len()).collect();
    assert_eq!(sizes, vec![1000, 2000, 4000]);
    assert_eq!(ranges[2].end, 7000);
    // Tiny n: the shares decide, whatever n is; shards may be empty, every record is placed.
    for n in 0..5 {
        for shares in [None, Some(&[1.0, 1e6, 1.0][..]), Some(&[1.0, 2.0, 4.0][..])] {
            let ranges = shard_ranges(n, 3, shares);
            assert_eq!(ranges.len(), 3);
            assert_eq!(ranges.iter().map(|r| r.len()).sum::<usize>(), n, "n = {n}");
            assert!(ranges.windows(2).all(|w| w[0].end == w[1].start));
        }
    }
    let sizes: Vec<usize> = shard_ranges(3, 3, Some(&[1.0, 1e6, 1.0]))
        .iter()
        .map(|r| r.len())
        .collect();
    assert_eq!(sizes, vec![0, 3, 0]);
}

/// n is private under add_remove: a dataset with fewer records than sites (or none) runs like
/// any other, empty sites sending noise only, with or without shares. Before, the run failed
/// with an error naming the comparison of n with S (or panicked splitting by shares).
#[test]
fn fewer_records_than_sites_run_like_any_other_under_add_remove() {
    let d = 5;
    let c = ctx(d, None, AR);
    for n in [0usize, 1, 2, 3, 40] {
        let xt = spiked_records(9, d, n.max(1), &[3.0], 1.0, 1.0)
            .columns(0, n)
            .into_owned();
        for params in [
            json!({"k": 1, "sites": 3}),
            json!({"k": 1, "sites": 4, "site_shares": [1, 2, 3, 4]}),
        ] {
            let cfg = configured(params.clone(), &c, 0.5);
            let (out, _) = run_on_records(&CapePca, &xt, &cfg, &c, 7);
            let out = out.unwrap_or_else(|e| panic!("n = {n}, {params}: {e}"));
            assert_basis_contract(&out.basis, d, 1);
        }
    }
}

#[test]
fn bad_parameters_name_their_field() {
    let c = ctx(10, Some(100), RO);
    assert_eq!(
        invalid_field(&refused(json!({"k": 2, "sites": 1}), &c)),
        "params.sites"
    );
    assert_eq!(
        invalid_field(&refused(json!({"k": 2, "sites": 65}), &c)),
        "params.sites"
    );
    assert_eq!(invalid_field(&refused(json!({"k": 11}), &c)), "params.k");
    assert_eq!(
        invalid_field(&refused(json!({"k": 2, "sites": 3, "site_shares": [1, 2]}), &c)),
        "params.site_shares"
    );
    assert_eq!(
        invalid_field(&refused(json!({"k": 2, "sites": 2, "site_shares": [1, -2]}), &c)),
        "params.site_shares"
    );
    assert_eq!(
        invalid_field(&refused(json!({"k": 2, "dropouts": [4]}), &c)),
        "params.dropouts"
    );
    assert_eq!(
        invalid_field(&refused(json!({"k": 2, "dropouts": [1, 2, 3]}), &c)),
        "params.dropouts"
    );
    assert_eq!(
        invalid_field(&refused(json!({"k": 2, "pair_ratio": 0}), &c)),
        "params.pair_ratio"
    );
    let small = ctx(10, Some(2), RO);
    assert_eq!(
        invalid_field(&refused(json!({"k": 2, "sites": 3}), &small)),
        "params.sites"
    );
    let matrix = ctx(10, None, EN);
    assert!(matches!(
        refused(json!({"k": 2}), &matrix),
        ConfigError::Unsupported(_)
    ));
}

/// The aggregate minus the exact Σ X_sᵀX_s, per packed entry, for a run whose sites' own and
/// pair noise are scaled by `factor`; and the sd a test derives from public inputs alone (Δ = √2·β² for
/// replace_one, ρ = 0.3, S = 4, κ = 1, len = d(d+1)/2).
fn aggregate_noise(factor: f64, dropouts: &[u32]) -> (Vec<f64>, f64) {
    // d = 50: 1 275 packed entries, so own noise 1.2× too small is z ≈ −9 on the aggregate.
    let (d, n) = (50, 600);
    let c = ctx(d, Some(n), RO);
    let xt = spiked_records(3, d, n, &[4.0, 2.0], 1.0, 2.0);
    let mut cfg = configured(json!({"k": 2, "sites": 4, "dropouts": dropouts}), &c, 0.3);
    let beta = match RO {
        crate::dataset::Neighbours::ReplaceOne { beta, .. } => beta,
        _ => unreachable!(),
    };
    let public = Derived::new(2f64.sqrt() * beta * beta, 0.3, 4, 1.0, d * (d + 1) / 2);
    let expected = public.aggregate_sd(4 - dropouts.len(), dropouts.len());
    cfg.noise.own_sd *= factor;
    cfg.noise.pair_sd *= factor;
    let ((sum, _), _) = with_audited_env(11, |env| simulate_aggregate(&xt, &cfg, env).expect("runs"));
    // The survivors' exact statistic.
    let ranges = shard_ranges(n, 4, None);
    let mut exact = vec![0.0; d * (d + 1) / 2];
    for (s, r) in (1..=4u32).zip(ranges) {
        if dropouts.contains(&s) {
            continue;
        }
        let part = site_statistic(&xt.columns(r.start, r.len()).into_owned());
        for (e, p) in exact.iter_mut().zip(part) {
            *e += p;
        }
    }
    (sum.iter().zip(&exact).map(|(a, b)| a - b).collect(), expected)
}

#[test]
fn the_aggregate_carries_the_publicly_derived_noise() {
    let (noise, sd) = aggregate_noise(1.0, &[]);
    check_gaussian_scale(&noise, sd).expect("aggregate noise at the derived scale");
}

#[test]
fn under_noised_sites_fail_the_noise_check() {
    let (noise, sd) = aggregate_noise(TWIN, &[]);
    assert!(
        check_gaussian_scale(&noise, sd).is_err(),
        "under-noising by 1.2× went unnoticed"
    );
}

#[test]
fn a_dropout_is_reported_and_leaves_the_reported_noise() {
    let (noise, sd) = aggregate_noise(1.0, &[2]);
    check_gaussian_scale(&noise, sd).expect("dropout noise as reported");
    let (noise, sd) = aggregate_noise(TWIN, &[2]);
    assert!(check_gaussian_scale(&noise, sd).is_err(), "dropout twin passed");
    let (d, n) = (8, 300);
    let c = ctx(d, Some(n), RO);
    let xt = spiked_records(5, d, n, &[4.0], 1.0, 2.0);
    let cfg = configured(json!({"k": 1, "sites": 3, "dropouts": [3]}), &c, 1.0);
    let ((_, report), _) = with_audited_env(1, |env| simulate(&xt, &cfg, env).expect("runs"));
    assert!(report.fallback && report.dropped == vec![3] && report.survivors == vec![1, 2]);
    assert!(report.noise_sd > report.pooled_noise_sd);
}

#[test]
fn matches_exact_pca_as_rho_grows_and_returns_an_orthonormal_basis() {
    let (d, n, k) = (20, 2000, 3);
    let c = ctx(d, Some(n), RO);
    let xt = spiked_records(21, d, n, &[5.0, 4.0, 3.0], 1.0, 2.0);
    let exact = exact_top(&crate::linalg::gram_t(&xt), k);
    let mut last = f64::INFINITY;
    for rho in [0.05, 5.0, 5e4] {
        let cfg = configured(json!({"k": k, "sites": 3, "site_shares": [1, 2, 4]}), &c, rho);
        let (out, _) = run_on_records(&CapePca, &xt, &cfg, &c, 3);
        let out = out.expect("runs");
        assert_basis_contract(&out.basis, d, k);
        let sin = sin_theta(&out.basis, &exact);
        assert!(sin <= last + 0.05, "ρ {rho}: sin θ {sin} after {last}");
        last = sin;
    }
    assert!(last < 1e-3, "huge ρ: sin θ {last}");
}

#[test]
fn utility_is_close_to_central_analyze_gauss_at_the_same_rho() {
    // The judged setting's shape: d = 20, k = 2, shards 1000/2000/4000, ρ = 0.002.
    let (d, n, k, rho) = (20, 7000, 2, 0.002);
    let c = ctx(d, Some(n), RO);
    let runs = 8;
    let (mut cape_sum, mut central_sum) = (0.0, 0.0);
    for seed in 0..runs {
        let xt = spiked_records(100 + seed, d, n, &[3.0, 2.0], 0.5, 2.0);
        let sigma = crate::linalg::gram_t(&xt);
        let cfg = configured(json!({"k": k, "sites": 3, "site_shares": [1, 2, 4]}), &c, rho);
        let (out, _) = run_on_records(&CapePca, &xt, &cfg, &c, seed);
        cape_sum += captured_energy(&out.expect("cape runs").basis, &sigma);
        let central = AnalyzeGauss
            .configure(AnalyzeGaussParams { k }, &c, &target(rho))
            .expect("central");
        let (out, _) = run_on_records(&AnalyzeGauss, &xt, &central, &c, seed + 1000);
        central_sum += captured_energy(&out.expect("central runs").basis, &sigma);
    }
    let (cape_mean, central_mean) = (cape_sum / runs as f64, central_sum / runs as f64);
    eprintln!("captured energy: cape_pca {cape_mean:.4}, analyze_gauss {central_mean:.4}");
    assert!(
        (cape_mean - central_mean).abs() <= 0.05,
        "cape {cape_mean:.3} vs analyze_gauss {central_mean:.3}"
    );
}

/// Simulated dropouts move with the shard boundaries, which move with a private n under
/// add_remove: refused there (by the public relation), allowed under replace_one.
#[test]
fn simulated_dropouts_need_replace_one() {
    let params = json!({"k": 1, "sites": 3, "dropouts": [2]});
    assert_eq!(
        invalid_field(&refused(params.clone(), &ctx(5, None, AR))),
        "params.dropouts"
    );
    configured(params, &ctx(5, Some(40), RO), 0.5);
}
