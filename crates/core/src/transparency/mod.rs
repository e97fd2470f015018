//! The transparency log of the ledger: one append-only Merkle log per dataset and per study,
//! holding every ledger event in order, with receipts that anyone can check offline against
//! the service's public key (issue 39; docs/design/ledger.md, "The transparency log").
//!
//! Only standard formats, so that off-the-shelf code verifies:
//!
//! - [`event`]: a leaf is the RFC 8785 canonical JSON of a [`LedgerEvent`], the public facts of
//!   one ledger entry (budget set, charge, refund, deletion);
//! - [`merkle`]: the log is an RFC 6962 §2.1 Merkle tree over SHA-256, leaf hash
//!   SHA-256(0x00 ‖ leaf), node hash SHA-256(0x01 ‖ left ‖ right); inclusion proofs (§2.1.1)
//!   and consistency proofs (§2.1.2), verified as RFC 9162 §2.1.3.2 and §2.1.4.2 do;
//! - [`note`]: the tree head is a C2SP tlog-checkpoint (origin, size, base64 root), signed as a
//!   C2SP signed note with an Ed25519 key (RFC 8032), keys written as Go's sumdb/note writes
//!   them;
//! - [`receipt`]: a [`Receipt`] (leaf, index, audit path, signed checkpoint) and the check of a
//!   consistency proof between two checkpoints, what a witness does.
//!
//! Everything here is pure: no storage, no I/O, randomness only when a key is generated (the
//! caller passes the RNG). The store appends leaves and keeps their hashes; the HTTP layer
//! serves checkpoints, proofs and receipts; `privpca verify` and scripts/receipt_verifier.py
//! check them.

pub mod event;
pub mod merkle;
pub mod note;
pub mod receipt;

pub use event::{EventKind, LedgerEvent, leaf_bytes};
pub use merkle::{Hash, MerkleError};
pub use note::{Checkpoint, LogSigner, LogVerifier, NoteError};
pub use receipt::{ConsistencyProof, Receipt, ReceiptError, VerifiedReceipt, verify_consistency};
