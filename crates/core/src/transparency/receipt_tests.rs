//! Tests of receipts and consistency between checkpoints: every receipt of a small log
//! verifies, one changed byte anywhere does not, a rewritten log fails its consistency proof,
//! and the committed fixtures (tests/fixtures/transparency/, checked by the independent
//! verifier scripts/receipt_verifier.py) are exactly what this code produces.

use sha2::{Digest, Sha256};

use super::*;
use crate::transparency::event::{
    Amounts, EventKind, LedgerEvent, PublicBounds, ServiceBuild, Units, leaf_bytes,
};
use crate::transparency::note::LogSigner;

const KEY_NAME: &str = "privpca.example.org/key-1";
const DATASET: &str = "0b7c6d2e-1f0a-4c3b-9a8d-5e6f7a8b9c0d";

/// The fixtures' signing key: its seed is SHA-256 of a public phrase, so it signs nothing real.
fn fixture_signer() -> LogSigner {
    let seed: [u8; 32] = Sha256::digest(b"privpca transparency test fixtures").into();
    LogSigner::from_seed(KEY_NAME, &seed).expect("signer")
}

fn origin() -> String {
    format!("privpca.example.org/datasets/{DATASET}")
}

fn amounts(rho_units: i64, delta_units: i64) -> Amounts {
    Amounts {
        rho_units: Units(rho_units),
        other_rho_units: None,
        delta_units: Units(delta_units),
        rho: rho_units as f64 / 1e12,
        delta: delta_units as f64 / 1e18,
    }
}

fn event(kind: EventKind, job: Option<u32>, rho_units: i64, spent_after: i64) -> LedgerEvent {
    let mut e = LedgerEvent::new(
        kind,
        ServiceBuild {
            version: "0.2.0".to_string(),
            commit: "7976eef".to_string(),
        },
    );
    e.dataset = Some(DATASET.to_string());
    e.job = job.map(|j| format!("00000000-0000-4000-8000-{j:012}"));
    if kind == EventKind::Charge {
        e.algorithm = Some("noisy_power".to_string());
        e.config =
            Some(serde_json::json!({"k": 2, "p": 4, "iterations": 10, "multiplier": 7.0710678118654755}));
        e.bounds = Some(PublicBounds {
            relation: "add_remove".to_string(),
            d: Some(20),
            n: None,
            row_norm_bound: Some(1.0),
            row_l1_bound: None,
            entry_bound: None,
        });
        e.rule = Some("zcdp".to_string());
    }
    if kind != EventKind::Deletion {
        e.amount = Some(amounts(rho_units, 0));
    }
    e.spent_after = Some(amounts(spent_after, 0));
    e
}

/// The fixtures' log: a budget, three charges, a refund, the deletion and its refund.
fn fixture_leaves() -> Vec<Vec<u8>> {
    let tenth = 100_000_000_000;
    let mut deletion_refund = event(EventKind::Refund, Some(3), tenth, tenth);
    deletion_refund.reason = Some("the dataset was deleted before this job started".to_string());
    let mut budget = event(EventKind::BudgetSet, None, 10 * tenth, 0);
    budget.spent_after = None;
    [
        budget,
        event(EventKind::Charge, Some(1), tenth, tenth),
        event(EventKind::Charge, Some(2), tenth, 2 * tenth),
        event(EventKind::Refund, Some(2), tenth, tenth),
        event(EventKind::Charge, Some(3), tenth, 2 * tenth),
        event(EventKind::Deletion, None, 0, 2 * tenth),
        deletion_refund,
    ]
    .iter()
    .map(|e| leaf_bytes(e).expect("leaf"))
    .collect()
}

/// An in-memory log: what the store will keep, reduced to leaves.
struct TestLog {
    signer: LogSigner,
    origin: String,
    leaves: Vec<Vec<u8>>,
    hashes: Vec<Hash>,
}

impl TestLog {
    fn new(leaves: Vec<Vec<u8>>) -> TestLog {
        let hashes = leaves.iter().map(|l| merkle::leaf_hash(l)).collect();
        TestLog {
            signer: fixture_signer(),
            origin: origin(),
            leaves,
            hashes,
        }
    }

    fn checkpoint(&self, size: usize) -> String {
        Checkpoint::new(&self.origin, size as u64, merkle::root(&self.hashes[..size]))
            .and_then(|c| c.sign(&self.signer))
            .expect("checkpoint")
    }

    fn receipt(&self, index: usize, size: usize) -> Receipt {
        let proof = merkle::inclusion_proof(index as u64, &self.hashes[..size]).expect("proof");
        Receipt::new(&self.leaves[index], index as u64, &proof, &self.checkpoint(size))
    }

    fn consistency(&self, first: usize, second: usize) -> ConsistencyProof {
        ConsistencyProof::new(
            &merkle::consistency_proof(first as u64, &self.hashes[..second]).expect("proof"),
        )
    }

    fn verifier_key(&self) -> String {
        self.signer.verifier_key()
    }
}

#[test]
fn every_receipt_of_the_log_verifies_at_every_later_size() {
    let log = TestLog::new(fixture_leaves());
    let key = log.verifier_key();
    for size in 1..=log.leaves.len() {
        for index in 0..size {
            let verified = log.receipt(index, size).verify(&key).expect("verifies");
            assert_eq!(verified.leaf, log.leaves[index]);
            assert_eq!(verified.leaf_index, index as u64);
            assert_eq!(verified.checkpoint.size, size as u64);
            assert_eq!(verified.checkpoint.origin, origin());
            let event = verified.event().expect("event");
            assert_eq!(event.dataset.as_deref(), Some(DATASET));
        }
    }
}

fn flip_base64_byte(text: &str, at: usize) -> String {
    let mut bytes = BASE64.decode(text).expect("base64");
    bytes[at] ^= 0x01;
    BASE64.encode(bytes)
}

#[test]
fn one_changed_byte_in_the_leaf_the_proof_or_the_signature_is_refused() {
    let log = TestLog::new(fixture_leaves());
    let key = log.verifier_key();
    let receipt = log.receipt(4, 7);
    let leaf_len = log.leaves[4].len();
    for at in 0..leaf_len {
        let mut bad = receipt.clone();
        bad.leaf = flip_base64_byte(&receipt.leaf, at);
        assert!(
            matches!(bad.verify(&key), Err(ReceiptError::Inclusion(_))),
            "leaf byte {at}"
        );
    }
    for i in 0..receipt.inclusion_proof.len() {
        for at in [0, 17, 31] {
            let mut bad = receipt.clone();
            bad.inclusion_proof[i] = flip_base64_byte(&receipt.inclusion_proof[i], at);
            assert!(matches!(bad.verify(&key), Err(ReceiptError::Inclusion(_))));
        }
    }
    let signature_line = receipt.checkpoint.rsplit_once("\n\n").expect("note").1;
    let b64 = signature_line.trim_end().rsplit_once(' ').expect("line").1;
    for at in 0..68 {
        let mut bad = receipt.clone();
        bad.checkpoint = receipt.checkpoint.replace(b64, &flip_base64_byte(b64, at));
        assert!(
            matches!(bad.verify(&key), Err(ReceiptError::Checkpoint(_))),
            "signature byte {at}"
        );
    }
    let chars: Vec<char> = receipt.checkpoint.chars().collect();
    for at in 0..chars.len() {
        let mut changed = chars.clone();
        changed[at] = if changed[at] == '7' { '8' } else { '7' };
        let mut bad = receipt.clone();
        bad.checkpoint = changed.into_iter().collect();
        assert!(bad.verify(&key).is_err(), "checkpoint character {at}");
    }
    for index in [3, 5, 6, 7, 8, u64::MAX] {
        let mut bad = receipt.clone();
        bad.leaf_index = index;
        assert!(
            matches!(bad.verify(&key), Err(ReceiptError::Inclusion(_))),
            "index {index}"
        );
    }
    assert!(receipt.verify(&key).is_ok());
}

#[test]
fn malformed_receipts_and_keys_are_refused() {
    let log = TestLog::new(fixture_leaves());
    let key = log.verifier_key();
    let receipt = log.receipt(1, 7);
    let mut bad = receipt.clone();
    bad.leaf = "not base64!".to_string();
    assert_eq!(bad.verify(&key), Err(ReceiptError::Base64 { field: "leaf" }));
    let mut bad = receipt.clone();
    bad.inclusion_proof[0] = BASE64.encode([0u8; 31]);
    assert_eq!(
        bad.verify(&key),
        Err(ReceiptError::HashLength {
            field: "inclusion_proof",
            len: 31
        })
    );
    let mut bad = receipt.clone();
    bad.inclusion_proof.push(BASE64.encode([0u8; 32]));
    assert!(matches!(
        bad.verify(&key),
        Err(ReceiptError::Inclusion(MerkleError::ProofLength { .. }))
    ));
    assert!(matches!(receipt.verify("garbage"), Err(ReceiptError::Key(_))));
    let other = LogSigner::from_seed(KEY_NAME, &[1; 32]).expect("signer");
    assert!(matches!(
        receipt.verify(&other.verifier_key()),
        Err(ReceiptError::Checkpoint(NoteError::NotSigned { .. }))
    ));
}

#[test]
fn the_json_fields_are_the_interface_of_issue_39() {
    let log = TestLog::new(fixture_leaves());
    let receipt = log.receipt(2, 3);
    let value = serde_json::to_value(&receipt).expect("json");
    let mut keys: Vec<&str> = value
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    assert_eq!(keys, ["checkpoint", "inclusion_proof", "leaf", "leaf_index"]);
    let back: Receipt = serde_json::from_value(value).expect("reads back");
    assert_eq!(back, receipt);
    let proof = serde_json::to_value(log.consistency(3, 7)).expect("json");
    assert_eq!(proof.as_object().map(|o| o.len()), Some(1));
    assert!(proof["proof"].is_array());
}

fn open(log: &TestLog, size: usize) -> Checkpoint {
    Checkpoint::open(&log.checkpoint(size), &log.signer.verifier()).expect("checkpoint")
}

#[test]
fn later_checkpoints_extend_earlier_ones() {
    let log = TestLog::new(fixture_leaves());
    for second in 0..=7 {
        for first in 0..=second {
            let proof = log.consistency(first, second);
            proof
                .verify(&open(&log, first), &open(&log, second))
                .expect("consistent");
            if first < second && first > 0 {
                assert!(proof.verify(&open(&log, second), &open(&log, first)).is_err());
            }
        }
    }
    let mut bad = log.consistency(3, 7);
    bad.proof[1] = flip_base64_byte(&bad.proof[1], 0);
    assert!(matches!(
        bad.verify(&open(&log, 3), &open(&log, 7)),
        Err(ReceiptError::Consistency(_))
    ));
    bad.proof[1] = "%%".to_string();
    assert_eq!(
        bad.verify(&open(&log, 3), &open(&log, 7)),
        Err(ReceiptError::Base64 { field: "proof" })
    );
    let mut elsewhere = open(&log, 7);
    elsewhere.origin = "privpca.example.org/datasets/other".to_string();
    assert!(matches!(
        log.consistency(3, 7).verify(&open(&log, 3), &elsewhere),
        Err(ReceiptError::Origin { .. })
    ));
}

#[test]
fn a_witness_sees_a_rewritten_past_charge() {
    let honest = TestLog::new(fixture_leaves());
    let saved = open(&honest, 4);
    // A past charge's ρ is edited and the log rebuilt from the edited rows, then one more job.
    let mut leaves = fixture_leaves();
    let edited = String::from_utf8(leaves[1].clone())
        .expect("utf-8")
        .replace("\"rho_units\":\"100000000000\"", "\"rho_units\":\"1000000000\"");
    assert_ne!(edited.as_bytes(), leaves[1].as_slice());
    leaves[1] = edited.into_bytes();
    let rewritten = TestLog::new(leaves);
    for size in 4..=7 {
        let proof = rewritten.consistency(4, size);
        assert!(matches!(
            proof.verify(&saved, &open(&rewritten, size)),
            Err(ReceiptError::Consistency(_))
        ));
    }
    // Receipts issued before the edit no longer match the log's checkpoints.
    let old = honest.receipt(1, 7);
    let mut replayed = rewritten.receipt(1, 7);
    replayed.leaf = old.leaf;
    assert!(replayed.verify(&rewritten.verifier_key()).is_err());
}

/// Pretty JSON with a final newline.
fn pretty<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string_pretty(value).expect("json") + "\n"
}

/// The fixture files, as (name, contents).
fn fixture_files() -> Vec<(&'static str, String)> {
    let log = TestLog::new(fixture_leaves());
    vec![
        ("verifier_key.txt", format!("{}\n", log.verifier_key())),
        ("checkpoint_3.txt", log.checkpoint(3)),
        ("checkpoint_7.txt", log.checkpoint(7)),
        ("consistency_3_7.json", pretty(&log.consistency(3, 7))),
        ("receipt_0_at_3.json", pretty(&log.receipt(0, 3))),
        ("receipt_1.json", pretty(&log.receipt(1, 7))),
        ("receipt_6.json", pretty(&log.receipt(6, 7))),
    ]
}

const COMMITTED: [(&str, &str); 7] = [
    (
        "verifier_key.txt",
        include_str!("../../../../tests/fixtures/transparency/verifier_key.txt"),
    ),
    (
        "checkpoint_3.txt",
        include_str!("../../../../tests/fixtures/transparency/checkpoint_3.txt"),
    ),
    (
        "checkpoint_7.txt",
        include_str!("../../../../tests/fixtures/transparency/checkpoint_7.txt"),
    ),
    (
        "consistency_3_7.json",
        include_str!("../../../../tests/fixtures/transparency/consistency_3_7.json"),
    ),
    (
        "receipt_0_at_3.json",
        include_str!("../../../../tests/fixtures/transparency/receipt_0_at_3.json"),
    ),
    (
        "receipt_1.json",
        include_str!("../../../../tests/fixtures/transparency/receipt_1.json"),
    ),
    (
        "receipt_6.json",
        include_str!("../../../../tests/fixtures/transparency/receipt_6.json"),
    ),
];

#[test]
fn the_committed_fixtures_are_what_this_code_produces() {
    let made = fixture_files();
    assert_eq!(made.len(), COMMITTED.len());
    for ((name, contents), (committed_name, committed)) in made.iter().zip(COMMITTED) {
        assert_eq!(*name, committed_name);
        assert_eq!(
            contents, committed,
            "{name}: regenerate with `write_fixtures` (see its doc)"
        );
    }
    let key = COMMITTED[0].1.trim_end();
    for (_, receipt) in &COMMITTED[4..] {
        let receipt: Receipt = serde_json::from_str(receipt).expect("receipt");
        receipt.verify(key).expect("the committed receipt verifies");
    }
}

/// Writes the fixtures into the directory named by `PRIVPCA_WRITE_FIXTURES`:
/// `PRIVPCA_WRITE_FIXTURES=tests/fixtures/transparency cargo test --lib write_fixtures -- --ignored`.
#[test]
#[ignore = "writes files; run by hand to regenerate the fixtures"]
fn write_fixtures() {
    let dir = std::env::var("PRIVPCA_WRITE_FIXTURES").expect("PRIVPCA_WRITE_FIXTURES=<directory>");
    for (name, contents) in fixture_files() {
        std::fs::write(std::path::Path::new(&dir).join(name), contents).expect("write");
    }
}
