//! The roster transcript hash: how a site detects a coordinator that substitutes keys or adds
//! fake members (docs/design/federation.md, "What a site checks").
//!
//! Peer public keys reach a site through the coordinator, unauthenticated. A coordinator that
//! hands site A a key of its own in place of site B's, or invents members, can open what A
//! sends "to B", or stand in for every other site of a round and subtract their parts. Sites
//! cannot tell from the keys alone; they can compare notes. Every site computes, for the first
//! roster it is shown, SHA-256 over a canonical encoding of the study's terms (study id, name,
//! algorithm, relation, bounds, configuration, cost, threshold, sizes) and of every member in
//! index order (index, name and every public key it is listed with), and prints it. Honest
//! sites of one study print the same value; operators compare it out of band, or pass the value
//! agreed on with `--expect-roster-hash`, and a site refuses on a mismatch before it sends
//! anything that depends on the roster. After that, a site refuses any later phase or round
//! that names a site outside that roster, or lists a member with other keys or another name
//! (members may only drop out).
//!
//! One implementation for every study kind: `federated_power` feeds it the participants of the
//! key exchange, CAPE the peers of each stage plus the site itself.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use crate::federation::messages::{CapePeer, Participant, SiteStudyView};

/// Domain separation of the hash (bump on any change of the encoding).
const DOMAIN: &[u8] = b"privpca roster transcript v1";

/// One member of a roster as this site was shown it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub index: u32,
    pub name: String,
    /// Every public key the member is listed with, in the protocol's order (base64 as sent).
    pub keys: Vec<String>,
}

impl Member {
    /// A `federated_power` participant: its encryption key, then its masking keys, then the
    /// verifying key of its round signatures, then (SecAgg+) its graph-seed commitment.
    pub fn from_participant(p: &Participant) -> Member {
        let mut keys = vec![p.encryption_public_key.clone()];
        keys.extend(p.mask_public_keys.iter().cloned());
        keys.push(p.signing_public_key.clone());
        if !p.seed_commitment.is_empty() {
            keys.push(p.seed_commitment.clone());
        }
        Member {
            index: p.index,
            name: p.name.clone(),
            keys,
        }
    }

    /// A CAPE peer: its pair-noise keys, then the verifying key of its stage confirmations.
    pub fn from_cape_peer(p: &CapePeer) -> Member {
        let mut keys = p.noise_public_keys.clone();
        keys.push(p.signing_public_key.clone());
        Member {
            index: p.index,
            name: p.name.clone(),
            keys,
        }
    }
}

/// Writes a length-prefixed byte string.
fn field(hash: &mut Sha256, bytes: &[u8]) {
    hash.update((bytes.len() as u64).to_be_bytes());
    hash.update(bytes);
}

/// JSON with object keys sorted at every level, so that every site encodes the configuration
/// the same way whatever order the coordinator sent it in.
fn canonical_json(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Object(map) => {
            let sorted: BTreeMap<&String, &serde_json::Value> = map.iter().collect();
            let parts: Vec<String> = sorted
                .into_iter()
                .map(|(k, v)| format!("{}:{}", serde_json::Value::String(k.clone()), canonical_json(v)))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        serde_json::Value::Array(items) => {
            format!(
                "[{}]",
                items.iter().map(canonical_json).collect::<Vec<_>>().join(",")
            )
        }
        other => other.to_string(),
    }
}

/// The study's terms as every site sees them: the view without this site's name, index and
/// the statuses (which differ between sites or change over time).
fn terms(view: &SiteStudyView) -> String {
    let terms = serde_json::json!({
        "study_id": view.study_id,
        "study_name": view.study_name,
        "algorithm": view.algorithm,
        "n_sites": view.n_sites,
        "threshold": view.threshold,
        "n_features": view.n_features,
        "relation": view.relation,
        "row_norm_bound": view.row_norm_bound,
        "row_l1_bound": view.row_l1_bound,
        "config": view.config,
        "cost_rho": view.cost_rho,
        "cost_delta": view.cost_delta,
        "fraction_bits": view.fraction_bits,
        "max_site_samples": view.max_site_samples,
    });
    canonical_json(&terms)
}

/// SHA-256 over the domain tag, the study's id and terms, and every member in index order.
pub fn transcript_hash(view: &SiteStudyView, members: &[Member]) -> [u8; 32] {
    let mut sorted: Vec<&Member> = members.iter().collect();
    sorted.sort_by_key(|m| m.index);
    let mut hash = Sha256::new();
    field(&mut hash, DOMAIN);
    field(&mut hash, view.study_id.as_bytes());
    field(&mut hash, terms(view).as_bytes());
    hash.update((sorted.len() as u64).to_be_bytes());
    for m in sorted {
        hash.update(m.index.to_be_bytes());
        field(&mut hash, m.name.as_bytes());
        hash.update((m.keys.len() as u64).to_be_bytes());
        for key in &m.keys {
            field(&mut hash, key.as_bytes());
        }
    }
    hash.finalize().into()
}

/// Parses `--expect-roster-hash` (64 hex digits).
pub fn parse_expected(hex_text: &str) -> Result<[u8; 32], String> {
    let bytes = hex::decode(hex_text.trim())
        .map_err(|_| "--expect-roster-hash must be 64 hexadecimal digits".to_owned())?;
    bytes
        .try_into()
        .map_err(|_| "--expect-roster-hash must be 64 hexadecimal digits (32 bytes)".to_owned())
}

/// The roster this site has committed to, and the hash it was told to expect.
#[derive(Debug, Default)]
pub struct RosterGuard {
    expected: Option<[u8; 32]>,
    fixed: Option<([u8; 32], BTreeMap<u32, Member>)>,
}

impl RosterGuard {
    pub fn new(expected: Option<[u8; 32]>) -> RosterGuard {
        RosterGuard {
            expected,
            fixed: None,
        }
    }

    /// The fixed roster's hash (None before one is fixed).
    pub fn hash(&self) -> Option<[u8; 32]> {
        self.fixed.as_ref().map(|(hash, _)| *hash)
    }

    /// How many members the fixed roster has (0 before one is fixed).
    pub fn size(&self) -> usize {
        self.fixed.as_ref().map_or(0, |(_, members)| members.len())
    }

    /// A roster shown to this site. The first one is fixed: its members must be distinct, the
    /// list must hold this site with the keys it published (`me`) and at most `n_sites`
    /// members, and its hash must match the expected one if given; the hash is returned so that
    /// the caller prints it. Every later roster may hold only members of the fixed one, each
    /// exactly as it was listed there (dropping out is the only change allowed).
    pub fn observe(
        &mut self,
        view: &SiteStudyView,
        members: &[Member],
        me: &Member,
    ) -> Result<Option<[u8; 32]>, String> {
        let mut by_index = BTreeMap::new();
        for m in members {
            if by_index.insert(m.index, m.clone()).is_some() {
                return Err(format!("the roster lists site {} twice", m.index));
            }
        }
        match &self.fixed {
            Some((_, fixed)) => {
                for (index, m) in &by_index {
                    match fixed.get(index) {
                        Some(first) if first == m => {}
                        Some(_) => {
                            return Err(format!(
                                "site {index} is listed with other keys or another name than in the roster \
                                 this site committed to (key substitution?)"
                            ));
                        }
                        None => {
                            return Err(format!(
                                "site {index} was not in the roster this site committed to"
                            ));
                        }
                    }
                }
                Ok(None)
            }
            None => {
                if by_index.get(&me.index) != Some(me) {
                    return Err("the roster does not list this site with the keys it published".to_owned());
                }
                if by_index.len() > view.n_sites as usize {
                    return Err(format!(
                        "the roster has {} members; the study invited {}",
                        by_index.len(),
                        view.n_sites
                    ));
                }
                let hash = transcript_hash(view, members);
                if let Some(expected) = self.expected
                    && expected != hash
                {
                    return Err(format!(
                        "the roster hash is {}, not the expected {}: the roster or a key differs from \
                         what the other operators see; refusing",
                        hex::encode(hash),
                        hex::encode(expected)
                    ));
                }
                self.fixed = Some((hash, by_index));
                Ok(Some(hash))
            }
        }
    }

    /// Every index must be a member of the fixed roster.
    pub fn check_indices(&self, indices: &[u32], what: &str) -> Result<(), String> {
        let Some((_, fixed)) = &self.fixed else {
            return Err(format!("{what} came before any roster"));
        };
        match indices.iter().find(|i| !fixed.contains_key(i)) {
            Some(i) => Err(format!(
                "{what} names site {i}, which is not in the roster this site committed to"
            )),
            None => Ok(()),
        }
    }
}

/// The line a site prints for its operator.
pub fn describe(hash: &[u8; 32], members: &[Member]) -> String {
    let mut sorted: Vec<&Member> = members.iter().collect();
    sorted.sort_by_key(|m| m.index);
    let names: Vec<String> = sorted
        .iter()
        .map(|m| format!("{} {:?}", m.index, m.name))
        .collect();
    format!(
        "roster hash {} over {} members ({}); compare it with the other sites' operators, or pass \
         it as --expect-roster-hash",
        hex::encode(hash),
        sorted.len(),
        names.join(", ")
    )
}

#[cfg(test)]
#[path = "roster_tests.rs"]
mod tests;
