//! The site's side of a CAPE study (docs/design/cape.md): join with one fresh X25519 pair-noise
//! key per stage, wait for the roster, check the noise the coordinator calibrated against the
//! study's cost *with this site's own sensitivity*, charge the local ledger (once, before the
//! first release), and send each stage's noisy statistic â_s = a_s + E_s + F_s + G_s:
//! `cape_pca` the packed Gram matrix; `cape_agn` the packed second moment, then the third
//! moment projected by the coordinator's whitening W (Alg. 3 step 11). Asked again for the same
//! stage (an answer was lost), the same vector is sent again, never a fresh draw.

use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use super::http::SiteClient;
use super::roster::{Member, RosterGuard, describe};
use super::run::{Prepared, charge_ledger, finished, join};
use super::{Failure, progress};
use crate::algorithms::RunEnv;
use crate::algorithms::analyze_gauss::sensitivity;
use crate::algorithms::cape_agn::{self, CapeAgnConfig, Model};
use crate::algorithms::cape_pca::site_statistic;
use crate::algorithms::tensor_power;
use crate::dataset::Neighbours;
use crate::federation::cape::{self, CapeNoise, joint_rho};
use crate::federation::crypto::{self, KeyPair, Seed};
use crate::federation::messages::{CapePeer, CapeReleaseRequest, SiteStudyView, SiteTask};
use crate::federation::power::study_neighbours;
use crate::federation::wire;
use crate::linalg::Matrix;
use crate::store::{LocalBudget, Store};

use super::args::SiteArgs;

/// Most times in a row the same release is sent again on the server's request.
const MAX_RESENDS: u32 = 5;

fn violation(what: impl std::fmt::Display) -> Failure {
    Failure::Protocol(what.to_string())
}

/// What this site computes, from the study's public description.
enum Plan {
    Pca,
    Agn { model: Model, sigma2: f64 },
}

impl Plan {
    fn of(view: &SiteStudyView) -> Result<Plan, String> {
        match view.algorithm.as_str() {
            "cape_pca" => Ok(Plan::Pca),
            "cape_agn" => {
                let config: CapeAgnConfig = serde_json::from_value(view.config.clone())
                    .map_err(|e| format!("the study's cape_agn configuration is not readable: {e}"))?;
                Ok(Plan::Agn {
                    model: config.model,
                    sigma2: config.sigma2,
                })
            }
            other => Err(format!("`{other}` is not a CAPE algorithm")),
        }
    }

    fn stages(&self) -> u32 {
        match self {
            Plan::Pca => 1,
            Plan::Agn { .. } => 2,
        }
    }

    /// Δ of this site's statistic in `stage`, from the study's public bounds.
    fn sensitivity(&self, neighbours: &Neighbours, d: usize, stage: u32) -> f64 {
        match (self, stage) {
            (Plan::Pca, _) => sensitivity(neighbours),
            (Plan::Agn { model, sigma2 }, 1) => {
                cape_agn::second_moment_sensitivity(*model, *sigma2, d, neighbours)
            }
            (Plan::Agn { model, sigma2 }, _) => {
                cape_agn::third_moment_sensitivity(*model, *sigma2, d, neighbours)
            }
        }
    }
}

/// Checks the coordinator's calibration for this roster against what this site agreed to pay:
/// the joint-view cost, recomputed with this site's own Δ, must not exceed the stage's share
/// `rho` of the study's ρ, and a coalition of the other sites must still face the pooled
/// variance (F_s + G_s ≥ τ_c²).
pub fn check_noise(noise: &CapeNoise, roster_size: usize, delta: f64, rho: f64) -> Result<(), String> {
    let positive = |x: f64| x.is_finite() && x > 0.0;
    if !(positive(noise.pair_sd) && positive(noise.own_sd) && noise.aggregator_sd.is_finite()) {
        return Err("the noise scales are not finite positive numbers".into());
    }
    if noise.sites as usize != roster_size {
        return Err(format!(
            "the noise is calibrated for {} sites but the roster has {roster_size}",
            noise.sites
        ));
    }
    let cost = joint_rho(delta, noise.sites, noise.pair_sd, noise.own_sd);
    if !(cost <= rho * (1.0 + 1e-9)) {
        return Err(format!(
            "the noise would cost this site ρ = {cost:e}, more than this stage's share ρ = {rho:e} of the study"
        ));
    }
    let pooled = delta * delta / (2.0 * rho);
    if !(noise.aggregator_sd.powi(2) + noise.own_sd.powi(2) >= pooled * (1.0 - 1e-9)) {
        return Err("the aggregator and own noise together are below the pooled level".into());
    }
    Ok(())
}

/// The pair seeds with every peer, from this site's secret and the peers' public keys.
fn pair_seeds(
    view: &SiteStudyView,
    keys: &KeyPair,
    peers: &[CapePeer],
    stage: u32,
) -> Result<Vec<(u32, Seed)>, String> {
    let me = view.site_index;
    let mut seen = std::collections::BTreeSet::new();
    peers
        .iter()
        .map(|peer| {
            if peer.index == me || !seen.insert(peer.index) {
                return Err(format!(
                    "the roster lists site {} twice or lists this site",
                    peer.index
                ));
            }
            let Some(key) = peer.noise_public_keys.get(stage as usize - 1) else {
                return Err(format!(
                    "site {} has no pair-noise key for stage {stage}",
                    peer.index
                ));
            };
            let public = wire::decode_key(key).map_err(|e| format!("site {}'s key: {e}", peer.index))?;
            let shared = crypto::agree(&keys.secret_bytes(), &public).map_err(|e| e.to_string())?;
            let seed = crypto::cape_pair_seed(&shared, view.study_id, stage, me, peer.index)
                .map_err(|e| e.to_string())?;
            Ok((peer.index, seed))
        })
        .collect()
}

/// Joins, then follows the tasks until the study is over.
pub(super) async fn follow(
    args: &SiteArgs,
    client: &SiteClient,
    store: &Store,
    budget: &LocalBudget,
    prepared: &Prepared,
) -> Result<(), Failure> {
    let view = &prepared.view;
    let plan = Plan::of(view).map_err(Failure::Refused)?;
    let neighbours =
        study_neighbours(&view.relation, view.row_norm_bound, view.row_l1_bound).map_err(Failure::Refused)?;
    let d = view.n_features;
    let stages = plan.stages();
    let mut rng = ChaCha20Rng::try_from_os_rng()
        .map_err(|e| Failure::Refused(format!("the operating system's random generator failed: {e}")))?;
    let keys: Vec<KeyPair> = (0..stages).map(|_| KeyPair::generate(&mut rng)).collect();
    let public: Vec<String> = keys.iter().map(|k| wire::encode(&k.public())).collect();
    join(client, view, prepared.records.n, None, public.clone()).await?;
    // The records in the model's domain (cape_agn), computed once.
    let domain = match &plan {
        Plan::Pca => None,
        Plan::Agn { model, .. } => Some(cape_agn::to_domain(&prepared.records.xt, *model)),
    };
    let wait = Duration::from_secs(args.wait_seconds);
    let path = format!("/v1/site/task?wait_ms={}", wait.as_millis());
    let mut sent: Option<(u32, CapeReleaseRequest)> = None;
    let mut charged = false;
    let mut resends = 0;
    let mut last_wait: Option<String> = None;
    let me = Member {
        index: view.site_index,
        name: view.site_name.clone(),
        keys: public.clone(),
    };
    let mut roster = RosterGuard::new(prepared.expected_roster);
    loop {
        let task: SiteTask = client.get(&path, wait).await?;
        match task {
            SiteTask::Wait { status } => {
                if last_wait.as_deref() != Some(status.as_str()) {
                    progress(&format!("waiting (study {status})"));
                    last_wait = Some(status);
                }
            }
            SiteTask::CapeRelease {
                stage,
                stages: asked_stages,
                peers,
                aggregator_seed,
                noise,
                len,
                input,
                input_rows,
                input_cols,
            } => {
                last_wait = None;
                let stage_path = format!("/v1/site/stages/{stage}/release");
                if let Some((done, request)) = &sent {
                    if *done == stage {
                        resends += 1;
                        if resends > MAX_RESENDS {
                            return Err(violation(format!(
                                "the server keeps asking for stage {stage}, sent {MAX_RESENDS} times already"
                            )));
                        }
                        progress(&format!(
                            "the server asked for stage {stage} again; sending the same release"
                        ));
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        client.post(&stage_path, request).await?;
                        continue;
                    }
                    if stage < *done {
                        return Err(violation(format!(
                            "the server asked for stage {stage} after stage {done}"
                        )));
                    }
                }
                resends = 0;
                if asked_stages != stages || !(1..=stages).contains(&stage) {
                    return Err(violation(format!(
                        "stage {stage}/{asked_stages} does not fit a {} study",
                        view.algorithm
                    )));
                }
                let mut members: Vec<Member> = peers.iter().map(Member::from_cape_peer).collect();
                members.push(me.clone());
                if let Some(hash) = roster
                    .observe(view, &members, &me)
                    .map_err(|e| violation(format!("refusing stage {stage}'s roster: {e}")))?
                {
                    progress(&describe(&hash, &members));
                }
                let delta = plan.sensitivity(&neighbours, d, stage);
                check_noise(&noise, peers.len() + 1, delta, view.cost_rho / f64::from(stages)).map_err(
                    |e| Failure::Refused(format!("refusing the coordinator's stage-{stage} noise: {e}")),
                )?;
                let seeds = pair_seeds(view, &keys[stage as usize - 1], &peers, stage).map_err(violation)?;
                let aggregator_seed: Seed = wire::decode(&aggregator_seed)
                    .ok()
                    .and_then(|bytes| bytes.try_into().ok())
                    .ok_or_else(|| violation("the aggregator seed is not 32 bytes of base64"))?;
                let packed_matrix = d * (d + 1) / 2;
                let statistic = match (&plan, stage, &domain) {
                    (Plan::Pca, _, _) if len == packed_matrix => Some(site_statistic(&prepared.records.xt)),
                    (Plan::Agn { model, sigma2 }, 1, Some(x)) if len == packed_matrix => {
                        Some(cape::pack_upper(&cape_agn::second_moment(x, *model, *sigma2)))
                    }
                    (Plan::Agn { .. }, 2, Some(_)) => None,
                    _ => {
                        return Err(violation(format!(
                            "stage {stage} with {len} values does not fit the study"
                        )));
                    }
                };
                let release = match statistic {
                    Some(statistic) => {
                        if !charged {
                            charge_ledger(args, store, budget, prepared).await?;
                            charged = true;
                        }
                        let mut never = |_: u32, _: u32| Ok(());
                        let mut env = RunEnv::new(&mut rng, &mut never);
                        cape::site_release(
                            &statistic,
                            view.site_index,
                            &seeds,
                            &aggregator_seed,
                            &noise,
                            &mut env,
                        )
                        .map_err(violation)?
                    }
                    None => {
                        let (Plan::Agn { model, sigma2 }, Some(x)) = (&plan, &domain) else {
                            return Err(violation("no data for this stage"));
                        };
                        let w = match input {
                            Some(b64) if input_rows == d && input_cols >= 1 && input_cols <= d => {
                                wire::b64_to_f64s(&b64, input_rows * input_cols)
                                    .map(|v| Matrix::from_vec(input_rows, input_cols, v))
                                    .map_err(|e| violation(format!("the whitening W: {e}")))?
                            }
                            _ => return Err(violation("stage 2 came without a D×K whitening W")),
                        };
                        if len != tensor_power::packed_len(input_cols) || !charged {
                            return Err(violation("stage 2 does not follow a stage 1 this site sent"));
                        }
                        let zeros = vec![0.0; tensor_power::packed_len(d)];
                        let mut never = |_: u32, _: u32| Ok(());
                        let mut env = RunEnv::new(&mut rng, &mut never);
                        let noisy = cape::site_release(
                            &zeros,
                            view.site_index,
                            &seeds,
                            &aggregator_seed,
                            &noise,
                            &mut env,
                        )
                        .map_err(violation)?;
                        let projected = tensor_power::project_packed(&noisy, d, &w).map_err(violation)?;
                        let statistic = cape_agn::projected_third_moment(x, *model, *sigma2, &w);
                        statistic.iter().zip(projected).map(|(m, n)| m + n).collect()
                    }
                };
                let request = CapeReleaseRequest {
                    values: wire::f64s_to_b64(&release),
                };
                client.post(&stage_path, &request).await?;
                progress(&format!(
                    "stage {stage}/{stages} release sent ({len} values; correlated with {} peers; own noise sd {:.4e})",
                    peers.len(),
                    noise.own_sd
                ));
                sent = Some((stage, request));
            }
            SiteTask::Finished { status, reason } => return finished(&status, reason),
            other => {
                return Err(violation(format!(
                    "the server sent a task of another protocol in a CAPE study: {other:?}"
                )));
            }
        }
    }
}
