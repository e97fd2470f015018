//! Receipts (issue 39): a job's view carries the receipt of its charge; it verifies with the
//! service's verifier key, in Rust and with the independent scripts/receipt_verifier.py; two
//! checkpoints of a dataset's log are joined by the consistency proof the service serves; and
//! a ledger edited in the database makes the service refuse to sign.

use std::path::Path;
use std::process::Command;

use axum::http::{Method, StatusCode};
use base64::Engine;
use privpca::transparency::{Checkpoint, ConsistencyProof, LedgerEvent, LogVerifier, Receipt};
use serde_json::{Value, json};

use crate::helpers::TestApp;

fn gauss(dataset: &str, rho: f64) -> Value {
    json!({ "dataset_id": dataset, "algorithm": "analyze_gauss", "params": { "k": 1 }, "privacy": { "rho": rho } })
}

/// Runs scripts/receipt_verifier.py with `args`; whether it exited 0, and its stderr.
fn python_verifier(args: &[&str]) -> (bool, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/receipt_verifier.py");
    let out = Command::new("python3")
        .arg(script)
        .args(args)
        .output()
        .expect("python3 runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// The verifier key the service serves.
async fn verifier_key(app: &TestApp) -> String {
    let reply = app
        .anonymous(Method::GET, "/v1/ledger-key")
        .await
        .expect(StatusCode::OK)
        .json();
    reply["verifier_key"].as_str().unwrap().to_string()
}

/// The receipt on a job's view.
async fn receipt_of(app: &TestApp, key: &str, job: &Value) -> Receipt {
    let view = app
        .get(&format!("/v1/jobs/{}", job["id"].as_str().unwrap()), key)
        .await
        .json();
    serde_json::from_value(view["receipt"].clone()).expect("the job view carries a receipt")
}

#[tokio::test]
async fn a_jobs_receipt_verifies_here_and_with_the_independent_verifier() {
    let (app, key, ds) = TestApp::with_records(json!({ "rho": 1.0 }), "1,0\n0,1\n1,1\n").await;
    let vkey = verifier_key(&app).await;
    assert_eq!(vkey, app.state.ledger_key.verifier_key());
    let first = app.succeeded(&key, gauss(&ds, 0.1)).await;
    let receipt = receipt_of(&app, &key, &first).await;
    let verified = receipt.verify(&vkey).expect("the receipt verifies");
    assert_eq!(verified.checkpoint.origin, format!("privpca.test/datasets/{ds}"));
    let event: LedgerEvent = verified.event().unwrap();
    assert_eq!(event.job.as_deref(), first["id"].as_str());
    assert_eq!(event.amount.as_ref().unwrap().rho, 0.1);
    let tmp = tempfile::tempdir().unwrap();
    let file = write(
        tmp.path(),
        "receipt.json",
        &serde_json::to_string(&receipt).unwrap(),
    );
    let origin = verified.checkpoint.origin.clone();
    let (ok, err) = python_verifier(&["receipt", "--key", &vkey, "--origin", &origin, &file]);
    assert!(ok, "{err}");

    // One changed byte in the leaf fails both verifiers.
    let mut leaf = base64::engine::general_purpose::STANDARD
        .decode(&receipt.leaf)
        .unwrap();
    leaf[10] ^= 1;
    let forged = Receipt {
        leaf: base64::engine::general_purpose::STANDARD.encode(&leaf),
        ..receipt.clone()
    };
    assert!(forged.verify(&vkey).is_err());
    let file = write(
        tmp.path(),
        "forged.json",
        &serde_json::to_string(&forged).unwrap(),
    );
    assert!(!python_verifier(&["receipt", "--key", &vkey, &file]).0);
    // One changed byte in a proof hash, or in the signature, fails both too.
    for forged in [flip_proof(&receipt), flip_signature(&receipt)] {
        assert!(forged.verify(&vkey).is_err());
        let file = write(
            tmp.path(),
            "forged.json",
            &serde_json::to_string(&forged).unwrap(),
        );
        assert!(!python_verifier(&["receipt", "--key", &vkey, &file]).0);
    }
    // The result carries the same receipt as the job's view.
    let result = app
        .get(
            &format!("/v1/jobs/{}/result", first["id"].as_str().unwrap()),
            &key,
        )
        .await
        .json();
    assert_eq!(
        serde_json::from_value::<Receipt>(result["receipt"].clone()).unwrap(),
        receipt
    );

    // A second job; the log grew, and its new head extends the first.
    let second = app.succeeded(&key, gauss(&ds, 0.2)).await;
    let later = receipt_of(&app, &key, &second).await;
    let verifier = LogVerifier::from_verifier_key(&vkey).unwrap();
    let old = Checkpoint::open(&receipt.checkpoint, &verifier).unwrap();
    let new = Checkpoint::open(&later.checkpoint, &verifier).unwrap();
    assert_eq!(
        (old.size, new.size),
        (2, 3),
        "the budget, then one leaf per charge"
    );
    let uri = format!(
        "/v1/datasets/{ds}/ledger/consistency?from={}&to={}",
        old.size, new.size
    );
    let proof: ConsistencyProof =
        serde_json::from_value(app.get(&uri, &key).await.expect(StatusCode::OK).json()).unwrap();
    proof.verify(&old, &new).expect("the log only grew");
    let files = [
        write(tmp.path(), "old.txt", &receipt.checkpoint),
        write(tmp.path(), "new.txt", &later.checkpoint),
        write(tmp.path(), "proof.json", &serde_json::to_string(&proof).unwrap()),
    ];
    let (ok, err) = python_verifier(&["consistency", "--key", &vkey, &files[0], &files[1], &files[2]]);
    assert!(ok, "{err}");
    let current = app
        .get(&format!("/v1/datasets/{ds}/ledger/checkpoint"), &key)
        .await
        .expect(StatusCode::OK)
        .json();
    assert_eq!(
        Checkpoint::open(current["checkpoint"].as_str().unwrap(), &verifier).unwrap(),
        new
    );
}

/// The receipt with one bit changed in the first hash of its inclusion proof.
fn flip_proof(receipt: &Receipt) -> Receipt {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut proof = receipt.inclusion_proof.clone();
    let mut hash = b64.decode(&proof[0]).unwrap();
    hash[0] ^= 1;
    proof[0] = b64.encode(&hash);
    Receipt {
        inclusion_proof: proof,
        ..receipt.clone()
    }
}

/// The receipt with one bit changed in its checkpoint's signature (past the 4-byte key ID).
fn flip_signature(receipt: &Receipt) -> Receipt {
    let b64 = base64::engine::general_purpose::STANDARD;
    let (body, line) = receipt.checkpoint.trim_end().rsplit_once('\n').unwrap();
    let (prefix, sig) = line.rsplit_once(' ').unwrap();
    let mut bytes = b64.decode(sig).unwrap();
    bytes[10] ^= 1;
    Receipt {
        checkpoint: format!("{body}\n{prefix} {}\n", b64.encode(&bytes)),
        ..receipt.clone()
    }
}

#[tokio::test]
async fn bad_sizes_for_a_consistency_proof_are_400_and_trees_the_log_lacks_are_409() {
    let (app, key, ds) = TestApp::queued_with_records(json!({ "rho": 1.0 }), "1,0\n0,1\n").await;
    app.submit(&key, gauss(&ds, 0.1))
        .await
        .expect(StatusCode::ACCEPTED);
    for query in ["from=2&to=1", "from=0&to=3", "from=0&to=9223372036854775806"] {
        let uri = format!("/v1/datasets/{ds}/ledger/consistency?{query}");
        app.get(&uri, &key).await.problem(409);
    }
    for query in ["from=x&to=1", "from=-1&to=1", "to=1", ""] {
        let uri = format!("/v1/datasets/{ds}/ledger/consistency?{query}");
        app.get(&uri, &key).await.problem(400);
    }
    let empty = app
        .get(&format!("/v1/datasets/{ds}/ledger/consistency?from=1&to=1"), &key)
        .await;
    assert_eq!(empty.expect(StatusCode::OK).json(), json!({ "proof": [] }));
    let other = app.tenant("other").await;
    app.get(&format!("/v1/datasets/{ds}/ledger/checkpoint"), &other)
        .await
        .problem(404);
}

#[tokio::test]
async fn a_past_charge_edited_in_the_database_makes_the_log_refused() {
    let (app, key, ds) = TestApp::queued_with_records(json!({ "rho": 1.0 }), "1,0\n0,1\n").await;
    let job = app
        .submit(&key, gauss(&ds, 0.1))
        .await
        .expect(StatusCode::ACCEPTED)
        .json();
    app.submit(&key, gauss(&ds, 0.1))
        .await
        .expect(StatusCode::ACCEPTED);
    let checkpoint = format!("/v1/datasets/{ds}/ledger/checkpoint");
    app.get(&checkpoint, &key).await.expect(StatusCode::OK);
    let url = app.state.config.database_url.clone();
    let edits: &[&str] = if url.starts_with("sqlite") {
        &["DROP TRIGGER ledger_no_update"]
    } else {
        &["ALTER TABLE ledger DISABLE TRIGGER ledger_no_update"]
    };
    let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect(&url)
        .await
        .unwrap();
    for sql in edits
        .iter()
        .chain(&["UPDATE ledger SET rho_units = 1 WHERE id = (SELECT MIN(id) FROM ledger)"])
    {
        sqlx::query(sql).execute(&mut conn).await.unwrap();
    }
    let doc = app.get(&checkpoint, &key).await.problem(409);
    assert_eq!(doc["type"], "urn:privpca:problem:ledger-log-tampered");
    assert_eq!(doc["log"], format!("datasets/{ds}"));
    app.get(&format!("/v1/jobs/{}", job["id"].as_str().unwrap()), &key)
        .await
        .problem(409);
    app.get(&format!("/v1/datasets/{ds}/ledger/consistency?from=1&to=2"), &key)
        .await
        .problem(409);
}
