//! The `federated_power` protocol at a site, after joining (docs/design/federation.md "Site
//! client"): share the keys with the fixed roster, contribute each round's masked vector (the
//! same one again if asked again), and answer each round's unmask request once.

use std::collections::BTreeMap;
use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};

use super::args::SiteArgs;
use super::http::{Posted, SiteClient};
use super::ledger::{charge_ledger, keep, ledger_failure, parse_kept, start_session};
use super::prepare::{Prepared, check_threshold, join};
use super::roster::{Member, RosterGuard, describe};
use super::run::finished;
use super::{Failure, progress};
use crate::federation::messages::{
    ContributionRequest, Participant, ShareBox, SharesRequest, SiteStudyView, SiteTask, UnmaskRequest,
};
use crate::federation::power::SiteComputation;
use crate::federation::secagg::SiteSession;
use crate::federation::wire::{b64_to_f64s, words_to_b64};
use crate::linalg::Matrix;
use crate::store::{LocalBudget, SiteMessageKind, SiteStatus, Store, StudyStatus};

/// The key shares as kept in the ledger: the roster they were dealt for and what was sent.
#[derive(Serialize, Deserialize)]
struct KeptShares {
    participants: Vec<Participant>,
    request: SharesRequest,
}

/// A round's contribution as kept: the roster it was masked with and what was sent.
#[derive(Serialize, Deserialize)]
struct KeptContribution {
    roster: Vec<u32>,
    request: ContributionRequest,
}

/// A round's unmask answer as kept: the sets it answered and what was sent.
#[derive(Serialize, Deserialize)]
struct KeptUnmask {
    survivors: Vec<u32>,
    dropped: Vec<u32>,
    request: UnmaskRequest,
}

/// This site's entry in a `federated_power` roster, as it published it.
fn me_as_participant(view: &SiteStudyView, session: &SiteSession) -> Member {
    let mut keys = vec![session.encryption_public_key()];
    keys.extend(session.mask_public_keys());
    Member {
        index: view.site_index,
        name: view.site_name.clone(),
        keys,
    }
}

/// What the site has sent so far, so that a repeated task gets the same answer.
#[derive(Default)]
struct Sent {
    shares: Option<SharesRequest>,
    inbox_received: bool,
    charged: bool,
    /// The last round contributed and what was sent for it.
    contribution: Option<(u32, ContributionRequest)>,
    rosters: BTreeMap<u32, Vec<u32>>,
    unmasks: BTreeMap<u32, (Vec<u32>, Vec<u32>, UnmaskRequest)>,
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
    iterations: u32,
    roster: RosterGuard,
    sent: Sent,
    /// Messages sent again in a row because the server asked for them again.
    resends: u32,
}

/// Most times in a row a message is sent again on the server's request.
const MAX_RESENDS: u32 = 5;
/// Pause before sending a message again.
const RESEND_PAUSE: Duration = Duration::from_millis(500);

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

    /// Before sending a message again because the server asked for it again: a short pause,
    /// and a limit, so that a server that keeps asking for what it has does not get a storm.
    async fn resend_guard(resends: &mut u32, what: &str) -> Result<(), Failure> {
        *resends += 1;
        if *resends > MAX_RESENDS {
            return Err(violation(format!(
                "the server keeps asking for {what}, which was sent {MAX_RESENDS} times already"
            )));
        }
        progress(&format!(
            "the server asked for {what} again; sending the same message again"
        ));
        tokio::time::sleep(RESEND_PAUSE).await;
        Ok(())
    }

    async fn run(&mut self) -> Result<(), Failure> {
        let wait = Duration::from_secs(self.args.wait_seconds);
        let path = format!("/v1/site/task?wait_ms={}", wait.as_millis());
        let mut last_wait: Option<StudyStatus> = None;
        loop {
            let task: SiteTask = self.client.get(&path, wait).await?;
            match task {
                SiteTask::Wait { status } => {
                    if last_wait != Some(status) {
                        progress(&match status {
                            StudyStatus::Enrolling => "waiting for enrolment (study enrolling)".to_owned(),
                            other => format!("waiting (study {})", other.as_str()),
                        });
                        last_wait = Some(status);
                    }
                    continue;
                }
                SiteTask::ShareKeys { participants } => {
                    let before = self.resends;
                    self.share_keys(&participants).await?;
                    if self.resends == before {
                        self.resends = 0;
                    }
                }
                SiteTask::Contribute {
                    round,
                    rounds,
                    roster,
                    iterate,
                    rows,
                    cols,
                    inbox,
                } => {
                    let before = self.resends;
                    self.contribute(round, rounds, roster, &iterate, rows, cols, &inbox)
                        .await?;
                    if self.resends == before {
                        self.resends = 0;
                    }
                }
                SiteTask::Unmask {
                    round,
                    survivors,
                    dropped,
                } => {
                    let before = self.resends;
                    self.unmask(round, survivors, dropped).await?;
                    if self.resends == before {
                        self.resends = 0;
                    }
                    if self.args.test_stop_after_round == Some(round) {
                        progress(&format!("stopping after round {round} (test hook)"));
                        std::future::pending::<()>().await;
                    }
                }
                SiteTask::CapeRelease { .. } | SiteTask::GossipStep { .. } => {
                    return Err(violation(
                        "the server sent a task of another protocol in a federated_power study",
                    ));
                }
                SiteTask::Finished { status, reason } => return finished(status, reason),
            }
            last_wait = None;
        }
    }

    async fn share_keys(
        &mut self,
        participants: &[crate::federation::messages::Participant],
    ) -> Result<(), Failure> {
        let view = &self.prepared.view;
        let members: Vec<Member> = participants.iter().map(Member::from_participant).collect();
        let me = me_as_participant(view, &self.session);
        if let Some(hash) = self
            .roster
            .observe(view, &members, &me)
            .map_err(|e| violation(format!("refusing the roster: {e}")))?
        {
            progress(&describe(&hash, &members));
        }
        check_threshold(
            view.threshold,
            participants.len() as u32,
            self.args.allow_minority_threshold,
        )?;
        if let Some(shares) = &self.sent.shares {
            Self::resend_guard(&mut self.resends, "the key shares").await?;
            self.post("/v1/site/shares", shares).await?;
            return Ok(());
        }
        if self.sent.contribution.is_some() {
            return Err(violation(
                "the server asked for key shares after the rounds began",
            ));
        }
        let boxes = self
            .session
            .share_boxes(participants, view.threshold, &mut self.deal_rng)
            .map_err(|e| violation(format!("cannot share keys with the roster the server sent: {e}")))?;
        let kept = KeptShares {
            participants: participants.to_vec(),
            request: SharesRequest { boxes },
        };
        let kept = keep(self.store, view.study_id, SiteMessageKind::Shares, 0, &kept).await?;
        let request = kept.request;
        self.post("/v1/site/shares", &request).await?;
        self.sent.shares = Some(request);
        progress(&format!(
            "keys shared with {} participants (threshold {})",
            participants.len(),
            view.threshold
        ));
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    async fn contribute(
        &mut self,
        round: u32,
        rounds: u32,
        roster: Vec<u32>,
        iterate: &str,
        rows: usize,
        cols: usize,
        inbox: &[crate::federation::messages::ShareBox],
    ) -> Result<(), Failure> {
        let path = format!("/v1/site/rounds/{round}/contribution");
        if let Some((last, request)) = &self.sent.contribution {
            if round == *last {
                // Our message was lost: the same vector again, never a fresh draw.
                Self::resend_guard(&mut self.resends, &format!("round {round}'s contribution")).await?;
                self.post(&path, request).await?;
                return Ok(());
            }
            if round < *last {
                return Err(violation(format!(
                    "the server asked for round {round} after round {last}"
                )));
            }
        }
        if rounds != self.iterations || round == 0 || round > rounds {
            return Err(violation(format!(
                "round {round}/{rounds} does not fit the study's {} iterations",
                self.iterations
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
            .check_indices(&roster, &format!("round {round}'s roster"))
            .map_err(violation)?;
        if (rows, cols) != self.computation.rows_cols() {
            return Err(violation(format!(
                "round {round}'s iterate is {rows}×{cols}; the study's is {:?}",
                self.computation.rows_cols()
            )));
        }
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
        let values = b64_to_f64s(iterate, rows * cols)
            .map_err(|e| violation(format!("round {round}'s iterate: {e}")))?;
        let iterate = Matrix::from_vec(rows, cols, values);
        if !self.sent.charged {
            self.charge().await?;
        }
        let masked = {
            let encoded = self
                .computation
                .contribution(&self.prepared.records.xt, &iterate, &mut self.rng)
                .map_err(|e| Failure::Refused(format!("cannot compute round {round}: {e}")))?;
            self.session
                .mask(round, &roster, &encoded)
                .map_err(|e| violation(format!("cannot mask round {round}: {e}")))?
        };
        let kept = KeptContribution {
            roster: roster.clone(),
            request: ContributionRequest {
                masked: words_to_b64(&masked),
            },
        };
        // Kept before it is sent: asked again, even after a restart, the site sends these bytes.
        let kept = keep(
            self.store,
            self.prepared.view.study_id,
            SiteMessageKind::Contribution,
            round,
            &kept,
        )
        .await?;
        if kept.roster != roster {
            return Err(violation(format!(
                "round {round} was contributed with another roster before"
            )));
        }
        let request = kept.request;
        let roster_len = roster.len();
        self.post(&path, &request).await?;
        // Remembered: if asked for this round again, the same vector is sent again.
        self.sent.rosters.insert(round, roster);
        self.sent.contribution = Some((round, request));
        progress(&format!(
            "round {round}/{rounds} contributed ({roster_len} sites in the roster)"
        ));
        Ok(())
    }

    /// Charges the study to the local ledger, before the first noise is drawn.
    async fn charge(&mut self) -> Result<(), Failure> {
        charge_ledger(self.args, self.store, self.budget, self.prepared).await?;
        self.sent.charged = true;
        Ok(())
    }

    async fn unmask(&mut self, round: u32, survivors: Vec<u32>, dropped: Vec<u32>) -> Result<(), Failure> {
        let path = format!("/v1/site/rounds/{round}/unmask");
        if let Some((s, d, request)) = self.sent.unmasks.get(&round) {
            if (s, d) != (&survivors, &dropped) {
                return Err(violation(format!(
                    "the server asked to unmask round {round} again with other survivors; refusing"
                )));
            }
            Self::resend_guard(&mut self.resends, &format!("the unmask answer of round {round}")).await?;
            self.post(&path, request).await?;
            return Ok(());
        }
        let named: Vec<u32> = survivors.iter().chain(&dropped).copied().collect();
        self.roster
            .check_indices(&named, &format!("round {round}'s unmask request"))
            .map_err(violation)?;
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
        let kept = keep(
            self.store,
            self.prepared.view.study_id,
            SiteMessageKind::Unmask,
            round,
            &kept,
        )
        .await?;
        if (&kept.survivors, &kept.dropped) != (&survivors, &dropped) {
            return Err(violation(format!(
                "round {round} was unmasked with other survivors before; refusing"
            )));
        }
        let request = kept.request;
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
pub(super) async fn follow(
    args: &SiteArgs,
    client: &SiteClient,
    store: &Store,
    budget: &LocalBudget,
    prepared: &Prepared,
    computation: &SiteComputation,
) -> Result<(), Failure> {
    let view = &prepared.view;
    let iterations = computation.config().iterations;
    let (rng, secret_seed) = start_session(args, view, store).await?;
    let mut keys_rng = ChaCha20Rng::from_seed(secret_seed);
    let mut deal_rng = ChaCha20Rng::from_seed(secret_seed);
    deal_rng.set_stream(1);
    let session = SiteSession::new(view.study_id, view.site_index, iterations, &mut keys_rng);
    if view.site_status == SiteStatus::Invited {
        join(
            client,
            view,
            prepared.records.n,
            Some(session.encryption_public_key()),
            session.mask_public_keys(),
        )
        .await?;
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
        iterations,
        roster: RosterGuard::new(prepared.expected_roster),
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
        let Some((_, text)) = shares.first() else {
            return Ok(());
        };
        let shares: KeptShares = parse_kept(text)?;
        let members: Vec<Member> = shares.participants.iter().map(Member::from_participant).collect();
        let me = me_as_participant(view, &self.session);
        if let Some(hash) = self
            .roster
            .observe(view, &members, &me)
            .map_err(|e| violation(format!("refusing the kept roster: {e}")))?
        {
            progress(&describe(&hash, &members));
        }
        let boxes = self
            .session
            .share_boxes(&shares.participants, view.threshold, &mut self.deal_rng)
            .map_err(|e| violation(format!("cannot deal the kept shares again: {e}")))?;
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
        let (rows, cols) = self.computation.rows_cols();
        let len = rows * cols;
        for (round, text) in contributions {
            let kept: KeptContribution = parse_kept(&text)?;
            // Records the roster this round was masked with (the output is discarded).
            self.session
                .mask(round, &kept.roster, &vec![0; len])
                .map_err(|e| violation(format!("the kept round {round}: {e}")))?;
            self.sent.rosters.insert(round, kept.roster);
            self.sent.contribution = Some((round, kept.request));
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
