//! Tests of the Bingham sampler against the exact density (numerical integration), plus the
//! statistical helpers the eigen_sampling tests share.

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use super::*;

use std::f64::consts::PI;

// ---- Statistical helpers (shared with the eigen_sampling tests). ----

/// sqrt(n)·D above which a Kolmogorov–Smirnov test rejects at level ≈ 0.001 (the asymptotic
/// critical value 1.95).
pub(crate) const KS_LIMIT: f64 = 1.95;

/// sqrt(n)·D for the values F(x_i) of the hypothesised CDF at the sample points (any order):
/// under the hypothesis they are iid Uniform(0, 1).
pub(crate) fn ks_statistic(cdf_values: &[f64]) -> f64 {
    let mut u = cdf_values.to_vec();
    u.sort_by(f64::total_cmp);
    let n = u.len() as f64;
    let d = u
        .iter()
        .enumerate()
        .map(|(i, &ui)| ((i as f64 + 1.0) / n - ui).max(ui - i as f64 / n))
        .fold(0.0, f64::max);
    d * n.sqrt()
}

/// The KS test of `cdf_values` against Uniform(0, 1), as a Result.
pub(crate) fn check_uniform(cdf_values: &[f64]) -> Result<(), String> {
    let stat = ks_statistic(cdf_values);
    let ok = stat <= KS_LIMIT;
    if ok {
        Ok(())
    } else {
        Err(format!(
            "KS statistic sqrt(n)·D = {stat:.3} above {KS_LIMIT} (n = {})",
            cdf_values.len()
        ))
    }
}

/// Maps U ~ Uniform(0, 1) to Laplace(0, 1) by the inverse CDF, so that a uniformity question
/// becomes a scale question for [`crate::privacy::testing::check_laplace_scale`].
pub(crate) fn uniform_to_laplace(u: f64) -> f64 {
    if u < 0.5 {
        (2.0 * u).ln()
    } else {
        -(2.0 * (1.0 - u)).ln()
    }
}

/// Composite Simpson rule with `n` (rounded up to even) intervals.
fn simpson(f: impl Fn(f64) -> f64, lo: f64, hi: f64, n: usize) -> f64 {
    let n = n + n % 2;
    let h = (hi - lo) / n as f64;
    let mut sum = f(lo) + f(hi);
    for i in 1..n {
        sum += f(lo + i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
    }
    sum * h / 3.0
}

/// CDF at φ ∈ [−π, π] of the von Mises distribution with mean 0 and parameter κ (any sign):
/// density ∝ exp(κ·cos s), integrated numerically.
pub(crate) fn von_mises_cdf(phi: f64, kappa: f64) -> f64 {
    let w = |s: f64| (kappa * s.cos() - kappa.abs()).exp();
    let n = 4000 + (400.0 * kappa.abs().sqrt()) as usize;
    let total = simpson(w, -PI, PI, n);
    let part = simpson(w, -PI, phi, (n as f64 * (phi + PI) / (2.0 * PI)) as usize + 2);
    (part / total).clamp(0.0, 1.0)
}

/// Probability integral transform of the pair (y₀, y₁) of a Bingham draw with parameters
/// (a₀, a₁) on those two coordinates, conditional on all the other coordinates.
///
/// Given the other coordinates, (y₀, y₁) = r·(cos θ, sin θ) with r fixed, the uniform measure
/// on the sphere is uniform in θ (it is invariant under rotations of that plane), so θ has
/// density ∝ exp(−r²(a₀cos²θ + a₁sin²θ)) ∝ exp(κ·cos 2θ) with κ = r²(a₁ − a₀)/2: φ = 2θ
/// (mod 2π) is von Mises(0, κ). The returned F_κ(φ) is exactly Uniform(0, 1) under the
/// hypothesis, in any dimension, and iid across independent draws.
pub(crate) fn pair_pit(y0: f64, y1: f64, a0: f64, a1: f64) -> f64 {
    let r2 = y0 * y0 + y1 * y1;
    let kappa = r2 * (a1 - a0) / 2.0;
    let mut phi = 2.0 * y1.atan2(y0);
    if phi > PI {
        phi -= 2.0 * PI;
    } else if phi <= -PI {
        phi += 2.0 * PI;
    }
    von_mises_cdf(phi, kappa)
}

/// E[cos φ] and Var[cos φ] under von Mises(0, κ) (any sign of κ), by the trapezoid rule on the
/// period (exponentially accurate for a periodic analytic integrand): E cos φ = I₁(κ)/I₀(κ) and
/// E cos² φ = (1 + I₂(κ)/I₀(κ))/2, computed without Bessel functions.
/// The moments are taken of 1 − cos s = 2·sin²(s/2), which keeps the variance accurate when it
/// is tiny (large κ); κ < 0 is the mirror image (mean negated, same variance).
pub(crate) fn von_mises_cos_moments(kappa: f64) -> (f64, f64) {
    let k = kappa.abs();
    let n = 128 + (40.0 * k.sqrt()) as usize;
    let (mut z, mut m1, mut m2) = (0.0, 0.0, 0.0);
    for i in 0..n {
        let s = -PI + 2.0 * PI * i as f64 / n as f64;
        let gap = 2.0 * (s / 2.0).sin().powi(2);
        let w = (-k * gap).exp();
        z += w;
        m1 += w * gap;
        m2 += w * gap * gap;
    }
    let (m1, m2) = (m1 / z, m2 / z);
    let mean = 1.0 - m1;
    (if kappa < 0.0 { -mean } else { mean }, (m2 - m1 * m1).max(0.0))
}

/// cos φ and κ of the coordinate pair (y₀, y₁) of a Bingham draw with parameters (a₀, a₁) on
/// it, as in [`pair_pit`]: given the other coordinates, φ = 2·atan2(y₁, y₀) is von Mises(0, κ)
/// with κ = r²(a₁ − a₀)/2, and cos φ = (y₀² − y₁²)/r².
pub(crate) fn pair_cos(y0: f64, y1: f64, a0: f64, a1: f64) -> (f64, f64) {
    let r2 = y0 * y0 + y1 * y1;
    ((y0 * y0 - y1 * y1) / r2, r2 * (a1 - a0) / 2.0)
}

/// The concentration test: z = Σ sign(κᵢ)·(cos φᵢ − E_κᵢ cos φ)/sqrt(Σ Var_κᵢ cos φ) over
/// pairs (cos φᵢ, κᵢ) from [`pair_cos`]. It is the score test of a common factor on the κᵢ
/// (d/dκ of E cos φ is Var cos φ), so it is the most sensitive to a mis-scaled concentration: a
/// draw with concentration c·t moves E cos φ by about (c − 1)·κ·Var, and z > 0 means the draws
/// are more concentrated than calibrated. Conditionally on the past each term has mean 0, so z
/// is ≈ N(0, 1) under the hypothesis (martingale CLT).
pub(crate) fn concentration_z(pairs: &[(f64, f64)]) -> f64 {
    let (mut sum, mut var) = (0.0, 0.0);
    for &(cos, kappa) in pairs {
        let (mean, v) = von_mises_cos_moments(kappa);
        sum += if kappa < 0.0 { mean - cos } else { cos - mean };
        var += v;
    }
    sum / var.sqrt()
}

/// [`concentration_z`] within ±[`crate::privacy::testing::Z_THRESHOLD`], as a Result (NaN fails).
pub(crate) fn check_concentration(pairs: &[(f64, f64)]) -> Result<(), String> {
    let z = concentration_z(pairs);
    let ok = z.abs() <= crate::privacy::testing::Z_THRESHOLD;
    if ok {
        Ok(())
    } else {
        Err(format!(
            "concentration score z = {z:.2} (n = {}): the draws are {} concentrated than calibrated",
            pairs.len(),
            if z > 0.0 { "more" } else { "less" }
        ))
    }
}

// ---- Fixtures. ----

fn draws(bingham: &Bingham, n: usize, seed: u64) -> (Vec<Vec<f64>>, u64) {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut proposals = 0;
    let out = (0..n)
        .map(|_| {
            let draw = bingham.sample(&mut rng).expect("sampler works");
            proposals += draw.proposals;
            draw.direction
        })
        .collect();
    (out, proposals)
}

/// The exact CDF of θ = atan2(y₁, y₀) ∈ (−π, π] for q = 2, by cumulative trapezoids.
fn circle_cdf(a: [f64; 2]) -> impl Fn(f64) -> f64 {
    let n = 200_000;
    let h = 2.0 * PI / n as f64;
    let density = move |t: f64| (-(a[0] * t.cos().powi(2) + a[1] * t.sin().powi(2))).exp();
    let mut cum = vec![0.0; n + 1];
    for i in 1..=n {
        let t = -PI + i as f64 * h;
        cum[i] = cum[i - 1] + 0.5 * h * (density(t - h) + density(t));
    }
    let total = cum[n];
    move |theta: f64| {
        let x = (theta + PI) / h;
        let i = (x.floor() as usize).min(n - 1);
        let frac = x - i as f64;
        (cum[i] + frac * (cum[i + 1] - cum[i])) / total
    }
}

/// The exact CDF of y₀ ∈ [−1, 1] for q = 3. By Archimedes the uniform measure on S² is
/// dy₀·dφ with (y₁, y₂) = sqrt(1 − y₀²)(cos φ, sin φ), so the density of y₀ is
/// ∫ exp(−a₀y₀² − (1 − y₀²)(a₁cos²φ + a₂sin²φ)) dφ (periodic trapezoid rule in φ).
fn sphere_first_coordinate_cdf(a: [f64; 3]) -> impl Fn(f64) -> f64 {
    let (n, m) = (40_000, 256);
    let h = 2.0 / n as f64;
    let density = move |c: f64| {
        let rest = 1.0 - c * c;
        (0..m)
            .map(|j| {
                let phi = 2.0 * PI * j as f64 / m as f64;
                (-(a[0] * c * c) - rest * (a[1] * phi.cos().powi(2) + a[2] * phi.sin().powi(2))).exp()
            })
            .sum::<f64>()
    };
    let mut cum = vec![0.0; n + 1];
    let mut prev = density(-1.0);
    for i in 1..=n {
        let next = density(-1.0 + i as f64 * h);
        cum[i] = cum[i - 1] + 0.5 * h * (prev + next);
        prev = next;
    }
    let total = cum[n];
    move |c: f64| {
        let x = ((c + 1.0) / h).clamp(0.0, n as f64);
        let i = (x.floor() as usize).min(n - 1);
        let frac = x - i as f64;
        (cum[i] + frac * (cum[i + 1] - cum[i])) / total
    }
}

fn angles_against(samples: &[Vec<f64>], cdf: &impl Fn(f64) -> f64) -> Vec<f64> {
    samples.iter().map(|y| cdf(y[1].atan2(y[0]))).collect()
}

// ---- The envelope. ----

#[test]
fn b_solves_kent_equation_in_closed_forms() {
    // q = 1: 1/b = 1.
    assert_eq!(solve_b(&[0.0]), 1.0);
    // Uniform: q/b = 1.
    for q in [2, 3, 10, 500] {
        let b = solve_b(&vec![0.0; q]);
        assert!((b - q as f64).abs() <= 1e-12 * q as f64, "q = {q}: b = {b}");
    }
    // a = (0, c): 1/b + 1/(b + 2c) = 1 ⇔ b = 1 − c + sqrt(c² + 1) = 1 + 1/(sqrt(c² + 1) + c).
    for c in [1e-6, 0.5, 1.0, 7.0, 1e3, 1e9] {
        let want = 1.0 + 1.0 / ((c * c + 1.0_f64).sqrt() + c);
        let b = solve_b(&[0.0, c]);
        assert!((b - want).abs() <= 1e-12 * want, "c = {c}: {b} vs {want}");
    }
}

#[test]
fn b_is_a_root_in_range_for_random_parameters() {
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    for q in [2, 3, 8, 50, 400] {
        for scale in [1e-3, 1.0, 1e2, 1e6, 1e12] {
            let mut a: Vec<f64> = (0..q).map(|_| scale * rng.random::<f64>()).collect();
            a[q / 2] = 0.0;
            let b = solve_b(&a);
            assert!((1.0..=q as f64).contains(&b), "q = {q}, scale {scale}: b = {b}");
            let residual = a.iter().map(|aj| 1.0 / (b + 2.0 * aj)).sum::<f64>() - 1.0;
            assert!(
                residual.abs() <= 1e-12,
                "q = {q}, scale {scale}: residual {residual:e}"
            );
        }
    }
}

/// ln f* − ln g* ≤ ln M(b) on the sphere, with equality where s = (q − b)/2.
#[test]
fn envelope_bounds_the_target_and_is_tight() {
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    for a in [
        vec![0.0, 3.0],
        vec![0.0, 1.0, 5.0, 40.0],
        vec![2.0, 0.0, 2.0, 1e4, 7.0, 0.5],
    ] {
        let bingham = Bingham::new(&a).expect("valid");
        let q = a.len();
        for _ in 0..20_000 {
            let z: Vec<f64> = (0..q).map(|_| StandardNormal.sample(&mut rng)).collect();
            let norm = z.iter().map(|v| v * v).sum::<f64>().sqrt();
            let y: Vec<f64> = z.iter().map(|v| v / norm).collect();
            assert!(bingham.log_acceptance(&y) <= 1e-12, "{a:?}");
        }
        // A point with s = (q − b)/2 exists when that is ≤ max a (mix the a = 0 and a_max axes).
        let (amax, imax) = bingham
            .a()
            .iter()
            .enumerate()
            .fold((0.0, 0), |(m, im), (i, &v)| if v > m { (v, i) } else { (m, im) });
        let target = (q as f64 - bingham.b()) / 2.0;
        if target <= amax {
            let izero = bingham.a().iter().position(|&v| v == 0.0).expect("a zero");
            let mut y = vec![0.0; q];
            y[imax] = (target / amax).sqrt();
            y[izero] = (1.0 - target / amax).sqrt();
            assert!(bingham.log_acceptance(&y).abs() <= 1e-10, "{a:?}");
        }
    }
}

// ---- Exactness against the density. ----

/// q = 2: the angle's empirical CDF matches the exact one (KS), from nearly uniform to very
/// concentrated, including a zero that is not in the first coordinate.
#[test]
fn circle_draws_match_the_exact_density() {
    for (i, a) in [[0.0, 0.3], [0.0, 3.0], [30.0, 0.0], [0.0, 3000.0], [1.0, 1.0]]
        .into_iter()
        .enumerate()
    {
        let bingham = Bingham::new(&a).expect("valid");
        let (samples, _) = draws(&bingham, 4000, 10 + i as u64);
        let cdf = circle_cdf(a);
        check_uniform(&angles_against(&samples, &cdf)).unwrap_or_else(|e| panic!("{a:?}: {e}"));
    }
}

/// The concentration score test on q = 2 (r = 1, κ = (a₁ − a₀)/2): 4 000 draws pass at the
/// right parameters and fail when a is scaled by 1.2 either way (a sampler 1.2× too
/// concentrated, i.e. an under-noised exponential mechanism, or 1.2× too flat).
#[test]
fn the_concentration_test_sees_a_factor_of_1_2() {
    for (i, a) in [[0.0, 3.0], [0.0, 30.0], [0.0, 3000.0], [40.0, 0.0]]
        .into_iter()
        .enumerate()
    {
        // z ≈ 7.2–8.3 at × 1.2 and 8.9–10 at / 1.2 for these seeds (threshold 5).
        let pairs = |b: &Bingham, seed: u64| -> Vec<(f64, f64)> {
            let (samples, _) = draws(b, 4000, seed);
            samples.iter().map(|y| pair_cos(y[0], y[1], a[0], a[1])).collect()
        };
        let right = Bingham::new(&a).expect("valid");
        assert!(
            concentration_z(&pairs(&right, 60 + i as u64)).abs() < 3.5,
            "{a:?}"
        );
        check_concentration(&pairs(&right, 60 + i as u64)).unwrap_or_else(|e| panic!("{a:?}: {e}"));
        for factor in [1.2, 1.0 / 1.2] {
            let wrong = Bingham::new(&[a[0] * factor, a[1] * factor]).expect("valid");
            let z = concentration_z(&pairs(&wrong, 70 + i as u64));
            assert!((z > 0.0) == (factor > 1.0), "{a:?} × {factor}: z = {z}");
            let result = check_concentration(&pairs(&wrong, 70 + i as u64));
            assert!(result.is_err(), "{a:?} × {factor} not detected");
        }
    }
}

#[test]
fn von_mises_moments_match_closed_forms() {
    // κ = 0: uniform, E cos = 0, Var = 1/2. κ = 1: I₁(1)/I₀(1) = 0.446389965896535 (series).
    let (m, v) = von_mises_cos_moments(0.0);
    assert!(m.abs() < 1e-14 && (v - 0.5).abs() < 1e-14);
    let (m, _) = von_mises_cos_moments(1.0);
    assert!((m - 0.446_389_965_896_535).abs() < 1e-13, "{m}");
    // Large κ: E cos ≈ 1 − 1/(2κ) − 1/(8κ²), Var ≈ 1/(2κ²).
    let k = 1e4;
    let (m, v) = von_mises_cos_moments(k);
    assert!(
        (m - (1.0 - 1.0 / (2.0 * k) - 1.0 / (8.0 * k * k))).abs() < 1e-10,
        "{m}"
    );
    assert!((v * 2.0 * k * k - 1.0).abs() < 1e-3, "{v}");
    // Odd in κ for the mean, even for the variance.
    let (a, b) = (von_mises_cos_moments(2.5), von_mises_cos_moments(-2.5));
    assert!((a.0 + b.0).abs() < 1e-14 && (a.1 - b.1).abs() < 1e-14);
}

/// A sampler run with the wrong concentration (ε off by a factor 2 either way) fails the same
/// test: the test has the power to see a mis-scaled exponential mechanism.
#[test]
fn a_mis_scaled_sampler_fails_the_density_test() {
    for (i, a) in [[0.0, 3.0], [0.0, 30.0], [0.0, 3000.0]].into_iter().enumerate() {
        let cdf = circle_cdf(a);
        for factor in [0.5, 2.0] {
            let wrong = Bingham::new(&[a[0] * factor, a[1] * factor]).expect("valid");
            let (samples, _) = draws(&wrong, 4000, 20 + i as u64);
            let result = check_uniform(&angles_against(&samples, &cdf));
            assert!(result.is_err(), "{a:?} × {factor} not detected");
        }
    }
}

/// q = 3: the first coordinate's empirical CDF matches the exact marginal (KS).
#[test]
fn sphere_draws_match_the_exact_marginal() {
    for (i, a) in [
        [0.0, 1.0, 4.0],
        [0.0, 40.0, 400.0],
        [6.0, 0.0, 2.0],
        [0.0, 0.0, 50.0],
    ]
    .into_iter()
    .enumerate()
    {
        let bingham = Bingham::new(&a).expect("valid");
        let (samples, _) = draws(&bingham, 3000, 30 + i as u64);
        let cdf = sphere_first_coordinate_cdf(a);
        let u: Vec<f64> = samples.iter().map(|y| cdf(y[0])).collect();
        check_uniform(&u).unwrap_or_else(|e| panic!("{a:?}: {e}"));
    }
    // The wrong concentration is seen here too.
    let a = [0.0, 40.0, 400.0];
    let cdf = sphere_first_coordinate_cdf(a);
    let wrong = Bingham::new(&[0.0, 20.0, 200.0]).expect("valid");
    let (samples, _) = draws(&wrong, 3000, 39);
    assert!(check_uniform(&samples.iter().map(|y| cdf(y[0])).collect::<Vec<_>>()).is_err());
}

/// Higher dimensions: the conditional angle of a coordinate pair is exactly von Mises, so its
/// probability integral transform is uniform (KS); a halved concentration fails.
#[test]
fn conditional_pair_angles_are_exact_in_higher_dimensions() {
    for (i, q) in [8_usize, 40].into_iter().enumerate() {
        let a: Vec<f64> = (0..q).map(|j| 25.0 * (j as f64).powf(1.5)).collect();
        let bingham = Bingham::new(&a).expect("valid");
        let (samples, _) = draws(&bingham, 1500, 40 + i as u64);
        let pits = |s: &[Vec<f64>]| {
            s.iter()
                .map(|y| pair_pit(y[0], y[1], a[0], a[1]))
                .collect::<Vec<_>>()
        };
        check_uniform(&pits(&samples)).unwrap_or_else(|e| panic!("q = {q}: {e}"));
        let half: Vec<f64> = a.iter().map(|v| v / 2.0).collect();
        let (wrong, _) = draws(&Bingham::new(&half).expect("valid"), 1500, 50 + i as u64);
        assert!(
            check_uniform(&pits(&wrong)).is_err(),
            "q = {q}: halved concentration not detected"
        );
    }
}

// ---- Efficiency. ----

#[test]
fn limit_acceptance_matches_hand_worked_values() {
    assert!((ln_gamma(5.0) - 24.0_f64.ln()).abs() < 1e-12);
    assert!((ln_gamma(0.5) - PI.sqrt().ln()).abs() < 1e-12);
    assert!((ln_gamma(250.0) - 1128.5237708729908).abs() < 1e-9);
    assert!((limit_acceptance(1) - 1.0).abs() < 1e-12);
    // q = 2: sqrt(2e)/(2√π) = 0.65774.
    let two = (2.0 * std::f64::consts::E).sqrt() / (2.0 * PI.sqrt());
    assert!((limit_acceptance(2) - two).abs() < 1e-12);
    // ≈ sqrt(2/(e·q)) for large q.
    for q in [50, 500, 5000] {
        let approx = (2.0 / (std::f64::consts::E * q as f64)).sqrt();
        assert!((limit_acceptance(q) / approx - 1.0).abs() < 0.02, "q = {q}");
    }
}

/// The acceptance rate does not collapse as the parameters grow: for every shape and every
/// concentration up to 1e12 it stays above 0.8 × the concentrated-limit rate.
#[test]
fn acceptance_rate_stays_bounded_as_the_signal_grows() {
    for q in [2_usize, 5, 20, 100] {
        let floor = 0.8 * limit_acceptance(q);
        for (s, c) in [1e-2, 1.0, 1e2, 1e4, 1e8, 1e12].into_iter().enumerate() {
            let shapes: [Vec<f64>; 3] = [
                (0..q).map(|j| c * j as f64 / (q - 1) as f64).collect(),
                (0..q).map(|j| if j == 0 { 0.0 } else { c }).collect(),
                (0..q).map(|j| if j == q - 1 { c } else { 0.0 }).collect(),
            ];
            for (k, a) in shapes.iter().enumerate() {
                let bingham = Bingham::new(a).expect("valid");
                let n = 600;
                let (_, proposals) = draws(&bingham, n, 1000 + (q * 100 + s * 10 + k) as u64);
                let rate = n as f64 / proposals as f64;
                assert!(
                    rate >= floor,
                    "q = {q}, c = {c}, shape {k}: rate {rate:.4} < {floor:.4}"
                );
            }
        }
    }
}

#[test]
fn uniform_and_one_dimensional_cases_accept_the_first_proposal() {
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    for a in [vec![0.0], vec![5.0], vec![0.0; 7], vec![2.5; 3]] {
        let bingham = Bingham::new(&a).expect("valid");
        assert!(bingham.log_bound().abs() < 1e-12, "{a:?}: M = 1");
        for _ in 0..50 {
            let draw = bingham.sample(&mut rng).expect("sampler works");
            assert_eq!(draw.proposals, 1);
            let norm = draw.direction.iter().map(|v| v * v).sum::<f64>();
            assert!((norm - 1.0).abs() < 1e-14);
        }
    }
}

#[test]
fn exponential_mechanism_shifts_by_the_largest_score() {
    let bingham = Bingham::exponential_mechanism(&[5.0, 3.0, -1.0], 2.0).expect("valid");
    assert_eq!(bingham.a(), &[0.0, 4.0, 12.0]);
    assert_eq!(bingham.dim(), 3);
    // Shifting a does not change the distribution (y is a unit vector).
    assert_eq!(
        Bingham::new(&[3.0, 7.0]).expect("valid"),
        Bingham::new(&[0.0, 4.0]).expect("valid")
    );
}

#[test]
fn unusable_parameters_are_errors() {
    assert_eq!(Bingham::new(&[]), Err(BinghamError::Empty));
    assert_eq!(Bingham::new(&[0.0, f64::NAN]), Err(BinghamError::NonFinite));
    assert_eq!(Bingham::new(&[0.0, f64::INFINITY]), Err(BinghamError::NonFinite));
    assert_eq!(Bingham::new(&[-f64::MAX, f64::MAX]), Err(BinghamError::NonFinite));
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert_eq!(
            Bingham::exponential_mechanism(&[1.0, 0.0], bad),
            Err(BinghamError::Concentration)
        );
    }
    assert_eq!(
        Bingham::exponential_mechanism(&[1.0, f64::NAN], 1.0),
        Err(BinghamError::NonFinite)
    );
    assert_eq!(Bingham::exponential_mechanism(&[], 1.0), Err(BinghamError::Empty));
    // Messages carry no parameter values.
    assert!(!BinghamError::NonFinite.to_string().contains(char::is_numeric));
}
