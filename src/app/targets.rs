//! How clients state privacy, checked: a dataset's budget and a job's privacy target, each as
//! ρ or (ε, δ). Parsing turns them into the ledger's terms or an [`AppError`] naming the field;
//! the published schemas of these inputs live in `http/privacy_input.rs`.

use serde::{Deserialize, Serialize};

use crate::app::error::AppError;
use crate::privacy::gaussian_curve::max_gaussian_rho;
use crate::privacy::units::{DeltaUnits, MAX_RHO, RHO_UNIT, RhoUnits};
use crate::privacy::{Delta, Epsilon, PrivacyTarget, Rho, epsilon_delta_to_rho};

/// δ at which a budget stated only as ρ is displayed as (ε, δ).
pub const DEFAULT_DISPLAY_DELTA: f64 = 1e-6;

/// Largest ε a budget or a job may state. Any ε up to it converts to ρ ≤ [`MAX_RHO`] at every
/// δ ∈ (0, 1), so the published range alone decides whether an ε is accepted.
pub const MAX_EPSILON: f64 = 1e5;

/// Largest δ a budget, a job or a conversion may state. The ledger keeps δ in units of 10⁻¹⁸
/// and rounds through `f64`, where the largest doubles below 1 come out as many units as δ = 1
/// itself; any δ this close to 1 is no privacy guarantee anyway. Published in the schemas, so a
/// request the document admits is never refused for its δ (it was a 500 before).
pub const MAX_DELTA: f64 = 0.999_999;

/// Smallest ε an (ε, δ) budget may state: at every δ ∈ (0, 1) the ρ it admits is at least one
/// ledger unit (a smaller budget would admit nothing).
pub const MIN_BUDGET_EPSILON: f64 = 1e-3;

/// A dataset's privacy budget: either `{"rho": ρ}` (zCDP; optional `delta` caps the δ that
/// approximate-DP parts of jobs may spend) or `{"epsilon": ε, "delta": δ}` (the ledger keeps the
/// stated pair: Gaussian-only spending is admitted by the exact Gaussian curve, anything else by
/// CKS 2020 at δ minus the δ that approximate parts spent; docs/design/privacy.md §2).
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    /// The ρ ceiling: the budget itself for a zCDP budget; for an (ε, δ) budget the largest
    /// total the exact Gaussian curve admits (what Gaussian-only spending may reach).
    pub rho: f64,
    pub rho_units: RhoUnits,
    pub delta_units: DeltaUnits,
    /// The stated (ε, δ), for tight accounting.
    pub epsilon_delta: Option<(f64, f64)>,
    /// δ used to show ρ as (ε, δ).
    pub display_delta: f64,
}

fn field_err(field: &str, e: impl std::fmt::Display) -> AppError {
    AppError::validation(field, e.to_string())
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
) -> Result<Stated, AppError> {
    let f = |name: &str| format!("{prefix}.{name}");
    let delta_of = |d: f64| {
        let delta = Delta::new(d).map_err(|e| field_err(&f("delta"), e))?;
        if !(delta.get() <= MAX_DELTA) {
            return Err(AppError::validation(
                f("delta"),
                format!("delta must be at most {MAX_DELTA}"),
            ));
        }
        Ok(delta)
    };
    match (rho, epsilon) {
        (Some(rho), None) => {
            let rho = Rho::new(rho).map_err(|e| field_err(&f("rho"), e))?;
            if !(rho.get() <= MAX_RHO) {
                return Err(AppError::validation(
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
            if !(epsilon.get() <= MAX_EPSILON) {
                return Err(AppError::validation(
                    f("epsilon"),
                    format!("epsilon must be at most {MAX_EPSILON:e}"),
                ));
            }
            let delta = delta.ok_or_else(|| AppError::validation(f("delta"), "epsilon needs delta"))?;
            let delta = delta_of(delta)?;
            let rho = epsilon_delta_to_rho(epsilon, delta);
            if !(rho <= MAX_RHO) {
                return Err(AppError::validation(
                    f("epsilon"),
                    "epsilon is larger than the maximum",
                ));
            }
            Ok(Stated::EpsilonDelta { rho, epsilon, delta })
        }
        (Some(_), Some(_)) => Err(AppError::validation(
            prefix,
            "give either rho or (epsilon, delta), not both",
        )),
        (None, None) => Err(AppError::validation(prefix, "give rho or (epsilon, delta)")),
    }
}

impl BudgetInput {
    pub fn parse(&self) -> Result<ParsedBudget, AppError> {
        let (rho, delta_budget, display_delta, epsilon_delta) = match parse_stated(
            "budget",
            self.rho,
            self.epsilon,
            self.delta,
        )? {
            Stated::Rho { rho, delta } => {
                let delta = delta.map_or(0.0, Delta::get);
                (
                    rho.get(),
                    delta,
                    if delta > 0.0 { delta } else { DEFAULT_DISPLAY_DELTA },
                    None,
                )
            }
            // Tight accounting (docs/design/privacy.md §2): the ledger keeps the stated (ε, δ) and
            // admits by the exact Gaussian curve or CKS; the ρ stored as the ceiling is the
            // exact-Gaussian maximum, and δ is the cap approximate parts may eat into
            // (each δ_j spent lowers the δ left for the conversion).
            Stated::EpsilonDelta { epsilon, .. } if !(epsilon.get() >= MIN_BUDGET_EPSILON) => {
                return Err(AppError::validation(
                    "budget.epsilon",
                    format!(
                        "an (ε, δ) budget needs ε ≥ {MIN_BUDGET_EPSILON}; a smaller one admits practically nothing"
                    ),
                ));
            }
            // At a large ε and δ the exact curve admits more than the ledger can hold; the
            // ceiling is then MAX_RHO (lower is sound: admission only refuses more).
            Stated::EpsilonDelta { epsilon, delta, .. } => (
                max_gaussian_rho(epsilon.get(), delta.get()).min(MAX_RHO),
                delta.get(),
                delta.get(),
                Some((epsilon.get(), delta.get())),
            ),
        };
        let rho_units = RhoUnits::checked_budget(rho).map_err(|e| field_err("budget", e))?;
        if rho_units == RhoUnits::ZERO {
            // Budgets are rounded down to the ledger's unit; one that rounds to nothing could
            // never admit a job (and the schema refuses it).
            return Err(AppError::validation(
                "budget",
                format!("the budget is ρ = {rho:e}, below the ledger's resolution of ρ = {RHO_UNIT:e}"),
            ));
        }
        Ok(ParsedBudget {
            rho,
            rho_units,
            delta_units: DeltaUnits::checked_budget(delta_budget)
                .map_err(|e| field_err("budget.delta", e))?,
            epsilon_delta,
            display_delta,
        })
    }
}

/// A job's privacy: `{"rho": ρ}` (optionally with `delta` for approximate-DP parts) or
/// `{"epsilon": ε, "delta": δ}`, converted to the largest ρ whose CKS 2020 conversion is ≤ ε at
/// δ (natively (ε, δ)-DP algorithms such as `k_dp_pca` run at ε itself, charged ε²/2 and δ).
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    pub fn parse(&self, prefix: &str) -> Result<PrivacyTarget, AppError> {
        Ok(match parse_stated(prefix, self.rho, self.epsilon, self.delta)? {
            Stated::Rho { rho, delta } => PrivacyTarget::from_rho(rho, delta),
            Stated::EpsilonDelta { rho, epsilon, delta } => PrivacyTarget {
                public_default: false,
                rho,
                delta: Some(delta.get()),
                epsilon: Some(epsilon.get()),
            },
        })
    }
}
