//! The site's side of a live `gossip_power` study (docs/design/federation.md, "Live gossip"):
//! this site is one agent holding a block of the study's features for the same records as every
//! other agent. Before joining it derives the study's configuration itself from the public
//! terms (the parameters, every site's block size, d, β and the ρ its ledger is charged) with
//! the job's own `configure`, and refuses when the coordinator's differs; it refuses data whose
//! column count is not its block's. It charges its ledger before its first value, then runs
//! [`Agent::advance`] once per exchange on the neighbours' values the coordinator relays: the
//! same per-agent steps as simulate mode. Asked again for an exchange it already posted (an
//! answer was lost), it sends the same bytes, never a fresh draw. Its noise is drawn from the
//! operating system and lives only in this process: a gossip site that joined cannot be
//! restarted (`prepare::check_study` refuses it), so nothing is ever drawn twice.

use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use super::http::SiteClient;
use super::ledger::charge_ledger;
use super::prepare::{Prepared, join};
use super::run::{finished, note_wait, resend};
use super::{Failure, progress};
use crate::algorithms::RunEnv;
use crate::algorithms::federated_power::study_context;
use crate::algorithms::gossip_agent::{Agent, schedule};
use crate::algorithms::gossip_power::cost_of;
use crate::federation::messages::{GossipPostRequest, SiteStudyView, SiteTask};
use crate::federation::power::study_neighbours;
use crate::federation::wire;
use crate::linalg::Matrix;
use crate::privacy::PrivacyTarget;
use crate::store::{LocalBudget, Store};
use crate::studies::gossip_live::GossipStudyConfig;

use super::args::SiteArgs;

fn violation(what: impl std::fmt::Display) -> Failure {
    Failure::Protocol(what.to_string())
}

/// The study's configuration, checked against the one this site derives from the public
/// terms, and this site's block size d_i.
pub(super) fn checked_config(view: &SiteStudyView) -> Result<(GossipStudyConfig, usize), String> {
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
    let job = &own.gossip;
    let cost = cost_of(job.iterations, job.message_multiplier, job.update_multiplier);
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
pub(super) fn block_bounds(view: &SiteStudyView) -> Result<(f64, f64), String> {
    let (_, block) = checked_config(view)?;
    let beta = view.row_norm_bound * (block as f64 / view.n_features as f64).sqrt();
    Ok((beta, (block as f64).sqrt() * beta))
}

/// Whether this site's data is its block: exactly d_i columns and at least one record.
pub(super) fn check_data(view: &SiteStudyView, n: usize, d: usize) -> Result<(), String> {
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

/// Joins, then runs this site's agent exchange by exchange until the study is over.
pub(super) async fn follow(
    args: &SiteArgs,
    client: &SiteClient,
    store: &Store,
    budget: &LocalBudget,
    prepared: &Prepared,
) -> Result<(), Failure> {
    let view = &prepared.view;
    let (config, _) = checked_config(view).map_err(Failure::Refused)?;
    let job = &config.gossip;
    let index = view.site_index as usize - 1;
    let mut agent = Agent::new(
        job,
        index,
        prepared.records.xt.clone(),
        view.row_norm_bound,
        view.n_features,
    )
    .map_err(|e| Failure::Refused(e.to_string()))?;
    let steps = schedule(job).len() as u32;
    let mut rng = ChaCha20Rng::try_from_os_rng()
        .map_err(|e| Failure::Refused(format!("the operating system's random generator failed: {e}")))?;
    join(client, view, prepared.records.n, None, Vec::new()).await?;
    let wait = Duration::from_secs(args.wait_seconds);
    let path = format!("/v1/site/task?wait_ms={}", wait.as_millis());
    let mut sent: Option<(u32, GossipPostRequest)> = None;
    let mut charged = false;
    let mut resends = 0;
    let mut last_wait = None;
    loop {
        let task: SiteTask = client.get(&path, wait).await?;
        match task {
            SiteTask::Wait { status } => note_wait(&mut last_wait, status),
            SiteTask::GossipStep {
                step,
                steps: asked,
                inputs,
            } => {
                last_wait = None;
                let step_path = format!("/v1/site/gossip/{step}");
                if let Some((done, request)) = &sent
                    && *done == step
                {
                    resend(
                        client,
                        &step_path,
                        request,
                        &mut resends,
                        &format!("exchange {step}"),
                    )
                    .await?;
                    continue;
                }
                resends = 0;
                if asked != steps || step as usize != agent.step() + 1 {
                    return Err(violation(format!(
                        "exchange {step}/{asked} does not follow exchange {}/{steps} of this study",
                        agent.step()
                    )));
                }
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
                if !charged {
                    charge_ledger(args, store, budget, prepared).await?;
                    charged = true;
                }
                let before = agent.iterations_done();
                let value = {
                    let mut never = |_: u32, _: u32| Ok(());
                    let mut env = RunEnv::new(&mut rng, &mut never);
                    agent
                        .advance(&mut env, &refs)
                        .map_err(|e| violation(format!("exchange {step}: {e}")))?
                };
                let request = GossipPostRequest {
                    values: wire::f64s_to_b64(value.as_slice()),
                };
                client.post(&step_path, &request).await?;
                if step == 1 || agent.iterations_done() > before || step == steps {
                    progress(&format!(
                        "exchange {step}/{steps} sent; {}/{} power iterations released",
                        agent.iterations_done(),
                        job.iterations
                    ));
                }
                sent = Some((step, request));
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
