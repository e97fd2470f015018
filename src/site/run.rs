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
//! - a `federated_power` threshold must meet t > c and 2t − c > S for the operator's
//!   `--colluding-sites` c (the second waived by `--allow-minority-threshold`);
//! - nothing that removes a mask, reveals a share or draws noise for a round or stage is sent
//!   before a quorum of the roster signed the very transcript this site saw (the consistency
//!   round: `federation::transcript`); a site signs one transcript per round or stage, kept in
//!   its ledger before it is sent;
//! - every iterate is checked (shape, finite, orthonormal) before it is multiplied, and every
//!   round's encoding is checked to keep all of the noise
//!   ([`crate::algorithms::federated_power::site_contribution`]);
//! - at every phase, before anything of it is computed, the study's transparency log must
//!   verify with the service's key and extend the checkpoint kept at the phase before
//!   ([`next_task`], [`super::witness`]).

use std::time::Duration;

use super::args::SiteArgs;
use super::http::{SiteClient, Traffic};
use super::ledger::check_ledger;
use super::prepare::prepare;
use super::witness::StudyWitness;
use super::{Failure, progress};
use crate::federation::messages::SiteTask;
use crate::protocols::SiteRun;
use crate::store::StudyStatus;

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

pub(crate) fn finished(status: StudyStatus, reason: Option<String>) -> Result<(), Failure> {
    if status == StudyStatus::Succeeded {
        match &reason {
            Some(why) => progress(&format!(
                "finished: study succeeded; this site was dropped: {why}"
            )),
            None => progress("finished: study succeeded; this site took part to the end"),
        }
        return Ok(());
    }
    let status = status.as_str();
    let why = reason.unwrap_or_else(|| "no reason given".to_owned());
    progress(&format!("finished: study {status}: {why}"));
    Err(Failure::Study(format!("the study ended {status}: {why}")))
}

/// Most times in a row the same message is sent again on the server's request.
const MAX_RESENDS: u32 = 5;

/// Prints the study's status once each time the site starts waiting in it.
pub(crate) fn note_wait(last: &mut Option<StudyStatus>, status: StudyStatus) {
    if *last != Some(status) {
        progress(&match status {
            StudyStatus::Enrolling => "waiting for enrolment (study enrolling)".to_owned(),
            other => format!("waiting (study {})", other.as_str()),
        });
        *last = Some(status);
    }
}

/// Before a kept message is sent again because the server asked for `what` again (an answer
/// was lost): a short pause, and at most [`MAX_RESENDS`] times in a row, so that a server that
/// keeps asking for what it has gets no storm.
pub(crate) async fn before_resend(resends: &mut u32, what: &str) -> Result<(), Failure> {
    *resends += 1;
    if *resends > MAX_RESENDS {
        return Err(Failure::Protocol(format!(
            "the server keeps asking for {what}, sent {MAX_RESENDS} times already"
        )));
    }
    progress(&format!(
        "the server asked for {what} again; sending the same value"
    ));
    tokio::time::sleep(Duration::from_millis(500)).await;
    Ok(())
}

/// Sends a kept message again because the server asked for `what` again ([`before_resend`]):
/// the same bytes, never a fresh draw.
pub(crate) async fn resend<B: serde::Serialize>(
    client: &SiteClient,
    path: &str,
    request: &B,
    resends: &mut u32,
    what: &str,
) -> Result<(), Failure> {
    before_resend(resends, what).await?;
    client.post(path, request).await?;
    Ok(())
}

/// The whole client: prepare, check the ledger, join, follow the tasks. Returns the outcome and
/// what the client exchanged with the coordinator (also printed).
pub(crate) async fn run(args: &SiteArgs) -> (Result<(), Failure>, Traffic) {
    warn_plain_http(&args.server);
    let client = match SiteClient::new(
        args.server.clone(),
        args.token.clone(),
        Duration::from_secs(args.give_up_seconds),
    ) {
        Ok(client) => client,
        Err(e) => return (Err(Failure::Refused(e)), Traffic::default()),
    };
    let outcome = follow_study(args, &client).await;
    let traffic = client.traffic();
    progress(&format!(
        "traffic with the coordinator: {} requests, {} bytes sent, {} bytes received (bodies)",
        traffic.requests, traffic.sent, traffic.received
    ));
    (outcome, traffic)
}

async fn follow_study(args: &SiteArgs, client: &SiteClient) -> Result<(), Failure> {
    let (protocol, prepared) = prepare(args, client).await?;
    let (store, budget) = check_ledger(args, &prepared.view, &prepared.records, prepared.cost).await?;
    let run = SiteRun {
        args,
        client,
        store: &store,
        budget: &budget,
        prepared: &prepared,
    };
    let outcome = protocol.follow(run).await;
    store.close().await;
    outcome
}

/// The next task from the server (long poll of `path`); at every task that is not a wait (each
/// phase of the study), the study's transparency log is checked first ([`StudyWitness`]), so
/// nothing of the phase is computed or sent over a log that was rewritten.
pub(crate) async fn next_task(
    client: &SiteClient,
    path: &str,
    wait: Duration,
    witness: &mut StudyWitness,
) -> Result<SiteTask, Failure> {
    let task: SiteTask = client.get(path, wait).await?;
    if !matches!(task, SiteTask::Wait { .. }) {
        witness.observe(client).await?;
    }
    Ok(task)
}
