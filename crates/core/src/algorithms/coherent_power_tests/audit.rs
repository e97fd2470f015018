//! Statistical audit of the noise actually drawn, against an independent replay of Hardt &
//! Roth Fig. 2/3.

use super::*;

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
        assert_draws_calibrated(report.gaussian_scale_error, &report.per_draw, neighbours);
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
    assert_recorded_scale(report.laplace_scale_error, "laplace");
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
