//! The coordinator's side of the rounds of a secure-aggregation study, as a pure state machine
//! (docs/design/federation.md, "Masking round r" and "Unmasking round r"). Time is not in here:
//! whoever drives it (the HTTP hub with deadlines, or the in-process simulation) decides when a
//! phase closes.
//!
//! Round r: `Collect` (masked vectors from the roster R_r, each with its contribution
//! signature) → [`Rounds::close_collect`] fixes the survivors U_r (|U_r| ≥ t, else the round
//! fails) and the dropped D_r = R_r \ U_r → `Confirm` (the consistency round: survivors sign the
//! transcript) → [`Rounds::close_confirm`] (≥ t confirmations) → `Unmask` (survivors send their
//! shares) → [`Rounds::finish_round`] (≥ t answers) returns the exact fixed-point sum over U_r.
//! The next roster is the survivors that answered the unmask request. The signatures are
//! checked by the caller, which holds the keys (`federation::transcript`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::messages::UnmaskRequest;
use super::secagg::{Aggregator, SecAggError};

/// Where the current round stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    /// Waiting for masked vectors from the roster.
    Collect,
    /// The consistency round: waiting for the survivors' signatures of the transcript.
    Confirm { survivors: Vec<u32>, dropped: Vec<u32> },
    /// Waiting for unmasking shares from the survivors.
    Unmask { survivors: Vec<u32>, dropped: Vec<u32> },
    /// Every round is done.
    Done,
}

/// What happened in one round (returned with the result).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoundRecord {
    pub round: u32,
    /// Sites whose masked vector is in the sum.
    pub survivors: Vec<u32>,
    /// Sites of the roster that sent nothing this round (out from now on).
    pub dropped: Vec<u32>,
    /// Survivors that did not answer the unmask request (counted this round, out from the next).
    pub silent: Vec<u32>,
}

/// A message that does not fit the protocol's current state. The HTTP layer maps these to 4xx.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RoundError {
    #[error("round {got} is not the open round (round {expected} is)")]
    WrongRound { expected: u32, got: u32 },
    #[error("round {round} is not collecting {what} now")]
    WrongPhase { round: u32, what: &'static str },
    #[error("site {0} is not expected in this round")]
    NotExpected(u32),
    #[error("site {site} already sent its {what} for round {round}")]
    AlreadyReceived {
        site: u32,
        round: u32,
        what: &'static str,
    },
    #[error("a contribution holds {expected} values; got {got}")]
    WrongLength { expected: usize, got: usize },
    #[error("round {round} has {have} survivors; at least t = {need} are needed")]
    TooFewSurvivors { round: u32, have: usize, need: u32 },
    #[error("round {round} has {have} confirmations of its transcript; at least t = {need} are needed")]
    TooFewConfirmations { round: u32, have: usize, need: u32 },
    #[error("round {round} has {have} unmasking answers; at least t = {need} are needed")]
    TooFewAnswers { round: u32, have: usize, need: u32 },
    #[error("unmasking failed: {0}")]
    Unmask(#[from] SecAggError),
}

/// Everything of [`Rounds`] but the aggregator (rebuilt from the public participants): what a
/// coordinator keeps in the database to continue after a restart. The masked vectors and the
/// unmasking answers are those of the open round only; together they reveal the round's sum
/// and nothing more (docs/design/federation.md, "Durable studies").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundsState {
    pub threshold: u32,
    pub rounds: u32,
    pub len: usize,
    pub round: u32,
    pub roster: Vec<u32>,
    pub phase: Phase,
    /// Masked vectors of the open round, base64 words by site.
    pub masked: BTreeMap<u32, String>,
    pub answers: BTreeMap<u32, UnmaskRequest>,
    pub history: Vec<RoundRecord>,
    /// The first rounds' lengths, in order, before the rounds of `len` values (a private
    /// centre's sum and the clip's counts before the power rounds; empty in a study without
    /// them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leads: Vec<usize>,
    /// How states kept before `leads` existed said it: the first `lead_rounds` rounds carry
    /// `lead_len` values each. Read, never written.
    #[serde(default, skip_serializing)]
    pub lead_rounds: u32,
    #[serde(default, skip_serializing)]
    pub lead_len: usize,
    /// The open round's contribution signatures, by site (kept with the masked vectors).
    #[serde(default)]
    pub signatures: BTreeMap<u32, String>,
    /// The open round's confirmations of its transcript, by site.
    #[serde(default)]
    pub confirmations: BTreeMap<u32, String>,
}

/// Values per contribution in `round` (1-based): `leads[round − 1]`, else `len`.
fn length_of(leads: &[usize], len: usize, round: u32) -> usize {
    (round as usize)
        .checked_sub(1)
        .and_then(|i| leads.get(i))
        .copied()
        .unwrap_or(len)
}

/// The rounds of one study.
pub struct Rounds {
    aggregator: Aggregator,
    threshold: u32,
    rounds: u32,
    len: usize,
    leads: Vec<usize>,
    round: u32,
    roster: Vec<u32>,
    phase: Phase,
    masked: BTreeMap<u32, Vec<u64>>,
    signatures: BTreeMap<u32, String>,
    confirmations: BTreeMap<u32, String>,
    answers: BTreeMap<u32, UnmaskRequest>,
    history: Vec<RoundRecord>,
}

impl Rounds {
    /// Round 1 opens with `roster` (ascending, deduplicated here).
    pub fn new(
        aggregator: Aggregator,
        threshold: u32,
        rounds: u32,
        len: usize,
        mut roster: Vec<u32>,
    ) -> Rounds {
        roster.sort_unstable();
        roster.dedup();
        Rounds {
            aggregator,
            threshold,
            rounds,
            len,
            leads: Vec::new(),
            round: 1,
            roster,
            phase: Phase::Collect,
            masked: BTreeMap::new(),
            signatures: BTreeMap::new(),
            confirmations: BTreeMap::new(),
            answers: BTreeMap::new(),
            history: Vec::new(),
        }
    }

    /// The first rounds carry `leads[0]`, `leads[1]`, … values (the rest the length given to
    /// [`Rounds::new`]).
    pub fn with_leads(mut self, leads: Vec<usize>) -> Rounds {
        self.leads = leads;
        self
    }

    /// Values per contribution in `round`.
    pub fn len_of(&self, round: u32) -> usize {
        length_of(&self.leads, self.len, round)
    }

    /// The state to keep (all but the aggregator).
    pub fn state(&self) -> RoundsState {
        self.kept_state(true)
    }

    /// The state to keep, with the open round's masked vectors and unmasking answers or
    /// without them (when they are kept elsewhere: the coordinator's journal, given back on a
    /// restore by [`Rounds::resubmit`] and [`Rounds::submit_unmask`]).
    pub fn kept_state(&self, with_messages: bool) -> RoundsState {
        let (masked, signatures, confirmations, answers) = if with_messages {
            (
                self.masked
                    .iter()
                    .map(|(&site, words)| (site, super::wire::words_to_b64(words)))
                    .collect(),
                self.signatures.clone(),
                self.confirmations.clone(),
                self.answers.clone(),
            )
        } else {
            Default::default()
        };
        RoundsState {
            threshold: self.threshold,
            rounds: self.rounds,
            len: self.len,
            leads: self.leads.clone(),
            lead_rounds: 0,
            lead_len: 0,
            round: self.round,
            roster: self.roster.clone(),
            phase: self.phase.clone(),
            masked,
            answers,
            history: self.history.clone(),
            signatures,
            confirmations,
        }
    }

    /// Whether the open round has received any masked vector or unmasking answer.
    pub fn holds_messages(&self) -> bool {
        !self.masked.is_empty() || !self.confirmations.is_empty() || !self.answers.is_empty()
    }

    /// Survivors of the unmasking round whose masked vector is not here (none while
    /// collecting): a restored state lacks them until they are given back.
    pub fn missing_masked(&self) -> Vec<u32> {
        match &self.phase {
            Phase::Confirm { survivors, .. } | Phase::Unmask { survivors, .. } => survivors
                .iter()
                .copied()
                .filter(|s| !self.masked.contains_key(s))
                .collect(),
            Phase::Collect | Phase::Done => Vec::new(),
        }
    }

    /// A masked vector of the open round given back from where it was kept: as
    /// [`Rounds::submit`] while collecting, and once collection has closed, only a survivor's
    /// vector that is not here yet (the kept state of an unmasking round omits them).
    pub fn resubmit(
        &mut self,
        site: u32,
        round: u32,
        masked: Vec<u64>,
        signature: String,
    ) -> Result<(), RoundError> {
        if self.phase == Phase::Collect {
            return self.submit(site, round, masked, signature);
        }
        let expected = self.closed(round, "contributions")?.0.contains(&site);
        self.insert_masked(site, round, expected, masked, signature)
    }

    /// Keeps `site`'s masked vector for the open round: refused unless the phase `expected`
    /// it, it is not here yet and has the round's length.
    fn insert_masked(
        &mut self,
        site: u32,
        round: u32,
        expected: bool,
        masked: Vec<u64>,
        signature: String,
    ) -> Result<(), RoundError> {
        check_fresh(
            site,
            round,
            expected,
            self.masked.contains_key(&site),
            "contribution",
        )?;
        let expected_len = self.len_of(round);
        if masked.len() != expected_len {
            return Err(RoundError::WrongLength {
                expected: expected_len,
                got: masked.len(),
            });
        }
        self.masked.insert(site, masked);
        self.signatures.insert(site, signature);
        Ok(())
    }

    /// The rounds again from a kept state and the aggregator of the same participants.
    pub fn restore(aggregator: Aggregator, state: RoundsState) -> Result<Rounds, super::wire::WireError> {
        let leads = if state.leads.is_empty() {
            vec![state.lead_len; state.lead_rounds as usize]
        } else {
            state.leads
        };
        let len = length_of(&leads, state.len, state.round);
        let mut masked = BTreeMap::new();
        for (site, text) in state.masked {
            masked.insert(site, super::wire::b64_to_words(&text, len)?);
        }
        Ok(Rounds {
            aggregator,
            threshold: state.threshold,
            rounds: state.rounds,
            len: state.len,
            leads,
            round: state.round,
            roster: state.roster,
            phase: state.phase,
            masked,
            signatures: state.signatures,
            confirmations: state.confirmations,
            answers: state.answers,
            history: state.history,
        })
    }

    /// The open round (1-based; `rounds + 1` once done).
    pub fn round(&self) -> u32 {
        self.round
    }
    pub fn phase(&self) -> &Phase {
        &self.phase
    }
    /// The sites expected in the open round.
    pub fn roster(&self) -> &[u32] {
        &self.roster
    }
    pub fn history(&self) -> &[RoundRecord] {
        &self.history
    }
    /// The open round's contribution signatures, by site.
    pub fn signatures(&self) -> &BTreeMap<u32, String> {
        &self.signatures
    }
    /// The open round's confirmations of its transcript, by site.
    pub fn confirmations(&self) -> &BTreeMap<u32, String> {
        &self.confirmations
    }

    /// Whether `site` has already sent what the current phase asks of it.
    pub fn has_answered(&self, site: u32) -> bool {
        match self.phase {
            Phase::Collect => self.masked.contains_key(&site),
            Phase::Confirm { .. } => self.confirmations.contains_key(&site),
            Phase::Unmask { .. } => self.answers.contains_key(&site),
            Phase::Done => true,
        }
    }

    /// Sites the current phase still waits for.
    pub fn awaiting(&self) -> Vec<u32> {
        match &self.phase {
            Phase::Collect => self
                .roster
                .iter()
                .copied()
                .filter(|s| !self.masked.contains_key(s))
                .collect(),
            Phase::Confirm { survivors, .. } => survivors
                .iter()
                .copied()
                .filter(|s| !self.confirmations.contains_key(s))
                .collect(),
            Phase::Unmask { survivors, .. } => survivors
                .iter()
                .copied()
                .filter(|s| !self.answers.contains_key(s))
                .collect(),
            Phase::Done => Vec::new(),
        }
    }

    fn check_round(&self, round: u32) -> Result<(), RoundError> {
        if round == self.round {
            Ok(())
        } else {
            Err(RoundError::WrongRound {
                expected: self.round,
                got: round,
            })
        }
    }

    /// A masked vector from `site` for `round`, with its contribution signature (checked by
    /// the caller).
    pub fn submit(
        &mut self,
        site: u32,
        round: u32,
        masked: Vec<u64>,
        signature: String,
    ) -> Result<(), RoundError> {
        self.check_round(round)?;
        if self.phase != Phase::Collect {
            return Err(RoundError::WrongPhase {
                round,
                what: "contributions",
            });
        }
        let expected = self.roster.contains(&site);
        self.insert_masked(site, round, expected, masked, signature)
    }

    /// Every site of the roster has contributed.
    pub fn collect_complete(&self) -> bool {
        self.phase == Phase::Collect && self.masked.len() == self.roster.len()
    }

    /// Ends collection: the senders so far are the survivors. Fails with fewer than t.
    pub fn close_collect(&mut self) -> Result<(), RoundError> {
        if self.phase != Phase::Collect {
            return Err(RoundError::WrongPhase {
                round: self.round,
                what: "contributions",
            });
        }
        let survivors: Vec<u32> = self.masked.keys().copied().collect();
        if survivors.len() < self.threshold as usize {
            return Err(RoundError::TooFewSurvivors {
                round: self.round,
                have: survivors.len(),
                need: self.threshold,
            });
        }
        let dropped = self
            .roster
            .iter()
            .copied()
            .filter(|s| !self.masked.contains_key(s))
            .collect();
        self.phase = Phase::Confirm { survivors, dropped };
        Ok(())
    }

    /// A survivor's confirmation of the open round's transcript (its signature, checked by the
    /// caller).
    pub fn submit_confirm(&mut self, site: u32, round: u32, signature: String) -> Result<(), RoundError> {
        self.check_round(round)?;
        let Phase::Confirm { survivors, .. } = &self.phase else {
            return Err(RoundError::WrongPhase {
                round,
                what: "confirmations",
            });
        };
        let expected = survivors.contains(&site);
        self.insert_confirmation(site, round, expected, signature)
    }

    /// A confirmation given back from the journal on a restore: as [`Rounds::submit_confirm`],
    /// and also once the round unmasks (its snapshot omits them).
    pub fn resubmit_confirm(&mut self, site: u32, round: u32, signature: String) -> Result<(), RoundError> {
        if matches!(self.phase, Phase::Confirm { .. }) {
            return self.submit_confirm(site, round, signature);
        }
        let expected = self.unmasking(round, "confirmations")?.contains(&site);
        self.insert_confirmation(site, round, expected, signature)
    }

    fn insert_confirmation(
        &mut self,
        site: u32,
        round: u32,
        expected: bool,
        signature: String,
    ) -> Result<(), RoundError> {
        check_fresh(
            site,
            round,
            expected,
            self.confirmations.contains_key(&site),
            "confirmation",
        )?;
        self.confirmations.insert(site, signature);
        Ok(())
    }

    /// Every survivor has confirmed.
    pub fn confirm_complete(&self) -> bool {
        matches!(&self.phase, Phase::Confirm { survivors, .. } if self.confirmations.len() == survivors.len())
    }

    /// Ends the consistency round: unmasking opens with the confirmations so far (every site
    /// checks its own quorum of them). Fails with fewer than t.
    pub fn close_confirm(&mut self) -> Result<(), RoundError> {
        self.open_unmask(self.threshold as usize)
    }

    /// Moves a round in its consistency round to unmasking, given at least `need`
    /// confirmations.
    fn open_unmask(&mut self, need: usize) -> Result<(), RoundError> {
        let Phase::Confirm { survivors, dropped } = self.phase.clone() else {
            return Err(RoundError::WrongPhase {
                round: self.round,
                what: "confirmations",
            });
        };
        if self.confirmations.len() < need {
            return Err(RoundError::TooFewConfirmations {
                round: self.round,
                have: self.confirmations.len(),
                need: self.threshold,
            });
        }
        self.phase = Phase::Unmask { survivors, dropped };
        Ok(())
    }

    /// The in-process simulation's consistency round (`protocols::power::simulate`): every
    /// site and the coordinator are this one process, so there is no view to compare and
    /// nothing is signed. Never used by a live study.
    pub fn close_confirm_in_process(&mut self) -> Result<(), RoundError> {
        self.open_unmask(0)
    }

    /// The survivors and dropped sites, when `round` is the open round and its collection has
    /// closed (else `what` is refused).
    fn closed(&self, round: u32, what: &'static str) -> Result<(&[u32], &[u32]), RoundError> {
        self.check_round(round)?;
        match &self.phase {
            Phase::Confirm { survivors, dropped } | Phase::Unmask { survivors, dropped } => {
                Ok((survivors, dropped))
            }
            Phase::Collect | Phase::Done => Err(RoundError::WrongPhase { round, what }),
        }
    }

    /// The survivors, when `round` is the open round and unmasking (else `what` is refused).
    fn unmasking(&self, round: u32, what: &'static str) -> Result<&[u32], RoundError> {
        self.check_round(round)?;
        match &self.phase {
            Phase::Unmask { survivors, .. } => Ok(survivors),
            Phase::Collect | Phase::Confirm { .. } | Phase::Done => {
                Err(RoundError::WrongPhase { round, what })
            }
        }
    }

    /// A survivor's unmasking shares for `round`.
    pub fn submit_unmask(&mut self, site: u32, round: u32, answer: UnmaskRequest) -> Result<(), RoundError> {
        let expected = self.unmasking(round, "unmasking shares")?.contains(&site);
        check_fresh(
            site,
            round,
            expected,
            self.answers.contains_key(&site),
            "unmasking shares",
        )?;
        // Refuse a malformed answer now, so that it cannot spoil the round's reconstruction.
        if let Phase::Unmask { survivors, dropped } = &self.phase {
            self.aggregator
                .check_response(round, site, survivors, dropped, &answer)?;
        }
        self.answers.insert(site, answer);
        Ok(())
    }

    /// Every survivor has answered.
    pub fn unmask_complete(&self) -> bool {
        matches!(&self.phase, Phase::Unmask { survivors, .. } if self.answers.len() == survivors.len())
    }

    /// At least t survivors have answered (enough to finish once a deadline passes).
    pub fn unmask_sufficient(&self) -> bool {
        matches!(self.phase, Phase::Unmask { .. }) && self.answers.len() >= self.threshold as usize
    }

    /// Unmasks the round: the exact wrapping sum of the survivors' encodings. Opens the next
    /// round with the survivors that answered as its roster (or ends after the last round).
    pub fn finish_round(&mut self) -> Result<Vec<u64>, RoundError> {
        let Phase::Unmask { survivors, dropped } = self.phase.clone() else {
            return Err(RoundError::WrongPhase {
                round: self.round,
                what: "unmasking shares",
            });
        };
        if self.answers.len() < self.threshold as usize {
            return Err(RoundError::TooFewAnswers {
                round: self.round,
                have: self.answers.len(),
                need: self.threshold,
            });
        }
        let sum = self
            .aggregator
            .unmask_sum(self.round, &self.roster, &self.masked, &self.answers)?;
        let silent = survivors
            .iter()
            .copied()
            .filter(|s| !self.answers.contains_key(s))
            .collect();
        self.history.push(RoundRecord {
            round: self.round,
            survivors,
            dropped,
            silent,
        });
        self.roster = self.answers.keys().copied().collect();
        self.masked.clear();
        self.signatures.clear();
        self.confirmations.clear();
        self.answers.clear();
        self.round += 1;
        self.phase = if self.round > self.rounds {
            Phase::Done
        } else {
            Phase::Collect
        };
        Ok(sum)
    }
}

/// Refuses a message from a site the phase does not expect (`expected`), or a repeat
/// (`present`: its `what` for `round` is already here).
fn check_fresh(
    site: u32,
    round: u32,
    expected: bool,
    present: bool,
    what: &'static str,
) -> Result<(), RoundError> {
    if !expected {
        return Err(RoundError::NotExpected(site));
    }
    if present {
        return Err(RoundError::AlreadyReceived { site, round, what });
    }
    Ok(())
}
