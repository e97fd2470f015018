//! One study's protocol state in the coordinator's memory, and the transitions between its
//! phases (docs/design/federation.md, "Study lifecycle"). Pure apart from the clock passed in:
//! [`Live::advance`] returns the store writes the hub must make.
//!
//! This file is the generic part of the machine (enrolment, the join checks, the study's end);
//! each protocol's phases are written beside the rest of that protocol, as `impl Live` blocks
//! in `crate::protocols::{power, cape, gossip}::coordinator`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::algorithms::Output;
use crate::algorithms::federated_power::FederatedPowerConfig;
use crate::federation::messages::{JoinRequest, SiteTask};
use crate::federation::wire;
use crate::store::StudyStatus;

/// What the hub must write to the store after a transition.
#[derive(Debug)]
pub enum Effect {
    /// Enrolment is over; the study runs with this roster (others are dropped).
    Start { roster: Vec<u32> },
    /// Round 1 opens: charge these sites; those missing from the key exchange are dropped.
    Charge { roster: Vec<u32>, dropped: Vec<u32> },
    /// These sites dropped out in `round`.
    Dropped { sites: Vec<u32>, round: u32 },
    /// `done` rounds are complete.
    Progress { done: u32 },
    /// The study succeeded; `report` is the protocol's public report (survivors, noise).
    Succeeded {
        output: Output,
        report: serde_json::Value,
    },
    /// The study failed; any charges already made stand.
    Failed {
        reason: String,
        report: Option<serde_json::Value>,
    },
}

/// Which protocol a study runs.
#[derive(Debug, Clone)]
pub enum Protocol {
    /// `federated_power`: key exchange, then L masked rounds (docs/design/federation.md).
    Power(FederatedPowerConfig),
    /// `cape_pca`: one CAPE release per site (docs/design/cape.md).
    Cape(crate::protocols::cape::coordinator::CapePlan),
    /// `gossip_power`: every site an agent; the coordinator relays (docs/design/federation.md,
    /// "Live gossip").
    Gossip(Box<crate::protocols::gossip::coordinator::GossipPlan>),
}

impl Protocol {
    /// Public keys a site sends at join: one per round (power) or per stage (CAPE).
    fn keys_per_site(&self) -> usize {
        match self {
            Protocol::Power(config) => config.total_rounds() as usize,
            Protocol::Cape(plan) => plan.stages.len(),
            Protocol::Gossip(_) => 0,
        }
    }
}

pub(crate) enum Stage {
    Enrolling,
    Sharing(Box<crate::protocols::power::coordinator::Sharing>),
    Running(Box<crate::protocols::power::coordinator::Running>),
    Cape(Box<crate::protocols::cape::coordinator::CapeRunning>),
    Gossip(Box<crate::protocols::gossip::coordinator::GossipRunning>),
    Finished {
        status: StudyStatus,
        reason: Option<String>,
    },
}

/// A study's live state.
pub struct Live {
    pub study: Uuid,
    pub(crate) protocol: Protocol,
    pub(crate) threshold: u32,
    pub(crate) d: usize,
    pub(crate) n_sites: u32,
    pub(crate) join_deadline: Instant,
    pub(crate) round_timeout: Duration,
    pub(crate) names: BTreeMap<u32, String>,
    pub(crate) joined: BTreeMap<u32, JoinRequest>,
    pub(crate) stage: Stage,
    /// End of the current phase (key exchange, collection or unmasking).
    pub(crate) deadline: Instant,
    /// Sites out of the study, with the reason shown to them.
    pub(crate) out: BTreeMap<u32, String>,
}

/// A site message that does not fit: the HTTP layer turns it into a 4xx.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LiveError {
    /// 409: the message is for another phase or round, or repeats one already received.
    #[error("{0}")]
    Conflict(String),
    /// 409 with type already-received: a retried message that already arrived.
    #[error("{0}")]
    AlreadyReceived(String),
    /// 422: the message is malformed for this study.
    #[error("{0}")]
    Invalid(String),
}

impl Live {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        study: Uuid,
        protocol: Protocol,
        threshold: u32,
        d: usize,
        names: BTreeMap<u32, String>,
        join_deadline: Instant,
        round_timeout: Duration,
    ) -> Live {
        Live {
            study,
            n_sites: names.len() as u32,
            protocol,
            threshold,
            d,
            join_deadline,
            round_timeout,
            names,
            joined: BTreeMap::new(),
            stage: Stage::Enrolling,
            deadline: join_deadline,
            out: BTreeMap::new(),
        }
    }

    pub fn is_finished(&self) -> bool {
        matches!(self.stage, Stage::Finished { .. })
    }

    /// When the hub should look again even if nothing arrives.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Ends the study from outside (cancelled by its owner).
    pub fn cancel(&mut self) {
        if !self.is_finished() {
            self.stage = Stage::Finished {
                status: StudyStatus::Cancelled,
                reason: Some("the study was cancelled by its owner".into()),
            };
        }
    }

    /// Checks a join without recording it.
    pub fn check_join(&self, site: u32, request: &JoinRequest) -> Result<(), LiveError> {
        if !matches!(self.stage, Stage::Enrolling) {
            return Err(LiveError::Conflict("the study is no longer enrolling".into()));
        }
        if self.joined.contains_key(&site) {
            return Err(LiveError::Conflict("this site has already joined".into()));
        }
        let want = self.protocol.keys_per_site();
        if matches!(self.protocol, Protocol::Gossip(_))
            && (!request.mask_public_keys.is_empty() || request.encryption_public_key.is_some())
        {
            return Err(LiveError::Invalid(
                "a gossip_power agent joins with its signing key only: mask_public_keys must be empty and encryption_public_key absent".into(),
            ));
        }
        if request.mask_public_keys.len() != want {
            return Err(LiveError::Invalid(format!(
                "mask_public_keys must hold one key per {} ({want}); got {}",
                if matches!(self.protocol, Protocol::Power(_)) {
                    "round"
                } else {
                    "stage"
                },
                request.mask_public_keys.len()
            )));
        }
        match (&self.protocol, &request.encryption_public_key) {
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
        let sparse = matches!(&self.protocol, Protocol::Power(config) if config.secagg_plus.is_some());
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

    /// A confirmation of a CAPE stage's or a gossip study's transcript.
    pub fn stage_confirm(&mut self, site: u32, stage: u32, signature: &str) -> Result<(), LiveError> {
        match self.stage {
            Stage::Gossip(_) => self.gossip_confirm(site, stage, signature),
            _ => self.cape_confirm(site, stage, signature),
        }
    }

    /// Records a join (the store has already accepted it).
    pub fn join(&mut self, site: u32, request: JoinRequest) -> Result<(), LiveError> {
        self.check_join(site, &request)?;
        self.joined.insert(site, request);
        Ok(())
    }

    /// The next thing `site` should do.
    pub fn task(&self, site: u32) -> SiteTask {
        if let Some(reason) = self.out.get(&site) {
            return SiteTask::Finished {
                status: self.status(),
                reason: Some(reason.clone()),
            };
        }
        match &self.stage {
            Stage::Finished { status, reason } => SiteTask::Finished {
                status: *status,
                reason: reason.clone(),
            },
            Stage::Enrolling => self.wait(),
            Stage::Sharing(sharing) => sharing.task(site).unwrap_or_else(|| self.wait()),
            Stage::Running(running) => running.task(site).unwrap_or_else(|| self.wait()),
            Stage::Cape(cape) => cape.task(site).unwrap_or_else(|| self.wait()),
            Stage::Gossip(gossip) => gossip.task(site).unwrap_or_else(|| self.wait()),
        }
    }

    pub(crate) fn wait(&self) -> SiteTask {
        SiteTask::Wait {
            status: self.status(),
        }
    }

    fn status(&self) -> StudyStatus {
        match &self.stage {
            Stage::Enrolling => StudyStatus::Enrolling,
            Stage::Sharing(_) | Stage::Running(_) | Stage::Cape(_) | Stage::Gossip(_) => StudyStatus::Running,
            Stage::Finished { status, .. } => *status,
        }
    }

    pub(crate) fn fail(
        &mut self,
        reason: String,
        report: Option<serde_json::Value>,
        effects: &mut Vec<Effect>,
    ) {
        self.stage = Stage::Finished {
            status: StudyStatus::Failed,
            reason: Some(reason.clone()),
        };
        effects.push(Effect::Failed { reason, report });
    }

    pub(crate) fn mark_out(&mut self, sites: &[u32], round: u32, why: &str, effects: &mut Vec<Effect>) {
        if sites.is_empty() {
            return;
        }
        for &s in sites {
            self.out.entry(s).or_insert_with(|| why.to_string());
        }
        effects.push(Effect::Dropped {
            sites: sites.to_vec(),
            round,
        });
    }

    /// Moves the study on as far as the messages received and the clock allow.
    pub fn advance(&mut self, now: Instant) -> Vec<Effect> {
        let mut effects = Vec::new();
        loop {
            let moved = match &self.stage {
                Stage::Finished { .. } => false,
                Stage::Enrolling => self.advance_enrolment(now, &mut effects),
                Stage::Sharing(_) => self.advance_sharing(now, &mut effects),
                Stage::Running(_) => self.advance_rounds(now, &mut effects),
                Stage::Cape(_) => self.advance_cape(now, &mut effects),
                Stage::Gossip(_) => self.advance_gossip(now, &mut effects),
            };
            if !moved {
                return effects;
            }
        }
    }

    fn advance_enrolment(&mut self, now: Instant, effects: &mut Vec<Effect>) -> bool {
        let all = self.joined.len() as u32 == self.n_sites;
        if !(all || now >= self.join_deadline) {
            return false;
        }
        let t = self.threshold;
        if (self.joined.len() as u32) < t {
            let reason = format!(
                "only {} of {} sites joined by the join deadline; t = {t} are needed. Nothing was charged.",
                self.joined.len(),
                self.n_sites
            );
            self.fail(reason, None, effects);
            return true;
        }
        let roster: Vec<u32> = self.joined.keys().copied().collect();
        let never: Vec<u32> = self
            .names
            .keys()
            .copied()
            .filter(|s| !self.joined.contains_key(s))
            .collect();
        for s in never {
            self.out
                .insert(s, "this site did not join before the join deadline".into());
        }
        effects.push(Effect::Start {
            roster: roster.clone(),
        });
        match self.protocol.clone() {
            Protocol::Power(config) => self.start_power(config, &roster, effects),
            Protocol::Cape(plan) => self.start_cape(plan, roster, effects),
            Protocol::Gossip(plan) => self.start_gossip(*plan, roster, effects),
        }
        self.deadline = now + self.round_timeout;
        true
    }
}

/// A protocol report as stored with the study.
pub(crate) fn report_value<T: serde::Serialize>(report: T) -> serde_json::Value {
    serde_json::to_value(report).unwrap_or(serde_json::Value::Null)
}
