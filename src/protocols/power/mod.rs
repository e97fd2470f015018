//! `federated_power` across sites: secure-aggregation noisy power iterations
//! (docs/design/federation.md). Its plan (below), the per-round state both sides compute
//! ([`state`]), the whole protocol run in process for a job ([`simulate`]) and the site's steps
//! (`site.rs`), and the coordinator's key exchange and rounds ([`coordinator`]).

mod consistency;
pub mod coordinator;
pub mod durable;
pub(crate) mod site;

// The round mathematics both sides run, in the numerical core (crates/core).
pub use privpca_core::algorithms::federated_power::{simulate, state};

use self::state::SiteComputation;
use super::{
    Checked, Kept, PlanError, Planned, RecordRules, SiteFuture, SiteRun, StudyPlan, StudyProtocol,
    StudyTerms, parse_params, take_center, take_clip,
};
use crate::algorithms::AlgorithmInfo;
use crate::algorithms::federated_power::{self, FederatedPowerParams};
use crate::algorithms::study_center::StudyCenter;
use crate::dataset::Relation;
use crate::federation::messages::SiteStudyView;
use crate::privacy::Cost;
use crate::site::Failure;
use crate::site::args::SiteArgs;
use crate::site::prepare::check_threshold;
use crate::studies::live::Protocol;
use serde_json::Value;

/// The secure-aggregation power method as a [`StudyProtocol`].
pub(crate) struct Power;

impl StudyProtocol for Power {
    fn configure(&self, _algorithm: &AlgorithmInfo, params: Value, terms: &StudyTerms<'_>) -> Planned {
        plan(params, terms)
    }

    /// A majority threshold unless the operator allowed less, the study's fixed-point and
    /// noise terms ([`SiteComputation::from_view`]), and under SecAgg+ a graph sized for at
    /// least the colluders the operator assumes.
    fn site_check(&self, view: &SiteStudyView, args: &SiteArgs) -> Result<Option<SiteComputation>, Failure> {
        check_threshold(
            view.threshold,
            view.n_sites,
            args.colluding_sites,
            args.allow_minority_threshold,
        )?;
        let computation = SiteComputation::from_view(view).map_err(Failure::Refused)?;
        // SecAgg+'s graph is sized for ⌈γ·S⌉ corrupt sites of the S invited: an operator who
        // assumes more colluders than that is not covered by its 2^-40 bound.
        if let Some(plus) = computation.config().secagg_plus {
            let assumed = (plus.corruption_rate * f64::from(view.n_sites) - 1e-12)
                .ceil()
                .max(0.0) as u32;
            if assumed < args.colluding_sites {
                return Err(Failure::Refused(format!(
                    "the study's SecAgg+ graph assumes at most {assumed} colluding sites (corruption_rate {} of {} \
                     invited); --colluding-sites says {}; nothing was sent",
                    plus.corruption_rate, view.n_sites, args.colluding_sites
                )));
            }
        }
        Ok(Some(computation))
    }

    /// Under add_remove a site's n is private: no limit on it may change what the site does
    /// (its products are clamped instead), and no records is a valid shard.
    fn site_records(&self, view: &SiteStudyView, relation: Relation) -> Result<RecordRules, Failure> {
        let private_n = relation == Relation::AddRemove;
        let (max_records, empty_d) = if private_n {
            (u64::MAX, Some(view.n_features))
        } else {
            (view.max_site_samples, None)
        };
        Ok(RecordRules {
            max_records,
            empty_d,
            beta: view.row_norm_bound,
            alpha: view.row_l1_bound,
            clamps: private_n,
        })
    }

    fn check_data(&self, _view: &SiteStudyView, kept: Kept<'_>, (n, d): (usize, usize)) -> Checked {
        match kept {
            Some(computation) => computation.check_data(n, d),
            None => Err("the study's per-round computation is missing".into()),
        }
    }

    /// SecAgg+ studies take up to [`federated_power::MAX_SPARSE_SITES`]; the complete graph
    /// stops at [`federated_power::MAX_SITES`] (`configure_for`).
    fn max_sites(&self) -> u32 {
        federated_power::MAX_SPARSE_SITES
    }

    fn follow<'a>(&'a self, run: SiteRun<'a>) -> SiteFuture<'a> {
        Box::pin(site::follow(run))
    }
}

/// Validates the parameters and calibrates a `federated_power` study for its terms. `clip`
/// (default `"auto"`, as for a central job on records) adds the private clip's rounds before
/// the power rounds ([`crate::algorithms::power_clip`]).
pub(crate) fn plan(mut params: serde_json::Value, terms: &StudyTerms<'_>) -> Result<StudyPlan, PlanError> {
    let clip = take_clip(&mut params, terms.context)?;
    let center = take_center(&mut params, terms.context)?;
    let parsed: FederatedPowerParams = parse_params(params)?;
    let mut config = federated_power::configure_study(
        &parsed,
        terms.context,
        terms.target,
        (terms.sites, terms.threshold),
        clip,
        center,
    )?;
    // SecAgg+ (live): k and t are derived again from the roster that joins; these are for the
    // sites invited.
    config.secagg_plus = federated_power::choose_secagg(&parsed, terms.sites, 0)?;
    let before = config.center.as_ref().map_or(Cost::ZERO, StudyCenter::cost);
    let before = before.then(config.clip.as_ref().map_or(Cost::ZERO, |c| c.cost()));
    let rho = before.rho + crate::algorithms::power_noise::cost_of(config.iterations, config.multiplier);
    Ok(StudyPlan {
        config: serde_json::to_value(&config)?,
        rounds: config.total_rounds(),
        protocol: Protocol::Power(config),
        rho,
    })
}
