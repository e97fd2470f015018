//! The snapshot of a study that the coordinator keeps in the database (docs/design/federation.md,
//! "Durable studies"), and the study rebuilt from it. Each protocol's stage is kept by its own
//! folder: a `federated_power` study's key exchange, rounds and journal by
//! `src/protocols/power/durable.rs`, a CAPE study's running stage by
//! `src/protocols/cape/durable.rs`, a gossip study's exchanges by
//! `src/protocols/gossip/durable.rs`, and the one dispatch over them (`PlanKept`, `StageSnapshot`)
//! is in `src/protocols/mod.rs`; this file wraps them with what every study keeps, and names no
//! protocol's state (only `federated_power`'s journal, [`Journaled`], which the hub keeps).
//!
//! What a snapshot holds, and why each part may be kept: the study's configuration, the
//! roster's names and public keys (public); the share boxes relayed between sites (sealed:
//! the coordinator cannot open them); the survivor, dropped and silent sets and the round
//! history (public in the report); the iterate (public) and the last unmasked sum (a DP
//! release); and, in the journal beside it ([`Journaled`], never in the snapshot itself but for
//! one written before the journal kept them), the masked vectors and unmasking answers of the
//! open round only, which together reveal that round's sum and nothing else — they are what
//! the coordinator holds in memory anyway, and when the round ends
//! [`crate::federation::rounds::Rounds::finish_round`] clears them and the snapshot written then
//! empties the journal. No unmasked individual site vector is ever computed, so none can be
//! kept.
//!
//! Every snapshot also lists the store writes of the step that produced it. The hub writes the
//! snapshot and those writes in one fenced transaction (`Store::save_study_step`), so a replica
//! that lost its lease applies none of them; a replica that resumes the study applies them
//! again under its own claim. Each is idempotent (a charge is made once, progress never goes
//! back, a finished study is not finished again), so this repeats nothing.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::live::{Effect, Live, LiveError, Protocol, Stage};
use crate::algorithms::Output;
use crate::federation::messages::JoinRequest;
use crate::linalg::Matrix;
use crate::protocols::PlanKept;
pub(crate) use crate::protocols::StageSnapshot;
pub use crate::protocols::power::durable::{JournalStep, Journaled};

impl Journaled {
    /// Accepts the message on `live` (the live request, or its replay on a resume).
    pub fn apply(&self, live: &mut Live) -> Result<(), LiveError> {
        take(live, self.accepted())
    }

    /// Gives the message back to a restored study (whose snapshot may be of a later phase of
    /// the same round than the one that accepted it).
    pub fn replay(&self, live: &mut Live) -> Result<(), LiveError> {
        take(live, self.replayed())
    }
}

/// Hands a journal entry's step to the study.
fn take(live: &mut Live, step: JournalStep<'_>) -> Result<(), LiveError> {
    match step {
        JournalStep::Deliver(site, message) => live.deliver(site, message),
        JournalStep::Replay(replay) => live.replay(replay),
    }
}

/// Replays `journal` (the entries' JSON, oldest first) onto a restored study. Refused when the
/// restored round still lacks a survivor's masked vector afterwards.
pub fn replay(live: &mut Live, journal: &[String]) -> Result<(), String> {
    for (i, text) in journal.iter().enumerate() {
        let entry: Journaled =
            serde_json::from_str(text).map_err(|e| format!("journal entry {}: {e}", i + 1))?;
        entry
            .replay(live)
            .map_err(|e| format!("journal entry {} does not replay: {e}", i + 1))?;
    }
    live.stage.check_replayed()
}

/// A study's protocol state as kept in `study_states`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Snapshot {
    /// The protocol's plan (`config`, `cape` or `gossip` in the JSON: [`PlanKept`]). Flattened,
    /// so only these fields are buffered while reading, and none of them holds a map keyed by
    /// site index (a buffered map cannot read its string keys as u32, see [`StageSnapshot`]).
    #[serde(flatten)]
    plan: PlanKept,
    threshold: u32,
    d: usize,
    names: BTreeMap<u32, String>,
    joined: BTreeMap<u32, JoinRequest>,
    out: BTreeMap<u32, String>,
    /// The protocol's stage, kept by its own folder (`src/protocols/<name>/durable.rs`).
    stage: StageSnapshot,
    /// The store writes of the step that wrote this snapshot (applied again on resume).
    effects: Vec<KeptEffect>,
}

/// An [`Effect`] as kept.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "effect", rename_all = "snake_case")]
enum KeptEffect {
    Start {
        roster: Vec<u32>,
    },
    Charge {
        roster: Vec<u32>,
        dropped: Vec<u32>,
    },
    Dropped {
        sites: Vec<u32>,
        round: u32,
    },
    Progress {
        done: u32,
    },
    Succeeded {
        d: usize,
        k: usize,
        basis: Vec<f64>,
        eigenvalues: Option<Vec<f64>>,
        report: serde_json::Value,
    },
    Failed {
        reason: String,
        report: Option<serde_json::Value>,
    },
}

impl From<&Effect> for KeptEffect {
    fn from(effect: &Effect) -> KeptEffect {
        match effect {
            Effect::Start { roster } => KeptEffect::Start {
                roster: roster.clone(),
            },
            Effect::Charge { roster, dropped } => KeptEffect::Charge {
                roster: roster.clone(),
                dropped: dropped.clone(),
            },
            Effect::Dropped { sites, round } => KeptEffect::Dropped {
                sites: sites.clone(),
                round: *round,
            },
            Effect::Progress { done } => KeptEffect::Progress { done: *done },
            Effect::Succeeded { output, report } => KeptEffect::Succeeded {
                d: output.basis.nrows(),
                k: output.basis.ncols(),
                basis: output.basis.as_slice().to_vec(),
                eigenvalues: output.eigenvalues.clone(),
                report: report.clone(),
            },
            Effect::Failed { reason, report } => KeptEffect::Failed {
                reason: reason.clone(),
                report: report.clone(),
            },
        }
    }
}

impl From<KeptEffect> for Effect {
    fn from(kept: KeptEffect) -> Effect {
        match kept {
            KeptEffect::Start { roster } => Effect::Start { roster },
            KeptEffect::Charge { roster, dropped } => Effect::Charge { roster, dropped },
            KeptEffect::Dropped { sites, round } => Effect::Dropped { sites, round },
            KeptEffect::Progress { done } => Effect::Progress { done },
            KeptEffect::Succeeded {
                d,
                k,
                basis,
                eigenvalues,
                report,
            } => Effect::Succeeded {
                output: Output {
                    basis: Matrix::from_vec(d, k, basis),
                    eigenvalues,
                },
                report,
            },
            KeptEffect::Failed { reason, report } => Effect::Failed { reason, report },
        }
    }
}

impl Live {
    /// Where the study stands, coarsely: a step that changes it (a phase closed, even without
    /// any store write) must be kept before any site learns of it.
    pub fn marker(&self) -> (u8, u32, u8) {
        self.stage.marker()
    }

    /// The journal row that keeps the step from the phase `before` ([`Live::marker`]) to now,
    /// when the journal keeps it instead of a snapshot: a step with no store write (the caller
    /// checks there is none) that only moves one round one phase on, from collection to its
    /// consistency round ([`Journaled::Collected`]) or from there to unmasking
    /// ([`Journaled::Unmasking`]). Writing a whole snapshot (the iterate, the last release and
    /// the roster's keys, about half a megabyte at d = 1000, p = 20) to keep that one fact cost
    /// more than the consistency round itself (docs/performance-federation.md).
    pub fn journal_step(&self, before: (u8, u32, u8)) -> Option<Journaled> {
        self.stage.journal_step(before)
    }

    /// The protocol point a snapshot of this study keeps, by name: `join` (a site has joined),
    /// `seeds` (SecAgg+: the roster is out, its graph seed not yet fixed), `keys` (the roster is out, no share boxes yet), `shares` (share boxes are arriving),
    /// `round-N` (round N collects), `confirm-N` (round N's consistency round), `unmask-N`
    /// (round N unmasks), `exchange-N` (a gossip
    /// study's exchange N collects), `done`, `finished`; None before anyone joined and for
    /// CAPE. The coordinator's test hook
    /// (`PRIVPCA_TEST_COORDINATOR_ABORT_AT`) names one of these.
    pub fn phase_label(&self) -> Option<String> {
        self.stage.phase_label(self.joined.is_empty())
    }

    /// Whether [`Live::snapshot`] holds all the journal does, so that writing it empties the
    /// journal: false while the open round's messages are kept only in the journal.
    pub fn snapshot_supersedes_journal(&self) -> bool {
        self.stage.snapshot_supersedes_journal()
    }

    /// The snapshot to keep after a step with `effects`. The open round's masked vectors and unmasking answers
    /// are not in it: the journal keeps them ([`Journaled`]).
    pub fn snapshot(&self, effects: &[Effect]) -> Snapshot {
        Snapshot {
            plan: self.protocol.kept(),
            threshold: self.threshold,
            d: self.d,
            names: self.names.clone(),
            joined: self.joined.clone(),
            out: self.out.clone(),
            stage: self.stage.kept(),
            effects: effects.iter().map(KeptEffect::from).collect(),
        }
    }

    /// The study again from its snapshot, with the store writes of its last step (to apply
    /// again). Deadlines restart: the join deadline is the study's, and an open phase gets a
    /// full `round_timeout` from now, so a resumed study loses at most one round timeout and no
    /// site is dropped for the time the coordinator was away.
    pub fn restore(
        study: Uuid,
        snapshot: Snapshot,
        join_deadline: Instant,
        round_timeout: Duration,
    ) -> Result<(Live, Vec<Effect>), String> {
        let Snapshot {
            plan,
            threshold,
            d,
            names,
            joined,
            out,
            stage,
            effects,
        } = snapshot;
        let protocol = Protocol::restore(plan)?;
        let stage = stage.restore(study, &protocol, d)?;
        let mut live = Live::new(study, protocol, threshold, d, names, join_deadline, round_timeout);
        live.joined = joined;
        live.out = out;
        if !matches!(stage, Stage::Enrolling) {
            live.deadline = Instant::now() + round_timeout;
        }
        live.stage = stage;
        Ok((live, effects.into_iter().map(Effect::from).collect()))
    }
}

#[cfg(test)]
#[path = "durable_tests.rs"]
pub(crate) mod tests;
