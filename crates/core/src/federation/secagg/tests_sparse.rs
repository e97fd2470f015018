//! SecAgg+ (docs/design/federation.md, "SecAgg+"): exact sums with dropouts within the bound,
//! a clear error beyond it, and the sites' refusals.

use std::collections::{BTreeMap, BTreeSet};

use rand::{RngCore, SeedableRng, seq::SliceRandom};
use rand_chacha::ChaCha20Rng;
use uuid::Uuid;

use super::{participant, partition, wrapping_sum};
use crate::federation::messages::{Participant, ShareBox, UnmaskRequest};
use crate::federation::secagg::{Aggregator, GraphSpec, Neighbourhoods, SecAggError, SiteSession};

const SITES: u32 = 120;
/// The global (noise) threshold: survivors needed per round.
const THRESHOLD: u32 = 60;
const RATE: f64 = 0.1;

struct Sparse {
    sites: BTreeMap<u32, SiteSession>,
    participants: Vec<Participant>,
    spec: GraphSpec,
    graph: Neighbourhoods,
    aggregator: Aggregator,
    rng: ChaCha20Rng,
}

/// `SITES` sites with sparse indices 2, 4, …, dealt and delivered under SecAgg+.
fn sparse(seed: u64) -> Sparse {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let id = Uuid::from_u128(u128::from(seed) + 7);
    let mut sites: BTreeMap<u32, SiteSession> = (1..=SITES)
        .map(|i| (2 * i, SiteSession::new(id, 2 * i, 1, &mut rng)))
        .collect();
    let participants: Vec<Participant> = sites.values().map(participant).collect();
    let mut graph_seed = [0u8; 32];
    rng.fill_bytes(&mut graph_seed);
    let spec = GraphSpec::new(graph_seed, SITES, RATE, RATE).expect("feasible");
    let mut inboxes: BTreeMap<u32, Vec<ShareBox>> = BTreeMap::new();
    for site in sites.values_mut() {
        let boxes = site
            .share_boxes_sparse(&participants, THRESHOLD, &spec, &mut rng)
            .expect("valid roster");
        assert_eq!(boxes.len(), spec.degree as usize, "one box per neighbour");
        for b in boxes {
            inboxes.entry(b.to).or_default().push(b);
        }
    }
    for (to, inbox) in &inboxes {
        sites
            .get_mut(to)
            .unwrap()
            .receive_inbox(inbox)
            .expect("valid boxes");
    }
    let roster: Vec<u32> = sites.keys().copied().collect();
    let graph = Neighbourhoods::derive(&roster, &spec).unwrap();
    let aggregator = Aggregator::new_sparse(id, THRESHOLD, &participants, 1, &spec).unwrap();
    Sparse {
        sites,
        participants,
        spec,
        graph,
        aggregator,
        rng,
    }
}

impl Sparse {
    fn roster(&self) -> Vec<u32> {
        self.sites.keys().copied().collect()
    }

    /// Every site of `senders` masks 3 random words for round 1; returns inputs and vectors.
    fn mask(&mut self, senders: &[u32]) -> (BTreeMap<u32, Vec<u64>>, BTreeMap<u32, Vec<u64>>) {
        let roster = self.roster();
        let inputs: BTreeMap<u32, Vec<u64>> = senders
            .iter()
            .map(|&s| (s, (0..3).map(|_| self.rng.next_u64()).collect()))
            .collect();
        let masked = inputs
            .iter()
            .map(|(&s, x)| (s, self.sites.get_mut(&s).unwrap().mask(1, &roster, x).unwrap()))
            .collect();
        (inputs, masked)
    }

    /// The responses of the survivors that agree to answer.
    fn respond(&mut self, masked: &BTreeMap<u32, Vec<u64>>) -> BTreeMap<u32, UnmaskRequest> {
        let roster = self.roster();
        let (survivors, dropped) = partition(&roster, masked);
        survivors
            .iter()
            .filter_map(|&s| {
                let site = self.sites.get_mut(&s).unwrap();
                site.unmask_response(1, &roster, &survivors, &dropped, THRESHOLD)
                    .ok()
                    .map(|r| (s, r))
            })
            .collect()
    }

    fn sum(&mut self, masked: &BTreeMap<u32, Vec<u64>>) -> Result<Vec<u64>, SecAggError> {
        let responses = self.respond(masked);
        let roster = self.roster();
        self.aggregator.unmask_sum(1, &roster, masked, &responses)
    }
}

#[test]
fn sums_exactly_without_dropouts() {
    let mut s = sparse(1);
    assert!(s.spec.degree < SITES - 1, "the test needs a sparse graph");
    let roster = s.roster();
    let (inputs, masked) = s.mask(&roster);
    assert_eq!(s.sum(&masked).unwrap(), wrapping_sum(&inputs));
}

#[test]
fn sums_exactly_with_dropouts_within_the_bound() {
    for seed in 2..5 {
        let mut s = sparse(seed);
        let mut roster = s.roster();
        roster.shuffle(&mut s.rng);
        let dropped = (RATE * f64::from(SITES)).ceil() as usize;
        let senders = &roster[dropped..];
        let (inputs, masked) = s.mask(senders);
        assert_eq!(s.sum(&masked).unwrap(), wrapping_sum(&inputs), "seed {seed}");
    }
}

#[test]
fn too_many_dropped_neighbours_fail_clearly() {
    let mut s = sparse(5);
    let victim = 2;
    let t = s.spec.threshold as usize;
    let neighbours = s.graph.neighbours(victim);
    let gone: BTreeSet<u32> = neighbours[..neighbours.len() - (t - 1)].iter().copied().collect();
    let senders: Vec<u32> = s.roster().into_iter().filter(|j| !gone.contains(j)).collect();
    let (_, masked) = s.mask(&senders);
    let responses = s.respond(&masked);
    assert!(
        !responses.contains_key(&victim),
        "the victim refuses: fewer than t neighbours survived"
    );
    let roster = s.roster();
    match s.aggregator.unmask_sum(1, &roster, &masked, &responses) {
        Err(SecAggError::TooFewShares { site, got, .. }) => {
            assert!(got < t, "site {site}: {got} shares");
        }
        other => panic!("expected a clear failure, got {other:?}"),
    }
}

#[test]
fn a_site_refuses_requests_that_would_reveal_too_much() {
    let mut s = sparse(6);
    let roster = s.roster();
    s.mask(&roster);
    let victim = 4;
    let neighbour = s.graph.neighbours(victim)[0];
    let everyone: Vec<u32> = roster.clone();
    let site = s.sites.get_mut(&neighbour).unwrap();
    let first = site
        .unmask_response(1, &roster, &everyone, &[], THRESHOLD)
        .unwrap();
    // Only neighbours' shares, never a site's both secrets.
    let own: BTreeSet<u32> = first.self_mask_shares.iter().map(|r| r.site).collect();
    assert_eq!(own, s.graph.neighbours(neighbour).into_iter().collect());
    assert!(first.mask_key_shares.is_empty());
    // The same round told again with the victim dropped: refused (Bonawitz's rule).
    let without: Vec<u32> = roster.iter().copied().filter(|&j| j != victim).collect();
    assert_eq!(
        site.unmask_response(1, &roster, &without, &[victim], THRESHOLD),
        Err(SecAggError::AlreadyAnswered { round: 1 })
    );
    // A fresh site told that fewer than t of its neighbours survived refuses.
    let other = *roster.iter().find(|&&j| j != neighbour && j != victim).unwrap();
    let theirs: BTreeSet<u32> = s.graph.neighbours(other).into_iter().collect();
    let survivors: Vec<u32> = roster.iter().copied().filter(|j| !theirs.contains(j)).collect();
    let dropped: Vec<u32> = theirs.iter().copied().collect();
    assert!(matches!(
        s.sites
            .get_mut(&other)
            .unwrap()
            .unmask_response(1, &roster, &survivors, &dropped, THRESHOLD),
        Err(SecAggError::TooFewNeighbours { survivors: 0, .. })
    ));
}

#[test]
fn the_coordinator_refuses_a_response_with_shares_of_non_neighbours() {
    let mut s = sparse(7);
    let roster = s.roster();
    let (_, masked) = s.mask(&roster);
    let mut responses = s.respond(&masked);
    let (&responder, _) = responses.iter().next().unwrap();
    let stranger = *roster
        .iter()
        .find(|&&j| j != responder && !s.graph.are_neighbours(responder, j))
        .unwrap();
    let copied = responses[&responder].self_mask_shares[0].clone();
    let forged = crate::federation::messages::RevealedShare {
        site: stranger,
        ..copied
    };
    responses
        .get_mut(&responder)
        .unwrap()
        .self_mask_shares
        .push(forged);
    assert!(matches!(
        s.aggregator.unmask_sum(1, &roster, &masked, &responses),
        Err(SecAggError::BadResponse { .. })
    ));
}

#[test]
fn sites_refuse_a_graph_that_is_not_the_derived_one_and_boxes_from_strangers() {
    let mut s = sparse(8);
    let tampered = GraphSpec {
        degree: s.spec.degree + 2,
        ..s.spec
    };
    let id = Uuid::from_u128(99);
    let mut fresh = SiteSession::new(id, 2, 1, &mut s.rng);
    let mut participants = s.participants.clone();
    participants[0] = participant(&fresh);
    assert!(matches!(
        fresh.share_boxes_sparse(&participants, THRESHOLD, &tampered, &mut s.rng),
        Err(SecAggError::GraphMismatch { .. })
    ));
    // A box from a non-neighbour is refused before it is opened.
    let stranger = *s
        .roster()
        .iter()
        .find(|&&j| j != 2 && !s.graph.are_neighbours(2, j))
        .unwrap();
    let forged = ShareBox {
        from: stranger,
        to: 2,
        ciphertext: String::new(),
    };
    assert_eq!(
        s.sites.get_mut(&2).unwrap().receive_inbox(&[forged]),
        Err(SecAggError::NotNeighbour {
            from: stranger,
            this: 2
        })
    );
}
