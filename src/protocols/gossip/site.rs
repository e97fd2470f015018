//! The site's side of a live `gossip_power` study (docs/design/federation.md, "Live gossip"):
//! this site is one agent holding a block of the study's features for the same records as every
//! other agent. Before joining it derives the study's configuration itself from the public
//! terms (the parameters, every site's block size, d, β and the ρ its ledger is charged) with
//! the job's own `configure`, and refuses when the coordinator's differs; it refuses data whose
//! column count is not its block's. It charges its ledger before its first value, then runs
//! [`Agent::advance`] once per exchange on the neighbours' values the coordinator relays: the
//! same per-agent steps as simulate mode.
//!
//! Restarts (docs/design/federation.md, "Live gossip", "Resends and restarts"): before it
//! joins, the agent keeps a session seed in its ledger ([`start_session`], as every site does),
//! and every exchange's draws come from a ChaCha20 stream of that seed keyed by the exchange
//! ([`exchange_rng`]). Each value is kept in the ledger with the neighbours' values it was
//! computed from (kind `contribution`, round = exchange) before it is sent. Asked again for an
//! exchange it already posted (an answer was lost, or it restarted), the agent sends the kept
//! bytes, never a fresh draw. Restarted with the same command line, it computes the kept
//! exchanges again from their kept inputs ([`replay`]), which must give the kept values bit
//! for bit, and continues from there; with another data file, format or budget it is refused
//! before anything is sent (the session's fingerprint). An exchange is computed again only if
//! its value was never kept, and so never sent: one value per exchange ever leaves the agent.

use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};

use crate::algorithms::RunEnv;
use crate::algorithms::centering::CenterConfig;
use crate::algorithms::federated_power::study_context;
use crate::algorithms::gossip::agent::{Agent, schedule};
use crate::algorithms::gossip::power::GossipPowerConfig;
use crate::federation::messages::{ConfirmRequest, GossipPostRequest, GossipValue, SiteStudyView, SiteTask};
use crate::federation::wire;
use crate::linalg::Matrix;
use crate::privacy::PrivacyTarget;
use crate::protocols::SiteRun;
use crate::protocols::gossip::coordinator::GossipStudyConfig;
use crate::protocols::power::state::study_neighbours;
use crate::site::ledger::{charge_ledger, keep, ledger_failure, parse_kept, signer_of, start_session};
use crate::site::prepare::{JoinKeys, join};
use crate::site::roster::RosterGuard;
use crate::site::run::{finished, next_task, note_wait, resend};
use crate::site::witness::StudyWitness;
use crate::site::{Failure, progress};
use crate::store::{SiteMessageKind, SiteStatus};

use super::consistency;

fn violation(what: impl std::fmt::Display) -> Failure {
    Failure::Protocol(what.to_string())
}

/// The study's configuration, checked against the one this site derives from the public
/// terms, and this site's block size d_i.
pub(crate) fn checked_config(view: &SiteStudyView) -> Result<(GossipStudyConfig, usize), String> {
    let offered: GossipStudyConfig = serde_json::from_value(view.config.clone())
        .map_err(|e| format!("the study's gossip_power configuration is not readable: {e}"))?;
    if offered.blocks.len() != view.n_sites as usize {
        return Err(format!(
            "the study lists {} blocks for {} sites",
            offered.blocks.len(),
            view.n_sites
        ));
    }
    let own_block = (view.site_index as usize)
        .checked_sub(1)
        .and_then(|i| offered.blocks.get(i).copied())
        .ok_or_else(|| format!("this site's index {} has no block", view.site_index))?;
    let neighbours = study_neighbours(view.relation, view.row_norm_bound, view.row_l1_bound)?;
    let context = study_context(view.n_features, neighbours);
    let target = PrivacyTarget {
        public_default: false,
        rho: view.cost_rho,
        delta: None,
        epsilon: None,
    };
    let own = GossipStudyConfig::derive(offered.params.clone(), offered.blocks.clone(), &context, &target)
        .map_err(|e| format!("the study's public terms do not configure gossip_power: {e}"))?;
    if own != offered {
        return Err(
            "the coordinator's configuration differs from the one this site derives from the study's \
             parameters, blocks, d, β and the ρ it is charged"
                .into(),
        );
    }
    let cost = own.cost();
    if !(cost <= view.cost_rho) {
        return Err(format!(
            "the noise costs ρ = {cost:e}, more than the ρ = {:e} charged",
            view.cost_rho
        ));
    }
    Ok((own, own_block))
}

/// The bounds this agent clips its block's rows to: β_i = β·√(d_i/d) in L2 (and √d_i·β_i in
/// L1, which never binds beyond it). Σ_i β_i² = β², so every record's whole row, the
/// concatenation of its blocks, has norm ≤ β: the bound the privacy derivation assumes
/// (docs/design/federation.md, "Live gossip"). Public: it depends on the study's terms only.
pub(crate) fn block_bounds(view: &SiteStudyView) -> Result<(f64, f64), String> {
    let (_, block) = checked_config(view)?;
    let beta = view.row_norm_bound * (block as f64 / view.n_features as f64).sqrt();
    Ok((beta, (block as f64).sqrt() * beta))
}

/// Whether this site's data is its block: exactly d_i columns and at least one record.
pub(crate) fn check_data(view: &SiteStudyView, n: usize, d: usize) -> Result<(), String> {
    let (_, block) = checked_config(view)?;
    if d != block {
        return Err(format!(
            "the data has {d} columns, but this site's block of the study holds {block} features \
             (sites[{}].n_features); nothing was sent",
            view.site_index.saturating_sub(1)
        ));
    }
    if n == 0 {
        return Err("the data has no records".into());
    }
    Ok(())
}

/// An exchange as kept in the ledger (kind `contribution`, round = exchange) before its value
/// is sent: the neighbours' values it was computed from, and what is sent.
#[derive(Serialize, Deserialize)]
struct KeptExchange {
    inputs: Vec<GossipValue>,
    request: GossipPostRequest,
}

/// The first ChaCha20 stream of the exchanges' draws (streams 0 and 1 of a session seed are
/// `federated_power`'s keys and shares; an exchange's stream is this plus its number).
const EXCHANGE_STREAMS: u64 = 1 << 32;

/// The generator of exchange `step`'s draws: ChaCha20 keyed by the session seed the ledger
/// keeps, one stream per exchange, so that an exchange computed again after a restart draws
/// what it drew before (module docs).
pub(crate) fn exchange_rng(seed: [u8; 32], step: u32) -> ChaCha20Rng {
    let mut rng = ChaCha20Rng::from_seed(seed);
    rng.set_stream(EXCHANGE_STREAMS + u64::from(step));
    rng
}

/// The ChaCha20 stream of a private centre's draw: one below the exchanges', so that a
/// restarted agent centres its block as it did before (the draw is the same, not a fresh one).
const CENTER_STREAM: u64 = EXCHANGE_STREAMS - 1;

/// Centres the agent's block by the study's centre ([`Agent::centre`]), a private mean drawn
/// from the session seed's centre stream. Called once, before the first exchange, after the
/// ledger is charged.
fn centre(agent: &mut Agent, center: &CenterConfig, seed: [u8; 32]) -> Result<(), Failure> {
    let mut rng = ChaCha20Rng::from_seed(seed);
    rng.set_stream(CENTER_STREAM);
    let mut never = |_: u32, _: u32| Ok(());
    let mut env = RunEnv::new(&mut rng, &mut never);
    agent
        .centre(center, &mut env)
        .map_err(|e| Failure::Refused(format!("cannot centre this agent's block: {e}")))
}

/// One exchange of this agent: the relayed values decoded and mixed ([`Agent::advance`] checks
/// who sent them, their shape and that they are finite), and its value drawn from the
/// exchange's own stream.
fn exchange(agent: &mut Agent, seed: [u8; 32], step: u32, inputs: &[GossipValue]) -> Result<Matrix, Failure> {
    let decoded = inputs
        .iter()
        .map(|v| {
            let len = v.rows.checked_mul(v.cols).ok_or_else(|| {
                violation(format!(
                    "site {}'s value: {}×{} does not fit",
                    v.index, v.rows, v.cols
                ))
            })?;
            let values = wire::b64_to_f64s(&v.values, len)
                .map_err(|e| violation(format!("site {}'s value: {e}", v.index)))?;
            let agent_index = (v.index as usize)
                .checked_sub(1)
                .ok_or_else(|| violation("a value from site 0"))?;
            Ok((agent_index, Matrix::from_vec(v.rows, v.cols, values)))
        })
        .collect::<Result<Vec<(usize, Matrix)>, Failure>>()?;
    let refs: Vec<(usize, &Matrix)> = decoded.iter().map(|(j, m)| (*j, m)).collect();
    let mut rng = exchange_rng(seed, step);
    let mut never = |_: u32, _: u32| Ok(());
    let mut env = RunEnv::new(&mut rng, &mut never);
    agent
        .advance(&mut env, &refs)
        .map_err(|e| violation(format!("exchange {step}: {e}")))
}

/// The exchanges the ledger keeps (this agent restarted), computed again in order from their
/// kept inputs so that the agent stands where it stood; each must give the kept value bit for
/// bit, or the site refuses to go on. Returns the last exchange sent and what was sent.
pub(crate) fn replay(
    agent: &mut Agent,
    seed: [u8; 32],
    kept: &[(u32, String)],
) -> Result<Option<(u32, GossipPostRequest)>, Failure> {
    let mut sent = None;
    for (step, text) in kept {
        let KeptExchange { inputs, request } = parse_kept(text)?;
        if *step as usize != agent.step() + 1 {
            return Err(ledger_failure(format!(
                "it keeps exchange {step} after exchange {}",
                agent.step()
            )));
        }
        let value = exchange(agent, seed, *step, &inputs)?;
        if wire::f64s_to_b64(value.as_slice()) != request.values {
            return Err(Failure::Refused(format!(
                "the value of exchange {step} kept in the ledger is not what this data and session \
                 compute again; nothing more is sent"
            )));
        }
        sent = Some((*step, request));
    }
    Ok(sent)
}

/// Joins (unless it already has: a restarted agent), then runs this site's agent exchange by
/// exchange until the study is over.
pub(crate) async fn follow(run: SiteRun<'_>) -> Result<(), Failure> {
    let (args, client, store, _, prepared) = run.parts();
    let view = &prepared.view;
    let (config, _) = checked_config(view).map_err(Failure::Refused)?;
    let job = &config.gossip;
    let agent = Agent::new(
        job,
        view.site_index as usize - 1,
        prepared.records.xt.clone(),
        view.row_norm_bound,
        view.n_features,
    )
    .map_err(|e| Failure::Refused(e.to_string()))?;
    // Every exchange's draws derive from the session seed kept in the ledger before joining.
    let (_, seed) = start_session(args, view, store).await?;
    // Its confirmation key: stream 2 of the kept seed (exchanges use streams 2³² + t).
    let signer = signer_of(seed);
    if view.site_status == SiteStatus::Invited {
        let keys = JoinKeys {
            signing: Some(signer.public_key()),
            ..JoinKeys::default()
        };
        join(client, view, prepared.records.n, keys).await?;
    }
    let mut roster = RosterGuard::new(prepared.expected_roster);
    let mut confirmed = consistency::restore(store, view, &mut roster, &signer).await?;
    let mut exchanges = Exchanges::resume(run, (job, config.center.clone()), agent, seed).await?;
    let wait = Duration::from_secs(args.wait_seconds);
    let path = format!("/v1/site/task?wait_ms={}", wait.as_millis());
    let mut witness = StudyWitness::open(&args.ledger, view.study_id, args.ledger_key.as_deref())?;
    let mut last_wait = None;
    loop {
        let task = next_task(client, &path, wait, &mut witness).await?;
        match task {
            SiteTask::Wait { status } => note_wait(&mut last_wait, status),
            SiteTask::GossipConfirm { agents } => {
                last_wait = None;
                let again = confirmed.is_some();
                let c = consistency::confirm(store, view, &mut roster, &agents, &signer).await?;
                client
                    .post(
                        "/v1/site/stages/0/confirm",
                        &ConfirmRequest {
                            signature: c.signature.clone(),
                        },
                    )
                    .await?;
                if !again {
                    progress(&format!("study confirmed ({} agents)", agents.len()));
                }
                confirmed = Some(c);
            }
            SiteTask::GossipStep {
                step,
                steps: asked,
                inputs,
                confirmations,
            } => {
                last_wait = None;
                let task = StepTask {
                    step,
                    asked,
                    inputs,
                    confirmations,
                };
                exchanges.step(task, confirmed.as_ref()).await?;
            }
            SiteTask::Finished { status, reason } => return finished(status, reason),
            other => {
                return Err(violation(format!(
                    "the server sent a task of another protocol in a gossip_power study: {other:?}"
                )));
            }
        }
    }
}

/// An exchange the coordinator asks for: its number, the count it states, the neighbours'
/// values and, for the first, every agent's confirmation.
struct StepTask {
    step: u32,
    asked: u32,
    inputs: Vec<GossipValue>,
    confirmations: Vec<crate::federation::messages::SiteSignature>,
}

/// What the agent keeps from one exchange to the next: its state, the session seed, whether
/// its ledger was charged, and the last exchange it sent (to send the same bytes again).
struct Exchanges<'a> {
    run: SiteRun<'a>,
    iterations: u32,
    agent: Agent,
    /// The study's centre, until the block is centred (before the first exchange).
    center: Option<CenterConfig>,
    seed: [u8; 32],
    steps: u32,
    charged: bool,
    sent: Option<(u32, GossipPostRequest)>,
    resends: u32,
}

impl<'a> Exchanges<'a> {
    /// The agent's exchanges as its ledger kept them (the agent restarted): the charge, and
    /// every exchange sent, computed again from its kept inputs.
    async fn resume(
        run: SiteRun<'a>,
        (job, mut center): (&GossipPowerConfig, Option<CenterConfig>),
        mut agent: Agent,
        seed: [u8; 32],
    ) -> Result<Exchanges<'a>, Failure> {
        let (_, _, store, budget, prepared) = run.parts();
        let study = prepared.view.study_id;
        let steps = schedule(job).len() as u32;
        let charged = store
            .study_charged(budget.dataset, study)
            .await
            .map_err(ledger_failure)?;
        let kept = store
            .site_messages(study, SiteMessageKind::Contribution)
            .await
            .map_err(ledger_failure)?;
        // Exchanges were sent: the ledger was charged before the first, and the block was
        // centred then; it is centred again alike (the same draw) before they are replayed.
        if !kept.is_empty()
            && let Some(center) = center.take()
        {
            if !charged {
                return Err(ledger_failure("it keeps exchanges but no charge"));
            }
            centre(&mut agent, &center, seed)?;
        }
        let sent = replay(&mut agent, seed, &kept)?;
        if let Some((step, _)) = &sent {
            progress(&format!(
                "continuing the study from the ledger: exchange {step}/{steps} was sent"
            ));
        }
        Ok(Exchanges {
            run,
            iterations: job.iterations,
            agent,
            center,
            seed,
            steps,
            charged,
            sent,
            resends: 0,
        })
    }

    /// One exchange: sent again as kept if it was sent; else checked to follow the last one
    /// (and, for the first, every agent's confirmation of the study), the ledger charged before
    /// the first value, the value computed, kept, then sent.
    async fn step(
        &mut self,
        task: StepTask,
        confirmed: Option<&consistency::Confirmed>,
    ) -> Result<(), Failure> {
        let (args, client, store, budget, prepared) = self.run.parts();
        let StepTask {
            step,
            asked,
            inputs,
            confirmations,
        } = task;
        let (steps, agent) = (self.steps, &mut self.agent);
        let step_path = format!("/v1/site/gossip/{step}");
        if let Some((done, request)) = &self.sent
            && *done == step
        {
            return resend(
                client,
                &step_path,
                request,
                &mut self.resends,
                &format!("exchange {step}"),
            )
            .await;
        }
        self.resends = 0;
        if asked != steps || step as usize != agent.step() + 1 {
            return Err(violation(format!(
                "exchange {step}/{asked} does not follow exchange {}/{steps} of this study",
                agent.step()
            )));
        }
        if step == 1 {
            // Nothing leaves the agent unless every agent confirmed its transcript.
            let Some(c) = confirmed else {
                return Err(violation(
                    "exchange 1 came before this agent confirmed the study; refusing",
                ));
            };
            c.check_all(&confirmations)?;
        }
        if !self.charged {
            charge_ledger(args, store, budget, prepared).await?;
            self.charged = true;
        }
        if let Some(center) = self.center.take() {
            centre(agent, &center, self.seed)?;
        }
        let before = agent.iterations_done();
        let value = exchange(agent, self.seed, step, &inputs)?;
        // Kept before it is sent: a restarted agent sends these bytes, never another draw.
        let computed = KeptExchange {
            inputs,
            request: GossipPostRequest {
                values: wire::f64s_to_b64(value.as_slice()),
            },
        };
        let study = prepared.view.study_id;
        let kept = keep(store, study, SiteMessageKind::Contribution, step, &computed).await?;
        if kept.request != computed.request {
            return Err(ledger_failure(format!(
                "it keeps another value of exchange {step} than this agent computed"
            )));
        }
        client.post(&step_path, &kept.request).await?;
        if step == 1 || agent.iterations_done() > before || step == steps {
            progress(&format!(
                "exchange {step}/{steps} sent; {}/{} power iterations released",
                agent.iterations_done(),
                self.iterations
            ));
        }
        self.sent = Some((step, kept.request));
        if args.test_stop_after_round == Some(step) {
            progress(&format!("stopping after exchange {step} (test hook)"));
            std::future::pending::<()>().await;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "site_tests.rs"]
mod tests;
