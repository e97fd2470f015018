//! Signed round transcripts: the consistency round of a `federated_power` study against a
//! coordinator that lies (docs/design/federation.md, "The consistency round"; Bonawitz et al.
//! 2017 §4, ConsistencyCheck, adapted).
//!
//! Every site of the fixed roster publishes an Ed25519 verifying key at join (part of the
//! roster, so of the roster hash). In round r it signs two statements, each over bytes that
//! name the study, the round and the hash of the iterate it received:
//!
//! - **contribution** (sent with its masked vector): "I masked round r's vector of iterate H
//!   with the roster R" — [`contribution_message`];
//! - **confirmation** (the consistency round, after the coordinator has fixed the round's
//!   survivors U and dropped D): "round r of iterate H with roster R has survivors U and
//!   dropped D" — [`confirmation_message`]. A site signs at most one confirmation per round.
//!
//! Before a site reveals any share of round r it checks, against its own view (its iterate
//! hash, the roster it masked with, and the sets it is asked to unmask): every survivor's
//! contribution signature, and confirmations of the identical transcript by at least
//! [`quorum`] distinct survivors. Both are plain functions of public bytes, so the
//! coordinator checks the same signatures when they arrive (a clear 422 instead of a round
//! that sites refuse later).

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};
use uuid::Uuid;
use zeroize::Zeroize;

use super::wire;

/// Domain tags: a signature for one statement can never be read as the other.
const CONTRIBUTION_TAG: &[u8] = b"privpca/federated_power/contribution/v1";
const CONFIRMATION_TAG: &[u8] = b"privpca/federated_power/confirmation/v1";
const ITERATE_TAG: &[u8] = b"privpca/federated_power/iterate/v1";
const STAGE_TAG: &[u8] = b"privpca/stage/confirmation/v1";

/// A signature or key that does not decode or does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TranscriptError {
    #[error("a verifying key is malformed: {0}")]
    Key(String),
    #[error("a signature is malformed: {0}")]
    Malformed(String),
    #[error("the signature of site {0} does not verify")]
    Invalid(u32),
}

/// SHA-256 of the iterate of `round` as it travels: its shape and the little-endian bytes of its
/// column-major entries (the decoded base64 of the task's `iterate`).
pub fn iterate_hash(study: Uuid, round: u32, rows: usize, cols: usize, bytes: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(ITERATE_TAG);
    h.update(study.as_bytes());
    h.update(round.to_be_bytes());
    h.update((rows as u64).to_be_bytes());
    h.update((cols as u64).to_be_bytes());
    h.update(bytes);
    h.finalize().into()
}

/// The bytes a round's iterate hash covers: the task's values, followed in a power round of a
/// study with a clip by the clip norm c (f64, little-endian), so that what a site signs names
/// the c it clipped at, and in a study with a centre by the tag `centre` and μ̂ (d f64,
/// little-endian), so that it names the centre too. The values' length is fixed by the round's
/// shape, c is 8 bytes and the tag marks where μ̂ starts, so the parts never run together
/// ambiguously; which parts a round carries is fixed by the study's public configuration.
pub fn round_bytes(values: &[u8], clip_norm: Option<f64>, center: Option<&[f64]>) -> Vec<u8> {
    let mut out = values.to_vec();
    if let Some(c) = clip_norm {
        out.extend_from_slice(&c.to_le_bytes());
    }
    if let Some(mu) = center {
        out.extend_from_slice(CENTER_TAG);
        out.extend(mu.iter().flat_map(|v| v.to_le_bytes()));
    }
    out
}

/// Marks the start of a round's centre in [`round_bytes`].
const CENTER_TAG: &[u8] = b"centre";

/// What a site saw of round `round` before it contributed.
#[derive(Debug, Clone, Copy)]
pub struct RoundView<'a> {
    pub study: Uuid,
    pub round: u32,
    /// [`iterate_hash`] of the iterate it multiplied.
    pub iterate: &'a [u8; 32],
    /// The roster it masked with (ascending).
    pub roster: &'a [u32],
}

fn put_set(out: &mut Vec<u8>, set: &[u32]) {
    out.extend_from_slice(&(set.len() as u32).to_be_bytes());
    for i in set {
        out.extend_from_slice(&i.to_be_bytes());
    }
}

fn put_view(out: &mut Vec<u8>, tag: &[u8], view: &RoundView<'_>) {
    out.extend_from_slice(tag);
    out.extend_from_slice(view.study.as_bytes());
    out.extend_from_slice(&view.round.to_be_bytes());
    out.extend_from_slice(view.iterate);
    put_set(out, view.roster);
}

/// The bytes a site signs with its masked vector.
pub fn contribution_message(view: &RoundView<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(128 + 4 * view.roster.len());
    put_view(&mut out, CONTRIBUTION_TAG, view);
    out
}

/// The bytes a survivor signs in the consistency round: its view and the sets it is asked to
/// unmask. Every field is length-prefixed, so two different transcripts never share bytes.
pub fn confirmation_message(view: &RoundView<'_>, survivors: &[u32], dropped: &[u32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(128 + 4 * (view.roster.len() + survivors.len() + dropped.len()));
    put_view(&mut out, CONFIRMATION_TAG, view);
    put_set(&mut out, survivors);
    put_set(&mut out, dropped);
    out
}

/// The bytes a site of a CAPE or gossip study signs before it releases anything in `stage`:
/// the study, the protocol (`algorithm`), the stage, the roster it was shown and the hash of the
/// calibration and inputs it derived from them (`calibration`: its noise parameters, and the
/// public input it projects by, if any). Two sites that sign the same bytes drew their noise for
/// the same roster and calibration.
pub fn stage_message(
    study: Uuid,
    algorithm: &str,
    stage: u32,
    roster: &[u32],
    calibration: &[u8; 32],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(96 + algorithm.len() + 4 * roster.len());
    out.extend_from_slice(STAGE_TAG);
    out.extend_from_slice(study.as_bytes());
    out.extend_from_slice(&(algorithm.len() as u32).to_be_bytes());
    out.extend_from_slice(algorithm.as_bytes());
    out.extend_from_slice(&stage.to_be_bytes());
    put_set(&mut out, roster);
    out.extend_from_slice(calibration);
    out
}

/// SHA-256 of length-prefixed parts (a calibration as JSON, a public input's bytes).
pub fn digest(parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha256::new();
    for part in parts {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part);
    }
    h.finalize().into()
}

/// The least number of distinct confirmations of one transcript a site needs before it
/// reveals a share, among `sites` roster members of which up to `colluding` may sign anything:
/// the smallest q with 2q − c > S. Two different transcripts of one round with q confirmations
/// each would share at least 2q − S > c signers, so at least one honest site would have signed
/// both, which it never does (proof: docs/design/federation.md, "The consistency round").
pub fn quorum(sites: u32, colluding: u32) -> u32 {
    ((u64::from(sites) + u64::from(colluding)) / 2 + 1) as u32
}

/// A site's signing key for one study, derived from 32 secret bytes of its kept session seed.
pub struct SiteSigner {
    key: SigningKey,
}

impl SiteSigner {
    pub fn from_seed(mut seed: [u8; 32]) -> SiteSigner {
        let key = SigningKey::from_bytes(&seed);
        seed.zeroize();
        SiteSigner { key }
    }

    /// The verifying key as it travels (base64, 32 bytes).
    pub fn public_key(&self) -> String {
        wire::encode(self.key.verifying_key().as_bytes())
    }

    /// Signs round `round`'s contribution statement over the iterate as the task carried it
    /// (base64 of `rows`×`cols` f64) and the roster: the signature and the iterate's hash.
    pub fn sign_contribution(
        &self,
        study: Uuid,
        round: u32,
        (rows, cols): (usize, usize),
        iterate: &str,
        roster: &[u32],
    ) -> Result<(String, [u8; 32]), wire::WireError> {
        let bytes = wire::decode(iterate)?;
        let hash = iterate_hash(study, round, rows, cols, &bytes);
        let view = RoundView {
            study,
            round,
            iterate: &hash,
            roster,
        };
        Ok((self.sign(&contribution_message(&view)), hash))
    }

    /// The signature of `message`, base64 (64 bytes). Ed25519 signatures are deterministic:
    /// the same message always gives the same bytes, also after a restart.
    pub fn sign(&self, message: &[u8]) -> String {
        wire::encode(&self.key.sign(message).to_bytes())
    }
}

/// A verifying key from base64 (32 bytes, a valid point).
pub fn verifying_key(text: &str) -> Result<VerifyingKey, TranscriptError> {
    let bytes = wire::decode_key(text).map_err(|e| TranscriptError::Key(e.to_string()))?;
    VerifyingKey::from_bytes(&bytes).map_err(|e| TranscriptError::Key(e.to_string()))
}

/// Checks `site`'s `signature` (base64) of `message` under `key` (strict verification: no
/// malleable or small-order forms).
pub fn verify(key: &VerifyingKey, site: u32, message: &[u8], signature: &str) -> Result<(), TranscriptError> {
    let bytes = wire::decode(signature).map_err(|e| TranscriptError::Malformed(e.to_string()))?;
    let bytes = <[u8; 64]>::try_from(bytes.as_slice())
        .map_err(|_| TranscriptError::Malformed(format!("expected 64 bytes, got {}", bytes.len())))?;
    key.verify_strict(message, &Signature::from_bytes(&bytes))
        .map_err(|_| TranscriptError::Invalid(site))
}

/// How many of `signed` (site, base64 signature; one per site) verify as `message` under their
/// site's key in `keys`, counting up to `enough` and stopping there: the count is
/// min(`enough`, the number that verify). A signature counts only under a key that is not of
/// small order, as [`verify`] requires.
///
/// The first `enough` candidates are checked together (`ed25519_dalek::verify_batch`, about
/// half the cost of checking them one by one for ten: docs/performance-federation.md); if that
/// batch fails, every candidate is checked on its own with [`verify`], so one bad signature
/// costs time, never a valid signer. Batch verification uses random linear combinations
/// derived from every input (deterministic, Fiat-Shamir), so a signature nobody holding its key
/// produced does not pass it except with negligible probability; it may accept an edge-case
/// encoding that strict verification refuses only when the key's holder made it, and a holder
/// can sign anything anyway.
pub fn count_verified<'a>(
    keys: &std::collections::BTreeMap<u32, VerifyingKey>,
    message: &[u8],
    signed: impl IntoIterator<Item = (u32, &'a str)>,
    enough: usize,
) -> usize {
    if enough == 0 {
        return 0;
    }
    let candidates: Vec<(u32, VerifyingKey, Signature)> = signed
        .into_iter()
        .filter_map(|(site, text)| {
            let key = keys.get(&site).filter(|k| !k.is_weak())?;
            let bytes = <[u8; 64]>::try_from(wire::decode(text).ok()?.as_slice()).ok()?;
            Some((site, *key, Signature::from_bytes(&bytes)))
        })
        .collect();
    if candidates.len() >= enough {
        let head = &candidates[..enough];
        let messages = vec![message; head.len()];
        let signatures: Vec<Signature> = head.iter().map(|c| c.2).collect();
        let keys: Vec<VerifyingKey> = head.iter().map(|c| c.1).collect();
        if ed25519_dalek::verify_batch(&messages, &signatures, &keys).is_ok() {
            return enough;
        }
    }
    candidates
        .iter()
        .filter(|(_, key, signature)| key.verify_strict(message, signature).is_ok())
        .take(enough)
        .count()
}

/// Checks that a signature is well-formed (64 bytes of base64) without verifying it.
pub fn check_shape(signature: &str) -> Result<(), TranscriptError> {
    let bytes = wire::decode(signature).map_err(|e| TranscriptError::Malformed(e.to_string()))?;
    if bytes.len() == 64 {
        Ok(())
    } else {
        Err(TranscriptError::Malformed(format!(
            "expected 64 bytes, got {}",
            bytes.len()
        )))
    }
}

#[cfg(test)]
#[path = "transcript_tests.rs"]
mod tests;
