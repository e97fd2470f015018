//! The privacy audit's thorough profile: the same points as the fast profile in
//! `tests/privacy_audit/` with ten times the trials, plus the targeted points, written as a
//! table into docs/privacy-audit.md (between the `audit-table` markers).
//!
//! Run: `cargo bench --bench privacy_audit` (release), or `cargo test --bench privacy_audit`
//! (the debug test profile, what produced the committed table).

#![allow(dead_code)]

#[path = "../tests/privacy_audit/bound.rs"]
mod bound;
#[path = "../tests/privacy_audit/canary.rs"]
mod canary;
#[path = "../tests/privacy_audit/cases.rs"]
mod cases;
#[path = "../tests/privacy_audit/job.rs"]
mod job;
#[path = "../tests/privacy_audit/report.rs"]
mod report;
#[path = "../tests/privacy_audit/stats.rs"]
mod stats;
#[path = "../tests/privacy_audit/targeted.rs"]
mod targeted;

use std::time::{Duration, Instant};

use report::{Row, Verdict};

const SEED: u64 = 2022;
const START: &str = "<!-- audit-table:start -->";
const END: &str = "<!-- audit-table:end -->";

fn main() {
    let start = Instant::now();
    let effort = report::thorough();
    let mut points = cases::all_points();
    points.extend(targeted::k_dp_pca_points());
    let mut rows: Vec<Row> = Vec::new();
    for (i, p) in points.iter().enumerate() {
        let r = report::run_point(p, &effort, SEED + i as u64);
        println!("{}", r.line());
        rows.push(r);
    }
    let hole_effort = job::Effort {
        trials: 1600,
        run_limit: Duration::from_secs(120),
        delta: 0.1,
    };
    let hole = targeted::fraction_bits_hole(16, 0.2, &hole_effort, SEED);
    println!("{}", hole.line());
    rows.push(hole);
    let minutes = start.elapsed().as_secs_f64() / 60.0;
    let count = |v: Verdict| rows.iter().filter(|r| r.verdict == v).count();
    let summary = format!(
        "{} points: {} audited and passed, {} passed blind (ε_charged unreachable), {} refused by `prepare`, {} not audited, {} failed. Seed {SEED}; {minutes:.0} min on the shared 2-core machine.\n\n",
        rows.len(),
        count(Verdict::Pass),
        count(Verdict::Blind),
        count(Verdict::Refused),
        count(Verdict::TooSlow),
        count(Verdict::Fail),
    );
    let table = format!("{START}\n{summary}{}{END}", report::markdown(&rows));
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/privacy-audit.md");
    let doc = std::fs::read_to_string(path).expect("docs/privacy-audit.md");
    let (Some(a), Some(b)) = (doc.find(START), doc.find(END)) else {
        panic!("docs/privacy-audit.md has no audit-table markers");
    };
    let updated = format!("{}{}{}", &doc[..a], table, &doc[b + END.len()..]);
    std::fs::write(path, updated).expect("write docs/privacy-audit.md");
    println!("{summary}");
}
