//! The command line of `privpca site`. Every flag has an environment fallback
//! (`PRIVPCA_SITE_*`); the token's value is never shown in help or debug output.

use std::fmt;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use reqwest::Url;

use crate::ingest::Format;

/// Take part in a study as one site: join it, and contribute this site's clipped, noised and
/// masked share of every round. Raw data never leaves this process.
#[derive(Args, Clone)]
pub struct SiteArgs {
    /// Base URL of the coordinator (e.g. `https://privpca.example.org`).
    #[arg(long, env = "PRIVPCA_SITE_SERVER")]
    pub server: Url,
    /// This site's study token (sent as a bearer token).
    #[arg(long, env = "PRIVPCA_SITE_TOKEN", hide_env_values = true)]
    pub token: String,
    /// The site's records: one row per individual, d columns.
    #[arg(long, env = "PRIVPCA_SITE_DATA")]
    pub data: PathBuf,
    /// Format of `--data`; by default from its extension (.csv, .npy, .json).
    #[arg(long, value_enum, env = "PRIVPCA_SITE_FORMAT")]
    pub format: Option<DataFormat>,
    /// The zCDP budget ρ that the ledger holds for this data (stated on first use; later uses
    /// must state the same value).
    #[arg(long, env = "PRIVPCA_SITE_BUDGET_RHO")]
    pub budget_rho: f64,
    /// The δ budget that the ledger holds for this data.
    #[arg(long, env = "PRIVPCA_SITE_BUDGET_DELTA", default_value_t = 0.0)]
    pub budget_delta: f64,
    /// This site's ledger (a SQLite file, created on first use): one budget for the data it
    /// protects, charged once per study.
    #[arg(long, env = "PRIVPCA_SITE_LEDGER")]
    pub ledger: PathBuf,
    /// The service's verifier key (`GET /v1/ledger-key`, printed at its start), to check the
    /// study log's checkpoints with. Without it the site pins the key the service serves at
    /// first contact beside its ledger (trust on first use).
    #[arg(long, env = "PRIVPCA_SITE_LEDGER_KEY")]
    pub ledger_key: Option<String>,
    /// How long one poll for the next task may wait at the server, in seconds.
    #[arg(long, env = "PRIVPCA_SITE_WAIT_SECONDS", default_value_t = 20,
          value_parser = clap::value_parser!(u64).range(1..=300))]
    pub wait_seconds: u64,
    /// Give up after this many seconds of consecutive network failures.
    #[arg(long, env = "PRIVPCA_SITE_GIVE_UP_SECONDS", default_value_t = 300,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub give_up_seconds: u64,
    /// The roster hash agreed with the other sites' operators (64 hex digits): the site refuses
    /// a roster whose hash differs, before sending anything that depends on it. Without it, the
    /// site prints the hash for the operators to compare.
    #[arg(long, env = "PRIVPCA_SITE_EXPECT_ROSTER_HASH")]
    pub expect_roster_hash: Option<String>,
    /// Take part in a `federated_power` study whose threshold t is below the quorum
    /// ⌊(S + c)/2⌋ + 1 (a majority when c = 0). Off by default: a coalition of the coordinator
    /// with the other sites sees this site's release with noise variance (mΔ)²/t only. The site
    /// still waits for a quorum of confirmations of each round before it reveals a share.
    #[arg(long, env = "PRIVPCA_SITE_ALLOW_MINORITY_THRESHOLD")]
    pub allow_minority_threshold: bool,
    /// How many other sites of a `federated_power` study this site assumes may collude with a
    /// coordinator that lies (c). It refuses a study unless t > c and 2t − c > S (unless
    /// --allow-minority-threshold), and reveals a round's shares only after ⌊(S + c)/2⌋ + 1
    /// survivors confirmed the same transcript (docs/design/federation.md, "The consistency
    /// round").
    #[arg(long, env = "PRIVPCA_SITE_COLLUDING_SITES", default_value_t = 0)]
    pub colluding_sites: u32,
    /// A test hook, not for operators: after sending round N's unmask answer
    /// (`federated_power`), stage N's release (CAPE) or exchange N's value (`gossip_power`)
    /// the site stops answering (it stays up, silent, as if it had crashed), so a test can kill
    /// it at a known protocol point.
    #[arg(long, hide = true, env = "PRIVPCA_SITE_TEST_STOP_AFTER_ROUND")]
    pub test_stop_after_round: Option<u32>,
}

impl fmt::Debug for SiteArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SiteArgs")
            .field("server", &self.server.as_str())
            .field("token", &"<hidden>")
            .field("data", &self.data)
            .field("format", &self.format)
            .field("budget_rho", &self.budget_rho)
            .field("budget_delta", &self.budget_delta)
            .field("ledger", &self.ledger)
            .field("ledger_key", &self.ledger_key)
            .field("wait_seconds", &self.wait_seconds)
            .field("give_up_seconds", &self.give_up_seconds)
            .field("expect_roster_hash", &self.expect_roster_hash)
            .field("allow_minority_threshold", &self.allow_minority_threshold)
            .field("colluding_sites", &self.colluding_sites)
            .field("test_stop_after_round", &self.test_stop_after_round)
            .finish()
    }
}

/// The format of the data file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DataFormat {
    Csv,
    Npy,
    Json,
}

impl DataFormat {
    /// The format named by a file's extension (case-insensitive), if it is one of ours.
    pub fn from_path(path: &Path) -> Option<DataFormat> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "csv" => Some(DataFormat::Csv),
            "npy" => Some(DataFormat::Npy),
            "json" => Some(DataFormat::Json),
            _ => None,
        }
    }

    /// `explicit` if given, else the format of `path`'s extension.
    pub fn resolve(explicit: Option<DataFormat>, path: &Path) -> Result<DataFormat, String> {
        explicit.or_else(|| DataFormat::from_path(path)).ok_or_else(|| {
            format!(
                "cannot tell the format of {} from its extension (.csv, .npy or .json); pass --format",
                path.display()
            )
        })
    }

    pub fn ingest_format(self) -> Format {
        match self {
            DataFormat::Csv => Format::Csv,
            DataFormat::Npy => Format::Npy,
            DataFormat::Json => Format::Json,
        }
    }
}

#[cfg(test)]
#[path = "args_tests.rs"]
mod tests;
