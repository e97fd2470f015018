//! What a `federated_power` study's snapshot keeps of its key exchange ([`SharingKept`]) and of
//! its rounds ([`RunningKept`]), and the coordinator's state rebuilt from them. The snapshot as a
//! whole (`studies/durable.rs`) wraps them; why each part may be kept is written there. The
//! JSON is what the snapshot's stage variants held inline before they were moved here (a
//! newtype variant of a struct is written as the struct's map under the variant's name), so
//! every stored snapshot still reads.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::coordinator::{Running, Sharing, SparseGraph};
use super::state::{ClipProgress, PowerState};
use crate::algorithms::federated_power::FederatedPowerConfig;
use crate::federation::messages::UnmaskRequest;
use crate::federation::messages::{Participant, ShareBox};
use crate::federation::rounds::{Rounds, RoundsState};
use crate::federation::secagg::Aggregator;
use crate::federation::wire;
use crate::linalg::Matrix;
use crate::protocols::{Replay, SiteMessage};

/// A message a running `federated_power` study accepted in its open round, as kept in
/// `study_journal` (`Store::append_study_journal`). The journal holds the open round's masked
/// vectors and unmasking answers; the snapshots omit them ([`crate::studies::live::Live::snapshot`]), and the
/// snapshot written when the round ends (which holds none) empties the journal. Accepting a
/// message never changes the phase (the driver does, and writes a snapshot when it does), so
/// replaying the journal onto the last snapshot, in order, rebuilds exactly the state that
/// acknowledged them: a masked vector is given back also when the snapshot is of the round's
/// unmasking phase ([`Journaled::replay`]). An entry holds what no snapshot does: a masked
/// vector, or a survivor's unmasking shares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Journaled {
    Contribution {
        site: u32,
        round: u32,
        masked: String,
        /// Its contribution signature (absent in rows kept before signatures existed).
        #[serde(default)]
        signature: String,
    },
    /// A survivor's confirmation of the round's transcript.
    Confirm {
        site: u32,
        round: u32,
        signature: String,
    },
    Unmask {
        site: u32,
        round: u32,
        answer: UnmaskRequest,
    },
    /// The driver closed `round`'s collection with every roster member's vector in (nobody
    /// dropped): the consistency round opened with the survivors journaled before this row.
    /// Like [`Journaled::Unmasking`], a step the journal keeps instead of a snapshot.
    Collected { round: u32 },
    /// The driver closed `round`'s consistency round: unmasking opened with the confirmations
    /// journaled before this row. The steps the journal keeps instead of a snapshot change
    /// nothing but the phase, and every message they close on is kept before them (the rows
    /// are written in the order they were accepted, and such a row is written with every row
    /// accepted before it, before any site is shown the next task:
    /// `StudyHub::keep_in_journal`). docs/design/federation.md, "The journal".
    Unmasking { round: u32 },
    /// A site's share boxes in the key exchange. The exchange's snapshots hold neither boxes
    /// nor reveals (every accepted message rewrote the whole snapshot before: O(S²·k) bytes for
    /// the exchange); the snapshot that opens round 1 holds them all and empties the journal.
    Shares { site: u32, boxes: Vec<ShareBox> },
    /// A SecAgg+ site's share of the graph seed.
    Reveal { site: u32, reveal: String },
}

/// What a journal entry does to the study: a site's message delivered again, or a step of the
/// rounds given back.
#[derive(Debug)]
pub enum JournalStep<'a> {
    Deliver(u32, SiteMessage<'a>),
    Replay(Replay<'a>),
}

impl Journaled {
    /// The step as accepted live (and on a resume, for the messages that replay alike).
    pub fn accepted(&self) -> JournalStep<'_> {
        match self {
            Journaled::Contribution {
                site,
                round,
                masked,
                signature,
            } => JournalStep::Deliver(
                *site,
                SiteMessage::Contribute {
                    round: *round,
                    masked,
                    signature,
                },
            ),
            Journaled::Confirm {
                site,
                round,
                signature,
            } => JournalStep::Deliver(
                *site,
                SiteMessage::Confirm {
                    round: *round,
                    signature,
                },
            ),
            Journaled::Unmask { site, round, answer } => JournalStep::Deliver(
                *site,
                SiteMessage::Unmask {
                    round: *round,
                    answer: answer.clone(),
                },
            ),
            Journaled::Collected { round } => JournalStep::Replay(Replay::Collected { round: *round }),
            Journaled::Unmasking { round } => JournalStep::Replay(Replay::Unmasking { round: *round }),
            Journaled::Shares { site, boxes } => {
                JournalStep::Deliver(*site, SiteMessage::Shares { boxes: boxes.clone() })
            }
            Journaled::Reveal { site, reveal } => {
                JournalStep::Deliver(*site, SiteMessage::RevealSeed { reveal })
            }
        }
    }

    /// The step given back to a restored study (whose snapshot may be of a later phase of the
    /// same round than the one that accepted it).
    pub fn replayed(&self) -> JournalStep<'_> {
        match self {
            Journaled::Contribution {
                site,
                round,
                masked,
                signature,
            } => JournalStep::Replay(Replay::Contribution {
                site: *site,
                round: *round,
                masked,
                signature,
            }),
            Journaled::Confirm {
                site,
                round,
                signature,
            } => JournalStep::Replay(Replay::Confirm {
                site: *site,
                round: *round,
                signature,
            }),
            Journaled::Unmask { .. }
            | Journaled::Collected { .. }
            | Journaled::Unmasking { .. }
            | Journaled::Shares { .. }
            | Journaled::Reveal { .. } => self.accepted(),
        }
    }
}

/// The key exchange as a snapshot keeps it: the roster (the boxes and reveals are in the
/// journal).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SharingKept {
    pub(crate) participants: Vec<Participant>,
    /// Read from snapshots written before the journal kept the key exchange; written empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) boxes: BTreeMap<u32, Vec<ShareBox>>,
}

/// The rounds as a snapshot keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunningKept {
    pub(crate) participants: Vec<Participant>,
    pub(crate) senders: BTreeSet<u32>,
    pub(crate) rounds: Box<RoundsState>,
    /// X_{l−1}, column-major (public).
    pub(crate) iterate: KeptValues,
    /// The last unmasked sum Y_l, column-major (a DP release), as snapshots kept it before
    /// 2026-11-29 (read, never written now): only the final output needs Y_L, and it is
    /// computed in the step that absorbs round L, so no resumed study ever uses a kept one.
    /// Leaving it out takes 213 kB off each round's snapshot at d = 1000, p = 20.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) last: Option<KeptValues>,
    pub(crate) inboxes: BTreeMap<u32, Vec<ShareBox>>,
    /// The private clip's search so far (studies with a clip only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) clip: Option<ClipProgress>,
    /// SecAgg+: the graph's seed (base64); absent on the complete graph.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) graph_seed: Option<String>,
    /// The centre μ̂ (d f64, base64), once known (studies with a centre only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) center: Option<String>,
}

/// A kept matrix's values, column-major. Written as base64 of their little-endian bytes
/// ([`wire::f64s_to_b64`]): exact, and about half the bytes of JSON numbers, which matters
/// because a `federated_power` snapshot is written twice per round on the round's critical
/// path (docs/performance-federation.md). Snapshots written before that hold JSON numbers and
/// are still read.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum KeptValues {
    Base64(String),
    Numbers(Vec<f64>),
}

impl KeptValues {
    /// Exactly `len` finite values.
    fn into_values(self, len: usize) -> Result<Vec<f64>, String> {
        match self {
            KeptValues::Base64(text) => wire::b64_to_f64s(&text, len).map_err(|e| e.to_string()),
            KeptValues::Numbers(values) => Ok(values),
        }
    }
}

impl Sharing {
    /// What a snapshot keeps: the participants; boxes and reveals are in the journal
    /// (`Journaled::Shares`, `Journaled::Reveal`).
    pub(crate) fn kept(&self) -> SharingKept {
        SharingKept {
            participants: self.participants.clone(),
            boxes: BTreeMap::new(),
        }
    }

    /// The key exchange again; SecAgg+ reveals come back from the journal, and the last one
    /// fixes the graph again.
    pub(crate) fn restore(config: FederatedPowerConfig, kept: SharingKept) -> Sharing {
        Sharing {
            config,
            participants: kept.participants,
            boxes: kept.boxes,
            reveals: BTreeMap::new(),
            graph: None,
        }
    }
}

impl Running {
    /// Whether the open round's masked vectors and answers are kept in the journal rather
    /// than in the snapshot (always, but for the round of a restored snapshot that held them).
    pub(crate) fn journal_keeps_round(&self) -> bool {
        self.snapshot_holds_round != Some(self.rounds.round())
    }

    /// What a snapshot keeps; the open round's messages only `with_round` (they are otherwise
    /// in the journal).
    pub(crate) fn kept(&self, with_round: bool) -> RunningKept {
        RunningKept {
            participants: self.participants.clone(),
            senders: self.senders.clone(),
            rounds: Box::new(self.rounds.kept_state(with_round)),
            iterate: KeptValues::Base64(kept_iterate(self.power.iterate())),
            last: None,
            inboxes: self.inboxes.clone(),
            clip: self.power.clip_progress().cloned(),
            graph_seed: self.graph.as_ref().map(|g| wire::encode(&g.spec.seed)),
            center: self.power.center().map(wire::f64s_to_b64),
        }
    }

    /// The rounds again from their snapshot: the secure-aggregation rounds, power state and
    /// inboxes.
    pub(crate) fn restore(
        study: Uuid,
        config: FederatedPowerConfig,
        d: usize,
        kept: RunningKept,
    ) -> Result<Running, String> {
        let RunningKept {
            participants,
            senders,
            rounds,
            iterate,
            last,
            inboxes,
            clip,
            graph_seed,
            center,
        } = kept;
        let graph_seed = graph_seed
            .map(|text| wire::decode_key(&text).map_err(|e| format!("the kept graph seed: {e}")))
            .transpose()?;
        // A snapshot written before the journal kept the open round's messages.
        let snapshot_holds_round =
            (!rounds.masked.is_empty() || !rounds.confirmations.is_empty() || !rounds.answers.is_empty())
                .then_some(rounds.round);
        let graph = graph_seed
            .map(|seed| SparseGraph::from_seed(&config, &participants, seed))
            .transpose()
            .map_err(|e| e.to_string())?;
        let aggregator = match &graph {
            Some(graph) => Aggregator::new_sparse(
                study,
                config.threshold,
                &participants,
                config.total_rounds(),
                &graph.spec,
            ),
            None => Aggregator::new(study, config.threshold, &participants, config.total_rounds()),
        }
        .map_err(|e| e.to_string())?;
        let rounds = Rounds::restore(aggregator, *rounds).map_err(|e| e.to_string())?;
        let x = matrix(d, config.p, iterate.into_values(d * config.p)?)?;
        let last = last
            .map(|v| matrix(d, config.p, v.into_values(d * config.p)?))
            .transpose()?;
        let center = center
            .map(|text| wire::b64_to_f64s(&text, d).map_err(|e| format!("the kept centre: {e}")))
            .transpose()?;
        let power =
            PowerState::restore(config.clone(), d, x, last, (clip, center)).map_err(|e| e.to_string())?;
        let mut running = Running::new(study, config.clone(), participants, rounds, power, inboxes);
        running.senders = senders;
        running.snapshot_holds_round = snapshot_holds_round;
        running.graph = graph;
        Ok(running)
    }
}

/// X as a snapshot keeps it: f64 little-endian, column-major, base64 (what the open round's
/// task carried before studies had clip steps, whose tasks carry [c, q] instead).
fn kept_iterate(x: &Matrix) -> String {
    let bytes: Vec<u8> = x.as_slice().iter().flat_map(|v| v.to_le_bytes()).collect();
    wire::encode(&bytes)
}

fn matrix(d: usize, p: usize, values: Vec<f64>) -> Result<Matrix, String> {
    if values.len() == d * p {
        Ok(Matrix::from_vec(d, p, values))
    } else {
        Err(format!(
            "a kept matrix holds {} values, not {d}×{p}",
            values.len()
        ))
    }
}
