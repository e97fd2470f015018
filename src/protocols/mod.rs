//! Distributed protocols: one folder per protocol, each holding what is specific to it on
//! every side (its plan, the coordinator's state machine and durable snapshot, the site's
//! steps), over the shared layers below: `federation` (secure aggregation, wire messages,
//! rounds), `studies` (the coordinator driver: hub, lease, store, timeouts) and `site` (the
//! site process: arguments, ledger, HTTP client, data). See docs/design/architecture.md,
//! "The protocol seam".
//!
//! - [`power`]: `federated_power`, secure-aggregation noisy power iterations
//!   (docs/design/federation.md);
//! - [`cape`]: `cape_pca` and `cape_agn`, correlated-noise releases (docs/design/cape.md);
//! - [`gossip`]: `gossip_power`, every site an agent, the coordinator a relay.
//!
//! The algorithms a study can run, and how each one's request becomes a plan (its resolved
//! configuration as stored and shown, the live protocol the coordinator runs, its number of
//! rounds and the ρ every site is charged), are dispatched here and nowhere else.

pub mod cape;
pub mod gossip;
pub mod power;

use std::future::Future;
use std::pin::Pin;

use crate::algorithms::centering::{self, CenterParam, CenterRequest};
use crate::algorithms::clipping::{self, ClipMode, ClipParam, ClipRequest};
pub(crate) use crate::algorithms::parameters::parse_params;
use crate::algorithms::power_clip::ClipAsk;
use crate::algorithms::{AlgorithmInfo, ConfigError, StudyKind};
use crate::dataset::{DataContext, Relation};
use crate::federation::messages::SiteStudyView;
use crate::privacy::PrivacyTarget;
use crate::site::Failure;
use crate::site::args::SiteArgs;
use crate::site::http::SiteClient;
use crate::site::prepared::Prepared;
use crate::store::{LocalBudget, Store};
use crate::studies::live::Protocol;
use power::state::SiteComputation;
use serde_json::Value;

/// One distributed protocol, as the layers that drive it see it. Implemented once per folder
/// ([`power::Power`], [`cape::Cape`], [`gossip::Gossip`]) and chosen in one place,
/// [`protocol_of`], from the catalog's [`StudyKind`] of the algorithm a study names.
///
/// - **configure** ([`StudyProtocol::configure`]): an algorithm's parameters and the study's
///   public terms become a [`StudyPlan`].
/// - **cost**: the ρ each site is charged is the plan's [`StudyPlan::rho`], computed by
///   `configure` with the algorithm's own cost formula; [`StudyProtocol::at_ledger_rho`]
///   recalibrates the plan at the amount the ledger charges after rounding up.
/// - **site step** ([`StudyProtocol::site_check`], [`StudyProtocol::site_records`],
///   [`StudyProtocol::check_data`], [`StudyProtocol::follow`]): what `privpca site` checks before
///   it joins and how it follows the coordinator's tasks. Asked again for an answer it already
///   sent, a site sends the same bytes: every protocol keeps every answer in the site's ledger
///   before sending it, so a restarted site resends it too.
/// - **coordinator step**: not a method here. A study's coordinator state is one
///   `studies::live::Stage` value, which the durable snapshot (`studies::durable`) writes and
///   reads back; the generic driver dispatches on it, and each protocol's transitions are its
///   `impl Live` block in `<protocol>/coordinator.rs`. A trait object could not be restored
///   from a snapshot without the same match.
/// - **simulate**: not a method here either. The job-mode run is each algorithm's
///   `Algorithm::run`, listed in `algorithms::registry` with the other jobs (`federated_power`
///   runs [`power::simulate::run`]; CAPE and gossip simulate with the numerical core's own code).
pub(crate) trait StudyProtocol: Sync {
    /// Validates `algorithm`'s parameters and calibrates the study for its terms.
    fn configure(&self, algorithm: &AlgorithmInfo, params: Value, terms: &StudyTerms<'_>) -> Planned;

    /// The plan calibrated at the ledger's amount `rho` (the ρ a site's view states), so that
    /// the coordinator and every site derive the same noise. Unchanged by default.
    fn at_ledger_rho(&self, _plan: &mut StudyPlan, _rho: f64) {}

    /// Every site holds its own block of features and takes part in every exchange (t = S).
    fn splits_features(&self) -> bool {
        false
    }

    /// The most sites a study may invite (its plan may allow fewer for its parameters).
    fn max_sites(&self) -> u32 {
        crate::algorithms::federated_power::MAX_SITES
    }

    /// The study's report is a noise report (shown as the result's `noise`).
    fn reports_noise(&self) -> bool {
        false
    }

    /// The site's checks of the study's terms before it loads anything; the per-round
    /// computation of `federated_power`, `None` for the others.
    fn site_check(&self, view: &SiteStudyView, args: &SiteArgs) -> Result<Option<SiteComputation>, Failure>;

    /// How the site loads its records: the limits on n and the clipping bounds.
    fn site_records(&self, view: &SiteStudyView, relation: Relation) -> Result<RecordRules, Failure>;

    /// Whether the loaded records (`shape` = (n, d)) fit the study; `kept` is what
    /// [`StudyProtocol::site_check`] returned.
    fn check_data(&self, view: &SiteStudyView, kept: Kept<'_>, shape: (usize, usize)) -> Checked;

    /// Follows the coordinator's tasks until the study ends for this site.
    fn follow<'a>(&'a self, site: SiteRun<'a>) -> SiteFuture<'a>;
}

/// What [`StudyProtocol::configure`] returns.
pub(crate) type Planned = Result<StudyPlan, PlanError>;

/// `federated_power`'s per-round computation, as the site's check kept it.
pub(crate) type Kept<'a> = Option<&'a SiteComputation>;

/// A site's check of its data: the reason it does not fit.
pub(crate) type Checked = Result<(), String>;

/// How a site loads its records for a study.
pub(crate) struct RecordRules {
    /// At most this many records (`u64::MAX`: no limit, because n is private).
    pub(crate) max_records: u64,
    /// The d of an empty file, where no records is a valid shard.
    pub(crate) empty_d: Option<usize>,
    /// Clipping bounds: L2 norm β and L1 norm α of a row.
    pub(crate) beta: f64,
    pub(crate) alpha: f64,
    /// n is private and the site clamps its products: more records than `max_site_samples`
    /// only earns a local warning.
    pub(crate) clamps: bool,
}

/// What a site's [`StudyProtocol::follow`] works with.
pub(crate) struct SiteRun<'a> {
    pub(crate) args: &'a SiteArgs,
    pub(crate) client: &'a SiteClient,
    pub(crate) store: &'a Store,
    pub(crate) budget: &'a LocalBudget,
    pub(crate) prepared: &'a Prepared,
}

impl<'a> SiteRun<'a> {
    /// Its parts: the arguments, the client, the ledger, its budget and the prepared study.
    pub(crate) fn parts(
        &self,
    ) -> (
        &'a SiteArgs,
        &'a SiteClient,
        &'a Store,
        &'a LocalBudget,
        &'a Prepared,
    ) {
        (self.args, self.client, self.store, self.budget, self.prepared)
    }
}

/// A site's run of a study, to completion.
pub(crate) type SiteFuture<'a> = Pin<Box<dyn Future<Output = Result<(), Failure>> + 'a>>;

/// The protocol a study algorithm runs by: the one dispatch on [`StudyKind`].
pub(crate) fn protocol_of(kind: StudyKind) -> &'static dyn StudyProtocol {
    match kind {
        StudyKind::Power => &power::Power,
        StudyKind::Cape => &cape::Cape,
        StudyKind::Gossip => &gossip::Gossip,
    }
}

/// An algorithm a study can run: its catalog entry and its protocol.
#[derive(Clone, Copy)]
pub struct StudyAlgorithm {
    info: &'static AlgorithmInfo,
    protocol: &'static dyn StudyProtocol,
}

impl std::fmt::Debug for StudyAlgorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("StudyAlgorithm").field(&self.info.name).finish()
    }
}

impl StudyAlgorithm {
    /// The algorithm named `name`, if the catalog says a study can run it.
    pub fn from_name(name: &str) -> Option<StudyAlgorithm> {
        let info = crate::algorithms::find(name)?.info();
        let kind = info.study?;
        Some(StudyAlgorithm {
            info,
            protocol: protocol_of(kind),
        })
    }

    /// Its catalog entry.
    pub fn info(self) -> &'static AlgorithmInfo {
        self.info
    }

    /// The most sites a study of it may invite.
    pub fn max_sites(self) -> u32 {
        self.protocol.max_sites()
    }

    pub(crate) fn protocol(self) -> &'static dyn StudyProtocol {
        self.protocol
    }

    /// Every site holds its own block of features and takes part in every exchange (t = S).
    pub fn splits_features(self) -> bool {
        self.protocol.splits_features()
    }

    /// The study's report is a noise report (shown as the result's `noise`).
    pub fn reports_noise(self) -> bool {
        self.protocol.reports_noise()
    }

    /// Validates the parameters and calibrates the study for its terms.
    pub fn plan(self, params: serde_json::Value, terms: &StudyTerms<'_>) -> Result<StudyPlan, PlanError> {
        self.protocol.configure(self.info, params, terms)
    }

    /// The plan calibrated at the ledger's amount `rho`, the ρ a site's view states: CAPE
    /// stages are calibrated at it, so that the coordinator and every site derive the same
    /// noise (docs/design/cape.md). `federated_power` is calibrated by its multiplier and
    /// unchanged.
    pub fn at_ledger_rho(self, mut plan: StudyPlan, rho: f64) -> StudyPlan {
        self.protocol.at_ledger_rho(&mut plan, rho);
        plan
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
/// Removes `clip` from a study's parameters: `"auto"` (the default, as for a central job on
/// records), `"none"`, or `{"quantile": q, "share": f}`.
pub(crate) fn take_clip(params: &mut Value, ctx: &DataContext) -> Result<Option<ClipAsk>, PlanError> {
    let raw = match params {
        Value::Object(map) => map.remove("clip"),
        _ => None,
    };
    let param: ClipParam = match raw {
        None => ClipParam::Named(ClipMode::Auto),
        Some(v) => serde_json::from_value(v).map_err(|e| {
            ConfigError::invalid(
                "params.clip",
                format!("must be \"auto\", \"none\" or {{\"quantile\", \"share\"}}: {e}"),
            )
        })?,
    };
    Ok(clipping::request(Some(param), ctx)?.map(|request| match request {
        ClipRequest::Auto => ClipAsk::Auto,
        ClipRequest::Quantile { quantile, share } => ClipAsk::Quantile { quantile, share },
    }))
}

/// Removes `center` and `center_share` from a study's parameters: `"none"` (the default, as
/// for a central job), `"private"` with its share, or a public centre of d numbers
/// ([`centering::request`]).
pub(crate) fn take_center(params: &mut Value, ctx: &DataContext) -> Result<Option<CenterRequest>, PlanError> {
    let (center, share) = match params {
        Value::Object(map) => (map.remove("center"), map.remove("center_share")),
        _ => (None, None),
    };
    let center: Option<CenterParam> = center
        .map(|v| {
            serde_json::from_value(v).map_err(|e| {
                ConfigError::invalid(
                    "params.center",
                    format!("must be \"none\", \"private\" or an array of d numbers: {e}"),
                )
            })
        })
        .transpose()?;
    let share = share
        .map(|v| {
            v.as_f64()
                .ok_or_else(|| ConfigError::invalid("params.center_share", "must be a number"))
        })
        .transpose()?;
    Ok(centering::request(center, share, ctx)?)
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
