//! How clients state privacy: a dataset's budget and a job's privacy target, as ρ or (ε, δ).
//! Parsing turns them into checked values or a 422 naming the field.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::ApiError;
use crate::privacy::units::{MAX_RHO, RHO_UNIT, checked_delta_budget_units, checked_rho_budget_units};
use crate::privacy::{Delta, Epsilon, PrivacyTarget, Rho, epsilon_delta_to_rho};

/// δ at which a budget stated only as ρ is displayed as (ε, δ).
pub const DEFAULT_DISPLAY_DELTA: f64 = 1e-6;

/// A dataset's privacy budget: either `{"rho": ρ}` (zCDP; optional `delta` caps the δ that
/// approximate-DP parts of jobs may spend) or `{"epsilon": ε, "delta": δ}` (converted once to
/// ρ = (sqrt(ln(1/δ)+ε) − sqrt(ln(1/δ)))²; no further δ may be spent).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetInput {
    /// zCDP budget ρ > 0.
    pub rho: Option<f64>,
    /// ε > 0 of an (ε, δ) budget.
    pub epsilon: Option<f64>,
    /// δ ∈ (0, 1): with `epsilon`, the δ of the (ε, δ) budget; with `rho`, the cap on
    /// approximate-DP δ that jobs may spend (default 0).
    pub delta: Option<f64>,
}

/// A budget in the ledger's terms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParsedBudget {
    pub rho: f64,
    pub rho_units: i64,
    pub delta_units: i64,
    /// δ used to show ρ as (ε, δ).
    pub display_delta: f64,
}

fn field_err(field: &str, e: impl std::fmt::Display) -> ApiError {
    ApiError::validation(field, e.to_string())
}

/// Privacy as a client states it, checked: the one parser behind budgets and job targets.
enum Stated {
    /// `{"rho": ρ}` with an optional approximate-DP δ.
    Rho { rho: Rho, delta: Option<Delta> },
    /// `{"epsilon": ε, "delta": δ}`, with ρ the largest whose CKS 2020 conversion is ≤ ε.
    EpsilonDelta {
        rho: f64,
        epsilon: Epsilon,
        delta: Delta,
    },
}

fn parse_stated(
    prefix: &str,
    rho: Option<f64>,
    epsilon: Option<f64>,
    delta: Option<f64>,
) -> Result<Stated, ApiError> {
    let f = |name: &str| format!("{prefix}.{name}");
    let delta_of = |d: f64| Delta::new(d).map_err(|e| field_err(&f("delta"), e));
    match (rho, epsilon) {
        (Some(rho), None) => {
            let rho = Rho::new(rho).map_err(|e| field_err(&f("rho"), e))?;
            if !(rho.get() <= MAX_RHO) {
                return Err(ApiError::validation(
                    f("rho"),
                    format!("rho must be at most {MAX_RHO}"),
                ));
            }
            Ok(Stated::Rho {
                rho,
                delta: delta.map(delta_of).transpose()?,
            })
        }
        (None, Some(epsilon)) => {
            let epsilon = Epsilon::new(epsilon).map_err(|e| field_err(&f("epsilon"), e))?;
            let delta = delta.ok_or_else(|| ApiError::validation(f("delta"), "epsilon needs delta"))?;
            let delta = delta_of(delta)?;
            let rho = epsilon_delta_to_rho(epsilon, delta);
            if !(rho <= MAX_RHO) {
                return Err(ApiError::validation(
                    f("epsilon"),
                    "epsilon is larger than the maximum",
                ));
            }
            Ok(Stated::EpsilonDelta { rho, epsilon, delta })
        }
        (Some(_), Some(_)) => Err(ApiError::validation(
            prefix,
            "give either rho or (epsilon, delta), not both",
        )),
        (None, None) => Err(ApiError::validation(prefix, "give rho or (epsilon, delta)")),
    }
}

impl BudgetInput {
    pub fn parse(&self) -> Result<ParsedBudget, ApiError> {
        let (rho, delta_budget, display_delta) =
            match parse_stated("budget", self.rho, self.epsilon, self.delta)? {
                Stated::Rho { rho, delta } => {
                    let delta = delta.map_or(0.0, Delta::get);
                    (
                        rho.get(),
                        delta,
                        if delta > 0.0 { delta } else { DEFAULT_DISPLAY_DELTA },
                    )
                }
                // The whole δ went into the conversion: no approximate-DP δ is left to spend.
                Stated::EpsilonDelta { rho, delta, .. } => (rho, 0.0, delta.get()),
            };
        let rho_units = checked_rho_budget_units(rho).map_err(|e| field_err("budget", e))?;
        if rho_units == 0 {
            // Budgets are rounded down to the ledger's unit; one that rounds to nothing could
            // never admit a job (and the schema refuses it).
            return Err(ApiError::validation(
                "budget",
                format!("the budget is ρ = {rho:e}, below the ledger's resolution of ρ = {RHO_UNIT:e}"),
            ));
        }
        Ok(ParsedBudget {
            rho,
            rho_units,
            delta_units: checked_delta_budget_units(delta_budget)
                .map_err(|e| field_err("budget.delta", e))?,
            display_delta,
        })
    }
}

/// A job's privacy: `{"rho": ρ}` (optionally with `delta` for approximate-DP parts) or
/// `{"epsilon": ε, "delta": δ}`, converted to ρ = (sqrt(ln(1/δ)+ε) − sqrt(ln(1/δ)))².
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PrivacyInput {
    /// zCDP ρ > 0 this job may spend.
    pub rho: Option<f64>,
    /// ε > 0, with `delta`.
    pub epsilon: Option<f64>,
    /// δ ∈ (0, 1): with `epsilon`, the conversion δ; with `rho`, the approximate-DP δ the job may spend.
    pub delta: Option<f64>,
}

impl PrivacyInput {
    pub fn parse(&self, prefix: &str) -> Result<PrivacyTarget, ApiError> {
        Ok(match parse_stated(prefix, self.rho, self.epsilon, self.delta)? {
            Stated::Rho { rho, delta } => PrivacyTarget::from_rho(rho, delta),
            Stated::EpsilonDelta { rho, epsilon, delta } => PrivacyTarget {
                rho,
                delta: Some(delta.get()),
                epsilon: Some(epsilon.get()),
            },
        })
    }
}

/// Privacy amounts as ρ and as (ε, δ).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PrivacyAmount {
    /// zCDP ρ.
    pub rho: f64,
    /// Approximate-DP δ spent by (ε, δ) subroutines.
    pub delta: f64,
    /// The ε this ρ amounts to at `epsilon_at_delta` (tighter of Bun–Steinke and CKS 2020),
    /// before adding the approximate δ.
    pub epsilon: f64,
    /// The δ of that conversion.
    pub epsilon_at_delta: f64,
}

impl PrivacyAmount {
    pub fn new(rho: f64, delta: f64, display_delta: f64) -> Self {
        let epsilon = match Delta::new(display_delta) {
            Ok(d) if rho > 0.0 => crate::privacy::rho_to_epsilon(rho, d),
            _ => 0.0,
        };
        Self {
            rho,
            delta,
            epsilon,
            epsilon_at_delta: display_delta,
        }
    }
}
