use serde_json::json;

use super::*;
use crate::algorithms::DynAlgorithm;
use crate::algorithms::noisy_power::NoisyPower;
use crate::algorithms::testing::{
    ar, assert_basis_contract, assert_invalid_fields, ctx, exact_top, invalid_field, rejected, ro,
    run_prepared_audited, spiked_records, target, with_audited_env,
};
use crate::linalg::gram_t;
use crate::linalg::subspace::sin_theta;
use crate::privacy::testing::check_gaussian_scale;

const RO: Neighbours = ro(1.0, 100.0);
const AR: Neighbours = ar(1.0, 100.0);

fn private(share: f64) -> CenterRequest {
    CenterRequest::Private { share }
}

#[test]
fn replace_one_noise_matches_hand_worked_numbers() {
    // ρ_job = 1, share 0.1, β = 1: Δ = 2, s = 2/sqrt(2·0.1) = 2/sqrt(0.2).
    let config = configure(private(0.1), &ctx(5, Some(10), RO), 1.0).unwrap();
    let CenterConfig::Private {
        rho,
        sum_sensitivity,
        noise_sd,
        count_noise_sd,
    } = config.clone()
    else {
        panic!("private config expected")
    };
    assert_eq!(sum_sensitivity, 2.0);
    assert!((noise_sd - 2.0 / 0.2_f64.sqrt()).abs() <= 1e-12 * noise_sd);
    assert_eq!(count_noise_sd, None);
    assert!((0.1 * (1.0 - 1e-12)..=0.1).contains(&rho), "{rho}");
    assert_eq!(config.cost().rho, rho);
    assert_eq!(config.cost().delta, 0.0);
}

#[test]
fn add_remove_splits_the_share_between_sum_and_count() {
    // ρ_c = 0.1 split in halves: s_S = β/sqrt(2·0.05) = 1/sqrt(0.1) with β = 1, s_n the same.
    let config = configure(private(0.1), &ctx(5, None, AR), 1.0).unwrap();
    let CenterConfig::Private {
        sum_sensitivity,
        noise_sd,
        count_noise_sd: Some(count_sd),
        ..
    } = config.clone()
    else {
        panic!("private config with a count expected")
    };
    assert_eq!(sum_sensitivity, 1.0);
    let expected = 1.0 / 0.1_f64.sqrt();
    assert!((noise_sd - expected).abs() <= 1e-12 * expected);
    assert!((count_sd - expected).abs() <= 1e-12 * expected);
    let cost = config.cost().rho;
    assert!((0.1 * (1.0 - 1e-12)..=0.1).contains(&cost), "{cost}");
    // A given centre is free.
    assert_eq!(
        configure(CenterRequest::Given(vec![0.0; 5]), &ctx(5, None, AR), 1.0)
            .unwrap()
            .cost(),
        Cost::ZERO
    );
}

#[test]
fn prepare_composes_the_centre_with_the_algorithm_to_the_target() {
    for (neighbours, n) in [(RO, Some(100)), (AR, None)] {
        for rho in [1e-3, 0.5, 1.0, 7.3, 1e4] {
            let c = ctx(6, n, neighbours);
            let p = NoisyPower
                .prepare(
                    json!({"k": 2, "center": "private", "center_share": 0.25}),
                    &c,
                    &target(rho),
                )
                .unwrap();
            assert!(p.cost.rho <= rho, "{} > {rho}", p.cost.rho);
            assert!(p.cost.rho >= rho * (1.0 - 1e-9), "{} ≪ {rho}", p.cost.rho);
            assert_eq!(p.cost.delta, 0.0);
            // The algorithm's own keys stay; the centre's calibration is shown beside them.
            assert!(p.config["multiplier"].as_f64().unwrap() > 0.0);
            assert_eq!(p.config["center"]["mode"], "private");
            let rho_c = p.config["center"]["rho"].as_f64().unwrap();
            assert!((rho_c - 0.25 * rho).abs() <= 1e-9 * rho);
            assert!(p.noise.iter().any(|s| s.release == SUM_RELEASE));
            assert_eq!(
                p.noise.iter().any(|s| s.release == COUNT_RELEASE),
                neighbours == AR
            );
        }
    }
    // Without the option, nothing is added.
    let c = ctx(6, Some(100), RO);
    let p = NoisyPower.prepare(json!({"k": 2}), &c, &target(1.0)).unwrap();
    assert!(p.config.get("center").is_none());
    let p = NoisyPower
        .prepare(json!({"k": 2, "center": "none"}), &c, &target(1.0))
        .unwrap();
    assert!(p.config.get("center").is_none());
}

#[test]
fn invalid_options_name_their_field() {
    let c = ctx(3, Some(100), RO);
    let cases = [
        (json!({"k": 1, "center": [1.0, 2.0]}), "params.center"),
        (json!({"k": 1, "center": [1.0, 2.0, "x"]}), "params.center"),
        (json!({"k": 1, "center": "mean"}), "params.center"),
        (json!({"k": 1, "center": 3}), "params.center"),
        (
            json!({"k": 1, "center": "private", "center_share": 1.0}),
            "params.center_share",
        ),
        (
            json!({"k": 1, "center": "private", "center_share": 0.0}),
            "params.center_share",
        ),
        (
            json!({"k": 1, "center": "private", "center_share": "a"}),
            "params.center_share",
        ),
        (json!({"k": 1, "center_share": 0.2}), "params.center_share"),
        (json!({"k": 1, "center": "private", "bogus": 1}), "params.bogus"),
    ];
    assert_invalid_fields(&NoisyPower, &c, &target(1.0), cases);
    // Matrix datasets: any centre other than "none" is refused on params.center.
    let m = ctx(3, None, Neighbours::Entry { u: 1.0 });
    for center in [json!("private"), json!([0.0, 0.0, 0.0])] {
        let e = rejected(&NoisyPower, json!({"k": 1, "center": center}), &m, 1.0);
        assert_eq!(invalid_field(&e), "params.center");
    }
    assert!(
        NoisyPower
            .prepare(json!({"k": 1, "center": "none"}), &m, &target(1.0))
            .is_ok()
    );
}

#[test]
fn recentre_clips_to_both_bounds() {
    let xt = Matrix::from_column_slice(2, 2, &[3.0, 4.0, 1.0, 1.0]);
    let mu = Vector::from_column_slice(&[1.0, 1.0]);
    // (2, 3): ‖·‖₂ = √13 > β = 2 → scaled to norm 2; then ‖·‖₁ = 10/√13 > α = 2.5 → to L1 2.5.
    let out = recentre(&xt, &mu, 2.0, 2.5);
    let col = out.column(0);
    assert!(col.norm() <= 2.0 + 1e-12);
    assert!((col.lp_norm(1) - 2.5).abs() <= 1e-12);
    assert!((col[1] / col[0] - 1.5).abs() <= 1e-12);
    assert_eq!(out.column(1).norm(), 0.0);
}

/// Re-clipped rows have ‖·‖₂ ≤ β and ‖·‖₁ ≤ α, computed or exact, also for the rows that the
/// naive x·(β/‖x‖₂) leaves just outside (it did before `recentre` used the upload's margin).
#[test]
fn recentred_rows_never_exceed_the_bounds_even_by_rounding() {
    use crate::linalg::clip::l1_norm;
    use crate::linalg::testing::{columns_beyond, on_adversarial_rows};
    on_adversarial_rows(60, |d, beta, rows| {
        // Centre 0 (no L1 bound in force): only the L2 clip acts.
        let out = recentre(rows, &Vector::zeros(d), beta, f64::MAX);
        assert_eq!(columns_beyond(&out, beta), 0, "d = {d}, β = {beta}");
        // A binding L1 bound: every row within it too.
        let alpha = 0.5 * beta * (d as f64).sqrt();
        let out = recentre(rows, &Vector::zeros(d), beta, alpha);
        for col in out.column_iter() {
            assert!(l1_norm(col.as_slice()) <= alpha && col.lp_norm(1) <= alpha);
        }
        assert_eq!(columns_beyond(&out, beta), 0, "d = {d}, β = {beta}");
    });
}

#[test]
fn given_centre_is_applied_exactly_and_draws_no_noise() {
    let d = 4;
    let xt = spiked_records(3, d, 50, &[4.0], 0.3, 10.0);
    let c = ctx(d, Some(50), RO);
    let config = configure(CenterRequest::Given(vec![0.1, -0.2, 0.0, 0.3]), &c, 1.0).unwrap();
    let (out, audit) = with_audited_env(1, |env| config.apply(&xt, &c, env));
    let out = out.unwrap();
    assert!(audit.draws.is_empty());
    let expected = recentre(
        &xt,
        &Vector::from_column_slice(&[0.1, -0.2, 0.0, 0.3]),
        1.0,
        100.0,
    );
    assert_eq!(out, expected);
}

#[test]
fn centred_output_converges_to_the_centred_top_k() {
    // Records with a large common offset: the uncentred top direction is the offset, the
    // centred top-2 is the planted spike subspace.
    let (d, n, k) = (8, 400, 2);
    let mut xt = spiked_records(5, d, n, &[9.0, 4.0], 0.2, 100.0);
    let offset = Vector::from_fn(d, |i, _| if i == d - 1 { 3.0 } else { -2.0 });
    for mut col in xt.column_iter_mut() {
        col += &offset;
    }
    let beta = 20.0;
    let c = ctx(
        d,
        Some(n),
        Neighbours::ReplaceOne {
            beta,
            alpha: beta * (d as f64).sqrt(),
        },
    );
    let mean = xt.column_mean();
    let centred = recentre(&xt, &mean, beta, beta * (d as f64).sqrt());
    let truth = exact_top(&gram_t(&centred), k);
    let uncentred = exact_top(&gram_t(&xt), k);
    let before = sin_theta(&uncentred, &truth);
    assert!(before > 0.5, "the test data must need centring ({before})");
    let p = NoisyPower
        .prepare(
            json!({"k": k, "iterations": 30, "center": "private"}),
            &c,
            &target(1e14),
        )
        .unwrap();
    let input = crate::algorithms::DataInput::Records { xt: (&xt).into() };
    let (out, audit) = run_prepared_audited(&NoisyPower, &p.config, input, &c, 9);
    let out = out.expect("run succeeds");
    assert_basis_contract(&out.basis, d, k);
    let err = sin_theta(&out.basis, &truth);
    assert!(err < 1e-3, "sin θ = {err:e}");
    assert!(audit.draws.iter().any(|dr| dr.label == SUM_RELEASE));
}

/// Private-mean noise recovered from `runs` runs of [`CenterConfig::centre`]: the audited sum
/// and count draws, and the sum noise recomputed from the output (μ̂·n − S, replace_one).
fn audited_centre(config: &CenterConfig, c: &DataContext, runs: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let d = c.d;
    let xt = spiked_records(11, d, 30, &[2.0], 0.5, 1.0);
    let sum = xt.column_sum();
    let mut recovered = Vec::new();
    let ((), audit) = with_audited_env(21, |env| {
        for _ in 0..runs {
            let mu = config.centre(&xt, c, env).unwrap();
            if c.relation() == crate::dataset::Relation::ReplaceOne {
                recovered.extend((mu * 30.0 - &sum).iter().copied());
            }
        }
    });
    let pick = |label: &str| -> Vec<f64> {
        audit
            .draws
            .iter()
            .filter(|dr| dr.label == label)
            .flat_map(|dr| dr.values.iter().copied())
            .collect()
    };
    (pick(SUM_RELEASE), pick(COUNT_RELEASE), recovered)
}

#[test]
fn private_mean_noise_has_the_calibrated_scale() {
    // replace_one, ρ_job = 2, share 0.1, β = 1: s = 2β/sqrt(2·0.2) = 2/sqrt(0.4).
    let c = ctx(50, Some(30), RO);
    let config = configure(private(0.1), &c, 2.0).unwrap();
    // 100 runs of d = 50: 5 000 draws (χ² z ≈ 15.3 at s/1.2, 8.7 at s/1.1; threshold 5).
    let (sums, counts, recovered) = audited_centre(&config, &c, 100);
    let expected = 2.0 / 0.4_f64.sqrt();
    assert_eq!(sums.len(), 5000);
    assert!(counts.is_empty());
    check_gaussian_scale(&sums, expected).unwrap();
    check_gaussian_scale(&recovered, expected).unwrap();

    // add_remove, ρ_job = 2, share 0.1: s_S = 1/sqrt(2·0.1), s_n = 1/sqrt(2·0.1).
    let c = ctx(2, None, AR);
    let config = configure(private(0.1), &c, 2.0).unwrap();
    // 3 000 counts (z ≈ 11.9 at s/1.2) and 6 000 sums.
    let (sums, counts, _) = audited_centre(&config, &c, 3000);
    let expected = 1.0 / 0.2_f64.sqrt();
    assert_eq!(counts.len(), 3000);
    check_gaussian_scale(&sums, expected).unwrap();
    check_gaussian_scale(&counts, expected).unwrap();
}

/// A private centre's configuration with the sum noise scaled by `sum` and the count noise (when
/// there is one) by `count`.
fn scaled_noise(config: CenterConfig, sum: f64, count: f64) -> CenterConfig {
    let CenterConfig::Private {
        rho,
        sum_sensitivity,
        noise_sd,
        count_noise_sd,
    } = config
    else {
        panic!("private config expected")
    };
    CenterConfig::Private {
        rho,
        sum_sensitivity,
        noise_sd: noise_sd * sum,
        count_noise_sd: count_noise_sd.map(|sd| sd * count),
    }
}

#[test]
fn under_noised_private_mean_fails_the_audit() {
    let c = ctx(50, Some(30), RO);
    let weak = scaled_noise(configure(private(0.1), &c, 2.0).unwrap(), 1.0 / 1.2, 1.0);
    let (sums, _, recovered) = audited_centre(&weak, &c, 100);
    let expected = 2.0 / 0.4_f64.sqrt();
    assert!(check_gaussian_scale(&sums, expected).is_err());
    assert!(check_gaussian_scale(&recovered, expected).is_err());

    let c = ctx(2, None, AR);
    let weak = scaled_noise(configure(private(0.1), &c, 2.0).unwrap(), 1.0 / 1.2, 1.0 / 1.2);
    assert!(matches!(
        weak,
        CenterConfig::Private {
            count_noise_sd: Some(_),
            ..
        }
    ));
    let (sums, counts, _) = audited_centre(&weak, &c, 3000);
    assert!(check_gaussian_scale(&sums, 1.0 / 0.2_f64.sqrt()).is_err());
    assert!(check_gaussian_scale(&counts, 1.0 / 0.2_f64.sqrt()).is_err());
}

#[test]
fn exact_keeps_its_own_center_parameter() {
    use crate::algorithms::exact::Exact;
    let mut c = ctx(3, Some(10), RO);
    c.public = true;
    let p = Exact
        .prepare(json!({"k": 2, "center": true}), &c, &target(1.0))
        .unwrap();
    assert_eq!(p.config, json!({"k": 2, "center": true}));
    assert_eq!(p.cost, Cost::ZERO);
    let names = |schema: serde_json::Value| -> Vec<String> {
        schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    let exact = names(DynAlgorithm::parameters(&Exact));
    assert_eq!(exact.iter().filter(|p| *p == "center").count(), 1);
    assert!(exact.iter().all(|p| p != "center_share"));
    // And the generic options appear on the others.
    let noisy = names(DynAlgorithm::parameters(&NoisyPower));
    for name in ["center", "center_share", "with_eigenvalues"] {
        assert!(noisy.iter().any(|p| p == name), "{name}");
    }
}
