//! How clients state privacy: a dataset's budget and a job's privacy target, as ρ or (ε, δ).
//! Parsing turns them into checked values or a 422 naming the field.

use serde::{Deserialize, Serialize};
use utoipa::openapi::schema::{OneOfBuilder, Schema};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{PartialSchema, ToSchema};

use super::error::ApiError;
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

// The published shapes of `BudgetInput` and `PrivacyInput`: one of ρ or (ε, δ), with the ranges
// the parser below enforces, so that `{}` or `{"rho": 1, "epsilon": 1}` is not schema-valid.
// The wire types stay single structs (one parser, field-level errors); these describe them.

/// A zCDP budget: ρ, optionally with a cap on the approximate-DP δ jobs may spend.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub struct BudgetRho {
    /// zCDP budget ρ, from one ledger unit (1e-12) to 1e6.
    #[schema(minimum = 1e-12, maximum = 1e6)]
    rho: f64,
    /// Cap on the approximate-DP δ that jobs may spend, in (0, 0.999999] (default 0).
    #[schema(exclusive_minimum = 0.0, maximum = 0.999_999)]
    delta: Option<f64>,
}

/// An (ε, δ) budget.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub struct BudgetEpsilonDelta {
    /// ε of the budget, from 0.001 to 1e5.
    #[schema(minimum = 1e-3, maximum = 1e5)]
    epsilon: f64,
    /// δ of the budget, in (0, 0.999999].
    #[schema(exclusive_minimum = 0.0, maximum = 0.999_999)]
    delta: f64,
}

/// A job's privacy as zCDP ρ, optionally with the approximate-DP δ it may spend.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub struct PrivacyRho {
    /// ρ > 0 (at most 1e6) this job may spend.
    #[schema(exclusive_minimum = 0.0, maximum = 1e6)]
    rho: f64,
    /// The approximate-DP δ the job may spend, in (0, 0.999999].
    #[schema(exclusive_minimum = 0.0, maximum = 0.999_999)]
    delta: Option<f64>,
}

/// A job's privacy as (ε, δ): converted to the largest ρ whose CKS 2020 conversion is ≤ ε at δ.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub struct PrivacyEpsilonDelta {
    /// ε > 0 (at most 1e5).
    #[schema(exclusive_minimum = 0.0, maximum = 1e5)]
    epsilon: f64,
    /// δ in (0, 0.999999].
    #[schema(exclusive_minimum = 0.0, maximum = 0.999_999)]
    delta: f64,
}

fn one_of<A: ToSchema, B: ToSchema>(description: &str) -> RefOr<Schema> {
    OneOfBuilder::new()
        .item(Ref::from_schema_name(A::name()))
        .item(Ref::from_schema_name(B::name()))
        .description(Some(description))
        .into()
}

impl PartialSchema for BudgetInput {
    fn schema() -> RefOr<Schema> {
        one_of::<BudgetRho, BudgetEpsilonDelta>(
            "A dataset's privacy budget: `{\"rho\": ρ}` (zCDP, optionally with `delta`) or `{\"epsilon\": ε, \"delta\": δ}`.",
        )
    }
}

impl ToSchema for BudgetInput {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((BudgetRho::name().into(), BudgetRho::schema()));
        schemas.push((BudgetEpsilonDelta::name().into(), BudgetEpsilonDelta::schema()));
    }
}

impl PartialSchema for PrivacyInput {
    fn schema() -> RefOr<Schema> {
        one_of::<PrivacyRho, PrivacyEpsilonDelta>(
            "What a job may spend: `{\"rho\": ρ}` (optionally with `delta`) or `{\"epsilon\": ε, \"delta\": δ}`.",
        )
    }
}

impl ToSchema for PrivacyInput {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((PrivacyRho::name().into(), PrivacyRho::schema()));
        schemas.push((PrivacyEpsilonDelta::name().into(), PrivacyEpsilonDelta::schema()));
    }
}

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
    let delta_of = |d: f64| {
        let delta = Delta::new(d).map_err(|e| field_err(&f("delta"), e))?;
        if !(delta.get() <= MAX_DELTA) {
            return Err(ApiError::validation(
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
            if !(epsilon.get() <= MAX_EPSILON) {
                return Err(ApiError::validation(
                    f("epsilon"),
                    format!("epsilon must be at most {MAX_EPSILON:e}"),
                ));
            }
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
                return Err(ApiError::validation(
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
            return Err(ApiError::validation(
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
    /// When every part of the amount is a Gaussian mechanism: the ε at `epsilon_at_delta` by the
    /// exact curve of the composed Gaussian (Balle & Wang 2018), tighter than `epsilon`.
    pub epsilon_exact_gaussian: Option<f64>,
    /// For a job's cost: the (ε, δ) the whole job achieves, approximate parts included, at the
    /// job's stated δ (docs/design/privacy.md §2.4). A job stated as (ε, δ) achieves at most that.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub achieved: Option<AchievedPrivacy>,
}

/// The (ε, δ)-DP statement a job's whole cost amounts to.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub struct AchievedPrivacy {
    /// The smallest ε for which the job is (ε, `delta`)-DP: by the exact Gaussian curve when
    /// every part is Gaussian, else by CKS 2020 at `delta` minus the approximate δ spent.
    pub epsilon: f64,
    /// The δ of the statement: the job's stated δ (or the display δ), plus the approximate δ
    /// spent when that is not below it.
    pub delta: f64,
}

impl PrivacyAmount {
    /// `rho`/`delta` shown as (ε, δ) at `display_delta` by CKS 2020 (any zCDP amount).
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
            epsilon_exact_gaussian: None,
            achieved: None,
        }
    }

    /// Adds the (ε, δ) the whole `cost` achieves at `delta` (a job's cost).
    pub fn achieved(mut self, cost: &crate::privacy::Cost, delta: f64) -> Self {
        let a = crate::privacy::target::achieved(cost, delta);
        self.achieved = Some(AchievedPrivacy {
            epsilon: a.epsilon,
            delta: a.delta,
        });
        self
    }

    /// Adds the exact-Gaussian ε of `rho` when the caller knows it is spent (or, for a ceiling,
    /// may be spent) by Gaussian mechanisms only.
    pub fn gaussian_only(mut self, gaussian_only: bool) -> Self {
        if gaussian_only {
            self.epsilon_exact_gaussian = Some(crate::privacy::gaussian_curve::epsilon_for(
                crate::privacy::gaussian_curve::mu_of_rho(self.rho),
                self.epsilon_at_delta,
            ));
        }
        self
    }
}
