//! `cape_pca` and `cape_agn` across sites: one correlated-noise release per site per stage
//! (docs/design/cape.md). The plan and the coordinator's state machine ([`coordinator`]), what
//! of it a snapshot keeps (`durable.rs`) and the site's steps (`site.rs`). The noise itself is the
//! numerical core's (`crate::algorithms::cape_noise`), shared with the simulate-mode jobs.

mod consistency;
pub mod coordinator;
pub(crate) mod durable;
pub(crate) mod site;

use super::power::state::SiteComputation;
use super::{Checked, Kept, Planned, RecordRules, SiteFuture, SiteRun, StudyPlan, StudyProtocol, StudyTerms};
use crate::algorithms::AlgorithmInfo;
use crate::algorithms::catalog::CAPE_AGN;
use crate::dataset::Relation;
use crate::federation::messages::SiteStudyView;
use crate::site::Failure;
use crate::site::args::SiteArgs;
use crate::studies::live::Protocol;
use serde_json::Value;

/// CAPE as a [`StudyProtocol`]: `cape_pca` (one stage) and `cape_agn` (two).
pub(crate) struct Cape;

impl StudyProtocol for Cape {
    /// `cape_agn` by its catalog entry; `cape_pca` otherwise.
    fn configure(&self, algorithm: &AlgorithmInfo, params: Value, terms: &StudyTerms<'_>) -> Planned {
        if algorithm.name == CAPE_AGN.name {
            coordinator::plan_agn(params, terms)
        } else {
            coordinator::plan_pca(params, terms)
        }
    }

    /// The report says the noise each stage reached (docs/design/cape.md).
    fn reports_noise(&self) -> bool {
        true
    }

    /// The stages are calibrated at the ledger's ρ.
    fn at_ledger_rho(&self, plan: &mut StudyPlan, rho: f64) {
        if let Protocol::Cape(cape) = &mut plan.protocol {
            cape.rho = rho;
        }
    }

    /// Nothing to check before the data: the noise terms are derived and checked per stage.
    fn site_check(
        &self,
        _view: &SiteStudyView,
        _args: &SiteArgs,
    ) -> Result<Option<SiteComputation>, Failure> {
        Ok(None)
    }

    /// No cap on n ([`site::record_rules`]): nothing is fixed-point, and refusing over one
    /// would tell the coordinator a bit of a private n (docs/design/cape.md).
    fn site_records(&self, view: &SiteStudyView, _relation: Relation) -> Result<RecordRules, Failure> {
        let (max_records, empty_d) = site::record_rules(view);
        Ok(RecordRules {
            max_records,
            empty_d,
            beta: view.row_norm_bound,
            alpha: view.row_l1_bound,
            clamps: false,
        })
    }

    fn check_data(&self, view: &SiteStudyView, _kept: Kept<'_>, (n, d): (usize, usize)) -> Checked {
        if d != view.n_features {
            return Err(format!(
                "the data has {d} features; the study has {}",
                view.n_features
            ));
        }
        site::check_count(view, n)
    }

    fn follow<'a>(&'a self, run: SiteRun<'a>) -> SiteFuture<'a> {
        Box::pin(site::follow(run))
    }
}
