//! The kept form of a running CAPE study (`cape_pca`, `cape_agn`), part of the study's snapshot
//! ([`super::durable`], docs/design/federation.md "Durable studies"), and the running study
//! rebuilt from it.
//!
//! What is kept, and why each part may be: the plan (public: the study's terms), the open
//! stage's number, offered noise, roster and peers' pair-noise public keys (public: every site
//! is shown them); the stage reports (public: they are in the result); the whitening W and its
//! back-map (post-processing of the stage-1 sum, a DP release; W is sent to every site). The
//! open stage's aggregator seeds F_s and the releases â_s received in it: they are what the
//! coordinator holds in memory in any case (the aggregator's view, against which every site is
//! ρ-zCDP, docs/design/cape.md "Threat model"), they are needed to finish the stage with the
//! releases already received, and they are replaced when the next stage opens; the snapshot row
//! is overwritten, and deleted when the study ends. No site's statistic without its noise ever
//! exists at the coordinator, so none can be kept.
//!
//! Releases, seeds and matrices are kept as base64 (bit for bit: a resumed study sums exactly
//! the values the sites sent, and subtracts exactly the aggregator terms they added).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::algorithms::study_clip::ClipProgress;

use super::coordinator::{CapePlan, CapeRunning};
use crate::algorithms::cape_agn::Whitening;
use crate::algorithms::cape_noise::{CapeNoise, CapeReport};
use crate::federation::messages::CapePeer;
use crate::federation::wire;
use crate::linalg::Matrix;

/// A [`CapeRunning`] as kept (its plan is kept once, beside it, in the snapshot).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CapeKept {
    stage: u32,
    noise: CapeNoise,
    roster: Vec<u32>,
    peers: Vec<CapePeer>,
    /// The open stage's aggregator seeds, base64.
    aggregator_seeds: BTreeMap<u32, String>,
    /// The open stage's releases received so far, base64 f64.
    releases: BTreeMap<u32, String>,
    len: usize,
    whitening: Option<KeptWhitening>,
    reports: Vec<CapeReport>,
    /// The open stage's confirmations of its transcript (absent in a state kept before them).
    #[serde(default)]
    confirmations: BTreeMap<u32, String>,
    /// Whether the open stage's consistency round is over (releases are being collected). A
    /// state kept before confirmations existed reads as not confirmed: the stage's sites are
    /// asked to confirm first.
    #[serde(default)]
    confirmed: bool,
    /// `cape_pca`'s clip search so far (studies with a clip only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    clip: Option<ClipProgress>,
    /// μ̂ once a private centre's stage is summed (public: a DP release).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    center: Option<Vec<f64>>,
}

/// `cape_agn`'s whitening after stage 1 (D×K matrices, base64 f64, column-major).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct KeptWhitening {
    rows: usize,
    cols: usize,
    w: String,
    back: String,
    clamped: usize,
}

fn b64_matrix(rows: usize, cols: usize, text: &str) -> Result<Matrix, String> {
    let values = wire::b64_to_f64s(text, rows * cols).map_err(|e| format!("a kept matrix: {e}"))?;
    Ok(Matrix::from_vec(rows, cols, values))
}

impl CapeRunning {
    /// The kept form (module docs).
    pub(crate) fn kept(&self) -> CapeKept {
        CapeKept {
            stage: self.stage,
            noise: self.noise,
            roster: self.roster.clone(),
            peers: self.peers.clone(),
            aggregator_seeds: self
                .aggregator_seeds
                .iter()
                .map(|(&s, seed)| (s, wire::encode(seed)))
                .collect(),
            releases: self
                .releases
                .iter()
                .map(|(&s, values)| (s, wire::f64s_to_b64(values)))
                .collect(),
            len: self.len,
            whitening: self.whitening.as_ref().map(|w| KeptWhitening {
                rows: w.w.nrows(),
                cols: w.w.ncols(),
                w: wire::f64s_to_b64(w.w.as_slice()),
                back: wire::f64s_to_b64(w.back.as_slice()),
                clamped: w.clamped,
            }),
            reports: self.reports.clone(),
            confirmations: self.confirmations.clone(),
            confirmed: self.confirmed,
            clip: self.clip.clone(),
            center: self.center.clone(),
        }
    }

    /// The running stage again from its kept form, checked against the plan: the offered noise
    /// must be the plan's for this stage and roster, every seed 32 bytes and every release of
    /// the stage's length, so a damaged row is refused rather than summed.
    pub(crate) fn restore(plan: CapePlan, kept: CapeKept) -> Result<CapeRunning, String> {
        let (stage, noise, roster, len) = (kept.stage, kept.noise, kept.roster, kept.len);
        let sites = u32::try_from(roster.len()).map_err(|e| e.to_string())?;
        let clip = kept.clip;
        if plan.clip.is_some() != clip.is_some() || clip.as_ref().is_some_and(|c| !c.valid()) {
            return Err("the kept clip does not match the plan".into());
        }
        let clip_norm = clip.as_ref().and_then(ClipProgress::clip_norm);
        if plan.stage_noise(stage, sites, clip_norm) != Some(noise) {
            return Err(format!(
                "the kept noise of stage {stage} is not the plan's for {sites} sites"
            ));
        }
        if kept.aggregator_seeds.keys().ne(roster.iter()) {
            return Err("the kept aggregator seeds do not match the roster".into());
        }
        let aggregator_seeds = kept
            .aggregator_seeds
            .into_iter()
            .map(|(s, seed)| Ok((s, wire::decode_key(&seed).map_err(|e| e.to_string())?)))
            .collect::<Result<BTreeMap<_, _>, String>>()?;
        if kept.releases.keys().any(|s| !roster.contains(s)) {
            return Err("a kept release is from a site outside the roster".into());
        }
        if kept.confirmations.keys().any(|s| !roster.contains(s)) {
            return Err("a kept confirmation is from a site outside the roster".into());
        }
        // Releases are only collected once the stage is confirmed.
        let confirmed = kept.confirmed || !kept.releases.is_empty();
        let releases = kept
            .releases
            .into_iter()
            .map(|(s, text)| Ok((s, wire::b64_to_f64s(&text, len).map_err(|e| e.to_string())?)))
            .collect::<Result<BTreeMap<_, _>, String>>()?;
        let whitening = kept
            .whitening
            .map(|k| {
                Ok::<_, String>(Whitening {
                    w: b64_matrix(k.rows, k.cols, &k.w)?,
                    back: b64_matrix(k.rows, k.cols, &k.back)?,
                    clamped: k.clamped,
                })
            })
            .transpose()?;
        let center = kept.center;
        // A private centre is released by stage 1: kept from stage 2 on, never before.
        if center.is_some() != (plan.center.is_some() && stage > 1) {
            return Err("the kept centre does not match the plan's stage".into());
        }
        if let Some(mu) = &center {
            crate::algorithms::study_center::check_center(mu, mu.len())?;
        }
        let mut running = CapeRunning {
            plan,
            stage,
            noise,
            roster,
            peers: kept.peers,
            aggregator_seeds,
            releases,
            len,
            input: None,
            whitening,
            reports: kept.reports,
            confirmations: kept.confirmations,
            confirmed,
            clip,
            center,
        };
        running.input = running.input_now();
        Ok(running)
    }
}

#[cfg(test)]
#[path = "durable_tests.rs"]
pub(crate) mod tests;
