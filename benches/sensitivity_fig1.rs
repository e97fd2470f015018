//! Seed 000's Figures 1–2 (Nicolas et al. 2024 §5.2): the empirical against the theoretical
//! ratio r(k, n) = E[Δ₀ᵃ]/E[Δ₀ᵇ] (eq. 18) of the two first-iteration sensitivity bounds, for
//! n ∈ {8 000, 12 000} and k = 64, 128, …, 3 968 (the paper's "between 64 and 4000, with a step of
//! 64"), t = 5 runs.
//!
//! The matrices: the paper's X₀ = Q(Ω) with Ω an n×k standard Gaussian (§5.2; Alg. 1 line 3),
//! independent of the data matrix A, so no dataset is involved. We draw Ω with a seeded ChaCha20
//! and take Q with `linalg::thin_qr_q`, exactly as `noisy_power`'s first iterate is formed. The
//! bounds are OUR sensitivity code with a unit change bound (`Neighbours::Entry { u: 1 }`, the
//! paper's eq. 12 normalisation): Δ₀ᵃ = `sensitivity::hardt_price` = √k·max_ij abs(X_ij) (the
//! paper's Δᵃ = Δ^q), Δ₀ᵇ = `sensitivity::row_norm` = max_i ‖X_i:‖₂ (Thm 3.1, eq. 13). The
//! theoretical curve is Approximation 5.1 (eq. 19–20, `benches/support/ratio.rs`).
//!
//! One QR per run serves every k: Householder QR's first k columns of Q(Ω) are Q of Ω's first k
//! columns (the reflectors of the first k columns see only those columns), so X₀ for k is the
//! first k columns of one n×3 968 factor. The k points of one run therefore share their Ω (the
//! paper draws a fresh Ω per k, which makes every point independent but costs one QR per (k,
//! run): about 60× the work). Each point's distribution is the paper's; only the noise between
//! neighbouring points is correlated, so the empirical curve is smoother than the paper's dots.
//! `--independent` draws a fresh Ω for every (k, run), the paper's protocol (hours on 2 cores).
//!
//! Run: `cargo bench --profile dev --bench sensitivity_fig1` (options after `--`: `--quick` for
//! k ≤ 1 024 and 2 runs, `--reps T` runs, `--independent`). Prints a markdown table and writes
//! docs/img/sensitivity_fig1_n8000.png and docs/img/sensitivity_fig1_n12000.png. Nothing is
//! asserted.

#[path = "support/cli.rs"]
mod cli;
#[path = "support/plot.rs"]
mod plot;
#[path = "support/ratio.rs"]
mod ratio;

use std::path::Path;
use std::time::Instant;

use privpca::algorithms::sensitivity::{hardt_price, row_norm};
use privpca::dataset::Neighbours;
use privpca::linalg::{Matrix, thin_qr_q};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rand_distr::{Distribution, StandardNormal};

const SIZES: [usize; 2] = [8_000, 12_000];
const K_STEP: usize = 64;
const K_MAX: usize = 4_000;

/// X₀ = Q(Ω) for an n×k standard Gaussian Ω drawn from `seed`.
fn first_iterate(n: usize, k: usize, seed: u64) -> Matrix {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let omega = Matrix::from_fn(n, k, |_, _| StandardNormal.sample(&mut rng));
    thin_qr_q(&omega)
}

/// (Δ₀ᵃ, Δ₀ᵇ) of the iterate `x` under a unit change bound.
fn bounds(x: &Matrix) -> (f64, f64) {
    let unit = Neighbours::Entry { u: 1.0 };
    (hardt_price(&unit, x), row_norm(&unit, x))
}

/// Sums of (Δ₀ᵃ, Δ₀ᵇ) over `reps` runs at every k of `ks`, for matrices of n rows.
fn measure(n: usize, ks: &[usize], reps: u64, independent: bool) -> Vec<(f64, f64)> {
    let mut sums = vec![(0.0, 0.0); ks.len()];
    let k_max = ks.iter().copied().max().unwrap_or(0);
    for run in 0..reps {
        let seed = 1_000 * n as u64 + run;
        let shared = (!independent).then(|| first_iterate(n, k_max, seed));
        for (i, &k) in ks.iter().enumerate() {
            let x = match &shared {
                Some(q) => q.columns(0, k).into_owned(),
                None => first_iterate(n, k, seed * 10_000 + k as u64),
            };
            let (a, b) = bounds(&x);
            sums[i].0 += a;
            sums[i].1 += b;
        }
    }
    sums
}

fn main() {
    let quick = cli::quick();
    let independent = std::env::args().any(|a| a == "--independent");
    let reps: u64 = cli::reps(if quick { 2 } else { 5 });
    let k_max = if quick { 1_024 } else { K_MAX };
    let ks: Vec<usize> = (K_STEP..=k_max).step_by(K_STEP).collect();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let started = Instant::now();
    println!(
        "t = {reps} run(s) per k, {} Ω; E[Δ₀ᵃ], E[Δ₀ᵇ] are means over the runs",
        if independent {
            "a fresh"
        } else {
            "one shared (per run)"
        }
    );
    println!("\n| n | k | E[Δ₀ᵃ] | E[Δ₀ᵇ] | r empirical | r theoretical (eq. 19–20) |");
    println!("|---|---|---|---|---|---|");
    for n in SIZES {
        let sums = measure(n, &ks, reps, independent);
        let mut empirical = Vec::new();
        let mut theoretical = Vec::new();
        for (&k, &(a, b)) in ks.iter().zip(&sums) {
            let (a, b) = (a / reps as f64, b / reps as f64);
            let r = a / b;
            let theory = ratio::theoretical_ratio(k, n);
            println!("| {n} | {k} | {a:.5} | {b:.5} | {r:.3} | {theory:.3} |");
            empirical.push((k as f64, r));
            theoretical.push((k as f64, theory));
        }
        eprintln!("n = {n} done ({:.0?})", started.elapsed());
        let title = format!("r(k, n) = E[Δ₀ᵃ]/E[Δ₀ᵇ], n = {n}, t = {reps}");
        let chart = plot::Chart {
            title: &title,
            x_label: "k (columns of X₀)",
            y_label: "r(k, n)",
            log_x: false,
            log_y: false,
            y_range: Some((0.0, 7.0)),
        };
        let series = [
            plot::Series {
                name: "empirical (our sensitivity code)".into(),
                points: empirical,
            },
            plot::Series {
                name: "theoretical (Approximation 5.1)".into(),
                points: theoretical,
            },
        ];
        let path = root.join(format!("docs/img/sensitivity_fig1_n{n}.png"));
        plot::write_line_chart(&path, &chart, &series);
    }
    eprintln!("total {:.0?}", started.elapsed());
}
