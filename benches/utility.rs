//! Utility on the spiked-covariance model of Düngler & Sanyal 2025, App. G.1 (issue 3, "A utility
//! check on the spiked-covariance model"): d = 200, k = 2, λ₁ = 10, ε = 1, δ = 0.01, n from 2 000
//! to 50 000. Every private algorithm of `privpca::algorithms::registry()` that takes `records`
//! under `replace_one` runs through the object-safe `DynAlgorithm::prepare` + `run_prepared`, as
//! the job runner does; `exact` (public, no noise) is the ceiling.
//!
//! Data (records; App. G.1 adapted to one record per individual, see docs/utility.md):
//! x_i = V·diag(√λ)·r_i + z_i with V a d×k orthonormal basis (Gram–Schmidt of a Gaussian d×k
//! matrix, App. G.1), r_i iid uniform signs in {±1}^k (Example 1's s_i ~ Unif{±v}, one sign per
//! spike), z_i ~ N(0, σ²I_d). So E[x xᵀ] = Σ = VΛVᵀ + σ²I exactly, and ‖V·diag(√λ)·r_i‖₂ =
//! sqrt(Σ_j λ_j) for every record.
//!
//! Bounds, App. G.1 / §5 with ζ = 0.01 (the probability that any row is clipped):
//! β = C√λ₁ + σ·sqrt(d·ln(n/ζ)) with C = sqrt(Σ_j λ_j/λ₁) (so C√λ₁ is the signal norm), and
//! α = σd + sqrt(d·Σ_j λ_j) + σ·sqrt(d·ln(n/ζ)) (§5's α with the k-spike signal's L1 bound).
//! Rows are clipped with the service's own per-row clip (`ingest::clip::RowClip`).
//!
//! Metric: the captured-energy ratio tr(QᵀΣQ)/Σ_{i≤k}λ_i(Σ) (algorithms.md "Utility metrics")
//! against the population Σ and against the empirical second-moment matrix Σ̂ = XᵀX/n of the
//! clipped records (what the algorithms see; the ratio is scale-free, so XᵀX is used).
//!
//! Run with `cargo bench --bench utility` (release). Options after `--`: `--quick` (n = 2 000 and
//! 5 000, 2 repetitions), `--reps R`, `--n 2000,5000`, `--sigma S`, `--k K`. Prints markdown to
//! stdout (progress to stderr); docs/utility.md holds the measured tables. Nothing is asserted.

use std::collections::BTreeMap;
use std::time::Instant;

use privpca::algorithms::{Cancelled, DataInput, DynAlgorithm, Prepared, RunEnv, find, registry};
use privpca::dataset::{DataContext, Kind, Neighbours, Relation};
use privpca::ingest::clip::RowClip;
use privpca::linalg::subspace::{captured_energy, orthonormality_error};
use privpca::linalg::{self, Matrix, Vector, gram_t, thin_qr_q};
use privpca::privacy::{Delta, Epsilon, PrivacyTarget, rho_to_epsilon};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rand_distr::{Distribution, StandardNormal};
use serde_json::{Value, json};

const D: usize = 200;
/// λ₁ = 10 (App. G.1 figures); λ₂ = 5 for k = 2 (the paper leaves the other entries of Λ to the
/// user; a gap λ₁ − λ₂ > 0 keeps the deflation rounds well posed).
const LAMBDAS: [f64; 2] = [10.0, 5.0];
/// σ = 0.025, App. G.1 / Fig. 1(a).
const SIGMA: f64 = 0.025;
const EPSILON: f64 = 1.0;
const DELTA: f64 = 0.01;
/// ζ: with probability ≥ 1 − ζ no row is clipped (App. G.1 sets ζ = 0.01 for all methods).
const ZETA: f64 = 0.01;
const NS: [usize; 5] = [2_000, 5_000, 10_000, 20_000, 50_000];
const REPS: usize = 5;
/// The coherence bound of the main `coherent_power` row (docs/utility.md explains the choice).
const COHERENCE: f64 = 32.0;

/// The experiment's knobs (defaults above, overridable on the command line).
#[derive(Debug, Clone)]
struct Setup {
    d: usize,
    lambdas: Vec<f64>,
    sigma: f64,
    ns: Vec<usize>,
    reps: usize,
}

impl Setup {
    fn k(&self) -> usize {
        self.lambdas.len()
    }

    fn signal_norm(&self) -> f64 {
        self.lambdas.iter().sum::<f64>().sqrt()
    }

    /// β = C√λ₁ + σ·sqrt(d·ln(n/ζ)), C√λ₁ = sqrt(Σλ) (module docs).
    fn beta(&self, n: usize) -> f64 {
        self.signal_norm() + self.sigma * (self.d as f64 * (n as f64 / ZETA).ln()).sqrt()
    }

    /// α = σd + sqrt(d·Σλ) + σ·sqrt(d·ln(n/ζ)) (module docs).
    fn alpha(&self, n: usize) -> f64 {
        let d = self.d as f64;
        self.sigma * d + (d.sqrt() * self.signal_norm()) + self.sigma * (d * (n as f64 / ZETA).ln()).sqrt()
    }

    fn context(&self, n: usize, public: bool) -> DataContext {
        DataContext {
            d: self.d,
            n: Some(n),
            neighbours: Neighbours::ReplaceOne {
                beta: self.beta(n),
                alpha: self.alpha(n),
            },
            public,
        }
    }
}

/// One draw of the data with its population covariance.
struct Sample {
    /// d×n, one clipped record per column.
    xt: Matrix,
    /// Σ = VΛVᵀ + σ²I.
    population: Matrix,
    /// XᵀX of the clipped records.
    empirical: Matrix,
    /// Rows the clip changed.
    clipped: usize,
}

fn sample(setup: &Setup, n: usize, seed: u64) -> Sample {
    let (d, k) = (setup.d, setup.k());
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let g = Matrix::from_fn(d, k, |_, _| StandardNormal.sample(&mut rng));
    let v = thin_qr_q(&g);
    let roots: Vec<f64> = setup.lambdas.iter().map(|l| l.sqrt()).collect();
    let mut xt = Matrix::zeros(d, n);
    let clip = RowClip::new(setup.beta(n), Some(setup.alpha(n))).expect("finite positive bounds");
    let mut clipped = 0;
    let mut signs = vec![0.0; k];
    for row in xt.as_mut_slice().chunks_mut(d) {
        for (s, root) in signs.iter_mut().zip(&roots) {
            *s = if rng.random::<bool>() { *root } else { -*root };
        }
        for (i, x) in row.iter_mut().enumerate() {
            let z: f64 = StandardNormal.sample(&mut rng);
            *x = (0..k).map(|j| v[(i, j)] * signs[j]).sum::<f64>() + setup.sigma * z;
        }
        let before = row.to_vec();
        clip.apply(row);
        if before.as_slice() != &*row {
            clipped += 1;
        }
    }
    let lambda = Matrix::from_diagonal(&Vector::from_column_slice(&setup.lambdas));
    let mut population = &v * lambda * v.transpose();
    for i in 0..d {
        population[(i, i)] += setup.sigma * setup.sigma;
    }
    let empirical = gram_t(&xt);
    Sample {
        xt,
        population,
        empirical,
        clipped,
    }
}

/// One row of the tables: an algorithm with its parameters and privacy target.
struct Variant {
    label: String,
    algorithm: &'static dyn DynAlgorithm,
    /// Parameters for a given n.
    params: Box<dyn Fn(usize) -> Value>,
    target: PrivacyTarget,
    /// Run on a `public: true` context (only `exact`).
    public: bool,
    /// Shown in the main comparison (false: a supplementary row).
    main: bool,
}

fn paper_target() -> PrivacyTarget {
    PrivacyTarget::from_epsilon_delta(
        Epsilon::new(EPSILON).expect("valid ε"),
        Delta::new(DELTA).expect("valid δ"),
    )
}

fn variants(setup: &Setup) -> Vec<Variant> {
    let k = setup.k();
    let target = paper_target();
    let mut out = Vec::new();
    let mut algorithms: Vec<&'static dyn DynAlgorithm> = registry().to_vec();
    // TEMPORARY (testing before registration)
    for extra in [
        &privpca::algorithms::k_dp_pca::KDpPca as &'static dyn DynAlgorithm,
        &privpca::algorithms::dp_oja::DpOja,
    ] {
        if find(extra.info().name).is_none() {
            algorithms.push(extra);
        }
    }
    for algorithm in algorithms {
        let info = algorithm.info();
        let fits = info.kinds.contains(&Kind::Records) && info.relations.contains(&Relation::ReplaceOne);
        if !fits || info.public_only {
            continue;
        }
        let name = info.name;
        let (label, params): (String, Box<dyn Fn(usize) -> Value>) = match name {
            "coherent_power" => (
                format!("coherent_power (C = {COHERENCE})"),
                Box::new(move |_| json!({ "k": k, "coherence_bound": COHERENCE })),
            ),
            _ => (name.to_string(), Box::new(move |_| json!({ "k": k }))),
        };
        out.push(Variant {
            label,
            algorithm,
            params,
            target,
            public: false,
            main: true,
        });
    }
    if let Some(exact) = find("exact") {
        out.push(Variant {
            label: "exact (public, no noise)".into(),
            algorithm: exact,
            params: Box::new(move |_| json!({ "k": k })),
            target,
            public: true,
            main: true,
        });
    }
    // Supplementary rows that explain the main ones (docs/utility.md).
    let d = setup.d as f64;
    if let Some(alg) = find("coherent_power") {
        out.push(Variant {
            label: format!("coherent_power (C = d = {d})"),
            algorithm: alg,
            params: Box::new(move |_| json!({ "k": k, "coherence_bound": d })),
            target,
            public: false,
            main: false,
        });
    }
    if let Some(alg) = find("k_dp_pca").or(Some(
        &privpca::algorithms::k_dp_pca::KDpPca as &'static dyn DynAlgorithm,
    )) {
        // App. G.1's step size η_t = 1/(20σλ_i + (λ_i − λ_{i+1})·t/ln n), with the population
        // eigenvalues known to the analyst (an oracle choice, as in the paper). One schedule
        // serves all rounds: the round-1 offset, and the slope of the smallest gap.
        let lambdas = setup.lambdas.clone();
        let gap = (0..k)
            .map(|i| lambdas[i] - lambdas.get(i + 1).copied().unwrap_or(0.0))
            .fold(f64::INFINITY, f64::min);
        let offset = 20.0 * setup.sigma * lambdas[0];
        let oracle = move |n: usize| json!({ "offset": offset, "slope": gap / (n as f64).ln() });
        let per_step = PrivacyTarget {
            rho: 0.5,
            delta: Some(DELTA),
        };
        // (label, oracle η, target, batch multiple of the smallest feasible B)
        let rows: Vec<(&str, bool, PrivacyTarget, usize)> = vec![
            ("TEMP k_dp_pca (rho 1e4, B = √n)", false, PrivacyTarget { rho: 1e4, delta: Some(DELTA) }, 0),
            ("TEMP k_dp_pca (rho 1e4, B = 4 Bmin)", false, PrivacyTarget { rho: 1e4, delta: Some(DELTA) }, 4),
            ("TEMP k_dp_pca (rho 1e4, B = 4 Bmin, oracle)", true, PrivacyTarget { rho: 1e4, delta: Some(DELTA) }, 4),
            ("TEMP k_dp_pca (rho 50, B = 4 Bmin)", false, PrivacyTarget { rho: 50.0, delta: Some(DELTA) }, 4),
            ("k_dp_pca (B = B_min)", false, target, 1),
            ("k_dp_pca (B = 4·B_min)", false, target, 4),
            ("k_dp_pca (B = 8·B_min)", false, target, 8),
            ("k_dp_pca (B = 16·B_min)", false, target, 16),
            ("k_dp_pca (B = 8·B_min, oracle η)", true, target, 8),
            ("k_dp_pca (ε = 1 per step, B = √n)", false, per_step, 0),
            ("k_dp_pca (ε = 1 per step, B = 4·B_min)", false, per_step, 4),
            ("k_dp_pca (ε = 1 per step, B = 8·B_min)", false, per_step, 8),
            ("k_dp_pca (ε = 1 per step, B = 16·B_min)", false, per_step, 16),
            ("k_dp_pca (ε = 1 per step, B = 8·B_min, oracle η)", true, per_step, 8),
        ];
        for (label, use_oracle, row_target, multiple) in rows {
            let setup = setup.clone();
            out.push(Variant {
                label: label.into(),
                algorithm: alg,
                params: Box::new(move |n| {
                    let mut params = json!({ "k": k });
                    if use_oracle {
                        params["learning_rate"] = oracle(n);
                    }
                    if multiple > 0 {
                        let ctx = setup.context(n, false);
                        if let Some(b) = smallest_batch(alg, &params, &ctx, &row_target) {
                            params["batch_size"] = json!((multiple * b).min(n / k));
                        }
                    }
                    params
                }),
                target: row_target,
                public: false,
                main: false,
            });
        }
    }
    if let Some(alg) = find("analyze_gauss") {
        out.push(Variant {
            label: "analyze_gauss (ρ = 0.5)".into(),
            algorithm: alg,
            params: Box::new(move |_| json!({ "k": k })),
            target: PrivacyTarget {
                rho: 0.5,
                delta: Some(DELTA),
            },
            public: false,
            main: false,
        });
    }
    out
}

/// The smallest batch size B for which `prepare` accepts `params` (with `batch_size` set to B):
/// a public, data-free search (feasibility is monotone in B: more pairs, fewer steps).
fn smallest_batch(
    algorithm: &dyn DynAlgorithm,
    params: &Value,
    ctx: &DataContext,
    target: &PrivacyTarget,
) -> Option<usize> {
    let k = params["k"].as_u64()? as usize;
    let feasible = |b: usize| {
        let mut p = params.clone();
        p["batch_size"] = json!(b);
        algorithm.prepare(p, ctx, target).is_ok()
    };
    let (mut lo, mut hi) = (2, ctx.n? / k);
    if !feasible(hi) {
        return None;
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if feasible(mid) { hi = mid } else { lo = mid + 1 }
    }
    Some(lo)
}

/// What happened to one variant on one n.
#[derive(Default)]
struct Cell {
    /// `prepare` refused the configuration (message).
    refused: Option<String>,
    charge: Option<(f64, f64)>,
    /// Shape of a batched configuration: (B, T, k') when the config has them.
    batches: Option<(u64, u64, u64)>,
    population: Vec<f64>,
    empirical: Vec<f64>,
    seconds: Vec<f64>,
    worst_orthonormality: f64,
    /// Run failures: count and distinct messages.
    failures: usize,
    messages: BTreeMap<String, usize>,
}

fn mean_sd(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = if values.len() > 1 {
        values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    (mean, var.sqrt())
}

impl Cell {
    fn energy(&self, values: &[f64]) -> String {
        if self.refused.is_some() {
            return "refused".into();
        }
        let mut s = if values.is_empty() {
            "—".to_string()
        } else {
            let (m, sd) = mean_sd(values);
            format!("{m:.3} ± {sd:.3}")
        };
        if self.failures > 0 {
            s += &format!(" ({}/{} failed)", self.failures, self.failures + values.len());
        }
        s
    }

    fn time(&self) -> String {
        if self.refused.is_some() || self.seconds.is_empty() {
            return "—".into();
        }
        format!("{:.3}", mean_sd(&self.seconds).0)
    }
}

/// Strips a volatile suffix (round/step numbers) so that equal failure causes group together.
fn failure_kind(message: &str) -> String {
    message.split(':').next().unwrap_or(message).chars().take(120).collect()
}

fn run_one(
    variant: &Variant,
    prepared: &Prepared,
    ctx: &DataContext,
    data: &Sample,
    seed: u64,
    cell: &mut Cell,
) {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut progress = |_: u32, _: u32| Ok::<(), Cancelled>(());
    let mut env = RunEnv::new(&mut rng, &mut progress);
    let start = Instant::now();
    let result = variant.algorithm.run_prepared(
        &prepared.config,
        DataInput::Records { xt: &data.xt },
        ctx,
        &mut env,
    );
    let seconds = start.elapsed().as_secs_f64();
    match result {
        Ok(out) => {
            cell.seconds.push(seconds);
            cell.population
                .push(captured_energy(&out.basis, &data.population));
            cell.empirical.push(captured_energy(&out.basis, &data.empirical));
            cell.worst_orthonormality = cell.worst_orthonormality.max(orthonormality_error(&out.basis));
        }
        Err(e) => {
            cell.failures += 1;
            *cell.messages.entry(failure_kind(&e.to_string())).or_default() += 1;
        }
    }
}

fn parse_args() -> Setup {
    let mut setup = Setup {
        d: D,
        lambdas: LAMBDAS.to_vec(),
        sigma: SIGMA,
        ns: NS.to_vec(),
        reps: REPS,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    let value = |i: usize| args.get(i + 1).cloned().unwrap_or_default();
    while i < args.len() {
        match args[i].as_str() {
            "--quick" => {
                setup.ns = vec![2_000, 5_000];
                setup.reps = 2;
            }
            "--reps" => {
                setup.reps = value(i).parse().expect("--reps takes a positive integer");
                i += 1;
            }
            "--n" => {
                setup.ns = value(i)
                    .split(',')
                    .map(|s| {
                        s.trim()
                            .parse()
                            .expect("--n takes a comma-separated list of integers")
                    })
                    .collect();
                i += 1;
            }
            "--sigma" => {
                setup.sigma = value(i).parse().expect("--sigma takes a number");
                i += 1;
            }
            "--k" => {
                let k: usize = value(i).parse().expect("--k takes 1 or 2");
                setup.lambdas.truncate(k.clamp(1, LAMBDAS.len()));
                i += 1;
            }
            // `cargo bench` passes `--bench`; anything else is ignored too.
            _ => {}
        }
        i += 1;
    }
    setup
}

fn diag(setup: &Setup) {
    // TEMP diagnostic
    let n = 50_000;
    let data = sample(setup, n, 5);
    let alg = find("k_dp_pca").unwrap_or(&privpca::algorithms::k_dp_pca::KDpPca);
    let u = privpca::linalg::sym_eig(&data.population).vectors.columns(0, setup.k()).into_owned();
    for (rho, lr) in [(1e4, None), (1e8, None), (1e8, Some(json!({"offset": 1.0, "slope": 1.0}))), (1e8, Some(json!({"offset": 0.0, "slope": 0.1})))] {
        let ctx = setup.context(n, false);
        let mut params = json!({"k": setup.k()});
        if let Some(l) = lr { params["learning_rate"] = l; }
        let p = alg.prepare(params, &ctx, &PrivacyTarget { rho, delta: Some(DELTA) }).expect("prep");
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let mut progress = |_: u32, _: u32| Ok::<(), Cancelled>(());
        let mut env = RunEnv::new(&mut rng, &mut progress);
        match alg.run_prepared(&p.config, DataInput::Records { xt: &data.xt }, &ctx, &mut env) {
            Ok(out) => println!("rho {rho}: config {} UᵀQ = {:.3}", p.config, u.transpose() * &out.basis),
            Err(e) => println!("rho {rho}: {e}"),
        }
    }
}

fn main() {
    linalg::init_threads(0);
    let setup = parse_args();
    if std::env::args().any(|a| a == "--diag") { diag(&setup); return; }
    let k = setup.k();
    let target = paper_target();
    let variants = variants(&setup);
    let started = Instant::now();

    // cells[v][j]: variant v on n = setup.ns[j].
    let mut cells: Vec<Vec<Cell>> = variants
        .iter()
        .map(|_| setup.ns.iter().map(|_| Cell::default()).collect())
        .collect();
    let mut clipped = Vec::new();
    for (j, &n) in setup.ns.iter().enumerate() {
        let prepared: Vec<Option<Prepared>> = variants
            .iter()
            .enumerate()
            .map(|(v, variant)| {
                let ctx = setup.context(n, variant.public);
                match variant
                    .algorithm
                    .prepare((variant.params)(n), &ctx, &variant.target)
                {
                    Ok(p) => {
                        cells[v][j].charge = Some((p.cost.rho, p.cost.delta));
                        let field = |name: &str| p.config.get(name).and_then(Value::as_u64);
                        if let (Some(b), Some(t)) = (field("batch_size"), field("steps")) {
                            cells[v][j].batches = Some((b, t, field("range_subsets").unwrap_or(0)));
                        }
                        Some(p)
                    }
                    Err(e) => {
                        cells[v][j].refused = Some(e.to_string());
                        None
                    }
                }
            })
            .collect();
        let mut clipped_rows = 0;
        for rep in 0..setup.reps {
            let data_seed = 1_000_003 * n as u64 + rep as u64;
            let data = sample(&setup, n, data_seed);
            clipped_rows += data.clipped;
            for (v, variant) in variants.iter().enumerate() {
                if let Some(p) = &prepared[v] {
                    let ctx = setup.context(n, variant.public);
                    let seed = data_seed.wrapping_mul(31).wrapping_add(v as u64 + 1);
                    run_one(variant, p, &ctx, &data, seed, &mut cells[v][j]);
                }
            }
            eprintln!(
                "n = {n}, rep {} done ({:.1} s elapsed)",
                rep + 1,
                started.elapsed().as_secs_f64()
            );
        }
        clipped.push(clipped_rows);
    }
    let total = started.elapsed().as_secs_f64();

    let eps_of = |rho: f64| rho_to_epsilon(rho, Delta::new(DELTA).expect("valid δ"));
    println!("# Utility on the spiked-covariance model (Düngler & Sanyal 2025, App. G.1)");
    println!();
    println!(
        "d = {}, k = {k}, Λ = {:?}, σ = {}, records x = V·diag(√λ)·r + z (r uniform signs), replace_one, ζ = {ZETA}",
        setup.d, setup.lambdas, setup.sigma
    );
    println!(
        "target (ε, δ) = ({EPSILON}, {DELTA}) → ρ = {:.6}, δ = {DELTA}; {} repetitions per cell; total {:.0} s",
        target.rho, setup.reps, total
    );
    println!();
    println!("| n | β | α | rows clipped (all reps) |");
    println!("|---:|---:|---:|---:|");
    for (j, &n) in setup.ns.iter().enumerate() {
        println!(
            "| {n} | {:.4} | {:.3} | {} of {} |",
            setup.beta(n),
            setup.alpha(n),
            clipped[j],
            n * setup.reps
        );
    }
    let header = |title: &str| {
        println!();
        println!("{title}");
        println!();
        let cols: Vec<String> = setup.ns.iter().map(|n| format!("n = {n}")).collect();
        println!("| algorithm | {} |", cols.join(" | "));
        println!("|---|{}", "---:|".repeat(setup.ns.len()));
    };
    for (title, pick) in [
        (
            "Captured energy vs the population Σ: mean ± sd over repetitions (failed runs counted, not averaged)",
            0,
        ),
        ("Captured energy vs the empirical XᵀX of the clipped records", 1),
        ("Mean run time of `run_prepared` (s)", 2),
    ] {
        header(title);
        for main in [true, false] {
            for (v, variant) in variants.iter().enumerate() {
                if variant.main != main {
                    continue;
                }
                let row: Vec<String> = cells[v]
                    .iter()
                    .map(|c| match pick {
                        0 => c.energy(&c.population),
                        1 => c.energy(&c.empirical),
                        _ => c.time(),
                    })
                    .collect();
                let mark = if main { "" } else { " †" };
                println!("| {}{mark} | {} |", variant.label, row.join(" | "));
            }
        }
    }
    println!();
    println!("† supplementary rows (not the service defaults at the paper's target); see docs/utility.md.");
    println!();
    println!(
        "Charges (the same for every n unless noted), as (ρ, δ) and as ε at δ = {DELTA} (plus δ spent):"
    );
    println!();
    println!("| algorithm | ρ | δ | ε at δ = {DELTA} (+ δ spent) | worst ‖QᵀQ − I‖ |");
    println!("|---|---:|---:|---:|---:|");
    for (v, variant) in variants.iter().enumerate() {
        let charge = cells[v].iter().find_map(|c| c.charge);
        let worst = cells[v]
            .iter()
            .map(|c| c.worst_orthonormality)
            .fold(0.0, f64::max);
        match charge {
            Some((rho, delta)) => println!(
                "| {} | {rho:.6} | {delta} | {:.4} (+ {delta}) | {worst:.1e} |",
                variant.label,
                eps_of(rho)
            ),
            None => println!("| {} | — | — | — | — |", variant.label),
        }
    }
    let batched: Vec<usize> = (0..variants.len())
        .filter(|&v| cells[v].iter().any(|c| c.batches.is_some()))
        .collect();
    if !batched.is_empty() {
        header("Batch size B, steps per round T and PrivRange subsets k' of the batched rows (B / T / k')");
        for v in batched {
            let row: Vec<String> = cells[v]
                .iter()
                .map(|c| match c.batches {
                    Some((b, t, s)) => format!("{b} / {t} / {s}"),
                    None => "—".into(),
                })
                .collect();
            println!("| {} | {} |", variants[v].label, row.join(" | "));
        }
    }
    let mut notes = Vec::new();
    for (v, variant) in variants.iter().enumerate() {
        for (j, cell) in cells[v].iter().enumerate() {
            if let Some(msg) = &cell.refused {
                notes.push(format!(
                    "- {} at n = {}: refused by prepare: {msg}",
                    variant.label, setup.ns[j]
                ));
            }
            for (msg, count) in &cell.messages {
                notes.push(format!(
                    "- {} at n = {}: {count} run(s) failed: {msg}",
                    variant.label, setup.ns[j]
                ));
            }
        }
    }
    if !notes.is_empty() {
        println!();
        println!("Refusals and failures:");
        println!();
        for note in notes {
            println!("{note}");
        }
    }
}
