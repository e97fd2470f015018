//! Tests of the roster, the share boxes, the coordinator's checks of responses, and studies
//! whose participant indices have gaps.

use super::*;

fn tamper(b: &ShareBox, at: usize) -> ShareBox {
    let mut bytes = wire::decode(&b.ciphertext).expect("base64");
    bytes[at] ^= 0x80;
    ShareBox {
        ciphertext: wire::encode(&bytes),
        ..b.clone()
    }
}

#[test]
fn tampered_and_misaddressed_boxes_are_rejected() {
    let mut d = deal(&[1, 2, 3], 2, 2, 20);
    let inbox = d.inboxes[&1].clone();
    let site = d.sites.get_mut(&1).expect("site 1");
    let from2 = inbox.iter().find(|b| b.from == 2).expect("box from 2").clone();

    let tampered = [inbox[0].clone(), tamper(&from2, 20)];
    assert!(matches!(
        site.receive_inbox(&tampered),
        Err(SecAggError::BoxRejected { from: 2, .. })
    ));
    let spoofed = ShareBox {
        from: 3,
        ..from2.clone()
    };
    assert!(matches!(
        site.receive_inbox(&[spoofed]),
        Err(SecAggError::BoxRejected { from: 3, .. })
    ));
    let for_site2 = d.inboxes[&2][0].clone();
    assert_eq!(
        site.receive_inbox(std::slice::from_ref(&for_site2)),
        Err(SecAggError::Misaddressed {
            from: for_site2.from,
            to: 2,
            this: 1
        })
    );
    let readdressed = ShareBox { to: 1, ..for_site2 };
    assert!(matches!(
        site.receive_inbox(&[readdressed]),
        Err(SecAggError::BoxRejected { .. })
    ));
    let stranger = ShareBox {
        from: 9,
        ..from2.clone()
    };
    assert!(matches!(
        site.receive_inbox(&[stranger]),
        Err(SecAggError::UnknownSite { site: 9, .. })
    ));
    let garbled = ShareBox {
        ciphertext: "not base64!".into(),
        ..from2
    };
    assert!(matches!(
        site.receive_inbox(&[garbled]),
        Err(SecAggError::BoxEncoding { from: 2, .. })
    ));

    // Nothing was stored by the failed calls; the genuine inbox (twice) goes through.
    site.receive_inbox(&inbox).expect("genuine boxes");
    site.receive_inbox(&inbox).expect("the same boxes again");
}

#[test]
fn forged_boxes_with_wrong_contents_are_rejected() {
    let mut d = deal(&[1, 2, 3], 2, 1, 21);
    let key = |p: &Participant| wire::decode_key(&p.encryption_public_key).expect("key");
    let (pk1, pk2) = (key(&d.participants[0]), key(&d.participants[1]));
    let secret2 = d.sites[&2].encryption_secret();
    let secret3 = d.sites[&3].encryption_secret();
    // Site 2's box for site 3, opened by site 3 and re-sealed by site 2 for site 1.
    let for3 = d.inboxes[&3].iter().find(|b| b.from == 2).expect("box 2→3");
    let shared23 = crypto::agree(&secret3, &pk2).expect("agree");
    let plaintext = crypto::open(
        &shared23,
        d.id,
        2,
        3,
        &wire::decode(&for3.ciphertext).expect("b64"),
    )
    .expect("open");
    let shared21 = crypto::agree(&secret2, &pk1).expect("agree");
    let reseal = |bytes: &[u8], rng: &mut ChaCha20Rng| ShareBox {
        from: 2,
        to: 1,
        ciphertext: wire::encode(&crypto::seal(&shared21, d.id, 2, 1, bytes, rng).expect("seal")),
    };
    let wrong_x = reseal(&plaintext, &mut d.rng);
    let short = reseal(&plaintext[..65], &mut d.rng);
    let site1 = d.sites.get_mut(&1).expect("site 1");
    assert_eq!(
        site1.receive_inbox(&[wrong_x]),
        Err(SecAggError::WrongShareX {
            from: 2,
            expected: 1,
            got: 3
        })
    );
    assert_eq!(
        site1.receive_inbox(&[short]),
        Err(SecAggError::BoxLength {
            from: 2,
            expected: 66,
            got: 65
        })
    );
    // A second, different genuine-looking box from site 2 conflicts with the first.
    let genuine = d.inboxes[&1].clone();
    site1.receive_inbox(&genuine).expect("genuine");
    let mut other = plaintext.clone();
    other[0] = 1;
    other[33] = 1;
    let conflicting = reseal(&other, &mut d.rng);
    assert_eq!(
        site1.receive_inbox(&[conflicting]),
        Err(SecAggError::ConflictingBoxes { from: 2 })
    );
}

#[test]
fn the_roster_is_validated_before_dealing() {
    let mut d = deal(&[1, 2, 3], 2, 2, 22);
    let base = d.participants.clone();
    let site = d.sites.get_mut(&1).expect("site 1");
    let mut fresh = SiteSession::new(d.id, 1, 2, &mut d.rng);
    let mut own = base.clone();
    own[0] = participant(&fresh);
    let check = |f: &mut SiteSession, roster: &[Participant], t: u32, rng: &mut ChaCha20Rng| {
        f.share_boxes(roster, t, rng)
    };

    let mut bad_index = own.clone();
    bad_index[2].index = 65_536;
    assert_eq!(
        check(&mut fresh, &bad_index, 2, &mut d.rng),
        Err(SecAggError::IndexOutOfRange(65_536))
    );
    bad_index[2].index = 0;
    assert_eq!(
        check(&mut fresh, &bad_index, 2, &mut d.rng),
        Err(SecAggError::IndexOutOfRange(0))
    );
    let mut duplicate = own.clone();
    duplicate[2].index = 2;
    assert!(matches!(
        check(&mut fresh, &duplicate, 2, &mut d.rng),
        Err(SecAggError::Duplicate { site: 2, .. })
    ));
    let mut short_keys = own.clone();
    short_keys[1].mask_public_keys.pop();
    assert!(matches!(
        check(&mut fresh, &short_keys, 2, &mut d.rng),
        Err(SecAggError::MaskKeyCount { site: 2, .. })
    ));
    let mut bad_key = own.clone();
    bad_key[2].encryption_public_key = wire::encode(&[1; 31]);
    assert!(matches!(
        check(&mut fresh, &bad_key, 2, &mut d.rng),
        Err(SecAggError::BadKey { site: 3, .. })
    ));
    for t in [1, 4] {
        assert!(matches!(
            check(&mut fresh, &own, t, &mut d.rng),
            Err(SecAggError::Threshold { .. })
        ));
    }
    assert_eq!(
        check(&mut fresh, &own[1..], 2, &mut d.rng),
        Err(SecAggError::NotListed(1))
    );
    assert_eq!(
        check(&mut fresh, &base, 2, &mut d.rng),
        Err(SecAggError::KeysMismatch(1))
    );
    assert!(Aggregator::new(d.id, 4, &base, 2).is_err());
    assert!(
        Aggregator::new(d.id, 2, &base, 3).is_err(),
        "wrong number of rounds"
    );

    // Dealing again: the same roster gets the same boxes; another roster is refused.
    let again = site.share_boxes(&base, 2, &mut d.rng).expect("retry");
    let original: Vec<ShareBox> = d
        .inboxes
        .values()
        .flatten()
        .filter(|b| b.from == 1)
        .cloned()
        .collect();
    assert_eq!(again, original);
    assert_eq!(
        site.share_boxes(&base, 3, &mut d.rng),
        Err(SecAggError::AlreadyDealt)
    );
}

#[test]
fn the_coordinator_checks_responses() {
    let mut s = study(&[1, 2, 3, 4], 2, 1, 23);
    let roster = [1, 2, 3, 4];
    let inputs = s.random_inputs(&[1, 2, 3], 8);
    let masked = s.mask(1, &roster, &inputs);
    let responses = s.respond(1, &roster, &masked, &[1, 2, 3]);
    let unmask = |r: &BTreeMap<u32, UnmaskRequest>| s.aggregator.unmask_sum(1, &roster, &masked, r);
    assert_eq!(unmask(&responses).expect("valid"), wrapping_sum(&inputs));

    for (&responder, response) in &responses {
        let checked = s
            .aggregator
            .check_response(1, responder, &[1, 2, 3], &[4], response);
        assert_eq!(checked, Ok(()), "site {responder}");
        let wrong_sets = s
            .aggregator
            .check_response(1, responder, &[1, 2, 3, 4], &[], response);
        assert!(matches!(wrong_sets, Err(SecAggError::BadResponse { .. })));
    }
    let not_survivor = s
        .aggregator
        .check_response(1, 4, &[1, 2, 3], &[4], &responses[&1]);
    assert!(matches!(
        not_survivor,
        Err(SecAggError::BadResponse { responder: 4, .. })
    ));
    let misattributed = s
        .aggregator
        .check_response(1, 1, &[1, 2, 3], &[4], &responses[&2]);
    assert!(matches!(
        misattributed,
        Err(SecAggError::BadResponse { responder: 1, .. })
    ));

    let mut swapped = responses.clone();
    let answer2 = swapped.remove(&2).expect("site 2");
    swapped.insert(1, answer2);
    assert!(
        matches!(
            unmask(&swapped),
            Err(SecAggError::BadResponse { responder: 1, .. })
        ),
        "x ≠ responder"
    );

    let mut missing = responses.clone();
    missing.get_mut(&1).expect("site 1").self_mask_shares.pop();
    assert!(matches!(
        unmask(&missing),
        Err(SecAggError::BadResponse { responder: 1, .. })
    ));

    let mut outsider = responses.clone();
    let answer3 = outsider[&3].clone();
    outsider.insert(4, answer3);
    assert!(matches!(
        unmask(&outsider),
        Err(SecAggError::BadResponse { responder: 4, .. })
    ));

    // A corrupt share of the dropped site's key is caught against its public key.
    let mut corrupt: BTreeMap<u32, UnmaskRequest> = responses.into_iter().filter(|(k, _)| *k != 3).collect();
    let share = &mut corrupt.get_mut(&1).expect("site 1").mask_key_shares[0];
    let mut bytes = wire::decode(&share.share).expect("b64");
    bytes[5] ^= 1;
    share.share = wire::encode(&bytes);
    assert_eq!(
        unmask(&corrupt),
        Err(SecAggError::ReconstructionMismatch { round: 1, site: 4 })
    );

    let mut uneven = masked.clone();
    uneven.get_mut(&2).expect("site 2").push(0);
    let responses = s.respond(1, &roster, &masked, &[1, 2]);
    let err = s
        .aggregator
        .unmask_sum(1, &roster, &uneven, &responses)
        .expect_err("lengths differ");
    assert!(
        matches!(
            err,
            SecAggError::LengthMismatch {
                site: 2,
                expected: 8,
                got: 9,
                ..
            }
        ),
        "{err}"
    );
    let err = s
        .aggregator
        .unmask_sum(1, &[1, 2, 4], &masked, &responses)
        .expect_err("3 not in roster");
    assert!(matches!(err, SecAggError::InconsistentSets { .. }), "{err}");
}

#[test]
fn participants_with_gaps_in_their_indices_work() {
    // Sites 1, 3 and 4 of 4 invited joined (site 2 never did).
    let mut s = study(&[1, 3, 4], 2, 2, 24);
    let roster = [1, 3, 4];
    let inputs = s.random_inputs(&roster, 200);
    assert_eq!(
        s.round(1, &roster, &inputs, &roster).expect("round 1"),
        wrapping_sum(&inputs)
    );
    let inputs = s.random_inputs(&[1, 4], 200);
    assert_eq!(
        s.round(2, &roster, &inputs, &[1, 4]).expect("site 3 dropped"),
        wrapping_sum(&inputs)
    );
    let err = s
        .site(1)
        .mask(2, &[1, 2, 3], &[0])
        .expect_err("site 2 never joined");
    assert!(matches!(err, SecAggError::UnknownSite { site: 2, .. }));
}

#[test]
fn errors_carry_no_secret_material() {
    let mut d = deal(&[1, 2], 2, 1, 25);
    let secret = d.sites[&1].encryption_secret();
    let from2 = d.inboxes[&1].iter().find(|b| b.from == 2).expect("box").clone();
    let site = d.sites.get_mut(&1).expect("site 1");
    let message = site
        .receive_inbox(&[tamper(&from2, 30)])
        .expect_err("tampered")
        .to_string();
    assert!(!message.contains(&wire::encode(&secret)) && !message.contains(&from2.ciphertext));
    assert!(message.contains("site 2"), "{message}");
}
