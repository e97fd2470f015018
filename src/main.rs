//! `privpca`: thin entry point. Configuration → telemetry → store (migrated) → HTTP server and
//! job runner, with graceful shutdown.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use privpca::config::Config;
use privpca::{serve, telemetry};

#[derive(Parser)]
#[command(name = "privpca", version, about = "Private PCA as a service")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the service (creates and migrates the SQLite database).
    Serve(Config),
    /// Print the OpenAPI document (the committed copy is openapi/openapi.json).
    Openapi,
    /// Exit 0 when the service at `--addr` answers `GET /healthz` with 200 (for container
    /// health checks, which have no curl).
    Healthcheck {
        #[arg(long, env = "PRIVPCA_HEALTHCHECK_ADDR", default_value = "127.0.0.1:8080")]
        addr: String,
    },
    /// Take part in a study as one site (joins, contributes each round, charges the local
    /// ledger). Exit codes: 0 succeeded, 1 study failed, 2 refused, 3 protocol violation,
    /// 4 network gave up.
    Site(privpca::site::SiteArgs),
    /// Check a receipt offline against the service's verifier key (`--key`), and with
    /// `--checkpoint OLD --server URL` that the log today extends a saved checkpoint. Exit 0
    /// when valid, 1 with the reason otherwise.
    Verify(privpca::verify::VerifyArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Openapi => {
            print!("{}", privpca::http::openapi::document());
            ExitCode::SUCCESS
        }
        Command::Healthcheck { addr } => match privpca::serve::healthcheck(&addr) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("unhealthy: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Site(args) => privpca::site::run(args),
        Command::Verify(args) => privpca::verify::run(args),
        Command::Serve(config) => {
            telemetry::init(&config.log_format);
            let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("cannot start the async runtime: {e}");
                    return ExitCode::FAILURE;
                }
            };
            match runtime.block_on(serve::serve(config)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!(error = %format!("{e:#}"), "privpca stopped with an error");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
