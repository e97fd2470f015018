//! `privpca site`: one site's client of a study (docs/design/federation.md "Site client").
//!
//! It reads the study (`GET /v1/site/study`), loads and clips its records with the service's
//! ingest code, checks d (and, where n is public, n ≤ `max_site_samples`), the study's terms
//! (noise against cost, fixed-point encoding, a majority threshold unless
//! `--allow-minority-threshold`) and its local ledger (one SQLite file, one budget for the data
//! it protects), and only then joins. It fixes the first roster it is shown, prints its hash
//! (`roster hash ...`) and refuses a mismatch with `--expect-roster-hash` or any later change
//! (`roster.rs`); before every round it checks the iterate it was sent. It then follows the coordinator's
//! long-polled tasks: share its key shares, charge its ledger just before the first masked
//! contribution, contribute each round, answer unmask requests, and stop when the study is
//! over. Raw data and unmasked values never leave the process and are never printed.
//!
//! The steps live in `run.rs` (the whole client and its safety rules), `prepare.rs` (read and
//! check the study, load the data, join), `ledger.rs` (the local budget and the one charge);
//! each protocol's own steps are in its folder (`crate::protocols::power::site`, the rounds;
//! `crate::protocols::cape::site`, the CAPE releases; `crate::protocols::gossip::site`, the
//! agent), reached through `crate::protocols::StudyProtocol`.
//!
//! Progress goes to stderr, one line per step, each starting `privpca site: `:
//! `joined as site i of S ...`, `waiting for enrolment ...`, `roster hash ...`, `keys shared ...`,
//! `charged ...`, `round r/L contributed ...`, `unmask r sent ...`, `finished: ...`, and
//! `error: ...` before a non-zero exit.
//!
//! Exit codes: 0 the study succeeded (also when this site was dropped on the way; the last
//! line says so); 1 the study failed or was cancelled, or this site was dropped from an
//! unfinished study; 2 refused before or instead of taking part (usage, data, ledger, token);
//! 3 protocol violation (the server refused a request, asked for something the protocol does
//! not allow, or showed this site a round or stage its peers did not confirm: the consistency
//! round); 4 the network kept failing past `--give-up-seconds`.

pub mod args;
mod data;
pub(crate) mod http;
pub(crate) mod ledger;
pub(crate) mod prepare;
pub(crate) mod prepared;
pub(crate) mod roster;
pub(crate) mod run;
pub(crate) mod witness;

use std::fmt;
use std::process::ExitCode;

pub use args::{DataFormat, SiteArgs};
pub use http::{ALREADY_RECEIVED, Class, Traffic, classify};

/// The prefix of every line the client prints.
const PREFIX: &str = "privpca site";

/// One progress line on stderr.
pub(crate) fn progress(message: &str) {
    eprintln!("{PREFIX}: {message}");
}

/// Why the client stopped without success; each kind has its exit code.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Failure {
    /// The study failed or was cancelled, or this site was dropped (exit 1).
    Study(String),
    /// Refused before or instead of taking part: usage, data, ledger, token (exit 2).
    Refused(String),
    /// The server broke the protocol or refused a request (exit 3).
    Protocol(String),
    /// The network kept failing (exit 4).
    Network(String),
}

impl Failure {
    fn code(&self) -> u8 {
        match self {
            Failure::Study(_) => 1,
            Failure::Refused(_) => 2,
            Failure::Protocol(_) => 3,
            Failure::Network(_) => 4,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Study(m) | Failure::Refused(m) | Failure::Protocol(m) | Failure::Network(m) => {
                f.write_str(m)
            }
        }
    }
}

impl From<http::HttpError> for Failure {
    fn from(e: http::HttpError) -> Failure {
        match e {
            http::HttpError::Unauthorized(_) => Failure::Refused(format!("{e} (check --token)")),
            http::HttpError::Protocol { .. } => Failure::Protocol(format!("the server refused: {e}")),
            http::HttpError::GaveUp { .. } => Failure::Network(e.to_string()),
        }
    }
}

/// Runs the site client to the end of its study and returns the process exit code (see the
/// module documentation).
pub fn run(args: SiteArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            progress(&format!("error: cannot start the async runtime: {e}"));
            return ExitCode::from(Failure::Refused(String::new()).code());
        }
    };
    match runtime.block_on(run::run(&args)).0 {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            progress(&format!("error: {failure}"));
            ExitCode::from(failure.code())
        }
    }
}

/// Runs the site client to the end of its study on the caller's runtime: what `privpca site`
/// does, for a process that runs many sites as async tasks, each with its own arguments, ledger
/// and HTTP connection (the many-sites harness, tests/many_sites.rs). The error is the exit code
/// `privpca site` would return and the message it would print.
pub async fn run_in(args: &SiteArgs) -> Result<(), (u8, String)> {
    run_counted(args).await.0
}

/// As [`run_in`], with what the site exchanged with the coordinator (the many-sites bench
/// divides it by the rounds).
pub async fn run_counted(args: &SiteArgs) -> (Result<(), (u8, String)>, Traffic) {
    let (outcome, traffic) = run::run(args).await;
    (
        outcome.map_err(|failure| (failure.code(), failure.to_string())),
        traffic,
    )
}

#[cfg(test)]
mod tests;
