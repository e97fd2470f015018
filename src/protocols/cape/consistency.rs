//! A CAPE site's consistency round (docs/design/federation.md, "The consistency round", CAPE):
//! before it draws anything for a stage, a site signs the stage's transcript — the study, the
//! stage, the roster it was shown and the hash of the calibration it derived for that roster
//! (and of `cape_agn`'s public W) — keeps it as its one transcript of the stage, and releases
//! only once ⌊(S + c)/2⌋ + 1 members of the fixed roster confirmed the very same bytes. So no
//! site's noise is calibrated to a roster its peers did not see.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::algorithms::cape_noise::CapeNoise;
use crate::federation::messages::{CapePeer, SiteSignature, SiteStudyView};
use crate::federation::transcript::{self, SiteSigner};
use crate::federation::wire;
use crate::site::Failure;
use crate::site::ledger::{keep, ledger_failure};
use crate::store::{SiteMessageKind, Store};

/// One stage's transcript as this site sees it.
pub(crate) struct StageTranscript {
    roster: Vec<u32>,
    /// The roster's members as shown, with their keys: kept with the transcript, so that a
    /// restarted site fixes the same roster again ([`kept_rosters`]).
    peers: Vec<CapePeer>,
    calibration: [u8; 32],
    pub(super) message: Vec<u8>,
}

/// The transcript kept in the ledger: a site confirms one per stage, also across restarts.
#[derive(Serialize, Deserialize)]
struct KeptStage {
    roster: Vec<u32>,
    calibration: String,
    signature: String,
    /// The other members with their keys, as the site saw them when it confirmed (absent in a
    /// transcript kept before session 34). The transcript signs indices only, so without them
    /// a site restarted between its confirmation and its first release had no fixed roster,
    /// and the coordinator could show it the same indices with keys of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    peers: Option<Vec<CapePeer>>,
}

impl KeptStage {
    /// The same transcript: the same roster, calibration and signature (the kept members, if
    /// any, are what fixed the roster and are checked by the roster guard).
    fn same(&self, other: &KeptStage) -> bool {
        (&self.roster, &self.calibration, &self.signature)
            == (&other.roster, &other.calibration, &other.signature)
    }
}

/// The rosters (other members with their keys) this site kept with its stage confirmations,
/// by stage: what a restarted site observes again before anything else, so that the roster it
/// fixed before the restart stays fixed.
pub(crate) async fn kept_rosters(
    store: &Store,
    view: &SiteStudyView,
) -> Result<Vec<(u32, Vec<CapePeer>)>, Failure> {
    let kept = store
        .site_messages(view.study_id, SiteMessageKind::Confirm)
        .await
        .map_err(ledger_failure)?;
    let mut out = Vec::new();
    for (stage, text) in kept {
        let stage_kept: KeptStage = serde_json::from_str(&text).map_err(|e| {
            violation(format!(
                "the ledger's stage-{stage} confirmation is unreadable: {e}"
            ))
        })?;
        if let Some(peers) = stage_kept.peers {
            out.push((stage, peers));
        }
    }
    Ok(out)
}

fn violation(what: impl std::fmt::Display) -> Failure {
    Failure::Protocol(what.to_string())
}

impl StageTranscript {
    /// The transcript of `stage` from the roster shown (`peers` and this site), the noise this
    /// site derived for it, and the public input (W) if any.
    pub(crate) fn of(
        view: &SiteStudyView,
        stage: u32,
        peers: &[CapePeer],
        own: &CapeNoise,
        input: Option<&str>,
    ) -> Result<StageTranscript, Failure> {
        let mut roster: Vec<u32> = peers.iter().map(|p| p.index).collect();
        roster.push(view.site_index);
        roster.sort_unstable();
        let noise = serde_json::to_vec(own).map_err(|e| violation(format!("the stage's noise: {e}")))?;
        let input = match input {
            Some(text) => wire::decode(text).map_err(|e| violation(format!("the stage's input: {e}")))?,
            None => Vec::new(),
        };
        let calibration = transcript::digest(&[&noise, &input]);
        let message = transcript::stage_message(view.study_id, &view.algorithm, stage, &roster, &calibration);
        Ok(StageTranscript {
            roster,
            peers: peers.to_vec(),
            calibration,
            message,
        })
    }

    /// Keeps this transcript as the stage's one (or finds it kept already), and returns this
    /// site's signature of it. Another transcript kept for the stage is refused.
    pub(crate) async fn accept(
        &self,
        store: &Store,
        view: &SiteStudyView,
        stage: u32,
        signer: &SiteSigner,
    ) -> Result<String, Failure> {
        let mine = KeptStage {
            roster: self.roster.clone(),
            calibration: hex::encode(self.calibration),
            signature: signer.sign(&self.message),
            peers: Some(self.peers.clone()),
        };
        let kept = keep(store, view.study_id, SiteMessageKind::Confirm, stage, &mine).await?;
        if !kept.same(&mine) {
            return Err(violation(format!(
                "stage {stage} was confirmed with another roster or calibration before; refusing"
            )));
        }
        Ok(kept.signature)
    }

    /// Checks that at least `quorum` distinct roster members (this site included) confirmed this
    /// very transcript, each under its key in the fixed roster (`peers`' keys, checked against
    /// it by the roster guard, and this site's own).
    pub(crate) fn check_quorum(
        &self,
        stage: u32,
        peers: &[CapePeer],
        me: (u32, &SiteSigner),
        confirmations: &[SiteSignature],
        quorum: u32,
    ) -> Result<(), Failure> {
        let mut keys = BTreeMap::new();
        for p in peers {
            if let Ok(key) = transcript::verifying_key(&p.signing_public_key) {
                keys.insert(p.index, key);
            }
        }
        if let Ok(key) = transcript::verifying_key(&me.1.public_key()) {
            keys.insert(me.0, key);
        }
        let mut signers = BTreeMap::new();
        for c in confirmations {
            signers.entry(c.site).or_insert(c.signature.as_str());
        }
        let valid = signers
            .into_iter()
            .filter(|(site, signature)| {
                keys.get(site)
                    .is_some_and(|key| transcript::verify(key, *site, &self.message, signature).is_ok())
            })
            .count();
        if valid < quorum as usize {
            return Err(violation(format!(
                "stage {stage}: only {valid} sites confirmed the transcript this site saw; {quorum} are \
                 needed before it releases anything (the coordinator may have shown sites different \
                 rosters or calibrations); refusing"
            )));
        }
        Ok(())
    }
}
