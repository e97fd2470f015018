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
use super::job::{Effort, Job, Outcome, audit_job, audit_job_with, epsilon_charged};
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
        grams: None,
    };
    let params = json!({"k": 1, "iterations": 1, "sites": sites, "threshold": sites, "fraction_bits": 0});
    let job = Job {
        algorithm: privpca::algorithms::find("federated_power").expect("registered"),
        params: params.clone(),
        neighbours: Neighbours::AddRemove { beta, alpha: beta },
        target: PrivacyTarget {
            public_default: false,
            rho,
            ..target()
        },
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

/// The Laplace noise primitives of `RunEnv` (PrivRange's histograms, the eigenvalue estimates
/// of `coherent_power` and `eigen_sampling`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaplacePrimitive {
    /// `laplace_scalar_release`: one number.
    Scalar,
    /// `laplace_count_release`: one count of a histogram.
    Count,
}

pub const LAPLACE_PRIMITIVES: [LaplacePrimitive; 2] = [LaplacePrimitive::Scalar, LaplacePrimitive::Count];

impl LaplacePrimitive {
    pub fn name(self) -> &'static str {
        match self {
            LaplacePrimitive::Scalar => "RunEnv::laplace_scalar_release (1 number)",
            LaplacePrimitive::Count => "RunEnv::laplace_count_release (1 count)",
        }
    }

    /// One release of 0 (D) or 1 (D'), L1 sensitivity 1, scale `b`.
    fn release(self, env: &mut RunEnv, side1: bool, b: f64) -> f64 {
        let v = if side1 { 1.0 } else { 0.0 };
        match self {
            LaplacePrimitive::Scalar => env.laplace_scalar_release("audit", v, 1.0, b).expect("release"),
            LaplacePrimitive::Count => env
                .laplace_count_release("audit", vec![v], 1.0, b)
                .expect("release")[0],
        }
    }
}

/// Audits a Laplace primitive charged ρ = [`TWIN_RHO`] as pure ε-DP with ε = sqrt(2ρ) (scale
/// b = 1/ε for sensitivity 1) but drawing at scale `noise_factor`·b (1/√2 for the 2×-ρ twin),
/// against that pure claim at [`PURE_DELTA`], with the test {output ≥ 1} fixed in advance (for
/// Laplace every threshold at or beyond D''s value shows the whole ε; at D''s value the event
/// has probability ½ on D', the most for the bound).
pub fn laplace_primitive(
    primitive: LaplacePrimitive,
    noise_factor: f64,
    trials: usize,
    seed: u64,
) -> Checked {
    let epsilon = (2.0 * TWIN_RHO).sqrt();
    let b = noise_factor / epsilon;
    let run = |side1: bool, seed: u64| -> Vec<f64> {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let mut progress = |_: u32, _: u32| Ok(());
        let mut env = RunEnv::new(&mut rng, &mut progress);
        vec![0.0, primitive.release(&mut env, side1, b)]
    };
    let (side0, side1): (Vec<Vec<f64>>, Vec<Vec<f64>>) = (0..trials as u64)
        .into_par_iter()
        .map(|i| (run(false, seed + 2 * i), run(true, seed + 2 * i + 1)))
        .unzip();
    let test = Test {
        statistic: 1,
        threshold: 1.0,
        at_least: true,
        side1_is_a: true,
    };
    let bound = audit_fixed(&Samples { side0, side1 }, test, PURE_DELTA);
    Checked {
        mechanism: primitive.name().to_string(),
        twin: noise_factor < 1.0,
        epsilon_charged: epsilon,
        epsilon_lower: bound.epsilon,
        trials,
        detail: describe(&bound),
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

/// One whole algorithm audited through the registry with the likelihood-ratio test of the one
/// Gaussian release its output shows: a configuration (the twin's "tight point") where a
/// statistic of the output is that release projected on the direction from D's mean to D''s.
pub struct Exact {
    pub name: &'static str,
    pub neighbours: Neighbours,
    /// Parameters (clip off: the job is calibrated to the declared bound).
    pub params: Value,
    pub pair: Pair,
    /// D's row count (ignored for a matrix).
    pub n: usize,
    /// The statistic of [`super::canary::STATISTICS`] the test reads.
    pub statistic: usize,
    /// The statistic's mean on D, and D''s mean minus D's.
    pub mean0: f64,
    pub shift: f64,
    /// Why the statistic is the release's projection (for the report).
    pub why: &'static str,
    pub claim: Claim,
    /// Trials per side ([`TWIN_TRIALS`] unless a run is slow and the margin wide).
    pub trials: usize,
}

/// Energy rows: D holds `base` records of norm β along e_1 (so the released energy A = base·β²
/// sits far from 0 and a signed and an absolute-value release agree) and zero rows; under
/// add_remove D' appends the canary β·e_1; d = 1.
fn energy_pair(beta: f64, base: usize, n: usize) -> Pair {
    let mut side0 = Matrix::zeros(1, n);
    for i in 0..base {
        side0[(0, i)] = beta;
    }
    let mut side1 = Matrix::zeros(1, n + 1);
    for i in 0..base {
        side1[(0, i)] = beta;
    }
    side1[(0, n)] = beta;
    let grams = Some((gram(&side0), gram(&side1)));
    Pair {
        side0,
        side1,
        canary: vec![1.0],
        replaced: None,
        grams,
    }
}

/// Σ x xᵀ of records stored as Xᵀ (d×n).
fn gram(xt: &Matrix) -> Matrix {
    xt * xt.transpose()
}

/// Two well-separated axes (d = 2): `m1` records β·e_1 and `m2` records β·e_2 (m1 ≫ m2, so
/// that even a basis released at a small share of ρ is the axes up to a small angle); D's last
/// record is β·e_1, D''s β·e_2 (replace_one). The Rayleigh quotients along the axes then move
/// by (−β², +β²): norm √2·β², the replace_one sensitivity of the eigenvalue release.
fn axes_pair(beta: f64, m1: usize, m2: usize) -> Pair {
    let n = m1 + m2 + 1;
    let mut side0 = Matrix::zeros(2, n);
    for i in 0..m1 {
        side0[(0, i)] = beta;
    }
    for i in m1..m1 + m2 {
        side0[(1, i)] = beta;
    }
    let mut side1 = side0.clone();
    side0[(0, n - 1)] = beta;
    side1[(1, n - 1)] = beta;
    let grams = Some((gram(&side0), gram(&side1)));
    Pair {
        side0,
        side1,
        canary: vec![0.0, 1.0],
        replaced: Some(vec![1.0, 0.0]),
        grams,
    }
}

/// The statistics' indices in [`super::canary::STATISTICS`].
const WEIGHTED_CANARY: usize = 3;
const GIVEN_BASIS: usize = 8;

/// What an exact point's statistic is compared against.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Claim {
    /// The job's whole charge, read on the exact Gaussian curve at [`TWIN_DELTA`] (the
    /// statistic reads a Gaussian release that carries all or nearly all of ρ).
    Charge,
    /// The statistic reads only a Gaussian release of this share of ρ, compared against that
    /// release's own charge (share·ρ on the exact Gaussian curve at [`TWIN_DELTA`]): for a job
    /// whose other releases cannot be shrunk away (k_dp_pca's PrivRange) and whose whole
    /// charge is converted with CKS, looser than the one release's.
    GaussianShare(f64),
    /// The statistic reads a Laplace release only (the eigenvalues of `coherent_power` and
    /// `eigen_sampling`), which claims pure ε_e-DP with ε_e = sqrt(2ρ_e) for its share ρ_e of
    /// the charge (its non-Gaussian part), compared at [`PURE_DELTA`]. The zCDP charge ε_e²/2
    /// converted to (ε, δ) is looser than a factor 2 (docs/privacy-audit.md), so the release is
    /// held to the pure claim its derivation makes.
    PureLaplace,
}

/// The δ at which a pure-ε claim is compared (any δ is valid for a pure claim; a small one
/// costs the Clopper–Pearson bound nothing).
pub const PURE_DELTA: f64 = 1e-6;

/// The whole algorithms audited with an exact likelihood-ratio test, each at a point where its
/// output shows one Gaussian release whole (all or nearly all of ρ):
/// - `analyze_gauss` on a matrix (entry), k = d = 3, eigenvalues: Σ_j λ_j⟨q_j, c⟩² = cᵀÂc, the
///   projection of Â = A + E on A' − A. (Under replace_one on records the contrast
///   cᵀÂc − rᵀÂr never reached the threshold on either side; not understood, so left out.)
/// - d = 1 under add_remove, one iteration, eigenvalues: the basis is ±1 and carries nothing,
///   and the released eigenvalue is the one noisy value of the energy A = Σ x², so the test
///   reads the energy release of the algorithm's own noise (the Ritz value of the one noisy
///   iterate, the noisy covariance, the sum of the sites' distributed noise) or, where the
///   eigenvalues are the generic extra release, that release at `eigenvalue_share` 0.99.
/// - replace_one-only algorithms, d = 2 on [`axes_pair`], eigenvalues at share 0.99: the
///   contrast Σ_j λ_j(⟨q_j, c⟩² − ⟨q_j, r⟩²) is the Rayleigh-quotient release projected on
///   its difference (−β², +β²).
pub fn exact_algorithms() -> Vec<Exact> {
    let beta = 1.0;
    let energy_at = |name: &'static str, beta: f64, params: Value, why: &'static str, claim: Claim| Exact {
        name,
        neighbours: Neighbours::AddRemove { beta, alpha: beta },
        params,
        pair: energy_pair(beta, 10, 16),
        n: 16,
        statistic: GIVEN_BASIS,
        mean0: 0.0,
        shift: beta * beta,
        why,
        claim,
        trials: TWIN_TRIALS,
    };
    let energy = |name, params, why| energy_at(name, beta, params, why, Claim::Charge);
    let axes_of =
        |name: &'static str, (m1, m2): (usize, usize), params: Value, why: &'static str, claim| Exact {
            name,
            neighbours: Neighbours::ReplaceOne {
                beta,
                alpha: 2f64.sqrt() * beta,
            },
            params,
            pair: axes_pair(beta, m1, m2),
            n: m1 + m2 + 1,
            statistic: GIVEN_BASIS,
            mean0: 0.0,
            shift: 2f64.sqrt() * beta * beta,
            why,
            claim,
            trials: TWIN_TRIALS,
        };
    let axes = |name, params, why| axes_of(name, (4000, 1000), params, why, Claim::Charge);
    vec![
        Exact {
            name: "analyze_gauss",
            neighbours: Neighbours::Entry { u: 1.0 },
            params: json!({"k": 3, "with_eigenvalues": true}),
            pair: pair(&Neighbours::Entry { u: 1.0 }, 3, 3),
            n: 3,
            statistic: WEIGHTED_CANARY,
            mean0: 0.0,
            shift: 1.0,
            why: "k = d = 3: cᵀÂc",
            claim: Claim::Charge,
            trials: TWIN_TRIALS,
        },
        energy(
            "noisy_power",
            json!({"k": 1, "iterations": 1, "clip": "none", "with_eigenvalues": true}),
            "d = 1: Ritz value of the one noisy iterate",
        ),
        energy_at(
            "coherent_power",
            beta,
            json!({"k": 1, "iterations": 1, "clip": "none", "with_eigenvalues": true, "eigenvalue_share": 0.99}),
            "d = 1: the Laplace eigenvalue release at share 0.99",
            Claim::PureLaplace,
        ),
        energy_at(
            "eigen_sampling",
            beta,
            json!({"k": 1, "clip": "none", "with_eigenvalues": true, "eigenvalue_share": 0.99}),
            "d = 1: the Laplace eigenvalue release at share 0.99",
            Claim::PureLaplace,
        ),
        energy(
            "federated_power",
            json!({"k": 1, "iterations": 1, "clip": "none", "with_eigenvalues": true, "sites": 2, "threshold": 2}),
            "d = 1, S = t = 2: the secure sum of the sites' noise",
        ),
        energy(
            "cape_pca",
            json!({"k": 1, "clip": "none", "with_eigenvalues": true, "sites": 2}),
            "d = 1, 2 sites: the noisy covariance",
        ),
        axes(
            "dp_oja",
            json!({"k": 2, "clip": "none", "with_eigenvalues": true, "eigenvalue_share": 0.99}),
            "d = 2 axes: eigenvalue release at share 0.99",
        ),
        energy_at(
            "cape_agn",
            3.0,
            json!({"k": 1, "model": "stm", "sites": 2, "power_iterations": 1, "with_eigenvalues": true, "eigenvalue_share": 0.99}),
            "d = 1 (documents of 3 copies of one word), 2 sites: eigenvalue release at share 0.99",
            Claim::Charge,
        ),
        Exact {
            // 40 001 records per run: half the trials, where the twin's expected bound (about
            // 1.6) still clears the charge (1.21) by a wide margin.
            trials: TWIN_TRIALS / 2,
            ..axes_of(
                "k_dp_pca",
                (32_000, 8_000),
                json!({"k": 2, "clip": "none", "with_eigenvalues": true, "eigenvalue_share": 0.85}),
                "d = 2 axes, n = 40 001: eigenvalue release at share 0.85 (PrivRange needs the rest)",
                Claim::GaussianShare(0.85),
            )
        },
        axes(
            "gossip_power",
            json!({"k": 2, "iterations": 1, "clip": "none", "with_eigenvalues": true, "eigenvalue_share": 0.99}),
            "d = 2 axes: eigenvalue release at share 0.99",
        ),
    ]
}

/// Audits one of [`exact_algorithms`] through the registry at ρ = [`TWIN_RHO`], real or as its
/// 2×-ρ twin (prepared at 2ρ, charged ρ), with the likelihood-ratio test fixed in advance.
pub fn exact_algorithm(exact: &Exact, twin: bool, seed: u64) -> Row {
    let trials = exact.trials;
    let d = exact.pair.canary.len();
    let job = Job {
        algorithm: privpca::algorithms::find(exact.name).expect("registered"),
        params: exact.params.clone(),
        neighbours: exact.neighbours,
        target: PrivacyTarget {
            public_default: false,
            rho: TWIN_RHO,
            ..target()
        },
        twin,
    };
    let gaussian = |rho: f64| {
        let mu = (2.0 * rho).sqrt();
        // Under the charge the statistic's noise sd is (difference of the means)/μ.
        (
            lr_test(exact.statistic, exact.mean0, exact.shift / mu, mu, trials),
            TWIN_DELTA,
        )
    };
    let (test, delta) = match exact.claim {
        Claim::Charge => gaussian(TWIN_RHO),
        Claim::GaussianShare(share) => gaussian(share * TWIN_RHO),
        // For a Laplace release every threshold at or beyond D''s mean shows the whole ε; at
        // D''s mean the event has probability ½ there, the most for the bound.
        Claim::PureLaplace => (
            Test {
                statistic: exact.statistic,
                threshold: exact.mean0 + exact.shift,
                at_least: true,
                side1_is_a: true,
            },
            PURE_DELTA,
        ),
    };
    let effort = Effort {
        trials,
        run_limit: std::time::Duration::from_secs(120),
        delta,
    };
    let mut outcome = audit_job_with(&job, &exact.pair, d, exact.n, &effort, seed, Some(test));
    if let Outcome::Audited {
        cost,
        epsilon_charged,
        ..
    } = &mut outcome
    {
        match exact.claim {
            Claim::Charge => {}
            Claim::GaussianShare(share) => {
                *epsilon_charged = super::job::epsilon_charged(&Cost::gaussian_zcdp(share * TWIN_RHO), delta);
            }
            Claim::PureLaplace => *epsilon_charged = (2.0 * cost.other_rho).sqrt(),
        }
    }
    row(
        &job,
        &format!(
            "{} at ρ = {TWIN_RHO}, likelihood-ratio test ({})",
            exact.params, exact.why
        ),
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
                    public_default: false,
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
