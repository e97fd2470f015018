use super::*;
use crate::algorithms::testing::{assert_audits_catch_under_noise, gaussian, seeded, with_audited_env};
use crate::privacy::noise::RecordingAudit;
use crate::privacy::testing::{check_gaussian_scale, check_laplace_scale};

/// A calibration with histograms at (ε_h, δ_h) and Gaussian ρ_g, and no gradient bound to speak
/// of (G = f64::MAX: Δ is the box's, 2R·sqrt(d)/B).
pub(crate) fn calibration(
    eps_h: f64,
    delta_h: f64,
    rho_g: f64,
    tail_scale: f64,
    tail_exponent: f64,
    tau: f64,
) -> MeanCalibration {
    MeanCalibration {
        histogram: StabilityHistogram {
            epsilon: eps_h,
            delta: delta_h,
        },
        gaussian_rho: rho_g,
        gradient_bound: f64::MAX,
        tail_scale,
        tail_exponent,
        failure_probability: tau,
    }
}

#[test]
fn constants_follow_algorithm_7() {
    let cal = calibration(0.3, 1e-4, 0.7, 2.0, 1.5, 0.001);
    let lambda = 4.0;
    let log25 = 25.0_f64.ln();
    assert!((cal.bin_width(lambda) - 2.0_f64.powf(0.25) * 2.0 * 2.0 * log25 * log25).abs() < 1e-12);
    let r = 3.0 * 2.0 * 2.0 * (50.0_f64 * 10.0 / 0.001).ln().powf(1.5);
    assert!((cal.radius(lambda, 50, 10) - r).abs() < 1e-9 * r);
    let delta = 2.0 * r * 10.0_f64.sqrt() / 50.0;
    assert!((cal.sensitivity(lambda, 50, 10) - delta).abs() < 1e-9 * delta);
    assert!((cal.noise_sd(lambda, 50, 10) - delta / (2.0 * cal.gaussian_rho).sqrt()).abs() < 1e-9 * delta);
    assert_eq!(coordinate_bin(0.0, 1.0), -1);
    assert_eq!(coordinate_bin(1.0, 1.0), 0);
    assert_eq!(coordinate_bin(1.5, 1.0), 1);
    assert_eq!(coordinate_bin(-0.5, 1.0), -1);
}

fn run(g: &Matrix, lambda: f64, cal: &MeanCalibration, seed: u64) -> (Vector, RecordingAudit) {
    let (out, audit) = with_audited_env(seed, |env| priv_mean(g, lambda, cal, env));
    (out.expect("runs"), audit)
}

/// At a huge budget the output is the plain mean when nothing is truncated, and an
/// outlier beyond the interval is pulled in to ḡ_j + R, ḡ_j the left end of the mode's bin.
#[test]
fn mean_is_exact_at_huge_budget_and_truncates_outliers() {
    let (d, batch) = (3, 400);
    let mut g = gaussian(&mut seeded(1), d, batch) + Matrix::from_element(d, batch, 5.0);
    let cal = calibration(1e14, 1e-6, 1e28, 1.0, 1.0, 0.01);
    let (mean, audit) = run(&g, 1.0, &cal, 2);
    let exact = g.column_mean();
    assert!((&mean - &exact).amax() < 1e-6, "{mean} vs {exact}");
    let labels: Vec<&str> = audit.draws.iter().map(|d| d.label).collect();
    assert_eq!(
        labels,
        [MEAN_HISTOGRAM, MEAN_HISTOGRAM, MEAN_HISTOGRAM, MEAN_NOISE]
    );

    let width = cal.bin_width(1.0);
    let counts = count(g.row(0).iter().map(|&x| coordinate_bin(x, width)));
    let mode = counts
        .iter()
        .max_by_key(|(_, c)| **c)
        .map(|(b, _)| *b)
        .expect("bins");
    let centre = mode as f64 * width;
    let radius = cal.radius(1.0, batch, d);
    let original = g[(0, 0)];
    g[(0, 0)] = 1e6;
    let (mean, _) = run(&g, 1.0, &cal, 2);
    let want = exact[0] + (centre + radius - original) / batch as f64;
    assert!((mean[0] - want).abs() < 1e-6, "{} vs {want}", mean[0]);
}

/// A coordinate whose histogram releases ⊥ is truncated to [−R, R]: values one per bin
/// (no bin can clear the threshold 1 + tiny) at a huge budget.
#[test]
fn bottom_centres_the_interval_at_zero() {
    let batch = 50;
    let cal = calibration(1e14, 1e-6, 1e28, 1.0, 1.0, 0.01);
    let spacing = 2.0 * cal.bin_width(1.0);
    let g = Matrix::from_fn(1, batch, |_, i| spacing * i as f64);
    let radius = cal.radius(1.0, batch, 1);
    assert!(spacing < radius && 2.0 * spacing > radius);
    let (mean, _) = run(&g, 1.0, &cal, 5);
    let want = (spacing + (batch - 2) as f64 * radius) / batch as f64;
    assert!((mean[0] - want).abs() < 1e-6, "{} vs {want}", mean[0]);
}

/// Audits both kinds of noise against values computed here: Laplace(2/ε_h) for the
/// histograms, N(0, σ²) with σ = min(2·3K·sqrt(Λ̂)·ln^a(Bd/τ)·sqrt(d), 2G)/B/sqrt(2ρ_g).
fn audit(tamper: f64, gradient_bound: f64) -> [(&'static str, Result<(), String>); 2] {
    let (d, batch, lambda, eps_h, rho_g, k_tail, a_tail, tau) =
        (8, 60, 2.0_f64.powf(1.25), 0.05, 0.3, 1.5, 1.0, 1e-3);
    let mut cal = calibration(eps_h, 1e-6, rho_g, k_tail, a_tail, tau);
    cal.gradient_bound = gradient_bound;
    cal.histogram.epsilon /= tamper;
    cal.gaussian_rho /= tamper * tamper;
    let g = gaussian(&mut seeded(7), d, batch) * 3.0;
    let radius = 3.0 * k_tail * lambda.sqrt() * ((batch * d) as f64 / tau).ln().powf(a_tail);
    let sensitivity = (2.0 * radius * (d as f64).sqrt()).min(2.0 * gradient_bound) / batch as f64;
    let sd = sensitivity / (2.0 * rho_g).sqrt();
    let (mut laplace, mut gauss) = (Vec::new(), Vec::new());
    for call in 0..400 {
        let (_, audit) = run(&g, lambda, &cal, 100 + call);
        for draw in audit.draws {
            match draw.label {
                MEAN_HISTOGRAM => laplace.extend(draw.values),
                MEAN_NOISE => gauss.extend(draw.values),
                other => panic!("unexpected label {other}"),
            }
        }
    }
    [
        ("laplace", check_laplace_scale(&laplace, 2.0 / eps_h)),
        ("gaussian", check_gaussian_scale(&gauss, sd)),
    ]
}

/// The noise has the calibrated scales, and a mean with 0.9 of them fails both audits.
#[test]
fn noise_has_the_calibrated_scales() {
    // G = 1 is below the box (2R·sqrt(8) ≈ 200): Δ = 2G/B. G = f64::MAX: Δ is the box's.
    for bound in [1.0, f64::MAX] {
        assert_audits_catch_under_noise(|tamper| audit(tamper, bound), 0.9);
    }
}

/// Δ = min(2R·sqrt(d), 2G)/B, and the bound holds for the mechanism, not only the formula:
/// replacing one gradient by its far opposite (both of norm 10G) moves the output, with the
/// same noise draws, by at most 2G/B, because the gradients are clipped to G before the box.
#[test]
fn one_gradient_moves_the_mean_by_at_most_two_g_over_b() {
    let (d, batch, g_bound) = (4, 200, 0.5);
    let mut cal = calibration(1e14, 1e-6, 1e28, 1.0, 1.0, 0.01);
    cal.gradient_bound = g_bound;
    let box_diameter = 2.0 * cal.radius(1.0, batch, d) * (d as f64).sqrt();
    assert!(2.0 * g_bound < box_diameter);
    assert!((cal.sensitivity(1.0, batch, d) - 2.0 * g_bound / batch as f64).abs() < 1e-15);
    cal.gradient_bound = 1e9;
    assert!((cal.sensitivity(1.0, batch, d) - box_diameter / batch as f64).abs() < 1e-12);
    cal.gradient_bound = g_bound;

    let mut g = gaussian(&mut seeded(4), d, batch) * 0.05;
    g[(0, 0)] = 10.0 * g_bound;
    let (a, _) = run(&g, 1.0, &cal, 9);
    g[(0, 0)] = -10.0 * g_bound;
    let (b, _) = run(&g, 1.0, &cal, 9);
    let moved = (&a - &b).norm();
    let bound = 2.0 * g_bound / batch as f64;
    assert!(moved <= bound * (1.0 + 1e-9), "moved {moved} > 2G/B = {bound}");
    assert!(
        moved > 0.9 * bound,
        "the replaced gradient should move the mean: {moved}"
    );
}
