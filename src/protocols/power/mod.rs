//! `federated_power` across sites: secure-aggregation noisy power iterations
//! (docs/design/federation.md). Its plan (below), the per-round state both sides compute
//! ([`state`]), the whole protocol run in process for a job ([`simulate`]) and the site's steps
//! ([`site`]). The coordinator's state machine is the generic driver's own
//! (`crate::studies::live`), the shape every protocol's machine follows.

pub mod simulate;
pub(crate) mod site;
pub mod state;

use super::{PlanError, StudyPlan, StudyTerms, parse_params};
use crate::algorithms::federated_power::{self, FederatedPowerParams};
use crate::studies::live::Protocol;

/// Validates the parameters and calibrates a `federated_power` study for its terms.
pub(crate) fn plan(params: serde_json::Value, terms: &StudyTerms<'_>) -> Result<StudyPlan, PlanError> {
    let parsed: FederatedPowerParams = parse_params(params)?;
    let config =
        federated_power::configure_for(&parsed, terms.context, terms.target, terms.sites, terms.threshold)?;
    let rho = crate::algorithms::noisy_power::cost_of(config.iterations, config.multiplier);
    Ok(StudyPlan {
        config: serde_json::to_value(&config)?,
        rounds: config.iterations,
        protocol: Protocol::Power(config),
        rho,
    })
}
