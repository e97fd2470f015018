use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::*;
use crate::transparency::{LogSigner, merkle};

/// A signed receipt of leaf 1 in a log of three leaves, and the verifier key.
fn receipt() -> (Receipt, LogVerifier) {
    let signer = LogSigner::from_seed("privpca.example.org/key-1", &[7; 32]).unwrap();
    let leaves: Vec<&[u8]> = vec![b"zero", b"one", b"two"];
    let hashes: Vec<_> = leaves.iter().map(|l| merkle::leaf_hash(l)).collect();
    let origin = "privpca.example.org/datasets/6f1c4f3e-8f0e-4a4e-9d8b-3b1f0f7a2c11";
    let checkpoint = Checkpoint::new(origin, 3, merkle::root(&hashes)).unwrap();
    let proof = merkle::inclusion_proof(1, &hashes).unwrap();
    let note = checkpoint.sign(&signer).unwrap();
    (Receipt::new(leaves[1], 1, &proof, &note), signer.verifier())
}

fn check_file(receipt: &Receipt, verifier: &LogVerifier) -> anyhow::Result<String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("receipt.json");
    std::fs::write(&path, serde_json::to_string(receipt).unwrap()).unwrap();
    check_receipt(&path, verifier)
}

/// `text` (base64) with one bit of byte `at` flipped.
fn flip(text: &str, at: usize) -> String {
    let mut bytes = BASE64.decode(text).unwrap();
    bytes[at] ^= 1;
    BASE64.encode(bytes)
}

#[test]
fn a_valid_receipt_passes_and_one_changed_byte_fails() {
    let (good, verifier) = receipt();
    let said = check_file(&good, &verifier).unwrap();
    assert!(said.contains("leaf 1"), "{said}");

    let leaf = Receipt {
        leaf: flip(&good.leaf, 0),
        ..good.clone()
    };
    assert!(check_file(&leaf, &verifier).is_err());

    let mut proof = good.clone();
    proof.inclusion_proof[0] = flip(&proof.inclusion_proof[0], 5);
    assert!(check_file(&proof, &verifier).is_err());

    // The signature line: `— <name> <base64(key ID ‖ signature)>`; change a signature byte.
    let (text, line) = good.checkpoint.trim_end().rsplit_once('\n').unwrap();
    let (prefix, signature) = line.rsplit_once(' ').unwrap();
    let signed = Receipt {
        checkpoint: format!("{text}\n{prefix} {}\n", flip(signature, 20)),
        ..good.clone()
    };
    let err = check_file(&signed, &verifier).unwrap_err();
    assert!(format!("{err:#}").contains("checkpoint"), "{err:#}");

    let other = LogSigner::from_seed("privpca.example.org/key-2", &[8; 32]).unwrap();
    assert!(check_file(&good, &other.verifier()).is_err());
}

#[test]
fn a_checkpoint_origin_names_the_logs_api_path() {
    let id = "6f1c4f3e-8f0e-4a4e-9d8b-3b1f0f7a2c11";
    assert_eq!(
        log_path(&format!("privpca.example.org/datasets/{id}")).unwrap(),
        format!("/v1/datasets/{id}/ledger")
    );
    assert!(log_path("privpca.example.org/other/x").is_err());
    assert!(log_path(&format!("privpca.example.org/jobs/{id}")).is_err());
}
