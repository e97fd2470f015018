//! The `federated_power` protocol at a site, after joining (docs/design/federation.md "Site
//! client"): share the keys with the fixed roster, contribute each round's masked vector (the
//! same one again if asked again), and answer each round's unmask request once.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use ed25519_dalek::VerifyingKey;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};

use super::consistency::OwnRound;
use super::state::{SiteComputation, clip_rows};
use crate::algorithms::federated_power::RoundKind;
use crate::federation::messages::{
    ConfirmRequest, ContributionRequest, Participant, SeedReveal, SeedRevealRequest, ShareBox, SharesRequest,
    SiteSignature, SiteStudyView, SiteTask, UnmaskRequest,
};
use crate::federation::secagg::{GraphSpec, Neighbourhoods, SiteSession, seed};
use crate::federation::transcript::{self, RoundView, SiteSigner};
use crate::federation::wire;
use crate::federation::wire::{b64_to_f64s, words_to_b64};
use crate::linalg::Matrix;
use crate::protocols::SiteRun;
use crate::site::args::SiteArgs;
use crate::site::http::{Posted, SiteClient};
use crate::site::ledger::{charge_ledger, keep, ledger_failure, parse_kept, signer_of, start_session};
use crate::site::prepare::{JoinKeys, check_threshold, join};
use crate::site::prepared::Prepared;
use crate::site::roster::{Member, RosterGuard, describe};
use crate::site::run::{before_resend, finished, next_task, note_wait};
use crate::site::witness::StudyWitness;
use crate::site::{Failure, progress};
use crate::store::{LocalBudget, SiteMessageKind, SiteStatus, Store, StudyStatus};

/// The key shares as kept in the ledger: the roster they were dealt for (with its graph-seed
/// reveals under SecAgg+) and what was sent.
#[derive(Serialize, Deserialize)]
struct KeptShares {
    participants: Vec<Participant>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    seed_reveals: Vec<SeedReveal>,
    request: SharesRequest,
}

/// SecAgg+: the roster this site revealed its share of the graph seed for (it reveals for one
/// roster only).
#[derive(Serialize, Deserialize, PartialEq)]
struct KeptReveal {
    participants: Vec<Participant>,
}

/// SecAgg+: this site's secret share of the graph seed, r_i, from stream 3 of the session's
/// kept seed (keys use stream 0, the shares' randomness 1, the signing key 2), so that a
/// restarted site reveals the value it committed to.
fn seed_share(secret_seed: [u8; 32]) -> [u8; 32] {
    use rand::RngCore;
    let mut rng = ChaCha20Rng::from_seed(secret_seed);
    rng.set_stream(3);
    let mut share = [0u8; 32];
    rng.fill_bytes(&mut share);
    share
}

/// A round's contribution as kept: the roster it was masked with, the hash of the iterate it
/// multiplied (hex) and what was sent.
#[derive(Serialize, Deserialize)]
struct KeptContribution {
    roster: Vec<u32>,
    #[serde(default)]
    iterate_hash: Option<String>,
    request: ContributionRequest,
}

/// The one transcript of a round this site accepted: the sets, and its signature of them.
#[derive(Serialize, Deserialize, PartialEq)]
struct KeptConfirm {
    survivors: Vec<u32>,
    dropped: Vec<u32>,
    signature: String,
}

/// A round's unmask answer as kept: the sets it answered and what was sent.
#[derive(Serialize, Deserialize)]
struct KeptUnmask {
    survivors: Vec<u32>,
    dropped: Vec<u32>,
    request: UnmaskRequest,
}

/// This site's entry in a `federated_power` roster, as it published it (with its graph-seed
/// commitment under SecAgg+).
fn me_as_participant(
    view: &SiteStudyView,
    session: &SiteSession,
    signer: &SiteSigner,
    commitment: Option<&str>,
) -> Member {
    let mut keys = vec![session.encryption_public_key()];
    keys.extend(session.mask_public_keys());
    keys.push(signer.public_key());
    keys.extend(commitment.map(str::to_owned));
    Member {
        index: view.site_index,
        name: view.site_name.clone(),
        keys,
    }
}

/// What the site has sent so far, so that a repeated task gets the same answer.
#[derive(Default)]
struct Sent {
    /// SecAgg+: the roster this site revealed its share of the graph seed for.
    revealed_for: Option<Vec<Participant>>,
    shares: Option<SharesRequest>,
    inbox_received: bool,
    charged: bool,
    /// The last round contributed and what was sent for it.
    contribution: Option<(u32, ContributionRequest)>,
    rosters: BTreeMap<u32, Vec<u32>>,
    /// The hash of the iterate each round's contribution multiplied.
    iterates: BTreeMap<u32, [u8; 32]>,
    /// The one transcript accepted per round.
    confirms: BTreeMap<u32, KeptConfirm>,
    unmasks: BTreeMap<u32, (Vec<u32>, Vec<u32>, UnmaskRequest)>,
}

/// A contribution task's fields.
struct RoundTask {
    round: u32,
    rounds: u32,
    roster: Vec<u32>,
    iterate: String,
    shape: (usize, usize),
    clip_norm: Option<f64>,
    /// μ̂ (base64), after the centre's round of a study with one.
    center: Option<String>,
}

/// The protocol loop after joining.
struct Protocol<'a> {
    args: &'a SiteArgs,
    client: &'a SiteClient,
    store: &'a Store,
    budget: &'a LocalBudget,
    prepared: &'a Prepared,
    computation: &'a SiteComputation,
    session: SiteSession,
    /// Noise: fresh from the operating system (what it drew is kept with what it sent).
    rng: ChaCha20Rng,
    /// The key shares' randomness, from the session's kept seed, so that the shares dealt
    /// again after a restart are those sent before.
    deal_rng: ChaCha20Rng,
    /// Every round of the study: the clip's steps, then the power rounds.
    rounds: u32,
    roster: RosterGuard,
    /// The rows mapped by the study's centre μ̂ (clip(x − μ̂)), and that μ̂.
    centred: Option<(Vec<f64>, Matrix)>,
    /// The (centred) rows' norms (the clip's steps count over them).
    norms: Option<Vec<f64>>,
    /// The (centred) rows clipped at the last power round's c.
    clipped: Option<(f64, Matrix)>,
    /// Its round signatures' key (from the kept seed), and the fixed roster's verifying keys.
    signer: SiteSigner,
    signing_keys: BTreeMap<u32, VerifyingKey>,
    /// SecAgg+: r_i and its commitment (base64), as published at join.
    seed_share: Option<([u8; 32], String)>,
    /// SecAgg+: its graph neighbours, once the graph is fixed.
    neighbours: Option<BTreeSet<u32>>,
    sent: Sent,
    /// Messages sent again in a row because the server asked for them again.
    resends: u32,
}

fn violation(what: impl std::fmt::Display) -> Failure {
    Failure::Protocol(what.to_string())
}

impl Protocol<'_> {
    fn me(&self) -> u32 {
        self.prepared.view.site_index
    }

    async fn post<B: serde::Serialize>(&self, path: &str, body: &B) -> Result<Posted, Failure> {
        let posted = self.client.post(path, body).await?;
        if let Posted::ConflictAfterRetry(message) = &posted {
            progress(&format!(
                "POST {path} was sent again and then refused ({message}); an earlier attempt \
                 probably got through: going on"
            ));
        }
        Ok(posted)
    }

    async fn run(&mut self) -> Result<(), Failure> {
        let wait = Duration::from_secs(self.args.wait_seconds);
        let path = format!("/v1/site/task?wait_ms={}", wait.as_millis());
        let mut last_wait: Option<StudyStatus> = None;
        let view = &self.prepared.view;
        let mut witness =
            StudyWitness::open(&self.args.ledger, view.study_id, self.args.ledger_key.as_deref())?;
        loop {
            match next_task(self.client, &path, wait, &mut witness).await? {
                SiteTask::Wait { status } => {
                    note_wait(&mut last_wait, status);
                    continue;
                }
                SiteTask::Finished { status, reason } => return finished(status, reason),
                task => {
                    let before = self.resends;
                    let unmasked = self.handle(task).await?;
                    // A task answered afresh (not a resend) ends a run of resends.
                    if self.resends == before {
                        self.resends = 0;
                    }
                    if let Some(round) = unmasked
                        && self.args.test_stop_after_round == Some(round)
                    {
                        progress(&format!("stopping after round {round} (test hook)"));
                        std::future::pending::<()>().await;
                    }
                }
            }
            last_wait = None;
        }
    }

    /// One task of the study's protocol; the round, when it was an unmasking.
    async fn handle(&mut self, task: SiteTask) -> Result<Option<u32>, Failure> {
        match task {
            SiteTask::RevealSeed { participants } => self.reveal_seed(&participants).await?,
            SiteTask::ShareKeys {
                participants,
                seed_reveals,
            } => self.share_keys(&participants, &seed_reveals).await?,
            SiteTask::Contribute {
                round,
                rounds,
                roster,
                iterate,
                rows,
                cols,
                inbox,
                clip_norm,
                center,
            } => {
                let task = RoundTask {
                    round,
                    rounds,
                    roster,
                    iterate,
                    shape: (rows, cols),
                    clip_norm,
                    center,
                };
                self.contribute(task, &inbox).await?;
            }
            SiteTask::Confirm {
                round,
                survivors,
                dropped,
                contributions,
            } => self.confirm(round, survivors, dropped, &contributions).await?,
            SiteTask::Unmask {
                round,
                survivors,
                dropped,
                contributions,
                confirmations,
            } => {
                let signed = Signed {
                    contributions: &contributions,
                    confirmations: &confirmations,
                };
                self.unmask(round, survivors, dropped, signed).await?;
                return Ok(Some(round));
            }
            // Taken by the loop before.
            SiteTask::Wait { .. } | SiteTask::Finished { .. } => {}
            SiteTask::CapeRelease { .. } | SiteTask::GossipStep { .. } | SiteTask::GossipConfirm { .. } => {
                return Err(violation(
                    "the server sent a task of another protocol in a federated_power study",
                ));
            }
        }
        Ok(None)
    }

    /// SecAgg+: fixes the roster (with every site's seed commitment) and reveals this site's
    /// share of the graph seed for it, once: the roster is kept before the reveal is sent, and
    /// another roster is refused, also after a restart.
    async fn reveal_seed(&mut self, participants: &[Participant]) -> Result<(), Failure> {
        let Some((share, _)) = self.seed_share else {
            return Err(violation(
                "the server asked for a graph-seed reveal in a study on the complete graph",
            ));
        };
        self.observe_roster(participants, "the roster")?;
        if self.sent.shares.is_some() {
            return Err(violation(
                "the server asked for the graph seed after the keys were shared",
            ));
        }
        let computed = KeptReveal {
            participants: participants.to_vec(),
        };
        let study = self.prepared.view.study_id;
        let kept = keep(self.store, study, SiteMessageKind::Reveal, 0, &computed).await?;
        if kept != computed {
            return Err(violation(
                "the server asked to reveal the graph seed for another roster than the one this site \
                 revealed it for; refusing",
            ));
        }
        let again = self.sent.revealed_for.is_some();
        if again {
            before_resend(&mut self.resends, "the graph-seed reveal").await?;
        }
        let request = SeedRevealRequest {
            reveal: wire::encode(&share),
        };
        self.post("/v1/site/seed", &request).await?;
        if !again {
            progress(&format!(
                "graph seed share revealed to the roster of {} participants",
                participants.len()
            ));
        }
        self.sent.revealed_for = Some(kept.participants);
        Ok(())
    }

    /// SecAgg+: the graph's spec from every participant's reveal (each checked against the
    /// commitment the fixed roster lists) and the study's stated rates.
    fn graph_spec(&self, participants: &[Participant], reveals: &[SeedReveal]) -> Result<GraphSpec, Failure> {
        let plus = self.computation.config().secagg_plus.ok_or_else(|| {
            violation("the server relayed graph-seed reveals in a study on the complete graph")
        })?;
        let study = self.prepared.view.study_id;
        let seed = seed::seed_from_reveals(study, participants, reveals)
            .map_err(|e| violation(format!("refusing the graph seed: {e}")))?;
        let sites = participants.len() as u32;
        let invited = self.computation.config().sites;
        GraphSpec::new(
            seed,
            sites,
            plus.corruption_rate_for(invited, sites),
            plus.dropout_rate,
        )
        .map_err(|e| violation(format!("refusing the graph: {e}")))
    }

    /// This site's share boxes for `participants`: to every one of them, or under SecAgg+ to
    /// its neighbours in the graph the reveals fix.
    fn deal(
        &mut self,
        participants: &[Participant],
        reveals: &[SeedReveal],
    ) -> Result<SharesRequest, Failure> {
        let threshold = self.prepared.view.threshold;
        let boxes = if self.seed_share.is_some() {
            let spec = self.graph_spec(participants, reveals)?;
            let roster: Vec<u32> = participants.iter().map(|p| p.index).collect();
            let graph = Neighbourhoods::derive(&roster, &spec)
                .map_err(|e| violation(format!("refusing the graph: {e}")))?;
            self.neighbours = Some(graph.neighbours(self.me()).into_iter().collect());
            self.session
                .share_boxes_sparse(participants, threshold, &spec, &mut self.deal_rng)
        } else if reveals.is_empty() {
            self.session
                .share_boxes(participants, threshold, &mut self.deal_rng)
        } else {
            return Err(violation(
                "the server relayed graph-seed reveals in a study on the complete graph",
            ));
        };
        let boxes = boxes
            .map_err(|e| violation(format!("cannot share keys with the roster the server sent: {e}")))?;
        Ok(SharesRequest { boxes })
    }

    /// The key exchange: deals this site's shares for the fixed roster (under SecAgg+ the one it
    /// revealed its share of the graph seed for, which the task does not repeat) and sends them,
    /// once (the same bytes again if asked again).
    async fn share_keys(
        &mut self,
        participants: &[Participant],
        reveals: &[SeedReveal],
    ) -> Result<(), Failure> {
        let participants = match (&self.seed_share, &self.sent.revealed_for) {
            (None, _) => participants.to_vec(),
            (Some(_), Some(revealed_for)) if participants.is_empty() => revealed_for.clone(),
            (Some(_), Some(_)) => {
                return Err(violation(
                    "the server sent a roster with the SecAgg+ key exchange; the roster is the one \
                     this site revealed its graph seed for",
                ));
            }
            (Some(_), None) => {
                return Err(violation(
                    "the server asked for key shares before this site revealed its share of the graph seed",
                ));
            }
        };
        let participants = participants.as_slice();
        let view = &self.prepared.view;
        self.observe_roster(participants, "the roster")?;
        if let Some(shares) = &self.sent.shares {
            before_resend(&mut self.resends, "the key shares").await?;
            self.post("/v1/site/shares", shares).await?;
            return Ok(());
        }
        if self.sent.contribution.is_some() {
            return Err(violation(
                "the server asked for key shares after the rounds began",
            ));
        }
        let study = view.study_id;
        let threshold = view.threshold;
        let request = self.deal(participants, reveals)?;
        let sent_to = request.boxes.len();
        let kept = KeptShares {
            participants: participants.to_vec(),
            seed_reveals: reveals.to_vec(),
            request,
        };
        let kept = keep(self.store, study, SiteMessageKind::Shares, 0, &kept).await?;
        let request = kept.request;
        self.post("/v1/site/shares", &request).await?;
        self.sent.shares = Some(request);
        let whom = if self.seed_share.is_some() {
            format!(
                "its {sent_to} graph neighbours among {} participants",
                participants.len()
            )
        } else {
            format!("{} participants", participants.len())
        };
        progress(&format!("keys shared with {whom} (threshold {threshold})"));
        Ok(())
    }

    /// A round's task against the study: it fits the study's rounds, comes after the keys were
    /// shared, lists this site in a roster of known indices, carries an iterate of the round's
    /// shape, and a clip norm only with a power round.
    fn check_round(
        &self,
        round: u32,
        rounds: u32,
        roster: &[u32],
        (rows, cols): (usize, usize),
        clip_norm: Option<f64>,
    ) -> Result<(), Failure> {
        if rounds != self.rounds || round == 0 || round > rounds {
            return Err(violation(format!(
                "round {round}/{rounds} does not fit the study's {} rounds",
                self.rounds
            )));
        }
        if self.sent.shares.is_none() {
            return Err(violation(
                "the server asked for a contribution before the keys were shared",
            ));
        }
        if !roster.contains(&self.me()) {
            return Err(violation(format!(
                "round {round}'s roster does not include this site"
            )));
        }
        self.roster
            .check_indices(roster, &format!("round {round}'s roster"))
            .map_err(violation)?;
        if (rows, cols) != self.computation.shape_of(round) {
            return Err(violation(format!(
                "round {round}'s iterate is {rows}×{cols}; the study's is {:?}",
                self.computation.shape_of(round)
            )));
        }
        if self.computation.kind_of(round) != RoundKind::Power && clip_norm.is_some() {
            return Err(violation(format!(
                "round {round} is not a power round and came with a clip norm"
            )));
        }
        Ok(())
    }

    /// The share boxes addressed to this site, with its first round: received and kept, once.
    async fn receive_inbox_once(&mut self, round: u32, inbox: &[ShareBox]) -> Result<(), Failure> {
        if !self.sent.inbox_received {
            if inbox.is_empty() {
                return Err(violation(format!(
                    "round {round} came without this site's share boxes"
                )));
            }
            self.session
                .receive_inbox(inbox)
                .map_err(|e| violation(format!("the share boxes addressed to this site are invalid: {e}")))?;
            // Kept: a restarted site holds its shares of its peers' secrets again.
            keep(
                self.store,
                self.prepared.view.study_id,
                SiteMessageKind::Inbox,
                0,
                &inbox.to_vec(),
            )
            .await?;
            self.sent.inbox_received = true;
        }
        Ok(())
    }

    /// Keeps `computed` as round `round`'s message of `kind` before it is sent (asked again,
    /// even after a restart, the site sends these bytes) and returns what the ledger holds,
    /// refused unless it is `same` as what was computed: the round was answered before for
    /// another view (`differs` says how).
    async fn keep_same<T: Serialize + for<'de> Deserialize<'de>>(
        &self,
        (kind, round): (SiteMessageKind, u32),
        computed: &T,
        same: impl Fn(&T, &T) -> bool,
        differs: &str,
    ) -> Result<T, Failure> {
        let kept = keep(self.store, self.prepared.view.study_id, kind, round, computed).await?;
        if !same(&kept, computed) {
            return Err(violation(format!("round {round} {differs}")));
        }
        Ok(kept)
    }

    async fn contribute(&mut self, task: RoundTask, inbox: &[ShareBox]) -> Result<(), Failure> {
        let RoundTask {
            round,
            rounds,
            roster,
            iterate,
            shape: (rows, cols),
            clip_norm,
            center,
        } = task;
        let path = format!("/v1/site/rounds/{round}/contribution");
        if let Some((last, request)) = &self.sent.contribution {
            if round == *last {
                // Our message was lost: the same vector again, never a fresh draw.
                before_resend(&mut self.resends, &format!("round {round}'s contribution")).await?;
                self.post(&path, request).await?;
                return Ok(());
            }
            if round < *last {
                return Err(violation(format!(
                    "the server asked for round {round} after round {last}"
                )));
            }
        }
        self.check_round(round, rounds, &roster, (rows, cols), clip_norm)?;
        let center = self.round_center(round, center)?;
        self.receive_inbox_once(round, inbox).await?;
        let values = b64_to_f64s(&iterate, rows * cols)
            .map_err(|e| violation(format!("round {round}'s iterate: {e}")))?;
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let signed = transcript::round_bytes(&bytes, clip_norm, center.as_deref());
        let iterate_hash = transcript::iterate_hash(self.prepared.view.study_id, round, rows, cols, &signed);
        if !self.sent.charged {
            self.charge().await?;
        }
        let masked = {
            let encoded = self
                .compute(round, values, clip_norm, center.as_deref())
                .map_err(|e| Failure::Refused(format!("cannot compute round {round}: {e}")))?;
            self.session
                .mask(round, &roster, &encoded)
                .map_err(|e| violation(format!("cannot mask round {round}: {e}")))?
        };
        let statement = transcript::contribution_message(&RoundView {
            study: self.prepared.view.study_id,
            round,
            iterate: &iterate_hash,
            roster: &roster,
        });
        let kept = KeptContribution {
            roster: roster.clone(),
            iterate_hash: Some(hex::encode(iterate_hash)),
            request: ContributionRequest {
                masked: words_to_b64(&masked),
                signature: self.signer.sign(&statement),
            },
        };
        let same = |a: &KeptContribution, b: &KeptContribution| {
            a.roster == b.roster && a.iterate_hash == b.iterate_hash
        };
        let differs = "was contributed with another roster or iterate before";
        let request = self
            .keep_same((SiteMessageKind::Contribution, round), &kept, same, differs)
            .await?
            .request;
        let roster_len = roster.len();
        self.post(&path, &request).await?;
        // Remembered: if asked for this round again, the same vector is sent again.
        self.sent.rosters.insert(round, roster);
        self.sent.iterates.insert(round, iterate_hash);
        self.sent.contribution = Some((round, request));
        progress(&format!(
            "round {round}/{rounds} contributed ({roster_len} sites in the roster)"
        ));
        Ok(())
    }

    /// The centre `round`'s task carries, decoded and checked against the study's (a given or
    /// released μ̂, or none).
    fn round_center(&self, round: u32, center: Option<String>) -> Result<Option<Vec<f64>>, Failure> {
        let center = center
            .map(|text| b64_to_f64s(&text, self.prepared.view.n_features))
            .transpose()
            .map_err(|e| violation(format!("round {round}'s centre: {e}")))?;
        self.computation
            .check_round_center(round, center.as_deref())
            .map_err(violation)?;
        Ok(center)
    }

    /// The round's encoded release: the centre's noisy sum of the rows, a clip step's noisy
    /// count over the (centred) rows' norms, or a power round's product on the (centred) rows,
    /// clipped at the round's c in a study with a clip. The centred and clipped copies are kept
    /// while μ̂ and c stay the same.
    fn compute(
        &mut self,
        round: u32,
        values: Vec<f64>,
        clip_norm: Option<f64>,
        center: Option<&[f64]>,
    ) -> Result<Vec<u64>, String> {
        let computation = self.computation;
        let raw = &self.prepared.records.xt;
        if computation.kind_of(round) == RoundKind::Center {
            return computation.center_release(raw, &mut self.rng);
        }
        if let Some(mu) = center
            && self
                .centred
                .as_ref()
                .is_none_or(|(kept, _)| kept.as_slice() != mu)
        {
            self.centred = Some((mu.to_vec(), computation.centred_rows(raw, mu)));
            self.norms = None;
            self.clipped = None;
        }
        let xt = match (&self.centred, center) {
            (Some((_, centred)), Some(_)) => centred,
            _ => raw,
        };
        if computation.is_clip_round(round) {
            let norms = self
                .norms
                .get_or_insert_with(|| xt.column_iter().map(|x| x.norm()).collect());
            return computation.clip_count(norms, &values, &mut self.rng);
        }
        let (rows, cols) = computation.shape_of(round);
        let iterate = Matrix::from_vec(rows, cols, values);
        let records = match clip_norm {
            Some(c) => {
                computation.round_bounds(Some(c))?;
                if self.clipped.as_ref().is_none_or(|(kept, _)| *kept != c) {
                    self.clipped = Some((c, clip_rows(xt, c)));
                }
                self.clipped.as_ref().map_or(xt, |(_, m)| m)
            }
            None => xt,
        };
        computation.contribution(records, &iterate, clip_norm, &mut self.rng)
    }

    /// Charges the study to the local ledger, before the first noise is drawn.
    async fn charge(&mut self) -> Result<(), Failure> {
        charge_ledger(self.args, self.store, self.budget, self.prepared).await?;
        self.sent.charged = true;
        Ok(())
    }

    async fn unmask(
        &mut self,
        round: u32,
        survivors: Vec<u32>,
        dropped: Vec<u32>,
        signed: Signed<'_>,
    ) -> Result<(), Failure> {
        let path = format!("/v1/site/rounds/{round}/unmask");
        if let Some((s, d, request)) = self.sent.unmasks.get(&round) {
            if (s, d) != (&survivors, &dropped) {
                return Err(violation(format!(
                    "the server asked to unmask round {round} again with other survivors; refusing"
                )));
            }
            before_resend(&mut self.resends, &format!("the unmask answer of round {round}")).await?;
            self.post(&path, request).await?;
            return Ok(());
        }
        let named: Vec<u32> = survivors.iter().chain(&dropped).copied().collect();
        self.roster
            .check_indices(&named, &format!("round {round}'s unmask request"))
            .map_err(violation)?;
        // The consistency round: nothing is revealed unless every survivor masked this very
        // round (iterate and roster) and a quorum confirmed this very transcript.
        self.accept_transcript(round, &survivors, &dropped, signed.contributions)
            .await?;
        self.check_quorum(round, &survivors, &dropped, signed.confirmations)?;
        let Some(roster) = self.sent.rosters.get(&round) else {
            return Err(violation(format!(
                "the server asked to unmask round {round}, to which this site did not contribute"
            )));
        };
        let request = self
            .session
            .unmask_response(round, roster, &survivors, &dropped, self.prepared.view.threshold)
            .map_err(|e| violation(format!("refusing to unmask round {round}: {e}")))?;
        let kept = KeptUnmask {
            survivors: survivors.clone(),
            dropped: dropped.clone(),
            request,
        };
        let same = |a: &KeptUnmask, b: &KeptUnmask| (&a.survivors, &a.dropped) == (&b.survivors, &b.dropped);
        let differs = "was unmasked with other survivors before; refusing";
        let request = self
            .keep_same((SiteMessageKind::Unmask, round), &kept, same, differs)
            .await?
            .request;
        self.post(&path, &request).await?;
        progress(&format!(
            "unmask {round} sent ({} survivors, {} dropped)",
            survivors.len(),
            dropped.len()
        ));
        self.sent.unmasks.insert(round, (survivors, dropped, request));
        Ok(())
    }
}

/// Joins a `federated_power` study (or, restarted, takes up the session its ledger keeps) and
/// follows its tasks to the end.
pub(crate) async fn follow(run: SiteRun<'_>) -> Result<(), Failure> {
    let (args, client, store, budget, prepared) = run.parts();
    let Some(computation) = prepared.computation.as_ref() else {
        return Err(Failure::Protocol(
            "the study's per-round computation is missing".into(),
        ));
    };
    let view = &prepared.view;
    let rounds = computation.config().total_rounds();
    let (rng, secret_seed) = start_session(args, view, store).await?;
    let mut keys_rng = ChaCha20Rng::from_seed(secret_seed);
    let mut deal_rng = ChaCha20Rng::from_seed(secret_seed);
    deal_rng.set_stream(1);
    let session = SiteSession::new(view.study_id, view.site_index, rounds, &mut keys_rng);
    // The signing key: from the kept seed, so a restarted site signs alike.
    let signer = signer_of(secret_seed);
    let seed_share = computation.config().secagg_plus.map(|_| {
        let share = seed_share(secret_seed);
        let commitment = wire::encode(&seed::commitment(view.study_id, view.site_index, &share));
        (share, commitment)
    });
    if view.site_status == SiteStatus::Invited {
        let keys = JoinKeys {
            encryption: Some(session.encryption_public_key()),
            mask: session.mask_public_keys(),
            signing: Some(signer.public_key()),
            seed_commitment: seed_share.as_ref().map(|(_, c)| c.clone()),
        };
        join(client, view, prepared.records.n, keys).await?;
    }
    let mut protocol = Protocol {
        args,
        client,
        store,
        budget,
        prepared,
        computation,
        session,
        rng,
        deal_rng,
        rounds,
        roster: RosterGuard::new(prepared.expected_roster),
        centred: None,
        norms: None,
        clipped: None,
        signer,
        signing_keys: BTreeMap::new(),
        seed_share,
        neighbours: None,
        sent: Sent::default(),
        resends: 0,
    };
    protocol.restore().await?;
    protocol.run().await
}

impl Protocol<'_> {
    /// Takes up what the ledger kept of this study: the shares dealt (dealt again from the
    /// kept seed, and checked to be the same bytes), the boxes received, and every round's
    /// contribution and unmask answer, so that each is sent again as it was, never redrawn.
    async fn restore(&mut self) -> Result<(), Failure> {
        let view = &self.prepared.view;
        let study = view.study_id;
        let store = self.store;
        let kept = |kind| async move { store.site_messages(study, kind).await.map_err(ledger_failure) };
        let shares = kept(SiteMessageKind::Shares).await?;
        let inbox = kept(SiteMessageKind::Inbox).await?;
        let contributions = kept(SiteMessageKind::Contribution).await?;
        let unmasks = kept(SiteMessageKind::Unmask).await?;
        self.sent.charged = self
            .store
            .study_charged(self.budget.dataset, study)
            .await
            .map_err(ledger_failure)?;
        if let Some((_, text)) = kept(SiteMessageKind::Reveal).await?.first() {
            let revealed: KeptReveal = parse_kept(text)?;
            self.observe_roster(&revealed.participants, "the kept roster")?;
            self.sent.revealed_for = Some(revealed.participants);
        }
        let Some((_, text)) = shares.first() else {
            return Ok(());
        };
        let shares: KeptShares = parse_kept(text)?;
        self.observe_roster(&shares.participants, "the kept roster")?;
        let boxes = self
            .deal(&shares.participants, &shares.seed_reveals)
            .map_err(|e| violation(format!("cannot deal the kept shares again: {e}")))?
            .boxes;
        if boxes != shares.request.boxes {
            return Err(Failure::Refused(
                "the ledger's kept key shares are not those this session deals; nothing more is sent".into(),
            ));
        }
        self.sent.shares = Some(shares.request);
        if let Some((_, text)) = inbox.first() {
            let inbox: Vec<ShareBox> = parse_kept(text)?;
            self.session
                .receive_inbox(&inbox)
                .map_err(|e| violation(format!("the kept share boxes: {e}")))?;
            self.sent.inbox_received = true;
        }
        for (round, text) in contributions {
            let len = self.computation.round_len(round);
            let kept: KeptContribution = parse_kept(&text)?;
            if let Some(hash) = kept.iterate_hash.as_deref().and_then(|h| hex::decode(h).ok()) {
                let hash = <[u8; 32]>::try_from(hash.as_slice())
                    .map_err(|_| Failure::Refused("a kept iterate hash is not 32 bytes".into()))?;
                self.sent.iterates.insert(round, hash);
            }
            // Records the roster this round was masked with (the output is discarded).
            self.session
                .mask(round, &kept.roster, &vec![0; len])
                .map_err(|e| violation(format!("the kept round {round}: {e}")))?;
            self.sent.rosters.insert(round, kept.roster);
            self.sent.contribution = Some((round, kept.request));
        }
        for (round, text) in kept(SiteMessageKind::Confirm).await? {
            let kept: KeptConfirm = parse_kept(&text)?;
            self.sent.confirms.insert(round, kept);
        }
        for (round, text) in unmasks {
            let kept: KeptUnmask = parse_kept(&text)?;
            self.sent
                .unmasks
                .insert(round, (kept.survivors, kept.dropped, kept.request));
        }
        if let Some((round, _)) = &self.sent.contribution {
            progress(&format!(
                "continuing the study from the ledger: {} rounds contributed, the last round {round}",
                self.sent.rosters.len()
            ));
        }
        Ok(())
    }
}

/// The signatures an unmask task relays.
struct Signed<'a> {
    contributions: &'a [SiteSignature],
    confirmations: &'a [SiteSignature],
}

impl Protocol<'_> {
    /// Fixes the roster (first sight) or checks it against the fixed one, keeps its verifying
    /// keys, and checks the threshold rule against its size.
    fn observe_roster(&mut self, participants: &[Participant], what: &str) -> Result<(), Failure> {
        let view = &self.prepared.view;
        let members: Vec<Member> = participants.iter().map(Member::from_participant).collect();
        let commitment = self.seed_share.as_ref().map(|(_, c)| c.as_str());
        let me = me_as_participant(view, &self.session, &self.signer, commitment);
        if let Some(hash) = self
            .roster
            .observe(view, &members, &me)
            .map_err(|e| violation(format!("refusing {what}: {e}")))?
        {
            progress(&describe(&hash, &members));
        }
        self.signing_keys.clear();
        for p in participants {
            let key = transcript::verifying_key(&p.signing_public_key)
                .map_err(|e| violation(format!("refusing {what}: site {}'s {e}", p.index)))?;
            self.signing_keys.insert(p.index, key);
        }
        let roster = participants.len() as u32;
        check_threshold(
            view.threshold,
            roster,
            self.colluding(),
            self.args.allow_minority_threshold,
        )?;
        super::check_honest_survivors(self.computation.config(), view.n_sites, roster, view.threshold)
    }

    /// The colluders this site's checks tolerate: `--colluding-sites`, and under SecAgg+ at
    /// least the study's assumed corrupt sites ([`super::colluding`]).
    fn colluding(&self) -> u32 {
        super::colluding(
            self.args.colluding_sites,
            self.computation.config(),
            self.prepared.view.n_sites,
        )
    }

    /// The quorum of confirmations this site needs in every round.
    fn quorum(&self) -> u32 {
        transcript::quorum(self.signing_keys.len() as u32, self.colluding())
    }

    /// This site's view of `round`: the iterate it multiplied and the roster it masked with.
    fn own_round(&self, round: u32) -> Result<OwnRound<'_>, Failure> {
        match (self.sent.rosters.get(&round), self.sent.iterates.get(&round)) {
            (Some(roster), Some(iterate)) => Ok(OwnRound {
                me: self.me(),
                view: RoundView {
                    study: self.prepared.view.study_id,
                    round,
                    iterate,
                    roster,
                },
                keys: &self.signing_keys,
                neighbours: self.neighbours.as_ref(),
            }),
            _ => Err(violation(format!(
                "the server asked about round {round}, to which this site did not contribute (or \
                 contributed without a kept iterate hash); refusing"
            ))),
        }
    }

    /// Accepts `round`'s transcript (survivors U, dropped D) once: U and D split the roster it
    /// masked with, it is in U, |U| ≥ max(t, quorum), and every survivor's contribution
    /// signature verifies over this site's own iterate hash and roster. The transcript is kept
    /// with this site's signature of it before anything is sent; asked about the round again
    /// with other sets, it refuses.
    async fn accept_transcript(
        &mut self,
        round: u32,
        survivors: &[u32],
        dropped: &[u32],
        contributions: &[SiteSignature],
    ) -> Result<String, Failure> {
        if let Some(kept) = self.sent.confirms.get(&round) {
            if (kept.survivors.as_slice(), kept.dropped.as_slice()) != (survivors, dropped) {
                return Err(violation(format!(
                    "the server showed round {round} with other survivors or dropped sites than the \
                     transcript this site confirmed; refusing"
                )));
            }
            return Ok(kept.signature.clone());
        }
        let need = self.prepared.view.threshold.max(self.quorum());
        // SecAgg+: at most ⌈δS⌉ of the fixed roster out by this round, or the graph's bounds do
        // not hold against a coordinator that chose them after seeing it.
        if let Some(plus) = self.computation.config().secagg_plus {
            let fixed = self.signing_keys.len();
            let out = fixed.saturating_sub(survivors.len());
            if out > plus.max_out(fixed) {
                return Err(violation(format!(
                    "round {round}: {out} of the {fixed} sites are out, more than the study's dropout rate {} \
                     allows ({}); SecAgg+'s graph is safe only up to that; refusing before revealing anything",
                    plus.dropout_rate,
                    plus.max_out(fixed)
                )));
            }
        }
        let own = self.own_round(round)?;
        own.check_transcript(survivors, dropped, contributions, need)
            .map_err(|e| {
                violation(format!(
                    "refusing round {round}'s transcript before revealing anything: {e}"
                ))
            })?;
        let signature = self
            .signer
            .sign(&transcript::confirmation_message(&own.view, survivors, dropped));
        let confirm = KeptConfirm {
            survivors: survivors.to_vec(),
            dropped: dropped.to_vec(),
            signature,
        };
        let study = self.prepared.view.study_id;
        let kept = keep(self.store, study, SiteMessageKind::Confirm, round, &confirm).await?;
        if kept != confirm {
            return Err(violation(format!(
                "round {round} was confirmed with other survivors or dropped sites before; refusing"
            )));
        }
        let signature = kept.signature.clone();
        self.sent.confirms.insert(round, kept);
        Ok(signature)
    }

    /// Checks that at least the quorum of distinct survivors confirmed this site's own
    /// transcript of `round` (its own confirmation counts).
    fn check_quorum(
        &self,
        round: u32,
        survivors: &[u32],
        dropped: &[u32],
        confirmations: &[SiteSignature],
    ) -> Result<(), Failure> {
        let own = self.own_round(round)?;
        let quorum = self.quorum() as usize;
        let valid = own.confirmed_by(survivors, dropped, confirmations, quorum);
        if valid < quorum {
            return Err(violation(format!(
                "round {round}: only {valid} survivors confirmed the transcript this site saw; {quorum} are \
                 needed before it reveals anything (the coordinator may have shown sites different \
                 views); refusing"
            )));
        }
        Ok(())
    }

    /// The consistency round: accept the transcript and send this site's confirmation of it
    /// (the same bytes again if asked again).
    async fn confirm(
        &mut self,
        round: u32,
        survivors: Vec<u32>,
        dropped: Vec<u32>,
        contributions: &[SiteSignature],
    ) -> Result<(), Failure> {
        let again = self.sent.confirms.contains_key(&round);
        let signature = self
            .accept_transcript(round, &survivors, &dropped, contributions)
            .await?;
        if again {
            before_resend(&mut self.resends, &format!("the confirmation of round {round}")).await?;
        }
        let path = format!("/v1/site/rounds/{round}/confirm");
        self.post(&path, &ConfirmRequest { signature }).await?;
        if !again {
            progress(&format!(
                "round {round} confirmed ({} survivors, {} dropped)",
                survivors.len(),
                dropped.len()
            ));
        }
        Ok(())
    }
}
