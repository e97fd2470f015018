//! Tests of the samplers' scale, with the checks of `testing.rs`, and of the symmetric layout.

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use super::*;
use crate::privacy::testing::{check_gaussian_scale, check_laplace_scale};

const DRAWS: usize = 20_000;

fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

fn gaussian_draws(seed: u64, sd: f64) -> Vec<f64> {
    let mut rng = rng(seed);
    (0..DRAWS).map(|_| gaussian(&mut rng, sd)).collect()
}

fn laplace_draws(seed: u64, b: f64) -> Vec<f64> {
    let mut rng = rng(seed);
    (0..DRAWS).map(|_| laplace(&mut rng, b)).collect()
}

fn scaled(values: &[f64], factor: f64) -> Vec<f64> {
    values.iter().map(|v| v * factor).collect()
}

#[test]
fn gaussian_sampler_has_the_requested_sd() {
    for (seed, sd) in [(1, 1.0), (2, 2.5), (3, 1e-3), (4, 1e6)] {
        let draws = gaussian_draws(seed, sd);
        check_gaussian_scale(&draws, sd).expect("correct sampler passes");
    }
}

#[test]
fn under_and_over_noised_gaussian_draws_are_rejected() {
    // The same seeded draws pass at the true scale and fail when scaled by 0.9 or 1.1: with
    // 20 000 draws the χ² z-score of a 10 % error is about 0.19·sqrt(10 000) ≈ 19 ≫ 5.
    let draws = gaussian_draws(7, 3.0);
    check_gaussian_scale(&draws, 3.0).expect("correct sampler passes");
    let under = check_gaussian_scale(&scaled(&draws, 0.9), 3.0).expect_err("sd × 0.9 must fail");
    assert!(under.contains("empirical sd"), "{under}");
    check_gaussian_scale(&scaled(&draws, 1.1), 3.0).expect_err("sd × 1.1 must fail");
    // A shifted mean fails too: 0.1·sd shift gives z ≈ 0.1·sqrt(20 000) ≈ 14.
    let shifted: Vec<f64> = draws.iter().map(|v| v + 0.3).collect();
    let err = check_gaussian_scale(&shifted, 3.0).expect_err("mean shift must fail");
    assert!(err.contains("mean"), "{err}");
}

#[test]
fn laplace_sampler_has_the_requested_scale() {
    for (seed, b) in [(11, 1.0), (12, 0.7), (13, 1e-4), (14, 250.0)] {
        let draws = laplace_draws(seed, b);
        check_laplace_scale(&draws, b).expect("correct sampler passes");
    }
}

#[test]
fn under_noised_laplace_draws_are_rejected() {
    // z ≈ 0.1·sqrt(20 000) ≈ 14 for a 10 % scale error.
    let draws = laplace_draws(17, 2.0);
    check_laplace_scale(&draws, 2.0).expect("correct sampler passes");
    check_laplace_scale(&scaled(&draws, 0.9), 2.0).expect_err("b × 0.9 must fail");
    check_laplace_scale(&scaled(&draws, 1.1), 2.0).expect_err("b × 1.1 must fail");
    // Gaussian draws of the same variance 2b² (σ = b·sqrt(2)) are not Laplace:
    // E|x| = σ·sqrt(2/π) = 2b/sqrt(π) ≈ 1.128·b, so z ≈ 0.128·sqrt(20 000) ≈ 18.
    let gaussian_same_variance = gaussian_draws(18, 2.0 * 2.0_f64.sqrt());
    check_laplace_scale(&gaussian_same_variance, 2.0).expect_err("Gaussian is not Laplace");
}

#[test]
fn gaussian_matrix_has_the_shape_and_scale() {
    let mut rng = rng(21);
    let g = gaussian_matrix(&mut rng, 150, 120, 0.5);
    assert_eq!(g.shape(), (150, 120));
    check_gaussian_scale(g.as_slice(), 0.5).expect("entries are N(0, 0.25)");
    check_gaussian_scale(g.as_slice(), 0.45).expect_err("and not N(0, 0.45²)");
}

#[test]
fn symmetric_noise_mirrors_its_upper_triangle() {
    let d = 60;
    let mut rng = rng(31);
    let (e, draws) = gaussian_symmetric(&mut rng, d, 1.5);
    assert_eq!(e.shape(), (d, d));
    assert_eq!(draws.len(), d * (d + 1) / 2);
    let mut k = 0;
    for j in 0..d {
        for i in 0..=j {
            assert_eq!(e[(i, j)], draws[k], "upper triangle, column by column");
            assert_eq!(e[(j, i)], e[(i, j)], "mirrored below the diagonal");
            k += 1;
        }
    }
    check_gaussian_scale(&draws, 1.5).expect("independent entries are N(0, sd²)");
}

#[test]
fn symmetric_noise_uses_exactly_the_independent_draws() {
    // With the same seed, the symmetric sampler consumes the same stream as d(d+1)/2 scalar
    // draws: each independent entry is one fresh draw, none is reused or skipped.
    let d = 40;
    let (_, draws) = gaussian_symmetric(&mut rng(41), d, 0.8);
    let mut reference = rng(41);
    let scalar: Vec<f64> = (0..d * (d + 1) / 2)
        .map(|_| gaussian(&mut reference, 0.8))
        .collect();
    assert_eq!(draws, scalar);
    // The next draw of both streams agrees as well: nothing extra was consumed.
    let mut after = rng(41);
    let _ = gaussian_symmetric(&mut after, d, 0.8);
    assert_eq!(gaussian(&mut after, 1.0), gaussian(&mut reference, 1.0));
}

#[test]
fn recording_audit_keeps_every_draw() {
    let mut audit = RecordingAudit::default();
    let mut rng = rng(51);
    let (_, draws) = gaussian_symmetric(&mut rng, 3, 1.0);
    audit.record(NoiseDraw {
        label: "test",
        distribution: "gaussian",
        scale: 1.0,
        values: draws.clone(),
    });
    audit.record(NoiseDraw {
        label: "test",
        distribution: "laplace",
        scale: 2.0,
        values: vec![1.0],
    });
    assert_eq!(audit.draws.len(), 2);
    assert_eq!(audit.draws[0].values, draws);
    assert_eq!(audit.draws[1].scale, 2.0);
}
