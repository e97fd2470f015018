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
    let mut s = study(&[1, 2, 3, 4, 5], 3, 2, 5);
    let roster = [1, 2, 3, 4, 5];
    let inputs = s.random_inputs(&roster, 4);
    s.mask(1, &roster, &inputs);
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
    let mut s = study(&[1, 2, 3, 4, 5], 3, 1, 6);
    let roster = [1, 2, 3, 4, 5];
    let inputs = s.random_inputs(&roster, 4);
    s.mask(1, &roster, &inputs);
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

/// Chi-square of the top byte over 256 bins, and the largest |z| of the 64 bit frequencies.
fn uniformity(words: &[u64]) -> (f64, f64) {
    let mut bins = [0_u64; 256];
    let mut ones = [0_u64; 64];
    for &w in words {
        bins[(w >> 56) as usize] += 1;
        for (bit, count) in ones.iter_mut().enumerate() {
            *count += (w >> bit) & 1;
        }
    }
    let n = words.len() as f64;
    let expected = n / 256.0;
    let chi2 = bins
        .iter()
        .map(|&c| (c as f64 - expected).powi(2) / expected)
        .sum();
    let z = ones
        .iter()
        .map(|&c| ((c as f64 - n / 2.0) / (n / 4.0).sqrt()).abs())
        .fold(0.0, f64::max);
    (chi2, z)
}

/// Two-sample chi-square of the top-byte histograms (df = 255).
fn homogeneity(a: &[u64], b: &[u64]) -> f64 {
    let (mut ha, mut hb) = ([0_u64; 256], [0_u64; 256]);
    a.iter().for_each(|&w| ha[(w >> 56) as usize] += 1);
    b.iter().for_each(|&w| hb[(w >> 56) as usize] += 1);
    ha.iter()
        .zip(&hb)
        .filter(|(x, y)| **x + **y > 0)
        .map(|(&x, &y)| (x as f64 - y as f64).powi(2) / (x + y) as f64)
        .sum()
}

#[test]
fn a_masked_vector_is_uniform() {
    // Bounds at p = 1e-6 (Wilson–Hilferty for χ²₂₅₅: 161.5 and 377.2; |z| two-sided: 4.89).
    let (low, high, z_max) = (161.0, 378.0, 4.9);
    let len = 40_000;
    let mut zero_run = study(&[1, 2, 3], 2, 1, 8);
    let zeros = BTreeMap::from([(1, vec![0_u64; len])]);
    let masked_zero = zero_run.mask(1, &[1, 2, 3], &zeros).remove(&1).expect("site 1");
    let mut x_run = study(&[1, 2, 3], 2, 1, 9);
    let x: Vec<u64> = (0..len as u64).map(|i| i % 1000 * (1 << 40)).collect();
    let masked_x = x_run
        .mask(1, &[1, 2, 3], &BTreeMap::from([(1, x.clone())]))
        .remove(&1)
        .expect("site 1");
    for (name, words) in [("0", &masked_zero), ("x", &masked_x)] {
        let (chi2, z) = uniformity(words);
        assert!(chi2 > low && chi2 < high, "input {name}: top-byte χ² = {chi2}");
        assert!(z < z_max, "input {name}: bit frequency |z| = {z}");
    }
    let between = homogeneity(&masked_zero, &masked_x);
    assert!(between > low && between < high, "0 vs x: χ² = {between}");
    // Control: the same statistics do see the structure of x itself.
    let (chi2, z) = uniformity(&x);
    assert!(chi2 > high && z > z_max, "unmasked x: χ² = {chi2}, |z| = {z}");
    assert!(homogeneity(&masked_zero, &x) > high);
}

#[test]
fn revealing_a_later_masking_key_exposes_no_earlier_round() {
    let mut s = study(&[1, 2, 3], 2, 2, 10);
    let roster = [1, 2, 3];
    // Round 1: everyone survives, so the server learns b_{3,1}.
    let round1 = s.random_inputs(&roster, 64);
    let masked1 = s.mask(1, &roster, &round1);
    let responses1 = s.respond(1, &roster, &masked1, &roster);
    assert_eq!(
        s.aggregator
            .unmask_sum(1, &roster, &masked1, &responses1)
            .expect("unmask"),
        wrapping_sum(&round1)
    );
    // Round 2: site 3 drops, so the server learns s_{3,2}.
    let round2 = s.random_inputs(&[1, 2], 64);
    let masked2 = s.mask(2, &roster, &round2);
    let responses2 = s.respond(2, &roster, &masked2, &[1, 2]);
    assert_eq!(
        s.aggregator
            .unmask_sum(2, &roster, &masked2, &responses2)
            .expect("unmask"),
        wrapping_sum(&round2)
    );

    let recover = |responses: &BTreeMap<u32, UnmaskRequest>, self_mask: bool, site: u32| {
        let shares: Vec<Share> = responses
            .values()
            .flat_map(|r| {
                if self_mask {
                    &r.self_mask_shares
                } else {
                    &r.mask_key_shares
                }
            })
            .filter(|r| r.site == site)
            .map(|r| Share::from_bytes(&wire::decode(&r.share).expect("base64")).expect("share"))
            .collect();
        shamir::combine(&shares, 2).expect("t shares")
    };
    let s32 = recover(&responses2, false, 3);
    let b31 = recover(&responses1, true, 3);
    assert_eq!(
        s32,
        s.site(3).masking_secret(2),
        "the server does learn s_{{3,2}}"
    );
    let s31 = s.site(3).masking_secret(1);
    assert_ne!(s32, s31);

    // The attack a single masking key would allow: z_{3,1} − PRG(b_{3,1}) − pair masks.
    let keys: Vec<[u8; 32]> = s
        .participants
        .iter()
        .map(|p| wire::decode_key(&p.mask_public_keys[0]).expect("key"))
        .collect();
    let unmask_site3 = |secret: &[u8; 32]| {
        let mut z = masked1[&3].clone();
        crypto::add_prg(
            &mut z,
            &crypto::self_seed(&b31, s.id, 1, 3).expect("derive"),
            true,
        );
        for j in [1_u32, 2] {
            let shared = crypto::agree(secret, &keys[j as usize - 1]).expect("agree");
            let seed = crypto::pair_seed(&shared, s.id, 1, 3, j).expect("derive");
            crypto::add_prg(&mut z, &seed, false); // site 3 subtracted its masks with j < 3
        }
        z
    };
    assert_eq!(
        unmask_site3(&s31),
        round1[&3],
        "control: the round-1 key would expose x_3"
    );
    let attempt = unmask_site3(&s32);
    let hits = attempt.iter().zip(&round1[&3]).filter(|(a, b)| a == b).count();
    assert_eq!(hits, 0, "s_{{3,2}} does not remove round-1 masks");
    for j in [1_u32, 2] {
        let true_seed = crypto::pair_seed(
            &crypto::agree(&s31, &keys[j as usize - 1]).expect("agree"),
            s.id,
            1,
            3,
            j,
        );
        let guessed = crypto::pair_seed(
            &crypto::agree(&s32, &keys[j as usize - 1]).expect("agree"),
            s.id,
            1,
            3,
            j,
        );
        assert_ne!(true_seed.expect("derive"), guessed.expect("derive"));
    }
}

#[path = "tests_boxes.rs"]
mod boxes;
