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

#[test]
fn auditor_flags_a_gaussian_mechanism_with_half_its_noise() {
    let (charged, bound) = targeted::gaussian_toy(0.2, 0.5, 40_000, SEED);
    println!(
        "under-noised toy: ε charged {charged:.3}, ε lower bound {:.3}, {bound:?}",
        bound.epsilon
    );
    assert!(
        bound.epsilon > charged,
        "the auditor missed a Gaussian mechanism with half the noise its charge needs: ε lower bound {:.3} ≤ charged {charged:.3}",
        bound.epsilon
    );
}

#[test]
fn auditor_passes_the_same_mechanism_with_its_full_noise() {
    let (charged, bound) = targeted::gaussian_toy(0.2, 1.0, 40_000, SEED);
    println!(
        "correct toy: ε charged {charged:.3}, ε lower bound {:.3}, {bound:?}",
        bound.epsilon
    );
    assert!(bound.epsilon <= charged, "false alarm on a correct mechanism");
    // And it is not blind: the bound reaches a good part of the charge.
    assert!(
        bound.epsilon > 0.4 * charged,
        "lower bound {:.3} is uninformative",
        bound.epsilon
    );
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
        budget: std::time::Duration::from_secs(150),
        run_limit: std::time::Duration::from_secs(10),
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
        "{} points: {} passed, {} refused, {} too slow to audit, {} failed; {:.1} s",
        rows.len(),
        count(Verdict::Pass),
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
