//! Tests of the releases' noise scale, with the checks of `testing.rs`, of the rounding to the
//! grid, and of the symmetric layout.

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use super::*;
use crate::privacy::testing::{check_gaussian_scale, check_laplace_scale};

const DRAWS: usize = 20_000;

fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

/// The noise of one Gaussian release of `DRAWS` coordinates of a public query (the sensitivity
/// is large against √m·h, so the widening is below 10⁻⁶).
fn gaussian_draws(seed: u64, sd: f64) -> Vec<f64> {
    let mut query = vec![0.25 * sd; DRAWS];
    gaussian_release(&mut rng(seed), &mut query, sd, sd)
        .unwrap()
        .noise
}

fn laplace_draws(seed: u64, b: f64) -> Vec<f64> {
    let mut query = vec![-0.5 * b; DRAWS];
    laplace_release(&mut rng(seed), &mut query, b * 1e3, b)
        .unwrap()
        .noise
}

fn scaled(values: &[f64], factor: f64) -> Vec<f64> {
    values.iter().map(|v| v * factor).collect()
}

/// A release's sampler with the scale check its draws must pass.
struct Sampler {
    /// The noise of one release of `DRAWS` coordinates at (seed, scale).
    draw: fn(u64, f64) -> Vec<f64>,
    check: fn(&[f64], f64) -> Result<(), String>,
}

const GAUSSIAN: Sampler = Sampler {
    draw: gaussian_draws,
    check: check_gaussian_scale,
};

const LAPLACE: Sampler = Sampler {
    draw: laplace_draws,
    check: check_laplace_scale,
};

impl Sampler {
    /// The check passes the draws of each (seed, scale) at their scale.
    fn assert_passes(&self, cases: [(u64, f64); 4]) {
        for (seed, scale) in cases {
            (self.check)(&(self.draw)(seed, scale), scale).expect("correct sampler passes");
        }
    }

    /// The check passes the draws at (seed, scale) at their true scale, and fails them scaled
    /// by each of `wrong`; the draws.
    fn assert_wrong_scales_fail(&self, (seed, scale): (u64, f64), wrong: &[f64]) -> Vec<f64> {
        let draws = (self.draw)(seed, scale);
        (self.check)(&draws, scale).expect("correct sampler passes");
        for factor in wrong {
            let result = (self.check)(&scaled(&draws, *factor), scale);
            assert!(result.is_err(), "scale × {factor} must fail");
        }
        draws
    }
}

#[test]
fn gaussian_release_has_the_requested_sd() {
    GAUSSIAN.assert_passes([(1, 1.0), (2, 2.5), (3, 1e-3), (4, 1e6)]);
}

#[test]
fn under_and_over_noised_gaussian_draws_are_rejected() {
    // The same seeded draws pass at the true scale and fail when scaled by 0.85, 0.9 or 1.1:
    // with 20 000 draws the χ² z-score of a 10 % error is about 0.19·sqrt(10 000) ≈ 19 ≫ 5.
    let draws = GAUSSIAN.assert_wrong_scales_fail((7, 3.0), &[0.85, 0.9, 1.1]);
    let under = check_gaussian_scale(&scaled(&draws, 0.9), 3.0).expect_err("sd × 0.9 must fail");
    assert!(under.contains("empirical sd"), "{under}");
    let shifted: Vec<f64> = draws.iter().map(|v| v + 0.3).collect();
    let err = check_gaussian_scale(&shifted, 3.0).expect_err("mean shift must fail");
    assert!(err.contains("mean"), "{err}");
}

#[test]
fn laplace_release_has_the_requested_scale() {
    LAPLACE.assert_passes([(11, 1.0), (12, 0.7), (13, 1e-4), (14, 250.0)]);
}

#[test]
fn under_noised_laplace_draws_are_rejected() {
    LAPLACE.assert_wrong_scales_fail((17, 2.0), &[0.85, 1.1]);
    // Gaussian draws of the same variance 2b² are not Laplace (E|x| ≈ 1.128·b).
    let gaussian_same_variance = gaussian_draws(18, 2.0 * 2.0_f64.sqrt());
    check_laplace_scale(&gaussian_same_variance, 2.0).expect_err("Gaussian is not Laplace");
}

#[test]
fn a_release_is_the_rounded_query_plus_grid_noise() {
    let sd = 0.37;
    let lattice = GaussianLattice::new(sd, 1.0, 500).unwrap();
    let h = lattice.grid();
    assert!(sd / h >= (1u64 << 30) as f64 && sd / h < (1u64 << 31) as f64);
    let query: Vec<f64> = (0..500).map(|i| (i as f64 * 0.731).sin() * 12.3).collect();
    let mut released = query.clone();
    let release = gaussian_release(&mut rng(19), &mut released, 1.0, sd).unwrap();
    for ((q, r), z) in query.iter().zip(&released).zip(&release.noise) {
        // Every released value and every noise value is an integer multiple of h.
        assert_eq!((r / h).fract(), 0.0);
        assert_eq!((z / h).fract(), 0.0);
        assert_eq!(*r, (q / h).round() * h + z, "round(q/h)·h + h·Z");
    }
    assert!(release.scale >= sd && release.scale <= sd * (1.0 + 1e-6));
}

#[test]
fn symmetric_release_mirrors_its_upper_triangle() {
    let d = 60;
    let a = Matrix::from_fn(d, d, |i, j| ((i * j) as f64).cos() + (i + j) as f64);
    let mut noisy = a.clone();
    let release = gaussian_symmetric_release(&mut rng(31), &mut noisy, 1.0, 1.5).unwrap();
    assert_eq!(release.noise.len(), d * (d + 1) / 2);
    let h = grid_step(1.5);
    let mut k = 0;
    for j in 0..d {
        for i in 0..=j {
            assert_eq!(
                noisy[(i, j)],
                (a[(i, j)] / h).round() * h + release.noise[k],
                "upper triangle, column by column"
            );
            assert_eq!(noisy[(j, i)], noisy[(i, j)], "mirrored below the diagonal");
            k += 1;
        }
    }
    check_gaussian_scale(&release.noise, 1.5).expect("independent entries are N(0, sd²)");
}

fn grid_step(sd: f64) -> f64 {
    crate::privacy::lattice::grid_for(sd).unwrap()
}

#[test]
fn counts_are_released_without_rounding_penalty() {
    let mut counts = vec![3.0, 0.0, 17.0, 1.0];
    let release = laplace_count_release(&mut rng(33), &mut counts, 2.0, 4.0).unwrap();
    assert!(
        release.scale >= 4.0 && release.scale <= 4.0 * (1.0 + 1e-9),
        "{}",
        release.scale
    );
    let h = grid_step(4.0);
    assert_eq!(counts[2], 17.0 + release.noise[2]);
    assert_eq!((counts[2] / h).fract(), 0.0);
}

#[test]
fn invalid_calibrations_are_errors_not_panics() {
    let mut q = vec![1.0; 3];
    for (sensitivity, sd) in [
        (0.0, 1.0),
        (1.0, 0.0),
        (f64::NAN, 1.0),
        (1.0, f64::INFINITY),
        (-1.0, 1.0),
        (1.0, 1e-320),
    ] {
        assert!(
            gaussian_release(&mut rng(1), &mut q, sensitivity, sd).is_err(),
            "Δ = {sensitivity}, σ = {sd}"
        );
        assert!(
            laplace_release(&mut rng(1), &mut q, sensitivity, sd).is_err(),
            "Δ = {sensitivity}, b = {sd}"
        );
    }
    // A NaN query coordinate stays NaN (callers' finiteness checks fire); others are released.
    let mut q = vec![f64::NAN, 2.0];
    gaussian_release(&mut rng(2), &mut q, 1.0, 1.0).unwrap();
    assert!(q[0].is_nan() && q[1].is_finite());
}

#[test]
fn recording_audit_keeps_every_draw() {
    let mut audit = RecordingAudit::default();
    audit.record(NoiseDraw {
        label: "test",
        distribution: "gaussian",
        scale: 1.0,
        grid: 0.25,
        values: vec![0.5, -0.25],
    });
    audit.record(NoiseDraw {
        label: "test",
        distribution: "laplace",
        scale: 2.0,
        grid: 0.0,
        values: vec![1.0],
    });
    assert_eq!(audit.draws.len(), 2);
    assert_eq!(audit.draws[0].values, vec![0.5, -0.25]);
    assert_eq!(audit.draws[1].scale, 2.0);
}
