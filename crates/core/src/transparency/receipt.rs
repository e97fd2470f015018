//! Receipts: the evidence that one ledger event is in a log, checkable offline by anyone who
//! has the log's verifier key. A receipt carries the leaf, its index, its RFC 6962 §2.1.1 audit
//! path and the C2SP signed checkpoint of the tree it was proved in; verifying it checks the
//! note's Ed25519 signature, reads the checkpoint, and recomputes the root from the leaf hash
//! and the path (RFC 9162 §2.1.3.2). A [`ConsistencyProof`] between two verified checkpoints
//! of the same log shows that the later tree extends the earlier one (RFC 9162 §2.1.4.2).
//!
//! The JSON field names are an external interface (issue 39): `leaf` (base64 of the leaf
//! bytes), `leaf_index`, `inclusion_proof` (base64 hashes), `checkpoint` (the signed note), and
//! `proof` for a consistency proof. Base64 is the standard alphabet with padding (RFC 4648 §4).

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};

use super::event::{EventError, LedgerEvent};
use super::merkle::{self, Hash, MerkleError};
use super::note::{Checkpoint, LogVerifier, NoteError};

/// Why a receipt or a consistency proof does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReceiptError {
    #[error("the verifier key: {0}")]
    Key(NoteError),
    #[error("the checkpoint: {0}")]
    Checkpoint(NoteError),
    #[error("{field} is not standard base64")]
    Base64 { field: &'static str },
    #[error("{field} holds {len} bytes, not a 32-byte hash")]
    HashLength { field: &'static str, len: usize },
    #[error("the leaf is not in the checkpoint's tree: {0}")]
    Inclusion(MerkleError),
    #[error("the checkpoints are of different logs: {old:?} and {new:?}")]
    Origin { old: String, new: String },
    #[error("the new checkpoint does not extend the old one: {0}")]
    Consistency(MerkleError),
}

/// The receipt of one leaf, as the service returns it with a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    /// Base64 of the leaf bytes: the canonical JSON of the event ([`super::event::leaf_bytes`]).
    pub leaf: String,
    /// The leaf's index in the log, from 0.
    pub leaf_index: u64,
    /// Base64 of each hash of the audit path, from the leaf up.
    pub inclusion_proof: Vec<String>,
    /// The signed checkpoint (C2SP signed-note text) of the tree the path leads to.
    pub checkpoint: String,
}

/// What a verified receipt establishes: this leaf is at this index of the tree that the
/// log's key signed as `checkpoint`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedReceipt {
    pub checkpoint: Checkpoint,
    pub leaf: Vec<u8>,
    pub leaf_index: u64,
    pub leaf_hash: Hash,
}

impl VerifiedReceipt {
    /// The event the leaf records (it must be in canonical form).
    pub fn event(&self) -> Result<LedgerEvent, EventError> {
        LedgerEvent::from_leaf(&self.leaf)
    }
}

/// Decodes one base64 hash of exactly 32 bytes.
fn decode_hash(field: &'static str, text: &str) -> Result<Hash, ReceiptError> {
    let bytes = BASE64.decode(text).map_err(|_| ReceiptError::Base64 { field })?;
    let len = bytes.len();
    bytes
        .try_into()
        .map_err(|_| ReceiptError::HashLength { field, len })
}

/// Decodes a list of base64 hashes.
fn decode_hashes(field: &'static str, texts: &[String]) -> Result<Vec<Hash>, ReceiptError> {
    texts.iter().map(|t| decode_hash(field, t)).collect()
}

fn encode_hashes(hashes: &[Hash]) -> Vec<String> {
    hashes.iter().map(|h| BASE64.encode(h)).collect()
}

impl Receipt {
    /// The receipt of `leaf` at `leaf_index`, with its audit path in the tree that the signed
    /// `checkpoint` names.
    pub fn new(leaf: &[u8], leaf_index: u64, inclusion_proof: &[Hash], checkpoint: &str) -> Receipt {
        Receipt {
            leaf: BASE64.encode(leaf),
            leaf_index,
            inclusion_proof: encode_hashes(inclusion_proof),
            checkpoint: checkpoint.to_string(),
        }
    }

    /// Verifies the receipt against the verifier key string
    /// `<name>+<8 hex key ID>+<base64(0x01 ‖ Ed25519 public key)>`.
    pub fn verify(&self, verifier_key: &str) -> Result<VerifiedReceipt, ReceiptError> {
        let verifier = LogVerifier::from_verifier_key(verifier_key).map_err(ReceiptError::Key)?;
        self.verify_with(&verifier)
    }

    /// Verifies the receipt: the checkpoint's signature by `verifier`, then the audit path from
    /// SHA-256(0x00 ‖ leaf) to the checkpoint's root at its size (RFC 9162 §2.1.3.2). The
    /// caller checks that the checkpoint's origin is the log it expects.
    pub fn verify_with(&self, verifier: &LogVerifier) -> Result<VerifiedReceipt, ReceiptError> {
        let checkpoint = Checkpoint::open(&self.checkpoint, verifier).map_err(ReceiptError::Checkpoint)?;
        let leaf = BASE64
            .decode(&self.leaf)
            .map_err(|_| ReceiptError::Base64 { field: "leaf" })?;
        let proof = decode_hashes("inclusion_proof", &self.inclusion_proof)?;
        let leaf_hash = merkle::leaf_hash(&leaf);
        merkle::verify_inclusion(
            self.leaf_index,
            checkpoint.size,
            &leaf_hash,
            &proof,
            &checkpoint.root,
        )
        .map_err(ReceiptError::Inclusion)?;
        Ok(VerifiedReceipt {
            checkpoint,
            leaf,
            leaf_index: self.leaf_index,
            leaf_hash,
        })
    }
}

/// A consistency proof as the ledger endpoint serves it: `{"proof": ["<base64 hash>", …]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsistencyProof {
    pub proof: Vec<String>,
}

impl ConsistencyProof {
    pub fn new(hashes: &[Hash]) -> ConsistencyProof {
        ConsistencyProof {
            proof: encode_hashes(hashes),
        }
    }

    /// Checks that `new` extends `old`; both must already be verified checkpoints.
    pub fn verify(&self, old: &Checkpoint, new: &Checkpoint) -> Result<(), ReceiptError> {
        verify_consistency(old, new, &decode_hashes("proof", &self.proof)?)
    }
}

/// Checks that the verified checkpoint `new` is an append-only extension of the verified
/// checkpoint `old` of the same log (same origin): PROOF(old.size, D\[new.size\]) leads from
/// old.root to new.root (RFC 9162 §2.1.4.2). A witness keeps `old` and asks for the proof.
pub fn verify_consistency(old: &Checkpoint, new: &Checkpoint, proof: &[Hash]) -> Result<(), ReceiptError> {
    if old.origin != new.origin {
        return Err(ReceiptError::Origin {
            old: old.origin.clone(),
            new: new.origin.clone(),
        });
    }
    merkle::verify_consistency(old.size, new.size, &old.root, &new.root, proof)
        .map_err(ReceiptError::Consistency)
}

#[cfg(test)]
#[path = "receipt_tests.rs"]
mod tests;
