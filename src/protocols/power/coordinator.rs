//! The `federated_power` coordinator (docs/design/federation.md): the key exchange (share
//! boxes relayed between the sites), then L rounds of collect (masked contributions) and unmask
//! (the survivors' shares), the sum absorbed into the public iterate after each round. The
//! generic driver (`crate::studies::live`) holds enrolment, timeouts and the study's end; this
//! file is the power method's part of the same state machine, as `cape::coordinator` and
//! `gossip::coordinator` are theirs.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use ed25519_dalek::VerifyingKey;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use uuid::Uuid;

use super::state::{FederationReport, PowerState, RoundInput};
use crate::algorithms::federated_power::FederatedPowerConfig;
use crate::federation::messages::{
    Participant, SeedReveal, ShareBox, SiteSignature, SiteTask, UnmaskRequest,
};
use crate::federation::rounds::{Phase, RoundError, Rounds};
use crate::federation::secagg::graph::choose_parameters;
use crate::federation::secagg::{Aggregator, GraphSpec, Neighbourhoods, SecAggError, seed};
use crate::federation::transcript::{self, RoundView};
use crate::federation::wire::{self, f64s_to_b64};
use crate::studies::study::{Effect, LiveError, Study, report_value};

pub(crate) struct Sharing {
    pub(crate) config: FederatedPowerConfig,
    pub(crate) participants: Vec<Participant>,
    pub(crate) boxes: BTreeMap<u32, Vec<ShareBox>>,
    /// SecAgg+: the participants' revealed shares of the graph seed (base64), each checked
    /// against its commitment when it arrived.
    pub(crate) reveals: BTreeMap<u32, String>,
    /// SecAgg+: the graph, once every participant has revealed.
    pub(crate) graph: Option<SparseGraph>,
}

/// A SecAgg+ study's graph: its spec (with the seed no party steered) and the neighbourhoods.
#[derive(Clone)]
pub(crate) struct SparseGraph {
    pub(crate) spec: GraphSpec,
    pub(crate) neighbourhoods: Neighbourhoods,
}

impl SparseGraph {
    /// The graph of `participants` from their reveals (`seed::seed_from_reveals`) and the
    /// study's stated rates, as every site derives it.
    pub(crate) fn derive(
        study: Uuid,
        config: &FederatedPowerConfig,
        participants: &[Participant],
        reveals: &[SeedReveal],
    ) -> Result<SparseGraph, SecAggError> {
        let seed = seed::seed_from_reveals(study, participants, reveals)?;
        SparseGraph::from_seed(config, participants, seed)
    }

    /// The graph of `participants` for a known seed (a restored study).
    pub(crate) fn from_seed(
        config: &FederatedPowerConfig,
        participants: &[Participant],
        seed: [u8; 32],
    ) -> Result<SparseGraph, SecAggError> {
        let plus = config
            .secagg_plus
            .ok_or_else(|| SecAggError::Rates("the study runs on the complete graph".into()))?;
        let sites = u32::try_from(participants.len()).unwrap_or(u32::MAX);
        let corruption_rate = plus.corruption_rate_for(config.sites, sites);
        let spec = GraphSpec::new(seed, sites, corruption_rate, plus.dropout_rate)?;
        let roster: Vec<u32> = participants.iter().map(|p| p.index).collect();
        let neighbourhoods = Neighbourhoods::derive(&roster, &spec)?;
        Ok(SparseGraph { spec, neighbourhoods })
    }
}

/// Reveals as relayed, in index order.
pub(crate) fn relayed_reveals(reveals: &BTreeMap<u32, String>) -> Vec<SeedReveal> {
    reveals
        .iter()
        .map(|(&site, reveal)| SeedReveal {
            site,
            reveal: reveal.clone(),
        })
        .collect()
}

pub(crate) struct Running {
    pub(crate) config: FederatedPowerConfig,
    /// The roster of the key exchange with its public keys (the aggregator is rebuilt from it).
    pub(crate) participants: Vec<Participant>,
    /// Sites whose share boxes arrived (a retried upload from one of them is already received).
    pub(crate) senders: BTreeSet<u32>,
    pub(crate) rounds: Rounds,
    pub(crate) power: PowerState,
    pub(crate) inboxes: BTreeMap<u32, Vec<ShareBox>>,
    /// The open round's iterate, base64 (the same for every site).
    pub(crate) iterate: String,
    /// Its shape (rows, cols).
    pub(crate) shape: (usize, usize),
    /// The clip norm of an open power round in a study with a clip.
    pub(crate) clip_norm: Option<f64>,
    /// The centre μ̂ the open round carries (base64), in a study with one.
    pub(crate) center: Option<String>,
    /// Its hash, as every site signs it (`transcript::iterate_hash`).
    pub(crate) iterate_hash: [u8; 32],
    /// The participants' verifying keys of their round signatures.
    pub(crate) signing_keys: BTreeMap<u32, VerifyingKey>,
    pub(crate) study: Uuid,
    /// The round whose masked vectors and answers the study's kept snapshot holds, when it was
    /// written before the journal kept them (`crate::studies::durable`): until that round ends,
    /// snapshots hold them too (and supersede the journal), so none is lost.
    pub(crate) snapshot_holds_round: Option<u32>,
    /// SecAgg+: the graph (its seed is kept; the aggregator is rebuilt from it); `None` on the
    /// complete graph.
    pub(crate) graph: Option<SparseGraph>,
}

impl Running {
    /// The rounds of the key exchange's `participants`, with the senders of share boxes and
    /// the iterate of the open round.
    pub(crate) fn new(
        study: Uuid,
        config: FederatedPowerConfig,
        participants: Vec<Participant>,
        rounds: Rounds,
        power: PowerState,
        inboxes: BTreeMap<u32, Vec<ShareBox>>,
    ) -> Running {
        // A participant kept before signatures existed has no key: its signatures never verify,
        // so a study resumed across that upgrade stops at its next round instead of going on
        // unchecked.
        let signing_keys = participants
            .iter()
            .filter_map(|p| Some((p.index, transcript::verifying_key(&p.signing_public_key).ok()?)))
            .collect();
        let mut running = Running {
            config,
            senders: participants.iter().map(|p| p.index).collect(),
            participants,
            rounds,
            power,
            inboxes,
            iterate: String::new(),
            shape: (0, 0),
            clip_norm: None,
            center: None,
            iterate_hash: [0; 32],
            signing_keys,
            study,
            snapshot_holds_round: None,
            graph: None,
        };
        running.refresh_iterate();
        running
    }

    /// Sets the open round's iterate (base64: X, or [c, q] in a clip step), its shape, clip
    /// norm and hash from the power state. The hash of a power round in a study with a clip
    /// covers c after X's bytes ([`transcript::round_bytes`]), so every site of the round signs
    /// the c it clipped at.
    pub(crate) fn refresh_iterate(&mut self) {
        let RoundInput {
            rows,
            cols,
            values,
            clip_norm,
            center,
        } = self.power.task();
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.iterate = wire::encode(&bytes);
        self.shape = (rows, cols);
        self.clip_norm = clip_norm;
        self.center = center.as_deref().map(f64s_to_b64);
        let signed = transcript::round_bytes(&bytes, clip_norm, center.as_deref());
        self.iterate_hash = transcript::iterate_hash(self.study, self.rounds.round(), rows, cols, &signed);
    }

    /// The study's public report so far.
    pub(crate) fn report(&self) -> serde_json::Value {
        report_value(
            FederationReport::from_history(&self.config, self.rounds.history())
                .with_row_map(self.power.clip_report(), self.power.center()),
        )
    }

    /// The open round's view as every site of its roster should have it.
    fn view(&self) -> RoundView<'_> {
        RoundView {
            study: self.study,
            round: self.rounds.round(),
            iterate: &self.iterate_hash,
            roster: self.rounds.roster(),
        }
    }

    /// Checks `site`'s signature of `message`.
    fn check_signature(&self, site: u32, message: &[u8], signature: &str) -> Result<(), LiveError> {
        let key = self
            .signing_keys
            .get(&site)
            .ok_or_else(|| LiveError::Invalid("this site has no signing key in the roster".into()))?;
        transcript::verify(key, site, message, signature).map_err(|e| {
            LiveError::Invalid(format!(
                "{e}: sign the round's statement over the iterate and roster you were sent"
            ))
        })
    }

    /// `round` is over and `site` was among its survivors.
    fn survived(&self, site: u32, round: u32) -> bool {
        round < self.rounds.round()
            && self
                .rounds
                .history()
                .iter()
                .any(|h| h.round == round && h.survivors.contains(&site))
    }

    /// A retried confirmation: the round moved on with this site among its survivors, or it
    /// unmasks and this site's confirmation is in.
    pub(crate) fn already_confirmed(&self, site: u32, round: u32) -> bool {
        let current = self.rounds.round();
        let past = self.survived(site, round);
        let unmasking = round == current
            && matches!(self.rounds.phase(), Phase::Unmask { .. })
            && self.rounds.confirmations().contains_key(&site);
        past || unmasking
    }

    /// A retried contribution: the round moved on with this site among its survivors, or the
    /// round is unmasking with it among them.
    pub(crate) fn already_contributed(&self, site: u32, round: u32) -> bool {
        let current = self.rounds.round();
        let past = self.survived(site, round);
        let closed = round == current
            && matches!(self.rounds.phase(),
                Phase::Confirm { survivors, .. } | Phase::Unmask { survivors, .. } if survivors.contains(&site));
        past || closed
    }

    /// A retried unmask answer: the round is done and this site answered it.
    pub(crate) fn already_unmasked(&self, site: u32, round: u32) -> bool {
        round < self.rounds.round()
            && self
                .rounds
                .history()
                .iter()
                .any(|h| h.round == round && h.survivors.contains(&site) && !h.silent.contains(&site))
    }
}

impl Sharing {
    fn is_participant(&self, site: u32) -> bool {
        self.participants.iter().any(|p| p.index == site)
    }

    /// The key exchange's task for `site` (`None`: wait). Under SecAgg+ a site first reveals
    /// its share of the graph seed, and deals once every participant has.
    pub(crate) fn task(&self, site: u32) -> Option<SiteTask> {
        if !self.is_participant(site) || self.boxes.contains_key(&site) {
            return None;
        }
        if self.config.secagg_plus.is_none() {
            return Some(SiteTask::ShareKeys {
                participants: self.participants.clone(),
                seed_reveals: Vec::new(),
            });
        }
        if !self.reveals.contains_key(&site) {
            return Some(SiteTask::RevealSeed {
                participants: self.participants.clone(),
            });
        }
        // The roster went out with the reveal task, and the site deals for the one it revealed
        // for: it is not sent again (S·(L + 3) keys, the largest message of the study).
        self.graph.as_ref().map(|_| SiteTask::ShareKeys {
            participants: Vec::new(),
            seed_reveals: relayed_reveals(&self.reveals),
        })
    }

    /// Every box by recipient: what each site receives with its first round.
    fn inboxes(&self) -> BTreeMap<u32, Vec<ShareBox>> {
        let mut inboxes: BTreeMap<u32, Vec<ShareBox>> = BTreeMap::new();
        for b in self.boxes.values().flatten() {
            inboxes.entry(b.to).or_default().push(b.clone());
        }
        inboxes
    }

    /// The rounds' aggregator (on the graph under SecAgg+) and the power state with its first
    /// iterate, from the coordinator's own OS-seeded generator (public randomness).
    fn setup(
        &self,
        study: Uuid,
        d: usize,
        pooled_n: Option<u64>,
    ) -> Result<(Aggregator, PowerState), String> {
        let (t, rounds) = (self.config.threshold, self.config.total_rounds());
        let aggregator = match &self.graph {
            Some(graph) => Aggregator::new_sparse(study, t, &self.participants, rounds, &graph.spec),
            None => Aggregator::new(study, t, &self.participants, rounds),
        }
        .map_err(|e| e.to_string())?;
        let mut rng = ChaCha20Rng::from_os_rng();
        let power = PowerState::new(self.config.clone(), d, pooled_n, &mut rng).map_err(|e| e.to_string())?;
        Ok((aggregator, power))
    }

    /// The sites `site` must send a share box to: every participant, or its graph neighbours.
    fn recipients(&self, site: u32) -> Result<BTreeSet<u32>, LiveError> {
        match (&self.config.secagg_plus, &self.graph) {
            (None, _) => Ok(self.participants.iter().map(|p| p.index).collect()),
            (Some(_), Some(graph)) => Ok(graph.neighbourhoods.neighbours(site).into_iter().collect()),
            (Some(_), None) => Err(LiveError::Conflict(
                "the graph seed is not fixed yet: every participant must reveal its share first".into(),
            )),
        }
    }
}

impl Running {
    /// The contribution signatures `site` checks before it confirms or reveals: every
    /// survivor's on the complete graph; under SecAgg+ its graph neighbours' only, the sites
    /// whose secrets it holds shares of (docs/design/federation.md, "Live SecAgg+").
    fn contributions_for(&self, site: u32, survivors: &[u32]) -> Vec<SiteSignature> {
        match &self.graph {
            None => SiteSignature::relay(self.rounds.signatures(), Some(survivors)),
            Some(graph) => {
                let linked: Vec<u32> = survivors
                    .iter()
                    .copied()
                    .filter(|&u| graph.neighbourhoods.are_neighbours(site, u))
                    .collect();
                SiteSignature::relay(self.rounds.signatures(), Some(&linked))
            }
        }
    }

    /// The open round's task for `site` (`None`: wait).
    pub(crate) fn task(&self, site: u32) -> Option<SiteTask> {
        let rounds = &self.rounds;
        if rounds.has_answered(site) {
            return None;
        }
        match rounds.phase() {
            Phase::Collect if rounds.roster().contains(&site) => Some(SiteTask::Contribute {
                round: rounds.round(),
                rounds: self.config.total_rounds(),
                roster: rounds.roster().to_vec(),
                iterate: self.iterate.clone(),
                rows: self.shape.0,
                cols: self.shape.1,
                clip_norm: self.clip_norm,
                center: self.center.clone(),
                inbox: if rounds.round() == 1 {
                    self.inboxes.get(&site).cloned().unwrap_or_default()
                } else {
                    Vec::new()
                },
            }),
            Phase::Confirm { survivors, dropped } if survivors.contains(&site) => Some(SiteTask::Confirm {
                round: rounds.round(),
                survivors: survivors.clone(),
                dropped: dropped.clone(),
                contributions: self.contributions_for(site, survivors),
            }),
            // A site whose confirmation is in has checked (and kept) the transcript: the
            // contribution signatures are not sent to it again.
            Phase::Unmask { survivors, dropped } if survivors.contains(&site) => Some(SiteTask::Unmask {
                round: rounds.round(),
                survivors: survivors.clone(),
                dropped: dropped.clone(),
                contributions: if rounds.confirmations().contains_key(&site) {
                    Vec::new()
                } else {
                    self.contributions_for(site, survivors)
                },
                confirmations: SiteSignature::relay(rounds.confirmations(), Some(survivors)),
            }),
            _ => None,
        }
    }
}

impl Sharing {
    /// Enrolment is over: the key exchange opens for `roster` (None: the study failed).
    pub(crate) fn open(
        study: &mut Study,
        config: FederatedPowerConfig,
        roster: &[u32],
        effects: &mut Vec<Effect>,
    ) -> Option<Box<Sharing>> {
        // A SecAgg+ roster must have a graph (k and t for its S) before anyone reveals anything.
        if let Some(plus) = config.secagg_plus {
            let sites = roster.len() as u32;
            let rate = plus.corruption_rate_for(config.sites, sites);
            if let Err(e) = choose_parameters(sites, rate, plus.dropout_rate) {
                let reason = format!(
                    "{sites} sites joined, and SecAgg+ has no graph for them at corruption rate {rate:.3} \
                     (the stated rate of the {} invited) and dropout rate {}: {e}. Nothing was charged.",
                    config.sites, plus.dropout_rate
                );
                study.fail(reason, None, effects);
                return None;
            }
            // Every site refuses a roster whose sum could hold fewer honest releases than t
            // (`power::check_honest_survivors`): say so once, before anyone reveals anything.
            let honest = plus.least_honest_survivors(config.sites, sites);
            if honest < config.threshold {
                let reason = format!(
                    "{sites} sites joined: less ⌈dropout_rate·S⌉ = {} out and the {} corrupt sites assumed of the \
                     {} invited, as few as {honest} honest releases could be summed, below the threshold {}; every \
                     site's noise is calibrated for {} of them. Nothing was charged.",
                    plus.max_out(sites as usize),
                    plus.corrupt_sites(config.sites),
                    config.sites,
                    config.threshold,
                    config.threshold
                );
                study.fail(reason, None, effects);
                return None;
            }
        }
        let participants = roster
            .iter()
            .map(|&i| {
                let j = &study.joined[&i];
                Participant {
                    index: i,
                    name: study.names.get(&i).cloned().unwrap_or_default(),
                    encryption_public_key: j.encryption_public_key.clone().unwrap_or_default(),
                    mask_public_keys: j.mask_public_keys.clone(),
                    signing_public_key: j.signing_public_key.clone().unwrap_or_default(),
                    seed_commitment: j.seed_commitment.clone().unwrap_or_default(),
                }
            })
            .collect();
        Some(Box::new(Sharing {
            config,
            participants,
            boxes: BTreeMap::new(),
            reveals: BTreeMap::new(),
            graph: None,
        }))
    }

    /// Whether the key exchange hands out its share tasks (a SecAgg+ study's graph is fixed):
    /// a change of this without a phase change still gives sites new tasks.
    pub(crate) fn tasks_ready(&self) -> bool {
        self.config.secagg_plus.is_none() || self.graph.is_some()
    }

    /// A SecAgg+ site's share of the graph seed, checked against the commitment the roster
    /// lists for it.
    pub(crate) fn reveal_seed(&mut self, live: &mut Study, site: u32, reveal: &str) -> Result<(), LiveError> {
        let study = live.study;
        let sharing = self;
        if sharing.config.secagg_plus.is_none() {
            return Err(LiveError::Conflict(
                "this study runs on the complete graph: there is no graph seed to reveal".into(),
            ));
        }
        let Some(participant) = sharing.participants.iter().find(|p| p.index == site) else {
            return Err(LiveError::Conflict("this site is not a participant".into()));
        };
        if let Some(kept) = sharing.reveals.get(&site) {
            return Err(if kept == reveal {
                LiveError::AlreadyReceived("this site's share of the graph seed already arrived".into())
            } else {
                LiveError::Conflict("this site already revealed another share of the graph seed".into())
            });
        }
        seed::open(study, participant, reveal).map_err(|e| LiveError::Invalid(e.to_string()))?;
        sharing.reveals.insert(site, reveal.to_owned());
        // The last reveal fixes the graph at once (a function of the reveals, so the journal's
        // replay fixes the same one before it gives back any share box); a graph that cannot be
        // derived fails the study when it next advances.
        if sharing.reveals.len() == sharing.participants.len() {
            let reveals = relayed_reveals(&sharing.reveals);
            if let Ok(graph) = SparseGraph::derive(study, &sharing.config, &sharing.participants, &reveals) {
                sharing.graph = Some(graph);
                live.next_phase(Instant::now());
            }
        }
        Ok(())
    }

    /// A site's share boxes.
    pub(crate) fn shares(&mut self, site: u32, boxes: Vec<ShareBox>) -> Result<(), LiveError> {
        let sharing = self;
        if !sharing.is_participant(site) {
            return Err(LiveError::Conflict("this site is not a participant".into()));
        }
        if sharing.boxes.contains_key(&site) {
            return Err(LiveError::AlreadyReceived(
                "this site's share boxes already arrived".into(),
            ));
        }
        let expected = sharing.recipients(site)?;
        let to: BTreeSet<u32> = boxes.iter().map(|b| b.to).collect();
        if boxes.len() != expected.len() || to != expected {
            let whom = if sharing.config.secagg_plus.is_some() {
                "graph neighbour"
            } else {
                "participant"
            };
            return Err(LiveError::Invalid(format!(
                "send exactly one box to each {whom} {expected:?}"
            )));
        }
        if let Some(b) = boxes.iter().find(|b| b.from != site) {
            return Err(LiveError::Invalid(format!(
                "a box says it is from site {}, not this site",
                b.from
            )));
        }
        // A box carries 2·(T + L) shares of 33 bytes (T clip steps) plus nonce and tag; refuse anything far larger.
        let limit = 4 * (2 * 33 * sharing.config.total_rounds() as usize + 64);
        if boxes
            .iter()
            .any(|b| b.ciphertext.len() > limit || wire::decode(&b.ciphertext).is_err())
        {
            return Err(LiveError::Invalid("a share box is malformed or too large".into()));
        }
        sharing.boxes.insert(site, boxes);
        Ok(())
    }

    /// A SecAgg+ study's graph: fixed once every participant revealed its share of the seed;
    /// a missing reveal at the deadline fails the study before anything is charged. Returns
    /// whether the study moved; `None` when the graph is fixed (or the study is complete-graph).
    fn advance_reveals(&mut self, live: &mut Study, now: Instant, effects: &mut Vec<Effect>) -> Option<bool> {
        let sharing = self;
        if sharing.config.secagg_plus.is_none() || sharing.graph.is_some() {
            return None;
        }
        if sharing.reveals.len() < sharing.participants.len() {
            if now < live.deadline {
                return Some(false);
            }
            let missing: Vec<u32> = sharing
                .participants
                .iter()
                .map(|p| p.index)
                .filter(|i| !sharing.reveals.contains_key(i))
                .collect();
            let reason = format!(
                "sites {missing:?} did not reveal their share of the graph seed in time; SecAgg+ needs \
                 every participant's. Nothing was charged."
            );
            live.fail(reason, None, effects);
            return Some(true);
        }
        let reveals = relayed_reveals(&sharing.reveals);
        match SparseGraph::derive(live.study, &sharing.config, &sharing.participants, &reveals) {
            Ok(graph) => {
                sharing.graph = Some(graph);
                live.next_phase(now);
            }
            Err(e) => live.fail(
                format!("the SecAgg+ graph could not be fixed: {e}. Nothing was charged."),
                None,
                effects,
            ),
        }
        Some(true)
    }

    /// The key exchange: closed once every participant sent its boxes or the deadline passed;
    /// returns whether the study moved, and round 1's state when the rounds open.
    pub(crate) fn advance(
        &mut self,
        live: &mut Study,
        now: Instant,
        effects: &mut Vec<Effect>,
    ) -> (bool, Option<Box<Running>>) {
        if let Some(moved) = self.advance_reveals(live, now, effects) {
            return (moved, None);
        }
        let sharing = &*self;
        let all = sharing.boxes.len() == sharing.participants.len();
        if !(all || now >= live.deadline) {
            return (false, None);
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
            live.fail(reason, None, effects);
            return (true, None);
        }
        let participants = sharing.participants.clone();
        let inboxes = sharing.inboxes();
        // The records the key exchange's sites reported at join (public under replace_one).
        let pooled_n = senders
            .iter()
            .map(|s| live.joined.get(s).and_then(|j| j.n_samples))
            .sum::<Option<u64>>();
        let graph = sharing.graph.clone();
        let (aggregator, power) = match sharing.setup(live.study, live.d, pooled_n) {
            Ok(parts) => parts,
            Err(e) => {
                live.fail(
                    format!("the key exchange could not be completed: {e}"),
                    None,
                    effects,
                );
                return (true, None);
            }
        };
        let senders_set: BTreeSet<u32> = senders.iter().copied().collect();
        let rounds = Rounds::new(aggregator, t, config.total_rounds(), power.len(), senders.clone())
            .with_leads(config.lead_lengths(live.d));
        for &s in &silent {
            live.out
                .insert(s, "this site did not complete the key exchange in time".into());
        }
        effects.push(Effect::Charge {
            roster: senders,
            dropped: silent,
        });
        let mut running = Running::new(live.study, config, participants, rounds, power, inboxes);
        running.senders = senders_set;
        running.graph = graph;
        live.next_phase(now);
        (true, Some(Box::new(running)))
    }
}

impl Running {
    /// A repeated reveal of the graph seed once the key exchange is over: the reveals are not
    /// kept past it, and the commitment binds the site to one share, so a repeat that opens it
    /// is the share that arrived.
    pub(crate) fn repeated_reveal(&self, study: Uuid, site: u32, reveal: &str) -> LiveError {
        let opens = self
            .participants
            .iter()
            .find(|p| p.index == site)
            .is_some_and(|p| seed::open(study, p, reveal).is_ok());
        if opens {
            LiveError::AlreadyReceived("this site's share of the graph seed already arrived".into())
        } else {
            LiveError::Conflict("this site already revealed another share of the graph seed".into())
        }
    }

    /// A masked contribution for `round`, with the site's signature of what it masked: the
    /// study, the round, the iterate it was sent and the roster (checked here, so a site that
    /// saw another iterate or roster is told at once, and checked again by every survivor
    /// before it reveals a share).
    pub(crate) fn contribute(
        &mut self,
        site: u32,
        round: u32,
        masked: &str,
        signature: &str,
    ) -> Result<(), LiveError> {
        let running = self;
        if running.already_contributed(site, round) {
            return Err(LiveError::AlreadyReceived(format!(
                "this site's contribution to round {round} already arrived"
            )));
        }
        let len = running.rounds.len_of(round);
        let words = wire::b64_to_words(masked, len).map_err(|e| LiveError::Invalid(e.to_string()))?;
        if round == running.rounds.round()
            && running.rounds.phase() == &Phase::Collect
            && running.rounds.roster().contains(&site)
        {
            let message = transcript::contribution_message(&running.view());
            running.check_signature(site, &message, signature)?;
        }
        running
            .rounds
            .submit(site, round, words, signature.to_owned())
            .map_err(round_error)
    }

    /// A survivor's confirmation of `round`'s transcript (the consistency round).
    pub(crate) fn confirm(&mut self, site: u32, round: u32, signature: &str) -> Result<(), LiveError> {
        let running = self;
        if running.already_confirmed(site, round) {
            return Err(LiveError::AlreadyReceived(format!(
                "this site's confirmation of round {round} already arrived"
            )));
        }
        if round == running.rounds.round()
            && let Phase::Confirm { survivors, dropped } = running.rounds.phase()
            && survivors.contains(&site)
        {
            let message = transcript::confirmation_message(&running.view(), survivors, dropped);
            running.check_signature(site, &message, signature)?;
        }
        running
            .rounds
            .submit_confirm(site, round, signature.to_owned())
            .map_err(round_error)
    }

    /// A confirmation given back from the study's journal on a restore (also once the round
    /// unmasks: the snapshot of an unmasking round omits them).
    pub(crate) fn replay_confirm(&mut self, site: u32, round: u32, signature: &str) -> Result<(), LiveError> {
        let running = self;
        running
            .rounds
            .resubmit_confirm(site, round, signature.to_owned())
            .map_err(round_error)
    }

    /// The close of `round`'s collection given back from the study's journal
    /// (`Journaled::Collected`, written only when nobody dropped): the consistency round opens
    /// with the vectors replayed before it as survivors, as it did live. Nothing to do when the
    /// restored snapshot is already past that point of the round.
    pub(crate) fn replay_collected(&mut self, round: u32) -> Result<(), LiveError> {
        let running = self;
        match running.rounds.phase() {
            Phase::Collect if running.rounds.round() == round => {
                running.rounds.close_collect().map_err(round_error)?;
                match running.rounds.phase() {
                    Phase::Confirm { dropped, .. } if dropped.is_empty() => Ok(()),
                    _ => Err(LiveError::Conflict(format!(
                        "round {round} was closed with every vector in, but the journal lacks some"
                    ))),
                }
            }
            Phase::Confirm { .. } | Phase::Unmask { .. } if running.rounds.round() == round => Ok(()),
            _ => Err(LiveError::Conflict(format!(
                "round {round}'s collection is not open (the study is at round {})",
                running.rounds.round()
            ))),
        }
    }

    /// The close of `round`'s consistency round given back from the study's journal
    /// (`Journaled::Unmasking`): unmasking opens with the confirmations replayed before it, as
    /// it did live. Nothing to do when the restored snapshot is already of that round's
    /// unmasking.
    pub(crate) fn replay_unmasking(&mut self, round: u32) -> Result<(), LiveError> {
        let running = self;
        match running.rounds.phase() {
            Phase::Confirm { .. } if running.rounds.round() == round => {
                running.rounds.close_confirm().map_err(round_error)
            }
            Phase::Unmask { .. } if running.rounds.round() == round => Ok(()),
            _ => Err(LiveError::Conflict(format!(
                "round {round}'s consistency round is not open (the study is at round {})",
                running.rounds.round()
            ))),
        }
    }

    /// A masked contribution for `round` given back from the study's journal on a restore: as
    /// [`Running::contribute`], and also once collection has closed (the snapshot of an
    /// unmasking round omits the survivors' vectors).
    pub(crate) fn replay_contribution(
        &mut self,
        site: u32,
        round: u32,
        masked: &str,
        signature: &str,
    ) -> Result<(), LiveError> {
        let running = self;
        let len = running.rounds.len_of(round);
        let words = wire::b64_to_words(masked, len).map_err(|e| LiveError::Invalid(e.to_string()))?;
        running
            .rounds
            .resubmit(site, round, words, signature.to_owned())
            .map_err(round_error)
    }

    /// A survivor's unmasking shares for `round`.
    pub(crate) fn unmask(&mut self, site: u32, round: u32, answer: UnmaskRequest) -> Result<(), LiveError> {
        let running = self;
        if running.already_unmasked(site, round) {
            return Err(LiveError::AlreadyReceived(format!(
                "this site's unmasking shares for round {round} already arrived"
            )));
        }
        // Under SecAgg+ a survivor holds shares of its neighbours only: the aggregator checks
        // its answer against the graph when the round's sets are known (`Rounds::submit_unmask`).
        if let Phase::Unmask { survivors, dropped } = running.rounds.phase()
            && running.graph.is_none()
        {
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

    /// The rounds: each phase closes when complete or at its deadline.
    pub(crate) fn advance(&mut self, live: &mut Study, now: Instant, effects: &mut Vec<Effect>) -> bool {
        let expired = now >= live.deadline;
        match self.rounds.phase().clone() {
            Phase::Collect => self.advance_collect(live, now, expired, effects),
            Phase::Confirm { .. } => self.advance_confirm(live, now, expired, effects),
            Phase::Unmask { survivors, .. } => self.advance_unmask(live, now, expired, &survivors, effects),
            Phase::Done => false,
        }
    }

    /// The unmasking phase of a round: finished when every survivor answered, or at the
    /// deadline with at least t answers (fewer fail the study; charges stand). The sum is
    /// absorbed into the iterate, survivors that did not answer are marked out, and the study
    /// succeeds after its last round or goes on while t sites remain.
    fn advance_unmask(
        &mut self,
        live: &mut Study,
        now: Instant,
        expired: bool,
        survivors: &[u32],
        effects: &mut Vec<Effect>,
    ) -> bool {
        // The survivors' pooled public n (replace_one): what a private centre divides by.
        let survivors_n = survivors
            .iter()
            .map(|s| live.joined.get(s).and_then(|j| j.n_samples))
            .sum::<Option<u64>>();
        let running = self;
        let round = running.rounds.round();
        let threshold = running.config.threshold;
        let ready = running.rounds.unmask_complete() || (expired && running.rounds.unmask_sufficient());
        if !ready {
            if expired {
                let report = running.report();
                let reason = format!(
                    "round {round}: fewer than t = {threshold} survivors answered the unmask request in time; the study stops (charges stand)"
                );
                live.fail(reason, Some(report), effects);
                return true;
            }
            return false;
        }
        let summed = running.rounds.finish_round().map_err(|e| e.to_string());
        // Every survivor of round 1 was handed its inbox with the round's task and keeps it;
        // the boxes (S·k of them) need not ride along in every later snapshot.
        if round == 1 {
            running.inboxes.clear();
        }
        let absorbed =
            summed.and_then(|sum| running.power.absorb(&sum, survivors_n).map_err(|e| e.to_string()));
        if let Err(e) = absorbed {
            let report = running.report();
            live.fail(format!("round {round}: {e}"), Some(report), effects);
            return true;
        }
        let silent: Vec<u32> = survivors
            .iter()
            .copied()
            .filter(|s| !running.rounds.roster().contains(s))
            .collect();
        effects.push(Effect::Progress { done: round });
        let report = running.report();
        let remaining = running.rounds.roster().len() as u32;
        let output = matches!(running.rounds.phase(), Phase::Done).then(|| running.power.finish());
        running.refresh_iterate();
        let why = "this site did not answer the unmask request in time";
        live.mark_out(&silent, round, why, effects);
        match output {
            Some(Ok(output)) => live.succeed(output, report, effects),
            Some(Err(e)) => live.fail(e.to_string(), Some(report), effects),
            None if remaining < threshold => {
                let reason = format!(
                    "after round {round} only {remaining} sites remain; t = {threshold} are needed; the study stops (charges stand)"
                );
                live.fail(reason, Some(report), effects);
            }
            None => live.next_phase(now),
        }
        true
    }

    /// The collect phase of a round: closed once every site of the roster sent its
    /// contribution or the deadline passed; the sites that sent nothing are marked out, and
    /// too few contributions fail the study (charges stand).
    fn advance_collect(
        &mut self,
        live: &mut Study,
        now: Instant,
        expired: bool,
        effects: &mut Vec<Effect>,
    ) -> bool {
        let running = self;
        let round = running.rounds.round();
        if !(running.rounds.collect_complete() || expired) {
            return false;
        }
        if let Err(e) = running.rounds.close_collect() {
            let report = running.report();
            let missing = running.rounds.awaiting();
            live.mark_out(
                &missing,
                round,
                "this site sent nothing before the round deadline",
                effects,
            );
            live.fail(
                format!("{e}; the study stops (charges stand)"),
                Some(report),
                effects,
            );
            return true;
        }
        if let Phase::Confirm { dropped, survivors } = running.rounds.phase().clone() {
            let too_many = running.config.secagg_plus.and_then(|plus| {
                let fixed = running.participants.len();
                let out = fixed - survivors.len().min(fixed);
                (out > plus.max_out(fixed)).then(|| (out, fixed, plus.max_out(fixed)))
            });
            let report = running.report();
            live.mark_out(
                &dropped,
                round,
                "this site sent nothing before the round deadline",
                effects,
            );
            // The sites would refuse the transcript (they check the same bound): stop here.
            if let Some((out, fixed, allowed)) = too_many {
                let reason = format!(
                    "round {round}: {out} of the {fixed} sites are out, more than SecAgg+'s dropout rate allows \
                     ({allowed}); the study stops (charges stand)"
                );
                live.fail(reason, Some(report), effects);
                return true;
            }
        }
        live.next_phase(now);
        true
    }

    /// The consistency round closes when every survivor confirmed, or at its deadline with at
    /// least t confirmations (each site checks its own quorum of them before it reveals
    /// anything); fewer fail the study.
    fn advance_confirm(
        &mut self,
        live: &mut Study,
        now: Instant,
        expired: bool,
        effects: &mut Vec<Effect>,
    ) -> bool {
        let running = self;
        if !(running.rounds.confirm_complete() || expired) {
            return false;
        }
        if let Err(e) = running.rounds.close_confirm() {
            let report = running.report();
            live.fail(
                format!("{e}; the study stops (charges stand)"),
                Some(report),
                effects,
            );
            return true;
        }
        live.next_phase(now);
        true
    }
}

fn round_error(e: crate::federation::rounds::RoundError) -> LiveError {
    match e {
        RoundError::AlreadyReceived { .. } => LiveError::AlreadyReceived(e.to_string()),
        RoundError::WrongLength { .. } | RoundError::Unmask(_) => LiveError::Invalid(e.to_string()),
        _ => LiveError::Conflict(e.to_string()),
    }
}
