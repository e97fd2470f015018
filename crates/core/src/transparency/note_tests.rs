//! Tests of signed notes and checkpoints: the known answer of golang.org/x/mod/sumdb/note's
//! documentation, round trips, tampering with every character, and malformed input.

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use super::*;

// The example of golang.org/x/mod/sumdb/note's package documentation.
const PETER_SKEY: &str = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz";
const PETER_VKEY: &str = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";
const PETER_TEXT: &str =
    "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n";
const PETER_SIGNATURE: &str = "\u{2014} PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n";
const ENOCH_SIGNATURE: &str = "\u{2014} EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WWd1RvMc+QQ=\n";

fn peter_note() -> String {
    format!("{PETER_TEXT}\n{PETER_SIGNATURE}")
}

fn test_signer(name: &str) -> LogSigner {
    LogSigner::generate(name, &mut ChaCha20Rng::seed_from_u64(39)).expect("signer")
}

#[test]
fn the_go_note_example_signs_and_verifies_byte_for_byte() {
    let signer = LogSigner::from_signer_key(PETER_SKEY).expect("signer key");
    assert_eq!(signer.key_id(), 0xc74f20a3);
    assert_eq!(signer.verifier_key(), PETER_VKEY);
    assert_eq!(signer.signer_key().as_str(), PETER_SKEY);
    // Ed25519 is deterministic (RFC 8032 §5.1.6), so the signature is the documented one.
    assert_eq!(signer.sign(PETER_TEXT).expect("sign"), peter_note());
    let verifier = LogVerifier::from_verifier_key(PETER_VKEY).expect("verifier key");
    assert_eq!(
        verifier.key_id(),
        key_id("PeterNeumann", verifier.public_key().as_bytes())
    );
    assert_eq!(verifier.open(&peter_note()), Ok(PETER_TEXT));
}

#[test]
fn signatures_of_unknown_keys_are_ignored() {
    let verifier = LogVerifier::from_verifier_key(PETER_VKEY).expect("verifier key");
    let both = format!("{PETER_TEXT}\n{PETER_SIGNATURE}{ENOCH_SIGNATURE}");
    assert_eq!(verifier.open(&both), Ok(PETER_TEXT));
    let enoch_first = format!("{PETER_TEXT}\n{ENOCH_SIGNATURE}{PETER_SIGNATURE}");
    assert_eq!(verifier.open(&enoch_first), Ok(PETER_TEXT));
    let enoch_only = format!("{PETER_TEXT}\n{ENOCH_SIGNATURE}");
    assert!(matches!(
        verifier.open(&enoch_only),
        Err(NoteError::NotSigned { .. })
    ));
}

#[test]
fn keys_round_trip_through_their_strings() {
    let signer = test_signer("privpca.example.org/key-1");
    let again = LogSigner::from_signer_key(&signer.signer_key()).expect("signer key");
    assert_eq!(again.verifier_key(), signer.verifier_key());
    let verifier = LogVerifier::from_verifier_key(&signer.verifier_key()).expect("verifier key");
    assert_eq!(verifier, signer.verifier());
    assert_eq!(verifier.name(), "privpca.example.org/key-1");
    let skey = signer.signer_key();
    let secret = skey.rsplit('+').next().expect("base64 part");
    assert!(!format!("{signer:?}").contains(secret));
    assert_eq!(
        format!("{signer:?}"),
        format!("LogSigner(privpca.example.org/key-1+{:08x})", signer.key_id())
    );
}

#[test]
fn malformed_keys_are_refused() {
    let good = test_signer("log").verifier_key();
    let (name_id, data) = good.split_at("log+12345678+".len());
    let flip = if name_id.as_bytes()[4] == b'0' { "1" } else { "0" };
    let wrong_id = format!("log+{flip}{}{data}", &name_id[5..]);
    assert!(matches!(
        LogVerifier::from_verifier_key(&wrong_id),
        Err(NoteError::KeyId { .. })
    ));
    for bad in [
        "",
        "log",
        "log+1234567+AQ==",
        "log+1234567g+AQ==",
        "log+12345678+***",
        "log+12345678+AQ==",
        "log+12345678+Ag==",
        &format!("{name_id}AAAA{data}"),
    ] {
        assert!(LogVerifier::from_verifier_key(bad).is_err(), "{bad}");
    }
    assert!(matches!(
        LogVerifier::from_verifier_key(&format!("a b+{}", &good[4..])),
        Err(NoteError::KeyName(_))
    ));
    assert!(LogSigner::from_signer_key(&good).is_err());
    assert!(LogSigner::from_signer_key(PETER_VKEY).is_err());
    let wrong_skey_id = PETER_SKEY.replace("c74f20a3", "c74f20a4");
    assert!(matches!(
        LogSigner::from_signer_key(&wrong_skey_id),
        Err(NoteError::KeyId { .. })
    ));
    for name in ["", "a+b", "a b", "a\u{a0}b", "a\nb"] {
        assert!(matches!(
            LogSigner::from_seed(name, &[7; 32]),
            Err(NoteError::KeyName(_))
        ));
    }
}

#[test]
fn only_texts_ending_in_a_newline_are_signed() {
    let signer = test_signer("log");
    assert!(signer.sign("no newline").is_err());
    assert!(signer.sign("tab\there\n").is_err());
    assert!(signer.sign("a\n\nb\n").is_ok());
}

#[test]
fn a_note_whose_text_has_blank_lines_splits_at_the_last_one() {
    let signer = test_signer("log");
    let text = "one\n\ntwo\n";
    let signed = signer.sign(text).expect("sign");
    assert_eq!(signer.verifier().open(&signed), Ok(text));
}

/// Every copy of `s` with one character replaced by another.
fn one_char_changed(s: &str) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    (0..chars.len())
        .map(|i| {
            let mut c = chars.clone();
            c[i] = if c[i] == 'A' { 'B' } else { 'A' };
            c.into_iter().collect()
        })
        .collect()
}

#[test]
fn any_changed_character_of_a_signed_note_is_refused() {
    let verifier = LogVerifier::from_verifier_key(PETER_VKEY).expect("verifier key");
    let note = peter_note();
    for changed in one_char_changed(&note) {
        assert!(verifier.open(&changed).is_err(), "{changed}");
    }
}

#[test]
fn malformed_notes_are_refused() {
    let verifier = LogVerifier::from_verifier_key(PETER_VKEY).expect("verifier key");
    let sig_body = PETER_SIGNATURE.trim_start_matches("\u{2014} ").trim_end();
    let sig_b64 = sig_body.trim_start_matches("PeterNeumann ");
    let cases = [
        PETER_TEXT.to_string(),
        format!("{PETER_TEXT}\n"),
        format!("{PETER_TEXT}\n{}", PETER_SIGNATURE.trim_end()),
        format!("{PETER_TEXT}\n- {sig_body}\n"),
        format!("{PETER_TEXT}\n\u{2014} PeterNeumann\n"),
        format!("{PETER_TEXT}\n\u{2014} PeterNeumann !!!!\n"),
        format!("{PETER_TEXT}\n\u{2014} PeterNeumann x08g\n"),
        format!("{PETER_TEXT}\n\u{2014} PeterNeumann x08gow==\n"),
        format!("{PETER_TEXT}\r\n{PETER_SIGNATURE}"),
        format!("{PETER_TEXT}\n{PETER_SIGNATURE}\n"),
        format!("{PETER_TEXT}\n{}", PETER_SIGNATURE.repeat(101)),
    ];
    for case in cases {
        assert!(
            matches!(verifier.open(&case), Err(NoteError::Malformed(_))),
            "{case:?}"
        );
    }
    // Our name with another key ID is another key: ignored, so the note is unsigned.
    let other_id = format!("{PETER_TEXT}\n\u{2014} PeterNeumann AAAAAAAA{}\n", &sig_b64[8..]);
    assert!(matches!(
        verifier.open(&other_id),
        Err(NoteError::NotSigned { .. })
    ));
    // Our key's line with a signature of the wrong length does not verify.
    let two_bytes = format!("{PETER_TEXT}\n\u{2014} PeterNeumann x08go/ZJ\n");
    assert!(matches!(
        verifier.open(&two_bytes),
        Err(NoteError::BadSignature { .. })
    ));
    let short = format!(
        "{PETER_TEXT}\n\u{2014} PeterNeumann {}\n",
        &sig_b64[..sig_b64.len() - 8]
    );
    assert!(verifier.open(&short).is_err());
}

const C2SP_EXAMPLE: &str =
    "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n";

#[test]
fn the_c2sp_example_checkpoint_parses_and_formats_back() {
    let checkpoint = Checkpoint::parse(C2SP_EXAMPLE).expect("parse");
    assert_eq!(checkpoint.origin, "example.com/behind-the-sofa");
    assert_eq!(checkpoint.size, 20852163);
    assert_eq!(checkpoint.root[..3], [0x0a, 0xc5, 0x18]);
    assert!(checkpoint.extensions.is_empty());
    assert_eq!(checkpoint.to_text(), C2SP_EXAMPLE);
    let extended = format!("{C2SP_EXAMPLE}ext one\next two\n");
    let checkpoint = Checkpoint::parse(&extended).expect("parse");
    assert_eq!(checkpoint.extensions, ["ext one", "ext two"]);
    assert_eq!(checkpoint.to_text(), extended);
}

#[test]
fn malformed_checkpoints_are_refused() {
    let root = "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=";
    let cases = [
        format!("origin\n5\n{root}"),
        "origin\n5\n".to_string(),
        format!("\n5\n{root}\n"),
        format!("origin\n05\n{root}\n"),
        format!("origin\n-5\n{root}\n"),
        format!("origin\n+5\n{root}\n"),
        format!("origin\n\n{root}\n"),
        format!("origin\n5 \n{root}\n"),
        format!("origin\n18446744073709551616\n{root}\n"),
        "origin\n5\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2=\n".to_string(),
        "origin\n5\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I\n".to_string(),
        "origin\n5\nAAAA\n".to_string(),
        format!("origin\n5\n{root}\n\n"),
        format!("origin\n5\n{root}\next\n\n"),
    ];
    for case in cases {
        assert!(
            matches!(Checkpoint::parse(&case), Err(NoteError::Checkpoint(_))),
            "{case:?}"
        );
    }
    assert_eq!(
        Checkpoint::parse(&format!("origin\n18446744073709551615\n{root}\n")).map(|c| c.size),
        Ok(u64::MAX)
    );
    assert_eq!(
        Checkpoint::parse(&format!("o\n0\n{root}\n")).map(|c| c.size),
        Ok(0)
    );
}

#[test]
fn checkpoints_sign_and_open() {
    let signer = test_signer("privpca.example.org/key-1");
    let checkpoint = Checkpoint::new("privpca.example.org/datasets/x", 7, [9; 32]).expect("checkpoint");
    let signed = checkpoint.sign(&signer).expect("sign");
    assert!(signed.starts_with("privpca.example.org/datasets/x\n7\nCQkJ"));
    assert_eq!(
        Checkpoint::open(&signed, &signer.verifier()),
        Ok(checkpoint.clone())
    );
    let other = test_signer("privpca.example.org/key-2");
    assert!(matches!(
        Checkpoint::open(&signed, &other.verifier()),
        Err(NoteError::NotSigned { .. })
    ));
    for changed in one_char_changed(&signed) {
        assert!(
            Checkpoint::open(&changed, &signer.verifier()).is_err(),
            "{changed}"
        );
    }
    let mut bad = checkpoint.clone();
    bad.origin = "two\nlines".to_string();
    assert!(bad.sign(&signer).is_err());
    let mut bad = checkpoint;
    bad.extensions = vec![String::new()];
    assert!(bad.sign(&signer).is_err());
    assert!(Checkpoint::new("a b", 1, [0; 32]).is_err());
    assert!(Checkpoint::new("", 1, [0; 32]).is_err());
}

#[test]
fn a_signed_note_that_is_not_a_checkpoint_is_refused_as_one() {
    let signer = test_signer("log");
    let signed = signer.sign("just\ntext\n").expect("sign");
    assert!(matches!(
        Checkpoint::open(&signed, &signer.verifier()),
        Err(NoteError::Checkpoint(_))
    ));
}
