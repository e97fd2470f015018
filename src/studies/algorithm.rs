//! The algorithms a study can run, and how each one's request becomes a plan: its resolved
//! configuration (as stored and shown), the live protocol the coordinator runs, its number of
//! rounds and the ρ every site is charged. Each protocol plans itself: `federated_power` here,
//! the CAPE algorithms in `cape_live.rs` beside their live protocol.

use crate::algorithms::ConfigError;
use crate::algorithms::federated_power::{self, FederatedPowerParams};
use crate::dataset::DataContext;
use crate::privacy::PrivacyTarget;

use super::cape_live;
use super::gossip_live;
use super::live::Protocol;

/// An algorithm that runs across sites.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StudyAlgorithm {
    /// Secure-aggregation noisy power iterations (docs/design/federation.md).
    FederatedPower,
    /// CAPE: one noisy second-moment release per site (docs/design/cape.md).
    CapePca,
    /// CAPE for a Gaussian mixture: second, then whitened third moments.
    CapeAgn,
    /// Decentralized DP power method: each site an agent holding a block of features.
    GossipPower,
}

impl StudyAlgorithm {
    /// The algorithm named `name`, if a study can run it. The catalog
    /// (`algorithms::study_algorithms`) is the list of names; this maps each to its planner
    /// (a test checks the two agree).
    pub fn from_name(name: &str) -> Option<StudyAlgorithm> {
        match name {
            "federated_power" => Some(StudyAlgorithm::FederatedPower),
            "cape_pca" => Some(StudyAlgorithm::CapePca),
            "cape_agn" => Some(StudyAlgorithm::CapeAgn),
            "gossip_power" => Some(StudyAlgorithm::GossipPower),
            _ => None,
        }
    }

    /// Validates the parameters and calibrates the study for its terms.
    pub fn plan(self, params: serde_json::Value, terms: &StudyTerms<'_>) -> Result<StudyPlan, PlanError> {
        match self {
            StudyAlgorithm::FederatedPower => plan_power(params, terms),
            StudyAlgorithm::CapePca => cape_live::plan_pca(params, terms),
            StudyAlgorithm::CapeAgn => cape_live::plan_agn(params, terms),
            StudyAlgorithm::GossipPower => gossip_live::plan_gossip(params, terms),
        }
    }
}

/// The public terms every algorithm plans for.
pub struct StudyTerms<'a> {
    /// d and the neighbouring relation with its bounds.
    pub context: &'a DataContext,
    /// What each site spends.
    pub target: &'a PrivacyTarget,
    /// Sites invited.
    pub sites: u32,
    /// Survivors needed per round.
    pub threshold: u32,
    /// Each site's block of features (`gossip_power`; `None` where a site states none).
    pub site_features: &'a [Option<usize>],
}

/// What a study resolves to before it is priced.
#[derive(Debug)]
pub struct StudyPlan {
    /// The resolved configuration, as stored and shown.
    pub config: serde_json::Value,
    pub protocol: Protocol,
    /// Rounds (power iterations, or CAPE stages).
    pub rounds: u32,
    /// The ρ (zCDP) each participating site is charged, before rounding to ledger units.
    pub rho: f64,
}

impl StudyPlan {
    /// The plan calibrated at the ledger's amount `rho`, the ρ a site's view states: CAPE
    /// stages are calibrated at it, so that the coordinator and every site derive the same noise
    /// (docs/design/cape.md). `federated_power` is calibrated by its multiplier and unchanged.
    pub fn at_ledger_rho(mut self, rho: f64) -> StudyPlan {
        match &mut self.protocol {
            Protocol::Cape(plan) => plan.rho = rho,
            Protocol::Gossip(plan) => {
                if let Some(config) = plan.at_rho(rho) {
                    self.config = config;
                }
            }
            Protocol::Power(_) => {}
        }
        self
    }
}

/// Why a study could not be planned.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The parameters do not configure the algorithm.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The configuration could not be written as JSON (a bug).
    #[error("the study configuration could not be encoded: {0}")]
    Encode(#[from] serde_json::Error),
}

/// The parameters as `T`, or the path of the first bad one (`params.<path>`).
pub(super) fn parse_params<T: serde::de::DeserializeOwned>(
    params: serde_json::Value,
) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize(params).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            "params".to_string()
        } else {
            format!("params.{path}")
        };
        ConfigError::Invalid {
            field,
            message: e.into_inner().to_string(),
        }
    })
}

fn plan_power(params: serde_json::Value, terms: &StudyTerms<'_>) -> Result<StudyPlan, PlanError> {
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

#[cfg(test)]
#[path = "algorithm_tests.rs"]
mod tests;
