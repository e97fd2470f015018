//! A restarted agent stands where it stood: the exchanges kept in its ledger, computed again
//! from their kept inputs with the same session seed, give the kept values bit for bit and
//! leave the agent computing the next exchange as it would have; a kept value that does not
//! replay (another seed, a changed value, a gap) is refused.

use super::*;
use crate::protocols::gossip::coordinator::tests::{plan, records};

/// Three agents of the tests' plan relayed by hand for `steps` exchanges, each with its own
/// seed; every agent's ledger rows (exchange, kept JSON) as `follow` keeps them.
fn kept_rows(steps: u32) -> Vec<Vec<(u32, String)>> {
    let plan = plan();
    let config = plan.config.gossip.clone();
    let xt = records();
    let mut agents = agents(&config, &xt);
    let mut rows = vec![Vec::new(); agents.len()];
    let mut previous: Vec<Matrix> = Vec::new();
    for step in 1..=steps {
        let mut values = Vec::new();
        for (i, agent) in agents.iter_mut().enumerate() {
            let inputs: Vec<GossipValue> = if step == 1 {
                Vec::new()
            } else {
                agent
                    .neighbours()
                    .into_iter()
                    .map(|j| GossipValue {
                        index: j as u32 + 1,
                        values: wire::f64s_to_b64(previous[j].as_slice()),
                        rows: previous[j].nrows(),
                        cols: previous[j].ncols(),
                    })
                    .collect()
            };
            let value = exchange(agent, seed(i), step, &inputs).expect("advances");
            let kept = KeptExchange {
                inputs,
                request: GossipPostRequest {
                    values: wire::f64s_to_b64(value.as_slice()),
                },
            };
            rows[i].push((step, serde_json::to_string(&kept).expect("serialise")));
            values.push(value);
        }
        previous = values;
    }
    rows
}

fn agents(config: &crate::algorithms::gossip::power::GossipPowerConfig, xt: &Matrix) -> Vec<Agent> {
    config
        .partition
        .iter()
        .enumerate()
        .map(|(i, f)| Agent::new(config, i, xt.select_rows(f.iter()), 2.0, 8).expect("agent"))
        .collect()
}

fn seed(agent: usize) -> [u8; 32] {
    [agent as u8 + 1; 32]
}

/// Agent 0 started afresh, as a restarted site builds it.
fn fresh_agent() -> Agent {
    let plan = plan();
    agents(&plan.config.gossip, &records()).swap_remove(0)
}

#[test]
fn a_restarted_agent_replays_its_kept_exchanges_and_goes_on_as_before() {
    let rows = kept_rows(12);
    let mut agent = fresh_agent();
    let (step, request) = replay(&mut agent, seed(0), &rows[0][..8])
        .expect("replays")
        .expect("something was sent");
    assert_eq!((step, agent.step()), (8, 8));
    let eighth: KeptExchange = serde_json::from_str(&rows[0][7].1).unwrap();
    assert_eq!(request, eighth.request);
    // The next exchanges, computed live after the replay, are the ones the agent computed
    // without stopping.
    for (step, text) in &rows[0][8..] {
        let kept: KeptExchange = serde_json::from_str(text).unwrap();
        let value = exchange(&mut agent, seed(0), *step, &kept.inputs).expect("advances");
        assert_eq!(
            wire::f64s_to_b64(value.as_slice()),
            kept.request.values,
            "exchange {step}"
        );
    }
    assert_eq!(
        replay(&mut fresh_agent(), seed(0), &[]).expect("nothing kept"),
        None
    );
}

#[test]
fn kept_exchanges_that_do_not_replay_are_refused() {
    let rows = kept_rows(6);
    // Another seed draws other initial segments: the kept first value does not come out.
    assert!(matches!(
        replay(&mut fresh_agent(), seed(1), &rows[0]),
        Err(Failure::Refused(_))
    ));
    // A changed value.
    let mut changed = rows[0].clone();
    let mut kept: KeptExchange = serde_json::from_str(&changed[3].1).unwrap();
    let mut bytes = wire::decode(&kept.request.values).unwrap();
    bytes[0] ^= 1;
    kept.request.values = wire::encode(&bytes);
    changed[3].1 = serde_json::to_string(&kept).unwrap();
    assert!(matches!(
        replay(&mut fresh_agent(), seed(0), &changed),
        Err(Failure::Refused(_))
    ));
    // A gap in the kept exchanges.
    let mut gap = rows[0].clone();
    gap.remove(2);
    assert!(replay(&mut fresh_agent(), seed(0), &gap).is_err());
    // Different exchanges draw from different streams.
    use rand::RngCore;
    assert_ne!(
        exchange_rng(seed(0), 1).next_u64(),
        exchange_rng(seed(0), 2).next_u64()
    );
}
