//! Running points and writing their verdicts as a table.

use std::time::Duration;

use super::canary::{STATISTICS, pair};
use super::cases::{JOB_DELTA, Point, RHO};
use super::job::{AUDIT_DELTA, Effort, Job, Outcome, audit_job, reachable};
use privpca::privacy::PrivacyTarget;

/// One line of the table.
pub struct Row {
    pub algorithm: String,
    pub relation: String,
    pub parameters: String,
    pub epsilon_charged: Option<f64>,
    pub epsilon_lower: Option<f64>,
    /// The largest bound the trials that bound ε could show (all in the event on one side,
    /// none on the other): a pass means something only when this exceeds ε_charged.
    pub epsilon_reachable: Option<f64>,
    /// Trials per side.
    pub trials: usize,
    pub verdict: Verdict,
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    /// ε_lower ≤ ε_charged, but the trials could not have shown more than ε_charged: a pass
    /// that says nothing.
    Blind,
    Refused,
    TooSlow,
    Fail,
}

impl Verdict {
    fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Blind => "pass (blind: ε_charged unreachable)",
            Verdict::Refused => "refused (pass)",
            Verdict::TooSlow => "not audited: too slow",
            Verdict::Fail => "**FAIL**",
        }
    }
}

/// The target every audited job states: ρ = [`RHO`], with δ = [`JOB_DELTA`] for approximate parts.
pub fn target() -> PrivacyTarget {
    PrivacyTarget {
        public_default: false,
        rho: RHO,
        delta: Some(JOB_DELTA),
        epsilon: None,
    }
}

/// Audits one point on the pair of [`super::canary::pair`].
pub fn run_point(point: &Point, effort: &Effort, seed: u64) -> Row {
    let job = Job {
        algorithm: point.algorithm,
        params: point.params.clone(),
        neighbours: point.neighbours,
        target: target(),
        twin: false,
    };
    if let Some(reason) = super::cases::too_slow(point, effort) {
        return row(&job, &point.label, Outcome::TooSlow(reason));
    }
    let effort = Effort {
        trials: super::cases::trials(point, effort),
        ..*effort
    };
    let pair = pair(&point.neighbours, point.d, point.n);
    row(
        &job,
        &point.label,
        audit_job(&job, &pair, point.d, point.n, &effort, seed),
    )
}

/// The row of one outcome.
pub fn row(job: &Job, parameters: &str, outcome: Outcome) -> Row {
    let (epsilon_charged, epsilon_lower, epsilon_reachable, trials, verdict, detail) = match outcome {
        Outcome::Refused(reason) => (None, None, None, 0, Verdict::Refused, reason),
        Outcome::TooSlow(reason) => (None, None, None, 0, Verdict::TooSlow, reason),
        Outcome::Audited {
            cost,
            epsilon_charged,
            bound,
            failures,
            trials,
        } => {
            let test = bound.test;
            let detail = format!(
                "ρ = {:.4}, δ spent = {:.1e}; at δ = {:.0e}, test {} {} {:.4} on {}: {} vs {} of {}; failed runs {}",
                cost.rho,
                cost.delta,
                bound.delta,
                STATISTICS[test.statistic],
                if test.at_least { "≥" } else { "≤" },
                test.threshold,
                if test.side1_is_a { "D' vs D" } else { "D vs D'" },
                bound.hits_a,
                bound.hits_b,
                bound.trials,
                failures
            );
            let can_show = reachable(bound.trials as usize, bound.delta);
            let verdict = if bound.epsilon > epsilon_charged {
                Verdict::Fail
            } else if can_show <= epsilon_charged {
                Verdict::Blind
            } else {
                Verdict::Pass
            };
            (
                Some(epsilon_charged),
                Some(bound.epsilon),
                Some(can_show),
                trials,
                verdict,
                detail,
            )
        }
    };
    Row {
        algorithm: job.algorithm.info().name.to_string(),
        relation: job.neighbours.relation().as_str().to_string(),
        parameters: if job.twin {
            format!("{parameters} [2×ρ twin]")
        } else {
            parameters.to_string()
        },
        epsilon_charged,
        epsilon_lower,
        epsilon_reachable,
        trials,
        verdict,
        detail,
    }
}

impl Row {
    /// One line for the test log.
    pub fn line(&self) -> String {
        let f = |x: Option<f64>| x.map_or("—".to_string(), |x| format!("{x:.3}"));
        format!(
            "{:<16} {:<12} {:<60} ε_charged {:>7} ε_lower {:>7} (reachable {:>6}) trials/side {:>6} {} [{}]",
            self.algorithm,
            self.relation,
            self.parameters,
            f(self.epsilon_charged),
            f(self.epsilon_lower),
            f(self.epsilon_reachable),
            self.trials,
            self.verdict.as_str(),
            self.detail
        )
    }
}

/// The Markdown table of `rows`.
#[allow(dead_code)] // used by the thorough profile (benches/privacy_audit.rs)
pub fn markdown(rows: &[Row]) -> String {
    let mut out = String::from(
        "| algorithm | relation | parameters | ε charged | ε lower bound | ε reachable | trials per side | verdict |\n|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let f = |x: Option<f64>| x.map_or("—".to_string(), |x| format!("{x:.3}"));
        out.push_str(&format!(
            "| {} | {} | `{}` | {} | {} | {} | {} | {} |\n",
            r.algorithm,
            r.relation,
            r.parameters.replace('|', "\\|"),
            f(r.epsilon_charged),
            f(r.epsilon_lower),
            f(r.epsilon_reachable),
            if r.trials == 0 {
                "—".to_string()
            } else {
                r.trials.to_string()
            },
            r.verdict.as_str()
        ));
    }
    out
}

/// The fast profile's effort: every point at its floor (`job::trial_floor`, about 80–100 trials
/// per side at the sweep's ρ and δ): the fewest that can show its charge, so that CI time
/// stays what it was under the old time budgets.
pub fn fast() -> Effort {
    Effort {
        trials: 0,
        run_limit: Duration::from_secs(120),
        delta: AUDIT_DELTA,
    }
}

/// The thorough profile's effort.
#[allow(dead_code)] // used by benches/privacy_audit.rs
pub fn thorough() -> Effort {
    Effort {
        trials: 2000,
        run_limit: Duration::from_secs(120),
        delta: AUDIT_DELTA,
    }
}
