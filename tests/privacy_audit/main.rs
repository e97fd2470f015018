//! Black-box privacy audit (issue 22): every algorithm the registry runs as a job, at the
//! extremes of every parameter a tenant can set, on a worst-case neighbouring pair; an ε lower
//! bound from a distinguishing test must not exceed what the job was charged.
//! docs/privacy-audit.md explains the method and holds the thorough profile's table
//! (`cargo bench --bench privacy_audit`, same modules, more trials).

mod bound;
mod canary;
mod cases;
mod job;
mod report;
mod stats;
#[cfg(test)]
mod stats_tests;
mod targeted;

use std::time::Instant;

use report::{Row, Verdict};

/// Seeds: fixed, so the audit gives the same verdicts on every run.
const SEED: u64 = 22;

/// A primitive's self-check: the twin flagged, the real one passed and not blind (its bound
/// reaches 40 % of its claim); what is wrong goes to `wrong`.
fn judge(twin: &targeted::Checked, real: &targeted::Checked, wrong: &mut Vec<String>) {
    println!("{}\n{}", twin.line(), real.line());
    if !twin.fails() {
        wrong.push(format!("missed the 2×-ρ twin: {}", twin.line()));
    }
    if real.fails() {
        wrong.push(format!("false alarm: {}", real.line()));
    }
    if real.epsilon_lower <= 0.4 * real.epsilon_charged {
        wrong.push(format!("uninformative on the real mechanism: {}", real.line()));
    }
}

/// Every Gaussian noise primitive of `RunEnv`, real and as its 2×-ρ twin (noise sd 1/√2 of
/// the calibrated one, charged the real ρ): the twin must be flagged and the real one must
/// pass, with a bound that reaches a good part of its charge (the test is not blind).
#[test]
fn auditor_flags_every_gaussian_primitive_run_at_twice_its_rho() {
    let mut wrong = Vec::new();
    for (i, &p) in targeted::PRIMITIVES.iter().enumerate() {
        let seed = SEED + 1000 * i as u64;
        let twin = targeted::primitive(p, std::f64::consts::FRAC_1_SQRT_2, targeted::TWIN_TRIALS, seed);
        let real = targeted::primitive(p, 1.0, targeted::TWIN_TRIALS, seed + 500);
        judge(&twin, &real, &mut wrong);
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Every Laplace noise primitive of `RunEnv`, real and as its 2×-ρ twin (scale 1/√2 of the
/// calibrated one), held to the pure ε = sqrt(2ρ) its derivation claims: the twin must be
/// flagged, the real one must pass and reach a good part of its claim.
#[test]
fn auditor_flags_every_laplace_primitive_run_at_twice_its_rho() {
    let mut wrong = Vec::new();
    for (i, &p) in targeted::LAPLACE_PRIMITIVES.iter().enumerate() {
        let seed = SEED + 5000 + 1000 * i as u64;
        let twin =
            targeted::laplace_primitive(p, std::f64::consts::FRAC_1_SQRT_2, targeted::TWIN_TRIALS, seed);
        let real = targeted::laplace_primitive(p, 1.0, targeted::TWIN_TRIALS, seed + 500);
        judge(&twin, &real, &mut wrong);
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Every algorithm of the registry, whole, through the registry exactly as the runner calls
/// it, at a point where a statistic of its output is one release's likelihood-ratio
/// statistic (`targeted::exact_algorithms`): the twin prepared at 2ρ and charged ρ must fail,
/// the real job must pass.
#[test]
fn auditor_flags_every_algorithm_run_at_twice_its_rho() {
    let mut wrong = Vec::new();
    for (i, exact) in targeted::exact_algorithms().iter().enumerate() {
        let seed = SEED + 7000 + 1000 * i as u64;
        let t = Instant::now();
        let twin = targeted::exact_algorithm(exact, true, seed);
        let real = targeted::exact_algorithm(exact, false, seed + 500);
        println!(
            "{}\n{} ({:.1} s)",
            twin.line(),
            real.line(),
            t.elapsed().as_secs_f64()
        );
        if twin.verdict != Verdict::Fail {
            wrong.push(format!("missed the 2×-ρ twin: {}", twin.line()));
        }
        if real.verdict != Verdict::Pass {
            wrong.push(format!("real job did not pass: {}", real.line()));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Every algorithm at its tightest parameters, real and 2×-ρ twin, audited black-box: the
/// table of docs/privacy-audit.md ("What a 2× error looks like to the black-box audit").
/// Minutes in a debug build: `cargo test --test privacy_audit -- --ignored algorithm_twin_table`.
#[test]
#[ignore]
fn algorithm_twin_table() {
    let rows = targeted::algorithm_twins(targeted::TWIN_TRIALS, SEED);
    println!("{}", report::markdown(&rows));
}

/// federated_power accepts `fraction_bits: 0` on the current code; with S = t = 16 sites the
/// rounding to whole numbers erases every other site's noise (see `targeted::fraction_bits_hole`;
/// 16 rather than the allowed 64 sites only because a 64-site trial takes seconds in a debug
/// build). Compared at δ = 0.1: the leak is large in total variation (0.9 against 0.1), and at
/// large δ the charge's ε is small, so a few hundred trials show it.
/// Once configure refuses f = 0 (or the encoding stops rounding noise away) this passes as
/// "refused" or as a pass, with no edit here.
#[test]
fn federated_power_fraction_bits_zero() {
    let t = Instant::now();
    let effort = job::Effort {
        trials: 600,
        run_limit: std::time::Duration::from_secs(120),
        delta: 0.1,
    };
    let r = targeted::fraction_bits_hole(16, 0.2, &effort, SEED);
    println!("{} ({:.1} s)", r.line(), t.elapsed().as_secs_f64());
    assert!(r.verdict != Verdict::Fail, "privacy audit failed:\n{}", r.line());
}

#[test]
fn fast_profile_every_algorithm_at_its_extremes() {
    let start = Instant::now();
    let mut points = cases::all_points();
    points.extend(targeted::k_dp_pca_points());
    let effort = report::fast();
    let rows: Vec<Row> = points
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let t = Instant::now();
            let r = report::run_point(p, &effort, SEED + i as u64);
            println!("{} ({:.2} s)", r.line(), t.elapsed().as_secs_f64());
            r
        })
        .collect();
    let failures: Vec<String> = rows
        .iter()
        .filter(|r| r.verdict == Verdict::Fail)
        .map(Row::line)
        .collect();
    let count = |v: Verdict| rows.iter().filter(|r| r.verdict == v).count();
    println!(
        "{} points: {} passed, {} passed blind, {} refused, {} not audited, {} failed; {:.1} s",
        rows.len(),
        count(Verdict::Pass),
        count(Verdict::Blind),
        count(Verdict::Refused),
        count(Verdict::TooSlow),
        failures.len(),
        start.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "privacy audit failed:\n{}",
        failures.join("\n")
    );
}
