//! The coordinator's half of secure aggregation (docs/design/federation.md, "Unmasking round r";
//! Bonawitz et al. 2017, §4 round 4): reconstruct the survivors' self-mask seeds and the dropped
//! sites' masking secrets from ≥ t responses, and remove those masks from the sum. Under SecAgg+
//! (Bell et al. 2020) each secret is recovered from the shares of its owner's graph neighbours,
//! and a dropped site's pair masks are removed only where they were added: with its neighbours.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;
use zeroize::Zeroizing;

use super::graph::{GraphSpec, Neighbourhoods};
use super::{PeerKeys, SecAggError, known_sites, parse_participants, round_slot, shamir_field};
use crate::federation::crypto::{self, KeyPair};
use crate::federation::messages::{Participant, RevealedShare, UnmaskRequest};
use crate::federation::shamir::{self, Field, Share};
use crate::federation::wire;

/// The coordinator's view of a study's secure aggregation: the participants' public keys.
#[derive(Debug, Clone)]
pub struct Aggregator {
    study: Uuid,
    threshold: u32,
    shamir_threshold: u16,
    /// The field of every sharing (GF(2⁸) unless an x-coordinate exceeds 255).
    field: Field,
    rounds: u32,
    peers: BTreeMap<u32, PeerKeys>,
    /// SecAgg+: the neighbourhoods (`None`: the complete graph).
    graph: Option<Neighbourhoods>,
}

/// The shares revealed for one round, by the site whose secret they share.
type SharesBySite = BTreeMap<u32, Vec<Share>>;
/// One responder's shares, by the site whose secret they share.
type ShareBySite = BTreeMap<u32, Share>;

impl Aggregator {
    /// Validates the roster as the sites do (indices, keys, 2 ≤ `threshold` ≤ its size).
    pub fn new(
        study: Uuid,
        threshold: u32,
        participants: &[Participant],
        rounds: u32,
    ) -> Result<Aggregator, SecAggError> {
        let (peers, shamir_threshold) = parse_participants(participants, rounds, threshold, false)?;
        let max_index = peers.keys().next_back().copied().unwrap_or(0);
        let field = shamir_field(u16::try_from(max_index).unwrap_or(0))?;
        Ok(Aggregator {
            study,
            threshold,
            shamir_threshold,
            field,
            rounds,
            peers,
            graph: None,
        })
    }

    /// SecAgg+: as [`Aggregator::new`], with the graph `spec` describes (checked and derived
    /// from the roster as the sites do); secrets are recovered from t neighbours' shares.
    pub fn new_sparse(
        study: Uuid,
        threshold: u32,
        participants: &[Participant],
        rounds: u32,
        spec: &GraphSpec,
    ) -> Result<Aggregator, SecAggError> {
        let (peers, _) = parse_participants(participants, rounds, threshold, true)?;
        let roster: Vec<u32> = peers.keys().copied().collect();
        let graph = Neighbourhoods::derive(&roster, spec)?;
        let field = shamir_field(u16::try_from(graph.degree()).unwrap_or(0))?;
        Ok(Aggregator {
            study,
            threshold,
            shamir_threshold: u16::from(graph.threshold()),
            field,
            rounds,
            peers,
            graph: Some(graph),
        })
    }

    /// The sites of `set` whose masks and shares meet `site`'s, in increasing order: all of
    /// them on the complete graph; under SecAgg+ its neighbours in `set`, found from its k
    /// neighbours rather than by testing all of `set`, so that [`Aggregator::unmask_sum`] does
    /// S·k work per round instead of S² (Bell et al. 2020 Table 2's server computation).
    /// ([`Aggregator::check_response`], which the live service calls once per answer, still
    /// builds the round's sets from its lists: O(S log S) per answer, O(S² log S) a round.)
    fn linked_in(&self, site: u32, set: &BTreeSet<u32>) -> Vec<u32> {
        match &self.graph {
            None => set.iter().copied().filter(|&other| other != site).collect(),
            Some(g) => {
                let mut linked: Vec<u32> = g
                    .neighbours(site)
                    .into_iter()
                    .filter(|v| set.contains(v))
                    .collect();
                linked.sort_unstable();
                linked
            }
        }
    }

    /// The sites of `set` whose secrets `responder` holds shares of, with the x of its share:
    /// all of them at x = `responder` on the complete graph, its neighbours at their
    /// neighbourhood position under SecAgg+.
    fn held_by(&self, responder: u32, set: &BTreeSet<u32>) -> BTreeMap<u32, u32> {
        match &self.graph {
            None => set.iter().map(|&owner| (owner, responder)).collect(),
            Some(g) => self
                .linked_in(responder, set)
                .into_iter()
                .filter_map(|owner| g.share_x(owner, responder).map(|x| (owner, u32::from(x))))
                .collect(),
        }
    }

    /// Recovers `site`'s secret from its shares, refusing fewer than the Shamir threshold.
    fn recover(&self, round: u32, site: u32, shares: Option<&Vec<Share>>) -> Result<[u8; 32], SecAggError> {
        let got = shares.map_or(0, Vec::len);
        match shares {
            Some(shares) if got >= usize::from(self.shamir_threshold) => {
                Ok(shamir::combine(shares, self.shamir_threshold)?)
            }
            _ => Err(SecAggError::TooFewShares {
                round,
                site,
                got,
                threshold: self.shamir_threshold,
            }),
        }
    }

    /// The exact sum (mod 2^64) of the survivors' encodings in `round`. The survivors are the
    /// keys of `masked` (a subset of `roster`, at least t, vectors of one length); the dropped
    /// are the rest of `roster`. Needs at least t `responses` from survivors, each revealing a
    /// share of b_{u,r} for every survivor u and of s_{d,r} for every dropped d at x = its
    /// responder's index.
    pub fn unmask_sum(
        &self,
        round: u32,
        roster: &[u32],
        masked: &BTreeMap<u32, Vec<u64>>,
        responses: &BTreeMap<u32, UnmaskRequest>,
    ) -> Result<Vec<u64>, SecAggError> {
        let slot = round_slot(round, self.rounds)?;
        let roster = known_sites(roster, "roster", &self.peers)?;
        let survivors: BTreeSet<u32> = masked.keys().copied().collect();
        if let Some(outsider) = survivors.iter().find(|s| !roster.contains(s)) {
            return Err(SecAggError::InconsistentSets {
                round,
                reason: format!("site {outsider} sent a masked vector but is not in the roster"),
            });
        }
        if survivors.len() < self.threshold as usize {
            return Err(SecAggError::TooFewSurvivors {
                round,
                survivors: survivors.len(),
                threshold: self.threshold,
            });
        }
        let dropped: BTreeSet<u32> = roster.difference(&survivors).copied().collect();
        let (self_shares, mask_shares) = self.collect_shares(round, &survivors, &dropped, responses)?;

        let len = masked.values().next().map_or(0, Vec::len);
        let mut sum = vec![0_u64; len];
        for (&site, z) in masked {
            if z.len() != len {
                return Err(SecAggError::LengthMismatch {
                    round,
                    site,
                    expected: len,
                    got: z.len(),
                });
            }
            for (acc, w) in sum.iter_mut().zip(z) {
                *acc = acc.wrapping_add(*w);
            }
        }
        // Survivors' self masks: z_u carries +PRG(b_{u,r}). Every survivor's seed must be
        // recovered (a missing one would leave its mask in the sum).
        for &u in &survivors {
            let b = Zeroizing::new(self.recover(round, u, self_shares.get(&u))?);
            let seed = Zeroizing::new(crypto::self_seed(&b, self.study, round, u)?);
            crypto::add_prg(&mut sum, &seed, true);
        }
        // Dropped sites' pair masks with each survivor u: z_u carries +PRG(k) if d > u, −PRG(k)
        // if d < u; the survivors' pair masks among themselves cancel in the sum.
        for &d in &dropped {
            let partners = self.linked_in(d, &survivors);
            if partners.is_empty() {
                continue;
            }
            let secret = Zeroizing::new(self.recover(round, d, mask_shares.get(&d))?);
            if KeyPair::from_secret(*secret).public() != self.peers[&d].masks[slot] {
                return Err(SecAggError::ReconstructionMismatch { round, site: d });
            }
            for u in partners {
                let shared = Zeroizing::new(crypto::agree(&secret, &self.peers[&u].masks[slot])?);
                let seed = Zeroizing::new(crypto::pair_seed(&shared, self.study, round, d, u)?);
                crypto::add_prg(&mut sum, &seed, d > u);
            }
        }
        Ok(sum)
    }

    /// Checks the responses (from survivors, at least t, each covering exactly the survivors
    /// and the dropped with shares at x = responder) and gathers their shares by secret owner.
    fn collect_shares(
        &self,
        round: u32,
        survivors: &BTreeSet<u32>,
        dropped: &BTreeSet<u32>,
        responses: &BTreeMap<u32, UnmaskRequest>,
    ) -> Result<(SharesBySite, SharesBySite), SecAggError> {
        if let Some(&outsider) = responses.keys().find(|r| !survivors.contains(r)) {
            return Err(SecAggError::BadResponse {
                round,
                responder: outsider,
                reason: "the responder is not a survivor of the round".to_string(),
            });
        }
        if responses.len() < self.threshold as usize {
            return Err(SecAggError::TooFewResponses {
                round,
                responses: responses.len(),
                threshold: self.threshold,
            });
        }
        let mut self_shares = SharesBySite::new();
        let mut mask_shares = SharesBySite::new();
        for (&responder, response) in responses {
            let (own, keys) = self.parse_response(round, responder, survivors, dropped, response)?;
            for (out, shares) in [(&mut self_shares, own), (&mut mask_shares, keys)] {
                for (site, share) in shares {
                    out.entry(site).or_default().push(share);
                }
            }
        }
        Ok((self_shares, mask_shares))
    }

    /// Checks one unmasking response as [`Aggregator::unmask_sum`] will (a survivor's, with a
    /// valid share at x = `responder` for exactly the survivors' self masks and the dropped
    /// sites' masking keys), so that a malformed answer can be refused when it arrives.
    pub fn check_response(
        &self,
        round: u32,
        responder: u32,
        survivors: &[u32],
        dropped: &[u32],
        response: &UnmaskRequest,
    ) -> Result<(), SecAggError> {
        round_slot(round, self.rounds)?;
        let survivors = known_sites(survivors, "survivors", &self.peers)?;
        let dropped = known_sites(dropped, "dropped", &self.peers)?;
        if !survivors.contains(&responder) {
            return Err(SecAggError::BadResponse {
                round,
                responder,
                reason: "the responder is not a survivor of the round".to_string(),
            });
        }
        self.parse_response(round, responder, &survivors, &dropped, response)
            .map(|_| ())
    }

    /// A response's shares of the survivors' self-mask seeds and of the dropped sites' masking
    /// keys, each list for exactly those of them whose shares the responder holds, every share
    /// at the x the responder holds ([`Aggregator::held_by`]).
    fn parse_response(
        &self,
        round: u32,
        responder: u32,
        survivors: &BTreeSet<u32>,
        dropped: &BTreeSet<u32>,
        response: &UnmaskRequest,
    ) -> Result<(ShareBySite, ShareBySite), SecAggError> {
        let own = self.held_by(responder, survivors);
        let keys = self.held_by(responder, dropped);
        parse_response(round, responder, self.field, (&own, &keys), response)
    }
}

/// A response's shares of the survivors' self-mask seeds and of the dropped sites' masking
/// keys, each list for exactly the owners `expected` names, every share at the x it names.
fn parse_response(
    round: u32,
    responder: u32,
    field: Field,
    expected: (&BTreeMap<u32, u32>, &BTreeMap<u32, u32>),
    response: &UnmaskRequest,
) -> Result<(ShareBySite, ShareBySite), SecAggError> {
    let exactly = |list: &[RevealedShare], expected: &BTreeMap<u32, u32>, what: &str, whose: &str| {
        let shares = parse_revealed(round, responder, list, what, (field, expected))?;
        if shares.keys().eq(expected.keys()) {
            Ok(shares)
        } else {
            Err(SecAggError::BadResponse {
                round,
                responder,
                reason: format!("its {what} are not for exactly the {whose} of the round"),
            })
        }
    };
    Ok((
        exactly(
            &response.self_mask_shares,
            expected.0,
            "self-mask shares",
            "survivors",
        )?,
        exactly(
            &response.mask_key_shares,
            expected.1,
            "masking-key shares",
            "dropped sites",
        )?,
    ))
}

/// The shares of one response list by owner: distinct owners, valid shares in `field` at the x
/// `held` names for each (an owner it does not name is reported by the caller).
fn parse_revealed(
    round: u32,
    responder: u32,
    list: &[RevealedShare],
    what: &str,
    (field, held): (Field, &BTreeMap<u32, u32>),
) -> Result<ShareBySite, SecAggError> {
    let bad = |reason: String| SecAggError::BadResponse {
        round,
        responder,
        reason,
    };
    let mut shares = BTreeMap::new();
    for revealed in list {
        let bytes = Zeroizing::new(
            wire::decode(&revealed.share)
                .map_err(|e| bad(format!("{what} for site {}: {e}", revealed.site)))?,
        );
        let share =
            Share::from_bytes(&bytes).map_err(|e| bad(format!("{what} for site {}: {e}", revealed.site)))?;
        if share.field() != field {
            return Err(bad(format!(
                "a share for site {} is {} bytes, not the study's {}",
                revealed.site,
                share.field().share_len(),
                field.share_len()
            )));
        }
        if held
            .get(&revealed.site)
            .is_some_and(|&x| u32::from(share.x()) != x)
        {
            return Err(bad(format!(
                "a share for site {} has x = {}, not the responder's x = {}",
                revealed.site,
                share.x(),
                held[&revealed.site]
            )));
        }
        if shares.insert(revealed.site, share).is_some() {
            return Err(bad(format!("two {what} for site {}", revealed.site)));
        }
    }
    Ok(shares)
}
