//! Tests of secure aggregation: exact sums with and without dropouts, the sites' refusals,
//! uniformity of a masked vector, independence of rounds, box integrity, sparse indices.

use std::collections::BTreeMap;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use uuid::Uuid;

use super::*;
use crate::federation::crypto;
use crate::federation::messages::{ShareBox, UnmaskRequest};
use crate::federation::shamir::{self, Share};

/// A study in process: its sites (by index), roster and coordinator.
struct Study {
    id: Uuid,
    threshold: u32,
    sites: BTreeMap<u32, SiteSession>,
    participants: Vec<Participant>,
    aggregator: Aggregator,
    rng: ChaCha20Rng,
}

fn participant(site: &SiteSession) -> Participant {
    Participant {
        index: site.index(),
        name: format!("site-{}", site.index()),
        encryption_public_key: site.encryption_public_key(),
        mask_public_keys: site.mask_public_keys(),
        signing_public_key: String::new(),
        seed_commitment: String::new(),
    }
}

/// Sites `indices` join and deal their shares; the boxes are grouped by recipient, undelivered.
struct Dealing {
    id: Uuid,
    sites: BTreeMap<u32, SiteSession>,
    participants: Vec<Participant>,
    inboxes: BTreeMap<u32, Vec<ShareBox>>,
    rng: ChaCha20Rng,
}

fn deal(indices: &[u32], threshold: u32, rounds: u32, seed: u64) -> Dealing {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let id = Uuid::from_u128(u128::from(seed) + 1);
    let mut sites: BTreeMap<u32, SiteSession> = indices
        .iter()
        .map(|&i| (i, SiteSession::new(id, i, rounds, &mut rng)))
        .collect();
    let participants: Vec<Participant> = sites.values().map(participant).collect();
    let mut inboxes: BTreeMap<u32, Vec<ShareBox>> = BTreeMap::new();
    for site in sites.values_mut() {
        for b in site
            .share_boxes(&participants, threshold, &mut rng)
            .expect("valid roster")
        {
            inboxes.entry(b.to).or_default().push(b);
        }
    }
    Dealing {
        id,
        sites,
        participants,
        inboxes,
        rng,
    }
}

/// A dealt study whose sites received their inboxes.
fn study(indices: &[u32], threshold: u32, rounds: u32, seed: u64) -> Study {
    let Dealing {
        id,
        mut sites,
        participants,
        inboxes,
        rng,
    } = deal(indices, threshold, rounds, seed);
    for (to, inbox) in &inboxes {
        sites
            .get_mut(to)
            .expect("participant")
            .receive_inbox(inbox)
            .expect("valid boxes");
    }
    let aggregator = Aggregator::new(id, threshold, &participants, rounds).expect("valid roster");
    Study {
        id,
        threshold,
        sites,
        participants,
        aggregator,
        rng,
    }
}

/// Five sites 1..=5 at threshold 3, dealt with `seed`, all of which masked 4 random words in
/// round 1; with that roster.
fn five_masked_round_one(rounds: u32, seed: u64) -> (Study, [u32; 5]) {
    let mut s = study(&[1, 2, 3, 4, 5], 3, rounds, seed);
    let roster = [1, 2, 3, 4, 5];
    let inputs = s.random_inputs(&roster, 4);
    s.mask(1, &roster, &inputs);
    (s, roster)
}

impl Study {
    fn random_inputs(&mut self, sites: &[u32], len: usize) -> BTreeMap<u32, Vec<u64>> {
        sites
            .iter()
            .map(|&s| (s, (0..len).map(|_| self.rng.next_u64()).collect()))
            .collect()
    }

    /// Masks the `inputs` of their sites for `round`.
    fn mask(
        &mut self,
        round: u32,
        roster: &[u32],
        inputs: &BTreeMap<u32, Vec<u64>>,
    ) -> BTreeMap<u32, Vec<u64>> {
        inputs
            .iter()
            .map(|(&s, x)| (s, self.site(s).mask(round, roster, x).expect("mask")))
            .collect()
    }

    /// The unmask responses of `responders` when the senders of `masked` survived.
    fn respond(
        &mut self,
        round: u32,
        roster: &[u32],
        masked: &BTreeMap<u32, Vec<u64>>,
        responders: &[u32],
    ) -> BTreeMap<u32, UnmaskRequest> {
        let (survivors, dropped) = partition(roster, masked);
        let t = self.threshold;
        responders
            .iter()
            .map(|&s| {
                (
                    s,
                    self.site(s)
                        .unmask_response(round, roster, &survivors, &dropped, t)
                        .expect("consistent"),
                )
            })
            .collect()
    }

    /// One round: `inputs` are the contributors; `responders` answer the unmask request.
    fn round(
        &mut self,
        round: u32,
        roster: &[u32],
        inputs: &BTreeMap<u32, Vec<u64>>,
        responders: &[u32],
    ) -> Result<Vec<u64>, SecAggError> {
        let masked = self.mask(round, roster, inputs);
        let responses = self.respond(round, roster, &masked, responders);
        self.aggregator.unmask_sum(round, roster, &masked, &responses)
    }

    fn site(&mut self, index: u32) -> &mut SiteSession {
        self.sites.get_mut(&index).expect("participant")
    }
}

fn partition(roster: &[u32], masked: &BTreeMap<u32, Vec<u64>>) -> (Vec<u32>, Vec<u32>) {
    roster.iter().partition(|s| masked.contains_key(s))
}

fn wrapping_sum(inputs: &BTreeMap<u32, Vec<u64>>) -> Vec<u64> {
    let len = inputs.values().next().map_or(0, Vec::len);
    inputs.values().fold(vec![0; len], |acc, x| {
        acc.iter().zip(x).map(|(a, b)| a.wrapping_add(*b)).collect()
    })
}

#[test]
fn five_sites_without_dropouts_sum_exactly() {
    let mut s = study(&[1, 2, 3, 4, 5], 3, 2, 1);
    let roster = [1, 2, 3, 4, 5];
    for round in 1..=2 {
        let inputs = s.random_inputs(&roster, 1000);
        let masked = s.mask(round, &roster, &inputs);
        assert_ne!(masked[&1], inputs[&1], "masked");
        let responses = s.respond(round, &roster, &masked, &roster);
        let sum = s
            .aggregator
            .unmask_sum(round, &roster, &masked, &responses)
            .expect("unmask");
        assert_eq!(sum, wrapping_sum(&inputs), "round {round}");
    }
}

#[test]
fn two_dropped_sites_still_sum_exactly() {
    let mut s = study(&[1, 2, 3, 4, 5], 3, 1, 2);
    let inputs = s.random_inputs(&[1, 3, 5], 500);
    let sum = s
        .round(1, &[1, 2, 3, 4, 5], &inputs, &[1, 3, 5])
        .expect("3 survivors suffice");
    assert_eq!(sum, wrapping_sum(&inputs));
}

#[test]
fn fewer_than_t_survivors_or_responses_fail() {
    let mut s = study(&[1, 2, 3, 4, 5], 3, 2, 3);
    let roster = [1, 2, 3, 4, 5];
    let inputs = s.random_inputs(&[2, 4], 10);
    let masked = s.mask(1, &roster, &inputs);
    let refused = s.site(2).unmask_response(1, &roster, &[2, 4], &[1, 3, 5], 3);
    assert!(
        matches!(refused, Err(SecAggError::TooFewSurvivors { survivors: 2, .. })),
        "{refused:?}"
    );
    let err = s
        .aggregator
        .unmask_sum(1, &roster, &masked, &BTreeMap::new())
        .expect_err("2 < t");
    assert!(matches!(
        err,
        SecAggError::TooFewSurvivors {
            round: 1,
            survivors: 2,
            threshold: 3
        }
    ));

    let inputs = s.random_inputs(&[1, 2, 3, 4], 10);
    let err = s
        .round(2, &roster, &inputs, &[1, 2])
        .expect_err("2 responses < t");
    assert!(
        matches!(
            err,
            SecAggError::TooFewResponses {
                responses: 2,
                threshold: 3,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn a_silent_survivor_is_still_counted() {
    let mut s = study(&[1, 2, 3, 4], 3, 1, 4);
    let inputs = s.random_inputs(&[1, 2, 3, 4], 300);
    let sum = s
        .round(1, &[1, 2, 3, 4], &inputs, &[1, 2, 4])
        .expect("3 of 4 answer");
    assert_eq!(
        sum,
        wrapping_sum(&inputs),
        "site 3 did not answer but is in the sum"
    );
}

#[test]
fn sites_refuse_inconsistent_sets() {
    let (mut s, roster) = five_masked_round_one(2, 5);
    let site = s.site(1);
    let cases: [(&[u32], &[u32], &[u32]); 6] = [
        (&roster, &[1, 2, 3, 4], &[4, 5]),   // 4 both survived and dropped
        (&roster, &[1, 2, 3], &[4]),         // 5 missing
        (&roster, &[1, 2, 3, 6], &[4, 5]),   // 6 not in the roster
        (&roster, &[2, 3, 4], &[1, 5]),      // this site not a survivor
        (&roster, &[1, 1, 2, 3], &[4, 5]),   // duplicate
        (&[1, 2, 3, 4], &[1, 2, 3, 4], &[]), // not the roster it masked with
    ];
    for (roster_claim, survivors, dropped) in cases {
        let answer = site.unmask_response(1, roster_claim, survivors, dropped, 3);
        assert!(answer.is_err(), "{survivors:?} / {dropped:?} accepted");
    }
    let unknown = site.unmask_response(1, &[1, 2, 3, 4, 9], &[1, 2, 3, 4], &[9], 3);
    assert!(matches!(unknown, Err(SecAggError::UnknownSite { site: 9, .. })));
    assert!(matches!(
        site.unmask_response(1, &roster, &[1, 2, 3], &[4, 5], 2),
        Err(SecAggError::ThresholdMismatch { expected: 3, got: 2 })
    ));
    assert!(matches!(
        site.unmask_response(2, &roster, &roster, &[], 3),
        Err(SecAggError::NotContributed { round: 2 })
    ));
    assert!(matches!(
        site.unmask_response(3, &roster, &roster, &[], 3),
        Err(SecAggError::RoundOutOfRange { round: 3, rounds: 2 })
    ));
}

#[test]
fn sites_answer_a_round_once() {
    let (mut s, roster) = five_masked_round_one(1, 6);
    let site = s.site(1);
    let first = site
        .unmask_response(1, &roster, &[1, 2, 3, 4], &[5], 3)
        .expect("consistent");
    let again = site
        .unmask_response(1, &roster, &[4, 3, 2, 1], &[5], 3)
        .expect("same question");
    assert_eq!(first, again);
    assert_eq!(
        first.self_mask_shares.iter().map(|r| r.site).collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
    assert_eq!(
        first.mask_key_shares.iter().map(|r| r.site).collect::<Vec<_>>(),
        [5]
    );
    let other = site.unmask_response(1, &roster, &[1, 2, 3, 5], &[4], 3);
    assert_eq!(
        other,
        Err(SecAggError::AlreadyAnswered { round: 1 }),
        "would reveal b_5 and s_5"
    );
    let changed = site.mask(1, &[1, 2, 3, 4], &[0; 4]);
    assert_eq!(changed, Err(SecAggError::RosterChanged { round: 1 }));
}

#[test]
fn mask_checks_round_and_roster() {
    let mut s = study(&[1, 2, 3], 3, 1, 7);
    let site = s.site(2);
    assert!(matches!(
        site.mask(0, &[1, 2, 3], &[0]),
        Err(SecAggError::RoundOutOfRange { .. })
    ));
    assert!(matches!(
        site.mask(1, &[1, 3, 4], &[0]),
        Err(SecAggError::UnknownSite { site: 4, .. })
    ));
    assert!(matches!(
        site.mask(1, &[1, 2], &[0]),
        Err(SecAggError::RosterTooSmall { size: 2, .. })
    ));
    let mut fresh = SiteSession::new(s.id, 4, 1, &mut s.rng);
    assert_eq!(fresh.mask(1, &[4], &[0]), Err(SecAggError::RosterNotFixed));
}

#[test]
fn indices_above_255_share_in_gf65536_and_sum_exactly() {
    // The complete graph's x-coordinates are site indices: with an index above 255 every
    // sharing of the study is in GF(2¹⁶) (34-byte shares), dropped sites included.
    let indices = [1, 2, 256, 700, 65_535];
    let mut s = study(&indices, 3, 2, 30);
    let inputs = s.random_inputs(&[2, 256, 65_535], 50);
    let masked = s.mask(1, &indices, &inputs);
    let responses = s.respond(1, &indices, &masked, &[2, 256, 65_535]);
    for response in responses.values() {
        for revealed in response.self_mask_shares.iter().chain(&response.mask_key_shares) {
            let share = Share::from_bytes(&wire::decode(&revealed.share).expect("base64")).expect("share");
            assert_eq!(share.field(), shamir::Field::Gf65536);
        }
    }
    let sum = s
        .aggregator
        .unmask_sum(1, &indices, &masked, &responses)
        .expect("3 survivors, 3 responses");
    assert_eq!(sum, wrapping_sum(&inputs));
    // Round 2 with everyone.
    let inputs = s.random_inputs(&[1, 2, 256, 700, 65_535], 50);
    let sum = s.round(2, &indices, &inputs, &[1, 700, 65_535]).expect("unmask");
    assert_eq!(sum, wrapping_sum(&inputs));
}

#[test]
fn a_share_of_the_wrong_field_is_refused() {
    // In a GF(2¹⁶) study a 33-byte GF(2⁸) share (same x, same y) is a bad response; in a
    // GF(2⁸) study a 34-byte one is.
    for (indices, seed) in [([1, 2, 300], 31), ([1, 2, 3], 32)] {
        let mut s = study(&indices, 2, 1, seed);
        let inputs = s.random_inputs(&indices, 5);
        let masked = s.mask(1, &indices, &inputs);
        let mut responses = s.respond(1, &indices, &masked, &indices);
        let revealed = &mut responses.get_mut(&1).expect("site 1").self_mask_shares[0];
        let bytes = wire::decode(&revealed.share).expect("base64");
        let other: Vec<u8> = if bytes.len() == 34 {
            bytes[1..].to_vec()
        } else {
            [&[0], &bytes[..]].concat()
        };
        revealed.share = wire::encode(&other);
        let err = s
            .aggregator
            .unmask_sum(1, &indices, &masked, &responses)
            .expect_err("wrong field");
        assert!(
            matches!(&err, SecAggError::BadResponse { responder: 1, reason, .. } if reason.contains("bytes, not the study's")),
            "{err:?}"
        );
    }
}

#[path = "tests_boxes.rs"]
mod boxes;
#[path = "tests_privacy.rs"]
mod privacy;
#[path = "tests_sparse.rs"]
mod sparse;
