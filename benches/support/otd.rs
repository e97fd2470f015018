//! The capeAGN figures of Imtiaz & Sarwate §VI-B (`#[path = "support/otd.rs"] mod otd;`), shared
//! by `benches/cape_agn_fig3.rs` (mixture of Gaussians) and `benches/cape_agn_fig4.rs` (single
//! topic model): q^comp of capeAGN and the paper's baselines against ε, N_s and δ. Nothing here
//! is part of the service.
//!
//! Methods, as in the paper: `capeAGN` (`cape_agn::simulate`: the real CAPE messages,
//! joint-view calibration), `conv` (no correlated noise: every site adds its own N(0, τ²) with
//! τ = Δ/sqrt(2·ρ/2) to each stage's statistic, so the sum carries S·τ²), `local` (site 1 alone
//! with its own τ), `non-priv` (pooled, no noise) and `rand. vect.` (random vectors: unit
//! vectors scaled to the mean true norm for MOG, uniform random probability vectors for STM).
//! All use the same whitening, tensor power method (L = 20 starts, N = 30 iterations) and
//! un-whitening functions. (ε, δ) → ρ by `PrivacyTarget::from_epsilon_delta`, ρ/2 per stage.

#![allow(dead_code)]

use std::path::Path;
use std::time::Instant;

use privpca::algorithms::cape_agn::{
    self, CapeAgnConfig, CapeAgnParams, Components, Model, decompose, noise_floor, projected_third_moment,
    second_moment, shard_ranges,
};
use privpca::algorithms::tensor_power::{PowerSettings, packed_len, project_packed, q_comp};
use privpca::algorithms::{Cancelled, RunEnv};
use privpca::dataset::{DataContext, Neighbours};
use privpca::linalg::Matrix;
use privpca::privacy::{Delta, Epsilon, PrivacyTarget};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rand_distr::{Distribution, StandardNormal};
use serde_json::json;

pub const SITES: usize = 5;
pub const DELTA: f64 = 0.01;
const SETTINGS: PowerSettings = PowerSettings {
    starts: 20,
    iterations: 30,
};
const METHODS: [&str; 5] = ["capeAGN", "conv", "local", "non-priv", "rand. vect."];

/// The model of a figure: which moments, its public σ² (0 for STM) and its name in titles.
#[derive(Clone, Copy)]
pub struct Spec {
    pub model: Model,
    pub sigma2: f64,
    pub name: &'static str,
    /// File names are `{prefix}_eps.png`, `{prefix}_ns.png`, `{prefix}_delta.png`.
    pub prefix: &'static str,
}

/// One (D, K) row of a figure: the ε sweep at N_s = `eps_ns`, the N_s sweep at ε = `ns_eps`,
/// and (when `delta_grid` is not empty) the δ sweep at (N_s, ε) = (`eps_ns`, `ns_eps`).
pub struct Setup {
    pub d: usize,
    pub k: usize,
    pub eps_ns: usize,
    pub eps_grid: Vec<f64>,
    pub ns_eps: f64,
    pub ns_grid: Vec<usize>,
    pub delta_grid: Vec<f64>,
}

/// The paper's two rows, (D, K) = (10, 5) and (50, 10), with our grids (the paper's are not
/// legible in our copy); `delta_grid` empty skips the δ sweep.
pub fn setups(delta_grid: &[f64]) -> [Setup; 2] {
    [
        Setup {
            d: 10,
            k: 5,
            eps_ns: 2_000,
            eps_grid: vec![0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0],
            ns_eps: 1.0,
            ns_grid: vec![500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000],
            delta_grid: delta_grid.to_vec(),
        },
        Setup {
            d: 50,
            k: 10,
            eps_ns: 5_000,
            eps_grid: vec![0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0],
            ns_eps: 2.0,
            ns_grid: vec![1_000, 2_000, 5_000, 10_000, 20_000],
            delta_grid: delta_grid.to_vec(),
        },
    ]
}

/// A synthetic dataset split into the sites, with its true components and public bounds.
pub struct Data {
    pub truth: Vec<Vec<f64>>,
    pub shards: Vec<Matrix>,
    pub neighbours: Neighbours,
}

impl Data {
    /// The records `xt` (d×n) split into S equal contiguous shards, under replace_one with row
    /// bound β and the default α = √d·β.
    pub fn split(truth: Vec<Vec<f64>>, xt: &Matrix, beta: f64) -> Data {
        let (d, n) = xt.shape();
        let shards = shard_ranges(n, &[1.0 / SITES as f64; SITES])
            .into_iter()
            .map(|r| xt.columns(r.start, r.len()).into_owned())
            .collect();
        Data {
            truth,
            shards,
            neighbours: super::run::records_ctx(d, n, beta).neighbours,
        }
    }
}

pub fn gaussian(rng: &mut ChaCha20Rng) -> f64 {
    StandardNormal.sample(rng)
}

/// An index drawn from the probability vector `p` (the last one if rounding leaves u past the sum).
pub fn pick(rng: &mut ChaCha20Rng, p: &[f64]) -> usize {
    let u: f64 = rng.random();
    let cumulative = p.iter().scan(0.0, |acc, w| {
        *acc += w;
        Some(*acc)
    });
    cumulative.take_while(|c| u >= *c).count().min(p.len() - 1)
}

/// The mixture weights of every figure: w_k ∝ 1 + k/(2K).
pub fn weights(k: usize) -> Vec<f64> {
    let raw: Vec<f64> = (0..k).map(|j| 1.0 + j as f64 / (2.0 * k as f64)).collect();
    let total: f64 = raw.iter().sum();
    raw.iter().map(|w| w / total).collect()
}

fn config_for(spec: Spec, data: &Data, d: usize, k: usize, epsilon: f64, delta: f64) -> CapeAgnConfig {
    let ctx = DataContext {
        d,
        n: Some(data.shards.iter().map(Matrix::ncols).sum()),
        neighbours: data.neighbours,
        public: false,
        sparse: false,
    };
    let target = PrivacyTarget::from_epsilon_delta(
        Epsilon::new(epsilon).expect("a valid ε"),
        Delta::new(delta).expect("a valid δ"),
    );
    let mut params = json!({
        "k": k, "model": if spec.model == Model::Mog { "mog" } else { "stm" }, "sites": SITES,
        "starts": SETTINGS.starts, "power_iterations": SETTINGS.iterations,
    });
    if spec.model == Model::Mog {
        params["sigma2"] = json!(spec.sigma2);
    }
    let params: CapeAgnParams = serde_json::from_value(params).expect("valid parameters");
    cape_agn::configure(params, &ctx, &target).expect("configures")
}

/// One baseline run: the statistic of `shards` plus iid noise of sd `sd1` (stage 1, symmetric)
/// and `sd2` (stage 2, packed D-dimensional, projected by W); sd = 0 is non-private.
fn baseline(
    spec: Spec,
    shards: &[Matrix],
    k: usize,
    sd1: f64,
    sd2: f64,
    rng: &mut ChaCha20Rng,
) -> Option<Components> {
    let d = shards[0].nrows();
    let mut m2 = shards.iter().fold(Matrix::zeros(d, d), |acc, s| {
        acc + second_moment(s, spec.model, spec.sigma2)
    });
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
    decompose(&m2, k, floor, spec.model, SETTINGS, &mut power_rng, |w| {
        let mut t = project_packed(&noise, d, w).map_err(privpca::algorithms::RunError::Failed)?;
        for s in shards {
            for (acc, v) in t
                .iter_mut()
                .zip(projected_third_moment(s, spec.model, spec.sigma2, w))
            {
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

/// K random vectors of the model's kind (see the module docs).
fn random_vectors(spec: Spec, data: &Data, d: usize, k: usize, rng: &mut ChaCha20Rng) -> Components {
    let norm = |a: &[f64]| a.iter().map(|v| v * v).sum::<f64>().sqrt();
    let mean_norm = data.truth.iter().map(|a| norm(a)).sum::<f64>() / k as f64;
    let vectors = (0..k)
        .map(|_| match spec.model {
            Model::Mog => {
                let v: Vec<f64> = (0..d).map(|_| gaussian(rng)).collect();
                let scale = mean_norm / norm(&v);
                v.iter().map(|x| x * scale).collect()
            }
            Model::Stm => {
                let v: Vec<f64> = (0..d).map(|_| rng.random::<f64>()).collect();
                let total: f64 = v.iter().sum();
                v.iter().map(|x| x / total).collect()
            }
        })
        .collect();
    Components {
        vectors,
        weights: vec![1.0 / k as f64; k],
    }
}

/// Mean q^comp of every method at one (data, ε, δ).
fn measure(spec: Spec, data: &Data, d: usize, k: usize, epsilon: f64, delta: f64, reps: usize) -> Vec<f64> {
    let config = config_for(spec, data, d, k, epsilon, delta);
    // Conventional: each site's own message alone is (ρ/2)-private per stage: τ = pooled sd.
    let (t1, t2) = (config.stage1.pooled_sd, config.stage2.pooled_sd);
    let s = (SITES as f64).sqrt();
    let mut sums = [0.0; 5];
    for rep in 0..reps {
        let mut rng = ChaCha20Rng::seed_from_u64(1000 + rep as u64);
        let runs = [
            cape(data, &config, 2000 + rep as u64),
            baseline(spec, &data.shards, k, s * t1, s * t2, &mut rng),
            baseline(spec, &data.shards[..1], k, t1, t2, &mut rng),
            baseline(spec, &data.shards, k, 0.0, 0.0, &mut rng),
            Some(random_vectors(spec, data, d, k, &mut rng)),
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
        println!("| {} | {} |", super::plot::tick_label(*x), cells.join(" | "));
    }
}

fn series(xs: &[f64], rows: &[Vec<f64>], suffix: &str) -> Vec<super::plot::Series> {
    (0..METHODS.len())
        .map(|m| super::plot::Series {
            name: format!("{} {suffix}", METHODS[m]),
            points: xs.iter().zip(rows).map(|(x, r)| (*x, r[m])).collect(),
        })
        .collect()
}

fn chart(file: &str, title: &str, x_label: &str, series: &[super::plot::Series]) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/img").join(file);
    let chart = super::plot::Chart {
        title,
        x_label,
        y_label: "q^comp (mean min distance to a true component)",
        log_x: true,
        log_y: true,
        y_range: None,
    };
    super::plot::write_line_chart(&path, &chart, series);
}

/// Every other point of `grid` under `--quick`, all of it otherwise.
fn thin<T: Copy>(grid: &[T], quick: bool) -> Vec<T> {
    grid.iter().step_by(if quick { 2 } else { 1 }).copied().collect()
}

/// Runs every sweep of every setup, prints the tables and writes the figure's PNGs.
/// `make_data(d, k, n_s, seed)` draws a dataset; the ε and δ sweeps use seed 7, the N_s sweep
/// seed 8.
pub fn run_figure(spec: Spec, setups: &[Setup], make_data: impl Fn(usize, usize, usize, u64) -> Data) {
    let quick = super::cli::quick();
    let reps = super::cli::reps(if quick { 1 } else { 6 });
    let started = Instant::now();
    let (mut eps_series, mut ns_series, mut delta_series) = (Vec::new(), Vec::new(), Vec::new());
    let sigma = if spec.model == Model::Mog {
        format!(", σ² = {}", spec.sigma2)
    } else {
        String::new()
    };
    println!(
        "{}: S = {SITES}, δ = {DELTA}{sigma}, {reps} repetition(s); mean q^comp (lower is better)",
        spec.name
    );
    for setup in setups {
        let (d, k) = (setup.d, setup.k);
        let tag = format!("(D={d})");
        let grid = thin(&setup.eps_grid, quick);
        let data = make_data(d, k, setup.eps_ns, 7);
        let rows: Vec<Vec<f64>> = grid
            .iter()
            .map(|&eps| {
                let r = measure(spec, &data, d, k, eps, DELTA, reps);
                eprintln!("D={d} ε={eps}: {r:?} ({:.0?})", started.elapsed());
                r
            })
            .collect();
        let title = format!("D = {d}, K = {k}, N_s = {}: q^comp against ε", setup.eps_ns);
        table(&title, "ε", &grid, &rows);
        eps_series.extend(series(&grid, &rows, &tag));
        let ns_grid = thin(&setup.ns_grid, quick);
        let rows: Vec<Vec<f64>> = ns_grid
            .iter()
            .map(|&ns| {
                let data = make_data(d, k, ns, 8);
                let r = measure(spec, &data, d, k, setup.ns_eps, DELTA, reps);
                eprintln!("D={d} N_s={ns}: {r:?} ({:.0?})", started.elapsed());
                r
            })
            .collect();
        let xs: Vec<f64> = ns_grid.iter().map(|n| *n as f64).collect();
        let title = format!("D = {d}, K = {k}, ε = {}: q^comp against N_s", setup.ns_eps);
        table(&title, "N_s", &xs, &rows);
        ns_series.extend(series(&xs, &rows, &tag));
        if setup.delta_grid.is_empty() {
            continue;
        }
        let delta_grid = thin(&setup.delta_grid, quick);
        let rows: Vec<Vec<f64>> = delta_grid
            .iter()
            .map(|&delta| {
                let r = measure(spec, &data, d, k, setup.ns_eps, delta, reps);
                eprintln!("D={d} δ={delta}: {r:?} ({:.0?})", started.elapsed());
                r
            })
            .collect();
        let title = format!(
            "D = {d}, K = {k}, N_s = {}, ε = {}: q^comp against δ",
            setup.eps_ns, setup.ns_eps
        );
        table(&title, "δ", &delta_grid, &rows);
        delta_series.extend(series(&delta_grid, &rows, &tag));
    }
    let name = spec.name;
    chart(
        &format!("{}_eps.png", spec.prefix),
        &format!("capeAGN ({name}): q^comp against ε (δ = {DELTA}, S = {SITES})"),
        "ε",
        &eps_series,
    );
    chart(
        &format!("{}_ns.png", spec.prefix),
        &format!("capeAGN ({name}): q^comp against N_s (δ = {DELTA}, S = {SITES})"),
        "N_s (samples per site)",
        &ns_series,
    );
    if !delta_series.is_empty() {
        chart(
            &format!("{}_delta.png", spec.prefix),
            &format!("capeAGN ({name}): q^comp against δ (S = {SITES})"),
            "δ",
            &delta_series,
        );
    }
    eprintln!("total {:.0?}", started.elapsed());
}
