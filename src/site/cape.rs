//! The site's side of a CAPE study (`cape_pca`; docs/design/cape.md): join with a fresh X25519
//! pair-noise key, wait for the roster, check the noise the coordinator calibrated against the
//! study's cost *with this site's own sensitivity*, charge the local ledger, and send the one
//! noisy statistic â_s = A_s + E_s + F_s + G_s. Asked again for the same stage (an answer was
//! lost), the same vector is sent again, never a fresh draw.

use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use super::http::SiteClient;
use super::run::{Prepared, charge_ledger, finished, join};
use super::{Failure, progress};
use crate::algorithms::RunEnv;
use crate::algorithms::analyze_gauss::sensitivity;
use crate::algorithms::cape_pca::site_statistic;
use crate::federation::cape::{self, CapeNoise, joint_rho};
use crate::federation::crypto::{self, KeyPair, Seed};
use crate::federation::messages::{CapePeer, CapeReleaseRequest, SiteStudyView, SiteTask};
use crate::federation::power::study_neighbours;
use crate::federation::wire;
use crate::store::{LocalBudget, Store};

use super::args::SiteArgs;

/// Most times in a row the same release is sent again on the server's request.
const MAX_RESENDS: u32 = 5;

fn violation(what: impl std::fmt::Display) -> Failure {
    Failure::Protocol(what.to_string())
}

/// Checks the coordinator's calibration for this roster against what this site agreed to pay:
/// the joint-view cost, recomputed with this site's own Δ, must not exceed the study's ρ, and a
/// coalition of the other sites must still face the pooled variance (F_s + G_s ≥ τ_c²).
pub fn check_noise(view: &SiteStudyView, noise: &CapeNoise, roster_size: usize) -> Result<(), String> {
    let neighbours = study_neighbours(&view.relation, view.row_norm_bound, view.row_l1_bound)?;
    let delta = sensitivity(&neighbours);
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
    let rho = view.cost_rho;
    let cost = joint_rho(delta, noise.sites, noise.pair_sd, noise.own_sd);
    if !(cost <= rho * (1.0 + 1e-9)) {
        return Err(format!(
            "the noise would cost this site ρ = {cost:e}, more than the study's ρ = {rho:e}"
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
            let [key] = peer.noise_public_keys.as_slice() else {
                return Err(format!(
                    "site {} does not have exactly one pair-noise key",
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
    let mut rng = ChaCha20Rng::try_from_os_rng()
        .map_err(|e| Failure::Refused(format!("the operating system's random generator failed: {e}")))?;
    let keys = KeyPair::generate(&mut rng);
    join(
        client,
        view,
        prepared.records.n,
        None,
        vec![wire::encode(&keys.public())],
    )
    .await?;
    let wait = Duration::from_secs(args.wait_seconds);
    let path = format!("/v1/site/task?wait_ms={}", wait.as_millis());
    let mut sent: Option<(u32, CapeReleaseRequest)> = None;
    let mut resends = 0;
    let mut last_wait: Option<String> = None;
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
                stages,
                peers,
                aggregator_seed,
                noise,
                len,
            } => {
                last_wait = None;
                let stage_path = format!("/v1/site/stages/{stage}/release");
                if let Some((done, request)) = &sent {
                    if *done != stage {
                        return Err(violation(format!(
                            "the server asked for stage {stage} after stage {done}"
                        )));
                    }
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
                let d = view.n_features;
                if (stage, stages) != (1, 1) || len != d * (d + 1) / 2 {
                    return Err(violation(format!(
                        "stage {stage}/{stages} with {len} values does not fit a cape_pca study of {d} features"
                    )));
                }
                check_noise(view, &noise, peers.len() + 1).map_err(|e| {
                    Failure::Refused(format!("refusing the coordinator's noise: {e}; nothing was sent"))
                })?;
                let seeds = pair_seeds(view, &keys, &peers, stage).map_err(violation)?;
                let aggregator_seed: Seed = wire::decode(&aggregator_seed)
                    .ok()
                    .and_then(|bytes| bytes.try_into().ok())
                    .ok_or_else(|| violation("the aggregator seed is not 32 bytes of base64"))?;
                charge_ledger(args, store, budget, prepared).await?;
                let statistic = site_statistic(&prepared.records.xt);
                let release = {
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
                };
                let request = CapeReleaseRequest {
                    values: wire::f64s_to_b64(&release),
                };
                client.post(&stage_path, &request).await?;
                progress(&format!(
                    "release sent ({} values; correlated with {} peers; own noise sd {:.4e})",
                    len,
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
