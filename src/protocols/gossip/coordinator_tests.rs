//! The coordinator of a gossip study relays exactly what the agents post: agents driven through
//! its tasks finish with the simulation's basis; a joining agent with another n is refused;
//! repeats and wrong exchanges are refused; a silent agent fails the study at the deadline.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::json;
use uuid::Uuid;

use super::*;
use crate::algorithms::gossip::agent::Agent;
use crate::algorithms::gossip::simulate::simulate;
use crate::algorithms::testing::{RO, ctx, spiked_records, target, with_audited_env};
use crate::algorithms::{DataInput, RunEnv};
use crate::federation::messages::JoinRequest;
use crate::linalg::Matrix;
use crate::protocols::{StudyAlgorithm, StudyTerms};
use crate::studies::live::Live;

const SIZES: [usize; 3] = [2, 3, 3];
pub(crate) const N: usize = 60;

pub(crate) fn plan() -> GossipPlan {
    let c = ctx(8, None, RO);
    let features: Vec<Option<usize>> = SIZES.iter().map(|&s| Some(s)).collect();
    let terms = StudyTerms {
        context: &c,
        target: &target(5.0),
        sites: 3,
        threshold: 3,
        site_features: &features,
    };
    match StudyAlgorithm::from_name("gossip_power")
        .unwrap()
        .plan(json!({"k": 1, "graph": "path", "iterations": 2}), &terms)
        .expect("plans")
        .protocol
    {
        Protocol::Gossip(plan) => *plan,
        other => panic!("not a gossip plan: {other:?}"),
    }
}

pub(crate) fn study(plan: &GossipPlan) -> Live {
    let names: BTreeMap<u32, String> = (1..=3).map(|i| (i, format!("a{i}"))).collect();
    Live::new(
        Uuid::new_v4(),
        Protocol::Gossip(Box::new(plan.clone())),
        3,
        8,
        names,
        Instant::now() + Duration::from_secs(60),
        Duration::from_secs(30),
    )
}

pub(crate) fn join(n: u64) -> JoinRequest {
    JoinRequest {
        n_samples: Some(n),
        encryption_public_key: None,
        mask_public_keys: Vec::new(),
        signing_public_key: Some(crate::federation::transcript::SiteSigner::from_seed([1; 32]).public_key()),
        seed_commitment: None,
    }
}

/// The records of the tests: 8 features of N records, a spiked spectrum.
pub(crate) fn records() -> Matrix {
    spiked_records(9, 8, N, &[5.0, 2.0], 0.3, 2.0)
}

/// The simulated job's basis on `xt` (one shared generator in agent order, seed 4).
pub(crate) fn simulated_basis(plan: &GossipPlan, xt: &Matrix) -> Matrix {
    let (simulated, _) = with_audited_env(4, |env| {
        simulate(
            DataInput::Records { xt: xt.into() },
            &plan.config.gossip,
            &plan.context,
            env,
        )
    });
    simulated.expect("simulates").output.basis
}

/// Drives one agent per site through `live`'s tasks until the study ends, from one shared
/// generator in agent order (seed 4, as [`simulated_basis`] draws), checking that a repeat and
/// a post for the next exchange are refused; `between` is called after every post and every
/// step of the study (a test reloads it there). The basis it succeeded with.
pub(crate) fn relay(live: &mut Live, xt: &Matrix, mut between: impl FnMut(&mut Live)) -> Matrix {
    let config = match &live.protocol {
        Protocol::Gossip(plan) => plan.config.gossip.clone(),
        other => panic!("not a gossip study: {other:?}"),
    };
    let (outcome, _) = with_audited_env(4, |env: &mut RunEnv<'_>| {
        let mut agents: Vec<Agent> = config
            .partition
            .iter()
            .enumerate()
            .map(|(i, f)| Agent::new(&config, i, xt.select_rows(f.iter()), 2.0, 8).expect("agent"))
            .collect();
        let mut effects = Vec::new();
        while !live.is_finished() {
            if let SiteTask::GossipConfirm { agents: shown } = live.task(1) {
                // The consistency round first: every agent confirms (the coordinator checks the
                // signatures' shape only; agents check each other's, protocols/gossip/site.rs).
                assert_eq!(shown.len(), agents.len());
                for site in 1..=agents.len() as u32 {
                    let signature =
                        crate::federation::transcript::SiteSigner::from_seed([1; 32]).sign(b"study");
                    live.gossip_confirm(site, 0, &signature).expect("confirmed");
                    between(live);
                }
                effects.extend(live.advance(Instant::now()));
                between(live);
                continue;
            }
            for (i, agent) in agents.iter_mut().enumerate() {
                let site = i as u32 + 1;
                let SiteTask::GossipStep { step, inputs, .. } = live.task(site) else {
                    panic!("no exchange for agent {site}: {:?}", live.task(site));
                };
                let decoded: Vec<(usize, Matrix)> = inputs
                    .iter()
                    .map(|v| {
                        let values = wire::b64_to_f64s(&v.values, v.rows * v.cols).expect("decodes");
                        (v.index as usize - 1, Matrix::from_vec(v.rows, v.cols, values))
                    })
                    .collect();
                let refs: Vec<(usize, &Matrix)> = decoded.iter().map(|(j, m)| (*j, m)).collect();
                let value = agent.advance(env, &refs).expect("advances");
                let b64 = wire::f64s_to_b64(value.as_slice());
                live.gossip_post(site, step, &b64).expect("accepted");
                between(live);
                assert!(matches!(
                    live.gossip_post(site, step, &b64),
                    Err(LiveError::AlreadyReceived(_))
                ));
                assert!(matches!(
                    live.gossip_post(site, step + 1, &b64),
                    Err(LiveError::Conflict(_))
                ));
            }
            effects.extend(live.advance(Instant::now()));
            between(live);
        }
        effects
    });
    outcome
        .iter()
        .find_map(|e| match e {
            Effect::Succeeded { output, .. } => Some(output.basis.clone()),
            _ => None,
        })
        .expect("succeeded")
}

/// Every agent joined (one with another n refused first) and the first exchange open.
pub(crate) fn started(plan: &GossipPlan) -> Live {
    let mut live = study(plan);
    assert!(live.check_gossip_n(Some(N as i64)).is_ok());
    live.join(1, join(N as u64)).expect("joins");
    assert!(
        matches!(
            live.check_gossip_n(Some(N as i64 + 1)),
            Err(LiveError::Invalid(_))
        ),
        "another n must be refused"
    );
    live.join(2, join(N as u64)).expect("joins");
    live.join(3, join(N as u64)).expect("joins");
    let effects = live.advance(Instant::now());
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::Charge { roster, .. } if roster == &[1, 2, 3]))
    );
    live
}

/// Every agent confirms the study's transcript and exchange 1 opens; before that, no value is
/// taken.
pub(crate) fn confirm_all(live: &mut Live) {
    let signature = crate::federation::transcript::SiteSigner::from_seed([1; 32]).sign(b"study");
    assert!(matches!(live.task(1), SiteTask::GossipConfirm { .. }));
    assert!(matches!(
        live.gossip_post(1, 1, "AAAA"),
        Err(LiveError::Conflict(_) | LiveError::Invalid(_))
    ));
    for site in 1..=3 {
        live.gossip_confirm(site, 0, &signature).expect("confirmed");
    }
    assert!(matches!(
        live.gossip_confirm(1, 0, &signature),
        Err(LiveError::AlreadyReceived(_))
    ));
    live.advance(Instant::now());
    assert!(matches!(live.task(1), SiteTask::GossipStep { step: 1, .. }));
}

#[test]
fn relayed_agents_finish_with_the_simulated_basis() {
    let plan = plan();
    let xt = records();
    let mut live = started(&plan);
    let basis = relay(&mut live, &xt, |_| {});
    assert_eq!(basis, simulated_basis(&plan, &xt));
}

#[test]
fn a_silent_agent_fails_the_study_at_the_deadline_and_a_wrong_length_is_refused() {
    let plan = plan();
    let mut live = study(&plan);
    for site in 1..=3 {
        live.join(site, join(N as u64)).expect("joins");
    }
    live.advance(Instant::now());
    confirm_all(&mut live);
    let p = plan.config.gossip.p;
    let gram = wire::f64s_to_b64(&vec![0.5; p * p]);
    assert!(matches!(
        live.gossip_post(1, 1, &wire::f64s_to_b64(&[1.0; 3])),
        Err(LiveError::Invalid(_))
    ));
    live.gossip_post(1, 1, &gram).expect("accepted");
    live.gossip_post(2, 1, &gram).expect("accepted");
    assert!(live.advance(Instant::now()).is_empty(), "closed without agent 3");
    let effects = live.advance(live.deadline());
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::Failed { reason, .. } if reason.contains("[3]"))),
        "{effects:?}"
    );
    assert!(live.is_finished());
}

#[test]
fn a_centred_gossip_study_spends_its_centre_share_first() {
    let c = ctx(8, None, RO);
    let blocks = SIZES.to_vec();
    let params = json!({"k": 1, "graph": "path", "iterations": 2, "center": "private"});
    let config = GossipStudyConfig::derive(params.clone(), blocks.clone(), &c, &target(5.0)).unwrap();
    let center = config.center.as_ref().expect("a private centre");
    assert!((center.cost().rho - 0.5).abs() < 1e-12, "10 % of ρ = 5");
    let total = config.cost();
    assert!(total <= 5.0 && total > 4.999, "{total}");
    // The parameters are kept as given: a site derives the same configuration from them.
    assert_eq!(config.params, params);
    let again = GossipStudyConfig::derive(params, blocks.clone(), &c, &target(5.0)).unwrap();
    assert_eq!(again, config);
    // Without a centre nothing changes from before; a share that leaves nothing is refused.
    let plain = GossipStudyConfig::derive(
        json!({"k": 1, "graph": "path", "iterations": 2}),
        blocks.clone(),
        &c,
        &target(5.0),
    )
    .unwrap();
    assert!(plain.center.is_none());
    let bad = json!({"k": 1, "center": "private", "center_share": 1.5});
    let err = GossipStudyConfig::derive(bad, blocks, &c, &target(5.0)).unwrap_err();
    assert!(err.to_string().contains("center_share"), "{err}");
}

#[test]
fn a_centred_agent_draws_its_block_mean_once() {
    let c = ctx(8, None, RO);
    let params = json!({"k": 1, "graph": "path", "iterations": 2, "center": "private"});
    let config = GossipStudyConfig::derive(params, SIZES.to_vec(), &c, &target(5.0)).unwrap();
    let block = Matrix::from_fn(2, N, |i, j| 0.2 + 0.01 * ((i + j) % 7) as f64);
    let mut agent = Agent::new(&config.gossip, 0, block, 1.0, 8).unwrap();
    let center = config.center.clone().unwrap();
    let (done, audit) = with_audited_env(3, |env| agent.centre(&center, env));
    assert!(done.is_ok(), "{done:?}");
    assert_eq!(audit.draws.len(), 1, "one draw: the block's noisy sum");
    assert_eq!(
        audit.draws[0].label,
        crate::algorithms::gossip::center::SUM_RELEASE
    );
}
