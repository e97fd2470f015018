//! The kept form of a running `gossip_power` study, part of the study's snapshot
//! (`src/studies/durable.rs`, docs/design/federation.md "Durable studies" and "Live gossip"),
//! and the running study rebuilt from it.
//!
//! What is kept, and why each part may be: the plan (public: the study's terms, kept once
//! beside this in the snapshot), n (public under replace_one, the only relation gossip runs
//! under), the roster (public), the open exchange's number, and the values posted in the open
//! and in the previous exchange. Every value an agent posts is a Gaussian release of the
//! derivation in `crates/core/src/algorithms/gossip/power.rs` or a post-processing of releases and public
//! randomness (the module doc of `crate::algorithms::gossip::agent`); the coordinator relays
//! them to the agents' neighbours, so it holds them in memory in any case, and the snapshot row
//! is overwritten at every step and deleted when the study ends. Nothing un-noised that
//! depends on data ever reaches the coordinator, so none can be kept.
//!
//! The schedule is not kept: it is rebuilt from the plan's configuration
//! ([`crate::algorithms::gossip::agent::schedule`]), and the kept exchange and every kept value
//! are checked against it (the exchange within it, every value from a roster agent, of the
//! length its exchange and block give, finite), so a damaged row is refused rather than relayed.
//! Values are kept as the base64 the agents posted: a resumed study relays the same bytes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::coordinator::{GossipPlan, GossipRunning};
use crate::algorithms::gossip::agent::schedule;
use crate::federation::messages::GossipAgent;

/// A [`GossipRunning`] as kept (its plan is kept once, beside it, in the snapshot).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GossipKept {
    n: usize,
    roster: Vec<u32>,
    /// The exchange being collected (0-based).
    step: usize,
    /// The open exchange's values received so far, base64 f64 as posted.
    posts: BTreeMap<u32, String>,
    /// Every agent's value of the previous exchange (none before the first), base64 f64.
    previous: BTreeMap<u32, String>,
    /// The agents as shown in the consistency round, their confirmations, and whether it is over
    /// (absent in a state kept before it existed: such a study asks its agents to confirm an
    /// empty roster, which they refuse, so it stops rather than run unchecked).
    #[serde(default)]
    agents: Vec<GossipAgent>,
    #[serde(default)]
    confirmations: BTreeMap<u32, String>,
    #[serde(default)]
    confirmed: bool,
}

impl GossipRunning {
    /// The kept form (module docs).
    pub(crate) fn kept(&self) -> GossipKept {
        GossipKept {
            n: self.n,
            roster: self.roster.clone(),
            step: self.step,
            posts: self.posts.clone(),
            previous: self.previous.clone(),
            agents: self.agents.clone(),
            confirmations: self.confirmations.clone(),
            confirmed: self.confirmed,
        }
    }

    /// The running study again from its kept form, with the schedule rebuilt from the plan,
    /// and everything kept checked against it (module docs).
    pub(crate) fn restore(plan: &GossipPlan, kept: GossipKept) -> Result<GossipRunning, String> {
        let config = plan.config.clone();
        // Exchanges only begin once every agent confirmed (a state kept before the consistency
        // round existed, mid-exchange, reads as past it).
        let confirmed = kept.confirmed || kept.step > 0 || !kept.posts.is_empty();
        let running = GossipRunning {
            schedule: schedule(&config.gossip),
            config,
            n: kept.n,
            roster: kept.roster,
            step: kept.step,
            posts: kept.posts,
            previous: kept.previous,
            agents: kept.agents,
            confirmations: kept.confirmations,
            confirmed,
        };
        running.check()?;
        Ok(running)
    }

    fn check(&self) -> Result<(), String> {
        let agents = self.config.blocks.len();
        if self.roster.len() != agents || !self.roster.windows(2).all(|w| w[0] < w[1]) {
            return Err(format!(
                "the kept roster {:?} is not {agents} agents in site order",
                self.roster
            ));
        }
        if self.confirmations.keys().any(|s| !self.roster.contains(s)) {
            return Err("a kept confirmation is from a site outside the roster".into());
        }
        if self.n == 0 || self.config.gossip.partition.len() != agents {
            return Err("the kept study has no records, or its plan's partition is not its blocks".into());
        }
        if self.step >= self.schedule.len() {
            return Err(format!(
                "the kept exchange {} is past the schedule's {}",
                self.step + 1,
                self.schedule.len()
            ));
        }
        self.check_values(&self.posts, self.step, false)?;
        match self.step.checked_sub(1) {
            Some(previous) => self.check_values(&self.previous, previous, true),
            None if self.previous.is_empty() => Ok(()),
            None => Err("the first exchange has no previous values to relay".into()),
        }
    }

    /// Every value of `values` is a roster agent's, of exchange `step`'s shape, finite; with
    /// `every`, each agent has one.
    fn check_values(&self, values: &BTreeMap<u32, String>, step: usize, every: bool) -> Result<(), String> {
        if every && values.len() != self.roster.len() {
            return Err(format!(
                "the kept values of exchange {} are not every agent's",
                step + 1
            ));
        }
        for (site, text) in values {
            let agent = self
                .roster
                .iter()
                .position(|s| s == site)
                .ok_or_else(|| format!("a kept value is from site {site}, outside the roster"))?;
            self.check_value(step, agent, text)
                .map_err(|e| format!("site {site}'s kept value of exchange {}: {e}", step + 1))?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "durable_tests.rs"]
mod tests;
