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
mod options;
pub mod power;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

use crate::algorithms::federated_power::FederatedPowerConfig;
pub(crate) use crate::algorithms::parameters::parse_params;
use crate::algorithms::{AlgorithmInfo, ConfigError, StudyKind};
use crate::dataset::{DataContext, Relation};
use crate::federation::messages::{JoinRequest, ShareBox, SiteStudyView, SiteTask, UnmaskRequest};
use crate::federation::status::StudyStatus;
use crate::federation::wire;
use crate::privacy::PrivacyTarget;
use crate::site::Failure;
use crate::site::args::SiteArgs;
use crate::site::http::SiteClient;
use crate::site::prepared::Prepared;
use crate::store::{LocalBudget, Store};
use crate::studies::study::{Effect, LiveError, Study};
pub(crate) use options::{take_center, take_clip};
use power::state::SiteComputation;
use serde::{Deserialize, Serialize};
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
/// - **coordinator step**: not a method here. A study's coordinator state is one [`Stage`]
///   value (this file), which the durable snapshot (`studies::durable`) writes and reads back;
///   its dispatch ([`Stage::advance`], [`Stage::deliver`]) reaches each protocol's own state
///   machine in `<protocol>/coordinator.rs`, which takes the study's common part
///   (`studies::study::Study`). A trait object could not be restored from a snapshot without
///   the same match.
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

/// Which protocol a study runs: its plan, fixed when the study is created.
#[derive(Debug, Clone)]
pub enum Protocol {
    /// `federated_power`: key exchange, then L masked rounds (docs/design/federation.md).
    Power(FederatedPowerConfig),
    /// `cape_pca`: one CAPE release per site (docs/design/cape.md).
    Cape(cape::coordinator::CapePlan),
    /// `gossip_power`: every site an agent; the coordinator relays (docs/design/federation.md,
    /// "Live gossip").
    Gossip(Box<gossip::coordinator::GossipPlan>),
}

impl Protocol {
    /// The protocol's name, for messages.
    fn name(&self) -> &'static str {
        match self {
            Protocol::Power(_) => "federated_power",
            Protocol::Cape(_) => "CAPE",
            Protocol::Gossip(_) => "gossip_power",
        }
    }

    /// Public keys a site sends at join: one per round (power) or per stage (CAPE).
    fn keys_per_site(&self) -> usize {
        match self {
            Protocol::Power(config) => config.total_rounds() as usize,
            Protocol::Cape(plan) => plan.stages.len(),
            Protocol::Gossip(_) => 0,
        }
    }

    /// The keys and commitments a join must carry for this protocol.
    pub(crate) fn check_join(&self, request: &JoinRequest) -> Result<(), LiveError> {
        let want = self.keys_per_site();
        if matches!(self, Protocol::Gossip(_))
            && (!request.mask_public_keys.is_empty() || request.encryption_public_key.is_some())
        {
            return Err(LiveError::Invalid(
                "a gossip_power agent joins with its signing key only: mask_public_keys must be empty and encryption_public_key absent".into(),
            ));
        }
        if request.mask_public_keys.len() != want {
            return Err(LiveError::Invalid(format!(
                "mask_public_keys must hold one key per {} ({want}); got {}",
                if matches!(self, Protocol::Power(_)) {
                    "round"
                } else {
                    "stage"
                },
                request.mask_public_keys.len()
            )));
        }
        match (self, &request.encryption_public_key) {
            (Protocol::Power(_), None) => {
                return Err(LiveError::Invalid(
                    "encryption_public_key is required for federated_power".into(),
                ));
            }
            (Protocol::Cape(_), Some(_)) => {
                return Err(LiveError::Invalid(
                    "encryption_public_key must be absent for CAPE (no share boxes are relayed)".into(),
                ));
            }
            _ => {}
        }
        let Some(key) = &request.signing_public_key else {
            return Err(LiveError::Invalid(
                "signing_public_key is required: every site signs the transcripts of its study's rounds"
                    .into(),
            ));
        };
        crate::federation::transcript::verifying_key(key)
            .map_err(|e| LiveError::Invalid(format!("signing_public_key: {e}")))?;
        let sparse = matches!(self, Protocol::Power(config) if config.secagg_plus.is_some());
        match (&request.seed_commitment, sparse) {
            (None, true) => {
                return Err(LiveError::Invalid(
                    "seed_commitment is required: this study runs SecAgg+, whose graph seed every site commits to at join".into(),
                ));
            }
            (Some(_), false) => {
                return Err(LiveError::Invalid(
                    "seed_commitment must be absent: this study does not run SecAgg+".into(),
                ));
            }
            (Some(commitment), true) => {
                wire::decode_key(commitment)
                    .map_err(|e| LiveError::Invalid(format!("seed_commitment: {e}")))?;
            }
            (None, false) => {}
        }
        for key in request
            .encryption_public_key
            .iter()
            .chain(&request.mask_public_keys)
        {
            wire::decode_key(key)
                .map_err(|e| LiveError::Invalid(format!("a public key is malformed: {e}")))?;
        }
        Ok(())
    }

    /// A joining site's n against the sites already joined: every agent of a `gossip_power`
    /// study holds the same records; the other protocols take any n.
    pub(crate) fn check_n_samples(
        &self,
        joined: &BTreeMap<u32, JoinRequest>,
        n_samples: Option<i64>,
    ) -> Result<(), LiveError> {
        match self {
            Protocol::Gossip(_) => gossip::coordinator::GossipRunning::check_n(joined, n_samples),
            Protocol::Power(_) | Protocol::Cape(_) => Ok(()),
        }
    }

    /// Enrolment is over: the protocol's first stage for `roster` (None when it failed the
    /// study at once).
    pub(crate) fn start(
        &self,
        study: &mut Study,
        roster: Vec<u32>,
        effects: &mut Vec<Effect>,
    ) -> Option<Stage> {
        match self.clone() {
            Protocol::Power(config) => {
                power::coordinator::Sharing::open(study, config, &roster, effects).map(Stage::Sharing)
            }
            Protocol::Cape(plan) => {
                cape::coordinator::CapeRunning::open(study, plan, roster, effects).map(Stage::Cape)
            }
            Protocol::Gossip(plan) => {
                gossip::coordinator::GossipRunning::open(study, *plan, roster, effects).map(Stage::Gossip)
            }
        }
    }
}

/// Where a study stands: enrolling, one of its protocol's own states, or finished. The one
/// dispatch over the protocols' coordinator states ([`Stage::task`], [`Stage::advance`],
/// [`Stage::deliver`], [`Stage::replay`]); each protocol's transitions are methods of its own
/// state in `<protocol>/coordinator.rs`, over the study's [`Study`].
pub(crate) enum Stage {
    Enrolling,
    Sharing(Box<power::coordinator::Sharing>),
    Running(Box<power::coordinator::Running>),
    Cape(Box<cape::coordinator::CapeRunning>),
    Gossip(Box<gossip::coordinator::GossipRunning>),
    Finished {
        status: StudyStatus,
        reason: Option<String>,
    },
}

/// A site's message to its study's coordinator (`/v1/site/*`), as the hub hands it on.
#[derive(Debug)]
pub enum SiteMessage<'a> {
    /// A SecAgg+ site's share of the graph seed.
    RevealSeed { reveal: &'a str },
    /// A `federated_power` site's share boxes in the key exchange.
    Shares { boxes: Vec<ShareBox> },
    /// A masked contribution for `round`, with the site's signature of what it masked.
    Contribute {
        round: u32,
        masked: &'a str,
        signature: &'a str,
    },
    /// A survivor's confirmation of `round`'s transcript.
    Confirm { round: u32, signature: &'a str },
    /// A survivor's unmasking shares for `round`.
    Unmask { round: u32, answer: UnmaskRequest },
    /// A CAPE site's release for `stage`.
    CapeRelease { stage: u32, values: &'a str },
    /// A CAPE site's confirmation of a stage's transcript, or a gossip agent's of the study's
    /// (stage 0).
    StageConfirm { stage: u32, signature: &'a str },
    /// A gossip agent's value of exchange `step`.
    GossipPost { step: u32, values: &'a str },
}

/// A `federated_power` step given back from the study's journal on a restore (whose snapshot
/// may be of a later phase of the same round than the one that accepted it).
#[derive(Debug)]
pub enum Replay<'a> {
    Contribution {
        site: u32,
        round: u32,
        masked: &'a str,
        signature: &'a str,
    },
    Confirm {
        site: u32,
        round: u32,
        signature: &'a str,
    },
    /// The close of `round`'s collection with every vector in.
    Collected { round: u32 },
    /// The close of `round`'s consistency round.
    Unmasking { round: u32 },
}

impl Stage {
    /// The protocol's task for `site`; None to wait.
    pub(crate) fn task(&self, site: u32) -> Option<SiteTask> {
        match self {
            Stage::Sharing(sharing) => sharing.task(site),
            Stage::Running(running) => running.task(site),
            Stage::Cape(cape) => cape.task(site),
            Stage::Gossip(gossip) => gossip.task(site),
            Stage::Enrolling | Stage::Finished { .. } => None,
        }
    }

    /// Whether the protocol hands out its tasks (a SecAgg+ key exchange waits for its graph).
    pub(crate) fn tasks_ready(&self) -> bool {
        match self {
            Stage::Sharing(sharing) => sharing.tasks_ready(),
            _ => true,
        }
    }

    /// Moves the protocol on as far as its messages and the clock allow; whether it moved.
    pub(crate) fn advance(&mut self, study: &mut Study, now: Instant, effects: &mut Vec<Effect>) -> bool {
        match self {
            Stage::Sharing(sharing) => {
                let (moved, rounds) = sharing.advance(study, now, effects);
                if let Some(rounds) = rounds {
                    *self = Stage::Running(rounds);
                }
                moved
            }
            Stage::Running(running) => running.advance(study, now, effects),
            Stage::Cape(cape) => cape.advance(study, now, effects),
            Stage::Gossip(gossip) => gossip.advance(study, now, effects),
            Stage::Enrolling | Stage::Finished { .. } => false,
        }
    }

    /// Hands `site`'s message to the protocol state that takes it; a message for another
    /// protocol or phase is a conflict.
    pub(crate) fn deliver(
        &mut self,
        study: &mut Study,
        site: u32,
        message: SiteMessage<'_>,
    ) -> Result<(), LiveError> {
        let conflict = |what: &str| Err(LiveError::Conflict(format!("the study is not {what} now")));
        match (self, message) {
            (Stage::Sharing(sharing), SiteMessage::RevealSeed { reveal }) => {
                sharing.reveal_seed(study, site, reveal)
            }
            (Stage::Running(running), SiteMessage::RevealSeed { reveal })
                if running.graph.is_some() && running.senders.contains(&site) =>
            {
                Err(running.repeated_reveal(study.study, site, reveal))
            }
            (_, SiteMessage::RevealSeed { .. }) => conflict("fixing its graph"),
            (Stage::Running(running), SiteMessage::Shares { .. }) if running.senders.contains(&site) => Err(
                LiveError::AlreadyReceived("this site's share boxes already arrived".into()),
            ),
            (Stage::Sharing(sharing), SiteMessage::Shares { boxes }) => sharing.shares(site, boxes),
            (_, SiteMessage::Shares { .. }) => conflict("exchanging keys"),
            (
                Stage::Running(running),
                SiteMessage::Contribute {
                    round,
                    masked,
                    signature,
                },
            ) => running.contribute(site, round, masked, signature),
            (Stage::Running(running), SiteMessage::Confirm { round, signature }) => {
                running.confirm(site, round, signature)
            }
            (Stage::Running(running), SiteMessage::Unmask { round, answer }) => {
                running.unmask(site, round, answer)
            }
            (
                _,
                SiteMessage::Contribute { .. } | SiteMessage::Confirm { .. } | SiteMessage::Unmask { .. },
            ) => conflict("running rounds"),
            (Stage::Cape(cape), SiteMessage::CapeRelease { stage, values }) => {
                cape.release(study, site, stage, values)
            }
            (_, SiteMessage::CapeRelease { .. }) => conflict("collecting CAPE releases"),
            (Stage::Gossip(gossip), SiteMessage::StageConfirm { stage, signature }) => {
                gossip.confirm(site, stage, signature)
            }
            (Stage::Cape(cape), SiteMessage::StageConfirm { stage, signature }) => {
                cape.confirm(study, site, stage, signature)
            }
            (_, SiteMessage::StageConfirm { .. }) => conflict("running CAPE stages"),
            (Stage::Gossip(gossip), SiteMessage::GossipPost { step, values }) => {
                gossip.post(site, step, values)
            }
            (_, SiteMessage::GossipPost { .. }) => conflict("running gossip exchanges"),
        }
    }

    /// Where the study stands, coarsely (`Live::marker`): (stage, round, phase).
    pub(crate) fn marker(&self) -> (u8, u32, u8) {
        use crate::federation::rounds::Phase;
        match self {
            Stage::Enrolling => (0, 0, 0),
            Stage::Sharing(_) => (1, 0, 0),
            Stage::Running(running) => {
                let phase = match running.rounds.phase() {
                    Phase::Collect => 0,
                    Phase::Confirm { .. } => 1,
                    Phase::Unmask { .. } => 2,
                    Phase::Done => 3,
                };
                (2, running.rounds.round(), phase)
            }
            Stage::Cape(cape) => (3, cape.stage, u8::from(cape.confirmed)),
            Stage::Gossip(gossip) => (5, gossip.marker(), u8::from(gossip.confirmed)),
            Stage::Finished { .. } => (4, 0, 0),
        }
    }

    /// The protocol point a snapshot keeps, by name (`Live::phase_label`); `joined_empty`:
    /// nobody has joined yet.
    pub(crate) fn phase_label(&self, joined_empty: bool) -> Option<String> {
        let (_, round, phase) = self.marker();
        Some(match self {
            Stage::Enrolling if joined_empty => return None,
            Stage::Enrolling => "join".to_owned(),
            Stage::Sharing(sharing) if sharing.config.secagg_plus.is_some() && sharing.graph.is_none() => {
                "seeds".to_owned()
            }
            Stage::Sharing(sharing) if sharing.boxes.is_empty() => "keys".to_owned(),
            Stage::Sharing(_) => "shares".to_owned(),
            Stage::Running(_) if phase == 0 => format!("round-{round}"),
            Stage::Running(_) if phase == 1 => format!("confirm-{round}"),
            Stage::Running(_) if phase == 2 => format!("unmask-{round}"),
            Stage::Running(_) => "done".to_owned(),
            Stage::Gossip(_) => format!("exchange-{}", round + 1),
            Stage::Finished { .. } => "finished".to_owned(),
            Stage::Cape(_) => return None,
        })
    }

    /// Gives a journaled `federated_power` step back to a restored study.
    pub(crate) fn replay(&mut self, step: Replay<'_>) -> Result<(), LiveError> {
        let Stage::Running(running) = self else {
            return Err(LiveError::Conflict("the study is not running rounds now".into()));
        };
        match step {
            Replay::Contribution {
                site,
                round,
                masked,
                signature,
            } => running.replay_contribution(site, round, masked, signature),
            Replay::Confirm {
                site,
                round,
                signature,
            } => running.replay_confirm(site, round, signature),
            Replay::Collected { round } => running.replay_collected(round),
            Replay::Unmasking { round } => running.replay_unmasking(round),
        }
    }
}

/// What a study's snapshot keeps of its plan (`studies::durable::Snapshot`, where it is
/// flattened: the JSON holds `config`, `cape` or `gossip` at its top level, as snapshots always
/// have). Exactly one field is present.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct PlanKept {
    /// `federated_power`'s configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    config: Option<FederatedPowerConfig>,
    /// A CAPE study's plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cape: Option<cape::coordinator::CapePlan>,
    /// A `gossip_power` study's plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gossip: Option<Box<gossip::coordinator::GossipPlan>>,
}

impl Protocol {
    /// The plan as a snapshot keeps it.
    pub(crate) fn kept(&self) -> PlanKept {
        match self {
            Protocol::Power(config) => PlanKept {
                config: Some(config.clone()),
                ..PlanKept::default()
            },
            Protocol::Cape(plan) => PlanKept {
                cape: Some(plan.clone()),
                ..PlanKept::default()
            },
            Protocol::Gossip(plan) => PlanKept {
                gossip: Some(plan.clone()),
                ..PlanKept::default()
            },
        }
    }

    /// The plan again from a snapshot.
    pub(crate) fn restore(kept: PlanKept) -> Result<Protocol, String> {
        match (kept.config, kept.cape, kept.gossip) {
            (Some(config), None, None) => Ok(Protocol::Power(config)),
            (None, Some(plan), None) => Ok(Protocol::Cape(plan)),
            (None, None, Some(plan)) => Ok(Protocol::Gossip(plan)),
            _ => Err("a kept study does not name exactly one protocol".into()),
        }
    }
}

/// A [`Stage`] as a snapshot keeps it: each protocol's state by its own `durable.rs`.
// Externally tagged, not `tag = "stage"`: an internally tagged enum is buffered before it is
// read, and a buffered map loses the ability to read its JSON string keys as the u32 site
// indices (serde's `Content` keeps them as strings), so a kept study could not be read back.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum StageSnapshot {
    Enrolling,
    /// The key exchange (`power/durable.rs`).
    Sharing(Box<power::durable::SharingKept>),
    /// A `federated_power` study's rounds (`power/durable.rs`).
    Running(Box<power::durable::RunningKept>),
    Cape(Box<cape::durable::CapeKept>),
    Gossip(Box<gossip::durable::GossipKept>),
    Finished {
        status: StudyStatus,
        reason: Option<String>,
    },
}

impl Stage {
    /// The stage as a snapshot keeps it. The key exchange's boxes and reveals, and the open
    /// `federated_power` round's messages, are in the journal instead
    /// ([`power::durable::Journaled`]), but for the round of a restored snapshot that held them.
    pub(crate) fn kept(&self) -> StageSnapshot {
        match self {
            Stage::Enrolling => StageSnapshot::Enrolling,
            Stage::Sharing(sharing) => StageSnapshot::Sharing(Box::new(sharing.kept())),
            Stage::Running(running) => {
                StageSnapshot::Running(Box::new(running.kept(!running.journal_keeps_round())))
            }
            Stage::Cape(running) => StageSnapshot::Cape(Box::new(running.kept())),
            Stage::Gossip(running) => StageSnapshot::Gossip(Box::new(running.kept())),
            Stage::Finished { status, reason } => StageSnapshot::Finished {
                status: *status,
                reason: reason.clone(),
            },
        }
    }

    /// Whether [`Stage::kept`] holds all the journal does, so that writing it empties the
    /// journal: false while the key exchange runs, and while the open round's messages are
    /// kept only in the journal.
    pub(crate) fn snapshot_supersedes_journal(&self) -> bool {
        match self {
            Stage::Running(running) => !(running.journal_keeps_round() && running.rounds.holds_messages()),
            Stage::Sharing(_) => false,
            _ => true,
        }
    }

    /// The journal row that keeps the step from the point `before` ([`Stage::marker`]) to now,
    /// when the journal keeps it instead of a snapshot: a step with no store write (the caller
    /// checks there is none) that only moves one `federated_power` round one phase on, from
    /// collection to its consistency round ([`power::durable::Journaled::Collected`]) or from
    /// there to unmasking ([`power::durable::Journaled::Unmasking`]). Writing a whole snapshot
    /// (the iterate, the last release and the roster's keys, about half a megabyte at d = 1000,
    /// p = 20) to keep that one fact cost more than the consistency round itself
    /// (docs/performance-federation.md).
    pub(crate) fn journal_step(&self, before: (u8, u32, u8)) -> Option<power::durable::Journaled> {
        let Stage::Running(running) = self else {
            return None;
        };
        let (stage, round, phase) = self.marker();
        if before.0 != stage || before.1 != round || !running.journal_keeps_round() {
            return None;
        }
        match (before.2, phase) {
            (0, 1) => Some(power::durable::Journaled::Collected { round }),
            (1, 2) => Some(power::durable::Journaled::Unmasking { round }),
            _ => None,
        }
    }

    /// After a journal's replay: refused when the restored round still lacks a survivor's
    /// masked vector.
    pub(crate) fn check_replayed(&self) -> Result<(), String> {
        let Stage::Running(running) = self else {
            return Ok(());
        };
        let missing = running.rounds.missing_masked();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "the kept round {} lacks the masked vectors of survivors {missing:?}",
                running.rounds.round()
            ))
        }
    }
}

impl StageSnapshot {
    /// The stage again, for a study of `protocol` with `d` features; a stage of another
    /// protocol than the plan's is refused.
    pub(crate) fn restore(self, study: uuid::Uuid, protocol: &Protocol, d: usize) -> Result<Stage, String> {
        let mismatch = || {
            Err(format!(
                "a study of {} kept in another protocol's stage",
                protocol.name()
            ))
        };
        Ok(match (self, protocol) {
            (StageSnapshot::Enrolling, _) => Stage::Enrolling,
            // SecAgg+ reveals come back from the journal; the last one fixes the graph again.
            (StageSnapshot::Sharing(kept), Protocol::Power(config)) => Stage::Sharing(Box::new(
                power::coordinator::Sharing::restore(config.clone(), *kept),
            )),
            (StageSnapshot::Running(kept), Protocol::Power(config)) => Stage::Running(Box::new(
                power::coordinator::Running::restore(study, config.clone(), d, *kept)?,
            )),
            (StageSnapshot::Cape(kept), Protocol::Cape(plan)) => Stage::Cape(Box::new(
                cape::coordinator::CapeRunning::restore(plan.clone(), *kept)?,
            )),
            (StageSnapshot::Gossip(kept), Protocol::Gossip(plan)) => Stage::Gossip(Box::new(
                gossip::coordinator::GossipRunning::restore(plan, *kept)?,
            )),
            (StageSnapshot::Finished { status, reason }, _) => Stage::Finished { status, reason },
            (
                StageSnapshot::Sharing(_)
                | StageSnapshot::Running(_)
                | StageSnapshot::Cape(_)
                | StageSnapshot::Gossip(_),
                _,
            ) => return mismatch(),
        })
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
