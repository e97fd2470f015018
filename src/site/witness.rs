//! The site as a witness of its study's transparency log (issue 39; docs/design/ledger.md,
//! "The transparency log"): at every phase the server gives it, `privpca site` fetches the
//! study log's signed checkpoint, checks the signature with the service's verifier key, and
//! checks that the log extends the checkpoint it kept at the previous phase (RFC 6962
//! consistency proof). It keeps the last checkpoint beside its own ledger,
//! `<ledger>.study-<study id>.checkpoint`, so a restarted site goes on from it.
//!
//! The verifier key is `--ledger-key` when given; otherwise the one the service serves at
//! `GET /v1/ledger-key` on first contact, pinned in the kept file (trust on first use: a
//! service that lies from the first answer is not caught by this, only one that changes its
//! story later). A log that shrank, forked, changed origin or is refused as tampered stops
//! the site before it sends anything more (exit 3).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::Failure;
use super::http::SiteClient;
use crate::transparency::{Checkpoint, ConsistencyProof, LogVerifier};

/// What the site keeps: the pinned verifier key and the last checkpoint it verified.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Kept {
    verifier_key: String,
    checkpoint: String,
}

/// The study log's witness of one site.
pub(crate) struct StudyWitness {
    file: PathBuf,
    study: Uuid,
    pinned: Option<String>,
    last: Option<String>,
}

fn broke(what: String) -> Failure {
    Failure::Protocol(format!("the study's transparency log: {what}"))
}

impl StudyWitness {
    /// The witness of `study`, with what it kept beside `ledger` (if anything) and the
    /// operator's verifier key (if given).
    pub(crate) fn open(
        ledger: &Path,
        study: Uuid,
        verifier_key: Option<&str>,
    ) -> Result<StudyWitness, Failure> {
        let file = PathBuf::from(format!("{}.study-{study}.checkpoint", ledger.display()));
        let kept: Option<Kept> = match std::fs::read_to_string(&file) {
            Ok(text) => Some(serde_json::from_str(&text).map_err(|e| {
                Failure::Refused(format!("{} is not a kept checkpoint: {e}", file.display()))
            })?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(Failure::Refused(format!("reading {}: {e}", file.display()))),
        };
        if let (Some(given), Some(kept)) = (verifier_key, &kept)
            && given.trim() != kept.verifier_key
        {
            return Err(Failure::Refused(format!(
                "--ledger-key differs from the key pinned in {}",
                file.display()
            )));
        }
        Ok(StudyWitness {
            file,
            study,
            pinned: verifier_key
                .map(|k| k.trim().to_string())
                .or_else(|| kept.as_ref().map(|k| k.verifier_key.clone())),
            last: kept.map(|k| k.checkpoint),
        })
    }

    /// Checks the study's log now against the last checkpoint kept, and keeps the new one.
    pub(crate) async fn observe(&mut self, client: &SiteClient) -> Result<(), Failure> {
        let key = match &self.pinned {
            Some(key) => key.clone(),
            None => {
                let served: serde_json::Value = client.get("/v1/ledger-key", Default::default()).await?;
                let key = served["verifier_key"]
                    .as_str()
                    .ok_or_else(|| broke("the service serves no verifier key".into()))?
                    .to_string();
                self.pinned = Some(key.clone());
                key
            }
        };
        let verifier =
            LogVerifier::from_verifier_key(&key).map_err(|e| broke(format!("the verifier key: {e}")))?;
        let served: serde_json::Value = client
            .get("/v1/site/ledger/checkpoint", Default::default())
            .await?;
        let text = served["checkpoint"]
            .as_str()
            .ok_or_else(|| broke("the answer holds no checkpoint".into()))?;
        let new = Checkpoint::open(text, &verifier).map_err(|e| broke(format!("the checkpoint: {e}")))?;
        let expected = format!("/studies/{}", self.study);
        if !new.origin.ends_with(&expected) {
            return Err(broke(format!(
                "the checkpoint names {}, not this study",
                new.origin
            )));
        }
        if let Some(last) = &self.last {
            let old =
                Checkpoint::open(last, &verifier).map_err(|e| broke(format!("the kept checkpoint: {e}")))?;
            self.extends(client, &old, &new).await?;
        }
        self.keep(&key, text)
    }

    /// Checks that `new` extends `old`: same origin, no fewer leaves, and a consistency proof
    /// from the server that verifies.
    async fn extends(&self, client: &SiteClient, old: &Checkpoint, new: &Checkpoint) -> Result<(), Failure> {
        if old.origin != new.origin {
            return Err(broke(format!(
                "its origin changed from {} to {}",
                old.origin, new.origin
            )));
        }
        if new.size < old.size {
            return Err(broke(format!(
                "it shrank from {} to {} leaves",
                old.size, new.size
            )));
        }
        if new == old {
            // The same tree: nothing to prove (most phases: a study's log grows only once).
            return Ok(());
        }
        let path = format!("/v1/site/ledger/consistency?from={}&to={}", old.size, new.size);
        let proof: ConsistencyProof = client.get(&path, Default::default()).await?;
        proof.verify(old, new).map_err(|e| {
            broke(format!(
                "it does not extend the checkpoint kept at size {}: {e}",
                old.size
            ))
        })
    }

    /// Keeps `checkpoint` (and the pinned key) in the file, atomically.
    fn keep(&mut self, key: &str, checkpoint: &str) -> Result<(), Failure> {
        if self.last.as_deref() == Some(checkpoint) {
            return Ok(());
        }
        let kept = Kept {
            verifier_key: key.to_string(),
            checkpoint: checkpoint.to_string(),
        };
        let text = serde_json::to_string_pretty(&kept).map_err(|e| Failure::Refused(e.to_string()))?;
        let temp = self.file.with_extension("checkpoint.tmp");
        let write = std::fs::write(&temp, text).and_then(|()| std::fs::rename(&temp, &self.file));
        write.map_err(|e| {
            Failure::Refused(format!("keeping the checkpoint in {}: {e}", self.file.display()))
        })?;
        self.last = Some(checkpoint.to_string());
        Ok(())
    }
}

#[cfg(test)]
#[path = "witness_tests.rs"]
mod tests;
