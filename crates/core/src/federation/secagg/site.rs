//! The site's half of secure aggregation (docs/design/federation.md; Bonawitz et al. 2017,
//! §4 rounds 0–4, with per-round masking keys).

use std::collections::{BTreeMap, BTreeSet};

use rand::RngCore;
use uuid::Uuid;
use zeroize::Zeroizing;

use super::graph::{GraphSpec, Neighbourhoods};
use super::{
    PeerKeys, SecAggError, known_sites, parse_participants, round_shares_len, round_slot, shamir_field,
};
use crate::federation::crypto::{self, KeyPair, Seed};
use crate::federation::messages::{Participant, RevealedShare, ShareBox, UnmaskRequest};
use crate::federation::shamir::{self, Field, Share};
use crate::federation::wire;

/// What this site received from one peer for one round: its shares of s_{peer,r} and b_{peer,r}.
struct RoundShares {
    mask_key: Share,
    self_seed: Share,
}

/// The roster and threshold this site dealt its shares for, and the boxes it produced (a retry
/// with the same roster gets the same boxes: the secrets are dealt once).
struct Dealt {
    participants: Vec<Participant>,
    threshold: u32,
    /// SecAgg+: the graph's public description and the neighbourhoods derived from it.
    spec: Option<GraphSpec>,
    graph: Option<Neighbourhoods>,
    /// The field of every sharing of this roster (GF(2⁸) unless an x-coordinate exceeds 255).
    field: Field,
    peers: BTreeMap<u32, PeerKeys>,
    boxes: Vec<ShareBox>,
}

impl Dealt {
    /// Whether `peer` is one this site masks with and exchanges shares with (every participant
    /// on the complete graph, the graph neighbours under SecAgg+).
    fn linked(&self, this: u32, peer: u32) -> bool {
        self.graph.as_ref().is_none_or(|g| g.are_neighbours(this, peer))
    }

    /// The x-coordinate of this site's share of `dealer`'s secrets.
    fn share_x(&self, dealer: u32, this: u32) -> Option<u32> {
        match &self.graph {
            None => Some(this),
            Some(g) => g.share_x(dealer, this).map(u32::from),
        }
    }
}

/// One site's secure-aggregation state for one study. Secrets are zeroized on drop.
pub struct SiteSession {
    study: Uuid,
    index: u32,
    rounds: u32,
    encryption: KeyPair,
    /// s_{i,r}, r = 1..=rounds.
    masking: Vec<KeyPair>,
    /// b_{i,r}, r = 1..=rounds.
    self_seeds: Vec<Zeroizing<Seed>>,
    dealt: Option<Dealt>,
    /// Shares received, by sender, per round.
    received: BTreeMap<u32, Vec<RoundShares>>,
    /// The roster this site masked each round with.
    masked: BTreeMap<u32, Vec<u32>>,
    /// The (survivors, dropped) sets this site answered each round with.
    answered: BTreeMap<u32, (Vec<u32>, Vec<u32>)>,
    /// k_{ij,r} for every linked peer j, by round: the X25519 agreements, which depend only on
    /// keys fixed at the key exchange, computed once when the shares arrive
    /// ([`SiteSession::receive_inbox`]) instead of on every round's critical path (nine of them
    /// were about 0.6 ms of a 1.6 ms masking step at ten sites: docs/performance-federation.md).
    /// Each round's are dropped once it is masked; absent ones are computed when needed.
    pair_seeds: BTreeMap<u32, BTreeMap<u32, Zeroizing<Seed>>>,
}

impl SiteSession {
    /// Fresh keys for site `index` of `study`: one encryption key pair and, for each round
    /// 1..=`rounds`, a masking key pair and a self-mask seed.
    pub fn new(study: Uuid, index: u32, rounds: u32, rng: &mut dyn RngCore) -> SiteSession {
        let encryption = KeyPair::generate(rng);
        let mut masking = Vec::with_capacity(rounds as usize);
        let mut self_seeds = Vec::with_capacity(rounds as usize);
        for _ in 0..rounds {
            masking.push(KeyPair::generate(rng));
            let mut seed = Zeroizing::new([0u8; 32]);
            rng.fill_bytes(seed.as_mut());
            self_seeds.push(seed);
        }
        SiteSession {
            study,
            index,
            rounds,
            encryption,
            masking,
            self_seeds,
            dealt: None,
            received: BTreeMap::new(),
            masked: BTreeMap::new(),
            answered: BTreeMap::new(),
            pair_seeds: BTreeMap::new(),
        }
    }

    pub fn index(&self) -> u32 {
        self.index
    }

    /// The encryption public key to publish at join (base64).
    pub fn encryption_public_key(&self) -> String {
        wire::encode(&self.encryption.public())
    }

    /// The masking public keys to publish at join, rounds 1..=L (base64).
    pub fn mask_public_keys(&self) -> Vec<String> {
        self.masking.iter().map(|k| wire::encode(&k.public())).collect()
    }

    /// Deals this site's secrets: every round's masking secret and self-mask seed split
    /// `threshold`-of-n with x = recipient index, one AEAD box per participant (this site
    /// included) holding, per round, its share of s_{i,r} then its share of b_{i,r}.
    ///
    /// Validates the roster first (see the errors). Calling again with the same roster and
    /// threshold returns the same boxes; another roster is refused.
    pub fn share_boxes(
        &mut self,
        participants: &[Participant],
        threshold: u32,
        rng: &mut dyn RngCore,
    ) -> Result<Vec<ShareBox>, SecAggError> {
        self.deal(participants, threshold, None, rng)
    }

    /// SecAgg+ (docs/design/federation.md, "SecAgg+"): as [`SiteSession::share_boxes`], but the
    /// secrets are split t-of-k among this site's k neighbours in the graph `spec` describes
    /// (x = the neighbour's position in this site's neighbourhood), one box per neighbour. The
    /// spec's k and t must be the ones derived from the roster's size and the spec's rates, and
    /// the graph is recomputed here from the roster and the public seed.
    pub fn share_boxes_sparse(
        &mut self,
        participants: &[Participant],
        threshold: u32,
        spec: &GraphSpec,
        rng: &mut dyn RngCore,
    ) -> Result<Vec<ShareBox>, SecAggError> {
        self.deal(participants, threshold, Some(spec), rng)
    }

    fn deal(
        &mut self,
        participants: &[Participant],
        threshold: u32,
        spec: Option<&GraphSpec>,
        rng: &mut dyn RngCore,
    ) -> Result<Vec<ShareBox>, SecAggError> {
        if let Some(dealt) = &self.dealt {
            return if dealt.participants == participants
                && dealt.threshold == threshold
                && dealt.spec.as_ref() == spec
            {
                Ok(dealt.boxes.clone())
            } else {
                Err(SecAggError::AlreadyDealt)
            };
        }
        let (peers, complete_threshold) =
            parse_participants(participants, self.rounds, threshold, spec.is_some())?;
        let own = peers.get(&self.index).ok_or(SecAggError::NotListed(self.index))?;
        let published: Vec<[u8; 32]> = self.masking.iter().map(KeyPair::public).collect();
        if !(own.encryption == self.encryption.public() && own.masks == published) {
            return Err(SecAggError::KeysMismatch(self.index));
        }
        let roster: Vec<u32> = peers.keys().copied().collect();
        let graph = spec.map(|s| Neighbourhoods::derive(&roster, s)).transpose()?;
        // Recipients with their x: on the complete graph every participant j (this site
        // included) at x = j, shares for x = 1..=max index so gaps are fine; under SecAgg+ the
        // k neighbours at x = 1..=k. The field is the smallest holding x = count.
        let (recipients, count, shamir_threshold) =
            share_plan(&roster, graph.as_ref(), self.index, complete_threshold)?;
        let field = shamir_field(count)?;
        let mut mask_shares = Vec::with_capacity(self.masking.len());
        let mut seed_shares = Vec::with_capacity(self.masking.len());
        for (key, seed) in self.masking.iter().zip(&self.self_seeds) {
            let secret = Zeroizing::new(key.secret_bytes());
            mask_shares.push(shamir::split(&secret, shamir_threshold, count, rng)?);
            seed_shares.push(shamir::split(seed, shamir_threshold, count, rng)?);
        }
        let own_secret = Zeroizing::new(self.encryption.secret_bytes());
        let mut boxes = Vec::with_capacity(recipients.len());
        for &(to, x) in &recipients {
            let keys = &peers[&to];
            let slot = usize::from(x) - 1;
            let mut plaintext =
                Zeroizing::new(Vec::with_capacity(round_shares_len(field) * mask_shares.len()));
            for (mask, seed) in mask_shares.iter().zip(&seed_shares) {
                plaintext.extend_from_slice(&mask[slot].to_bytes());
                plaintext.extend_from_slice(&seed[slot].to_bytes());
            }
            let shared = Zeroizing::new(crypto::agree(&own_secret, &keys.encryption)?);
            let sealed = crypto::seal(&shared, self.study, self.index, to, &plaintext, rng)?;
            boxes.push(ShareBox {
                from: self.index,
                to,
                ciphertext: wire::encode(&sealed),
            });
        }
        self.dealt = Some(Dealt {
            participants: participants.to_vec(),
            threshold,
            spec: spec.copied(),
            graph,
            field,
            peers,
            boxes: boxes.clone(),
        });
        Ok(boxes)
    }

    /// Opens and stores the share boxes addressed to this site. Every box must come from a
    /// participant, be addressed here, authenticate, and hold one share of each secret per round,
    /// all at x = this site's index. All or nothing: on error nothing is stored. A box received
    /// again with the same contents is accepted.
    pub fn receive_inbox(&mut self, inbox: &[ShareBox]) -> Result<(), SecAggError> {
        let dealt = self.dealt.as_ref().ok_or(SecAggError::RosterNotFixed)?;
        let own_secret = Zeroizing::new(self.encryption.secret_bytes());
        let mut opened: BTreeMap<u32, Vec<RoundShares>> = BTreeMap::new();
        for b in inbox {
            if b.to != self.index {
                return Err(SecAggError::Misaddressed {
                    from: b.from,
                    to: b.to,
                    this: self.index,
                });
            }
            let keys = dealt.peers.get(&b.from).ok_or(SecAggError::UnknownSite {
                site: b.from,
                list: "share boxes",
            })?;
            let x = dealt
                .share_x(b.from, self.index)
                .ok_or(SecAggError::NotNeighbour {
                    from: b.from,
                    this: self.index,
                })?;
            let sealed = wire::decode(&b.ciphertext)
                .map_err(|source| SecAggError::BoxEncoding { from: b.from, source })?;
            let shared = Zeroizing::new(crypto::agree(&own_secret, &keys.encryption)?);
            let plaintext = Zeroizing::new(
                crypto::open(&shared, self.study, b.from, self.index, &sealed)
                    .map_err(|source| SecAggError::BoxRejected { from: b.from, source })?,
            );
            let shares = self.parse_box(b.from, x, dealt.field, &plaintext)?;
            let previous = opened.get(&b.from).or_else(|| self.received.get(&b.from));
            if previous.is_some_and(|p| !same_shares(p, &shares)) {
                return Err(SecAggError::ConflictingBoxes { from: b.from });
            }
            opened.insert(b.from, shares);
        }
        self.received.extend(opened);
        for round in 1..=self.rounds {
            if !self.masked.contains_key(&round) && !self.pair_seeds.contains_key(&round) {
                let seeds = self.derive_pair_seeds(round)?;
                self.pair_seeds.insert(round, seeds);
            }
        }
        Ok(())
    }

    /// k_{ij,round} = KDF(X25519(s_{i,round}, S_{j,round})) for every peer j this site masks
    /// with (every participant on the complete graph, its neighbours under SecAgg+).
    fn derive_pair_seeds(&self, round: u32) -> Result<BTreeMap<u32, Zeroizing<Seed>>, SecAggError> {
        let slot = round_slot(round, self.rounds)?;
        let dealt = self.dealt.as_ref().ok_or(SecAggError::RosterNotFixed)?;
        let secret = Zeroizing::new(self.masking[slot].secret_bytes());
        let mut seeds = BTreeMap::new();
        for (&j, keys) in dealt
            .peers
            .iter()
            .filter(|(j, _)| **j != self.index && dealt.linked(self.index, **j))
        {
            let shared = Zeroizing::new(crypto::agree(&secret, &keys.masks[slot])?);
            let seed = crypto::pair_seed(&shared, self.study, round, self.index, j)?;
            seeds.insert(j, Zeroizing::new(seed));
        }
        Ok(seeds)
    }

    /// The per-round shares in a box's plaintext, checked to be in `field` at x = `x` (this
    /// site's index on the complete graph, its position in `from`'s neighbourhood under SecAgg+).
    fn parse_box(
        &self,
        from: u32,
        x: u32,
        field: Field,
        plaintext: &[u8],
    ) -> Result<Vec<RoundShares>, SecAggError> {
        let expected = round_shares_len(field) * self.rounds as usize;
        if plaintext.len() != expected {
            return Err(SecAggError::BoxLength {
                from,
                expected,
                got: plaintext.len(),
            });
        }
        let share = |bytes: &[u8]| -> Result<Share, SecAggError> {
            // The chunk length fixes the field (Share::from_bytes), so it is `field`'s.
            let share = Share::from_bytes(bytes)?;
            if u32::from(share.x()) == x {
                Ok(share)
            } else {
                Err(SecAggError::WrongShareX {
                    from,
                    expected: x,
                    got: share.x(),
                })
            }
        };
        plaintext
            .chunks_exact(round_shares_len(field))
            .map(|round| {
                let (mask_key, self_seed) = round.split_at(field.share_len());
                Ok(RoundShares {
                    mask_key: share(mask_key)?,
                    self_seed: share(self_seed)?,
                })
            })
            .collect()
    }

    /// The masked vector for `round`: z = `encoded` + PRG(b_{i,r}) + Σ_{j∈roster, j>i} PRG(k_{ij,r})
    /// − Σ_{j∈roster, j<i} PRG(k_{ji,r}) (mod 2^64). The roster must be participants, contain
    /// this site and at least t sites, and be the same if the round is masked again.
    pub fn mask(&mut self, round: u32, roster: &[u32], encoded: &[u64]) -> Result<Vec<u64>, SecAggError> {
        let slot = round_slot(round, self.rounds)?;
        let dealt = self.dealt.as_ref().ok_or(SecAggError::RosterNotFixed)?;
        let roster = known_sites(roster, "roster", &dealt.peers)?;
        if !roster.contains(&self.index) {
            return Err(SecAggError::NotInRoster {
                round,
                site: self.index,
            });
        }
        if roster.len() < dealt.threshold as usize {
            return Err(SecAggError::RosterTooSmall {
                round,
                size: roster.len(),
                threshold: dealt.threshold,
            });
        }
        let sorted: Vec<u32> = roster.iter().copied().collect();
        if self
            .masked
            .get(&round)
            .is_some_and(|previous| *previous != sorted)
        {
            return Err(SecAggError::RosterChanged { round });
        }
        let mut z = encoded.to_vec();
        let own_seed = Zeroizing::new(crypto::self_seed(
            &self.self_seeds[slot],
            self.study,
            round,
            self.index,
        )?);
        crypto::add_prg(&mut z, &own_seed, false);
        let seeds = match self.pair_seeds.remove(&round) {
            Some(seeds) => seeds,
            None => self.derive_pair_seeds(round)?,
        };
        for (&j, seed) in seeds.iter().filter(|(j, _)| roster.contains(j)) {
            crypto::add_prg(&mut z, seed, j < self.index);
        }
        self.masked.insert(round, sorted);
        Ok(z)
    }

    /// The checks of an unmasking request before any share is looked at, in this order: the
    /// study's threshold, every named site known, the sets a partition of the roster this site
    /// masked with in `round` (with this site a survivor), and at least the threshold of
    /// survivors. Returns the survivors and the dropped sites.
    fn checked_sets(
        &self,
        round: u32,
        roster: &[u32],
        survivors: &[u32],
        dropped: &[u32],
        threshold: u32,
    ) -> Result<(BTreeSet<u32>, BTreeSet<u32>), SecAggError> {
        let dealt = self.dealt.as_ref().ok_or(SecAggError::RosterNotFixed)?;
        if threshold != dealt.threshold {
            return Err(SecAggError::ThresholdMismatch {
                expected: dealt.threshold,
                got: threshold,
            });
        }
        let roster = known_sites(roster, "roster", &dealt.peers)?;
        let survivors = known_sites(survivors, "survivors", &dealt.peers)?;
        let dropped = known_sites(dropped, "dropped", &dealt.peers)?;
        check_partition(round, self.index, &roster, &survivors, &dropped)?;
        if survivors.len() < dealt.threshold as usize {
            return Err(SecAggError::TooFewSurvivors {
                round,
                survivors: survivors.len(),
                threshold: dealt.threshold,
            });
        }
        let sorted_roster: Vec<u32> = roster.iter().copied().collect();
        match self.masked.get(&round) {
            None => Err(SecAggError::NotContributed { round }),
            Some(masked_with) if *masked_with != sorted_roster => Err(SecAggError::RosterChanged { round }),
            Some(_) => Ok((survivors, dropped)),
        }
    }

    /// This site's shares for unmasking `round`: of b_{u,r} for every survivor u and of s_{d,r}
    /// for every dropped d. Refused unless the survivors and the dropped are disjoint, make up
    /// the roster this site masked with, include this site, number at least t, and the round was
    /// not already answered with other sets — so one round never reveals both secrets of a site.
    /// Under SecAgg+ the shares are of its graph neighbours only, and it answers only if at
    /// least the graph's t of them survived.
    pub fn unmask_response(
        &mut self,
        round: u32,
        roster: &[u32],
        survivors: &[u32],
        dropped: &[u32],
        threshold: u32,
    ) -> Result<UnmaskRequest, SecAggError> {
        let slot = round_slot(round, self.rounds)?;
        let (survivors, dropped) = self.checked_sets(round, roster, survivors, dropped, threshold)?;
        let dealt = self.dealt.as_ref().ok_or(SecAggError::RosterNotFixed)?;
        // Under SecAgg+ this site holds shares of its neighbours only, and answers only if at
        // least t of them survived (Bell et al. Alg. 2, unmasking round).
        let mine = |set: &BTreeSet<u32>| -> Vec<u32> {
            set.iter()
                .copied()
                .filter(|&j| j != self.index || dealt.graph.is_none())
                .filter(|&j| j == self.index || dealt.linked(self.index, j))
                .collect()
        };
        let (own_survivors, own_dropped) = (mine(&survivors), mine(&dropped));
        if let Some(g) = &dealt.graph
            && own_survivors.len() < usize::from(g.threshold())
        {
            return Err(SecAggError::TooFewNeighbours {
                round,
                survivors: own_survivors.len(),
                threshold: g.threshold(),
            });
        }
        let sets = (
            survivors.iter().copied().collect(),
            dropped.iter().copied().collect(),
        );
        if self
            .answered
            .get(&round)
            .is_some_and(|previous| *previous != sets)
        {
            return Err(SecAggError::AlreadyAnswered { round });
        }
        let reveal = |site: u32, pick: fn(&RoundShares) -> &Share| -> Result<RevealedShare, SecAggError> {
            let shares = self
                .received
                .get(&site)
                .ok_or(SecAggError::MissingShares { site })?;
            let bytes = pick(&shares[slot]).to_bytes();
            Ok(RevealedShare {
                site,
                share: wire::encode(bytes.as_ref()),
            })
        };
        let response = UnmaskRequest {
            self_mask_shares: own_survivors
                .iter()
                .map(|&u| reveal(u, |s| &s.self_seed))
                .collect::<Result<_, _>>()?,
            mask_key_shares: own_dropped
                .iter()
                .map(|&d| reveal(d, |s| &s.mask_key))
                .collect::<Result<_, _>>()?,
        };
        self.answered.insert(round, sets);
        Ok(response)
    }

    /// s_{i,round} (test support: the tests play an attacker who learnt it).
    #[cfg(test)]
    pub(super) fn masking_secret(&self, round: u32) -> [u8; 32] {
        self.masking[round as usize - 1].secret_bytes()
    }

    /// The encryption secret (test support: the tests forge boxes).
    #[cfg(test)]
    pub(super) fn encryption_secret(&self) -> [u8; 32] {
        self.encryption.secret_bytes()
    }
}

/// Who receives `site`'s shares, at which x, out of how many x-coordinates, with which Shamir
/// threshold: on the complete graph every roster site j at x = j out of the largest index, at
/// the study's threshold; under SecAgg+ the neighbours at x = 1..=k, at the graph's threshold.
type SharePlan = (Vec<(u32, u16)>, u16, u16);

fn share_plan(
    roster: &[u32],
    graph: Option<&Neighbourhoods>,
    site: u32,
    complete_threshold: u16,
) -> Result<SharePlan, SecAggError> {
    match graph {
        None => {
            let max_index = roster.last().copied().unwrap_or(0);
            let narrow = |j: u32| u16::try_from(j).map_err(|_| SecAggError::IndexOutOfRange(j));
            let recipients = roster
                .iter()
                .map(|&j| Ok((j, narrow(j)?)))
                .collect::<Result<_, SecAggError>>()?;
            Ok((recipients, narrow(max_index)?, complete_threshold))
        }
        Some(g) => {
            let recipients: Vec<(u32, u16)> = g.neighbours(site).into_iter().zip(1..).collect();
            let degree = u16::try_from(g.degree()).map_err(|_| SecAggError::NoGraph {
                sites: u32::try_from(roster.len()).unwrap_or(u32::MAX),
            })?;
            Ok((recipients, degree, u16::from(g.threshold())))
        }
    }
}

/// Checks that `survivors` and `dropped` partition `roster` and that `site` survived.
fn check_partition(
    round: u32,
    site: u32,
    roster: &BTreeSet<u32>,
    survivors: &BTreeSet<u32>,
    dropped: &BTreeSet<u32>,
) -> Result<(), SecAggError> {
    let inconsistent = |reason: String| Err(SecAggError::InconsistentSets { round, reason });
    if let Some(both) = survivors.intersection(dropped).next() {
        return inconsistent(format!("site {both} is listed both as a survivor and as dropped"));
    }
    if let Some(extra) = survivors.union(dropped).find(|s| !roster.contains(s)) {
        return inconsistent(format!("site {extra} is not in the roster"));
    }
    if let Some(missing) = roster
        .iter()
        .find(|s| !(survivors.contains(s) || dropped.contains(s)))
    {
        return inconsistent(format!("roster site {missing} is neither a survivor nor dropped"));
    }
    if !survivors.contains(&site) {
        return inconsistent(format!("this site (site {site}) is not among the survivors"));
    }
    Ok(())
}

/// Whether two boxes' shares are the same.
fn same_shares(a: &[RoundShares], b: &[RoundShares]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.mask_key == y.mask_key && x.self_seed == y.self_seed)
}
