//! Simulate mode: the live protocol run in process over S contiguous shards of a records
//! dataset (docs/design/algorithms.md, "Distributed algorithms"). The same [`SiteSession`], [`Aggregator`],
//! [`Rounds`] and [`PowerState`] as a live study, with the network replaced by function calls,
//! for evaluation and tests. Dropouts are scripted: a site listed in the configuration sends
//! nothing from its round on.

use rand::RngCore;
use uuid::Uuid;

use super::messages::{Participant, ShareBox};
use super::power::{FederationReport, PowerState};
use super::rounds::{Phase, Rounds};
use super::secagg::{Aggregator, SiteSession};
use crate::algorithms::federated_power::{FederatedPowerConfig, site_update};
use crate::algorithms::{Output, RunEnv, RunError};
use crate::dataset::Neighbours;
use crate::linalg::{Matrix, Records};

use super::fixed_point::FixedPoint;

/// A finished simulation: the basis, the per-round report, and every released sum (for audits).
pub struct SimulatedRun {
    pub output: Output,
    pub report: FederationReport,
    pub releases: Vec<Matrix>,
}

/// Column ranges of `n` records split into `sites` contiguous shards of near-equal size.
pub fn shard_ranges(n: usize, sites: usize) -> Vec<std::ops::Range<usize>> {
    (0..sites)
        .map(|s| (s * n / sites)..((s + 1) * n / sites))
        .collect()
}

fn failed(e: impl std::fmt::Display) -> RunError {
    RunError::Failed(e.to_string())
}

/// Key setup: every site makes its keys; all of them join; boxes are routed to their recipients.
fn setup(
    study: Uuid,
    config: &FederatedPowerConfig,
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
        })
        .collect();
    let mut inboxes: Vec<Vec<ShareBox>> = vec![Vec::new(); sessions.len()];
    for session in &mut sessions {
        for b in session
            .share_boxes(&participants, config.threshold, rng)
            .map_err(failed)?
        {
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
    let (d, n) = (xt.nrows(), xt.ncols());
    let sites = config.sites as usize;
    if n < sites {
        return Err(failed(format!("cannot split {n} records into {sites} sites")));
    }
    let shards: Vec<Records<'_>> = shard_ranges(n, sites)
        .into_iter()
        .map(|r| xt.block(r.start, r.len()))
        .collect();
    if shards.iter().any(|s| s.ncols() as u64 > config.max_site_samples) {
        return Err(failed("a shard holds more records than max_site_samples"));
    }
    let mut study_bytes = [0u8; 16];
    env.rng().fill_bytes(&mut study_bytes);
    let study = Uuid::from_bytes(study_bytes);
    let (mut sessions, participants) = setup(study, config, env.rng())?;
    let aggregator =
        Aggregator::new(study, config.threshold, &participants, config.iterations).map_err(failed)?;
    let mut power = PowerState::new(config.clone(), d, env.rng())?;
    let roster = (1..=config.sites).collect();
    let mut rounds = Rounds::new(
        aggregator,
        config.threshold,
        config.iterations,
        power.len(),
        roster,
    );
    let fixed = FixedPoint::new(config.fraction_bits).map_err(failed)?;
    let bound = config.entry_bound(neighbours);
    let mut releases = Vec::with_capacity(config.iterations as usize);
    for round in 1..=config.iterations {
        let roster = rounds.roster().to_vec();
        for &site in &roster {
            let gone = config.dropouts.iter().any(|o| o.site == site && o.round <= round);
            if gone {
                continue;
            }
            let i = site as usize - 1;
            let y = site_update(shards[i], power.iterate(), config, neighbours, env)?;
            let encoded = fixed.encode_all(y.as_slice(), bound).map_err(failed)?;
            let masked = sessions[i].mask(round, &roster, &encoded).map_err(failed)?;
            rounds.submit(site, round, masked).map_err(failed)?;
        }
        rounds.close_collect().map_err(failed)?;
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
        power.absorb(&sum)?;
        if let Some(y) = power.last_release() {
            releases.push(y.clone());
        }
        env.progress(round, config.iterations)?;
    }
    Ok(SimulatedRun {
        output: power.finish()?,
        report: FederationReport::from_history(config, rounds.history()),
        releases,
    })
}
