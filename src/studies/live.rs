//! One study's state in the coordinator's memory, and the generic part of its machine
//! (docs/design/federation.md, "Study lifecycle"): enrolment, the join checks, and the study's
//! end. Pure apart from the clock passed in: [`Live::advance`] returns the store writes the hub
//! must make.
//!
//! Everything a protocol does after enrolment is its own state machine, reached through
//! `crate::protocols::Stage`: this file never names a protocol's state. What every study has
//! whatever its protocol (who joined, deadlines, who is out) is [`Study`].

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};
use std::time::{Duration, Instant};

use uuid::Uuid;

pub use super::study::{Effect, LiveError};
use super::study::{Ended, Study};
use crate::federation::messages::{JoinRequest, SiteTask};
pub(crate) use crate::protocols::Stage;
pub use crate::protocols::{Protocol, Replay, SiteMessage};
use crate::store::StudyStatus;

/// A study's live state: what every study has ([`Study`], reached through `Deref`), its
/// protocol's plan and the stage it is at.
pub struct Live {
    pub(crate) common: Study,
    pub(crate) protocol: Protocol,
    pub(crate) stage: Stage,
}

impl Deref for Live {
    type Target = Study;
    fn deref(&self) -> &Study {
        &self.common
    }
}

impl DerefMut for Live {
    fn deref_mut(&mut self) -> &mut Study {
        &mut self.common
    }
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
            common: Study {
                study,
                n_sites: names.len() as u32,
                threshold,
                d,
                join_deadline,
                round_timeout,
                names,
                joined: BTreeMap::new(),
                deadline: join_deadline,
                out: BTreeMap::new(),
                ended: None,
            },
            protocol,
            stage: Stage::Enrolling,
        }
    }

    pub fn is_finished(&self) -> bool {
        matches!(self.stage, Stage::Finished { .. })
    }

    /// When the hub should look again even if nothing arrives.
    pub fn deadline(&self) -> Instant {
        self.common.deadline
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
        self.protocol.check_join(request)
    }

    /// A joining site's n against the sites already joined, where the protocol needs them
    /// equal (`gossip_power`: every agent holds the same records).
    pub fn check_n_samples(&self, n_samples: Option<i64>) -> Result<(), LiveError> {
        self.protocol.check_n_samples(&self.common.joined, n_samples)
    }

    /// Records a join (the store has already accepted it).
    pub fn join(&mut self, site: u32, request: JoinRequest) -> Result<(), LiveError> {
        self.check_join(site, &request)?;
        self.common.joined.insert(site, request);
        Ok(())
    }

    /// A site's message to the running protocol.
    pub fn deliver(&mut self, site: u32, message: SiteMessage<'_>) -> Result<(), LiveError> {
        let result = self.stage.deliver(&mut self.common, site, message);
        self.settle();
        result
    }

    /// A message given back from the study's journal on a restore.
    pub fn replay(&mut self, step: Replay<'_>) -> Result<(), LiveError> {
        let result = self.stage.replay(step);
        self.settle();
        result
    }

    /// Whether the protocol hands out its tasks now (a SecAgg+ key exchange waits for its
    /// graph): a change of this without a phase change still gives sites new tasks.
    pub fn tasks_ready(&self) -> bool {
        self.stage.tasks_ready()
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
            stage => stage.task(site).unwrap_or_else(|| self.wait()),
        }
    }

    fn wait(&self) -> SiteTask {
        SiteTask::Wait {
            status: self.status(),
        }
    }

    fn status(&self) -> StudyStatus {
        match &self.stage {
            Stage::Enrolling => StudyStatus::Enrolling,
            Stage::Finished { status, .. } => *status,
            _ => StudyStatus::Running,
        }
    }

    /// The study's end, once its protocol (or enrolment) ended it.
    fn settle(&mut self) {
        if let Some(Ended { status, reason }) = self.common.ended.take() {
            self.stage = Stage::Finished { status, reason };
        }
    }

    /// Moves the study on as far as the messages received and the clock allow.
    pub fn advance(&mut self, now: Instant) -> Vec<Effect> {
        let mut effects = Vec::new();
        loop {
            let moved = match &self.stage {
                Stage::Finished { .. } => false,
                Stage::Enrolling => self.advance_enrolment(now, &mut effects),
                _ => self.stage.advance(&mut self.common, now, &mut effects),
            };
            self.settle();
            if !moved {
                return effects;
            }
        }
    }

    fn advance_enrolment(&mut self, now: Instant, effects: &mut Vec<Effect>) -> bool {
        let common = &mut self.common;
        let all = common.joined.len() as u32 == common.n_sites;
        if !(all || now >= common.join_deadline) {
            return false;
        }
        let t = common.threshold;
        if (common.joined.len() as u32) < t {
            let reason = format!(
                "only {} of {} sites joined by the join deadline; t = {t} are needed. Nothing was charged.",
                common.joined.len(),
                common.n_sites
            );
            common.fail(reason, None, effects);
            return true;
        }
        let roster: Vec<u32> = common.joined.keys().copied().collect();
        let never: Vec<u32> = common
            .names
            .keys()
            .copied()
            .filter(|s| !common.joined.contains_key(s))
            .collect();
        for s in never {
            common
                .out
                .insert(s, "this site did not join before the join deadline".into());
        }
        effects.push(Effect::Start {
            roster: roster.clone(),
        });
        if let Some(stage) = self.protocol.start(common, roster, effects) {
            self.stage = stage;
        }
        self.common.next_phase(now);
        true
    }
}

#[cfg(test)]
#[path = "live_tests.rs"]
mod tests;
