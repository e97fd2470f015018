//! A `gossip_power` agent's consistency round (docs/design/federation.md, "The consistency
//! round", gossip): before exchange 1, every agent fixes the roster of agents it is shown (its
//! hash, printed and checked against `--expect-roster-hash`, covers the study's terms and
//! calibration and every agent's verifying key), signs the study's transcript over that hash,
//! and keeps it as its one transcript. It posts exchange 1 only when every agent of the roster
//! confirmed the very same bytes: a record spans every agent's block, so its privacy needs
//! every agent's noise calibrated alike.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::federation::messages::{GossipAgent, SiteSignature, SiteStudyView};
use crate::federation::transcript::{self, SiteSigner};
use crate::site::ledger::keep;
use crate::site::roster::{Member, RosterGuard, describe};
use crate::site::{Failure, progress};
use crate::store::{SiteMessageKind, Store};

/// The transcript kept in the ledger: the agents it was confirmed with, and the signature.
#[derive(Serialize, Deserialize, PartialEq)]
pub(crate) struct KeptAgents {
    agents: Vec<GossipAgent>,
    signature: String,
}

/// The study's transcript as this agent confirmed it.
pub(crate) struct Confirmed {
    agents: Vec<GossipAgent>,
    message: Vec<u8>,
    pub(crate) signature: String,
}

fn violation(what: impl std::fmt::Display) -> Failure {
    Failure::Protocol(what.to_string())
}

/// Fixes the roster of `agents` (every agent of the study, this one with its own key) and
/// keeps the study's transcript over its hash as this agent's one; a different one kept
/// before is refused. `kept` re-reads a transcript this agent confirmed before a restart.
pub(crate) async fn confirm(
    store: &Store,
    view: &SiteStudyView,
    roster: &mut RosterGuard,
    agents: &[GossipAgent],
    signer: &SiteSigner,
) -> Result<Confirmed, Failure> {
    let members: Vec<Member> = agents
        .iter()
        .map(|a| Member {
            index: a.index,
            name: a.name.clone(),
            keys: vec![a.signing_public_key.clone()],
        })
        .collect();
    let me = Member {
        index: view.site_index,
        name: view.site_name.clone(),
        keys: vec![signer.public_key()],
    };
    if let Some(hash) = roster
        .observe(view, &members, &me)
        .map_err(|e| violation(format!("refusing the roster of agents: {e}")))?
    {
        progress(&describe(&hash, &members));
    }
    let indices: Vec<u32> = agents.iter().map(|a| a.index).collect();
    if indices != (1..=view.n_sites).collect::<Vec<u32>>() {
        return Err(violation(format!(
            "the roster of agents {indices:?} is not every one of the study's {} sites in order",
            view.n_sites
        )));
    }
    let hash = roster
        .hash()
        .ok_or_else(|| violation("the roster of agents was not fixed"))?;
    let message = transcript::stage_message(view.study_id, &view.algorithm, 0, &indices, &hash);
    let mine = KeptAgents {
        agents: agents.to_vec(),
        signature: signer.sign(&message),
    };
    let kept = keep(store, view.study_id, SiteMessageKind::Confirm, 0, &mine).await?;
    if kept != mine {
        return Err(violation(
            "this agent confirmed the study with another roster of agents before; refusing",
        ));
    }
    Ok(Confirmed {
        agents: kept.agents,
        message,
        signature: kept.signature,
    })
}

/// The transcript this agent kept before a restart, if any (re-confirmed against the roster).
pub(crate) async fn restore(
    store: &Store,
    view: &SiteStudyView,
    roster: &mut RosterGuard,
    signer: &SiteSigner,
) -> Result<Option<Confirmed>, Failure> {
    let kept = store
        .site_messages(view.study_id, SiteMessageKind::Confirm)
        .await
        .map_err(crate::site::ledger::ledger_failure)?;
    let Some((_, text)) = kept.into_iter().find(|(stage, _)| *stage == 0) else {
        return Ok(None);
    };
    let kept: KeptAgents = crate::site::ledger::parse_kept(&text)?;
    confirm(store, view, roster, &kept.agents, signer).await.map(Some)
}

impl Confirmed {
    /// Checks that every agent confirmed this very transcript under its key in the roster.
    pub(crate) fn check_all(&self, confirmations: &[SiteSignature]) -> Result<(), Failure> {
        let mut signers = BTreeMap::new();
        for c in confirmations {
            signers.entry(c.site).or_insert(c.signature.as_str());
        }
        let mut missing = Vec::new();
        for agent in &self.agents {
            let valid = signers.get(&agent.index).is_some_and(|signature| {
                transcript::verifying_key(&agent.signing_public_key)
                    .is_ok_and(|key| transcript::verify(&key, agent.index, &self.message, signature).is_ok())
            });
            if !valid {
                missing.push(agent.index);
            }
        }
        if missing.is_empty() {
            Ok(())
        } else {
            Err(violation(format!(
                "agents {missing:?} did not confirm the study's transcript this agent saw (the \
                 coordinator may have shown agents different rosters or terms); refusing before \
                 exchange 1"
            )))
        }
    }
}
