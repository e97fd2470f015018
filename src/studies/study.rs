//! What every live study has, whatever its protocol: who was invited and who joined, the
//! deadlines, the sites that are out, and how the study ended; the effects a transition asks
//! the hub to write, and the errors a site message can meet. The protocols' coordinators
//! (`crate::protocols::*::coordinator`) move their own state with this beside it; the driver
//! ([`super::live`]) holds both and never names a protocol's state.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::algorithms::Output;
use crate::federation::messages::JoinRequest;
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

/// How a study ended, set by the protocol that ended it (the driver then shows it).
#[derive(Debug, Clone, PartialEq)]
pub struct Ended {
    pub status: StudyStatus,
    pub reason: Option<String>,
}

/// A study's state apart from its protocol's.
pub struct Study {
    pub study: Uuid,
    pub(crate) threshold: u32,
    pub(crate) d: usize,
    pub(crate) n_sites: u32,
    pub(crate) join_deadline: Instant,
    pub(crate) round_timeout: Duration,
    pub(crate) names: BTreeMap<u32, String>,
    pub(crate) joined: BTreeMap<u32, JoinRequest>,
    /// End of the current phase (key exchange, collection or unmasking).
    pub(crate) deadline: Instant,
    /// Sites out of the study, with the reason shown to them.
    pub(crate) out: BTreeMap<u32, String>,
    /// Set when the protocol ended the study; the driver moves to its finished stage.
    pub(crate) ended: Option<Ended>,
}

impl Study {
    /// The study failed with `reason`; any charges already made stand.
    pub(crate) fn fail(
        &mut self,
        reason: String,
        report: Option<serde_json::Value>,
        effects: &mut Vec<Effect>,
    ) {
        self.ended = Some(Ended {
            status: StudyStatus::Failed,
            reason: Some(reason.clone()),
        });
        effects.push(Effect::Failed { reason, report });
    }

    /// The study succeeded with `output` and the protocol's public `report`.
    pub(crate) fn succeed(&mut self, output: Output, report: serde_json::Value, effects: &mut Vec<Effect>) {
        self.ended = Some(Ended {
            status: StudyStatus::Succeeded,
            reason: None,
        });
        effects.push(Effect::Succeeded { output, report });
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

    /// The next phase's deadline, a round timeout from `now`.
    pub(crate) fn next_phase(&mut self, now: Instant) {
        self.deadline = now + self.round_timeout;
    }
}

/// A protocol report as stored with the study.
pub(crate) fn report_value<T: serde::Serialize>(report: T) -> serde_json::Value {
    serde_json::to_value(report).unwrap_or(serde_json::Value::Null)
}
