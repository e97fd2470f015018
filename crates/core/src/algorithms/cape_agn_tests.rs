//! cape_agn: the packed tensor layout and projection, the moments against brute force, the
//! sensitivities against random neighbours, the cost (= ρ), the noise each stage's aggregate
//! actually carries (and an under-noised twin that fails), recovery on synthetic MOG and STM
//! data at a huge budget (q^comp near the non-private value), and refusals naming the field.

use rand::Rng;
use rand_chacha::ChaCha20Rng;
use rand_distr::{Distribution, StandardNormal};
use serde_json::json;

use super::*;
use crate::algorithms::cape_noise::tests::{Derived, TWIN};
use crate::algorithms::cape_noise::{self as cape, CapeLattice, pack_upper};
use crate::algorithms::tensor_power::{
    self, PowerSettings, pack, packed_index, project_packed, q_comp, unpack,
};
use crate::algorithms::testing::{
    ar, assert_basis_contract, assert_invalid_fields, ctx, invalid_field, rejected, ro, seeded, target,
    with_audited_env,
};
use crate::algorithms::{DynAlgorithm, registry};
use crate::linalg::thin_qr_q;
use crate::privacy::testing::check_gaussian_scale;

const RO3: Neighbours = ro(3.0, 30.0);

fn mog_config(d: usize, k: usize, rho: f64, extra: serde_json::Value) -> CapeAgnConfig {
    let mut params = json!({ "k": k, "model": "mog", "sigma2": 0.05 });
    params
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    configure(
        serde_json::from_value(params).unwrap(),
        &ctx(d, Some(30_000), RO3),
        &target(rho),
    )
    .unwrap()
}

/// K well-separated means of norm ≤ 1 in R^D (orthonormal directions scaled 0.9, 0.8, …).
fn mog_truth(rng: &mut ChaCha20Rng, d: usize, k: usize) -> Vec<Vec<f64>> {
    let g = Matrix::from_fn(d, k, |_, _| StandardNormal.sample(rng));
    let q = thin_qr_q(&g);
    (0..k)
        .map(|j| q.column(j).iter().map(|v| v * (0.9 - 0.1 * j as f64)).collect())
        .collect()
}

/// n samples x = a_h + N(0, σ²I), Pr[h = j] = weights[j], as columns.
fn mog_records(rng: &mut ChaCha20Rng, means: &[Vec<f64>], weights: &[f64], sigma2: f64, n: usize) -> Matrix {
    let d = means[0].len();
    let sd = sigma2.sqrt();
    let mut xt = Matrix::zeros(d, n);
    for mut col in xt.column_iter_mut() {
        let u: f64 = rng.random();
        let mut acc = 0.0;
        let h = weights.iter().position(|w| {
            acc += w;
            u < acc
        });
        let a = &means[h.unwrap_or(weights.len() - 1)];
        for (x, m) in col.iter_mut().zip(a) {
            let z: f64 = StandardNormal.sample(rng);
            *x = m + sd * z;
        }
    }
    xt
}

/// Topic word distributions: each topic puts most mass on its own block of words.
fn stm_truth(d: usize, k: usize) -> Vec<Vec<f64>> {
    (0..k)
        .map(|j| {
            let mut a: Vec<f64> = (0..d).map(|i| if i % k == j { 1.0 } else { 0.1 }).collect();
            let total: f64 = a.iter().sum();
            a.iter_mut().for_each(|x| *x /= total);
            a
        })
        .collect()
}

/// n documents of `len` words each, as count vectors.
fn stm_records(rng: &mut ChaCha20Rng, topics: &[Vec<f64>], weights: &[f64], len: usize, n: usize) -> Matrix {
    let d = topics[0].len();
    let pick = |rng: &mut ChaCha20Rng, p: &[f64]| {
        let u: f64 = rng.random();
        let mut acc = 0.0;
        p.iter()
            .position(|w| {
                acc += w;
                u < acc
            })
            .unwrap_or(p.len() - 1)
    };
    let mut xt = Matrix::zeros(d, n);
    for mut col in xt.column_iter_mut() {
        let h = pick(rng, weights);
        for _ in 0..len {
            col[pick(rng, &topics[h])] += 1.0;
        }
    }
    xt
}

fn dense_cube(x: &[f64]) -> Vec<f64> {
    let d = x.len();
    let mut t = vec![0.0; d * d * d];
    for c in 0..d {
        for b in 0..d {
            for a in 0..d {
                t[a + d * (b + d * c)] = x[a] * x[b] * x[c];
            }
        }
    }
    t
}

#[test]
fn the_packed_layout_round_trips_and_projection_matches_brute_force() {
    let d = 5;
    let mut order = Vec::new();
    tensor_power::for_each_packed(d, |idx, i, j, k| {
        assert_eq!(packed_index(i, j, k), idx);
        order.push(idx);
    });
    assert_eq!(order.len(), packed_len(d));
    let mut rng = seeded(1);
    let packed: Vec<f64> = (0..packed_len(d))
        .map(|_| StandardNormal.sample(&mut rng))
        .collect();
    let dense = unpack(&packed, d).unwrap();
    assert_eq!(pack(&dense, d), packed);
    assert_eq!(dense[1 + d * (4 + d * 2)], dense[4 + d * (2 + d)], "symmetric");
    let w = Matrix::from_fn(d, 3, |_, _| StandardNormal.sample(&mut rng));
    let got = unpack(&project_packed(&packed, d, &w).unwrap(), 3).unwrap();
    for (a, b, c) in [(0, 1, 2), (2, 2, 0), (1, 1, 1)] {
        let mut want = 0.0;
        for k in 0..d {
            for j in 0..d {
                for i in 0..d {
                    want += dense[i + d * (j + d * k)] * w[(i, a)] * w[(j, b)] * w[(k, c)];
                }
            }
        }
        assert!((got[a + 3 * (b + 3 * c)] - want).abs() < 1e-10, "({a},{b},{c})");
    }
    assert!(unpack(&packed[1..], d).is_err());
}

#[test]
fn moments_match_their_definitions_and_projection_is_linear() {
    let mut rng = seeded(2);
    let d = 6;
    // MOG: Σ x⊗x⊗x − σ²Σ_d sym(e_d⊗e_d⊗x), brute force.
    let xt = Matrix::from_fn(d, 7, |_, _| StandardNormal.sample(&mut rng));
    let sigma2 = 0.3;
    let mut want = vec![0.0; d * d * d];
    for x in xt.column_iter() {
        let x: Vec<f64> = x.iter().copied().collect();
        for (acc, v) in want.iter_mut().zip(dense_cube(&x)) {
            *acc += v;
        }
        for e in 0..d {
            for (i, xi) in x.iter().enumerate() {
                want[i + d * (e + d * e)] -= sigma2 * xi;
                want[e + d * (i + d * e)] -= sigma2 * xi;
                want[e + d * (e + d * i)] -= sigma2 * xi;
            }
        }
    }
    let identity = Matrix::identity(d, d);
    let got = projected_third_moment(&xt, Model::Mog, sigma2, &identity);
    for (g, w) in got.iter().zip(pack(&want, d)) {
        assert!((g - w).abs() < 1e-10);
    }
    let w = Matrix::from_fn(d, 3, |_, _| StandardNormal.sample(&mut rng));
    for (model, data) in [
        (Model::Mog, xt.clone()),
        (
            Model::Stm,
            stm_records(&mut rng, &stm_truth(d, 2), &[0.5, 0.5], 5, 9),
        ),
    ] {
        let full = projected_third_moment(&data, model, sigma2, &identity);
        let direct = projected_third_moment(&data, model, sigma2, &w);
        let via = project_packed(&full, d, &w).unwrap();
        for (a, b) in direct.iter().zip(&via) {
            assert!((a - b).abs() < 1e-9 * (1.0 + b.abs()), "{model:?}: {a} vs {b}");
        }
    }
    // STM: one document of 3 distinct words i < j < k gives 1/6 at (i, j, k), its M₂ 1/6 + 1/6
    // at (i, j) (and symmetric); a doubled word has m₂ = 2/6 at its pair.
    let mut doc = Matrix::zeros(d, 1);
    doc[(0, 0)] = 1.0;
    doc[(2, 0)] = 1.0;
    doc[(5, 0)] = 1.0;
    let t = projected_third_moment(&doc, Model::Stm, 0.0, &identity);
    assert!((t[packed_index(0, 2, 5)] - 1.0 / 6.0).abs() < 1e-12);
    assert!(t[packed_index(0, 0, 2)].abs() < 1e-12 && t[packed_index(5, 5, 5)].abs() < 1e-12);
    let m2 = second_moment(&doc, Model::Stm, 0.0);
    assert!((m2[(0, 2)] - 1.0 / 6.0).abs() < 1e-12 && m2[(0, 0)].abs() < 1e-12);
    // Rows of fewer than 3 words (after rounding) contribute nothing.
    let short = to_domain(
        &Matrix::from_column_slice(d, 1, &[1.2, 0.0, 0.9, -3.0, 0.0, 0.0]),
        Model::Stm,
    );
    assert_eq!(short.sum(), 0.0);
}

/// ‖packed m(x) − packed m(y)‖₂ over random neighbours, as a fraction of the claimed Δ.
fn worst_ratio(model: Model, neighbours: Neighbours, seed: u64) -> f64 {
    let mut rng = seeded(seed);
    let d = 5;
    let sigma2 = if model == Model::Mog { 0.4 } else { 0.0 };
    let beta = match neighbours {
        Neighbours::ReplaceOne { beta, .. } | Neighbours::AddRemove { beta, .. } => beta,
        Neighbours::Entry { .. } => unreachable!(),
    };
    let identity = Matrix::identity(d, d);
    let record = |rng: &mut ChaCha20Rng| -> Matrix {
        match model {
            Model::Mog => {
                let g = Matrix::from_fn(d, 1, |_, _| StandardNormal.sample(rng));
                let r: f64 = rng.random();
                // Norms at β exactly (the worst case) or anywhere below.
                let norm = if r < 0.5 { beta } else { beta * rng.random::<f64>() };
                &g * (norm / g.norm())
            }
            Model::Stm => {
                let len = rng.random_range(3..8);
                let mut c = Matrix::zeros(d, 1);
                for _ in 0..len {
                    c[(rng.random_range(0..d), 0)] += 1.0;
                }
                c
            }
        }
    };
    let stats = |x: &Matrix| {
        (
            pack_upper(&second_moment(x, model, sigma2)),
            projected_third_moment(x, model, sigma2, &identity),
        )
    };
    let dist = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum::<f64>().sqrt();
    let delta2 = second_moment_sensitivity(model, sigma2, d, &neighbours);
    let delta3 = third_moment_sensitivity(model, sigma2, d, &neighbours);
    let mut worst: f64 = 0.0;
    for _ in 0..2000 {
        let x = record(&mut rng);
        let (x2, x3) = stats(&x);
        let (y2, y3) = match neighbours {
            Neighbours::ReplaceOne { .. } => stats(&record(&mut rng)),
            _ => stats(&Matrix::zeros(d, 0)),
        };
        worst = worst.max(dist(&x2, &y2) / delta2).max(dist(&x3, &y3) / delta3);
    }
    worst
}

#[test]
fn sensitivities_bound_every_neighbour() {
    for model in [Model::Mog, Model::Stm] {
        for (i, nb) in [ro(2.0, 20.0), ar(2.0, 20.0)].into_iter().enumerate() {
            let r = worst_ratio(model, nb, 10 + i as u64);
            assert!(r <= 1.0 + 1e-12, "{model:?} {nb:?}: {r}");
            assert!(r > 0.3, "{model:?} {nb:?}: the bound is far from tight ({r})");
        }
    }
}

#[test]
fn cost_is_the_jobs_rho_split_evenly() {
    for (sites, rho) in [(2u32, 0.01), (3, 0.5), (7, 40.0)] {
        let config = mog_config(10, 3, rho, json!({ "sites": sites }));
        let cost = CapeAgn.cost(&config, &ctx(10, Some(30_000), RO3));
        assert!(cost.is_gaussian_only());
        assert!(
            cost.rho <= rho && cost.rho >= rho * (1.0 - 1e-9),
            "{cost:?} vs {rho}"
        );
        assert!((config.stage1.cost() - rho / 2.0).abs() <= 1e-9 * rho);
        assert!((config.stage2.cost() - rho / 2.0).abs() <= 1e-9 * rho);
    }
    // Through the registry too.
    let alg: &dyn DynAlgorithm = &CapeAgn;
    let p = alg
        .prepare(
            json!({ "k": 2, "model": "stm" }),
            &ctx(8, Some(100), RO3),
            &target(0.7),
        )
        .unwrap();
    assert!((p.cost.rho - 0.7).abs() <= 1e-9);
}

/// The aggregate noise of each stage over `reps` runs on empty shards (statistic 0), with W = I
/// in stage 2 so the projected noise is the D-dimensional noise itself.
fn aggregate_noise(config: &CapeAgnConfig, d: usize, reps: u64) -> (Vec<f64>, Vec<f64>) {
    let shards: Vec<Matrix> = (0..config.sites).map(|_| Matrix::zeros(d, 0)).collect();
    let (mut one, mut two) = (Vec::new(), Vec::new());
    for seed in 0..reps {
        let ((a, b), _) = with_audited_env(100 + seed, |env| {
            let seeds = StageSeeds::fresh(config.sites, env);
            let a = stage1_aggregate(&shards, config, &seeds, env).unwrap();
            let seeds = StageSeeds::fresh(config.sites, env);
            let b = stage2_aggregate(&shards, config, &seeds, &Matrix::identity(d, d), env).unwrap();
            (a, b)
        });
        one.extend(a);
        two.extend(b);
    }
    (one, two)
}

#[test]
fn each_stage_aggregate_carries_the_publicly_derived_noise_and_under_noised_twins_fail() {
    let d = 10;
    let config = mog_config(d, 3, 0.8, json!({ "sites": 4 }));
    // The scales from public inputs alone: Δ from the module docs' table (replace_one, β = 3,
    // σ² = 0.05, D = 10), ρ/2 per stage, S = 4, κ = 1; the test's own joint-view derivation.
    let (beta, sigma2) = (3.0f64, 0.05f64);
    let delta2 = 2f64.sqrt() * beta * beta;
    let delta3 = 2.0 * beta.powi(3) + 2.0 * beta * sigma2 * (3.0 * d as f64 + 6.0).sqrt();
    let public1 = Derived::new(delta2, 0.4, 4, 1.0, d * (d + 1) / 2);
    let public2 = Derived::new(delta3, 0.4, 4, 1.0, packed_len(d));
    let (one, two) = aggregate_noise(&config, d, 30);
    assert!(one.len() >= 1600 && two.len() >= 6000);
    check_gaussian_scale(&one, public1.aggregate_sd(4, 0)).expect("stage 1");
    check_gaussian_scale(&two, public2.aggregate_sd(4, 0)).expect("stage 2");
    // The aggregate is never less noisy than the pooled mechanism at ρ/2.
    assert!(public1.aggregate_sd(4, 0) >= public1.pooled_var.sqrt());
    for stage in [1, 2] {
        let mut twin = config.clone();
        let noise = if stage == 1 {
            &mut twin.stage1
        } else {
            &mut twin.stage2
        };
        noise.own_sd *= TWIN;
        let (one, two) = aggregate_noise(&twin, d, 30);
        let (values, expected) = if stage == 1 {
            (one, public1.aggregate_sd(4, 0))
        } else {
            (two, public2.aggregate_sd(4, 0))
        };
        assert!(
            check_gaussian_scale(&values, expected).is_err(),
            "stage {stage} twin passed"
        );
    }
    // A dropout leaves the reported extra noise; its 1.2× twin fails.
    let dropped = mog_config(d, 3, 0.8, json!({ "sites": 4, "dropouts": [3] }));
    let (one, two) = aggregate_noise(&dropped, d, 30);
    check_gaussian_scale(&one, public1.aggregate_sd(3, 1)).expect("stage 1 with a dropout");
    check_gaussian_scale(&two, public2.aggregate_sd(3, 1)).expect("stage 2 with a dropout");
    let mut twin = dropped.clone();
    for noise in [&mut twin.stage1, &mut twin.stage2] {
        noise.own_sd *= TWIN;
        noise.pair_sd *= TWIN;
    }
    let (one, two) = aggregate_noise(&twin, d, 30);
    assert!(check_gaussian_scale(&one, public1.aggregate_sd(3, 1)).is_err());
    assert!(check_gaussian_scale(&two, public2.aggregate_sd(3, 1)).is_err());
}

#[test]
fn the_packed_third_moment_is_the_projection_at_the_identity() {
    let mut rng = seeded(31);
    let d = 7;
    let identity = Matrix::identity(d, d);
    let mog = Matrix::from_fn(d, 9, |_, _| StandardNormal.sample(&mut rng));
    let stm = stm_records(&mut rng, &stm_truth(d, 2), &[0.5, 0.5], 6, 11);
    for (model, xt, sigma2) in [(Model::Mog, &mog, 0.3), (Model::Stm, &stm, 0.0)] {
        let want = projected_third_moment(xt, model, sigma2, &identity);
        let got = third_moment(xt, model, sigma2);
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-12 * (1.0 + w.abs()), "{model:?}: {g} vs {w}");
        }
    }
    assert_eq!(
        third_moment(&Matrix::zeros(d, 0), Model::Mog, 0.3),
        vec![0.0; packed_len(d)]
    );
}

/// Stage 2 releases the D-dimensional moment on the lattice and only then projects it: with W
/// a selection of K coordinates (so the projection only copies entries) every value of the
/// message is an integer multiple of the grid h, and it equals the projection of
/// h·(round(M₃/h) + E + F + G) rebuilt from the seeds and the audited G. The old message,
/// P(M₃) + P(noise), carried M₃'s bits below the grid.
#[test]
fn stage2_messages_are_projections_of_a_lattice_release() {
    let mut rng = seeded(41);
    let (d, k, sites) = (6, 3, 3u32);
    let truth = mog_truth(&mut rng, d, k);
    let xt = mog_records(&mut rng, &truth, &[0.4, 0.3, 0.3], 0.05, 500);
    let config = mog_config(d, k, 2.0, json!({ "sites": sites }));
    let noise = config.stage2;
    let len3 = packed_len(d);
    let lattice = CapeLattice::new(&noise, len3).unwrap();
    let h = lattice.grid();
    let selection = Matrix::from_fn(d, k, |i, j| if i == 2 * j { 1.0 } else { 0.0 });
    // Site 1's stage-2 message through `w`, with fresh seeds from the environment on seed 5.
    let site_one_message = |w: &Matrix| {
        with_audited_env(5, |env| {
            let seeds = StageSeeds::fresh(sites, env);
            let m = stage2_message(
                &xt,
                Model::Mog,
                0.05,
                w,
                1,
                &seeds.of(1, sites),
                &seeds.aggregator()[&1],
                &noise,
                env,
            )
            .unwrap();
            (m, seeds)
        })
    };
    let ((message, seeds), audit) = site_one_message(&selection);
    assert_eq!(message.len(), packed_len(k));
    for v in &message {
        assert_eq!((v / h).fract(), 0.0, "{v} is not on the grid {h}");
    }
    // Rebuild: round(M₃/h) + E + F + G in integers, projected.
    let m3 = third_moment(&xt, Model::Mog, 0.05);
    let e = cape::zero_sum_noise(1, &seeds.of(1, sites), len3, &lattice);
    let f = lattice.aggregator_term(&seeds.aggregator()[&1], len3);
    let g = &audit
        .draws
        .iter()
        .find(|r| r.label == cape::OWN_NOISE)
        .expect("G audited")
        .values;
    let rebuilt: Vec<f64> = (0..len3)
        .map(|i| ((m3[i] / h).round() + e[i] as f64) * h + f[i] + g[i])
        .collect();
    let projected = project_packed(&rebuilt, d, &selection).unwrap();
    for (a, b) in message.iter().zip(&projected) {
        assert!((a - b).abs() <= 1e-12 * b.abs().max(h), "{a} vs {b}");
    }
    // Through a general W it is the projection of that same lattice vector (the same seeds
    // and generator state give the same E, F, G).
    let w = Matrix::from_fn(d, k, |_, _| StandardNormal.sample(&mut rng));
    let ((general, _), _) = site_one_message(&w);
    let projected = project_packed(&rebuilt, d, &w).unwrap();
    for (a, b) in general.iter().zip(&projected) {
        assert!((a - b).abs() <= 1e-12 * b.abs().max(h), "{a} vs {b}");
    }
}

/// q^comp of the non-private tensor method on pooled exact moments (the best the data allows).
fn non_private(xt: &Matrix, model: Model, sigma2: f64, k: usize, seed: u64) -> Components {
    let records = to_domain(xt, model);
    let m2 = second_moment(&records, model, sigma2);
    let mut rng = seeded(seed);
    let settings = PowerSettings {
        starts: DEFAULT_STARTS,
        iterations: DEFAULT_POWER_ITERATIONS,
    };
    decompose(&m2, k, 1e-12, model, settings, &mut rng, |w| {
        Ok(projected_third_moment(&records, model, sigma2, w))
    })
    .unwrap()
    .components
}

fn run_registry(
    params: serde_json::Value,
    xt: &Matrix,
    c: &DataContext,
    rho: f64,
    seed: u64,
) -> (Output, Vec<(&'static str, serde_json::Value)>) {
    let alg = registry()
        .iter()
        .find(|a| a.info().name == "cape_agn")
        .expect("registered");
    let prepared = alg.prepare(params, c, &target(rho)).unwrap();
    let (out, _) = with_audited_env(seed, |env| {
        let out = alg.run_prepared(
            &prepared.config,
            Run {
                input: DataInput::Records { xt: xt.into() },
                ctx: c,
                env,
            },
        );
        (out, env.released().to_vec())
    });
    (out.0.expect("runs"), out.1)
}

fn components_of(released: &[(&'static str, serde_json::Value)]) -> (Vec<Vec<f64>>, Vec<f64>) {
    let c = &released
        .iter()
        .find(|(n, _)| *n == "components")
        .expect("components released")
        .1;
    (
        serde_json::from_value(c["components"].clone()).unwrap(),
        serde_json::from_value(c["weights"].clone()).unwrap(),
    )
}

#[test]
fn recovers_mog_components_at_a_huge_budget() {
    let mut rng = seeded(3);
    let (d, k, n, sigma2) = (10, 3, 30_000, 0.05);
    let truth = mog_truth(&mut rng, d, k);
    let weights = [0.5, 0.3, 0.2];
    let xt = mog_records(&mut rng, &truth, &weights, sigma2, n);
    let best = q_comp(&non_private(&xt, Model::Mog, sigma2, k, 4).vectors, &truth);
    let c = ctx(d, Some(n), RO3);
    let (out, released) = run_registry(
        json!({ "k": k, "model": "mog", "sigma2": sigma2 }),
        &xt,
        &c,
        1e9,
        5,
    );
    assert_basis_contract(&out.basis, d, k);
    let (components, w) = components_of(&released);
    let q = q_comp(&components, &truth);
    assert!(best < 0.1, "non-private q^comp {best}");
    assert!(q <= best + 0.01, "q^comp {q} vs non-private {best}");
    assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    assert!(
        (w[0] - 0.5).abs() < 0.05 && (w[2] - 0.2).abs() < 0.05,
        "weights {w:?}"
    );
    // The stage reports are there and say all sites sent.
    for name in [STAGE1, STAGE2] {
        let r = &released.iter().find(|(n, _)| *n == name).unwrap().1;
        assert_eq!(r["fallback"], false, "{r}");
    }
    // At a small budget the error is clearly worse (the noise matters).
    let (_, released) = run_registry(
        json!({ "k": k, "model": "mog", "sigma2": sigma2 }),
        &xt,
        &c,
        1e-3,
        5,
    );
    assert!(q_comp(&components_of(&released).0, &truth) > best + 0.1);
}

#[test]
fn recovers_stm_topics_at_a_huge_budget_with_unequal_sites_and_a_dropout() {
    let mut rng = seeded(6);
    let (d, k, n) = (9, 3, 20_000);
    let truth = stm_truth(d, k);
    let xt = stm_records(&mut rng, &truth, &[0.4, 0.35, 0.25], 6, n);
    let best = q_comp(&non_private(&xt, Model::Stm, 0.0, k, 4).vectors, &truth);
    let c = ctx(d, Some(n), ro(6.0, 6.0));
    let params = json!({ "k": k, "model": "stm", "sites": 4, "site_shares": [1, 2, 3, 4], "dropouts": [2] });
    let (out, released) = run_registry(params, &xt, &c, 1e9, 7);
    assert_basis_contract(&out.basis, d, k);
    let (components, _) = components_of(&released);
    let q = q_comp(&components, &truth);
    // The dropout removes site 2's documents (a tenth of them): a little worse than pooled.
    assert!(best < 0.05, "non-private q^comp {best}");
    assert!(q <= best + 0.03, "q^comp {q} vs non-private {best}");
    for name in [STAGE1, STAGE2] {
        let r = &released.iter().find(|(n, _)| *n == name).unwrap().1;
        assert_eq!(r["fallback"], true, "{r}");
        assert_eq!(r["dropped"], json!([2]));
    }
}

#[test]
fn shards_follow_the_shares() {
    assert_eq!(shard_ranges(10, &[0.5, 0.5]), vec![0..5, 5..10]);
    assert_eq!(
        shard_ranges(10, &[0.1, 0.2, 0.3, 0.4]),
        vec![0..1, 1..3, 3..6, 6..10]
    );
    assert_eq!(
        shard_ranges(2, &[0.25; 4]).iter().map(|r| r.len()).sum::<usize>(),
        2
    );
}

#[test]
fn bad_inputs_name_their_field() {
    let alg: &dyn DynAlgorithm = &CapeAgn;
    let c = ctx(10, Some(1000), RO3);
    let t = target(1.0);
    assert_invalid_fields(
        alg,
        &c,
        &t,
        [
            (json!({ "k": 2, "model": "stm", "sites": 1 }), "params.sites"),
            (json!({ "k": 11, "model": "stm" }), "params.k"),
            (json!({ "k": 2, "model": "lda" }), "params.model"),
            (json!({ "k": 2 }), "params.model"),
            (json!({ "k": 2, "model": "mog" }), "params.sigma2"),
            (json!({ "k": 2, "model": "mog", "sigma2": -1.0 }), "params.sigma2"),
            (json!({ "k": 2, "model": "stm", "sigma2": 0.1 }), "params.sigma2"),
            (
                json!({ "k": 2, "model": "stm", "sites": 3, "site_shares": [1, 2] }),
                "params.site_shares",
            ),
            (
                json!({ "k": 2, "model": "stm", "site_shares": [1, 0, 2] }),
                "params.site_shares",
            ),
            (
                json!({ "k": 2, "model": "stm", "sites": 2, "dropouts": [1, 2] }),
                "params.dropouts",
            ),
            (
                json!({ "k": 2, "model": "stm", "dropouts": [4] }),
                "params.dropouts",
            ),
            (
                json!({ "k": 2, "model": "stm", "pair_ratio": 0 }),
                "params.pair_ratio",
            ),
            (
                json!({ "k": 2, "model": "stm", "center": "private" }),
                "params.center",
            ),
        ],
    );
    // STM on rows the public bounds clip below any 3-word document.
    let small = ctx(10, Some(1000), ro(1.0, 3.0));
    assert_eq!(
        invalid_field(&rejected(alg, json!({ "k": 2, "model": "stm" }), &small, 1.0)),
        "params.model"
    );
    // MOG is fine there.
    assert!(
        alg.prepare(json!({ "k": 2, "model": "mog", "sigma2": 0.01 }), &small, &t)
            .is_ok()
    );
    // d above the cap.
    let wide = ctx(101, Some(1000), RO3);
    assert_eq!(
        invalid_field(&rejected(alg, json!({ "k": 2, "model": "stm" }), &wide, 1.0)),
        "params.k"
    );
    // A matrix dataset: refused as unsupported by the registry, and by configure on the model.
    let matrix = ctx(10, None, Neighbours::Entry { u: 1.0 });
    assert!(matches!(
        alg.prepare(json!({ "k": 2, "model": "mog", "sigma2": 0.1 }), &matrix, &t),
        Err(ConfigError::Unsupported(_))
    ));
    let e = configure(
        serde_json::from_value(json!({ "k": 2, "model": "mog", "sigma2": 0.1 })).unwrap(),
        &matrix,
        &t,
    )
    .unwrap_err();
    assert_eq!(invalid_field(&e), "params.model");
}
