//! Secure aggregation (Bonawitz et al. 2017, "Practical Secure Aggregation for
//! Privacy-Preserving Machine Learning"), as docs/design/federation.md adapts it: the two pure
//! halves of the protocol, without I/O and with the RNG injected.
//!
//! - [`SiteSession`] (a site): makes its encryption key and, per round r, a masking key pair
//!   s_{i,r} and a self-mask seed b_{i,r}; deals t-of-n Shamir shares of them in AEAD boxes
//!   ([`SiteSession::share_boxes`]); masks its fixed-point vector ([`SiteSession::mask`]); and
//!   reveals shares for unmasking only when the request is consistent
//!   ([`SiteSession::unmask_response`]).
//! - [`Aggregator`] (the coordinator): from the survivors' masked vectors and at least t
//!   unmasking responses, reconstructs the survivors' self-mask seeds and the dropped sites'
//!   round-r masking secrets, and returns the exact sum ([`Aggregator::unmask_sum`]).
//!
//! Masking keys are per round (the design's decision): revealing s_{d,r} for a site dropped in
//! round r exposes no pair mask of another round.

mod aggregator;
pub mod graph;
pub mod seed;
mod site;

use std::collections::{BTreeMap, BTreeSet};

pub use aggregator::Aggregator;
pub use graph::{GraphSpec, Neighbourhoods};
pub use site::SiteSession;

use super::crypto::CryptoError;
use super::messages::Participant;
use super::shamir::{Field, ShamirError};
use super::wire::{self, WireError};

/// Largest site index on the complete graph: indices are Shamir x-coordinates, the non-zero
/// elements of GF(2¹⁶) (GF(2⁸) while the largest index is at most 255: `shamir::Field`).
pub const MAX_SITE_INDEX: u32 = u16::MAX as u32;

/// Box plaintext bytes per round in `field`: the share of s_{i,r}, then the share of b_{i,r}.
const fn round_shares_len(field: Field) -> usize {
    2 * field.share_len()
}

/// The field of a sharing with x = 1..=`count` (`count` ≤ 65 535 by the roster checks).
fn shamir_field(count: u16) -> Result<Field, SecAggError> {
    Field::for_count(u32::from(count)).ok_or(SecAggError::IndexOutOfRange(u32::from(count)))
}

/// A protocol message or request that does not fit. Messages name sites, rounds and sizes,
/// never key or share material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecAggError {
    #[error(
        "threshold {threshold} must be at least 2 and at most the number of participants ({participants})"
    )]
    Threshold { threshold: u32, participants: usize },
    #[error("site index {0} is out of range 1..={MAX_SITE_INDEX} (1..=2^20 under SecAgg+)")]
    IndexOutOfRange(u32),
    #[error("site {site} appears more than once in the {list}")]
    Duplicate { site: u32, list: &'static str },
    #[error("site {site} published {got} masking keys; the study has {expected} rounds")]
    MaskKeyCount { site: u32, expected: u32, got: usize },
    #[error("site {site}'s {what} is not a valid key: {source}")]
    BadKey {
        site: u32,
        what: &'static str,
        #[source]
        source: WireError,
    },
    #[error("the participants do not include this site (site {0})")]
    NotListed(u32),
    #[error("the participants list keys for site {0} that are not the ones it published")]
    KeysMismatch(u32),
    #[error("the roster is not fixed yet: the keys must be shared first")]
    RosterNotFixed,
    #[error("the keys were already shared with a different roster or threshold")]
    AlreadyDealt,
    #[error("site {site} in the {list} is not a participant of the study")]
    UnknownSite { site: u32, list: &'static str },
    #[error("round {round} is out of range 1..={rounds}")]
    RoundOutOfRange { round: u32, rounds: u32 },
    #[error("a share box from site {from} is addressed to site {to}, not to this site ({this})")]
    Misaddressed { from: u32, to: u32, this: u32 },
    #[error("the share box from site {from} is not valid base64: {source}")]
    BoxEncoding {
        from: u32,
        #[source]
        source: WireError,
    },
    #[error("the share box from site {from} was rejected: {source}")]
    BoxRejected {
        from: u32,
        #[source]
        source: CryptoError,
    },
    #[error("the share box from site {from} holds {got} bytes of shares; {expected} were expected")]
    BoxLength { from: u32, expected: usize, got: usize },
    #[error("site {from} sent a share with x = {got}; this site's index is {expected}")]
    WrongShareX { from: u32, expected: u32, got: u16 },
    #[error("site {from} sent share boxes with different contents")]
    ConflictingBoxes { from: u32 },
    #[error("round {round}: the roster has {size} sites, fewer than the threshold {threshold}")]
    RosterTooSmall { round: u32, size: usize, threshold: u32 },
    #[error("round {round}: this site (site {site}) is not in the roster")]
    NotInRoster { round: u32, site: u32 },
    #[error("round {round}: the roster differs from the one this site masked with")]
    RosterChanged { round: u32 },
    #[error("round {round}: this site has not sent a masked vector for this round")]
    NotContributed { round: u32 },
    #[error("round {round}: inconsistent survivor and dropped sets: {reason}")]
    InconsistentSets { round: u32, reason: String },
    #[error("round {round}: {survivors} survivors, fewer than the threshold {threshold}")]
    TooFewSurvivors {
        round: u32,
        survivors: usize,
        threshold: u32,
    },
    #[error("round {round}: {responses} unmasking responses, fewer than the threshold {threshold}")]
    TooFewResponses {
        round: u32,
        responses: usize,
        threshold: u32,
    },
    #[error("round {round}: already answered with different survivor and dropped sets")]
    AlreadyAnswered { round: u32 },
    #[error("the threshold {got} is not the study's threshold {expected}")]
    ThresholdMismatch { expected: u32, got: u32 },
    #[error("no shares were received from site {site}")]
    MissingShares { site: u32 },
    #[error("round {round}: site {site} sent {got} values; {expected} were expected")]
    LengthMismatch {
        round: u32,
        site: u32,
        expected: usize,
        got: usize,
    },
    #[error("round {round}: the unmasking response of site {responder} is invalid: {reason}")]
    BadResponse {
        round: u32,
        responder: u32,
        reason: String,
    },
    #[error(
        "round {round}: the masking key reconstructed for site {site} does not match its public key (corrupt shares)"
    )]
    ReconstructionMismatch { round: u32, site: u32 },
    #[error("SecAgg+: {0}")]
    Rates(String),
    #[error("SecAgg+: no neighbourhood size up to {max} meets the security and correctness bounds for {sites} sites at these rates", max = graph::MAX_DEGREE)]
    NoGraph { sites: u32 },
    #[error("SecAgg+: the graph has (k, t) = {got:?}; the roster and rates give {expected:?}")]
    GraphMismatch { expected: (u32, u32), got: (u32, u32) },
    #[error("SecAgg+: site {site}'s graph-seed reveal is refused: {reason}")]
    BadReveal { site: u32, reason: String },
    #[error("SecAgg+: site {from} is not a neighbour of site {this}")]
    NotNeighbour { from: u32, this: u32 },
    #[error(
        "round {round}: {survivors} of this site's neighbours survived, fewer than the neighbourhood threshold {threshold}"
    )]
    TooFewNeighbours {
        round: u32,
        survivors: usize,
        threshold: u8,
    },
    #[error(
        "round {round}: {got} shares of site {site}'s secret arrived, fewer than the neighbourhood threshold {threshold}"
    )]
    TooFewShares {
        round: u32,
        site: u32,
        got: usize,
        threshold: u16,
    },
    #[error(transparent)]
    Crypto(#[from] CryptoError),
    #[error(transparent)]
    Shamir(#[from] ShamirError),
}

/// A participant's decoded public keys.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PeerKeys {
    encryption: [u8; 32],
    /// Masking public keys, rounds 1..=L.
    masks: Vec<[u8; 32]>,
}

/// Validates a roster of participants (indices distinct and in 1..=65535, or 1..=2^20 under
/// SecAgg+ where x-coordinates are neighbourhood positions; `rounds` masking keys each, every
/// key 32 bytes, 2 ≤ `threshold` ≤ its size) and decodes its keys. Returns the keys by index
/// and the threshold as a Shamir threshold (the complete graph's; SecAgg+ uses its graph's).
fn parse_participants(
    participants: &[Participant],
    rounds: u32,
    threshold: u32,
    sparse: bool,
) -> Result<(BTreeMap<u32, PeerKeys>, u16), SecAggError> {
    let max_index = if sparse {
        graph::MAX_SPARSE_SITE_INDEX
    } else {
        MAX_SITE_INDEX
    };
    let mut peers = BTreeMap::new();
    for p in participants {
        if !(p.index >= 1 && p.index <= max_index) {
            return Err(SecAggError::IndexOutOfRange(p.index));
        }
        if p.mask_public_keys.len() != rounds as usize {
            return Err(SecAggError::MaskKeyCount {
                site: p.index,
                expected: rounds,
                got: p.mask_public_keys.len(),
            });
        }
        let key = |text: &str, what| {
            wire::decode_key(text).map_err(|source| SecAggError::BadKey {
                site: p.index,
                what,
                source,
            })
        };
        let keys = PeerKeys {
            encryption: key(&p.encryption_public_key, "encryption public key")?,
            masks: p
                .mask_public_keys
                .iter()
                .map(|k| key(k, "masking public key"))
                .collect::<Result<_, _>>()?,
        };
        if peers.insert(p.index, keys).is_some() {
            return Err(SecAggError::Duplicate {
                site: p.index,
                list: "participants",
            });
        }
    }
    let valid = threshold >= 2 && threshold as usize <= peers.len();
    let shamir_threshold = if sparse {
        Some(2)
    } else {
        u16::try_from(threshold).ok()
    };
    match shamir_threshold.filter(|_| valid) {
        Some(t) => Ok((peers, t)),
        None => Err(SecAggError::Threshold {
            threshold,
            participants: peers.len(),
        }),
    }
}

/// The 0-based slot of `round` ∈ 1..=`rounds`.
fn round_slot(round: u32, rounds: u32) -> Result<usize, SecAggError> {
    if round >= 1 && round <= rounds {
        Ok(round as usize - 1)
    } else {
        Err(SecAggError::RoundOutOfRange { round, rounds })
    }
}

/// The sites of `list` as a set; a repeated site is an error.
fn distinct(list: &[u32], name: &'static str) -> Result<BTreeSet<u32>, SecAggError> {
    let mut set = BTreeSet::new();
    for &site in list {
        if !set.insert(site) {
            return Err(SecAggError::Duplicate { site, list: name });
        }
    }
    Ok(set)
}

/// `list` as a set of distinct participants.
fn known_sites<V>(
    list: &[u32],
    name: &'static str,
    peers: &BTreeMap<u32, V>,
) -> Result<BTreeSet<u32>, SecAggError> {
    let set = distinct(list, name)?;
    match set.iter().find(|site| !peers.contains_key(site)) {
        Some(&site) => Err(SecAggError::UnknownSite { site, list: name }),
        None => Ok(set),
    }
}

#[cfg(test)]
mod tests;
