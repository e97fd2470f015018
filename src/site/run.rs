//! The site's side of a study, step by step (docs/design/federation.md "Site client"):
//! read the study, load and clip the data, check the local ledger, join, then follow the
//! coordinator's tasks until the study is over.
//!
//! Safety rules kept here:
//! - nothing is sent before the data, the study and the ledger have been checked;
//! - the ledger is charged once, before the first noisy value is drawn; a refused charge sends
//!   nothing;
//! - a round's contribution is computed once: if the coordinator asks for the same round
//!   again (an answer was lost), the same masked vector is sent again, never a fresh draw;
//! - an unmask request is answered once per round; asked again with other survivors, the
//!   client refuses (it would reveal both secrets of a site);
//! - the first roster is fixed and its hash printed (and checked against
//!   `--expect-roster-hash`) before the key shares are sent; later rounds may only drop
//!   members of it ([`super::roster`]);
//! - a `federated_power` threshold t ≤ S/2 is refused unless `--allow-minority-threshold`;
//! - every iterate is checked (shape, finite, orthonormal) before it is multiplied, and every
//!   round's encoding is checked to keep all of the noise
//!   ([`crate::algorithms::federated_power::site_contribution`]).

use std::collections::BTreeMap;
use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use reqwest::StatusCode;

use super::args::{DataFormat, SiteArgs};
use super::data::{Records, load_records};
use super::http::{HttpError, Posted, SiteClient};
use super::roster::{Member, RosterGuard, describe, parse_expected};
use super::{Failure, progress};
use crate::dataset::Relation;
use crate::federation::messages::{
    ContributionRequest, JoinRequest, SharesRequest, SiteStudyView, SiteTask, UnmaskRequest,
};
use crate::federation::power::SiteComputation;
use crate::federation::secagg::SiteSession;
use crate::federation::wire::{b64_to_f64s, words_to_b64};
use crate::linalg::Matrix;
use crate::privacy::units::{
    checked_delta_budget_units, checked_delta_units, checked_rho_budget_units, checked_rho_units,
};
use crate::store::{ChargeOutcome, DELTA_UNITS_PER_ONE, LocalBudget, LocalDataset, RHO_UNITS_PER_ONE, Store};

/// ρ and δ in ledger units, for the operator.
fn amounts(rho_units: i64, delta_units: i64) -> String {
    format!(
        "rho = {}, delta = {}",
        rho_units as f64 / RHO_UNITS_PER_ONE,
        delta_units as f64 / DELTA_UNITS_PER_ONE
    )
}

/// The study's cost in ledger units (charges round up).
#[derive(Debug, Clone, Copy)]
struct Cost {
    rho_units: i64,
    delta_units: i64,
}

/// The budget stated on the command line, in ledger units (budgets round down).
fn stated_budget(args: &SiteArgs) -> Result<(i64, i64), Failure> {
    let rho = checked_rho_budget_units(args.budget_rho)
        .ok()
        .filter(|units| *units > 0)
        .ok_or_else(|| {
            Failure::Refused(format!(
                "--budget-rho must be > 0 and at most 1e6; got {}",
                args.budget_rho
            ))
        })?;
    let delta = checked_delta_budget_units(args.budget_delta).map_err(|_| {
        Failure::Refused(format!(
            "--budget-delta must lie in [0, 1); got {}",
            args.budget_delta
        ))
    })?;
    Ok((rho, delta))
}

/// Whether the study can be joined by this site now.
fn check_study(view: &SiteStudyView) -> Result<(), Failure> {
    match view.status.as_str() {
        "enrolling" => {}
        "failed" | "cancelled" => {
            return Err(Failure::Study(format!(
                "the study is {}; nothing was sent",
                view.status
            )));
        }
        other => {
            return Err(Failure::Refused(format!(
                "the study is {other}: it no longer takes sites in; nothing was sent"
            )));
        }
    }
    if view.site_status != "invited" {
        return Err(Failure::Refused(format!(
            "this site's status is {} (not invited): it already joined, and a client that joined \
             cannot be restarted (its protocol keys lived in that process); nothing was sent",
            view.site_status
        )));
    }
    Ok(())
}

fn relation(view: &SiteStudyView) -> Result<Relation, Failure> {
    match view.relation.as_str() {
        "replace_one" => Ok(Relation::ReplaceOne),
        "add_remove" => Ok(Relation::AddRemove),
        other => Err(Failure::Refused(format!(
            "the study's relation `{other}` is not supported"
        ))),
    }
}

fn study_cost(view: &SiteStudyView) -> Result<Cost, Failure> {
    let bad =
        |what: &str, value: f64| Failure::Protocol(format!("the study's cost {what} = {value} is not valid"));
    let rho_units = checked_rho_units(view.cost_rho)
        .ok()
        .filter(|units| *units > 0)
        .ok_or_else(|| bad("rho", view.cost_rho))?;
    let delta_units = checked_delta_units(view.cost_delta).map_err(|_| bad("delta", view.cost_delta))?;
    Ok(Cost {
        rho_units,
        delta_units,
    })
}

/// The public description of a study without its statuses, to check that what the site
/// joined is what it checked.
fn terms(view: &SiteStudyView) -> SiteStudyView {
    SiteStudyView {
        status: String::new(),
        site_status: String::new(),
        ..view.clone()
    }
}

/// Prints a warning when the token would travel in clear over the network.
fn warn_plain_http(server: &reqwest::Url) {
    let host = server.host_str().unwrap_or_default();
    let loopback = host == "localhost"
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if server.scheme() == "http" && !loopback {
        progress(&format!(
            "warning: {server} is plain http: the site token and the masked values travel unencrypted"
        ));
    }
}

/// Opens the ledger, creates or checks its budget, and checks that the study fits it.
async fn check_ledger(
    args: &SiteArgs,
    view: &SiteStudyView,
    records: &Records,
    cost: Cost,
) -> Result<(Store, LocalBudget), Failure> {
    let path = args.ledger.display();
    let (budget_rho, budget_delta) = stated_budget(args)?;
    let store = Store::open_ledger(&args.ledger)
        .await
        .map_err(|e| Failure::Refused(format!("cannot open the ledger {path}: {e}")))?;
    let name = args.data.file_name().map_or_else(
        || args.data.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let data = LocalDataset {
        name,
        relation: relation(view)?,
        row_norm_bound: view.row_norm_bound,
        row_l1_bound: Some(view.row_l1_bound),
        n: records.n as u64,
        d: records.d as u64,
    };
    let budget = match store.ensure_local_budget(budget_rho, budget_delta, &data).await {
        Ok(budget) => budget,
        Err(e) => {
            store.close().await;
            return Err(Failure::Refused(format!("ledger {path}: {e}")));
        }
    };
    let refusal = match store.study_charged(budget.dataset, view.study_id).await {
        Err(e) => Some(format!("ledger {path}: {e}")),
        Ok(true) => Some(format!(
            "ledger {path} was already charged for study {}: the data it protects takes part in a \
             study once; nothing was sent",
            view.study_id
        )),
        Ok(false) if !budget.fits(cost.rho_units, cost.delta_units) => Some(format!(
            "the study costs {} but ledger {path} has {} left (of {}); nothing was sent",
            amounts(cost.rho_units, cost.delta_units),
            amounts(budget.remaining_rho_units(), budget.remaining_delta_units()),
            amounts(budget.budget_rho_units, budget.budget_delta_units),
        )),
        Ok(false) => None,
    };
    if let Some(message) = refusal {
        store.close().await;
        return Err(Failure::Refused(message));
    }
    progress(&format!(
        "ledger {path}{}: {} left of {}; this study costs {}",
        if budget.created { " (created)" } else { "" },
        amounts(budget.remaining_rho_units(), budget.remaining_delta_units()),
        amounts(budget.budget_rho_units, budget.budget_delta_units),
        amounts(cost.rho_units, cost.delta_units),
    ));
    Ok((store, budget))
}

/// Everything before joining. Returns the study, the loaded data and the checked ledger.
pub(super) struct Prepared {
    pub(super) view: SiteStudyView,
    /// `federated_power` only; CAPE studies compute their one statistic directly.
    computation: Option<SiteComputation>,
    pub(super) records: Records,
    cost: Cost,
    /// `--expect-roster-hash`, parsed.
    pub(super) expected_roster: Option<[u8; 32]>,
}

/// Refuses a `federated_power` threshold t ≤ S/2 unless the operator allowed it: a lying
/// coordinator could then tell two disjoint groups of t sites different survivor sets and
/// collect both secrets of one site, and against a coalition of the coordinator with the other
/// sites this site's release carries noise variance (mΔ)²/t only.
pub(super) fn check_threshold(threshold: u32, sites: u32, allow_minority: bool) -> Result<(), Failure> {
    let majority = u64::from(threshold) * 2 > u64::from(sites);
    if majority {
        return Ok(());
    }
    if allow_minority {
        progress(&format!(
            "warning: threshold {threshold} of {sites} sites is not a majority (allowed by \
             --allow-minority-threshold)"
        ));
        return Ok(());
    }
    Err(Failure::Refused(format!(
        "the study's threshold t = {threshold} is at most half of its {sites} sites: a coordinator that \
         lies could then recover this site's masked values, and a coalition of the coordinator with the \
         other sites would see them with noise variance (mΔ)²/t only; pass --allow-minority-threshold to \
         take part anyway; nothing was sent"
    )))
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

async fn prepare(args: &SiteArgs, client: &SiteClient) -> Result<Prepared, Failure> {
    let format = DataFormat::resolve(args.format, &args.data).map_err(Failure::Refused)?;
    stated_budget(args)?;
    if !args.data.is_file() {
        return Err(Failure::Refused(format!(
            "{} is not a readable file",
            args.data.display()
        )));
    }
    let view: SiteStudyView = client.get("/v1/site/study", Duration::ZERO).await?;
    progress(&format!(
        "study {:?} ({}): {}, {} sites, threshold {}, {} features, {}; status {}, this site ({:?}, index {}) {}",
        view.study_name,
        view.study_id,
        view.algorithm,
        view.n_sites,
        view.threshold,
        view.n_features,
        view.relation,
        view.status,
        view.site_name,
        view.site_index,
        view.site_status,
    ));
    check_study(&view)?;
    let expected_roster = args
        .expect_roster_hash
        .as_deref()
        .map(parse_expected)
        .transpose()
        .map_err(Failure::Refused)?;
    let computation = match view.algorithm.as_str() {
        "federated_power" => {
            check_threshold(view.threshold, view.n_sites, args.allow_minority_threshold)?;
            Some(SiteComputation::from_view(&view).map_err(Failure::Refused)?)
        }
        "cape_pca" | "cape_agn" => None,
        other => {
            return Err(Failure::Refused(format!(
                "this client does not know the study algorithm `{other}`; nothing was sent"
            )));
        }
    };
    let cost = study_cost(&view)?;
    let relation = relation(&view)?;
    // Under add_remove a federated_power site's n is private: no limit on it may change what
    // the site does (its products are clamped instead), and no records is a valid shard. CAPE
    // needs no cap on n (nothing is fixed-point), and refusing over one would tell the
    // coordinator a bit of a private n (docs/design/cape.md).
    let private_n = computation.is_some() && relation == Relation::AddRemove;
    let (max_records, empty_d) = match &computation {
        Some(_) if private_n => (u64::MAX, Some(view.n_features)),
        Some(_) => (view.max_site_samples, None),
        None => super::cape::record_rules(&view),
    };
    let records = load_records(
        &args.data,
        format.ingest_format(),
        view.row_norm_bound,
        view.row_l1_bound,
        max_records,
        empty_d,
    )
    .map_err(Failure::Refused)?;
    if private_n && records.n as u64 > view.max_site_samples {
        progress(&format!(
            "warning: the data holds more records than the study's max_site_samples = {}; this site's \
             products are clamped to the study's bound, which may bias its contribution (shown here only)",
            view.max_site_samples
        ));
    }
    let checked = match &computation {
        Some(computation) => computation.check_data(records.n, records.d),
        None if records.d != view.n_features => Err(format!(
            "the data has {} features; the study has {}",
            records.d, view.n_features
        )),
        None => super::cape::check_count(&view, records.n),
    };
    checked.map_err(|e| Failure::Refused(format!("{}: {e}", args.data.display())))?;
    progress(&format!(
        "loaded {} records of {} features from {}, clipped to L2 norm {} and L1 norm {}",
        records.n,
        records.d,
        args.data.display(),
        view.row_norm_bound,
        view.row_l1_bound
    ));
    Ok(Prepared {
        view,
        computation,
        records,
        cost,
        expected_roster,
    })
}

/// Joins the study with this site's public keys.
pub(super) async fn join(
    client: &SiteClient,
    view: &SiteStudyView,
    n: usize,
    encryption_public_key: Option<String>,
    mask_public_keys: Vec<String>,
) -> Result<(), Failure> {
    let request = JoinRequest {
        // n is public under replace_one only.
        n_samples: (relation(view)? == Relation::ReplaceOne).then_some(n as u64),
        encryption_public_key,
        mask_public_keys,
    };
    let joined: SiteStudyView = match client.post_for("/v1/site/join", &request).await {
        Ok(joined) => joined,
        Err((
            HttpError::Protocol {
                status: Some(StatusCode::CONFLICT),
                message,
                ..
            },
            true,
        )) => {
            // The join was sent more than once: the conflict may answer our own first attempt.
            let now: SiteStudyView = client.get("/v1/site/study", Duration::ZERO).await?;
            if now.site_status == "invited" {
                return Err(Failure::Protocol(format!(
                    "the server refused the join: {message}"
                )));
            }
            progress(&format!(
                "the join was sent twice (network); the server has this site as {}",
                now.site_status
            ));
            now
        }
        Err((e, _)) => return Err(Failure::Protocol(format!("the server refused the join: {e}"))),
    };
    if terms(&joined) != terms(view) {
        return Err(Failure::Protocol(
            "the study the server joined this site to differs from the one it described before".to_owned(),
        ));
    }
    progress(&format!(
        "joined as site {} of {} (threshold {})",
        view.site_index, view.n_sites, view.threshold
    ));
    Ok(())
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
    rng: ChaCha20Rng,
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
        let mut last_wait: Option<String> = None;
        loop {
            let task: SiteTask = self.client.get(&path, wait).await?;
            match task {
                SiteTask::Wait { status } => {
                    if last_wait.as_deref() != Some(status.as_str()) {
                        progress(&match status.as_str() {
                            "enrolling" => "waiting for enrolment (study enrolling)".to_owned(),
                            other => format!("waiting (study {other})"),
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
                SiteTask::CapeRelease { .. } => {
                    return Err(violation(
                        "the server sent a CAPE task in a federated_power study",
                    ));
                }
                SiteTask::Finished { status, reason } => return finished(&status, reason),
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
            .share_boxes(participants, view.threshold, &mut self.rng)
            .map_err(|e| violation(format!("cannot share keys with the roster the server sent: {e}")))?;
        let request = SharesRequest { boxes };
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
        let request = ContributionRequest {
            masked: words_to_b64(&masked),
        };
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

/// Charges the study to the local ledger (once per study), before any noisy value is sent.
pub(super) async fn charge_ledger(
    args: &SiteArgs,
    store: &Store,
    budget: &LocalBudget,
    prepared: &Prepared,
) -> Result<(), Failure> {
    let view = &prepared.view;
    let cost = prepared.cost;
    let path = args.ledger.display();
    let outcome = store
        .charge_study(
            budget.dataset,
            view.study_id,
            &view.algorithm,
            cost.rho_units,
            cost.delta_units,
        )
        .await
        .map_err(|e| Failure::Refused(format!("ledger {path}: {e}; nothing was sent")))?;
    match outcome {
        ChargeOutcome::Charged(after) => {
            progress(&format!(
                "charged {} to ledger {path} ({} left)",
                amounts(cost.rho_units, cost.delta_units),
                amounts(after.remaining_rho_units(), after.remaining_delta_units())
            ));
            Ok(())
        }
        ChargeOutcome::AlreadyCharged => Err(Failure::Refused(format!(
            "ledger {path} was already charged for study {} (by another client?): the data it \
             protects takes part in a study once; nothing was sent",
            view.study_id
        ))),
        ChargeOutcome::OverBudget {
            remaining_rho_units,
            remaining_delta_units,
        } => Err(Failure::Refused(format!(
            "the study costs {} but ledger {path} has only {} left now; nothing was sent",
            amounts(cost.rho_units, cost.delta_units),
            amounts(remaining_rho_units, remaining_delta_units)
        ))),
    }
}

pub(super) fn finished(status: &str, reason: Option<String>) -> Result<(), Failure> {
    if status == "succeeded" {
        match &reason {
            Some(why) => progress(&format!(
                "finished: study succeeded; this site was dropped: {why}"
            )),
            None => progress("finished: study succeeded; this site took part to the end"),
        }
        return Ok(());
    }
    let why = reason.unwrap_or_else(|| "no reason given".to_owned());
    progress(&format!("finished: study {status}: {why}"));
    Err(Failure::Study(format!("the study ended {status}: {why}")))
}

/// The whole client: prepare, check the ledger, join, follow the tasks.
pub(super) async fn run(args: &SiteArgs) -> Result<(), Failure> {
    warn_plain_http(&args.server);
    let client = SiteClient::new(
        args.server.clone(),
        args.token.clone(),
        Duration::from_secs(args.give_up_seconds),
    )
    .map_err(Failure::Refused)?;
    let prepared = prepare(args, &client).await?;
    let (store, budget) = check_ledger(args, &prepared.view, &prepared.records, prepared.cost).await?;
    let outcome = follow(args, &client, &store, &budget, &prepared).await;
    store.close().await;
    outcome
}

async fn follow(
    args: &SiteArgs,
    client: &SiteClient,
    store: &Store,
    budget: &LocalBudget,
    prepared: &Prepared,
) -> Result<(), Failure> {
    let view = &prepared.view;
    let Some(computation) = prepared.computation.as_ref() else {
        return super::cape::follow(args, client, store, budget, prepared).await;
    };
    let iterations = computation.config().iterations;
    let mut rng = ChaCha20Rng::try_from_os_rng()
        .map_err(|e| Failure::Refused(format!("the operating system's random generator failed: {e}")))?;
    let session = SiteSession::new(view.study_id, view.site_index, iterations, &mut rng);
    join(
        client,
        view,
        prepared.records.n,
        Some(session.encryption_public_key()),
        session.mask_public_keys(),
    )
    .await?;
    let mut protocol = Protocol {
        args,
        client,
        store,
        budget,
        prepared,
        computation,
        session,
        rng,
        iterations,
        roster: RosterGuard::new(prepared.expected_roster),
        sent: Sent::default(),
        resends: 0,
    };
    protocol.run().await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 22: a minority threshold is refused unless the operator allows it.
    #[test]
    fn a_minority_threshold_needs_the_operators_consent() {
        for (t, s) in [(2, 4), (1, 2), (3, 6), (2, 64)] {
            let refused = check_threshold(t, s, false).expect_err("t ≤ S/2");
            assert_eq!(refused.code(), 2);
            assert!(
                refused.to_string().contains("--allow-minority-threshold"),
                "{refused}"
            );
            assert!(check_threshold(t, s, true).is_ok());
        }
        for (t, s) in [(2, 3), (3, 4), (2, 2), (43, 64)] {
            assert!(check_threshold(t, s, false).is_ok(), "t = {t}, S = {s}");
        }
    }
}
