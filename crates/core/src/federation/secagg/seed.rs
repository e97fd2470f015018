//! The public seed of a live SecAgg+ graph, which no party can steer: commit, then reveal
//! (docs/design/federation.md, "Live SecAgg+").
//!
//! At join every site publishes c_i = SHA-256(tag ‖ study ‖ i ‖ r_i) for a fresh secret 32-byte
//! r_i ([`commitment`]); the roster lists every commitment. Only once the roster is fixed does a
//! site reveal r_i, and the coordinator relays every reveal. Each site checks every reveal
//! against the commitment its roster shows, and every party derives seed = SHA-256(tag ‖ study ‖
//! the (i, r_i) of every member in index order) ([`graph_seed`]). An honest r_i is unknown until
//! every commitment is fixed, so nobody can choose the seed; a party that withholds its reveal
//! can only stop the study before anything is charged.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::SecAggError;
use crate::federation::messages::{Participant, SeedReveal};
use crate::federation::wire;

const COMMITMENT_TAG: &[u8] = b"privpca/secagg-plus/seed-commitment/v1";
const SEED_TAG: &[u8] = b"privpca/secagg-plus/graph-seed/v1";

/// c_i = SHA-256(tag ‖ study ‖ site (u32 LE) ‖ r_i): binds site `site` of `study` to `reveal`.
pub fn commitment(study: Uuid, site: u32, reveal: &[u8; 32]) -> [u8; 32] {
    let mut hash = Sha256::new();
    hash.update(COMMITMENT_TAG);
    hash.update(study.as_bytes());
    hash.update(site.to_le_bytes());
    hash.update(reveal);
    hash.finalize().into()
}

/// The graph seed from every member's reveal, in index order.
pub fn graph_seed(study: Uuid, reveals: &BTreeMap<u32, [u8; 32]>) -> [u8; 32] {
    let mut hash = Sha256::new();
    hash.update(SEED_TAG);
    hash.update(study.as_bytes());
    hash.update((reveals.len() as u64).to_le_bytes());
    for (site, reveal) in reveals {
        hash.update(site.to_le_bytes());
        hash.update(reveal);
    }
    hash.finalize().into()
}

/// Checks one site's reveal (base64, 32 bytes) against the commitment `participant` lists.
pub fn open(study: Uuid, participant: &Participant, reveal: &str) -> Result<[u8; 32], SecAggError> {
    let site = participant.index;
    let bad = |reason: &str| SecAggError::BadReveal {
        site,
        reason: reason.to_string(),
    };
    let committed = wire::decode_key(&participant.seed_commitment)
        .map_err(|_| bad("the roster lists no valid commitment (32 bytes, base64) for it"))?;
    let opened = wire::decode_key(reveal).map_err(|_| bad("the reveal is not 32 bytes of base64"))?;
    if commitment(study, site, &opened) != committed {
        return Err(bad("the reveal does not open the commitment the roster lists"));
    }
    Ok(opened)
}

/// The graph seed of `participants` from `reveals`: exactly one reveal per participant, each
/// opening the participant's commitment.
pub fn seed_from_reveals(
    study: Uuid,
    participants: &[Participant],
    reveals: &[SeedReveal],
) -> Result<[u8; 32], SecAggError> {
    let by_site: BTreeMap<u32, &Participant> = participants.iter().map(|p| (p.index, p)).collect();
    let mut opened = BTreeMap::new();
    for r in reveals {
        let participant = by_site.get(&r.site).ok_or(SecAggError::UnknownSite {
            site: r.site,
            list: "seed reveals",
        })?;
        if opened
            .insert(r.site, open(study, participant, &r.reveal)?)
            .is_some()
        {
            return Err(SecAggError::Duplicate {
                site: r.site,
                list: "seed reveals",
            });
        }
    }
    if let Some(missing) = by_site.keys().find(|s| !opened.contains_key(s)) {
        return Err(SecAggError::BadReveal {
            site: *missing,
            reason: "no reveal was relayed for it".into(),
        });
    }
    Ok(graph_seed(study, &opened))
}

#[cfg(test)]
#[path = "seed_tests.rs"]
mod tests;
