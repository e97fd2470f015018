//! The ledger's admission rule behind a pipe, for `scripts/accounting-oracle.sh`: each line on
//! stdin is one dataset's (ε, δ) budget and a sequence of charges, each line on stdout says
//! which charges the ledger admitted, one after another, as `privpca::privacy::admission::admit`
//! decides for the store (docs/design/privacy.md §2.6). Refused charges are skipped and the
//! sequence goes on.
//!
//! In:  `{"epsilon": 1.0, "delta": 1e-5, "charges": [{"kind": "gaussian", "rho": 0.01},
//!       {"kind": "laplace", "epsilon": 0.1}, {"kind": "exponential", "epsilon": 0.2},
//!       {"kind": "approximate", "epsilon": 0.1, "delta": 2e-7}]}`
//! Out: `{"admitted": [true, true, false, true], "rules": ["exact_gaussian", "cks", null, "cks"]}`

use std::io::{BufRead, Write};

use privpca::privacy::Cost;
use privpca::privacy::admission::{Budget, Spending, admit};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Charge {
    /// A Gaussian mechanism of zCDP cost ρ.
    Gaussian { rho: f64 },
    /// An ε-DP Laplace release, charged ε²/2.
    Laplace { epsilon: f64 },
    /// An exponential mechanism with parameter ε (bounded range), charged ε²/8.
    Exponential { epsilon: f64 },
    /// An (ε, δ)-DP subroutine (a stability histogram), charged δ-approximate ε²/2: its δ
    /// counts against the budget's fixed cap on approximate parts.
    Approximate { epsilon: f64, delta: f64 },
}

impl Charge {
    fn cost(&self) -> Cost {
        match *self {
            Charge::Gaussian { rho } => Cost::gaussian_zcdp(rho),
            Charge::Laplace { epsilon } => Cost::pure(epsilon),
            Charge::Exponential { epsilon } => Cost::exponential_mechanism(epsilon),
            Charge::Approximate { epsilon, delta } => Cost::approximate(epsilon, delta),
        }
    }
}

#[derive(Deserialize)]
struct Sequence {
    epsilon: f64,
    delta: f64,
    charges: Vec<Charge>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let stdin = std::io::stdin();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for line in stdin.lock().lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let sequence: Sequence = serde_json::from_str(&line)?;
        let budget = Budget::EpsilonDelta {
            epsilon: sequence.epsilon,
            delta: sequence.delta,
        };
        let mut spent = Spending::default();
        let mut admitted = Vec::new();
        let mut rules = Vec::new();
        for charge in &sequence.charges {
            let units = Spending::of_cost(&charge.cost());
            let rule = admit(&budget, spent, units);
            if rule.is_some() {
                spent = spent.checked_add(units).ok_or("overflow")?;
            }
            admitted.push(rule.is_some());
            rules.push(rule.map(|r| r.as_str()));
        }
        writeln!(out, "{}", json!({ "admitted": admitted, "rules": rules }))?;
    }
    out.flush()?;
    Ok(())
}
