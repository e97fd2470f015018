//! The study's private clip: its cost against the written derivation, the noise a quorum's sum
//! carries against σ computed here from the spec (and a 10 % under-noised variant failing that
//! check), the histogram and the reading, the central `auto` rule, and the utility of both
//! methods at the same share of ρ on rows with spread norms over three unequal sites.

use serde_json::json;

use super::*;
use crate::algorithms::Algorithm;
use crate::algorithms::clipping::{self, auto_tail};
use crate::algorithms::noisy_power::NoisyPower;
use crate::algorithms::testing::{
    assert_audit_catches_under_noise, ctx, run_on_records, spiked_records, target, with_audited_env,
};
use crate::linalg::subspace::captured_energy;
use crate::linalg::{Matrix, gram_t};
use crate::privacy::testing::check_gaussian_scale;

const RO: Neighbours = Neighbours::ReplaceOne {
    beta: 2.0,
    alpha: 20.0,
};
const AR: Neighbours = Neighbours::AddRemove {
    beta: 2.0,
    alpha: 20.0,
};

fn clip(method: Method, neighbours: &Neighbours) -> StudyClip {
    StudyClip::configure(method, 0.8, 0.1, 0.5, neighbours, 20, 3).expect("valid")
}

#[test]
fn cost_is_the_written_gaussian_mechanism_and_never_more_than_the_share() {
    // Histogram: one release, Δ = √2 (replace_one) or 1 (add_remove); ρ = Δ²/(2σ²).
    // Search: T = 8 releases, Δ = 1 or max(q, 1 − q) = 0.8; ρ = T·Δ²/(2σ²).
    let cases = [
        (Method::Histogram, RO, 2f64.sqrt(), 1.0),
        (Method::Histogram, AR, 1.0, 1.0),
        (Method::Search, RO, 1.0, 8.0),
        (Method::Search, AR, 0.8, 8.0),
    ];
    for (method, neighbours, delta, releases) in cases {
        let c = clip(method, &neighbours);
        assert_eq!(c.sensitivity, delta, "{method:?} {neighbours:?}");
        let written = releases * delta * delta / (2.0 * c.noise_sd * c.noise_sd);
        assert!(
            (written - c.rho).abs() <= 1e-12 * written,
            "{written} vs {}",
            c.rho
        );
        assert!(c.rho <= 0.1 * 0.5, "never more than the share: {}", c.rho);
        assert!(c.rho >= 0.1 * 0.5 * (1.0 - 1e-9));
        assert_eq!(c.site_sd(), c.noise_sd / 3f64.sqrt());
    }
}

#[test]
fn bad_clips_are_refused() {
    let entry = Neighbours::Entry { u: 1.0 };
    for (q, share, rho, neighbours, t) in [
        (0.0, 0.1, 1.0, RO, 2),
        (1.0, 0.1, 1.0, RO, 2),
        (f64::NAN, 0.1, 1.0, RO, 2),
        (0.5, 0.0, 1.0, RO, 2),
        (0.5, 1.0, 1.0, RO, 2),
        (0.5, 0.1, f64::INFINITY, RO, 2),
        (0.5, 0.1, 0.0, RO, 2),
        (0.5, 0.1, 1.0, RO, 0),
        (0.5, 0.1, 1.0, entry, 2),
    ] {
        assert!(
            StudyClip::configure(Method::Histogram, q, share, rho, &neighbours, 5, t).is_err(),
            "{q} {share} {rho} {neighbours:?} {t}"
        );
    }
}

#[test]
fn the_histogram_counts_each_row_once_on_the_grid_of_the_clip_test() {
    let c = clip(Method::Histogram, &RO);
    let edges = c.edges();
    assert_eq!(edges.len(), BINS + 1);
    assert!((edges[BINS] - 2.0).abs() < 1e-12 && (edges[0] - 2.0 / 256.0).abs() < 1e-12);
    let keep = 1.0 - margin(20);
    // A zero row, one just inside the clip at c_5, one just outside it, one above every limit.
    let norms = [0.0, edges[5] * keep, edges[5] * keep * 1.000_001, 2.0];
    let h = c.histogram(&norms);
    assert_eq!(h.len(), BINS + 2);
    assert_eq!(h.iter().sum::<f64>(), 4.0);
    assert_eq!((h[0], h[5], h[6], h[BINS + 1]), (1.0, 1.0, 1.0, 1.0));
    // Without noise, the reading is the smallest grid point whose clip keeps q of the rows.
    let norms: Vec<f64> = (1..=100).map(|i| 2.0 * f64::from(i) / 100.0).collect();
    let read = c.read_histogram(&c.histogram(&norms), Some(100));
    let kept = norms.iter().filter(|r| **r <= read * keep).count();
    assert!(kept >= 80, "{kept}");
    let below = edges.iter().copied().rfind(|e| *e < read).unwrap();
    assert!(norms.iter().filter(|r| **r <= below * keep).count() < 80);
    // Nothing reaches q: β.
    assert_eq!(c.read_histogram(&vec![0.0; BINS + 2], Some(100)), 2.0);
}

#[test]
fn the_search_moves_as_the_central_search_does() {
    let c = clip(Method::Search, &RO);
    let mut search = crate::algorithms::clipping::Bracket::new(2.0);
    assert!((search.next_c() - 2.0 * (-4f64).exp2()).abs() < 1e-12);
    search.absorb(1.0);
    assert!((search.c() - 2.0 * (-4f64).exp2()).abs() < 1e-12);
    search.absorb(-1.0);
    assert!((search.next_c() - 2.0 * (-5f64).exp2()).abs() < 1e-12);
    // A site's score is its part of Σ(1[‖x‖ ≤ t(c)] − q).
    let norms = [0.1, 0.2, 1.9];
    assert!((c.score(&norms, 1.0) - (2.0 - 0.8 * 3.0)).abs() < 1e-12);
}

/// The noise in the sum of `t` sites' shares, minus the true sum, over `runs` runs.
fn quorum_noise(method: Method, neighbours: Neighbours, factor: f64, runs: u64) -> (Vec<f64>, f64) {
    let (q, share, rho, d, t) = (0.8, 0.1, 0.5, 20, 3u32);
    let mut c = StudyClip::configure(method, q, share, rho, &neighbours, d, t).expect("valid");
    // σ from the spec, not from the code: Δ·sqrt(T/(2·share·ρ)).
    let (delta, releases) = match (method, neighbours) {
        (Method::Histogram, Neighbours::ReplaceOne { .. }) => (2f64.sqrt(), 1.0),
        (Method::Histogram, _) => (1.0, 1.0),
        (Method::Search, Neighbours::ReplaceOne { .. }) => (1.0, 8.0),
        (Method::Search, _) => (0.8, 8.0),
    };
    let spec_sd = delta * (releases / (2.0 * share * rho)).sqrt();
    c.noise_sd *= factor;
    let sites: Vec<Vec<f64>> = (0..t)
        .map(|s| (0..50).map(|i| f64::from(s * 50 + i) / 80.0).collect())
        .collect();
    let mut noise = Vec::new();
    for run in 0..runs {
        let (sums, _audit) = with_audited_env(run, |env| {
            let mut total = Vec::new();
            for site in &sites {
                let share = match method {
                    Method::Histogram => c.histogram_share(site, env).unwrap(),
                    Method::Search => vec![c.score_share(site, 1.0, env).unwrap()],
                };
                if total.is_empty() {
                    total = share;
                } else {
                    total.iter_mut().zip(share).for_each(|(a, b)| *a += b);
                }
            }
            total
        });
        let truth: Vec<f64> = match method {
            Method::Histogram => {
                let mut h = vec![0.0; BINS + 2];
                for site in &sites {
                    h.iter_mut().zip(c.histogram(site)).for_each(|(a, b)| *a += b);
                }
                h
            }
            Method::Search => vec![sites.iter().map(|s| c.score(s, 1.0)).sum()],
        };
        noise.extend(sums.iter().zip(&truth).map(|(got, want)| got - want));
    }
    (noise, spec_sd)
}

fn audit(method: Method, neighbours: Neighbours, factor: f64) -> Result<(), String> {
    let runs = match method {
        Method::Histogram => 80, // 34 entries each: 2 720 draws
        Method::Search => 2_500,
    };
    let (noise, spec_sd) = quorum_noise(method, neighbours, factor, runs);
    check_gaussian_scale(&noise, spec_sd)
}

#[test]
fn a_quorums_sum_carries_the_calibrated_noise() {
    for method in [Method::Histogram, Method::Search] {
        for neighbours in [RO, AR] {
            let result = audit(method, neighbours, 1.0);
            assert!(result.is_ok(), "{method:?} {neighbours:?}: {result:?}");
        }
    }
}

#[test]
fn under_noised_shares_fail_the_audit() {
    for method in [Method::Histogram, Method::Search] {
        for neighbours in [RO, AR] {
            assert_audit_catches_under_noise(|factor| audit(method, neighbours, factor), 0.9);
        }
    }
}

#[test]
fn auto_is_the_central_rule() {
    let (n, d, k, rho) = (3_000, 20, 2, 0.01);
    let c = StudyClip::auto(Method::Histogram, Some(n), k, rho, &RO, d, 2)
        .expect("valid")
        .expect("clips");
    assert_eq!(c.quantile, 1.0 - auto_tail(n, d, rho, k, 1.0).unwrap());
    assert_eq!(c.share, clipping::AUTO_SHARE);
    let central = clipping::auto_choice(&ctx(d, Some(n), RO), rho, k, 1.0).unwrap();
    assert_eq!((c.quantile, c.share), central);
    // Private n: the median, as centrally; a budget so large the central rule does not clip.
    let median = StudyClip::auto(Method::Search, None, k, rho, &AR, d, 2)
        .unwrap()
        .unwrap();
    assert_eq!(median.quantile, clipping::AUTO_QUANTILE);
    assert_eq!(
        StudyClip::auto(Method::Histogram, Some(n), k, 1e6, &RO, d, 2).unwrap(),
        None
    );
}

/// Rows with norms spread below the declared bound, as real rows are: a spiked model whose
/// rows are scaled by 10^(−decades·u), u uniform in [0, 1), declared β the largest norm.
fn spread_rows(seed: u64, d: usize, n: usize, decades: f64) -> (Matrix, f64) {
    let mut xt = spiked_records(seed, d, n, &[8.0, 4.0], 0.5, 1e9);
    for (i, mut column) in xt.column_iter_mut().enumerate() {
        let u = ((i as u64 * 7919 + seed) % 1000) as f64 / 1000.0;
        column *= 10f64.powf(-decades * u);
    }
    let beta = xt.column_iter().map(|c| c.norm()).fold(0.0, f64::max);
    (xt, beta)
}

/// Mean captured energy (on the pooled rows' C) of `noisy_power` at ρ_rest on the rows
/// clipped at the c each run of `clip_of` releases.
fn utility(xt: &Matrix, beta: f64, shares: &[usize], rho: f64, method: Option<Method>, runs: u64) -> f64 {
    let (d, n) = xt.shape();
    let neighbours = Neighbours::ReplaceOne {
        beta,
        alpha: (d as f64).sqrt() * beta,
    };
    let full = ctx(d, Some(n), neighbours);
    let c_matrix = gram_t(xt) / n as f64;
    let mut bounds = vec![0];
    for s in shares {
        bounds.push(bounds.last().unwrap() + s);
    }
    let norms: Vec<Vec<f64>> = bounds
        .windows(2)
        .map(|w| (w[0]..w[1]).map(|i| xt.column(i).norm()).collect())
        .collect();
    let mut total = 0.0;
    for run in 0..runs {
        let (c, rho_rest) = match method {
            None => (beta, rho),
            Some(method) => {
                let clip = StudyClip::auto(method, Some(n), 2, rho, &neighbours, d, 2)
                    .unwrap()
                    .expect("clips");
                let (c, _) = with_audited_env(run, |env| clip.simulate(&norms, Some(n), env).unwrap());
                (c, rho - clip.rho)
            }
        };
        let clipped = clipping::clip_rows(xt, c);
        let at_c = clipping::clipped_context(&full, c);
        let config = NoisyPower
            .configure(
                serde_json::from_value(json!({ "k": 2 })).unwrap(),
                &at_c,
                &target(rho_rest),
            )
            .expect("configured");
        let (out, _) = run_on_records(&NoisyPower, &clipped, &config, &at_c, 500 + run);
        total += captured_energy(&out.expect("run").basis, &c_matrix);
    }
    total / runs as f64
}

/// Issue 38's cell: d = 20, k = 2, three sites holding 60 %, 30 % and 10 % of 3 000 rows, ρ =
/// 0.01. Both methods must clearly beat the declared bound; the figures are in
/// docs/design/federation.md.
#[test]
fn either_method_beats_the_declared_bound_at_the_same_share() {
    let (xt, beta) = spread_rows(38, 20, 3_000, 1.5);
    let shares = [1_800, 900, 300];
    let runs = 12;
    let unclipped = utility(&xt, beta, &shares, 0.01, None, runs);
    let histogram = utility(&xt, beta, &shares, 0.01, Some(Method::Histogram), runs);
    let search = utility(&xt, beta, &shares, 0.01, Some(Method::Search), runs);
    eprintln!("unclipped {unclipped:.4}, histogram {histogram:.4}, search {search:.4}");
    assert!(histogram > unclipped + 0.05, "{histogram} vs {unclipped}");
    assert!(search > unclipped + 0.05, "{search} vs {unclipped}");
}

/// The comparison of the two methods written in docs/design/federation.md: mean captured
/// energy over 40 runs per cell.
#[test]
#[ignore = "experiment: cargo test --lib study_clip_methods -- --ignored --nocapture"]
fn study_clip_methods_compared() {
    let shares = [1_800, 900, 300];
    eprintln!("| spread (decades) | ρ | declared β | histogram | search |");
    for decades in [0.5, 1.0, 1.5] {
        let (xt, beta) = spread_rows(38, 20, 3_000, decades);
        for rho in [0.002, 0.01, 0.05] {
            let runs = 40;
            let unclipped = utility(&xt, beta, &shares, rho, None, runs);
            let histogram = utility(&xt, beta, &shares, rho, Some(Method::Histogram), runs);
            let search = utility(&xt, beta, &shares, rho, Some(Method::Search), runs);
            eprintln!("| {decades} | {rho} | {unclipped:.3} | {histogram:.3} | {search:.3} |");
        }
    }
}
