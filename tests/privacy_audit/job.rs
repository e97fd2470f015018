//! One audited point: an algorithm from the registry with one parameter object, on one
//! neighbouring pair, run through `prepare`/`run_prepared` exactly as the runner does, each
//! trial with its own seeded ChaCha20 generator (deterministic: the audit cannot flake).

use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;
use serde_json::Value;

use privpca::algorithms::{DataInput, DynAlgorithm, RunEnv};
use privpca::dataset::{DataContext, Neighbours};
use privpca::privacy::{Cost, Delta, PrivacyTarget, gaussian_curve, rho_to_epsilon};

use super::bound::{Bound, Samples, audit};
use super::canary::{Pair, statistics};

/// The δ at which the sweep compares the bound and the charge.
pub const AUDIT_DELTA: f64 = 1e-3;

/// The ε the job's charge implies at `delta`: the service's ρ → ε conversion at δ minus the δ
/// the job spends itself, and, for a Gaussian-only cost, the exact Gaussian curve (the ledger's
/// `exact_gaussian` rule) when that is smaller: the strongest claim the service makes for this
/// charge. +∞ when the job spends all of δ.
pub fn epsilon_charged(cost: &Cost, delta: f64) -> f64 {
    let left = delta - cost.delta;
    let Ok(delta) = Delta::new(left) else {
        return f64::INFINITY;
    };
    let cks = rho_to_epsilon(cost.rho, delta);
    if cost.is_gaussian_only() {
        cks.min(gaussian_curve::epsilon_for(
            gaussian_curve::mu_of_rho(cost.rho),
            AUDIT_DELTA,
        ))
    } else {
        cks
    }
}

/// An algorithm, its parameters and the job's target, on the public context of a dataset.
pub struct Job {
    pub algorithm: &'static dyn DynAlgorithm,
    pub params: Value,
    pub neighbours: Neighbours,
    pub target: PrivacyTarget,
}

/// What auditing one point gave.
pub enum Outcome {
    /// `prepare` refused the parameters (a pass: nothing runs).
    Refused(String),
    /// A pilot run took longer than the effort's run limit: not audited.
    TooSlow { seconds_per_pair: f64 },
    Audited {
        cost: Cost,
        epsilon_charged: f64,
        bound: Bound,
        /// Runs that failed cleanly (both sides, all trials).
        failures: usize,
    },
}

/// The public context under `neighbours` of a dataset with n records (or an m×m matrix): n is
/// public under replace_one only (docs/design/privacy.md §1.1).
pub fn context(neighbours: Neighbours, d: usize, n: usize) -> DataContext {
    DataContext {
        d,
        n: matches!(neighbours, Neighbours::ReplaceOne { .. }).then_some(n),
        neighbours,
        public: false,
        sparse: false,
    }
}

/// Runs one trial on `data` (records Xᵀ, or the matrix) with seed `seed`.
fn run_once(
    algorithm: &dyn DynAlgorithm,
    config: &Value,
    data: &privpca::linalg::Matrix,
    ctx: &DataContext,
    seed: u64,
    limit: Duration,
) -> Result<privpca::algorithms::Output, String> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    // A run that takes longer than the limit is cancelled at its next progress report and
    // counts as a failed run.
    let deadline = Instant::now() + limit;
    let mut progress = |_: u32, _: u32| {
        if Instant::now() > deadline {
            Err(privpca::algorithms::Cancelled)
        } else {
            Ok(())
        }
    };
    let mut env = RunEnv::new(&mut rng, &mut progress);
    let input = match ctx.neighbours {
        Neighbours::Entry { .. } => DataInput::Matrix { a: data },
        _ => DataInput::Records { xt: data.into() },
    };
    algorithm
        .run_prepared(config, input, ctx, &mut env)
        .map_err(|e| e.to_string())
}

/// Trials per side are never fewer than this, whatever the time budget says.
pub const MIN_TRIALS: usize = 20;

/// How many trials to run on each side: `trials`, or fewer when a pilot says one trial pair
/// takes so long that `budget` would be exceeded (never fewer than [`MIN_TRIALS`]).
pub struct Effort {
    pub trials: usize,
    pub budget: Duration,
    /// The longest one run may take. A point whose pilot runs take longer is not audited
    /// ([`Outcome::TooSlow`]): its extreme makes a job run for longer than an audit can afford.
    pub run_limit: Duration,
    /// The δ at which the bound and the charge are compared ([`AUDIT_DELTA`] in the sweep).
    pub delta: f64,
}

/// Runs up to `effort.trials` trials on each side (seeds derived from `seed`), half to choose
/// the test and half to bound ε. `n` is D's row count (ignored for matrices).
pub fn audit_job(job: &Job, pair: &Pair, d: usize, n: usize, effort: &Effort, seed: u64) -> Outcome {
    let ctx = context(job.neighbours, d, n);
    let prepared = match job.algorithm.prepare(job.params.clone(), &ctx, &job.target) {
        Ok(p) => p,
        Err(e) => return Outcome::Refused(e.to_string()),
    };
    let trial = |i: u64| {
        let base = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(2 * i);
        let r0 = run_once(
            job.algorithm,
            &prepared.config,
            &pair.side0,
            &ctx,
            base,
            effort.run_limit,
        );
        let r1 = run_once(
            job.algorithm,
            &prepared.config,
            &pair.side1,
            &ctx,
            base + 1,
            effort.run_limit,
        );
        (statistics(&r0, pair), statistics(&r1, pair))
    };
    let pilot_start = Instant::now();
    let mut results: Vec<(Vec<f64>, Vec<f64>)> = (0..2).map(trial).collect();
    let per_pair = pilot_start.elapsed().as_secs_f64() / 2.0;
    if per_pair > effort.run_limit.as_secs_f64() {
        return Outcome::TooSlow {
            seconds_per_pair: per_pair,
        };
    }
    // Two cores run pairs in parallel.
    let affordable = (2.0 * effort.budget.as_secs_f64() / per_pair.max(1e-9)) as usize;
    let trials = effort.trials.min(affordable.max(MIN_TRIALS)) & !1;
    results.extend((2..trials as u64).into_par_iter().map(trial).collect::<Vec<_>>());
    let failures = results
        .iter()
        .map(|(a, b)| usize::from(a[0] == 1.0) + usize::from(b[0] == 1.0))
        .sum();
    let bound = split_and_audit(results, effort.delta);
    Outcome::Audited {
        cost: prepared.cost,
        epsilon_charged: epsilon_charged(&prepared.cost, effort.delta),
        bound,
        failures,
    }
}

/// Splits paired trial statistics into a selection half and a held-out half and audits them.
pub fn split_and_audit(results: Vec<(Vec<f64>, Vec<f64>)>, delta: f64) -> Bound {
    let half = results.len() / 2;
    let (mut select, mut holdout) = (
        Samples {
            side0: Vec::new(),
            side1: Vec::new(),
        },
        Samples {
            side0: Vec::new(),
            side1: Vec::new(),
        },
    );
    for (i, (a, b)) in results.into_iter().enumerate() {
        let s = if i < half { &mut select } else { &mut holdout };
        s.side0.push(a);
        s.side1.push(b);
    }
    audit(&select, &holdout, delta)
}
