//! The coordinator's side of a live `gossip_power` study (docs/design/federation.md, "Live
//! gossip"): every site is one agent holding a block of features of the same records; the
//! coordinator only relays each agent's value of an exchange to its graph neighbours
//! ([`crate::algorithms::gossip::agent`] fixes the public schedule of exchanges), and stacks the
//! final segments in block order. It computes nothing from data and draws no noise. Every agent
//! is needed in every exchange: a silent agent at the deadline fails the study (charges stand).

use std::collections::BTreeMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::algorithms::ConfigError;
use crate::algorithms::centering::{self, CenterConfig};
use crate::algorithms::gossip::agent::{Exchange, assemble, configure_blocks, schedule};
use crate::algorithms::gossip::power::{GossipPowerConfig, GossipPowerParams, cost_of};
use crate::dataset::DataContext;
use crate::federation::messages::JoinRequest;
use crate::federation::messages::{GossipAgent, GossipValue, SiteSignature, SiteTask};
use crate::federation::transcript;
use crate::federation::wire;
use crate::linalg::Matrix;
use crate::privacy::PrivacyTarget;
use crate::protocols::Protocol;
use crate::protocols::{PlanError, StudyPlan, StudyTerms, parse_params, take_center};
use crate::studies::study::{Effect, LiveError, Study};

/// A `gossip_power` study's configuration as stored and shown to every site: the parameters
/// as given, each site's block size, and the job's configuration for those blocks (calibrated
/// at the ρ the ledger charges). A site derives the last from the first two and the study's
/// public terms, and refuses on any difference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GossipStudyConfig {
    pub params: serde_json::Value,
    /// n_features of each site, in site order (blocks of contiguous features).
    pub blocks: Vec<usize>,
    pub gossip: GossipPowerConfig,
    /// The study's centre (`params.center`): each agent's block is centred before its first
    /// exchange ([`crate::algorithms::gossip::center`]); `None`: rows as they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub center: Option<CenterConfig>,
}

impl GossipStudyConfig {
    /// The configuration for these parameters and blocks on the study's public terms: a
    /// private centre takes its share of ρ first (as a central job's), the exchanges the rest.
    pub fn derive(
        params: serde_json::Value,
        blocks: Vec<usize>,
        context: &DataContext,
        target: &PrivacyTarget,
    ) -> Result<GossipStudyConfig, ConfigError> {
        let mut rest = params.clone();
        let center = take_center(&mut rest, context)
            .map_err(|e| match e {
                PlanError::Config(e) => e,
                other => ConfigError::invalid("params.center", other.to_string()),
            })?
            .map(|request| centering::configure(request, context, target.rho))
            .transpose()?;
        let spent = center.as_ref().map_or(0.0, |c| c.cost().rho);
        let mut after = *target;
        if spent > 0.0 {
            after.rho = target.rho - spent;
            while spent + after.rho > target.rho {
                after.rho = after.rho.next_down();
            }
            if !(after.rho > 0.0) {
                return Err(ConfigError::invalid(
                    "params.center_share",
                    "must leave part of ρ to the exchanges",
                ));
            }
        }
        let parsed: GossipPowerParams = parse_params(rest)?;
        let gossip = configure_blocks(parsed, &blocks, context, &after)?;
        Ok(GossipStudyConfig {
            params,
            blocks,
            gossip,
            center,
        })
    }

    /// What every agent is charged: the centre's ρ_c and the exchanges' cost.
    pub fn cost(&self) -> f64 {
        let job = &self.gossip;
        let exchanges = cost_of(job.iterations, job.message_multiplier, job.update_multiplier);
        self.center.as_ref().map_or(0.0, |c| c.cost().rho) + exchanges
    }
}

/// What a gossip study needs once its agents have joined (kept with the study's snapshot:
/// public, the study's terms).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GossipPlan {
    pub config: GossipStudyConfig,
    context: DataContext,
}

impl GossipPlan {
    /// The plan calibrated at the ledger's ρ (what the sites derive it at).
    pub(crate) fn at_rho(&mut self, rho: f64) -> Option<serde_json::Value> {
        let target = PrivacyTarget {
            public_default: false,
            rho,
            delta: None,
            epsilon: None,
        };
        let config = GossipStudyConfig::derive(
            self.config.params.clone(),
            self.config.blocks.clone(),
            &self.context,
            &target,
        )
        .ok()?;
        self.config = config;
        serde_json::to_value(&self.config).ok()
    }
}

/// Plans a `gossip_power` study: every site states its block (`sites[i].n_features`).
pub(crate) fn plan_gossip(params: serde_json::Value, terms: &StudyTerms<'_>) -> Result<StudyPlan, PlanError> {
    let mut blocks = Vec::with_capacity(terms.site_features.len());
    for (i, features) in terms.site_features.iter().enumerate() {
        blocks.push(features.ok_or_else(|| {
            ConfigError::invalid(
                format!("sites[{i}].n_features"),
                "is required for gossip_power: the number of features (columns) this agent holds; blocks are in site order",
            )
        })?);
    }
    let config = GossipStudyConfig::derive(params, blocks, terms.context, terms.target)?;
    let job = &config.gossip;
    let rho = config.cost();
    Ok(StudyPlan {
        config: serde_json::to_value(&config)?,
        rounds: job.iterations,
        protocol: Protocol::Gossip(Box::new(GossipPlan {
            config,
            context: *terms.context,
        })),
        rho,
    })
}

/// A gossip study after every agent joined.
pub struct GossipRunning {
    pub(super) config: GossipStudyConfig,
    /// Records per agent (the same at every site: n is public under replace_one).
    pub(super) n: usize,
    pub(super) schedule: Vec<Exchange>,
    /// Site index of agent i (sites in index order).
    pub(super) roster: Vec<u32>,
    /// The exchange being collected (0-based).
    pub(super) step: usize,
    /// The values of the open exchange received so far, base64 f64 as posted.
    pub(super) posts: BTreeMap<u32, String>,
    /// Every agent's value of the previous exchange (relayed to its neighbours).
    pub(super) previous: BTreeMap<u32, String>,
    /// The agents as the consistency round shows them (names and verifying keys).
    pub(super) agents: Vec<GossipAgent>,
    /// Their confirmations of the study's transcript, before exchange 1.
    pub(super) confirmations: BTreeMap<u32, String>,
    /// Every agent confirmed: the exchanges run.
    pub(crate) confirmed: bool,
}

impl GossipRunning {
    /// The exchange being collected, for the driver's change marker.
    pub(crate) fn marker(&self) -> u32 {
        self.step as u32
    }

    fn agent(&self, site: u32) -> Option<usize> {
        self.roster.iter().position(|&s| s == site)
    }

    pub(super) fn shape(&self, step: usize, agent: usize) -> (usize, usize) {
        self.schedule[step].shape(self.n, self.config.gossip.p, self.config.blocks[agent])
    }

    /// Whether `values` is `agent`'s value of exchange `step` (0-based): base64 of as many
    /// f64 as the exchange's shape for its block, every one finite.
    pub(super) fn check_value(&self, step: usize, agent: usize, values: &str) -> Result<(), String> {
        let (rows, cols) = self.shape(step, agent);
        let decoded = wire::b64_to_f64s(values, rows * cols).map_err(|e| e.to_string())?;
        if !decoded.iter().all(|v| v.is_finite()) {
            return Err("every value must be a finite number".into());
        }
        Ok(())
    }

    /// `site`'s task, or `None` when it has posted this exchange (or is no agent).
    pub(crate) fn task(&self, site: u32) -> Option<SiteTask> {
        let agent = self.agent(site)?;
        if !self.confirmed {
            return (!self.confirmations.contains_key(&site)).then(|| SiteTask::GossipConfirm {
                agents: self.agents.clone(),
            });
        }
        if self.posts.contains_key(&site) {
            return None;
        }
        let inputs = if self.step == 0 {
            Vec::new()
        } else {
            let weights = &self.config.gossip.mixing[agent];
            (0..self.roster.len())
                .filter(|&j| j != agent && weights[j] > 0.0)
                .map(|j| {
                    let (rows, cols) = self.shape(self.step - 1, j);
                    GossipValue {
                        index: self.roster[j],
                        values: self.previous[&self.roster[j]].clone(),
                        rows,
                        cols,
                    }
                })
                .collect()
        };
        let confirmations = if self.step == 0 {
            SiteSignature::relay(&self.confirmations, None)
        } else {
            Vec::new()
        };
        Some(SiteTask::GossipStep {
            step: self.step as u32 + 1,
            steps: self.schedule.len() as u32,
            inputs,
            confirmations,
        })
    }

    /// The public report of a finished (or failed) study.
    fn report(&self) -> serde_json::Value {
        let gap = self.config.gossip.mixing().map(|w| w.spectral_gap()).ok();
        serde_json::json!({
            "survivors": self.roster,
            "agents": self.roster.len(),
            "exchanges": self.schedule.len(),
            "exchanges_done": self.step,
            "gossip_rounds": self.config.gossip.gossip_rounds,
            "spectral_gap": gap,
        })
    }

    fn finish(&self) -> Result<crate::algorithms::Output, String> {
        let segments = self
            .roster
            .iter()
            .enumerate()
            .map(|(i, site)| {
                let (rows, cols) = self.shape(self.step, i);
                wire::b64_to_f64s(&self.posts[site], rows * cols)
                    .map(|v| Matrix::from_vec(rows, cols, v))
                    .map_err(|e| e.to_string())
            })
            .collect::<Result<Vec<Matrix>, String>>()?;
        let d = self.config.blocks.iter().sum();
        assemble(&self.config.gossip.partition, &segments, d, self.config.gossip.k).map_err(|e| e.to_string())
    }
}

impl GossipRunning {
    /// Every agent joined: charge them all and open exchange 1 (None: the study failed).
    pub(crate) fn open(
        live: &mut Study,
        plan: GossipPlan,
        roster: Vec<u32>,
        effects: &mut Vec<Effect>,
    ) -> Option<Box<GossipRunning>> {
        let n = live
            .joined
            .values()
            .next()
            .and_then(|j| j.n_samples)
            .and_then(|n| usize::try_from(n).ok());
        let Some(n) = n.filter(|_| roster.len() == plan.config.blocks.len()) else {
            live.fail(
                "gossip_power needs every agent and its n; nothing was charged".into(),
                None,
                effects,
            );
            return None;
        };
        effects.push(Effect::Charge {
            roster: roster.clone(),
            dropped: Vec::new(),
        });
        let agents = roster
            .iter()
            .map(|&i| GossipAgent {
                index: i,
                name: live.names.get(&i).cloned().unwrap_or_default(),
                signing_public_key: live.joined[&i].signing_public_key.clone().unwrap_or_default(),
            })
            .collect();
        Some(Box::new(GossipRunning {
            schedule: schedule(&plan.config.gossip),
            config: plan.config,
            n,
            roster,
            step: 0,
            posts: BTreeMap::new(),
            previous: BTreeMap::new(),
            agents,
            confirmations: BTreeMap::new(),
            confirmed: false,
        }))
    }

    /// A joining agent's n must equal that of the agents already joined (n is public and the
    /// same rows are held by every agent).
    pub(crate) fn check_n(
        joined: &BTreeMap<u32, JoinRequest>,
        n_samples: Option<i64>,
    ) -> Result<(), LiveError> {
        let Some(first) = joined.values().find_map(|j| j.n_samples) else {
            return Ok(());
        };
        match n_samples {
            Some(n) if u64::try_from(n).ok() == Some(first) => Ok(()),
            _ => Err(LiveError::Invalid(format!(
                "n_samples must be {first}: every agent of a gossip_power study holds the same records \
                 (the agents that joined hold {first})"
            ))),
        }
    }

    /// An agent's confirmation of the study's transcript (stage 0, before exchange 1).
    pub(crate) fn confirm(&mut self, site: u32, stage: u32, signature: &str) -> Result<(), LiveError> {
        let gossip = self;
        if gossip.agent(site).is_none() {
            return Err(LiveError::Conflict(
                "this site is not an agent of the study".into(),
            ));
        }
        if gossip.confirmations.contains_key(&site) {
            return Err(LiveError::AlreadyReceived(
                "this agent's confirmation already arrived".into(),
            ));
        }
        if stage != 0 || gossip.confirmed {
            return Err(LiveError::Conflict(
                "a gossip_power study confirms its transcript once, as stage 0, before exchange 1".into(),
            ));
        }
        transcript::check_shape(signature).map_err(|e| LiveError::Invalid(e.to_string()))?;
        gossip.confirmations.insert(site, signature.to_owned());
        Ok(())
    }

    /// An agent's value of exchange `step` (1-based).
    pub(crate) fn post(&mut self, site: u32, step: u32, values: &str) -> Result<(), LiveError> {
        let gossip = self;
        let Some(agent) = gossip.agent(site) else {
            return Err(LiveError::Conflict(
                "this site is not an agent of the study".into(),
            ));
        };
        let current = gossip.step as u32 + 1;
        if step < current || (step == current && gossip.posts.contains_key(&site)) {
            return Err(LiveError::AlreadyReceived(format!(
                "this agent's value of exchange {step} already arrived"
            )));
        }
        if step != current {
            return Err(LiveError::Conflict(format!(
                "exchange {step} is not open (exchange {current} is)"
            )));
        }
        gossip
            .check_value(gossip.step, agent, values)
            .map_err(LiveError::Invalid)?;
        gossip.posts.insert(site, values.to_string());
        Ok(())
    }

    /// Closes the open exchange when every agent has posted; after the last, the result. An
    /// agent silent at the deadline fails the study (gossip needs every agent; charges stand).
    pub(crate) fn advance(&mut self, live: &mut Study, now: Instant, effects: &mut Vec<Effect>) -> bool {
        let gossip = self;
        let waiting_for = if gossip.confirmed {
            &gossip.posts
        } else {
            &gossip.confirmations
        };
        let missing: Vec<u32> = gossip
            .roster
            .iter()
            .copied()
            .filter(|s| !waiting_for.contains_key(s))
            .collect();
        if !missing.is_empty() {
            if now < live.deadline {
                return false;
            }
            let step = gossip.step + 1;
            let report = gossip.report();
            let reason = format!(
                "agent(s) {missing:?} sent nothing for exchange {step} of {} before the deadline; \
                 gossip needs every agent; the study stops (charges stand)",
                gossip.schedule.len()
            );
            let iteration = gossip.config.gossip.iterations;
            live.mark_out(
                &missing,
                iteration,
                "this site sent nothing before the deadline",
                effects,
            );
            live.fail(reason, Some(report), effects);
            return true;
        }
        if !gossip.confirmed {
            // Every agent confirmed the one transcript: exchange 1 opens.
            gossip.confirmed = true;
            live.next_phase(now);
            return true;
        }
        let kind = gossip.schedule[gossip.step];
        if gossip.step + 1 == gossip.schedule.len() {
            let report = gossip.report();
            match gossip.finish() {
                Ok(output) => {
                    effects.push(Effect::Progress {
                        done: gossip.config.gossip.iterations,
                    });
                    live.succeed(output, report, effects);
                }
                Err(e) => live.fail(format!("the final segments: {e}"), Some(report), effects),
            }
            return true;
        }
        // An iteration's update is released as its max-consensus ends.
        if kind == Exchange::Max && gossip.schedule[gossip.step + 1] != Exchange::Max {
            let done = gossip.schedule[..=gossip.step]
                .windows(2)
                .filter(|w| w[0] == Exchange::Max && w[1] != Exchange::Max)
                .count() as u32
                + 1;
            effects.push(Effect::Progress { done });
        }
        gossip.previous = std::mem::take(&mut gossip.posts);
        gossip.step += 1;
        live.next_phase(now);
        true
    }
}

#[cfg(test)]
#[path = "coordinator_tests.rs"]
pub(crate) mod tests;
