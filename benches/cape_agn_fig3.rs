//! Imtiaz & Sarwate, Fig. 3 (§VI-B): capeAGN on the mixture-of-Gaussians model, q^comp against
//! ε (top row) and against the per-site sample size N_s (bottom row), for (D, K) = (10, 5) and
//! (50, 10), σ² = 0.05, ‖a_k‖ ≤ 1, S = 5 sites, δ = 0.01, ε and δ split evenly between the
//! two stages (we split ρ evenly, which is the same thing in zCDP).
//!
//! Methods, as in the paper: `capeAGN` (this crate's `cape_agn::simulate`: the real CAPE
//! messages, joint-view calibration), `conv` (no correlated noise: every site adds its own
//! N(0, τ²) with τ = Δ/sqrt(2·ρ/2) to each stage's statistic, so the sum carries S·τ²),
//! `local` (site 1 alone with its own τ), `non-priv` (pooled, no noise) and `rand. vect.`
//! (random unit vectors scaled to the mean true norm). All use the same whitening, tensor power
//! method (L = 20 starts, N = 30 iterations) and un-whitening functions.
//!
//! Data: means a_k = orthonormal directions (QR of a Gaussian matrix) with norms drawn in
//! [0.6, 1], weights ∝ 1 + k/(2K), x = a_h + N(0, σ²I). The public row bound is
//! β = max‖a_k‖ + σ(√D + 4) (a chi bound: clipping essentially never happens; the paper instead
//! divides by the data's max norm, a non-private step). (ε, δ) → ρ by the crate's conversion
//! (`PrivacyTarget::from_epsilon_delta`: the tightest of Bun–Steinke Prop. 1.3 and CKS 2020
//! Prop. 12), ρ/2 per stage.
//!
//! Run: `cargo bench --profile dev --bench cape_agn_fig3` (options after `--`: `--quick`,
//! `--reps R`). Prints markdown tables to stdout and writes docs/img/cape_agn_fig3_eps.png and
//! docs/img/cape_agn_fig3_ns.png. Nothing is asserted.

#[path = "support/cli.rs"]
mod cli;
#[path = "support/plot.rs"]
mod plot;
#[path = "support/run.rs"]
mod run;

use std::path::Path;
use std::time::Instant;

use privpca::algorithms::cape_agn::{
    self, CapeAgnConfig, CapeAgnParams, Components, Model, decompose, noise_floor, projected_third_moment,
    second_moment, shard_ranges,
};
use privpca::algorithms::tensor_power::{PowerSettings, packed_len, project_packed, q_comp};
use privpca::algorithms::{Cancelled, RunEnv};
use privpca::linalg::{Matrix, thin_qr_q};
use privpca::privacy::{Delta, Epsilon, PrivacyTarget};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rand_distr::{Distribution, StandardNormal};
use serde_json::json;

const SIGMA2: f64 = 0.05;
const SITES: usize = 5;
const DELTA: f64 = 0.01;
const SETTINGS: PowerSettings = PowerSettings {
    starts: 20,
    iterations: 30,
};
const METHODS: [&str; 5] = ["capeAGN", "conv", "local", "non-priv", "rand. vect."];

struct Setup {
    d: usize,
    k: usize,
    eps_ns: usize,
    eps_grid: Vec<f64>,
    ns_eps: f64,
    ns_grid: Vec<usize>,
}

struct Data {
    truth: Vec<Vec<f64>>,
    shards: Vec<Matrix>,
    beta: f64,
}

fn gaussian(rng: &mut ChaCha20Rng) -> f64 {
    StandardNormal.sample(rng)
}

fn make_data(d: usize, k: usize, ns: usize, seed: u64) -> Data {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let q = thin_qr_q(&Matrix::from_fn(d, k, |_, _| gaussian(&mut rng)));
    let truth: Vec<Vec<f64>> = (0..k)
        .map(|j| {
            let norm = rng.random_range(0.6..1.0);
            q.column(j).iter().map(|v| v * norm).collect()
        })
        .collect();
    let raw: Vec<f64> = (0..k).map(|j| 1.0 + j as f64 / (2.0 * k as f64)).collect();
    let total: f64 = raw.iter().sum();
    let weights: Vec<f64> = raw.iter().map(|w| w / total).collect();
    let sd = SIGMA2.sqrt();
    let n = ns * SITES;
    let mut xt = Matrix::zeros(d, n);
    for mut col in xt.column_iter_mut() {
        let u: f64 = rng.random();
        let mut acc = 0.0;
        let h = weights
            .iter()
            .position(|w| {
                acc += w;
                u < acc
            })
            .unwrap_or(k - 1);
        for (x, m) in col.iter_mut().zip(&truth[h]) {
            *x = m + sd * gaussian(&mut rng);
        }
    }
    let max_norm = truth
        .iter()
        .map(|a| a.iter().map(|v| v * v).sum::<f64>().sqrt())
        .fold(0.0, f64::max);
    let beta = max_norm + sd * ((d as f64).sqrt() + 4.0);
    // Clip at β (the service's rule: rows above β scaled onto the sphere).
    for mut col in xt.column_iter_mut() {
        let norm = col.norm();
        if norm > beta {
            col *= beta / norm;
        }
    }
    let shards = shard_ranges(n, &[1.0 / SITES as f64; SITES])
        .into_iter()
        .map(|r| xt.columns(r.start, r.len()).into_owned())
        .collect();
    Data { truth, shards, beta }
}

fn config_for(data: &Data, d: usize, k: usize, epsilon: f64) -> CapeAgnConfig {
    let ctx = run::records_ctx(d, data.shards.iter().map(Matrix::ncols).sum(), data.beta);
    let target = PrivacyTarget::from_epsilon_delta(
        Epsilon::new(epsilon).expect("a valid ε"),
        Delta::new(DELTA).expect("a valid δ"),
    );
    let params: CapeAgnParams = serde_json::from_value(json!({
        "k": k, "model": "mog", "sigma2": SIGMA2, "sites": SITES, "starts": SETTINGS.starts,
        "power_iterations": SETTINGS.iterations,
    }))
    .expect("valid parameters");
    cape_agn::configure(params, &ctx, &target).expect("configures")
}

fn sum_m2(shards: &[Matrix], d: usize) -> Matrix {
    shards.iter().fold(Matrix::zeros(d, d), |acc, s| {
        acc + second_moment(s, Model::Mog, SIGMA2)
    })
}

/// One baseline run: the statistic of `shards` plus iid noise of sd `sd1` (stage 1, symmetric)
/// and `sd2` (stage 2, packed D-dimensional, projected by W); sd = 0 is non-private.
fn baseline(
    shards: &[Matrix],
    d: usize,
    k: usize,
    sd1: f64,
    sd2: f64,
    rng: &mut ChaCha20Rng,
) -> Option<Components> {
    let mut m2 = sum_m2(shards, d);
    for j in 0..d {
        for i in 0..=j {
            let e = sd1 * gaussian(rng);
            m2[(i, j)] += e;
            if i != j {
                m2[(j, i)] += e;
            }
        }
    }
    let noise: Vec<f64> = (0..packed_len(d)).map(|_| sd2 * gaussian(rng)).collect();
    let floor = if sd1 > 0.0 { noise_floor(d, sd1) } else { 1e-12 };
    let mut power_rng = ChaCha20Rng::seed_from_u64(rng.random());
    decompose(&m2, k, floor, Model::Mog, SETTINGS, &mut power_rng, |w| {
        let mut t = project_packed(&noise, d, w).map_err(privpca::algorithms::RunError::Failed)?;
        for s in shards {
            for (acc, v) in t.iter_mut().zip(projected_third_moment(s, Model::Mog, SIGMA2, w)) {
                *acc += v;
            }
        }
        Ok(t)
    })
    .ok()
    .map(|r| r.components)
}

fn cape(data: &Data, config: &CapeAgnConfig, seed: u64) -> Option<Components> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut progress = |_: u32, _: u32| -> Result<(), Cancelled> { Ok(()) };
    let mut env = RunEnv::new(&mut rng, &mut progress);
    cape_agn::simulate(&data.shards, config, &mut env)
        .ok()
        .map(|r| r.decomposition.components)
}

/// Mean q^comp of every method at one (data, ε).
fn measure(data: &Data, d: usize, k: usize, epsilon: f64, reps: usize) -> Vec<f64> {
    let config = config_for(data, d, k, epsilon);
    // Conventional: each site's own message alone is (ρ/2)-private per stage: τ = pooled sd.
    let (t1, t2) = (config.stage1.pooled_sd, config.stage2.pooled_sd);
    let s = (SITES as f64).sqrt();
    let mean_norm = data
        .truth
        .iter()
        .map(|a| a.iter().map(|v| v * v).sum::<f64>().sqrt())
        .sum::<f64>()
        / k as f64;
    let mut sums = [0.0; 5];
    for rep in 0..reps {
        let mut rng = ChaCha20Rng::seed_from_u64(1000 + rep as u64);
        let runs = [
            cape(data, &config, 2000 + rep as u64),
            baseline(&data.shards, d, k, s * t1, s * t2, &mut rng),
            baseline(&data.shards[..1], d, k, t1, t2, &mut rng),
            baseline(&data.shards, d, k, 0.0, 0.0, &mut rng),
            Some(Components {
                vectors: (0..k)
                    .map(|_| {
                        let v: Vec<f64> = (0..d).map(|_| gaussian(&mut rng)).collect();
                        let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
                        v.iter().map(|x| x * mean_norm / norm).collect()
                    })
                    .collect(),
                weights: vec![1.0 / k as f64; k],
            }),
        ];
        for (acc, run) in sums.iter_mut().zip(runs) {
            *acc += run.map_or(f64::NAN, |c| q_comp(&c.vectors, &data.truth));
        }
    }
    sums.iter().map(|s| s / reps as f64).collect()
}

fn table(title: &str, x_name: &str, xs: &[f64], rows: &[Vec<f64>]) {
    println!("\n**{title}**\n");
    println!("| {x_name} | {} |", METHODS.join(" | "));
    println!("|---|{}", "---|".repeat(METHODS.len()));
    for (x, row) in xs.iter().zip(rows) {
        let cells: Vec<String> = row.iter().map(|v| format!("{v:.3}")).collect();
        println!("| {x} | {} |", cells.join(" | "));
    }
}

/// Measures every x of `xs` with `at` (logging each row), prints the rows as a table titled
/// `title` and returns them as chart series for dimension `d`.
fn sweep(
    xs: &[f64],
    x_name: &str,
    title: &str,
    d: usize,
    started: Instant,
    at: impl Fn(f64) -> Vec<f64>,
) -> Vec<plot::Series> {
    let rows: Vec<Vec<f64>> = xs
        .iter()
        .map(|&x| {
            let r = at(x);
            eprintln!("D={d} {x_name}={x}: {r:?} ({:.0?})", started.elapsed());
            r
        })
        .collect();
    table(title, x_name, xs, &rows);
    series(xs, &rows, &format!("(D={d})"))
}

fn series(xs: &[f64], rows: &[Vec<f64>], suffix: &str) -> Vec<plot::Series> {
    (0..METHODS.len())
        .map(|m| plot::Series {
            name: format!("{} {suffix}", METHODS[m]),
            points: xs.iter().zip(rows).map(|(x, r)| (*x, r[m])).collect(),
        })
        .collect()
}

fn chart(file: &str, title: &str, x_label: &str, series: &[plot::Series]) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/img").join(file);
    let chart = plot::Chart {
        title,
        x_label,
        y_label: "q^comp (mean min distance to a true component)",
        log_x: true,
        log_y: true,
        y_range: None,
    };
    plot::write_line_chart(&path, &chart, series);
}

fn main() {
    let quick = cli::quick();
    let reps = cli::reps(if quick { 1 } else { 6 });
    let setups = [
        Setup {
            d: 10,
            k: 5,
            eps_ns: 2_000,
            eps_grid: vec![0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0],
            ns_eps: 1.0,
            ns_grid: vec![500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000],
        },
        Setup {
            d: 50,
            k: 10,
            eps_ns: 5_000,
            eps_grid: vec![0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0],
            ns_eps: 2.0,
            ns_grid: vec![1_000, 2_000, 5_000, 10_000, 20_000],
        },
    ];
    let started = Instant::now();
    let (mut eps_series, mut ns_series) = (Vec::new(), Vec::new());
    println!("S = {SITES}, δ = {DELTA}, σ² = {SIGMA2}, {reps} repetition(s); mean q^comp (lower is better)");
    for setup in &setups {
        let (d, k) = (setup.d, setup.k);
        let grid: Vec<f64> = if quick {
            setup.eps_grid.iter().step_by(2).copied().collect()
        } else {
            setup.eps_grid.clone()
        };
        let data = make_data(d, k, setup.eps_ns, 7);
        eps_series.extend(sweep(
            &grid,
            "ε",
            &format!("D = {d}, K = {k}, N_s = {}: q^comp against ε", setup.eps_ns),
            d,
            started,
            |eps| measure(&data, d, k, eps, reps),
        ));
        let ns_grid: Vec<usize> = if quick {
            setup.ns_grid.iter().step_by(2).copied().collect()
        } else {
            setup.ns_grid.clone()
        };
        let xs: Vec<f64> = ns_grid.iter().map(|n| *n as f64).collect();
        ns_series.extend(sweep(
            &xs,
            "N_s",
            &format!("D = {d}, K = {k}, ε = {}: q^comp against N_s", setup.ns_eps),
            d,
            started,
            |ns| measure(&make_data(d, k, ns as usize, 8), d, k, setup.ns_eps, reps),
        ));
    }
    chart(
        "cape_agn_fig3_eps.png",
        "capeAGN (MOG): q^comp against ε (δ = 0.01, S = 5)",
        "ε",
        &eps_series,
    );
    chart(
        "cape_agn_fig3_ns.png",
        "capeAGN (MOG): q^comp against N_s (δ = 0.01, S = 5)",
        "N_s (samples per site)",
        &ns_series,
    );
    eprintln!("total {:.0?}", started.elapsed());
}
