//! The exact samplers against their probability mass functions, computed here independently in
//! floating point (a χ² goodness-of-fit test per distribution), plus symmetry, the variance of
//! large-σ draws, and fixed-seed reference vectors.

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use super::*;
use crate::privacy::testing::check_gaussian_scale;

fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

/// χ² statistic of `counts` (indexed by value − `offset`) against `pmf`, with the tail beyond
/// the table folded into one cell; returns (statistic, degrees of freedom).
fn chi_square(draws: &[i128], pmf: impl Fn(i128) -> f64, half_width: i128) -> (f64, f64) {
    let n = draws.len() as f64;
    let cells = (2 * half_width + 1) as usize;
    let mut counts = vec![0.0; cells + 1];
    for &y in draws {
        let i = if y.abs() <= half_width {
            (y + half_width) as usize
        } else {
            cells
        };
        counts[i] += 1.0;
    }
    let mut expected: Vec<f64> = (-half_width..=half_width).map(|y| n * pmf(y)).collect();
    let inside: f64 = expected.iter().sum();
    expected.push((n - inside).max(0.0));
    let mut stat = 0.0;
    let mut df = -1.0;
    for (o, e) in counts.iter().zip(&expected) {
        if *e > 5.0 {
            stat += (o - e).powi(2) / e;
            df += 1.0;
        }
    }
    (stat, df)
}

/// Accepts χ² below df + 6·√(2·df) (≈ 6 standard deviations of the χ² distribution).
fn assert_fits(stat: f64, df: f64, what: &str) {
    let limit = df + 6.0 * (2.0 * df).sqrt();
    assert!(
        stat <= limit,
        "{what}: χ² = {stat:.1} with {df} degrees of freedom (limit {limit:.1})"
    );
}

fn discrete_gaussian_pmf(variance: f64) -> impl Fn(i128) -> f64 {
    let weight = move |y: i128| (-((y * y) as f64) / (2.0 * variance)).exp();
    let bound = (40.0 * variance.sqrt()) as i128 + 10;
    let total: f64 = (-bound..=bound).map(weight).sum();
    move |y| weight(y) / total
}

fn discrete_laplace_pmf(scale: f64) -> impl Fn(i128) -> f64 {
    let q = (-1.0 / scale).exp();
    move |y: i128| (1.0 - q) / (1.0 + q) * q.powf(y.unsigned_abs() as f64)
}

#[test]
fn bernoulli_exp_matches_exp_minus_gamma() {
    let mut rng = rng(1);
    let trials = 40_000.0;
    for (n, d) in [
        (0u128, 1u128),
        (1, 3),
        (1, 1),
        (5, 7),
        (7, 2),
        (13, 4),
        (1 << 100, 1 << 99),
    ] {
        let hits = (0..trials as usize)
            .filter(|_| bernoulli_exp(&mut rng, n, d))
            .count() as f64;
        let p = (-(n as f64) / d as f64).exp();
        let sd = (trials * p * (1.0 - p)).sqrt().max(1e-9);
        let z = (hits - trials * p) / sd;
        assert!(
            z.abs() <= 5.0,
            "exp(−{n}/{d}) = {p}: {hits} hits of {trials} (z = {z:.2})"
        );
    }
}

#[test]
fn discrete_laplace_matches_its_pmf() {
    for (seed, t) in [(2u64, 1u128), (3, 3), (4, 10)] {
        let sampler = DiscreteLaplace::new(t).unwrap();
        let mut rng = rng(seed);
        let draws: Vec<i128> = (0..60_000).map(|_| sampler.sample(&mut rng)).collect();
        let (stat, df) = chi_square(&draws, discrete_laplace_pmf(t as f64), 8 * t as i128);
        assert_fits(stat, df, &format!("discrete Laplace t = {t}"));
        // A scale off by 15 % is caught by the same test.
        let (stat, df) = chi_square(&draws, discrete_laplace_pmf(t as f64 * 0.85), 8 * t as i128);
        assert!(
            stat > df + 6.0 * (2.0 * df).sqrt(),
            "t = {t}: scale 0.85·t not rejected"
        );
    }
}

#[test]
fn discrete_gaussian_matches_its_pmf() {
    // (t, m) with σ² = t·m: the proposal scale t need not be ⌊σ⌋ + 1.
    for (seed, t, m) in [(5u64, 1u128, 1u128), (6, 2, 1), (7, 3, 4), (8, 2, 18), (9, 7, 1)] {
        let sampler = DiscreteGaussian::new(t, m).unwrap();
        let variance = (t * m) as f64;
        let mut rng = rng(seed);
        let draws: Vec<i128> = (0..60_000).map(|_| sampler.sample(&mut rng)).collect();
        let half_width = (6.0 * variance.sqrt()) as i128 + 1;
        let (stat, df) = chi_square(&draws, discrete_gaussian_pmf(variance), half_width);
        assert_fits(stat, df, &format!("discrete Gaussian σ² = {t}·{m}"));
        let (stat, df) = chi_square(&draws, discrete_gaussian_pmf(variance * 0.85 * 0.85), half_width);
        assert!(
            stat > df + 6.0 * (2.0 * df).sqrt(),
            "σ² = {variance}: 0.85σ not rejected"
        );
    }
}

#[test]
fn draws_are_symmetric_about_zero() {
    let gauss = DiscreteGaussian::with_variance_at_least(9).unwrap();
    let lap = DiscreteLaplace::new(4).unwrap();
    let mut rng = rng(10);
    let gaussian: Vec<i128> = (0..40_000).map(|_| gauss.sample(&mut rng)).collect();
    let laplace: Vec<i128> = (0..40_000).map(|_| lap.sample(&mut rng)).collect();
    for (name, draws) in [("gaussian", gaussian), ("laplace", laplace)] {
        let positive = draws.iter().filter(|v| **v > 0).count() as f64;
        let negative = draws.iter().filter(|v| **v < 0).count() as f64;
        let z = (positive - negative) / (positive + negative).sqrt();
        assert!(
            z.abs() <= 5.0,
            "{name}: {positive} positive against {negative} negative"
        );
        // And value by value: |z| for the most common magnitudes.
        for y in 1..4i128 {
            let (p, n) = (
                draws.iter().filter(|v| **v == y).count() as f64,
                draws.iter().filter(|v| **v == -y).count() as f64,
            );
            let z = (p - n) / (p + n).sqrt();
            assert!(z.abs() <= 5.0, "{name}: P[{y}] against P[−{y}]: {p} vs {n}");
        }
    }
}

#[test]
fn large_variance_draws_have_the_requested_sd_and_an_under_noised_twin_fails() {
    // σ ≈ 2³⁰, the size the lattice uses.
    let variance: u128 = (1u128 << 60) + 12_345;
    let sampler = DiscreteGaussian::with_variance_at_least(variance).unwrap();
    assert!(sampler.variance() >= variance && sampler.variance() - variance < 2 * isqrt(variance));
    let sd = (sampler.variance() as f64).sqrt();
    let mut rng = rng(11);
    let draws: Vec<f64> = (0..20_000).map(|_| sampler.sample(&mut rng) as f64).collect();
    check_gaussian_scale(&draws, sd).expect("discrete Gaussian has sd σ");
    let twin = DiscreteGaussian::with_variance_at_least((variance as f64 * 0.85 * 0.85) as u128).unwrap();
    let under: Vec<f64> = (0..20_000).map(|_| twin.sample(&mut rng) as f64).collect();
    check_gaussian_scale(&under, sd).expect_err("0.85σ must fail");
}

#[test]
fn parameters_round_up_and_reject_overflow() {
    for v in [1u128, 2, 3, 10, 99, 1 << 40, (1 << 62) + 1] {
        let g = DiscreteGaussian::with_variance_at_least(v).unwrap();
        let (t, m) = g.parameters();
        assert!(t * m >= v && t == isqrt(v) + 1, "σ² ≥ {v}: t = {t}, m = {m}");
    }
    assert!(DiscreteGaussian::new(0, 1).is_none());
    assert!(DiscreteGaussian::new(1, 0).is_none());
    assert!(DiscreteGaussian::new(1 << 63, 1 << 63).is_none());
    assert!(DiscreteLaplace::new(0).is_none());
    assert!(DiscreteLaplace::new(1 << 64).is_none());
    for n in [0u128, 1, 2, 3, 4, 15, 16, 17, u128::from(u64::MAX), u128::MAX] {
        let r = isqrt(n);
        assert!(
            r * r <= n && (r + 1).checked_mul(r + 1).is_none_or(|s| s > n),
            "isqrt({n}) = {r}"
        );
    }
}

/// The first draws for fixed seeds. They pin the exact integer algorithm (any change to the
/// order of random choices changes them): CAPE's pair noise depends on every machine producing
/// these same integers from the same ChaCha20 stream.
#[test]
fn fixed_seed_reference_vectors() {
    let mut r = rng(2020);
    let g = DiscreteGaussian::with_variance_at_least(1_000_000).unwrap();
    let gauss: Vec<i128> = (0..8).map(|_| g.sample(&mut r)).collect();
    let l = DiscreteLaplace::new(1000).unwrap();
    let lap: Vec<i128> = (0..8).map(|_| l.sample(&mut r)).collect();
    assert_eq!(gauss, REFERENCE_GAUSSIAN, "discrete Gaussian σ² = 10⁶, seed 2020");
    assert_eq!(
        lap, REFERENCE_LAPLACE,
        "discrete Laplace t = 1000, after the Gaussian draws"
    );
}

const REFERENCE_GAUSSIAN: [i128; 8] = [-4, -364, -139, -1282, -690, 1765, 1333, -1100];
const REFERENCE_LAPLACE: [i128; 8] = [-248, -474, -5171, 1333, -609, -330, 1767, 2093];
