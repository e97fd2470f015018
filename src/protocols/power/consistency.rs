//! A `federated_power` site's rule in the consistency round (docs/design/federation.md, "The
//! consistency round"), as pure functions of its own view and what the coordinator relays: the
//! site code (`site.rs`) keeps and sends, these decide. Kept apart so that the rule can be
//! tested against a coordinator that shows every site something else (`consistency_tests.rs`).

use std::collections::{BTreeMap, BTreeSet};

use ed25519_dalek::VerifyingKey;

use crate::federation::messages::SiteSignature;
use crate::federation::transcript::{self, RoundView, TranscriptError};

/// What a site saw of a round: itself, and the round as it masked it.
pub(crate) struct OwnRound<'a> {
    pub(crate) me: u32,
    pub(crate) view: RoundView<'a>,
    /// The fixed roster's verifying keys.
    pub(crate) keys: &'a BTreeMap<u32, VerifyingKey>,
    /// SecAgg+: its graph neighbours, the only survivors whose secrets it holds shares of and so
    /// the only ones whose contribution signatures it needs; `None` on the complete graph
    /// (every survivor's).
    pub(crate) neighbours: Option<&'a BTreeSet<u32>>,
}

impl OwnRound<'_> {
    fn verify(&self, site: u32, message: &[u8], signature: &str) -> Result<(), TranscriptError> {
        let key = self.keys.get(&site).ok_or(TranscriptError::Invalid(site))?;
        transcript::verify(key, site, message, signature)
    }

    /// Whether the site may accept (and sign) the transcript with `survivors` U and `dropped`
    /// D: they split the roster it masked with, it is in U, |U| ≥ `need`, and every survivor's
    /// contribution signature (under SecAgg+ every neighbour survivor's) verifies over this
    /// site's own iterate hash and roster.
    pub(crate) fn check_transcript(
        &self,
        survivors: &[u32],
        dropped: &[u32],
        contributions: &[SiteSignature],
        need: u32,
    ) -> Result<(), String> {
        check_partition(self.me, self.view.roster, survivors, dropped, need)?;
        let statement = transcript::contribution_message(&self.view);
        let signed = by_site(contributions);
        let checked: Vec<u32> = survivors
            .iter()
            .copied()
            .filter(|u| self.neighbours.is_none_or(|n| n.contains(u)))
            .collect();
        let of_survivors = checked.iter().filter_map(|u| Some((*u, *signed.get(u)?)));
        if transcript::count_verified(self.keys, &statement, of_survivors, checked.len()) == checked.len() {
            return Ok(());
        }
        // Name the first survivor whose signature is missing or does not verify.
        for &u in &checked {
            let Some(signature) = signed.get(&u) else {
                return Err(format!("survivor {u}'s contribution signature is missing"));
            };
            self.verify(u, &statement, signature).map_err(|e| {
                format!(
                    "{e}: survivor {u} did not mask this round's iterate with this roster as this site did"
                )
            })?;
        }
        Ok(())
    }

    /// How many distinct survivors' confirmations of this site's own transcript verify,
    /// counted up to `enough` (min(`enough`, the count): `transcript::count_verified`).
    pub(crate) fn confirmed_by(
        &self,
        survivors: &[u32],
        dropped: &[u32],
        confirmations: &[SiteSignature],
        enough: usize,
    ) -> usize {
        let statement = transcript::confirmation_message(&self.view, survivors, dropped);
        let of_survivors = by_site(confirmations)
            .into_iter()
            .filter(|(site, _)| survivors.contains(site));
        transcript::count_verified(self.keys, &statement, of_survivors, enough)
    }
}

/// Signatures by site; a site named twice keeps its first (only distinct signers count).
fn by_site(signatures: &[SiteSignature]) -> BTreeMap<u32, &str> {
    let mut out = BTreeMap::new();
    for s in signatures {
        out.entry(s.site).or_insert(s.signature.as_str());
    }
    out
}

/// U and D split the roster, `me` ∈ U, |U| ≥ `need`, nobody named twice.
fn check_partition(
    me: u32,
    roster: &[u32],
    survivors: &[u32],
    dropped: &[u32],
    need: u32,
) -> Result<(), String> {
    let u: BTreeSet<u32> = survivors.iter().copied().collect();
    let d: BTreeSet<u32> = dropped.iter().copied().collect();
    let r: BTreeSet<u32> = roster.iter().copied().collect();
    if u.len() != survivors.len() || d.len() != dropped.len() {
        return Err("a site is named twice".into());
    }
    if !u.is_disjoint(&d) {
        return Err("a site is both a survivor and dropped".into());
    }
    if u.union(&d).copied().collect::<BTreeSet<u32>>() != r {
        return Err("the survivors and dropped sites are not the roster this site masked with".into());
    }
    if !u.contains(&me) {
        return Err("this site is not among the survivors".into());
    }
    if (u.len() as u32) < need {
        return Err(format!("{} survivors; at least {need} are needed", u.len()));
    }
    Ok(())
}

#[cfg(test)]
#[path = "consistency_tests.rs"]
mod tests;
