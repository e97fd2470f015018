//! One audited point: an algorithm from the registry with one parameter object, on one
//! neighbouring pair, run through `prepare`/`run_prepared` exactly as the runner does, each
//! trial with its own seeded ChaCha20 generator. The number of trials is fixed by the point,
//! never by a clock (deterministic: the audit cannot flake, and a slow machine does not make it
//! blind).

use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;
use serde_json::Value;

use privpca::algorithms::{DataInput, DynAlgorithm, Run, RunEnv};
use privpca::dataset::{DataContext, Neighbours};
use privpca::privacy::{Cost, Delta, PrivacyTarget, gaussian_curve, rho_to_epsilon};

use super::bound::{ALPHA, Bound, Samples, Test, audit, audit_fixed, epsilon_from_counts};
use super::canary::{Pair, statistics};

/// The δ at which the sweep compares the bound and the charge.
pub const AUDIT_DELTA: f64 = 1e-3;

/// The ε the job's charge implies at `delta`: the service's ρ → ε conversion at δ minus the δ
/// the job spends itself, and, for a Gaussian-only cost, the exact Gaussian curve (the ledger's
/// `exact_gaussian` rule) at the same δ when that is smaller: the strongest claim the service
/// makes for this charge. +∞ when the job spends all of δ.
pub fn epsilon_charged(cost: &Cost, delta: f64) -> f64 {
    let left = delta - cost.delta;
    let Ok(left) = Delta::new(left) else {
        return f64::INFINITY;
    };
    let cks = rho_to_epsilon(cost.rho, left);
    if cost.is_gaussian_only() {
        // A Gaussian-only cost spends no δ of its own, so `left` is the whole `delta`.
        cks.min(gaussian_curve::epsilon_for(
            gaussian_curve::mu_of_rho(cost.rho),
            left.get(),
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
    /// The 2×-ρ under-noised twin: run the algorithm prepared at twice `target.rho` (Gaussian
    /// noise sd 1/√2 of the real job's) while comparing against what the real job at `target`
    /// is charged. A correct auditor must flag it where its test has the power to.
    pub twin: bool,
}

/// What auditing one point gave.
pub enum Outcome {
    /// `prepare` refused the parameters (a pass: nothing runs).
    Refused(String),
    /// Not audited in this profile, for the stated reason (a point listed as too slow for it).
    TooSlow(String),
    Audited {
        cost: Cost,
        epsilon_charged: f64,
        bound: Bound,
        /// Runs that failed cleanly (both sides, all trials).
        failures: usize,
        /// Trials run per side.
        trials: usize,
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
        .run_prepared(
            config,
            Run {
                input,
                ctx,
                env: &mut env,
            },
        )
        .map_err(|e| e.to_string())
}

/// The largest ε lower bound `trials` held-out trials per side can show at `delta`: every
/// trial in the event on one side and none on the other.
pub fn reachable(trials: usize, delta: f64) -> f64 {
    let n = trials as u64;
    epsilon_from_counts(n, 0, n, delta, ALPHA)
}

/// The fewest trials per side (even: half select the test, half bound ε) whose held-out half
/// can show an ε lower bound above `epsilon_charged` at `delta`; `usize::MAX` when no count
/// up to 10⁶ can (an infinite charge).
pub fn trial_floor(epsilon_charged: f64, delta: f64) -> usize {
    let mut held_out = 1;
    while reachable(held_out, delta) <= epsilon_charged {
        held_out += 1 + held_out / 8;
        if held_out > 500_000 {
            return usize::MAX;
        }
    }
    // A margin of a quarter, so that a mechanism a little short of deterministic still shows.
    2 * (held_out + held_out / 4)
}

/// How many trials to run on each side: exactly `trials`, raised to [`trial_floor`] of the
/// point's charge when that is larger. Fixed in advance, never set by a clock.
#[derive(Clone, Copy)]
pub struct Effort {
    pub trials: usize,
    /// The longest one run may take before it is cancelled at its next progress report (and
    /// counts as a failed run): a guard against a hang, far above any audited run's time.
    pub run_limit: Duration,
    /// The δ at which the bound and the charge are compared ([`AUDIT_DELTA`] in the sweep).
    pub delta: f64,
}

/// Runs `effort.trials` trials on each side (at least [`trial_floor`]; seeds derived from
/// `seed`), half to choose the test and half to bound ε. `n` is D's row count (ignored for
/// matrices).
pub fn audit_job(job: &Job, pair: &Pair, d: usize, n: usize, effort: &Effort, seed: u64) -> Outcome {
    audit_job_with(job, pair, d, n, effort, seed, None)
}

/// As [`audit_job`]; with `fixed`, a test chosen before any trial (from the mechanism's known
/// output distribution) is evaluated on all `effort.trials` trials, with no selection half and
/// no floor.
pub fn audit_job_with(
    job: &Job,
    pair: &Pair,
    d: usize,
    n: usize,
    effort: &Effort,
    seed: u64,
    fixed: Option<Test>,
) -> Outcome {
    let ctx = context(job.neighbours, d, n);
    let charged = match job.algorithm.prepare(job.params.clone(), &ctx, &job.target) {
        Ok(p) => p,
        Err(e) => return Outcome::Refused(e.to_string()),
    };
    let cost = charged.cost;
    let prepared = if job.twin {
        let target = PrivacyTarget {
            public_default: false,
            rho: 2.0 * job.target.rho,
            ..job.target
        };
        match job.algorithm.prepare(job.params.clone(), &ctx, &target) {
            Ok(p) => p,
            Err(e) => return Outcome::Refused(format!("twin: {e}")),
        }
    } else {
        charged
    };
    let epsilon_charged = epsilon_charged(&cost, effort.delta);
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
    let trials = match fixed {
        Some(_) => effort.trials,
        None => {
            let floor = trial_floor(epsilon_charged, effort.delta);
            if floor == usize::MAX {
                return Outcome::TooSlow(format!(
                    "no number of trials can show ε_charged = {epsilon_charged}"
                ));
            }
            effort.trials.max(floor) & !1
        }
    };
    let results: Vec<(Vec<f64>, Vec<f64>)> = (0..trials as u64).into_par_iter().map(trial).collect();
    let failures = results
        .iter()
        .map(|(a, b)| usize::from(a[0] == 1.0) + usize::from(b[0] == 1.0))
        .sum();
    let bound = match fixed {
        Some(test) => {
            let (side0, side1) = results.into_iter().unzip();
            audit_fixed(&Samples { side0, side1 }, test, effort.delta)
        }
        None => split_and_audit(results, effort.delta),
    };
    Outcome::Audited {
        cost,
        epsilon_charged,
        bound,
        failures,
        trials,
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
