use uuid::Uuid;

use super::*;

fn view<'a>(study: Uuid, iterate: &'a [u8; 32], roster: &'a [u32]) -> RoundView<'a> {
    RoundView {
        study,
        round: 3,
        iterate,
        roster,
    }
}

#[test]
fn a_signature_verifies_only_for_its_own_transcript() {
    let signer = SiteSigner::from_seed([7; 32]);
    let key = verifying_key(&signer.public_key()).unwrap();
    let study = Uuid::from_u128(1);
    let h = [1u8; 32];
    let roster = [1, 2, 3, 4, 5];
    let v = view(study, &h, &roster);
    let signed = signer.sign(&confirmation_message(&v, &[1, 2, 3], &[4, 5]));
    verify(&key, 2, &confirmation_message(&v, &[1, 2, 3], &[4, 5]), &signed).unwrap();
    // Every field is bound: another study, round, iterate, roster, survivor or dropped set.
    let other_h = [2u8; 32];
    let short = [1, 2, 3];
    let changed = [
        confirmation_message(&view(Uuid::from_u128(2), &h, &roster), &[1, 2, 3], &[4, 5]),
        confirmation_message(&RoundView { round: 4, ..v }, &[1, 2, 3], &[4, 5]),
        confirmation_message(&view(study, &other_h, &roster), &[1, 2, 3], &[4, 5]),
        confirmation_message(&view(study, &h, &short), &[1, 2, 3], &[]),
        confirmation_message(&v, &[1, 2, 3, 4], &[5]),
        confirmation_message(&v, &[1, 2, 3], &[4]),
        // The boundary between the sets is bound too.
        confirmation_message(&v, &[1, 2], &[3, 4, 5]),
        contribution_message(&v),
    ];
    for (i, message) in changed.iter().enumerate() {
        assert_eq!(
            verify(&key, 2, message, &signed),
            Err(TranscriptError::Invalid(2)),
            "changed transcript {i} verified"
        );
    }
    // Another site's key does not verify it.
    let other = verifying_key(&SiteSigner::from_seed([8; 32]).public_key()).unwrap();
    assert!(verify(&other, 9, &confirmation_message(&v, &[1, 2, 3], &[4, 5]), &signed).is_err());
}

#[test]
fn signatures_are_deterministic_and_malformed_ones_are_refused() {
    let signer = SiteSigner::from_seed([9; 32]);
    let again = SiteSigner::from_seed([9; 32]);
    let study = Uuid::from_u128(5);
    let h = [3u8; 32];
    let message = contribution_message(&view(study, &h, &[1, 2]));
    assert_eq!(signer.sign(&message), again.sign(&message));
    assert_eq!(signer.public_key(), again.public_key());
    let key = verifying_key(&signer.public_key()).unwrap();
    assert!(matches!(
        verify(&key, 1, &message, "not base64!"),
        Err(TranscriptError::Malformed(_))
    ));
    assert!(matches!(
        verify(&key, 1, &message, &wire::encode(&[0u8; 63])),
        Err(TranscriptError::Malformed(_))
    ));
    assert_eq!(
        verify(&key, 1, &message, &wire::encode(&[0u8; 64])),
        Err(TranscriptError::Invalid(1))
    );
    assert!(check_shape(&signer.sign(&message)).is_ok());
    assert!(check_shape(&wire::encode(&[0u8; 65])).is_err());
    assert!(verifying_key(&wire::encode(&[0u8; 31])).is_err());
}

#[test]
fn the_iterate_hash_binds_shape_round_and_every_byte() {
    let study = Uuid::from_u128(1);
    let bytes = vec![0u8; 48];
    let base = iterate_hash(study, 1, 3, 2, &bytes);
    assert_ne!(base, iterate_hash(study, 2, 3, 2, &bytes));
    assert_ne!(base, iterate_hash(study, 1, 2, 3, &bytes));
    assert_ne!(base, iterate_hash(Uuid::from_u128(2), 1, 3, 2, &bytes));
    let mut flipped = bytes.clone();
    flipped[47] ^= 1;
    assert_ne!(base, iterate_hash(study, 1, 3, 2, &flipped));
}

/// Two quorums of one round overlap in more than c signers, for every S and c < S.
#[test]
fn two_quorums_always_share_an_honest_signer() {
    for sites in 1..=70u32 {
        for colluding in 0..sites {
            let q = quorum(sites, colluding);
            assert!(2 * q > sites + colluding, "S = {sites}, c = {colluding}, q = {q}");
            // And it is the least such q.
            assert!(2 * (q - 1) <= sites + colluding);
        }
    }
    assert_eq!(quorum(5, 0), 3);
    assert_eq!(quorum(10, 0), 6);
    assert_eq!(quorum(10, 2), 7);
}

/// `count_verified` counts exactly the signatures that verify, up to `enough`, whether the
/// batch passes or one bad signature sends it to one-by-one checks: a forged, malformed,
/// keyless or small-order-key signature never counts, and a valid signer is never lost.
#[test]
fn counting_signatures_in_a_batch_matches_checking_them_one_by_one() {
    use std::collections::BTreeMap;
    let message = b"a transcript".to_vec();
    let signers: Vec<SiteSigner> = (1..=6u8).map(|i| SiteSigner::from_seed([i; 32])).collect();
    let mut keys: BTreeMap<u32, VerifyingKey> = signers
        .iter()
        .zip(1..)
        .map(|(s, i)| (i, verifying_key(&s.public_key()).unwrap()))
        .collect();
    let mut signed: Vec<(u32, String)> = signers
        .iter()
        .zip(1..)
        .map(|(s, i)| (i, s.sign(&message)))
        .collect();
    let count = |signed: &[(u32, String)], keys: &BTreeMap<u32, VerifyingKey>, enough| {
        count_verified(
            keys,
            &message,
            signed.iter().map(|(i, s)| (*i, s.as_str())),
            enough,
        )
    };
    assert_eq!(count(&signed, &keys, 6), 6);
    assert_eq!(count(&signed, &keys, 4), 4, "stops at enough");
    assert_eq!(count(&signed, &keys, 9), 6, "never more than verify");
    assert_eq!(count(&signed, &keys, 0), 0);
    // Site 2's signature replaced by its signature of another message: 5 verify, and the
    // batch of the first four fails but the count still reaches four.
    signed[1].1 = signers[1].sign(b"another transcript");
    assert_eq!(count(&signed, &keys, 6), 5);
    assert_eq!(count(&signed, &keys, 4), 4);
    assert_eq!(count(&signed, &keys, 5), 5);
    // Malformed, and a site with no key.
    signed[2].1 = "not base64!".into();
    signed[3].0 = 99;
    assert_eq!(count(&signed, &keys, 6), 3);
    // A small-order key (the identity point): anyone can forge under it, so it never counts.
    let mut identity = [0u8; 32];
    identity[0] = 1;
    keys.insert(1, VerifyingKey::from_bytes(&identity).unwrap());
    let forged = wire::encode(&{
        let mut sig = [0u8; 64];
        sig[0] = 1;
        sig
    });
    let only_forged = vec![(1, forged)];
    assert_eq!(count(&only_forged, &keys, 1), 0);
}

#[test]
fn a_power_rounds_hash_covers_its_clip_norm() {
    let study = Uuid::nil();
    let x: Vec<u8> = [0.5f64, -0.5].iter().flat_map(|v| v.to_le_bytes()).collect();
    let hash = |c: Option<f64>| iterate_hash(study, 9, 2, 1, &round_bytes(&x, c, None));
    // Two sites shown the same X but different c sign different statements.
    assert_ne!(hash(Some(0.25)), hash(Some(0.5)));
    assert_ne!(hash(Some(0.25)), hash(None));
    // A study without a clip signs what it signed before clip norms existed.
    assert_eq!(hash(None), iterate_hash(study, 9, 2, 1, &x));
}

#[test]
fn a_rounds_hash_covers_its_centre() {
    let study = Uuid::nil();
    let x: Vec<u8> = [0.5f64, -0.5].iter().flat_map(|v| v.to_le_bytes()).collect();
    let hash = |c: Option<f64>, mu: Option<&[f64]>| iterate_hash(study, 9, 2, 1, &round_bytes(&x, c, mu));
    // Two sites shown the same X and c but different centres sign different statements.
    assert_ne!(
        hash(Some(0.25), Some(&[1.0, 2.0])),
        hash(Some(0.25), Some(&[1.0, 2.5]))
    );
    assert_ne!(hash(None, Some(&[1.0, 2.0])), hash(None, None));
    // The tag keeps a centre apart from a clip norm of the same bytes.
    assert_ne!(hash(Some(1.0), None), hash(None, Some(&[1.0])));
    // A study without a centre signs what it signed before centres existed.
    assert_eq!(
        hash(Some(0.25), None),
        iterate_hash(study, 9, 2, 1, &round_bytes(&x, Some(0.25), None))
    );
}
