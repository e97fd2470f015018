//! `gossip_power` across sites: every site an agent holding a block of features, the
//! coordinator a relay (docs/design/federation.md, "Live gossip"). The plan and the
//! coordinator's state machine ([`coordinator`]), what the coordinator's snapshot keeps of a
//! running study (`durable.rs`) and the site's steps (`site.rs`); the agent's
//! arithmetic is the numerical core's (`crate::algorithms::gossip::agent`).

mod consistency;
pub mod coordinator;
pub(crate) mod durable;
pub(crate) mod site;

use super::power::state::SiteComputation;
use super::{Checked, Kept, Planned, RecordRules, SiteFuture, SiteRun, StudyPlan, StudyProtocol, StudyTerms};
use crate::algorithms::AlgorithmInfo;
use crate::dataset::Relation;
use crate::federation::messages::SiteStudyView;
use crate::site::Failure;
use crate::site::args::SiteArgs;
use crate::studies::live::Protocol;
use serde_json::Value;

/// The gossip power method as a [`StudyProtocol`].
pub(crate) struct Gossip;

impl StudyProtocol for Gossip {
    fn configure(&self, _algorithm: &AlgorithmInfo, params: Value, terms: &StudyTerms<'_>) -> Planned {
        coordinator::plan_gossip(params, terms)
    }

    /// The configuration is derived again at the ledger's ρ, as every agent derives it.
    fn at_ledger_rho(&self, plan: &mut StudyPlan, rho: f64) {
        if let Protocol::Gossip(gossip) = &mut plan.protocol
            && let Some(config) = gossip.at_rho(rho)
        {
            plan.config = config;
        }
    }

    fn splits_features(&self) -> bool {
        true
    }

    /// The study's blocks and this site's place among them ([`site::checked_config`]).
    fn site_check(&self, view: &SiteStudyView, _args: &SiteArgs) -> Result<Option<SiteComputation>, Failure> {
        site::checked_config(view)
            .map_err(|e| Failure::Refused(format!("refusing the study: {e}; nothing was sent")))?;
        Ok(None)
    }

    /// CAPE's rule on n, and the bounds of this site's block ([`site::block_bounds`]).
    fn site_records(&self, view: &SiteStudyView, _relation: Relation) -> Result<RecordRules, Failure> {
        let (max_records, empty_d) = crate::protocols::cape::site::record_rules(view);
        let (beta, alpha) = site::block_bounds(view).map_err(Failure::Refused)?;
        Ok(RecordRules {
            max_records,
            empty_d,
            beta,
            alpha,
            clamps: false,
        })
    }

    fn check_data(&self, view: &SiteStudyView, _kept: Kept<'_>, (n, d): (usize, usize)) -> Checked {
        site::check_data(view, n, d)
    }

    fn follow<'a>(&'a self, run: SiteRun<'a>) -> SiteFuture<'a> {
        Box::pin(site::follow(run))
    }
}
