//! Adaptive clipping: the quantile search, its calibration and noise, and the composed job.

use nalgebra::DMatrix;
use serde_json::json;

use super::*;
use crate::algorithms::Run;
use crate::algorithms::analyze_gauss::{AnalyzeGauss, RELEASE as PERTURBATION};
use crate::algorithms::registry::DynAlgorithm;
use crate::algorithms::testing::{AR, EN, RO, ctx, ro, run_prepared_audited, target, with_audited_env};
use crate::linalg::clip::margin;
use crate::linalg::subspace::orthonormality_error;
use crate::linalg::{ClipBlocks, RecordStats};
use crate::privacy::testing::check_gaussian_scale;

/// d×n records whose norms are 1, 2, …, n (one per column, along the first axis).
fn ramp(n: usize, d: usize) -> Matrix {
    DMatrix::from_fn(d, n, |i, j| if i == 0 { (j + 1) as f64 } else { 0.0 })
}

fn config(quantile: f64, share: f64, c: &DataContext, rho: f64) -> ClipConfig {
    configure(quantile, share, false, c, rho, json!({}), target(rho)).expect("valid")
}

#[test]
fn cost_is_t_gaussian_counts_and_uses_the_share() {
    let c = ctx(3, Some(100), RO);
    let cfg = config(0.5, 0.2, &c, 1.0);
    // ρ_q = 0.2; σ = 1·sqrt(8/(2·0.2)) = sqrt(20).
    assert!(cfg.rho <= 0.2 && cfg.rho > 0.2 * (1.0 - 1e-12));
    assert!((cfg.noise_sd - 20f64.sqrt()).abs() < 1e-12);
    assert_eq!(cfg.sensitivity, 1.0);
    assert!(cfg.cost().is_gaussian_only());
    assert_eq!(cfg.cost().rho, cfg.rho);
    // add_remove: Δ = max(q, 1 − q).
    let cfg = config(0.3, 0.2, &ctx(3, None, AR), 1.0);
    assert_eq!(cfg.sensitivity, 0.7);
    assert!((cfg.noise_sd - 0.7 * 20f64.sqrt()).abs() < 1e-12);
}

#[test]
fn the_search_finds_the_quantile_at_a_generous_budget() {
    // Norms 1..=1000 and β = 1000: the q-quantile is 1000·q; the grid is 2.2 % wide.
    let xt = ramp(1000, 2);
    let c = ctx(2, Some(1000), ro(1000.0, 2000.0));
    for q in [0.1, 0.5, 0.9] {
        let cfg = config(q, 0.5, &c, 1e4);
        let (found, _) = with_audited_env(3, |env| cfg.search(&xt, env));
        let found = found.expect("search");
        let want = 1000.0 * q;
        assert!(
            found >= want * 0.97 && found <= want * 1.05,
            "q = {q}: {found} vs {want}"
        );
    }
}

#[test]
fn search_noise_has_the_calibrated_scale_and_an_under_noised_search_fails() {
    let xt = ramp(200, 2);
    let c = ctx(2, Some(200), ro(200.0, 400.0));
    let cfg = config(0.5, 0.1, &c, 0.5);
    let draws = |cfg: &ClipConfig| -> Vec<f64> {
        (0..300)
            .flat_map(|seed| {
                let (_, audit) = with_audited_env(seed, |env| cfg.search(&xt, env));
                audit
                    .draws
                    .into_iter()
                    .filter(|d| d.label == RELEASE)
                    .flat_map(|d| d.values)
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    // σ = Δ·sqrt(T/(2ρ_q)) from the spec: Δ = 1 (replace_one), ρ_q = 0.1·0.5, T steps.
    let spec_sd = (f64::from(STEPS) / (2.0 * 0.1 * 0.5)).sqrt();
    let values = draws(&cfg);
    // 2 400 draws: χ² z ≈ 10.6 at σ/1.2, 6.0 at σ/1.1 (threshold 5).
    assert_eq!(values.len(), 300 * STEPS as usize);
    check_gaussian_scale(&values, spec_sd).expect("calibrated noise");
    let weak = ClipConfig {
        noise_sd: cfg.noise_sd / 1.2,
        ..cfg.clone()
    };
    assert!(check_gaussian_scale(&draws(&weak), spec_sd).is_err());
}

#[test]
fn bad_requests_are_refused() {
    let c = ctx(3, Some(10), RO);
    let take = |v: serde_json::Value, c: &DataContext| {
        let clip: Option<ClipParam> =
            serde_json::from_value(v).map_err(|e| ConfigError::invalid("params.clip", e.to_string()))?;
        request(clip, c)
    };
    for bad in [
        json!({"quantile": 0.0, "share": 0.1}),
        json!({"quantile": 1.0, "share": 0.1}),
        json!({"quantile": 0.5, "share": 1.0}),
        json!({"quantile": 0.5, "share": -0.1}),
        json!({"quantile": 0.5}),
        json!({"quantile": 0.5, "share": 0.1, "steps": 3}),
        json!("sometimes"),
        json!(0.5),
    ] {
        assert!(take(bad.clone(), &c).is_err(), "{bad}");
    }
    assert_eq!(take(json!("auto"), &c), Ok(Some(ClipRequest::Auto)));
    assert_eq!(take(json!("none"), &c), Ok(None));
    let matrix = ctx(3, None, EN);
    assert!(matches!(
        take(json!("auto"), &matrix),
        Err(ConfigError::Invalid { .. })
    ));
}

#[test]
fn auto_clips_when_noise_matters_and_not_when_it_does_not() {
    // n = 178, d = 13, ρ = 0.03, k = 2: the tail 35·√2·√13/(178·√0.03) ≈ 5.9 → the median.
    assert_eq!(
        auto_choice(&ctx(13, Some(178), RO), 0.03, 2, 1.0),
        Some((AUTO_QUANTILE, AUTO_SHARE))
    );
    // n = 20 000, d = 30, ρ = 1e4, k = 3: tail ≈ 2.4e-4 → no clip.
    assert_eq!(auto_choice(&ctx(30, Some(20_000), RO), 1e4, 3, 1.0), None);
    // In between, a quantile in (1/2, 1): n = 20 000, d = 30, ρ = 0.01 (ε ≈ 0.5), k = 2.
    let (q, share) = auto_choice(&ctx(30, Some(20_000), RO), 0.01, 2, 1.0).expect("clips");
    assert!(q > 0.8 && q < 0.95, "{q}");
    assert_eq!(share, AUTO_SHARE);
    // A noisier algorithm clips lower on the same facts.
    let (noisier, _) = auto_choice(&ctx(30, Some(20_000), RO), 0.01, 2, 20.0).expect("clips");
    assert!(noisier < q, "{noisier} vs {q}");
    // add_remove: n is private, the median.
    assert_eq!(
        auto_choice(&ctx(30, None, AR), 1e4, 3, 1.0),
        Some((AUTO_QUANTILE, AUTO_SHARE))
    );
}

/// The grid of public facts the rule is checked on.
fn facts_grid() -> Vec<(usize, usize, f64, usize)> {
    let mut grid = Vec::new();
    for n in [150, 500, 2_000, 20_000, 200_000, 2_000_000] {
        for d in [4, 13, 30, 64, 500] {
            for rho in [1e-3, 0.01, 0.036, 0.15, 1.0, 10.0, 1e3] {
                for k in [1, 2, 5, 10] {
                    grid.push((n, d, rho, k));
                }
            }
        }
    }
    grid
}

#[test]
fn auto_quantile_rises_toward_no_clip_as_the_noise_falls() {
    // More records or more ρ never lower the quantile, and more dimensions or a larger k never
    // raise it: q is monotone in the noise scale √(k·d)/(n·√ρ), and "none" sits above every q.
    let level = |choice: Option<f64>| choice.map_or(1.0, |tail| 1.0 - tail);
    for (n, d, rho, k) in facts_grid() {
        let q = level(auto_tail(n, d, rho, k, 1.0));
        assert!((0.5..=1.0).contains(&q), "{q} at {n} {d} {rho} {k}");
        assert!(
            level(auto_tail(2 * n, d, rho, k, 1.0)) >= q,
            "n at {n} {d} {rho} {k}"
        );
        assert!(
            level(auto_tail(n, d, 4.0 * rho, k, 1.0)) >= q,
            "ρ at {n} {d} {rho} {k}"
        );
        assert!(
            level(auto_tail(n, 2 * d, rho, k, 1.0)) <= q,
            "d at {n} {d} {rho} {k}"
        );
        assert!(
            level(auto_tail(n, d, rho, k + 1, 1.0)) <= q,
            "k at {n} {d} {rho} {k}"
        );
        assert!(
            level(auto_tail(n, d, rho, k, 20.0)) <= q,
            "F at {n} {d} {rho} {k}"
        );
    }
}

#[test]
fn auto_never_loses_much_to_not_clipping_on_gaussian_amplitude_rows() {
    // The "never much worse than no clip" property, on the quantity the rule controls: with
    // Gaussian-amplitude rows (the typical row ≈ 0.3 of the largest), the noise bound at the
    // chosen c, 2√d·c²/√((1−f)ρ), relative to the clipped trace, is never more than that of
    // not clipping (2√d·β²/√ρ over the full trace) by more than the share's √(1/(1−f)), and the
    // clipped tail is at most 1/2 of the rows. Checked on the whole grid with the empirical
    // norm distribution of 20 000 such rows.
    let xt =
        crate::algorithms::testing::spiked_records(21, 30, 20_000, &[16.0, 9.0, 4.0], 0.3, f64::INFINITY);
    let mut norms: Vec<f64> = xt.column_iter().map(|c| c.norm()).collect();
    norms.sort_by(f64::total_cmp);
    let beta = *norms.last().expect("rows");
    let trace = |c: f64| norms.iter().map(|r| r.min(c).powi(2)).sum::<f64>() / norms.len() as f64;
    let quantile = |q: f64| norms[((q * norms.len() as f64) as usize).min(norms.len() - 1)];
    for (n, d, rho, k) in facts_grid() {
        let Some(tail) = auto_tail(n, d, rho, k, 1.0) else {
            continue;
        };
        let c = quantile(1.0 - tail);
        let clipped = c * c / ((1.0 - AUTO_SHARE) * rho).sqrt() / trace(c);
        let unclipped = beta * beta / rho.sqrt() / trace(beta);
        assert!(
            clipped <= unclipped * (1.0 / (1.0 - AUTO_SHARE)).sqrt() * 1.0001,
            "{n} {d} {rho} {k}: {clipped} vs {unclipped}"
        );
    }
}

/// 400 records in d = 4: most of norm 1, every 50th of norm 10 = β (replace_one, α = 20).
fn mostly_unit_records() -> (Matrix, DataContext) {
    let d = 4;
    let xt = DMatrix::from_fn(d, 400, |i, j| {
        let scale = if j % 50 == 0 { 10.0 } else { 1.0 };
        if i == j % d { scale } else { 0.0 }
    });
    (xt, ctx(d, Some(400), ro(10.0, 20.0)))
}

#[test]
fn a_clipped_job_is_calibrated_to_the_released_bound() {
    // 400 records: most of norm 1, a few of norm 10 = β. Clipping at the median (≈ 1)
    // cuts analyze_gauss's noise sd by about (β/c)² = 100.
    let (xt, c) = mostly_unit_records();
    let rho = 1.0;
    let prepared = AnalyzeGauss
        .prepare(
            json!({"k": 2, "clip": {"quantile": 0.5, "share": 0.2}}),
            &c,
            &target(rho),
        )
        .expect("prepared");
    assert!(prepared.cost.rho <= rho * (1.0 + 1e-12));
    assert!(prepared.cost.is_gaussian_only());
    assert!(prepared.config.get("clip").is_some());
    let plain = AnalyzeGauss
        .prepare(json!({"k": 2}), &c, &target(rho * 0.8))
        .expect("prepared");
    let (out, audit) = run_prepared_audited(
        &AnalyzeGauss,
        &prepared.config,
        crate::algorithms::DataInput::Records { xt: (&xt).into() },
        &c,
        5,
    );
    let out = out.expect("run");
    assert!(orthonormality_error(&out.basis) < 1e-10);
    let searches = audit.draws.iter().filter(|d| d.label == RELEASE).count();
    assert_eq!(searches, STEPS as usize);
    let perturbation = audit
        .draws
        .iter()
        .find(|d| d.label == PERTURBATION)
        .expect("noise");
    let plain_sd = plain.config["noise_sd"].as_f64().expect("sd");
    // The released c is near 1 (the median norm), so the sd falls by (10/c)² ≈ 100×.
    assert!(
        perturbation.scale < plain_sd / 50.0,
        "{} vs {plain_sd}",
        perturbation.scale
    );
}

#[test]
fn clipped_context_tightens_both_bounds() {
    let c = ctx(4, Some(10), ro(10.0, 15.0));
    let clipped = clipped_context(&c, 2.0);
    assert_eq!(clipped.neighbours, ro(2.0, 4.0));
    let rows = clip_rows(&ramp(5, 2), 2.5);
    let norms: Vec<f64> = rows.column_iter().map(|c| c.norm()).collect();
    assert_eq!(norms[..2], [1.0, 2.0]);
    // Clipped rows sit just inside c, by the shared rounding margin (d + 8)·ε.
    assert!(
        norms[2..].iter().all(|r| (2.5 * (1.0 - 1e-14)..=2.5).contains(r)),
        "{norms:?}"
    );
}

/// Rows clipped at c have norm ≤ c, computed or exact, also for the rows that the naive
/// x·(c/‖x‖₂) leaves just outside (it did for hundreds of these before `clip_rows` used the
/// upload's margin): the algorithm is calibrated to β = c.
#[test]
fn clipped_rows_never_exceed_c_even_by_rounding() {
    use crate::linalg::testing::{columns_beyond, on_adversarial_rows};
    on_adversarial_rows(50, |d, c, rows| {
        assert_eq!(columns_beyond(&clip_rows(rows, c), c), 0, "d = {d}, c = {c}");
    });
}

/// `with_eigenvalues` on a clipped job: the Rayleigh quotients are calibrated to the released
/// clip bound c (Δ = √2·c² under replace_one), not to β (Δ = √2·β²), at the ρ_e charged, so
/// their noise falls by (β/c)², about 100× here; the job costs what it cost before.
#[test]
fn clipped_eigenvalues_are_calibrated_to_the_released_bound() {
    use crate::algorithms::dp_oja::DpOja;
    use crate::algorithms::eigenvalues::{self, RELEASE as EIGENVALUE};
    let (xt, c) = mostly_unit_records();
    let rho = 1.0;
    let prepared = DpOja
        .prepare(
            json!({"k": 2, "with_eigenvalues": true, "clip": {"quantile": 0.5, "share": 0.2}}),
            &c,
            &target(rho),
        )
        .expect("prepared");
    assert!(prepared.cost.rho <= rho * (1.0 + 1e-12));
    let charged: eigenvalues::EigenvalueConfig =
        serde_json::from_value(prepared.config["eigenvalues"].clone()).expect("stored eigenvalue release");
    assert!((charged.sensitivity - std::f64::consts::SQRT_2 * 100.0).abs() < 1e-9);
    let ((out, released), audit) = with_audited_env(5, |env| {
        let out = DpOja.run_prepared(
            &prepared.config,
            Run {
                input: crate::algorithms::DataInput::Records { xt: (&xt).into() },
                ctx: &c,
                env,
            },
        );
        (out, env.released().to_vec())
    });
    assert_eq!(out.expect("run").eigenvalues.map(|e| e.len()), Some(2));
    let clip = released
        .iter()
        .find(|(name, _)| *name == "clip_norm")
        .and_then(|(_, v)| v.as_f64())
        .expect("the clip bound is released");
    assert!(clip < 2.0, "the median norm is 1: c = {clip}");
    let draw = audit
        .draws
        .iter()
        .find(|d| d.label == EIGENVALUE)
        .expect("eigenvalue noise");
    let expected = charged.at_bounds(&clipped_context(&c, clip));
    assert!((expected.sensitivity - std::f64::consts::SQRT_2 * clip * clip).abs() < 1e-12);
    // The lattice widens the sd by its grid penalty, a relative 1e-5 at most.
    let widened = draw.scale / expected.noise_sd;
    assert!(
        (1.0..1.0 + 1e-5).contains(&widened),
        "{} vs {}",
        draw.scale,
        expected.noise_sd
    );
    assert!(expected.cost().rho <= charged.cost().rho);
    assert!(
        draw.scale < charged.noise_sd / 20.0,
        "{} vs {}",
        draw.scale,
        charged.noise_sd
    );
}

#[test]
fn clipped_statistics_from_the_kept_blocks_equal_a_pass_over_the_clipped_records() {
    // Norms 1..=100: clipping at 90.5 shortens ten records, at 30.5 seventy.
    let xt = ramp(100, 6);
    let blocks = ClipBlocks::build((&xt).into(), 7);
    let records = Records::from(&xt).with_clip_blocks(&blocks);
    for c in [30.5, 90.5, 200.0] {
        let copy = ClippedRecords::new(records, c, false, None);
        assert!(copy.copied());
        assert_eq!(
            copy.records().as_slice(),
            clip_rows(&xt, c).as_slice(),
            "the clipped records are clip_rows'"
        );
        let stats = copy.stats().expect("blocks attached: statistics derived");
        let direct = RecordStats::of(copy.records().without_stats());
        assert_eq!(stats.n, direct.n);
        assert!(
            (&stats.gram - &direct.gram).amax() <= 1e-12 * direct.gram.amax(),
            "c {c}: gram"
        );
        assert!(
            (&stats.sums - &direct.sums).amax() <= 1e-12 * direct.sums.amax(),
            "c {c}: sums"
        );
        // An algorithm that reads only the statistics gets the same ones and no copy: records
        // of the same shape whose values are all zero, so none of them is an unclipped value.
        let bare = ClippedRecords::new(records, c, true, None);
        assert!(!bare.copied());
        assert_eq!(bare.stats(), Some(stats));
        assert_eq!(bare.records().stats(), Some(stats));
        assert_eq!((bare.records().d(), bare.records().n()), (6, 100));
        assert!(bare.records().as_slice().iter().all(|&v| v == 0.0));
    }
    // Without kept blocks: the clipped copy for an algorithm that reads it (no statistics
    // derived: the kernels read the copy); one segmented pass and no copy for one that reads
    // only the statistics.
    let plain = ClippedRecords::new(&xt, 90.5, false, None);
    assert!(plain.stats().is_none() && plain.copied());
    assert_eq!(plain.records().as_slice(), clip_rows(&xt, 90.5).as_slice());
    let bare = ClippedRecords::new(&xt, 90.5, true, None);
    assert!(!bare.copied());
    assert_eq!(
        bare.stats(),
        Some(&RecordStats::of((&clip_rows(&xt, 90.5)).into()))
    );
    assert!(bare.records().as_slice().iter().all(|&v| v == 0.0));
}

#[test]
fn clipped_statistics_from_the_kept_statistics_and_the_tail_equal_a_pass_over_the_clipped_records() {
    // Norms 1..=100: clipping at 90.5 shortens ten records, at 30.5 seventy.
    let xt = ramp(100, 6);
    let raw = RecordStats::of((&xt).into());
    let blocks = ClipBlocks::build((&xt).into(), 4);
    for (c, m) in [(90.5, 10), (90.5, 25), (30.5, 70), (30.5, 100)] {
        let direct = RecordStats::of((&clip_rows(&xt, c)).into());
        // Kept statistics with or without blocks: m ≤ L = 25 takes the tail, beyond it the
        // blocks; without blocks always the tail.
        for with_blocks in [false, true] {
            let mut records = Records::from(&xt).with_stats(&raw);
            if with_blocks {
                records = records.with_clip_blocks(&blocks);
            }
            let bare = ClippedRecords::new(records, c, true, Some(m));
            assert!(!bare.copied());
            let stats = bare.stats().expect("statistics derived");
            assert_eq!(stats.n, 100);
            assert!(
                (&stats.gram - &direct.gram).amax() <= 1e-12 * direct.gram.amax(),
                "c {c}, m {m}"
            );
            assert!(
                (&stats.sums - &direct.sums).amax() <= 1e-12 * direct.sums.amax(),
                "c {c}, m {m}"
            );
            assert!(bare.records().as_slice().iter().all(|&v| v == 0.0));
        }
    }
    // A bound m below the records shortened (never in practice): the full pass instead, with
    // the same result.
    let records = Records::from(&xt).with_stats(&raw);
    let bare = ClippedRecords::new(records, 30.5, true, Some(69));
    let direct = RecordStats::of((&clip_rows(&xt, 30.5)).into());
    assert_eq!(bare.stats(), Some(&direct));
}

/// The released c shortens at most m = ⌈(1 − q)·n + 40σ⌉ records: the search's last downward
/// step counted the records the clip at c keeps. Over many runs at every q, with few records
/// exactly at the grid points the search visits.
#[test]
fn the_released_bound_shortens_no_more_records_than_the_tail_bound() {
    let (d, n) = (5, 2000);
    let xt = crate::algorithms::testing::spiked_records(4, d, n, &[3.0, 1.0], 0.3, 1.0);
    let norms: Vec<f64> = Records::from(&xt).norms().into_owned();
    let beta = norms.iter().copied().fold(0.0, f64::max);
    let context = ctx(d, Some(n), ro(beta, 2.0 * beta));
    for (q, rho) in [(0.5, 0.01), (0.9, 0.1), (0.98, 1.0), (0.999, 100.0)] {
        let config = config(q, 0.5, &context, rho);
        for seed in 0..20 {
            let (c, _) = with_audited_env(seed, |env| config.search(&xt, env));
            let c = c.expect("search");
            let Some(m) = config.tail_bound(Some(n), c) else {
                assert_eq!(c, beta, "only c = β has no bound");
                continue;
            };
            let shortened = norms.iter().filter(|&&r| r > c * (1.0 - margin(d))).count();
            assert!(shortened <= m, "q {q}, seed {seed}: {shortened} > {m}");
            assert!(m < n || q < 0.51, "q {q}: m = {m} is no saving");
        }
        assert_eq!(config.tail_bound(None, beta / 2.0), None, "n private: no bound");
        assert_eq!(config.tail_bound(Some(n), beta), None, "c = β: no bound");
    }
}

/// Each algorithm whose catalog entry says the statistics suffice
/// ([`crate::algorithms::AlgorithmInfo::stats_suffice`]) releases the same on records whose
/// values are all zero but which carry the real records' statistics as on the real records:
/// it reads nothing but the statistics, so a clipped job may hand it no clipped copy. With
/// the eigenvalue release too, which reads the same input.
#[test]
fn the_algorithms_said_to_need_only_the_statistics_read_nothing_else() {
    let (d, n) = (4, 3000);
    let xt = crate::algorithms::testing::spiked_records(12, d, n, &[4.0, 2.0], 0.3, 1.0);
    let stats = RecordStats::of((&xt).into());
    let zeros = Matrix::zeros(d, n);
    let mut c = ctx(d, Some(n), ro(1.0, 2.0));
    c.public = true;
    let mut claimed = Vec::new();
    for alg in crate::algorithms::registry() {
        let info = alg.info();
        if !info.stats_suffice {
            continue;
        }
        claimed.push(info.name);
        let params = match info.name {
            "coherent_power" => json!({"k": 2, "coherence_bound": d, "clip": "none"}),
            "exact" => json!({"k": 2}),
            _ => json!({"k": 2, "clip": "none", "with_eigenvalues": true}),
        };
        let target = PrivacyTarget {
            public_default: false,
            rho: 10.0,
            delta: Some(1e-6),
            epsilon: None,
        };
        let prepared = alg
            .prepare(params, &c, &target)
            .unwrap_or_else(|e| panic!("{}: {e}", info.name));
        let run = |xt: Records<'_>| {
            let input = crate::algorithms::DataInput::Records { xt };
            let (out, _) = run_prepared_audited(*alg, &prepared.config, input, &c, 9);
            out.unwrap_or_else(|e| panic!("{}: {e:?}", info.name))
        };
        let real = run(Records::from(&xt).with_stats(&stats));
        let bare = run(Records::from(&zeros).with_stats(&stats));
        assert_eq!(real.basis, bare.basis, "{}: reads the records", info.name);
        assert_eq!(
            real.eigenvalues, bare.eigenvalues,
            "{}: reads the records",
            info.name
        );
    }
    assert!(claimed.contains(&"noisy_power") && claimed.contains(&"analyze_gauss"));
}

#[test]
fn a_clipped_job_on_kept_blocks_releases_what_it_releases_reading_the_records() {
    let (xt, c) = mostly_unit_records();
    let blocks = ClipBlocks::build((&xt).into(), 5);
    let stats = RecordStats::of((&xt).into());
    let prepared = AnalyzeGauss
        .prepare(
            json!({"k": 2, "clip": {"quantile": 0.5, "share": 0.2}}),
            &c,
            &target(1.0),
        )
        .expect("prepared");
    let run = |xt: Records<'_>| {
        let input = crate::algorithms::DataInput::Records { xt };
        let (out, _) = run_prepared_audited(&AnalyzeGauss, &prepared.config, input, &c, 5);
        out.expect("run")
    };
    let plain = run((&xt).into());
    let kept = run(Records::from(&xt).with_stats(&stats).with_clip_blocks(&blocks));
    let diff = (&kept.basis - &plain.basis).amax();
    assert!(diff <= 1e-8, "bases differ by {diff:e}");
}
