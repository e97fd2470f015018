//! The published shapes of how clients state privacy (a dataset's budget and a job's privacy
//! target, as ρ or (ε, δ)) and of privacy amounts shown as ρ and (ε, δ). The inputs and their
//! parser are the application layer's (`app/targets.rs`).

use serde::{Deserialize, Serialize};
use utoipa::openapi::schema::{OneOfBuilder, Schema};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{PartialSchema, ToSchema};

pub use crate::app::targets::{BudgetInput, DEFAULT_DISPLAY_DELTA, MAX_DELTA, PrivacyInput};
use crate::privacy::Delta;
use crate::privacy::admission::Spending;

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

/// The published schema of `$input`: one of the schemas `$a` and `$b` (by reference, with
/// `$description`), and those two schemas beside it.
macro_rules! one_of_schema {
    ($input:ty = $a:ty | $b:ty, $description:expr) => {
        impl PartialSchema for $input {
            fn schema() -> RefOr<Schema> {
                OneOfBuilder::new()
                    .item(Ref::from_schema_name(<$a>::name()))
                    .item(Ref::from_schema_name(<$b>::name()))
                    .description(Some($description))
                    .into()
            }
        }

        impl ToSchema for $input {
            fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
                schemas.push((<$a>::name().into(), <$a>::schema()));
                schemas.push((<$b>::name().into(), <$b>::schema()));
            }
        }
    };
}

one_of_schema!(
    BudgetInput = BudgetRho | BudgetEpsilonDelta,
    "A dataset's privacy budget: `{\"rho\": ρ}` (zCDP, optionally with `delta`) or `{\"epsilon\": ε, \"delta\": δ}`."
);

one_of_schema!(
    PrivacyInput = PrivacyRho | PrivacyEpsilonDelta,
    "What a job may spend: `{\"rho\": ρ}` (optionally with `delta`) or `{\"epsilon\": ε, \"delta\": δ}`."
);

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
    /// Set when `epsilon` and `epsilon_at_delta` are an (ε, δ) the owner stated (the total of
    /// an (ε, δ) budget): the CKS 2020 conversion of `rho` at that δ, which is looser.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epsilon_converted: Option<f64>,
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
            epsilon_converted: None,
            achieved: None,
        }
    }

    /// Shows `epsilon` at `delta` as stated by the owner (an (ε, δ) budget's total: the
    /// admission rule keeps every spending within it), the conversion of `rho` kept beside it
    /// in `epsilon_converted`.
    pub fn stated(mut self, epsilon: f64, delta: f64) -> Self {
        if self.epsilon_at_delta == delta {
            self.epsilon_converted = Some(self.epsilon);
            self.epsilon = epsilon;
        }
        self
    }

    /// A charge in ledger units, shown at `display_delta`, with the (ε, δ) the whole charge
    /// achieves at `stated_delta` (a job's cost).
    pub fn of_charge(charge: Spending, display_delta: f64, stated_delta: f64) -> Self {
        let cost = crate::privacy::Cost {
            rho: charge.rho_units.to_real(),
            delta: charge.delta_units.to_real(),
            other_rho: charge.other_rho_units.to_real(),
        };
        Self::new(cost.rho, cost.delta, display_delta)
            .gaussian_only(charge.is_gaussian_only())
            .achieved(&cost, stated_delta)
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
