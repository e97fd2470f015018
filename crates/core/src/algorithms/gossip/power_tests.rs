//! Tests of `gossip_power`: the cost formula and its calibration, validation of every parameter,
//! the output contract, utility at the defaults and as ρ grows, and the noise each release
//! actually carries (with an under-noised twin that the same check catches).

use serde_json::json;

use super::*;
use crate::algorithms::RunError;
use crate::algorithms::gossip::simulate::{Simulation, simulate};
use crate::algorithms::registry::DynAlgorithm;
use crate::algorithms::testing::{
    RO, assert_audits_catch_under_noise, assert_basis_contract, assert_invalid_fields, assert_object_errors,
    assert_replace_one_records_only, ctx, ro, run_prepared_audited, run_with_progress, spiked_records,
    target, with_audited_env,
};
use crate::algorithms::{Algorithm, DataInput, Run};
use crate::linalg::gram_t;
use crate::linalg::subspace::captured_energy;
use crate::privacy::noise::RecordingAudit;
use crate::privacy::testing::check_gaussian_scale;

fn configured(value: serde_json::Value, c: &DataContext, rho: f64) -> GossipPowerConfig {
    let p: GossipPowerParams = serde_json::from_value(value).expect("valid params");
    GossipPower
        .configure(p, c, &target(rho))
        .expect("valid configuration")
}

fn simulate_audited(
    xt: &Matrix,
    cfg: &GossipPowerConfig,
    c: &DataContext,
    seed: u64,
) -> (Simulation, RecordingAudit) {
    let (run, audit) = with_audited_env(seed, |env| {
        simulate(DataInput::Records { xt: xt.into() }, cfg, c, env)
    });
    (run.expect("simulation runs"), audit)
}

/// Easy spiked records (β = 2) and their covariance Σ = XᵀX/n.
fn easy(seed: u64, d: usize, n: usize) -> (Matrix, Matrix) {
    let xt = spiked_records(seed, d, n, &[9.0, 6.0, 4.0], 0.3, 2.0);
    let sigma = gram_t(&xt) / n as f64;
    (xt, sigma)
}

#[test]
fn cost_matches_the_formula_and_never_exceeds_the_target() {
    let c = ctx(20, Some(500), RO);
    for (rho, l, share) in [
        (5.0, 6, 0.5),
        (0.1, 1, 0.3),
        (2.0, 40, 0.9),
        (1e-3, 1000, 0.5),
        (1e6, 6, 0.5),
    ] {
        let cfg = configured(json!({"k": 2, "iterations": l, "message_share": share}), &c, rho);
        let cost = GossipPower.cost(&cfg, &c);
        assert!(
            cost.rho <= rho && cost.rho > rho * (1.0 - 1e-12),
            "ρ {rho}: {cost:?}"
        );
        assert_eq!(cost.delta, 0.0);
        // Hand-written: s_y = sqrt(L/(2φρ)), s_v = sqrt(L/(2(1−φ)ρ)), ρ = L(1/(2s_y²) + 1/(2s_v²)).
        let lf = f64::from(l);
        let s_y = (lf / (2.0 * share * rho)).sqrt();
        let s_v = (lf / (2.0 * (1.0 - share) * rho)).sqrt();
        assert!((cfg.message_multiplier - s_y).abs() <= 1e-12 * s_y);
        assert!((cfg.update_multiplier - s_v).abs() <= 1e-12 * s_v);
        let by_hand = lf * (1.0 / (2.0 * s_y * s_y) + 1.0 / (2.0 * s_v * s_v));
        assert!(
            (cost.rho - by_hand).abs() <= 1e-12 * rho,
            "{} vs {by_hand}",
            cost.rho
        );
        // The cost does not depend on the data's bounds, the graph or the partition.
        let other = configured(
            json!({"k": 2, "iterations": l, "message_share": share, "agents": 5, "graph": "star"}),
            &ctx(20, Some(500), ro(9.0, 40.0)),
            rho,
        );
        assert_eq!(GossipPower.cost(&other, &c).rho, cost.rho);
    }
    assert_eq!(message_sensitivity(2.0, 1.5), 6.0);
    assert_eq!(update_sensitivity(2.0, 3.0, 4.0), 3.0);
}

#[test]
fn defaults_are_filled_in() {
    let c = ctx(10, Some(100), RO);
    let cfg = configured(json!({"k": 2}), &c, 1.0);
    assert_eq!(
        (cfg.p, cfg.iterations, cfg.clip_norm),
        (4, DEFAULT_ITERATIONS, 1.0)
    );
    assert_eq!(
        cfg.partition,
        vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7], vec![8, 9]]
    );
    // Ring of 4 (SLEM 1/3): (1/3)^9 ≤ 1e-4 < (1/3)^8.
    assert_eq!(cfg.gossip_rounds, 9);
    assert!((cfg.mixing[0][1] - 1.0 / 3.0).abs() < 1e-15 && cfg.mixing[0][2] == 0.0);
    let expected_tau = CONSENSUS_CLIP_FACTOR * (2.0 + (16.0_f64).sqrt() * cfg.message_multiplier * 4.0);
    assert!((cfg.consensus_clip - expected_tau).abs() < 1e-12 * expected_tau);
    // d = 3: three agents by default; a partition sets m.
    let small = configured(json!({"k": 1}), &ctx(3, Some(100), RO), 1.0);
    assert_eq!(small.partition.len(), 3);
    let given = configured(
        json!({"k": 1, "partition": [[4, 0], [1, 2, 3, 5, 6, 7, 8, 9]]}),
        &c,
        1.0,
    );
    assert_eq!(given.partition.len(), 2);
    assert_eq!(
        configured(json!({"k": 1, "graph": "complete"}), &c, 1.0).gossip_rounds,
        1
    );
}

#[test]
fn bad_parameters_are_refused_with_their_field() {
    let c = ctx(6, Some(200), RO);
    let t = target(1.0);
    let sym_rows = |rows: serde_json::Value| json!({"k": 1, "agents": 3, "graph": {"matrix": rows}});
    assert_invalid_fields(
        &GossipPower,
        &c,
        &t,
        [
            (json!({"k": 1, "agents": 7}), "params.agents"),
            (json!({"k": 1, "agents": 1}), "params.agents"),
            (json!({"k": 7}), "params.k"),
            (json!({"k": 2, "p": 1}), "params.p"),
            (
                json!({"k": 1, "agents": 2, "partition": [[0, 1, 2], [3, 4]]}),
                "params.partition",
            ),
            (
                json!({"k": 1, "agents": 2, "partition": [[0, 1, 2], [2, 3, 4, 5]]}),
                "params.partition",
            ),
            (
                json!({"k": 1, "agents": 2, "partition": [[0, 1, 2], [3, 4, 5, 6]]}),
                "params.partition",
            ),
            (
                json!({"k": 1, "agents": 2, "partition": [[0, 1, 2, 3, 4, 5], []]}),
                "params.partition",
            ),
            (
                json!({"k": 1, "agents": 3, "partition": [[0, 1, 2], [3, 4, 5]]}),
                "params.partition",
            ),
            (json!({"k": 1, "graph": "torus"}), "params.graph"),
            (
                json!({"k": 1, "graph": {"erdos_renyi": {"p": 0.01, "seed": 1}}}),
                "params.graph",
            ),
            (
                json!({"k": 1, "graph": {"erdos_renyi": {"p": 1.5, "seed": 1}}}),
                "params.graph",
            ),
            (
                json!({"k": 1, "graph": {"erdos_renyi": {"p": 0.5}}}),
                "params.graph.erdos_renyi",
            ),
            // Not symmetric (rows and columns sum to 1: a directed cycle).
            (
                sym_rows(json!([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.5, 0.0, 0.5]])),
                "params.graph",
            ),
            // Symmetric, not stochastic.
            (
                sym_rows(json!([[0.5, 0.2, 0.2], [0.2, 0.5, 0.2], [0.2, 0.2, 0.5]])),
                "params.graph",
            ),
            // Negative entries.
            (
                sym_rows(json!([[1.2, -0.1, -0.1], [-0.1, 0.6, 0.5], [-0.1, 0.5, 0.6]])),
                "params.graph",
            ),
            // Disconnected: agent 2 alone.
            (
                sym_rows(json!([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])),
                "params.graph",
            ),
            // Wrong shape.
            (sym_rows(json!([[0.5, 0.5], [0.5, 0.5]])), "params.graph"),
            (json!({"k": 1, "gossip_rounds": 0}), "params.gossip_rounds"),
            (json!({"k": 1, "iterations": 0}), "params.iterations"),
            (json!({"k": 1, "iterations": 1001}), "params.iterations"),
            (json!({"k": 1, "clip_norm": 0.0}), "params.clip_norm"),
            (json!({"k": 1, "message_share": 1.0}), "params.message_share"),
            (json!({"k": 1, "consensus_clip": -1.0}), "params.consensus_clip"),
        ],
    );
    assert_object_errors(
        &GossipPower,
        &c,
        [
            (json!({"k": 1, "speed": 2}), "unknown field"),
            (json!({}), "missing field"),
        ],
    );
    // The messages name the problem.
    let message = |params: serde_json::Value| {
        GossipPower
            .prepare(params, &c, &t)
            .expect_err("refused")
            .to_string()
    };
    for (params, reason) in [
        (
            json!({"k": 1, "graph": {"erdos_renyi": {"p": 0.01, "seed": 1}}}),
            "change the seed",
        ),
        (
            json!({"k": 1, "agents": 2, "partition": [[0, 1, 2], [2, 3, 4, 5]]}),
            "exactly one agent",
        ),
        (
            sym_rows(json!([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.5, 0.0, 0.5]])),
            "symmetric",
        ),
        (
            sym_rows(json!([[0.5, 0.2, 0.2], [0.2, 0.5, 0.2], [0.2, 0.2, 0.5]])),
            "doubly stochastic",
        ),
        (
            sym_rows(json!([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])),
            "disconnected",
        ),
    ] {
        let got = message(params.clone());
        assert!(got.contains(reason), "{params}: {got}");
    }
    assert_replace_one_records_only(&GossipPower, &t);
}

#[test]
fn every_graph_gives_an_orthonormal_basis() {
    let (d, n, k) = (12, 800, 3);
    let (xt, _) = easy(3, d, n);
    let c = ctx(d, Some(n), RO);
    for params in [
        json!({"k": k}),
        json!({"k": k, "agents": 3, "graph": "path", "p": 5}),
        json!({"k": k, "agents": 5, "graph": "star", "gossip_rounds": 2}),
        json!({"k": k, "agents": 6, "graph": "complete"}),
        json!({"k": k, "agents": 6, "graph": {"erdos_renyi": {"p": 0.6, "seed": 4}}}),
        json!({"k": k, "partition": [[11, 0, 5], [1, 2, 3, 4], [6, 7, 8, 9, 10]],
               "graph": {"matrix": [[0.5, 0.25, 0.25], [0.25, 0.75, 0.0], [0.25, 0.0, 0.75]]}}),
        json!({"k": k, "iterations": 1, "clip_norm": 0.3}),
    ] {
        let cfg = configured(params.clone(), &c, 1.0);
        let (run, audit) = simulate_audited(&xt, &cfg, &c, 2);
        assert_basis_contract(&run.output.basis, d, k);
        assert_eq!(
            audit.draws.len(),
            2 * cfg.partition.len() * cfg.iterations as usize,
            "{params}"
        );
        assert_eq!(run.consensus_errors.len(), cfg.iterations as usize);
    }
}

#[test]
fn captured_energy_goes_to_one_as_rho_grows() {
    let (d, n, k) = (20, 2000, 2);
    let (xt, sigma) = easy(4, d, n);
    let c = ctx(d, Some(n), RO);
    let mut means = Vec::new();
    for rho in [0.02, 1.0, 50.0, 1e8] {
        let cfg = configured(json!({"k": k, "iterations": 8}), &c, rho);
        let reps = 4;
        let mean = (0..reps)
            .map(|seed| captured_energy(&simulate_audited(&xt, &cfg, &c, seed).0.output.basis, &sigma))
            .sum::<f64>()
            / reps as f64;
        means.push(mean);
    }
    assert!(means.windows(2).all(|w| w[0] < w[1]), "{means:?}");
    assert!(means[3] > 0.999, "{means:?}");
}

/// The judged setting: {"k": 2, "agents": 4, "graph": "ring"} at ρ = 5 on easy spiked data
/// (n = 3000, d = 25), through the registry: the energy captured on each of seeds 0..seeds
/// (each run's basis checked against the output contract).
fn judged_setting_energies(seeds: u64) -> Vec<f64> {
    let (d, n) = (25, 3000);
    let (xt, sigma) = easy(1, d, n);
    let c = ctx(d, Some(n), RO);
    let prepared = GossipPower
        .prepare(json!({"k": 2, "agents": 4, "graph": "ring"}), &c, &target(5.0))
        .expect("defaults are valid");
    assert!(prepared.cost.rho <= 5.0);
    (0..seeds)
        .map(|seed| {
            let (out, _) = run_prepared_audited(
                &GossipPower,
                &prepared.config,
                DataInput::Records { xt: (&xt).into() },
                &c,
                seed,
            );
            let out = out.expect("runs");
            assert_basis_contract(&out.basis, d, 2);
            captured_energy(&out.basis, &sigma)
        })
        .collect()
}

/// The judged setting captures ≥ 0.9 of the energy on every seed.
#[test]
fn the_documented_defaults_capture_90_percent_at_rho_5() {
    let energies = judged_setting_energies(10);
    assert!(energies.iter().all(|e| *e >= 0.9), "{energies:?}");
}

#[test]
fn the_run_reports_consensus_error_and_spectral_gap() {
    let (d, n) = (8, 300);
    let (xt, _) = easy(5, d, n);
    let c = ctx(d, Some(n), RO);
    let released = |params: serde_json::Value| {
        let cfg = configured(params, &c, 1.0);
        let (run, _) = with_audited_env(1, |env| {
            GossipPower
                .run(
                    &cfg,
                    Run {
                        input: DataInput::Records { xt: (&xt).into() },
                        ctx: &c,
                        env,
                    },
                )
                .expect("runs");
            env.released().to_vec()
        });
        let get = |name: &str| {
            run.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.as_f64().unwrap())
                .expect(name)
        };
        (get("consensus_error"), get("spectral_gap"))
    };
    // Complete graph: W = 11ᵀ/m, exact consensus in one round.
    let (complete, gap) = released(json!({"k": 1, "graph": "complete"}));
    assert!(complete < 1e-12 && (gap - 1.0).abs() < 1e-12);
    // Ring of 4 with one round: disagreement shrinks by at most 1/3.
    let (one_round, gap) = released(json!({"k": 1, "gossip_rounds": 1}));
    assert!(one_round > 0.05 && (gap - 2.0 / 3.0).abs() < 1e-12, "{one_round}");
    let (defaults, _) = released(json!({"k": 1}));
    assert!(defaults < 1e-3 && defaults < one_round, "{defaults}");
}

#[test]
fn cancellation_stops_the_noise() {
    let (d, n) = (8, 300);
    let (xt, _) = easy(6, d, n);
    let c = ctx(d, Some(n), RO);
    let cfg = configured(json!({"k": 1, "iterations": 5}), &c, 1.0);
    let (out, reports, audit) = run_with_progress(
        &GossipPower,
        DataInput::Records { xt: (&xt).into() },
        &cfg,
        &c,
        1,
        |done, _| done >= 2,
    );
    assert_eq!(out.expect_err("cancelled"), RunError::Cancelled);
    assert_eq!(reports, vec![(1, 5), (2, 5)]);
    assert_eq!(
        audit.draws.len(),
        2 * 2 * 4,
        "two iterations of m messages and m updates"
    );
}

/// Pools every message draw normalised by the spec's sd s_y·2βν and every update draw by
/// s_v·2βτ/n, with s_y, s_v computed here from (L, ρ, φ) by the module doc's formula and τ the
/// consensus clip this test sets (public). τ is a quarter of the typical row of the summed
/// message noise, √(m·p)·s_y·2βν, so it binds (the largest consensus row is τ up to rounding,
/// checked) and Δ_v = 2βτ/n: the sd is derived from public inputs, never from the run's
/// `max_row_norms`. d·p·L = 2 400 update draws (χ² z ≈ 10.6 at sd/1.2, 6.0 at sd/1.1) and
/// m·n·p·L = 80 000 message draws. `factor` scales the run's multipliers (an under-noised twin
/// uses factor < 1).
fn audit_noise(factor: f64) -> [(&'static str, Result<(), String>); 2] {
    let (d, n, p, l, m, rho, share, beta, nu) = (60, 500, 4, 10_u32, 4, 3.0, 0.4, 2.0, 1.0);
    let (xt, _) = easy(7, d, n);
    let c = ctx(d, Some(n), RO);
    let s_y = (f64::from(l) / (2.0 * share * rho)).sqrt();
    let s_v = (f64::from(l) / (2.0 * (1.0 - share) * rho)).sqrt();
    let tau = 0.25 * ((m * p) as f64).sqrt() * s_y * 2.0 * beta * nu;
    let mut cfg = configured(
        json!({"k": 2, "p": p, "agents": m, "iterations": l, "message_share": share, "clip_norm": nu, "consensus_clip": tau}),
        &c,
        rho,
    );
    cfg.message_multiplier *= factor;
    cfg.update_multiplier *= factor;
    let (run, audit) = simulate_audited(&xt, &cfg, &c, 11);
    assert_eq!(cfg.partition.len(), m);
    assert_eq!(audit.draws.len(), 2 * m * l as usize);
    // τ binds in every iteration (a sanity check of the derivation, not its source).
    for max_row in &run.max_row_norms {
        assert!(
            *max_row <= tau && *max_row >= tau * (1.0 - 1e-12),
            "{max_row} vs τ = {tau}"
        );
    }
    let message_sd = s_y * 2.0 * beta * nu;
    let update_sd = s_v * 2.0 * beta * tau / n as f64;
    let (mut messages, mut updates) = (Vec::new(), Vec::new());
    for (draw_index, draw) in audit.draws.iter().enumerate() {
        let is_message = draw_index % (2 * m) < m;
        if is_message {
            assert_eq!((draw.label, draw.values.len()), (MESSAGE_RELEASE, n * p));
            messages.extend(draw.values.iter().map(|v| v / message_sd));
        } else {
            assert_eq!(draw.label, UPDATE_RELEASE);
            updates.extend(draw.values.iter().map(|v| v / update_sd));
        }
    }
    assert_eq!(updates.len(), d * p * l as usize);
    [
        ("messages", check_gaussian_scale(&messages, 1.0)),
        ("updates", check_gaussian_scale(&updates, 1.0)),
    ]
}

/// Every release carries the calibrated noise. The twin: 1.2× less noise on both releases (as
/// if the sensitivities were 1/1.2 of the derived ones); the same checks catch both.
#[test]
fn every_release_carries_the_calibrated_noise() {
    assert_audits_catch_under_noise(audit_noise, 1.0 / 1.2);
}

/// The consensus clip leaves every row norm ≤ τ, computed or exact, also for the rows that
/// the naive r·(τ/‖r‖₂) leaves just outside, so Δ_v never exceeds 2βτ/n.
#[test]
fn consensus_clip_never_exceeds_tau_even_by_rounding() {
    use crate::linalg::testing::{adversarial_rows, columns_beyond};
    let (p, tau) = (3, 0.37);
    let (rows, broken) = adversarial_rows(p, 4000, tau, 71);
    assert!(broken > 0, "no adversarial row");
    let mut clipped = rows.transpose();
    crate::linalg::clip::clip_rows_l2(&mut clipped, tau);
    assert_eq!(columns_beyond(&clipped.transpose(), tau), 0);
    assert!(clipped.row_iter().all(|r| r.norm() <= tau));
}

#[test]
#[ignore = "exploration: prints captured energy for parameter variants"]
fn explore_defaults() {
    let datasets = [
        (
            "spiked 9,6,4 d25 n3000",
            25,
            3000,
            spiked_records(1, 25, 3000, &[9.0, 6.0, 4.0], 0.3, 2.0),
        ),
        (
            "spiked 9,6,4 d20 n2000",
            20,
            2000,
            spiked_records(2, 20, 2000, &[9.0, 6.0, 4.0], 0.3, 2.0),
        ),
        (
            "spiked 9,4 d30 n2000",
            30,
            2000,
            spiked_records(3, 30, 2000, &[9.0, 4.0], 0.5, 2.0),
        ),
        (
            "signs 10,6,3 d30 n5000",
            30,
            5000,
            crate::algorithms::testing::sign_spiked_records(4, (30, 5000), &[10.0, 6.0, 3.0], 0.3, 6.0),
        ),
    ];
    // The judged setting through the registry, 20 seeds.
    {
        let energies = judged_setting_energies(20);
        let mean = energies.iter().sum::<f64>() / 20.0;
        println!(
            "judged setting: mean {mean:.4}, min {:.4}, all {energies:.3?}",
            energies.iter().copied().fold(1.0, f64::min)
        );
    }
    let mut cases = Vec::new();
    for (l, p) in [(6, 2), (4, 4), (3, 4), (2, 4), (3, 3), (4, 3)] {
        for share in [0.5, 0.65, 0.8] {
            cases.push(json!({"k": 2, "iterations": l, "p": p, "message_share": share}));
        }
    }
    for (name, d, n, xt) in &datasets {
        let sigma = gram_t(xt) / *n as f64;
        let beta = if name.starts_with("signs") { 6.0 } else { 2.0 };
        let c = ctx(*d, Some(*n), ro(beta, beta * (*d as f64).sqrt()));
        let ev = crate::linalg::sym_eig(&sigma).values;
        println!("{name}: spectrum {:?}", &ev.as_slice()[..4]);
        for params in &cases {
            let cfg = configured(params.clone(), &c, 5.0);
            let reps = 16;
            let energies: Vec<f64> = (0..reps)
                .map(|seed| captured_energy(&simulate_audited(xt, &cfg, &c, seed).0.output.basis, &sigma))
                .collect();
            let mean = energies.iter().sum::<f64>() / reps as f64;
            let worst = energies.iter().copied().fold(1.0, f64::min);
            println!("  {params}: mean {mean:.4} worst {worst:.4}");
        }
    }
}
