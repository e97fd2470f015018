//! capePCA against the conventional, local and pooled schemes as ε and N_s vary (Imtiaz &
//! Sarwate, §VI-A, Fig. 2 (a)–(f)). Results and discussion: docs/experiments.md.
//!
//! Data:
//! - *synthetic*: D = 200, K = 50, zero mean, a fixed covariance with eigenvalues 0.9^i, rows
//!   scaled by the largest row norm (the paper's preprocessing, so β = 1);
//! - *digits*: the scikit-learn wheel's digits (D = 64, K = 10), unpacked by
//!   `scripts/real-data.sh` into data/real/ (skipped with a message when absent), centred and
//!   scaled the same way. The paper's MNIST and COVTYPE do not ship in a registry package here.
//!
//! Schemes, all at the same (ε, δ) → ρ (crate's CKS conversion), replace_one, Δ = √2·β²:
//! - `capePCA`: our calibration (`federation::cape`, κ = 1): ρ against the aggregator's joint
//!   view; sum noise sd 1.05–1.11× pooled;
//! - `capePCA (paper's levels)`: v = g = τ_c²/S (eq. 2), the sum at exactly the pooled level,
//!   but the joint view costs 2S/(S+1)·ρ: shown for comparison, not offered;
//! - `conv`: every site adds its own N(0, τ_c²), the sum carries S of them;
//! - `pooled`: `analyze_gauss` on all rows at ρ (the centralised reference);
//! - `local`: `analyze_gauss` on one site's rows at ρ;
//! - `non-dp pool`: exact PCA of the pooled rows (captured energy 1 by definition).
//!
//! Metric: the captured-energy ratio tr(V̂ᵀAV̂)/Σ_{i≤K}λ_i with A = XᵀX/N of the pooled rows
//! (the paper's q^CE divided by the non-private optimum). Mean over 10 runs, as the paper.
//!
//! Run: `cargo bench --profile dev --bench cape_pca_fig2` (about a minute); writes
//! docs/img/cape_pca_fig2_*.png and prints markdown tables.

#[path = "support/data.rs"]
mod data;
#[path = "support/plot.rs"]
mod plot;

use std::path::Path;

use privpca::algorithms::cape_pca::{CapePca, CapePcaConfig, CapePcaParams};
use privpca::algorithms::{Algorithm, Cancelled, DataInput, RunEnv};
use privpca::dataset::{DataContext, Neighbours};
use privpca::linalg::subspace::captured_energy;
use privpca::linalg::{Matrix, gram_t, sym_eig};
use privpca::privacy::noise::gaussian_symmetric_release;
use privpca::privacy::{Delta, Epsilon, PrivacyTarget, Rho, epsilon_delta_to_rho};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rand_distr::{Distribution, StandardNormal};

const DELTA: f64 = 1e-5;
const RUNS: u64 = 10;
const SITES: u32 = 10;
const SCHEMES: [&str; 5] = ["capePCA", "capePCA (paper's levels)", "conv", "pooled", "local"];

struct Data {
    /// Xᵀ, D×N, rows of norm ≤ 1.
    xt: Matrix,
    k: usize,
}

/// Rows scaled so that the largest has norm 1, after centring.
fn normalise(mut xt: Matrix) -> Matrix {
    let mean = xt.column_mean();
    for mut c in xt.column_iter_mut() {
        c -= &mean;
    }
    let max = xt.column_iter().map(|c| c.norm()).fold(0.0, f64::max);
    xt / max
}

fn synthetic(n: usize, seed: u64) -> Data {
    let d = 200;
    let mut rng = ChaCha20Rng::seed_from_u64(1000 + seed);
    let mut g = || -> f64 { StandardNormal.sample(&mut rng) };
    let basis = Matrix::from_fn(d, d, |_, _| g()).qr().q();
    let scales: Vec<f64> = (0..d).map(|i| 0.9f64.powi(i as i32).sqrt()).collect();
    let z = Matrix::from_fn(d, n, |i, _| scales[i] * g());
    Data {
        xt: normalise(&basis * z),
        k: 50,
    }
}

fn digits(root: &Path) -> Option<Data> {
    let xt = data::read_csv(&root.join("data/real/digits.csv"))?;
    Some(Data {
        xt: normalise(xt),
        k: 10,
    })
}

fn top(a: &Matrix, k: usize) -> Matrix {
    sym_eig(a).vectors.columns(0, k).into_owned()
}

/// Captured energy of each scheme, one run, with S sites of `n_s` rows each (the first S·n_s
/// rows of `data`).
fn one_run(data: &Data, sites: u32, n_s: usize, rho: f64, seed: u64) -> [f64; 5] {
    let n = sites as usize * n_s;
    let xt = data.xt.columns(0, n).into_owned();
    let d = xt.nrows();
    let k = data.k;
    let a = gram_t(&xt);
    let sigma = &a / n as f64;
    let beta = 1.0;
    let ctx = DataContext {
        d,
        n: Some(n),
        neighbours: Neighbours::ReplaceOne {
            beta,
            alpha: (d as f64).sqrt(),
        },
        public: false,
        sparse: false,
    };
    let target = PrivacyTarget::from_rho(Rho::new(rho).expect("ρ"), None);
    let config: CapePcaConfig = CapePca
        .configure(
            CapePcaParams {
                k,
                sites: Some(sites),
                site_shares: None,
                dropouts: Vec::new(),
                pair_ratio: None,
            },
            &ctx,
            &target,
        )
        .expect("configures");
    let tau = config.noise.pooled_sd;
    let mut paper = config.clone();
    paper.noise.pair_sd = tau / f64::from(sites).sqrt();
    paper.noise.own_sd = tau / f64::from(sites).sqrt();
    paper.noise.aggregator_sd = tau * (1.0 - 1.0 / f64::from(sites)).sqrt();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let cape_run = |config: &CapePcaConfig, rng: &mut ChaCha20Rng| {
        let mut progress = |_: u32, _: u32| -> Result<(), Cancelled> { Ok(()) };
        let mut env = RunEnv::new(rng, &mut progress);
        let out = CapePca
            .run(DataInput::Records { xt: (&xt).into() }, config, &ctx, &mut env)
            .expect("runs");
        captured_energy(&out.basis, &sigma)
    };
    let ours = cape_run(&config, &mut rng);
    let paper_levels = cape_run(&paper, &mut rng);
    let perturbed = |a: &Matrix, sd: f64, rng: &mut ChaCha20Rng| {
        let mut noisy = a.clone();
        gaussian_symmetric_release(rng, &mut noisy, config.noise.sensitivity, sd).expect("calibrated");
        captured_energy(&top(&noisy, k), &sigma)
    };
    let conv = perturbed(&a, tau * f64::from(sites).sqrt(), &mut rng);
    let pooled = perturbed(&a, tau, &mut rng);
    let local_a = gram_t(&xt.columns(0, n_s).into_owned());
    let local = perturbed(&local_a, tau, &mut rng);
    [ours, paper_levels, conv, pooled, local]
}

fn mean_runs(data: &Data, sites: u32, n_s: usize, rho: f64) -> [f64; 5] {
    let mut sum = [0.0; 5];
    for seed in 0..RUNS {
        for (s, v) in sum.iter_mut().zip(one_run(data, sites, n_s, rho, seed)) {
            *s += v / RUNS as f64;
        }
    }
    sum
}

fn rho_of(epsilon: f64) -> f64 {
    epsilon_delta_to_rho(Epsilon::new(epsilon).expect("ε"), Delta::new(DELTA).expect("δ"))
}

fn sweep(
    root: &Path,
    data: &Data,
    file: &str,
    title: &str,
    x_label: &str,
    points: &[(f64, u32, usize, f64)],
    log_x: bool,
) {
    println!("\n### {title}\n");
    println!("| {x_label} | {} | non-dp pool |", SCHEMES.join(" | "));
    println!("|---|{}---|", "---|".repeat(SCHEMES.len()));
    let mut series: Vec<plot::Series> = SCHEMES
        .iter()
        .map(|s| plot::Series {
            name: (*s).to_string(),
            points: Vec::new(),
        })
        .collect();
    series.push(plot::Series {
        name: "non-dp pool".into(),
        points: Vec::new(),
    });
    for &(x, sites, n_s, rho) in points {
        let means = mean_runs(data, sites, n_s, rho);
        let cells: Vec<String> = means.iter().map(|v| format!("{v:.3}")).collect();
        println!("| {x} | {} | 1.000 |", cells.join(" | "));
        for (s, v) in series.iter_mut().zip(means.iter().chain(std::iter::once(&1.0))) {
            s.points.push((x, *v));
        }
    }
    let chart = plot::Chart {
        title,
        x_label,
        y_label: "captured energy (ratio to non-private)",
        log_x,
        log_y: false,
        y_range: Some((0.0, 1.02)),
    };
    let path = root.join("docs/img").join(file);
    plot::line_chart(&path, &chart, &series).expect("plot");
    println!("\nwrote {}", path.display());
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let epsilons = [0.1, 0.25, 0.5, 1.0, 2.0, 4.0];
    let synth = synthetic(SITES as usize * 5000, 0);
    let eps_points: Vec<(f64, u32, usize, f64)> =
        epsilons.iter().map(|&e| (e, SITES, 1000, rho_of(e))).collect();
    sweep(
        root,
        &synth,
        "cape_pca_fig2_synthetic_eps.png",
        "capePCA, synthetic (D = 200, K = 50, S = 10, N_s = 1000, δ = 1e-5)",
        "ε",
        &eps_points,
        true,
    );
    let ns_points: Vec<(f64, u32, usize, f64)> = [200usize, 500, 1000, 2000, 5000]
        .iter()
        .map(|&n_s| (n_s as f64, SITES, n_s, rho_of(0.5)))
        .collect();
    sweep(
        root,
        &synth,
        "cape_pca_fig2_synthetic_ns.png",
        "capePCA, synthetic (D = 200, K = 50, S = 10, ε = 0.5, δ = 1e-5)",
        "N_s",
        &ns_points,
        true,
    );
    match digits(root) {
        Some(data) => {
            let n_s = data.xt.ncols() / 3;
            // N = 1 797 rows only: the informative range of ε is far above the synthetic one.
            let points: Vec<(f64, u32, usize, f64)> = [1.0, 4.0, 16.0, 64.0, 256.0]
                .iter()
                .map(|&e| (e, 3, n_s, rho_of(e)))
                .collect();
            sweep(
                root,
                &data,
                "cape_pca_fig2_digits_eps.png",
                &format!("capePCA, digits (D = 64, K = 10, S = 3, N_s = {n_s}, δ = 1e-5)"),
                "ε",
                &points,
                true,
            );
        }
        None => println!("\ndigits: data/real/digits.csv is missing; run scripts/real-data.sh first"),
    }
}
