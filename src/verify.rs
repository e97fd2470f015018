//! `privpca verify` (issue 39): checks a receipt offline against the service's verifier key,
//! and, given a saved checkpoint and the service's address, that the dataset's log today is an
//! append-only extension of it (what a witness does). Exit 0 when everything verifies; 1 with
//! the reason on standard error otherwise.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use crate::transparency::{Checkpoint, ConsistencyProof, LogVerifier, Receipt};

/// The arguments of `privpca verify`.
#[derive(Debug, Clone, Args)]
pub struct VerifyArgs {
    /// The service's verifier key (`GET /v1/ledger-key`, printed at its start).
    #[arg(long)]
    pub key: String,
    /// A receipt (`{"leaf", "leaf_index", "inclusion_proof", "checkpoint"}`) to check.
    pub receipt: Option<PathBuf>,
    /// A checkpoint (signed note) saved earlier: check that the log today extends it.
    #[arg(long, requires = "server")]
    pub checkpoint: Option<PathBuf>,
    /// The service to ask for the current checkpoint and the consistency proof.
    #[arg(long, requires = "checkpoint")]
    pub server: Option<String>,
    /// The API key of the dataset's tenant (for `--server`).
    #[arg(long, env = "PRIVPCA_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
}

/// Runs `privpca verify`.
pub fn run(args: VerifyArgs) -> ExitCode {
    match check(&args) {
        Ok(lines) => {
            for line in lines {
                println!("{line}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("privpca verify: not valid: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn check(args: &VerifyArgs) -> anyhow::Result<Vec<String>> {
    let verifier =
        LogVerifier::from_verifier_key(args.key.trim()).map_err(|e| anyhow::anyhow!("--key: {e}"))?;
    anyhow::ensure!(
        args.receipt.is_some() || args.checkpoint.is_some(),
        "give a receipt file, or --checkpoint with --server, or both"
    );
    let mut lines = Vec::new();
    if let Some(path) = &args.receipt {
        lines.push(check_receipt(path, &verifier)?);
    }
    if let (Some(path), Some(server)) = (&args.checkpoint, &args.server) {
        lines.push(check_extension(path, server, args.api_key.as_deref(), &verifier)?);
    }
    Ok(lines)
}

/// Checks a receipt file: signature, checkpoint and audit path.
pub fn check_receipt(path: &std::path::Path, verifier: &LogVerifier) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let receipt: Receipt =
        serde_json::from_str(&text).with_context(|| format!("{} is not a receipt", path.display()))?;
    let verified = receipt
        .verify_with(verifier)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(format!(
        "receipt valid: leaf {} of {} at size {}",
        verified.leaf_index, verified.checkpoint.origin, verified.checkpoint.size
    ))
}

/// The API path of a log, from its origin `<service origin>/datasets/<id>` (or `studies/<id>`).
fn log_path(origin: &str) -> anyhow::Result<String> {
    let mut parts = origin.rsplitn(3, '/');
    let (id, kind) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let id: uuid::Uuid = id
        .parse()
        .with_context(|| format!("the origin {origin:?} does not end in a log's id"))?;
    anyhow::ensure!(
        kind == "datasets" || kind == "studies",
        "the origin {origin:?} names no dataset or study"
    );
    Ok(format!("/v1/{kind}/{id}/ledger"))
}

/// Checks that the log named by the saved checkpoint at `path` today extends it: fetches the
/// current checkpoint and the consistency proof from `server`.
pub fn check_extension(
    path: &std::path::Path,
    server: &str,
    api_key: Option<&str>,
    verifier: &LogVerifier,
) -> anyhow::Result<String> {
    let saved = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    // A note ends with one newline; `jq -r .checkpoint > file` adds a second one.
    let saved = format!("{}\n", saved.trim_end_matches('\n'));
    let old = Checkpoint::open(&saved, verifier).map_err(|e| anyhow::anyhow!("the saved checkpoint: {e}"))?;
    let base = format!("{}{}", server.trim_end_matches('/'), log_path(&old.origin)?);
    let current: serde_json::Value = fetch(&format!("{base}/checkpoint"), api_key)?;
    let text = current["checkpoint"]
        .as_str()
        .context("the server's answer has no checkpoint")?;
    let new = Checkpoint::open(text, verifier).map_err(|e| anyhow::anyhow!("the current checkpoint: {e}"))?;
    anyhow::ensure!(
        new.size >= old.size,
        "the log shrank from {} to {} leaves",
        old.size,
        new.size
    );
    let proof: ConsistencyProof = serde_json::from_value(fetch(
        &format!("{base}/consistency?from={}&to={}", old.size, new.size),
        api_key,
    )?)
    .context("the server's consistency proof")?;
    proof.verify(&old, &new).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(format!(
        "log {} extends the saved checkpoint: size {} -> {}",
        new.origin, old.size, new.size
    ))
}

/// GETs `url` as JSON with the API key; a non-2xx answer is an error naming its status and body.
fn fetch(url: &str, api_key: Option<&str>) -> anyhow::Result<serde_json::Value> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut request = reqwest::Client::new().get(url);
        if let Some(key) = api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.with_context(|| format!("GET {url}"))?;
        let status = response.status();
        let body = response.text().await?;
        anyhow::ensure!(status.is_success(), "GET {url}: {status}: {body}");
        serde_json::from_str(&body).with_context(|| format!("GET {url}: not JSON"))
    })
}

#[cfg(test)]
#[path = "verify_tests.rs"]
mod tests;
