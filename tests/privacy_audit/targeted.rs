//! Points that need data or parameters built for them, and the auditor's own calibration
//! check (a mechanism with too little noise must be flagged).

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;
use serde_json::json;

use privpca::algorithms::RunEnv;
use privpca::dataset::Neighbours;
use privpca::linalg::Matrix;
use privpca::privacy::{Cost, PrivacyTarget};

use super::bound::Bound;
use super::canary::Pair;
use super::job::{AUDIT_DELTA, Effort, Job, audit_job, epsilon_charged, split_and_audit};
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

/// A toy Gaussian mechanism on a scalar query of sensitivity 1 (0 on D, 1 on D'), charged
/// ρ = `rho` but drawing its noise, through the service's own release path, with sd
/// `noise_factor` × 1/sqrt(2ρ). With `noise_factor` < 1 it is under-noised and the auditor must
/// say so.
pub fn gaussian_toy(rho: f64, noise_factor: f64, trials: u64, seed: u64) -> (f64, Bound) {
    let charged_sd = 1.0 / (2.0 * rho).sqrt();
    let sd = noise_factor * charged_sd;
    let release = |value: f64, seed: u64| -> Vec<f64> {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let mut progress = |_: u32, _: u32| Ok(());
        let mut env = RunEnv::new(&mut rng, &mut progress);
        let out = env
            .gaussian_release("toy", Matrix::from_element(1, 1, value), 1.0, sd)
            .expect("release");
        vec![0.0, out[(0, 0)]]
    };
    let results: Vec<(Vec<f64>, Vec<f64>)> = (0..trials)
        .into_par_iter()
        .map(|i| (release(0.0, seed + 2 * i), release(1.0, seed + 2 * i + 1)))
        .collect();
    let charged = Cost::gaussian(1.0, charged_sd);
    (
        epsilon_charged(&charged, AUDIT_DELTA),
        split_and_audit(results, AUDIT_DELTA),
    )
}
