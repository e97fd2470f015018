//! One study's protocol state in the coordinator's memory, and the transitions between its
//! phases (docs/design/federation.md, "Study lifecycle"). Pure apart from the clock passed in:
//! [`Live::advance`] returns the store writes the hub must make.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use uuid::Uuid;

use crate::algorithms::Output;
use crate::algorithms::federated_power::FederatedPowerConfig;
use crate::federation::messages::{JoinRequest, Participant, ShareBox, SiteTask};
use crate::federation::power::{FederationReport, PowerState};
use crate::federation::rounds::{Phase, Rounds};
use crate::federation::secagg::Aggregator;
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
    Cape(super::cape_live::CapePlan),
    /// `gossip_power`: every site an agent; the coordinator relays (docs/design/federation.md,
    /// "Live gossip").
    Gossip(Box<super::gossip_live::GossipPlan>),
}

impl Protocol {
    /// Public keys a site sends at join: one per round (power) or per stage (CAPE).
    fn keys_per_site(&self) -> usize {
        match self {
            Protocol::Power(config) => config.iterations as usize,
            Protocol::Cape(plan) => plan.stages.len(),
            Protocol::Gossip(_) => 0,
        }
    }
}

pub(super) struct Sharing {
    pub(super) config: FederatedPowerConfig,
    pub(super) participants: Vec<Participant>,
    pub(super) boxes: BTreeMap<u32, Vec<ShareBox>>,
}

pub(super) struct Running {
    pub(super) config: FederatedPowerConfig,
    /// The roster of the key exchange with its public keys (the aggregator is rebuilt from it).
    pub(super) participants: Vec<Participant>,
    /// Sites whose share boxes arrived (a retried upload from one of them is already received).
    pub(super) senders: BTreeSet<u32>,
    pub(super) rounds: Rounds,
    pub(super) power: PowerState,
    pub(super) inboxes: BTreeMap<u32, Vec<ShareBox>>,
    /// The open round's iterate, base64 (the same for every site).
    pub(super) iterate: String,
}

impl Running {
    /// A retried contribution: the round moved on with this site among its survivors, or the
    /// round is unmasking with it among them.
    fn already_contributed(&self, site: u32, round: u32) -> bool {
        let current = self.rounds.round();
        let past = round < current
            && self
                .rounds
                .history()
                .iter()
                .any(|h| h.round == round && h.survivors.contains(&site));
        let unmasking = round == current
            && matches!(self.rounds.phase(), Phase::Unmask { survivors, .. } if survivors.contains(&site));
        past || unmasking
    }

    /// A retried unmask answer: the round is done and this site answered it.
    fn already_unmasked(&self, site: u32, round: u32) -> bool {
        round < self.rounds.round()
            && self
                .rounds
                .history()
                .iter()
                .any(|h| h.round == round && h.survivors.contains(&site) && !h.silent.contains(&site))
    }
}

pub(super) enum Stage {
    Enrolling,
    Sharing(Sharing),
    Running(Box<Running>),
    Cape(Box<super::cape_live::CapeRunning>),
    Gossip(Box<super::gossip_live::GossipRunning>),
    Finished {
        status: StudyStatus,
        reason: Option<String>,
    },
}

/// A study's live state.
pub struct Live {
    pub study: Uuid,
    pub(super) protocol: Protocol,
    pub(super) threshold: u32,
    pub(super) d: usize,
    pub(super) n_sites: u32,
    pub(super) join_deadline: Instant,
    pub(super) round_timeout: Duration,
    pub(super) names: BTreeMap<u32, String>,
    pub(super) joined: BTreeMap<u32, JoinRequest>,
    pub(super) stage: Stage,
    /// End of the current phase (key exchange, collection or unmasking).
    pub(super) deadline: Instant,
    /// Sites out of the study, with the reason shown to them.
    pub(super) out: BTreeMap<u32, String>,
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
                "a gossip_power agent joins without keys: mask_public_keys must be empty and encryption_public_key absent".into(),
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

    /// Records a join (the store has already accepted it).
    pub fn join(&mut self, site: u32, request: JoinRequest) -> Result<(), LiveError> {
        self.check_join(site, &request)?;
        self.joined.insert(site, request);
        Ok(())
    }

    /// A site's share boxes.
    pub fn shares(&mut self, site: u32, boxes: Vec<ShareBox>) -> Result<(), LiveError> {
        if let Stage::Running(running) = &self.stage
            && running.senders.contains(&site)
        {
            return Err(LiveError::AlreadyReceived(
                "this site's share boxes already arrived".into(),
            ));
        }
        let Stage::Sharing(sharing) = &mut self.stage else {
            return Err(LiveError::Conflict("the study is not exchanging keys now".into()));
        };
        if !sharing.participants.iter().any(|p| p.index == site) {
            return Err(LiveError::Conflict("this site is not a participant".into()));
        }
        if sharing.boxes.contains_key(&site) {
            return Err(LiveError::AlreadyReceived(
                "this site's share boxes already arrived".into(),
            ));
        }
        let expected: BTreeSet<u32> = sharing.participants.iter().map(|p| p.index).collect();
        let to: BTreeSet<u32> = boxes.iter().map(|b| b.to).collect();
        if boxes.len() != expected.len() || to != expected {
            return Err(LiveError::Invalid(format!(
                "send exactly one box to each participant {expected:?}"
            )));
        }
        if let Some(b) = boxes.iter().find(|b| b.from != site) {
            return Err(LiveError::Invalid(format!(
                "a box says it is from site {}, not this site",
                b.from
            )));
        }
        // A box carries 2·L shares of 33 bytes plus nonce and tag; refuse anything far larger.
        let limit = 4 * (2 * 33 * sharing.config.iterations as usize + 64);
        if boxes
            .iter()
            .any(|b| b.ciphertext.len() > limit || wire::decode(&b.ciphertext).is_err())
        {
            return Err(LiveError::Invalid("a share box is malformed or too large".into()));
        }
        sharing.boxes.insert(site, boxes);
        Ok(())
    }

    /// A masked contribution for `round`.
    pub fn contribute(&mut self, site: u32, round: u32, masked: &str) -> Result<(), LiveError> {
        let Stage::Running(running) = &mut self.stage else {
            return Err(LiveError::Conflict("the study is not running rounds now".into()));
        };
        if running.already_contributed(site, round) {
            return Err(LiveError::AlreadyReceived(format!(
                "this site's contribution to round {round} already arrived"
            )));
        }
        let len = running.power.len();
        let words = wire::b64_to_words(masked, len).map_err(|e| LiveError::Invalid(e.to_string()))?;
        running.rounds.submit(site, round, words).map_err(round_error)
    }

    /// A survivor's unmasking shares for `round`.
    pub fn unmask(
        &mut self,
        site: u32,
        round: u32,
        answer: crate::federation::messages::UnmaskRequest,
    ) -> Result<(), LiveError> {
        let Stage::Running(running) = &mut self.stage else {
            return Err(LiveError::Conflict("the study is not running rounds now".into()));
        };
        if running.already_unmasked(site, round) {
            return Err(LiveError::AlreadyReceived(format!(
                "this site's unmasking shares for round {round} already arrived"
            )));
        }
        if let Phase::Unmask { survivors, dropped } = running.rounds.phase() {
            let own: BTreeSet<u32> = answer.self_mask_shares.iter().map(|s| s.site).collect();
            let keys: BTreeSet<u32> = answer.mask_key_shares.iter().map(|s| s.site).collect();
            let want_own: BTreeSet<u32> = survivors.iter().copied().collect();
            let want_keys: BTreeSet<u32> = dropped.iter().copied().collect();
            let counts_ok =
                own.len() == answer.self_mask_shares.len() && keys.len() == answer.mask_key_shares.len();
            if round == running.rounds.round() && !(counts_ok && own == want_own && keys == want_keys) {
                return Err(LiveError::Invalid(format!(
                    "send one self-mask share per survivor {want_own:?} and one mask-key share per dropped site {want_keys:?}"
                )));
            }
        }
        running
            .rounds
            .submit_unmask(site, round, answer)
            .map_err(round_error)
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
            Stage::Sharing(sharing) => {
                if sharing.participants.iter().any(|p| p.index == site) && !sharing.boxes.contains_key(&site)
                {
                    SiteTask::ShareKeys {
                        participants: sharing.participants.clone(),
                    }
                } else {
                    self.wait()
                }
            }
            Stage::Running(running) => {
                let rounds = &running.rounds;
                if rounds.has_answered(site) {
                    return self.wait();
                }
                match rounds.phase() {
                    Phase::Collect if rounds.roster().contains(&site) => SiteTask::Contribute {
                        round: rounds.round(),
                        rounds: running.config.iterations,
                        roster: rounds.roster().to_vec(),
                        iterate: running.iterate.clone(),
                        rows: self.d,
                        cols: running.config.p,
                        inbox: if rounds.round() == 1 {
                            running.inboxes.get(&site).cloned().unwrap_or_default()
                        } else {
                            Vec::new()
                        },
                    },
                    Phase::Unmask { survivors, dropped } if survivors.contains(&site) => SiteTask::Unmask {
                        round: rounds.round(),
                        survivors: survivors.clone(),
                        dropped: dropped.clone(),
                    },
                    _ => self.wait(),
                }
            }
            Stage::Cape(cape) => cape.task(site).unwrap_or_else(|| self.wait()),
            Stage::Gossip(gossip) => gossip.task(site).unwrap_or_else(|| self.wait()),
        }
    }

    pub(super) fn wait(&self) -> SiteTask {
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

    pub(super) fn fail(
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

    pub(super) fn mark_out(&mut self, sites: &[u32], round: u32, why: &str, effects: &mut Vec<Effect>) {
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
        let config = match &self.protocol {
            Protocol::Power(config) => config.clone(),
            Protocol::Cape(plan) => {
                let plan = plan.clone();
                effects.push(Effect::Start {
                    roster: roster.clone(),
                });
                self.start_cape(plan, roster, effects);
                self.deadline = now + self.round_timeout;
                return true;
            }
            Protocol::Gossip(plan) => {
                let plan = (**plan).clone();
                effects.push(Effect::Start {
                    roster: roster.clone(),
                });
                self.start_gossip(plan, roster, effects);
                self.deadline = now + self.round_timeout;
                return true;
            }
        };
        let participants = roster
            .iter()
            .map(|&i| {
                let j = &self.joined[&i];
                Participant {
                    index: i,
                    name: self.names.get(&i).cloned().unwrap_or_default(),
                    encryption_public_key: j.encryption_public_key.clone().unwrap_or_default(),
                    mask_public_keys: j.mask_public_keys.clone(),
                }
            })
            .collect();
        effects.push(Effect::Start { roster });
        self.stage = Stage::Sharing(Sharing {
            config,
            participants,
            boxes: BTreeMap::new(),
        });
        self.deadline = now + self.round_timeout;
        true
    }

    fn advance_sharing(&mut self, now: Instant, effects: &mut Vec<Effect>) -> bool {
        let Stage::Sharing(sharing) = &self.stage else {
            return false;
        };
        let all = sharing.boxes.len() == sharing.participants.len();
        if !(all || now >= self.deadline) {
            return false;
        }
        let config = sharing.config.clone();
        let t = config.threshold;
        let senders: Vec<u32> = sharing.boxes.keys().copied().collect();
        let silent: Vec<u32> = sharing
            .participants
            .iter()
            .map(|p| p.index)
            .filter(|i| !sharing.boxes.contains_key(i))
            .collect();
        if (senders.len() as u32) < t {
            let reason = format!(
                "only {} sites completed the key exchange; t = {t} are needed. Nothing was charged.",
                senders.len()
            );
            self.fail(reason, None, effects);
            return true;
        }
        let participants = sharing.participants.clone();
        let mut inboxes: BTreeMap<u32, Vec<ShareBox>> = BTreeMap::new();
        for boxes in sharing.boxes.values() {
            for b in boxes {
                inboxes.entry(b.to).or_default().push(b.clone());
            }
        }
        let setup = Aggregator::new(self.study, t, &participants, config.iterations)
            .map_err(|e| e.to_string())
            .and_then(|aggregator| {
                let mut rng = ChaCha20Rng::from_os_rng();
                let power = PowerState::new(config.clone(), self.d, &mut rng).map_err(|e| e.to_string())?;
                Ok((aggregator, power))
            });
        let (aggregator, power) = match setup {
            Ok(parts) => parts,
            Err(e) => {
                self.fail(
                    format!("the key exchange could not be completed: {e}"),
                    None,
                    effects,
                );
                return true;
            }
        };
        let senders_set: BTreeSet<u32> = senders.iter().copied().collect();
        let rounds = Rounds::new(aggregator, t, config.iterations, power.len(), senders.clone());
        let iterate = wire::f64s_to_b64(power.iterate().as_slice());
        for &s in &silent {
            self.out
                .insert(s, "this site did not complete the key exchange in time".into());
        }
        effects.push(Effect::Charge {
            roster: senders,
            dropped: silent,
        });
        self.stage = Stage::Running(Box::new(Running {
            config,
            participants,
            senders: senders_set,
            rounds,
            power,
            inboxes,
            iterate,
        }));
        self.deadline = now + self.round_timeout;
        true
    }

    fn advance_rounds(&mut self, now: Instant, effects: &mut Vec<Effect>) -> bool {
        let Stage::Running(running) = &mut self.stage else {
            return false;
        };
        let round = running.rounds.round();
        let config = running.config.clone();
        let expired = now >= self.deadline;
        match running.rounds.phase().clone() {
            Phase::Collect => {
                if !(running.rounds.collect_complete() || expired) {
                    return false;
                }
                if let Err(e) = running.rounds.close_collect() {
                    let report =
                        report_value(FederationReport::from_history(&config, running.rounds.history()));
                    let missing = running.rounds.awaiting();
                    self.mark_out(
                        &missing,
                        round,
                        "this site sent nothing before the round deadline",
                        effects,
                    );
                    self.fail(
                        format!("{e}; the study stops (charges stand)"),
                        Some(report),
                        effects,
                    );
                    return true;
                }
                if let Phase::Unmask { dropped, .. } = running.rounds.phase().clone() {
                    self.mark_out(
                        &dropped,
                        round,
                        "this site sent nothing before the round deadline",
                        effects,
                    );
                }
                self.deadline = now + self.round_timeout;
                true
            }
            Phase::Unmask { survivors, .. } => {
                let ready =
                    running.rounds.unmask_complete() || (expired && running.rounds.unmask_sufficient());
                if !ready {
                    if expired {
                        let report =
                            report_value(FederationReport::from_history(&config, running.rounds.history()));
                        let reason = format!(
                            "round {round}: fewer than t = {} survivors answered the unmask request in time; the study stops (charges stand)",
                            config.threshold
                        );
                        self.fail(reason, Some(report), effects);
                        return true;
                    }
                    return false;
                }
                let summed = running.rounds.finish_round().map_err(|e| e.to_string());
                let absorbed = summed.and_then(|sum| running.power.absorb(&sum).map_err(|e| e.to_string()));
                if let Err(e) = absorbed {
                    let report =
                        report_value(FederationReport::from_history(&config, running.rounds.history()));
                    self.fail(format!("round {round}: {e}"), Some(report), effects);
                    return true;
                }
                let silent: Vec<u32> = survivors
                    .iter()
                    .copied()
                    .filter(|s| !running.rounds.roster().contains(s))
                    .collect();
                effects.push(Effect::Progress { done: round });
                let report = report_value(FederationReport::from_history(&config, running.rounds.history()));
                let remaining = running.rounds.roster().len() as u32;
                let finished = matches!(running.rounds.phase(), Phase::Done);
                let output = if finished {
                    Some(running.power.finish())
                } else {
                    None
                };
                running.iterate = wire::f64s_to_b64(running.power.iterate().as_slice());
                self.mark_out(
                    &silent,
                    round,
                    "this site did not answer the unmask request in time",
                    effects,
                );
                match output {
                    Some(Ok(output)) => {
                        self.stage = Stage::Finished {
                            status: StudyStatus::Succeeded,
                            reason: None,
                        };
                        effects.push(Effect::Succeeded { output, report });
                    }
                    Some(Err(e)) => self.fail(e.to_string(), Some(report), effects),
                    None if remaining < config.threshold => {
                        let reason = format!(
                            "after round {round} only {remaining} sites remain; t = {} are needed; the study stops (charges stand)",
                            config.threshold
                        );
                        self.fail(reason, Some(report), effects);
                    }
                    None => self.deadline = now + self.round_timeout,
                }
                true
            }
            Phase::Done => false,
        }
    }
}

/// A protocol report as stored with the study.
pub(super) fn report_value<T: serde::Serialize>(report: T) -> serde_json::Value {
    serde_json::to_value(report).unwrap_or(serde_json::Value::Null)
}

fn round_error(e: crate::federation::rounds::RoundError) -> LiveError {
    use crate::federation::rounds::RoundError;
    match e {
        RoundError::AlreadyReceived { .. } => LiveError::AlreadyReceived(e.to_string()),
        RoundError::WrongLength { .. } | RoundError::Unmask(_) => LiveError::Invalid(e.to_string()),
        _ => LiveError::Conflict(e.to_string()),
    }
}
