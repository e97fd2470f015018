//! Simulate mode: the live protocol run in process over S shards of a records dataset
//! (docs/design/algorithms.md, "Distributed algorithms"). The same [`SiteSession`],
//! [`Aggregator`], [`Rounds`] and [`PowerState`] as a live study, with the network replaced by
//! function calls, for evaluation and tests. Dropouts are scripted: a site listed in the
//! configuration sends nothing from its round on.
//!
//! **Which record goes to which shard** ([`assign_shards`]): the shard named by SHA-256 of a
//! fresh per-job random key and the record's own values. The assignment of a record depends on
//! that record and the key only, so adding, removing or replacing one record changes the
//! membership of the shards it leaves or enters and no other: every survivor sum Σ_{s∈U} A_s·X
//! changes by xxᵀX, −yyᵀX or (when x and y land in the same surviving shard) (xxᵀ − yyᵀ)X, each
//! within the relation's Δ. Contiguous blocks by record index would not do under `add_remove`:
//! one added record shifts every later boundary, moving records between shards, and with a
//! scripted dropout a shard's records leave the survivor sum. Shards may be empty, and nothing
//! (error, outcome) depends on their sizes: a site clamps its product instead of refusing
//! ([`crate::algorithms::federated_power::site_contribution`]).

use rand::RngCore;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::state::{FederationReport, PowerState};
use crate::algorithms::federated_power::{FederatedPowerConfig, site_contribution};
use crate::algorithms::{Output, RunEnv, RunError};
use crate::dataset::Neighbours;
use crate::federation::messages::{Participant, ShareBox};
use crate::federation::rounds::{Phase, Rounds};
use crate::federation::secagg::{Aggregator, GraphSpec, SiteSession};
use crate::linalg::{Matrix, Records, gram_t_times};

/// A finished simulation: the basis, the per-round report, every released sum and the shard of
/// every record (for audits).
pub struct SimulatedRun {
    pub output: Output,
    pub report: FederationReport,
    pub releases: Vec<Matrix>,
    /// The shard (0-based site) of each record, in record order.
    pub assignment: Vec<u8>,
}

/// Bytes of feature data gathered per block when the shards' products are computed.
const BLOCK_BYTES: usize = 8 << 20;

/// The shard of one record: the first 8 bytes of SHA-256(`key` ‖ the record's values as
/// little-endian f64 bits), modulo `sites` (the bias of a 64-bit value modulo ≤ 64 is below
/// 2^-57). A function of the record and the key only.
pub fn shard_of(record: &[f64], key: &[u8; 32], sites: usize) -> u8 {
    let mut hash = Sha256::new();
    hash.update(b"privpca federated_power shard v1");
    hash.update(key);
    for v in record {
        hash.update(v.to_le_bytes());
    }
    let digest = hash.finalize();
    let mut word = [0u8; 8];
    word.copy_from_slice(&digest[..8]);
    (u64::from_le_bytes(word) % sites.max(1) as u64) as u8
}

/// The shard of every record of `xt` (d×n) under `key` ([`shard_of`]).
pub fn assign_shards(xt: Records<'_>, key: &[u8; 32], sites: usize) -> Vec<u8> {
    let d = xt.nrows();
    if d == 0 {
        return vec![0; xt.ncols()];
    }
    xt.as_slice()
        .chunks_exact(d)
        .map(|r| shard_of(r, key, sites))
        .collect()
}

/// A_s·X for every shard s in one pass over the records: blocks of records are gathered per
/// shard and multiplied ([`gram_t_times`]), so memory stays at one block beyond the data.
pub fn shard_products(xt: Records<'_>, assignment: &[u8], x: &Matrix, sites: usize) -> Vec<Matrix> {
    let (d, n) = (xt.nrows(), xt.ncols());
    let mut products = vec![Matrix::zeros(d, x.ncols()); sites];
    let block = (BLOCK_BYTES / (8 * d.max(1))).max(1);
    let mut gathered: Vec<Vec<f64>> = vec![Vec::new(); sites];
    let mut start = 0;
    while start < n {
        let len = block.min(n - start);
        let part = xt.block(start, len);
        for g in &mut gathered {
            g.clear();
        }
        for (j, record) in part.as_slice().chunks_exact(d.max(1)).enumerate() {
            gathered[assignment[start + j] as usize].extend_from_slice(record);
        }
        for (product, g) in products.iter_mut().zip(&gathered) {
            if !g.is_empty() {
                let records = Records::new(g, d, g.len() / d);
                *product += gram_t_times(records, x);
            }
        }
        part.release();
        start += len;
    }
    products
}

fn failed(e: impl std::fmt::Display) -> RunError {
    RunError::Failed(e.to_string())
}

/// The SecAgg+ graph of a `sparse` run: a fresh public seed from the job's generator, and the
/// k and t the configuration was priced with (checked to be the ones the rates give).
fn graph_spec(config: &FederatedPowerConfig, rng: &mut dyn RngCore) -> Result<Option<GraphSpec>, RunError> {
    let Some(plus) = config.secagg_plus else {
        return Ok(None);
    };
    let mut seed = [0u8; 32];
    rng.fill_bytes(&mut seed);
    let spec = GraphSpec {
        seed,
        corruption_rate: plus.corruption_rate,
        dropout_rate: plus.dropout_rate,
        degree: plus.degree,
        threshold: plus.threshold,
    };
    spec.check(config.sites).map_err(failed)?;
    Ok(Some(spec))
}

/// Key setup: every site makes its keys; all of them join; boxes are routed to their recipients
/// (every participant on the complete graph, graph neighbours under SecAgg+).
fn setup(
    study: Uuid,
    config: &FederatedPowerConfig,
    spec: Option<&GraphSpec>,
    rng: &mut dyn RngCore,
) -> Result<(Vec<SiteSession>, Vec<Participant>), RunError> {
    let mut sessions: Vec<SiteSession> = (1..=config.sites)
        .map(|i| SiteSession::new(study, i, config.iterations, rng))
        .collect();
    let participants: Vec<Participant> = sessions
        .iter()
        .zip(1..)
        .map(|(s, i)| Participant {
            index: i,
            name: format!("site-{i}"),
            encryption_public_key: s.encryption_public_key(),
            mask_public_keys: s.mask_public_keys(),
            // In process: nothing is signed (`Rounds::close_confirm_in_process`).
            signing_public_key: String::new(),
            seed_commitment: String::new(),
        })
        .collect();
    let mut inboxes: Vec<Vec<ShareBox>> = vec![Vec::new(); sessions.len()];
    for session in &mut sessions {
        let boxes = match spec {
            None => session.share_boxes(&participants, config.threshold, rng),
            Some(spec) => session.share_boxes_sparse(&participants, config.threshold, spec, rng),
        };
        for b in boxes.map_err(failed)? {
            let to = b.to as usize;
            if !(to >= 1 && to <= inboxes.len()) {
                return Err(failed("a share box is addressed to an unknown site"));
            }
            inboxes[to - 1].push(b);
        }
    }
    for (session, inbox) in sessions.iter_mut().zip(&inboxes) {
        session.receive_inbox(inbox).map_err(failed)?;
    }
    Ok((sessions, participants))
}

/// Runs `config` over the records `xt` (d×n, clipped), split into `config.sites` shards.
pub fn run<'a>(
    xt: impl Into<Records<'a>>,
    config: &FederatedPowerConfig,
    neighbours: &Neighbours,
    env: &mut RunEnv<'_>,
) -> Result<SimulatedRun, RunError> {
    let xt = xt.into();
    if config.clip.is_some() {
        // A job clips centrally, before the run (the service holds every shard); the clip's
        // rounds are a live study's.
        return Err(failed("a simulated federation runs no clip rounds"));
    }
    let d = xt.nrows();
    let sites = config.sites as usize;
    let mut key = [0u8; 32];
    env.rng().fill_bytes(&mut key);
    let assignment = assign_shards(xt, &key, sites);
    let mut study_bytes = [0u8; 16];
    env.rng().fill_bytes(&mut study_bytes);
    let study = Uuid::from_bytes(study_bytes);
    let spec = graph_spec(config, env.rng())?;
    let (mut sessions, participants) = setup(study, config, spec.as_ref(), env.rng())?;
    let aggregator = match &spec {
        None => Aggregator::new(study, config.threshold, &participants, config.iterations),
        Some(spec) => Aggregator::new_sparse(study, config.threshold, &participants, config.iterations, spec),
    }
    .map_err(failed)?;
    let mut power = PowerState::new(config.clone(), d, None, env.rng())?;
    let roster = (1..=config.sites).collect();
    let mut rounds = Rounds::new(
        aggregator,
        config.threshold,
        config.iterations,
        power.len(),
        roster,
    );
    let mut releases = Vec::with_capacity(config.iterations as usize);
    for round in 1..=config.iterations {
        let roster = rounds.roster().to_vec();
        let products = shard_products(xt, &assignment, power.iterate(), sites);
        let round_inputs = RoundInputs {
            round,
            roster: &roster,
            iterate: power.iterate(),
            products,
        };
        submit_contributions(
            round_inputs,
            (config, neighbours),
            env,
            &mut sessions,
            &mut rounds,
        )?;
        rounds.close_collect().map_err(failed)?;
        rounds.close_confirm_in_process().map_err(failed)?;
        let Phase::Unmask { survivors, dropped } = rounds.phase().clone() else {
            return Err(failed("the round did not move to unmasking"));
        };
        for &site in &survivors {
            let i = site as usize - 1;
            let answer = sessions[i]
                .unmask_response(round, &roster, &survivors, &dropped, config.threshold)
                .map_err(failed)?;
            rounds.submit_unmask(site, round, answer).map_err(failed)?;
        }
        let sum = rounds.finish_round().map_err(failed)?;
        // Jobs centre centrally, before the run: no centre's round here.
        power.absorb(&sum, None)?;
        if let Some(y) = power.last_release() {
            releases.push(y.clone());
        }
        env.progress(round, config.iterations)?;
    }
    Ok(SimulatedRun {
        output: power.finish()?,
        report: FederationReport::from_history(config, rounds.history()),
        releases,
        assignment,
    })
}

/// One round's inputs to the sites: the roster, the iterate and each site's product.
struct RoundInputs<'a> {
    round: u32,
    roster: &'a [u32],
    iterate: &'a Matrix,
    products: Vec<Matrix>,
}

/// Every site of the round's roster that has not dropped out (`config.dropouts`) encodes its
/// product with its share of the noise (`site_contribution`), masks it and submits it.
fn submit_contributions(
    inputs: RoundInputs<'_>,
    (config, neighbours): (&FederatedPowerConfig, &Neighbours),
    env: &mut RunEnv<'_>,
    sessions: &mut [SiteSession],
    rounds: &mut Rounds,
) -> Result<(), RunError> {
    let RoundInputs {
        round,
        roster,
        iterate,
        products,
    } = inputs;
    let mut products: Vec<Option<Matrix>> = products.into_iter().map(Some).collect();
    for &site in roster {
        let gone = config.dropouts.iter().any(|o| o.site == site && o.round <= round);
        if gone {
            continue;
        }
        let i = site as usize - 1;
        let product = products[i]
            .take()
            .ok_or_else(|| failed("a site contributed twice"))?;
        let encoded = site_contribution(iterate, config, neighbours, env, |_| product)?;
        let masked = sessions[i].mask(round, roster, &encoded).map_err(failed)?;
        rounds
            .submit(site, round, masked, String::new())
            .map_err(failed)?;
    }
    Ok(())
}
