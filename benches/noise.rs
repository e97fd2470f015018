//! Draws per second of the exact discrete samplers against the floating-point Box–Muller they
//! replaced, and the noise time of two typical releases. Prints numbers for docs/design/noise.md;
//! asserts nothing. Run: `cargo bench --bench noise` (or `cargo test --bench noise` for a
//! debug-profile run).

use std::hint::black_box;
use std::time::Instant;

use privpca::linalg::Matrix;
use privpca::privacy::noise::{gaussian_release, gaussian_symmetric_release, laplace_release};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rand_distr::{Distribution, StandardNormal};

fn rate(draws: usize, seconds: f64) -> String {
    format!("{:.2} M draws/s", draws as f64 / seconds / 1e6)
}

fn main() {
    let n = 1_000_000;
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let start = Instant::now();
    let mut acc = 0.0;
    for _ in 0..n {
        let z: f64 = StandardNormal.sample(&mut rng);
        acc += 2.0 * z;
    }
    black_box(acc);
    let old = start.elapsed().as_secs_f64();
    println!("floating-point N(0, σ²) (rand_distr, ChaCha20): {}", rate(n, old));

    let mut query = vec![0.5; n];
    let start = Instant::now();
    gaussian_release(&mut rng, &mut query, 1.0, 2.0).expect("calibrated");
    let discrete = start.elapsed().as_secs_f64();
    println!(
        "discrete Gaussian release (σ/h ≈ 2³⁰): {} ({:.1}× slower)",
        rate(n, discrete),
        discrete / old
    );

    let mut query = vec![0.5; n];
    let start = Instant::now();
    laplace_release(&mut rng, &mut query, 1.0, 2.0).expect("calibrated");
    let lap = start.elapsed().as_secs_f64();
    println!("discrete Laplace release: {}", rate(n, lap));

    // analyze_gauss at d = 1000: d(d+1)/2 = 500 500 draws.
    let d = 1000;
    let mut a = Matrix::from_fn(d, d, |i, j| ((i + j) as f64).sin());
    let start = Instant::now();
    gaussian_symmetric_release(&mut rng, &mut a, 1.0, 22.4).expect("calibrated");
    println!(
        "analyze_gauss noise, d = 1000 (500 500 draws): {:.3} s",
        start.elapsed().as_secs_f64()
    );

    // noisy_power on 100 000 × 500, k = 10, p = 20, L = 20: d·p·L = 200 000 draws.
    let start = Instant::now();
    for _ in 0..20 {
        let mut y = Matrix::from_element(500, 20, 3.0);
        gaussian_release(&mut rng, y.as_mut_slice(), 1.0, 5.0).expect("calibrated");
        black_box(&y);
    }
    println!(
        "noisy_power noise, d = 500, p = 20, L = 20 (200 000 draws): {:.3} s",
        start.elapsed().as_secs_f64()
    );
}
