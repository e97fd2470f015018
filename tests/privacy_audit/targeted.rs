//! Points that need data or parameters built for them, and the auditor's own calibration
//! check: for every mechanism it audits with a known output distribution, the 2×-ρ
//! under-noised twin (noise sd 1/√2 of the calibrated one, charged the real ρ) must be flagged
//! and the real mechanism must pass.

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;
use serde_json::{Value, json};

use privpca::algorithms::RunEnv;
use privpca::dataset::Neighbours;
use privpca::linalg::Matrix;
use privpca::privacy::lattice::{GaussianLattice, release_value, to_grid};
use privpca::privacy::{Cost, PrivacyTarget};

use super::bound::{Bound, Samples, Test, audit_fixed, gaussian_threshold};
use super::canary::{Pair, pair};
use super::job::{Effort, Job, audit_job, audit_job_with, epsilon_charged};
use super::report::{Row, row, target};

/// `federated_power` with `fraction_bits: 0`, S = t = `sites` (the threshold at its largest),
/// one round, at ρ = `rho`, on records of d = 1 with β = 0.2 (Δ = β² = 0.04) under add_remove.
///
/// Each site adds noise of sd m·Δ/√t (0.016 at S = t = 16, ρ = 0.2) and encodes its value
/// rounded to the step 2^-f = 1. The sites holding zero rows encode round(noise) = 0 almost
/// surely, so the sum reveals the last site's round(±a + g) alone: its own release, whose noise
/// variance is t times smaller than the charge assumes (a √t-times larger Gaussian μ). The last site holds 12 rows of norm β (a = 0.48, just below the rounding
/// boundary ½); the canary row, appended, lands in that site and moves a to 0.52. The released
/// eigenvalue |sum| is then 0 or 1, and which one it is says whether the canary is there.
pub fn fraction_bits_hole(sites: usize, rho: f64, effort: &Effort, seed: u64) -> Row {
    let (d, per_site, beta) = (1, 12usize, 0.2);
    let n = sites * per_site;
    let mut side0 = Matrix::zeros(d, n);
    for i in n - per_site..n {
        side0[(0, i)] = beta;
    }
    let mut side1 = Matrix::zeros(d, n + 1);
    for i in n - per_site..=n {
        side1[(0, i)] = beta;
    }
    let pair = Pair {
        side0,
        side1,
        canary: vec![1.0],
        replaced: None,
    };
    let params = json!({"k": 1, "iterations": 1, "sites": sites, "threshold": sites, "fraction_bits": 0});
    let job = Job {
        algorithm: privpca::algorithms::find("federated_power").expect("registered"),
        params: params.clone(),
        neighbours: Neighbours::AddRemove { beta, alpha: beta },
        target: PrivacyTarget { rho, ..target() },
        twin: false,
    };
    let outcome = audit_job(&job, &pair, d, n, effort, seed);
    row(
        &job,
        &format!("{params} at ρ = {rho} (d = 1, β = 0.2, rounding-boundary pair)"),
        outcome,
    )
}

/// `k_dp_pca` needs tens of thousands of records before its range histogram can clear its
/// threshold at the audit ρ; it gets its own, larger, dataset (replace_one, d = 2).
pub fn k_dp_pca_points() -> Vec<super::cases::Point> {
    let algorithm = privpca::algorithms::find("k_dp_pca").expect("registered");
    let neighbours = Neighbours::ReplaceOne {
        beta: 1.0,
        alpha: 2f64.sqrt(),
    };
    super::cases::points_of(algorithm, neighbours, 2, 40_000)
}

/// The self-check's ρ and δ: where the gap between a Gaussian mechanism's charge and its
/// 2×-ρ twin's true ε is widest for a given number of trials (docs/privacy-audit.md,
/// "Self-check"). ρ-zCDP and the exact Gaussian curve hold at every δ, so any δ is a valid
/// place to compare.
pub const TWIN_RHO: f64 = 1.0;
pub const TWIN_DELTA: f64 = 0.2;
/// Trials per side of each self-check audit: at this count the expected bound of a 2×-ρ
/// Gaussian twin is about 0.6 above its charge (2.06 against 1.44) and a correct mechanism's
/// about 0.4 below.
pub const TWIN_TRIALS: usize = 4000;

/// The noise primitives of `RunEnv` that every Gaussian release of every algorithm goes
/// through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Primitive {
    /// `gaussian_scalar_release`: one number.
    Scalar,
    /// `gaussian_release`: a 4×4 matrix, the difference spread over all 16 coordinates.
    Vector,
    /// `gaussian_block_release`: two blocks of 8 of one 16-coordinate release.
    Blocks,
    /// `gaussian_symmetric_release`: a 3×3 symmetric matrix (the matrix-perturbation path).
    Symmetric,
    /// `lattice_gaussian_noise`: integer draws on a lattice the mechanism assembles its release
    /// on itself (CAPE).
    Lattice,
}

pub const PRIMITIVES: [Primitive; 5] = [
    Primitive::Scalar,
    Primitive::Vector,
    Primitive::Blocks,
    Primitive::Symmetric,
    Primitive::Lattice,
];

impl Primitive {
    pub fn name(self) -> &'static str {
        match self {
            Primitive::Scalar => "RunEnv::gaussian_scalar_release (1 coordinate)",
            Primitive::Vector => "RunEnv::gaussian_release (16 coordinates)",
            Primitive::Blocks => "RunEnv::gaussian_block_release (2 × 8 coordinates)",
            Primitive::Symmetric => "RunEnv::gaussian_symmetric_release (3×3)",
            Primitive::Lattice => "RunEnv::lattice_gaussian_noise (CAPE lattice)",
        }
    }

    /// One release on D (`side1` false) or D' of a query with L2 sensitivity 1, noise sd `sd`;
    /// returns the output projected on the unit direction of D' − D.
    fn release(self, env: &mut RunEnv, side1: bool, sd: f64) -> f64 {
        let v = if side1 { 1.0 } else { 0.0 };
        match self {
            Primitive::Scalar => env.gaussian_scalar_release("audit", v, 1.0, sd).expect("release"),
            Primitive::Vector => {
                let out = env
                    .gaussian_release("audit", Matrix::from_element(4, 4, v / 4.0), 1.0, sd)
                    .expect("release");
                out.iter().sum::<f64>() / 4.0
            }
            Primitive::Blocks => (0..2)
                .map(|_| {
                    let out = env
                        .gaussian_block_release("audit", Matrix::from_element(8, 1, v / 4.0), 1.0, sd, 16)
                        .expect("release");
                    out.iter().sum::<f64>() / 4.0
                })
                .sum(),
            Primitive::Symmetric => {
                let mut a = Matrix::zeros(3, 3);
                a[(2, 2)] = v;
                env.gaussian_symmetric_release("audit", a, 1.0, sd)
                    .expect("release")[(2, 2)]
            }
            Primitive::Lattice => {
                let lattice = GaussianLattice::new(sd, 1.0, 1).expect("lattice");
                let h = lattice.grid();
                let z = env.lattice_gaussian_noise("audit", &lattice, 1)[0];
                release_value(to_grid(v, h), z, h)
            }
        }
    }
}

/// One self-check audit: a mechanism (real or 2×-ρ twin), its charge at [`TWIN_DELTA`] and the
/// bound.
pub struct Checked {
    pub mechanism: String,
    pub twin: bool,
    pub epsilon_charged: f64,
    pub epsilon_lower: f64,
    /// Trials per side.
    pub trials: usize,
    pub detail: String,
}

impl Checked {
    pub fn fails(&self) -> bool {
        self.epsilon_lower > self.epsilon_charged
    }

    pub fn line(&self) -> String {
        format!(
            "{:<58} {:<5} ε_charged {:.3} ε_lower {:.3} trials/side {} {} [{}]",
            self.mechanism,
            if self.twin { "twin" } else { "real" },
            self.epsilon_charged,
            self.epsilon_lower,
            self.trials,
            if self.fails() { "flagged" } else { "passed" },
            self.detail
        )
    }
}

fn describe(bound: &Bound) -> String {
    format!(
        "at δ = {}, statistic ≥ {:.4} on D' vs D: {} vs {} of {}",
        bound.delta, bound.test.threshold, bound.hits_a, bound.hits_b, bound.trials
    )
}

/// The likelihood-ratio test on statistic `statistic`, fixed before the trials: the event
/// {statistic ≥ τ} on D' against D, with τ from [`gaussian_threshold`] mapped to the
/// statistic's units (D's mean `mean0`, charged noise sd `sd`).
fn lr_test(statistic: usize, mean0: f64, sd: f64, mu: f64, trials: usize) -> Test {
    Test {
        statistic,
        threshold: mean0 + gaussian_threshold(mu, trials as u64, TWIN_DELTA) * sd,
        at_least: true,
        side1_is_a: true,
    }
}

/// Audits `primitive` charged ρ = [`TWIN_RHO`] for sensitivity 1 but drawing noise of sd
/// `noise_factor` × 1/sqrt(2ρ) through the service's own `RunEnv` (1/√2 for the 2×-ρ twin), with
/// the likelihood-ratio test of the exact Gaussian on `trials` trials per side.
pub fn primitive(primitive: Primitive, noise_factor: f64, trials: usize, seed: u64) -> Checked {
    let charged_sd = 1.0 / (2.0 * TWIN_RHO).sqrt();
    let sd = noise_factor * charged_sd;
    let run = |side1: bool, seed: u64| -> Vec<f64> {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let mut progress = |_: u32, _: u32| Ok(());
        let mut env = RunEnv::new(&mut rng, &mut progress);
        vec![0.0, primitive.release(&mut env, side1, sd)]
    };
    let (side0, side1): (Vec<Vec<f64>>, Vec<Vec<f64>>) = (0..trials as u64)
        .into_par_iter()
        .map(|i| (run(false, seed + 2 * i), run(true, seed + 2 * i + 1)))
        .unzip();
    let charged = Cost::gaussian(1.0, charged_sd);
    let test = lr_test(1, 0.0, charged_sd, (2.0 * charged.rho).sqrt(), trials);
    let bound = audit_fixed(&Samples { side0, side1 }, test, TWIN_DELTA);
    Checked {
        mechanism: primitive.name().to_string(),
        twin: noise_factor < 1.0,
        epsilon_charged: epsilon_charged(&charged, TWIN_DELTA),
        epsilon_lower: bound.epsilon,
        trials,
        detail: describe(&bound),
    }
}

/// The whole algorithms whose release is one Gaussian mechanism seen through the output:
/// `analyze_gauss` on a matrix (entry) with k = d and its eigenvalues releases Â = A + E, and
/// Σ_j λ_j⟨q_j, c⟩² = cᵀÂc is the projection of the release on A' − A: the exact
/// likelihood-ratio statistic. (Under replace_one on records the same contrast statistic,
/// cᵀÂc − rᵀÂr, never reached the threshold on either side; not yet understood, so that case
/// is left out rather than kept as a test that cannot fail.)
/// (name, relation, statistic, D's mean, the difference of the means.)
pub fn exact_algorithms() -> Vec<(&'static str, Neighbours, usize, f64, f64)> {
    vec![("analyze_gauss", Neighbours::Entry { u: 1.0 }, 3, 0.0, 1.0)]
}

/// Audits one of [`exact_algorithms`] through the registry (`prepare`/`run_prepared`, d = 3,
/// k = 3, eigenvalues released) at ρ = [`TWIN_RHO`], real or as its 2×-ρ twin (prepared at 2ρ,
/// charged ρ), with the likelihood-ratio test fixed in advance.
pub fn exact_algorithm(index: usize, twin: bool, trials: usize, seed: u64) -> Row {
    let (name, neighbours, statistic, mean0, shift) = exact_algorithms()[index];
    let (d, n) = (3, 16);
    let params = json!({"k": d, "with_eigenvalues": true});
    let job = Job {
        algorithm: privpca::algorithms::find(name).expect("registered"),
        params: params.clone(),
        neighbours,
        target: PrivacyTarget {
            rho: TWIN_RHO,
            ..target()
        },
        twin,
    };
    let mu = (2.0 * TWIN_RHO).sqrt();
    // Under the charge the statistic's noise sd is (difference of the means)/μ.
    let test = lr_test(statistic, mean0, shift / mu, mu, trials);
    let effort = Effort {
        trials,
        run_limit: std::time::Duration::from_secs(120),
        delta: TWIN_DELTA,
    };
    let pair = pair(&neighbours, d, n);
    let outcome = audit_job_with(&job, &pair, d, n, &effort, seed, Some(test));
    row(
        &job,
        &format!("{params} at ρ = {TWIN_RHO}, likelihood-ratio test"),
        outcome,
    )
}

/// Parameters that make each algorithm's release as close to one Gaussian mechanism as its
/// schema allows (one iteration, k = d, eigenvalues released), for the twin table.
fn tight(algorithm: &dyn privpca::algorithms::DynAlgorithm, d: usize) -> Value {
    let schema = algorithm.parameters();
    let has = |p: &str| schema["properties"].get(p).is_some();
    let mut params = if algorithm.info().name == "cape_agn" {
        json!({"k": d, "model": "stm"})
    } else {
        json!({"k": d})
    };
    for (p, v) in [
        ("iterations", json!(1)),
        ("power_iterations", json!(1)),
        ("with_eigenvalues", json!(true)),
    ] {
        if has(p) {
            params[p] = v;
        }
    }
    params
}

/// Every algorithm of the registry (first relation it takes) at [`tight`] parameters, real
/// and 2×-ρ twin, audited black-box (statistic and threshold chosen on half the trials) at
/// ρ = [`TWIN_RHO`], δ = [`TWIN_DELTA`]: what the sweep's method can tell of a 2× error at each
/// algorithm. For docs/privacy-audit.md; too slow for CI.
#[allow(dead_code)] // used by benches/privacy_audit.rs and an ignored test
pub fn algorithm_twins(trials: usize, seed: u64) -> Vec<Row> {
    let effort = Effort {
        trials,
        run_limit: std::time::Duration::from_secs(120),
        delta: TWIN_DELTA,
    };
    let mut rows = Vec::new();
    for &algorithm in privpca::algorithms::registry() {
        let d = super::cases::D;
        let Some(&neighbours) = super::cases::relations(algorithm, d).first() else {
            continue;
        };
        let n = if algorithm.info().name == "k_dp_pca" {
            40_000
        } else {
            super::cases::N
        };
        let params = tight(algorithm, d);
        for twin in [false, true] {
            let job = Job {
                algorithm,
                params: params.clone(),
                neighbours,
                target: PrivacyTarget {
                    rho: TWIN_RHO,
                    ..target()
                },
                twin,
            };
            let pair = pair(&neighbours, d, n);
            let r = row(
                &job,
                &format!("{params} at ρ = {TWIN_RHO}"),
                audit_job(&job, &pair, d, n, &effort, seed),
            );
            println!("{}", r.line());
            rows.push(r);
        }
    }
    rows
}
