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
    /// Take part in a `federated_power` study whose threshold t is at most half the sites. Off
    /// by default: with t ≤ S/2 a coordinator that lies can collect both secrets of a site from
    /// two disjoint groups, and a coalition of the coordinator with the other sites sees this
    /// site's release with noise variance (mΔ)²/t only.
    #[arg(long, env = "PRIVPCA_SITE_ALLOW_MINORITY_THRESHOLD")]
    pub allow_minority_threshold: bool,
    /// A test hook, not for operators: after sending round N's unmask answer the site stops
    /// answering (it stays up, silent, as if it had crashed), so a test can kill it at a known
    /// protocol point.
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
            .field("wait_seconds", &self.wait_seconds)
            .field("give_up_seconds", &self.give_up_seconds)
            .field("expect_roster_hash", &self.expect_roster_hash)
            .field("allow_minority_threshold", &self.allow_minority_threshold)
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
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        site: SiteArgs,
    }

    #[test]
    fn the_format_follows_the_extension_unless_given() {
        assert_eq!(
            DataFormat::from_path(Path::new("a/site.csv")),
            Some(DataFormat::Csv)
        );
        assert_eq!(
            DataFormat::from_path(Path::new("site.NPY")),
            Some(DataFormat::Npy)
        );
        assert_eq!(
            DataFormat::from_path(Path::new("site.Json")),
            Some(DataFormat::Json)
        );
        assert_eq!(DataFormat::from_path(Path::new("site.txt")), None);
        assert_eq!(DataFormat::from_path(Path::new("site")), None);
        assert_eq!(
            DataFormat::resolve(Some(DataFormat::Json), Path::new("site.csv")),
            Ok(DataFormat::Json)
        );
        assert_eq!(DataFormat::resolve(None, Path::new("x.npy")), Ok(DataFormat::Npy));
        let err = DataFormat::resolve(None, Path::new("x.dat")).expect_err("unknown");
        assert!(err.contains("--format"), "{err}");
    }

    #[test]
    fn the_invocation_of_the_issue_parses_and_the_token_stays_hidden() {
        let cli = Cli::try_parse_from([
            "site",
            "--server",
            "http://127.0.0.1:8080",
            "--token",
            "pps_secret",
            "--data",
            "site.csv",
            "--budget-rho",
            "1.5",
            "--ledger",
            "ledger.db",
        ])
        .expect("parses");
        let args = cli.site;
        assert_eq!(args.server.as_str(), "http://127.0.0.1:8080/");
        assert_eq!(args.budget_rho, 1.5);
        assert_eq!(args.budget_delta, 0.0);
        assert_eq!(args.format, None);
        assert_eq!(args.wait_seconds, 20);
        assert_eq!(args.expect_roster_hash, None);
        assert!(!args.allow_minority_threshold);
        assert!(!format!("{args:?}").contains("pps_secret"));

        let with_format = Cli::try_parse_from([
            "site",
            "--server",
            "http://h",
            "--token",
            "t",
            "--data",
            "d",
            "--format",
            "npy",
            "--budget-rho",
            "1",
            "--budget-delta",
            "1e-6",
            "--ledger",
            "l",
            "--expect-roster-hash",
            "00ff",
            "--allow-minority-threshold",
        ])
        .expect("parses");
        assert_eq!(with_format.site.expect_roster_hash.as_deref(), Some("00ff"));
        assert!(with_format.site.allow_minority_threshold);
        assert_eq!(with_format.site.format, Some(DataFormat::Npy));
        assert_eq!(with_format.site.budget_delta, 1e-6);
    }
}
