use std::collections::BTreeMap;

use uuid::Uuid;

use super::*;
use crate::federation::messages::{Participant, SeedReveal};
use crate::federation::wire;

fn member(study: Uuid, index: u32, reveal: &[u8; 32]) -> Participant {
    Participant {
        index,
        name: format!("site-{index}"),
        encryption_public_key: String::new(),
        mask_public_keys: Vec::new(),
        signing_public_key: String::new(),
        seed_commitment: wire::encode(&commitment(study, index, reveal)),
    }
}

fn roster(study: Uuid, sites: &[u32]) -> (Vec<Participant>, Vec<SeedReveal>) {
    let reveals: Vec<[u8; 32]> = sites.iter().map(|&i| [i as u8; 32]).collect();
    let participants = sites
        .iter()
        .zip(&reveals)
        .map(|(&i, r)| member(study, i, r))
        .collect();
    let relayed = sites
        .iter()
        .zip(&reveals)
        .map(|(&site, r)| SeedReveal {
            site,
            reveal: wire::encode(r),
        })
        .collect();
    (participants, relayed)
}

#[test]
fn every_reveal_that_opens_its_commitment_gives_one_seed_in_any_order() {
    let study = Uuid::new_v4();
    let (participants, mut reveals) = roster(study, &[1, 2, 5, 9]);
    let seed = seed_from_reveals(study, &participants, &reveals).unwrap();
    reveals.reverse();
    assert_eq!(seed_from_reveals(study, &participants, &reveals).unwrap(), seed);
    let expected: BTreeMap<u32, [u8; 32]> = [1u32, 2, 5, 9].iter().map(|&i| (i, [i as u8; 32])).collect();
    assert_eq!(seed, graph_seed(study, &expected));
    // Another study, or one reveal changed, gives another seed.
    let mut changed = expected.clone();
    changed.insert(5, [0xAA; 32]);
    assert_ne!(graph_seed(study, &changed), seed);
    assert_ne!(graph_seed(Uuid::new_v4(), &expected), seed);
}

#[test]
fn a_reveal_that_does_not_open_its_commitment_is_refused() {
    let study = Uuid::new_v4();
    let (participants, mut reveals) = roster(study, &[1, 2, 3]);
    reveals[1].reveal = wire::encode(&[0x55; 32]);
    let e = seed_from_reveals(study, &participants, &reveals).unwrap_err();
    assert!(matches!(e, SecAggError::BadReveal { site: 2, .. }), "{e}");
    // The same bytes committed for another site or study do not open it either.
    let moved = commitment(study, 1, &[2; 32]);
    assert_ne!(wire::encode(&moved), participants[1].seed_commitment);
    assert_ne!(
        commitment(Uuid::new_v4(), 2, &[2; 32]),
        commitment(study, 2, &[2; 32])
    );
}

#[test]
fn a_missing_repeated_unknown_or_malformed_reveal_is_refused() {
    let study = Uuid::new_v4();
    let (participants, reveals) = roster(study, &[1, 2, 3]);
    let missing = seed_from_reveals(study, &participants, &reveals[..2]).unwrap_err();
    assert!(
        matches!(missing, SecAggError::BadReveal { site: 3, .. }),
        "{missing}"
    );
    let mut twice = reveals.clone();
    twice.push(reveals[0].clone());
    let e = seed_from_reveals(study, &participants, &twice).unwrap_err();
    assert!(matches!(e, SecAggError::Duplicate { site: 1, .. }), "{e}");
    let mut unknown = reveals.clone();
    unknown[2].site = 7;
    let e = seed_from_reveals(study, &participants, &unknown).unwrap_err();
    assert!(matches!(e, SecAggError::UnknownSite { site: 7, .. }), "{e}");
    let mut short = reveals.clone();
    short[0].reveal = wire::encode(&[1; 31]);
    let e = seed_from_reveals(study, &participants, &short).unwrap_err();
    assert!(matches!(e, SecAggError::BadReveal { site: 1, .. }), "{e}");
    let mut uncommitted = participants.clone();
    uncommitted[0].seed_commitment = String::new();
    let e = seed_from_reveals(study, &uncommitted, &reveals).unwrap_err();
    assert!(matches!(e, SecAggError::BadReveal { site: 1, .. }), "{e}");
}
