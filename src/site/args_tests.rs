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
