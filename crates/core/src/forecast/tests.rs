use serde_json::json;

use super::*;
use crate::algorithms::find;
use crate::algorithms::testing::ro;
use crate::forecast::scenario::{MAX_STATED, SIGNAL_SDS};

/// A private records context with public n, β and α = √d·β.
fn ctx(d: usize, n: usize, beta: f64) -> DataContext {
    crate::algorithms::testing::ctx(d, Some(n), ro(beta, (d as f64).sqrt() * beta))
}

fn rho(rho: f64) -> PrivacyTarget {
    PrivacyTarget {
        public_default: false,
        rho,
        delta: Some(1e-6),
        epsilon: None,
    }
}

fn spiked(d: usize) -> Scenario {
    Scenario::new(vec![4.0, 2.0, 1.0], 0.05, d).expect("scenario")
}

/// Mean captured energy of `jobs` real runs (the job's own path: prepare, then run_prepared on
/// the records) on records drawn from `scenario` with seed `data_seed`.
fn realized(
    alg: &str,
    params: serde_json::Value,
    scenario: &Scenario,
    c: &DataContext,
    r: f64,
    data_seed: u64,
    jobs: u64,
) -> f64 {
    let n = c.n.expect("public n");
    let real = Synthetic::draw(scenario, n, c.d, 1.0, data_seed);
    assert!(real.complete());
    let real = &real.draws[0];
    let algorithm = find(alg).expect("algorithm");
    let prepared = algorithm.prepare(params, c, &rho(r)).expect("prepared");
    let mut total = 0.0;
    for job in 0..jobs {
        let mut rng = ChaCha20Rng::seed_from_u64(1000 + job);
        let mut progress = |_: u32, _: u32| -> Result<(), Cancelled> { Ok(()) };
        let mut env = RunEnv::new(&mut rng, &mut progress);
        // A real job reads the records without kept statistics.
        let input = DataInput::Records {
            xt: Records::from(&real.xt),
        };
        let out = algorithm
            .run_prepared(
                &prepared.config,
                Run {
                    input,
                    ctx: c,
                    env: &mut env,
                },
            )
            .expect("run");
        total += real.captured(&out.basis);
    }
    total / jobs as f64
}

#[test]
fn a_scenario_is_checked() {
    assert!(Scenario::new(vec![], 0.1, 5).is_err());
    assert!(Scenario::new(vec![1.0; 6], 0.1, 5).is_err());
    assert!(Scenario::new(vec![1.0, f64::NAN], 0.1, 5).is_err());
    assert!(Scenario::new(vec![1.0, -1.0], 0.1, 5).is_err());
    assert!(Scenario::new(vec![1.0], -0.1, 5).is_err());
    assert!(Scenario::new(vec![1.0], f64::INFINITY, 5).is_err());
    assert!(Scenario::new(vec![0.0, 0.0], 0.0, 5).is_err());
    assert_eq!(Scenario::new(vec![0.0], 0.0, 5).unwrap_err().field, "eigenvalues");
    assert!(Scenario::new(vec![0.0, 0.0], 0.1, 5).is_ok());
    assert!(Scenario::new(vec![3.0, 1.0], 0.0, 5).is_ok());
}

#[test]
fn drawn_records_have_the_scenarios_spectrum() {
    let (d, m) = (30, 40_000);
    let scenario = Scenario::new(vec![5.0, 3.0, 1.5], 0.1, d).expect("scenario");
    // β far above every norm: nothing is clipped.
    let s = Synthetic::draw(&scenario, m, d, 1e6, 7);
    assert_eq!(s.drawn(), m);
    let expected = [5.0, 3.0, 1.5];
    for (i, want) in expected.iter().enumerate() {
        let got = s.draws[0].spectrum[i];
        assert!((got - want).abs() < 0.05 * want, "λ_{i}: {got} vs {want}");
    }
    let floor: f64 = s.draws[0].spectrum[3..].iter().sum::<f64>() / (d - 3) as f64;
    assert!((floor - 0.1).abs() < 0.01, "floor {floor}");
    // The same seed draws the same records; another draws others.
    assert_eq!(
        Synthetic::draw(&scenario, 500, d, 1.0, 3).draws[0].xt,
        Synthetic::draw(&scenario, 500, d, 1.0, 3).draws[0].xt
    );
    assert_ne!(
        Synthetic::draw(&scenario, 500, d, 1.0, 3).draws[0].xt,
        Synthetic::draw(&scenario, 500, d, 1.0, 4).draws[0].xt
    );
    // Clipped as uploads clip.
    let clipped = Synthetic::draw(&scenario, 2_000, d, 1.0, 5);
    assert!(clipped.draws[0].xt.column_iter().all(|x| x.norm() <= 1.0));
}

#[test]
fn the_forecast_lands_near_real_jobs_on_other_records_of_the_scenario() {
    let scenario = spiked(20);
    for (alg, n, r) in [
        ("analyze_gauss", 5_000, 3e-5),
        ("analyze_gauss", 20_000, 2e-6),
        ("noisy_power", 5_000, 1e-4),
        ("noisy_power", 20_000, 1e-5),
    ] {
        let c = ctx(20, n, 1.0);
        let params = json!({"k": 2});
        let synthetic = Synthetic::draw(&scenario, n, 20, 1.0, 11);
        let outcome = forecast(
            find(alg).unwrap(),
            &params,
            &c,
            &rho(r),
            &synthetic,
            REPETITIONS,
            5,
        )
        .expect("forecast");
        let Outcome::Ran(f) = outcome else {
            panic!("{alg}: {outcome:?}")
        };
        let real = realized(alg, params, &scenario, &c, r, 99, 6);
        assert!(real < 0.95, "{alg}: the cell should be noisy ({real})");
        assert!(
            (f.captured_energy - real).abs() < 0.05,
            "{alg} n={n} ρ={r}: forecast {} vs realized {real}",
            f.captured_energy
        );
        assert!(
            f.interval[0] <= real && real <= f.interval[1],
            "{alg}: {:?} vs {real}",
            f.interval
        );
    }
}

#[test]
fn the_scaled_run_forecasts_what_the_complete_run_does() {
    let scenario = spiked(20);
    let (d, n) = (20, 100_000);
    for (alg, r) in [("analyze_gauss", 2e-7), ("noisy_power", 1e-6)] {
        let c = ctx(d, n, 1.0);
        let params = json!({"k": 2});
        let complete = Synthetic::draw(&scenario, n, d, 1.0, 21);
        let scaled = Synthetic::draw_at_most(&scenario, n, d, 1.0, 21, 5_000 * d);
        assert!(complete.complete() && !scaled.complete());
        let run = |s: &Synthetic| {
            forecast(find(alg).unwrap(), &params, &c, &rho(r), s, REPETITIONS, 3).expect("forecast")
        };
        let (a, b) = (run(&complete).captured_energy(), run(&scaled).captured_energy());
        assert!((a - b).abs() < 0.03, "{alg}: complete {a} vs scaled {b}");
        assert!(a > 0.3 && a < 0.99, "{alg}: the cell should be noisy ({a})");
    }
}

#[test]
fn a_job_that_would_be_refused_captures_nothing_and_too_large_is_an_error() {
    let scenario = spiked(20);
    let c = ctx(20, 5_000, 1.0);
    let synthetic = Synthetic::draw(&scenario, 5_000, 20, 1.0, 1);
    let outcome = forecast(
        find("analyze_gauss").unwrap(),
        &json!({"k": 50}),
        &c,
        &rho(1.0),
        &synthetic,
        3,
        1,
    )
    .expect("forecast");
    match outcome {
        Outcome::Nothing(reason) => assert!(reason.contains("refused"), "{reason}"),
        other => panic!("{other:?}"),
    }
    let big = ctx(20, 1_000_000, 1.0);
    let scaled = Synthetic::draw_at_most(&scenario, 1_000_000, 20, 1.0, 1, 100_000);
    let err = forecast(
        find("dp_oja").unwrap(),
        &json!({"k": 2}),
        &big,
        &rho(1.0),
        &scaled,
        3,
        1,
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            ForecastError::TooLarge {
                algorithm: "dp_oja",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn smallest_rho_finds_the_threshold_of_an_increasing_curve() {
    let curve = |r: f64| r / (r + 0.01);
    // r/(r + 0.01) = 0.9 at r = 0.09, found from below and from above.
    for start in [1e-5, 0.01, 0.09, 0.5, 700.0] {
        let mut calls = 0;
        let found = smallest_rho(0.9, start, (1e-6, 1e3), |r| {
            calls += 1;
            curve(r)
        })
        .expect("reached");
        assert!((0.09..0.09 * 1.06).contains(&found), "from {start}: {found}");
        assert!(calls <= 12, "from {start}: {calls} evaluations");
    }
    assert_eq!(smallest_rho(0.999_999_9, 0.1, (1e-6, 1e3), curve), None);
    assert_eq!(smallest_rho(0.5, 5.0, (1.0, 1e3), curve), Some(1.0));
}

#[test]
fn an_interval_holds_the_mean_and_stays_in_the_unit_range() {
    let f = Forecast::of(vec![0.5, 0.6, 0.7]);
    assert!((f.captured_energy - 0.6).abs() < 1e-12);
    assert!(f.interval[0] < 0.5 && f.interval[1] > 0.7);
    let tight = Forecast::of(vec![0.999, 0.999]);
    assert_eq!(tight.interval[1], 1.0);
    assert!((tight.interval[0] - (0.999 - MODEL_ERROR)).abs() < 1e-12);
}

#[test]
#[ignore = "timing: cargo test --release --lib forecast::tests::timing -- --ignored --nocapture"]
fn timing() {
    let d = 500;
    let scenario = Scenario::new(vec![5.0, 3.0, 2.0, 1.0], 0.01, d).unwrap();
    let t = std::time::Instant::now();
    let s = Synthetic::draw(&scenario, 1_000_000, d, 1.0, 1);
    eprintln!("draw {:?}", t.elapsed());
    for alg in ["analyze_gauss", "noisy_power"] {
        let t = std::time::Instant::now();
        let out = forecast(
            find(alg).unwrap(),
            &json!({"k": 3}),
            &ctx(d, 1_000_000, 1.0),
            &rho(0.01),
            &s,
            REPETITIONS,
            1,
        )
        .unwrap();
        eprintln!("{alg} {:?} {}", t.elapsed(), out.captured_energy());
    }
}

#[test]
#[ignore = "timing: cargo test --lib forecast::tests::timing_parts -- --ignored --nocapture"]
fn timing_parts() {
    let d = 500;
    let a = Matrix::from_fn(d, d, |i, j| ((i * j) % 7) as f64);
    let a = &a + a.transpose();
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let mut progress = |_: u32, _: u32| -> Result<(), Cancelled> { Ok(()) };
    let mut env = RunEnv::new(&mut rng, &mut progress);
    let t = std::time::Instant::now();
    let noisy = env
        .gaussian_symmetric_release("x", a.clone(), 1.0, 100.0)
        .unwrap();
    eprintln!("noise {:?}", t.elapsed());
    let t = std::time::Instant::now();
    let _ = crate::linalg::sym_eig(&noisy);
    eprintln!("eig {:?}", t.elapsed());
}

#[test]
fn small_forecasts_average_over_several_draws_of_records_and_large_ones_draw_once() {
    let scenario = spiked(10);
    let small = Synthetic::draw(&scenario, 5_000, 10, 1.0, 1);
    assert_eq!(small.draws.len(), DRAWS);
    assert_ne!(small.draws[0].xt, small.draws[1].xt);
    let large = Synthetic::draw(&scenario, 1_000_000, 10, 1.0, 1);
    assert_eq!(large.draws.len(), 1);
    assert_eq!(large.drawn(), MAX_DRAWN_VALUES / 10);
}

#[test]
fn a_private_spectrum_lists_what_stands_above_its_noise_and_averages_the_rest() {
    // d = 6, sd = 0.1: 3σ = 0.3, so two entries are listed; the floor is the mean of the rest.
    let s = Scenario::from_private_spectrum(&[2.0, 0.9, 0.25, 0.05, -0.1, 0.0], 0.1).unwrap();
    assert_eq!(s.eigenvalues(), &[2.0, 0.9]);
    assert!((s.noise_floor() - 0.05).abs() < 1e-12);
    // Nothing above the noise: the first entry is listed, the rest average (negative → 0).
    let s = Scenario::from_private_spectrum(&[0.1, -0.2, -0.3], 0.5).unwrap();
    assert_eq!(s.eigenvalues(), &[0.1]);
    assert_eq!(s.noise_floor(), 0.0);
    // Listed entries are clamped at 0 and sorted (post-processing of the release).
    let s = Scenario::from_private_spectrum(&[1.0, 1.2, 5.0], 0.01).unwrap();
    assert_eq!(s.eigenvalues(), &[5.0, 1.2, 1.0]);
    // All noise and below zero: nothing to capture, said as the scenario's error.
    assert!(Scenario::from_private_spectrum(&[-0.1, -0.2], 0.5).is_err());
    assert!(Scenario::from_private_spectrum(&[], 0.5).is_err());
    assert!(Scenario::from_private_spectrum(&[f64::NAN], 0.5).is_err());
}

#[test]
fn a_private_spectrum_lists_at_most_the_stated_maximum() {
    let released: Vec<f64> = (0..300).map(|i| 10.0 - i as f64 * 0.01).collect();
    let s = Scenario::from_private_spectrum(&released, 0.001).unwrap();
    assert_eq!(s.eigenvalues().len(), MAX_STATED);
    let rest = &released[MAX_STATED..];
    assert!((s.noise_floor() - rest.iter().sum::<f64>() / rest.len() as f64).abs() < 1e-12);
}

/// λ(XᵀX/m) of records xt (d×m), largest first.
fn spectrum_of(xt: &Matrix) -> Vec<f64> {
    let c = crate::linalg::gram_t(xt) / xt.ncols() as f64;
    let mut values: Vec<f64> = crate::linalg::try_sym_eigenvalues(&c)
        .unwrap()
        .iter()
        .copied()
        .collect();
    values.sort_by(|a, b| b.total_cmp(a));
    values
}

#[test]
fn a_matched_scenario_reproduces_its_spectrum_after_the_clip() {
    // Records at β = 1 whose spectrum is (0.42, 0.27, 0.18) and a floor of 0.016: about the
    // clipped spectrum of the scenario (3, 1.5, 0.8; 0.05) at d = 10, where every row is clipped.
    let (d, m) = (10, 20_000);
    let target = Scenario::new(vec![0.42, 0.27, 0.18], 0.016, d).unwrap();
    let matched = target.matched_to_clip(d, m, 1.0, 7);
    let got = spectrum_of(&matched.draw(d, m, 1.0, 99));
    for (have, want) in got.iter().zip([0.42, 0.27, 0.18]) {
        assert!((have / want - 1.0).abs() < 0.05, "{got:?}");
    }
    // Drawn and clipped without matching, the spectrum shrinks where it is largest.
    let shrunk = spectrum_of(&target.draw(d, m, 1.0, 99));
    assert!(shrunk[0] < 0.9 * 0.42, "{shrunk:?}");
    // A scenario far inside the ball is left as it is.
    let small = Scenario::new(vec![0.01], 0.001, d).unwrap();
    let same = small.matched_to_clip(d, m, 1.0, 7);
    assert!((same.eigenvalues()[0] / 0.01 - 1.0).abs() < 0.05);
}

#[test]
fn a_decay_model_states_its_eigenvalues_and_refuses_what_is_not_one() {
    use super::scenario::{Decay, MAX_POWER_LAW_EXPONENT, decay_eigenvalues};
    assert_eq!(
        decay_eigenvalues(Decay::Geometric, 8.0, 0.5, 4).expect("valid"),
        vec![8.0, 4.0, 2.0, 1.0]
    );
    let power = decay_eigenvalues(Decay::PowerLaw, 6.0, 1.0, 3).expect("valid");
    assert_eq!(power, vec![6.0, 3.0, 2.0]);
    // A ratio of 1 is a flat top; the largest exponent is allowed.
    assert_eq!(
        decay_eigenvalues(Decay::Geometric, 2.0, 1.0, 3).expect("flat"),
        vec![2.0; 3]
    );
    assert!(decay_eigenvalues(Decay::PowerLaw, 1.0, MAX_POWER_LAW_EXPONENT, 2).is_ok());
    for (model, top, rate, count, field) in [
        (Decay::Geometric, 0.0, 0.5, 3, "decay.top"),
        (Decay::Geometric, f64::INFINITY, 0.5, 3, "decay.top"),
        (Decay::Geometric, 1.0, 0.0, 3, "decay.rate"),
        (Decay::Geometric, 1.0, 1.5, 3, "decay.rate"),
        (Decay::Geometric, 1.0, f64::NAN, 3, "decay.rate"),
        (Decay::PowerLaw, 1.0, -1.0, 3, "decay.rate"),
        (
            Decay::PowerLaw,
            1.0,
            MAX_POWER_LAW_EXPONENT * 1.01,
            3,
            "decay.rate",
        ),
        (Decay::PowerLaw, 1.0, 1.0, 0, "decay.count"),
        (Decay::PowerLaw, 1.0, 1.0, MAX_STATED + 1, "decay.count"),
    ] {
        let err = decay_eigenvalues(model, top, rate, count).expect_err("refused");
        assert_eq!(err.field, field, "{model:?} {top} {rate} {count}");
    }
}

/// PAVA: the least-squares non-increasing fit, clamped at 0 (experiment).
fn isotonic(values: &[f64]) -> Vec<f64> {
    let mut blocks: Vec<(f64, usize)> = Vec::new();
    for v in values {
        blocks.push((*v, 1));
        while blocks.len() > 1 {
            let (b, nb) = blocks[blocks.len() - 1];
            let (a, na) = blocks[blocks.len() - 2];
            if a / na as f64 >= b / nb as f64 {
                break;
            }
            blocks.pop();
            blocks.pop();
            blocks.push((a + b, na + nb));
        }
    }
    blocks
        .iter()
        .flat_map(|(s, n)| std::iter::repeat_n((s / *n as f64).max(0.0), *n))
        .collect()
}

#[test]
#[ignore = "experiment"]
fn experiment_private_spectrum_readings() {
    let (d, n) = (10, 3000);
    let truth = Scenario::new(vec![3.0, 1.5, 0.8], 0.05, d).unwrap();
    let xt = truth.draw(d, n, 1.0, 91);
    let values = spectrum_of(&xt);
    let c = ctx(d, n, 1.0);
    for (alg, r) in [("analyze_gauss", 1.5e-4), ("noisy_power", 3e-4)] {
        let algorithm = find(alg).unwrap();
        let params = json!({"k": 2});
        // The realized mean of 40 jobs on these very records.
        let prepared = algorithm.prepare(params.clone(), &c, &rho(r)).unwrap();
        let covariance = crate::linalg::gram_t(&xt) / n as f64;
        let mut realized = 0.0;
        for job in 0..40u64 {
            let mut rng = ChaCha20Rng::seed_from_u64(1000 + job);
            let mut progress = |_: u32, _: u32| -> Result<(), Cancelled> { Ok(()) };
            let mut env = RunEnv::new(&mut rng, &mut progress);
            let input = DataInput::Records {
                xt: Records::from(&xt),
            };
            let out = algorithm
                .run_prepared(
                    &prepared.config,
                    Run {
                        input,
                        ctx: &c,
                        env: &mut env,
                    },
                )
                .unwrap();
            realized += crate::linalg::subspace::captured_energy(&out.basis, &covariance) / 40.0;
        }
        let sd = 2f64.sqrt() / (2.0 * 0.05 * r).sqrt() / n as f64;
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let normal = rand_distr::Normal::new(0.0, sd).unwrap();
        let mut errors = [Vec::new(), Vec::new()];
        for _ in 0..60 {
            let released: Vec<f64> = values
                .iter()
                .map(|v| v + rand::Rng::sample(&mut rng, normal))
                .collect();
            let fitted = isotonic(&released);
            let above = fitted
                .iter()
                .filter(|v| **v > SIGNAL_SDS * sd)
                .count()
                .clamp(1, d);
            let rest = &fitted[above..];
            let iso = Scenario::new(
                fitted[..above].to_vec(),
                if rest.is_empty() {
                    0.0
                } else {
                    rest.iter().sum::<f64>() / rest.len() as f64
                },
                d,
            );
            for (which, s) in [Scenario::from_private_spectrum(&released, sd), iso]
                .into_iter()
                .enumerate()
            {
                let Ok(s) = s else {
                    errors[which].push(realized);
                    continue;
                };
                let m = s.matched_to_clip(d, 3000, 1.0, 7);
                let syn = Synthetic::draw(&m, n, d, 1.0, 11);
                let f = match forecast(algorithm, &params, &c, &rho(r), &syn, repetitions(d), 13).unwrap() {
                    Outcome::Ran(f) => f.captured_energy,
                    Outcome::Nothing(_) => 0.0,
                };
                errors[which].push(f - realized);
            }
        }
        for (name, e) in ["current", "isotonic"].iter().zip(&errors) {
            let fails = e.iter().filter(|x| x.abs() > 0.1).count();
            let mae = e.iter().map(|x| x.abs()).sum::<f64>() / e.len() as f64;
            let bias = e.iter().sum::<f64>() / e.len() as f64;
            eprintln!("{alg} realized {realized:.3} {name}: fails {fails}/60, mae {mae:.3}, bias {bias:+.3}");
        }
    }
}
