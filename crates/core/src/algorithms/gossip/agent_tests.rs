//! Tests of the per-agent steps: agents driven one exchange at a time, their values passed as
//! a live coordinator relays them (base64 on the wire), give bit for bit the simulation's
//! result on the same seed; an agent refuses values from non-neighbours or of the wrong shape;
//! and the study configuration takes its partition from the sites' blocks.

use serde_json::json;

use super::*;
use crate::algorithms::DataInput;
use crate::algorithms::gossip::simulate::simulate;
use crate::algorithms::testing::{RO, ctx, spiked_records, target, with_audited_env};
use crate::federation::wire;

fn params(value: serde_json::Value) -> GossipPowerParams {
    serde_json::from_value(value).expect("valid params")
}

/// Runs m agents exchange by exchange, every value through the wire encoding, as a live study.
fn relayed(xt: &Matrix, config: &GossipPowerConfig, env: &mut RunEnv<'_>) -> Output {
    let d = xt.nrows();
    let mut agents: Vec<Agent> = config
        .partition
        .iter()
        .enumerate()
        .map(|(i, f)| Agent::new(config, i, xt.select_rows(f.iter()), 2.0, d).expect("agent"))
        .collect();
    let mut wire_posts: Vec<(String, usize, usize)> = Vec::new();
    for _ in schedule(config) {
        let decoded: Vec<Matrix> = wire_posts
            .iter()
            .map(|(b64, r, c)| Matrix::from_vec(*r, *c, wire::b64_to_f64s(b64, r * c).expect("decodes")))
            .collect();
        let mut next = Vec::new();
        for agent in &mut agents {
            let inputs: Vec<(usize, &Matrix)> = if decoded.is_empty() {
                Vec::new()
            } else {
                agent.neighbours().into_iter().map(|j| (j, &decoded[j])).collect()
            };
            let value = agent.advance(env, &inputs).expect("advances");
            next.push((wire::f64s_to_b64(value.as_slice()), value.nrows(), value.ncols()));
        }
        wire_posts = next;
    }
    let segments: Vec<Matrix> = wire_posts
        .iter()
        .map(|(b64, r, c)| Matrix::from_vec(*r, *c, wire::b64_to_f64s(b64, r * c).expect("decodes")))
        .collect();
    assemble(&config.partition, &segments, d, config.k).expect("assembles")
}

#[test]
fn relayed_agents_equal_the_simulation_bit_for_bit() {
    for (graph, sizes) in [
        (json!("ring"), vec![3, 3, 3, 3]),
        (json!("path"), vec![2, 5, 1]),
        (json!("complete"), vec![4, 2, 3, 3]),
    ] {
        let d: usize = sizes.iter().sum();
        let c = ctx(d, None, RO);
        let config = configure_blocks(params(json!({"k": 2, "graph": graph})), &sizes, &c, &target(5.0))
            .expect("configures");
        let xt = spiked_records(5, d, 400, &[9.0, 6.0, 4.0], 0.3, 2.0);
        let (simulated, _) = with_audited_env(17, |env| {
            simulate(DataInput::Records { xt: (&xt).into() }, &config, &c, env)
        });
        let (live, _) = with_audited_env(17, |env| relayed(&xt, &config, env));
        assert_eq!(
            simulated.expect("simulates").output.basis,
            live.basis,
            "{graph}: live and simulated differ"
        );
    }
}

#[test]
fn the_schedule_has_the_documented_exchanges() {
    let c = ctx(12, None, RO);
    let config = configure_blocks(
        params(json!({"k": 2, "gossip_rounds": 5, "iterations": 3})),
        &[3, 3, 3, 3],
        &c,
        &target(5.0),
    )
    .expect("configures");
    let plan = schedule(&config);
    // K Grams, then per iteration K messages and m − 1 maxima, K Grams between iterations,
    // one segment.
    assert_eq!(plan.len(), 5 + 3 * (5 + 3) + 2 * 5 + 1);
    assert_eq!(plan.iter().filter(|e| **e == Exchange::Message).count(), 15);
    assert_eq!(plan.last(), Some(&Exchange::Segment));
}

#[test]
fn an_agent_refuses_values_it_should_not_mix() {
    let c = ctx(12, None, RO);
    let config =
        configure_blocks(params(json!({"k": 1})), &[3, 3, 3, 3], &c, &target(5.0)).expect("configures");
    let xt = spiked_records(3, 12, 50, &[4.0], 0.3, 2.0);
    let (_, _) = with_audited_env(1, |env| {
        let mut agent =
            Agent::new(&config, 0, xt.select_rows([0usize, 1, 2].iter()), 2.0, 12).expect("agent");
        assert_eq!(agent.neighbours(), vec![1, 3], "ring neighbours");
        let first = agent.advance(env, &[]).expect("first");
        let p = config.p;
        assert_eq!(first.shape(), (p, p));
        let good = Matrix::identity(p, p);
        let wrong = Matrix::identity(p + 1, p + 1);
        let nan = Matrix::from_element(p, p, f64::NAN);
        let bad: [Vec<(usize, &Matrix)>; 4] = [
            vec![(1, &good)],
            vec![(1, &good), (2, &good)],
            vec![(1, &good), (3, &wrong)],
            vec![(1, &nan), (3, &good)],
        ];
        for inputs in &bad {
            assert!(agent.clone().advance(env, inputs).is_err(), "accepted {inputs:?}");
        }
        agent
            .advance(env, &[(1, &good), (3, &good)])
            .expect("neighbours' Grams");
    });
    // No value before the agent has its block: a block of the wrong width is refused.
    assert!(Agent::new(&config, 1, xt.select_rows([0usize, 1].iter()), 2.0, 12).is_err());
}

#[test]
fn the_sites_blocks_fix_the_partition() {
    let c = ctx(12, None, RO);
    let config = configure_blocks(params(json!({"k": 2})), &[5, 3, 4], &c, &target(5.0)).expect("configures");
    assert_eq!(config.partition, blocks_partition(&[5, 3, 4]));
    assert_eq!(config.partition[1], vec![5, 6, 7]);
    let refused =
        |p: serde_json::Value, sizes: &[usize]| match configure_blocks(params(p), sizes, &c, &target(5.0)) {
            Err(ConfigError::Invalid { field, .. }) => field,
            other => panic!("expected a refusal, got {other:?}"),
        };
    assert_eq!(refused(json!({"k": 2}), &[5, 3, 3]), "sites");
    assert_eq!(refused(json!({"k": 2}), &[12, 0]), "sites[1].n_features");
    assert_eq!(refused(json!({"k": 2, "agents": 4}), &[6, 6]), "params.agents");
    assert_eq!(
        refused(
            json!({"k": 2, "partition": [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]]}),
            &[6, 6]
        ),
        "params.partition"
    );
    assert_eq!(
        refused(
            json!({"k": 2, "graph": {"matrix": [[1.0, 0.0], [0.0, 1.0]]}}),
            &[6, 6]
        ),
        "params.graph"
    );
}

/// After the spectral clip the segment's spectral norm is at most ν even as computed again
/// (the margin covers the rounding of the computed norm and of the scaling).
#[test]
fn the_spectral_clip_leaves_no_rounding_excess() {
    let mut rng = crate::algorithms::testing::seeded(34);
    let mut worst: f64 = 0.0;
    for trial in 0..3000 {
        let (rows, cols) = (3 + trial % 7, 1 + trial % 4);
        let nu = 0.3 + (trial % 11) as f64 / 7.0;
        let mut v = Matrix::from_fn(rows, cols, |_, _| {
            rand_distr::Distribution::<f64>::sample(&rand_distr::StandardNormal, &mut rng)
        });
        v *= 3.0 * nu;
        super::clip_spectral(&mut v, nu).unwrap();
        let top = crate::linalg::try_sym_eig(&crate::linalg::matmul_tn(&v, &v))
            .unwrap()
            .values[0];
        worst = worst.max(top.sqrt() / nu);
    }
    assert!(worst <= 1.0, "spectral norm {worst}·ν after the clip");
}
