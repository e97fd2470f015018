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
use crate::algorithms::ConfigError;
use crate::algorithms::federated_power::{self, FederatedPowerConfig, FederatedPowerParams};
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
    /// least the colluders the operator assumes, whose assumed corrupt sites count as colluders
    /// ([`colluding`]) and leave at least t honest survivors ([`check_honest_survivors`]).
    fn site_check(&self, view: &SiteStudyView, args: &SiteArgs) -> Result<Option<SiteComputation>, Failure> {
        let computation = SiteComputation::from_view(view).map_err(Failure::Refused)?;
        // SecAgg+'s graph is sized for ⌈γ·S⌉ corrupt sites of the S invited: an operator who
        // assumes more colluders than that is not covered by its 2^-40 bound.
        if let Some(plus) = computation.config().secagg_plus {
            let assumed = plus.corrupt_sites(view.n_sites);
            if assumed < args.colluding_sites {
                return Err(Failure::Refused(format!(
                    "the study's SecAgg+ graph assumes at most {assumed} colluding sites (corruption_rate {} of {} \
                     invited); --colluding-sites says {}; nothing was sent",
                    plus.corruption_rate, view.n_sites, args.colluding_sites
                )));
            }
        }
        let config = computation.config();
        check_threshold(
            view.threshold,
            view.n_sites,
            colluding(args.colluding_sites, config, view.n_sites),
            args.allow_minority_threshold,
        )?;
        check_honest_survivors(config, view.n_sites, view.n_sites, view.threshold)?;
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

/// The colluding sites a site's consistency checks must tolerate: `stated` (its
/// `--colluding-sites`), and
/// under SecAgg+ at least the ⌈γ·S⌉ corrupt sites of the S invited that the study's own graph
/// is sized for. The proof that honest sites reveal under one transcript per round counts
/// every colluder (docs/design/federation.md, "The consistency round"): with the study's
/// corrupt sites left out of c, a coordinator could show two halves of the honest sites two
/// transcripts, each with the corrupt sites' confirmations making up a quorum.
pub(crate) fn colluding(stated: u32, config: &FederatedPowerConfig, invited: u32) -> u32 {
    config
        .secagg_plus
        .map_or(stated, |plus| stated.max(plus.corrupt_sites(invited)))
}

/// Under SecAgg+: refuses terms whose sum could hold fewer honest releases than the study's
/// threshold t (`roster` sites of the `invited`, [`federated_power::SecAggPlus::least_honest_survivors`]), as the
/// noise of each is calibrated so that t of them carry the whole: below t a site's loss would
/// be more than its charge. Complete-graph studies state no corrupt sites; their operator's
/// `--colluding-sites` is checked against t by [`check_threshold`].
pub(crate) fn check_honest_survivors(
    config: &FederatedPowerConfig,
    invited: u32,
    roster: u32,
    threshold: u32,
) -> Result<(), Failure> {
    let Some(plus) = config.secagg_plus else {
        return Ok(());
    };
    let honest = plus.least_honest_survivors(invited, roster);
    if honest >= threshold {
        return Ok(());
    }
    Err(Failure::Refused(format!(
        "the study's SecAgg+ terms leave as few as {honest} honest survivors ({roster} sites, up to {} out, \
         {} assumed corrupt) below its threshold t = {threshold}: the sum the coordinator and the corrupt \
         sites could see would carry less noise than this site is charged for; nothing was sent",
        plus.max_out(roster as usize),
        plus.corrupt_sites(invited)
    )))
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
    if let Some(plus) = config.secagg_plus {
        let honest = plus.least_honest_survivors(terms.sites, terms.sites);
        if honest < terms.threshold {
            return Err(ConfigError::invalid(
                "threshold",
                format!(
                    "must be at most {honest} under secure_aggregation = sparse: {} sites less ⌈dropout_rate·S⌉ = {} \
                     out and ⌈corruption_rate·S⌉ = {} corrupt leave {honest} honest survivors, and every site's \
                     noise is calibrated for t of them (lower the threshold or the rates)",
                    terms.sites,
                    plus.max_out(terms.sites as usize),
                    plus.corrupt_sites(terms.sites)
                ),
            )
            .into());
        }
    }
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
