use super::*;
use crate::algorithms::clipping::{AUTO_MIN_TAIL, auto_tail};
use crate::algorithms::testing::with_audited_env;

fn replace_one() -> Neighbours {
    Neighbours::ReplaceOne {
        beta: 2.0,
        alpha: 2.0 * 20f64.sqrt(),
    }
}

fn add_remove() -> Neighbours {
    Neighbours::AddRemove {
        beta: 2.0,
        alpha: 2.0 * 20f64.sqrt(),
    }
}

#[test]
fn auto_clip_costs_its_share_and_passes_its_own_check() {
    for neighbours in [replace_one(), add_remove()] {
        let clip = PowerClip::configure(ClipAsk::Auto, 0.01, &neighbours, 20, 3, 2, 10_000).unwrap();
        assert!(clip.cost().rho <= AUTO_SHARE * 0.01 * (1.0 + 1e-12));
        assert!(clip.cost().rho >= AUTO_SHARE * 0.01 * (1.0 - 1e-9));
        let checked = clip.check(&neighbours, 20, 3, 2, 10_000).unwrap();
        assert_eq!(checked.rho, clip.cost().rho);
        assert_eq!(
            clip.auto_quantile,
            matches!(neighbours, Neighbours::ReplaceOne { .. })
        );
    }
}

#[test]
fn a_clip_that_does_not_match_its_study_is_refused() {
    let clip = PowerClip::configure(ClipAsk::Auto, 0.01, &replace_one(), 20, 3, 2, 10_000).unwrap();
    // Another β, d or t than the study's.
    assert!(
        clip.check(
            &Neighbours::ReplaceOne {
                beta: 1.0,
                alpha: 4.0
            },
            20,
            3,
            2,
            10_000
        )
        .is_err()
    );
    assert!(clip.check(&replace_one(), 21, 3, 2, 10_000).is_err());
    assert!(clip.check(&replace_one(), 20, 3, 3, 10_000).is_err());
    // A replace_one clip (Δ = 1, q free) shown as an add_remove study's: refused.
    assert!(clip.check(&add_remove(), 20, 3, 2, 10_000).is_err());
    // A stated sensitivity below what the relation needs.
    let mut low = PowerClip::configure(
        ClipAsk::Quantile {
            quantile: 0.9,
            share: 0.1,
        },
        0.01,
        &add_remove(),
        20,
        3,
        2,
        10_000,
    )
    .unwrap();
    assert!(low.check(&add_remove(), 20, 3, 2, 10_000).is_ok());
    low.search.sensitivity = 0.5;
    assert!(low.check(&add_remove(), 20, 3, 2, 10_000).is_err());
    // An encoding that would wrap for far more records per site.
    assert!(clip.check(&replace_one(), 20, 3, 2, 1 << 40).is_err());
}

#[test]
fn steps_accept_c_and_q_only_in_range() {
    let clip = PowerClip::configure(ClipAsk::Auto, 0.01, &replace_one(), 20, 3, 2, 10_000).unwrap();
    assert!(clip.check_c(2.0).is_ok());
    assert!(clip.check_c(2.0 / 256.0).is_ok());
    for c in [2.0 / 257.0, 2.0000001, 0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(clip.check_c(c).is_err(), "{c}");
    }
    for q in [0.5, 0.75, 0.98] {
        assert!(clip.check_quantile(q).is_ok(), "{q}");
    }
    for q in [0.49, 0.99, 0.0, 1.0, f64::NAN] {
        assert!(clip.check_quantile(q).is_err(), "{q}");
    }
    let fixed = PowerClip::configure(ClipAsk::Auto, 0.01, &add_remove(), 20, 3, 2, 10_000).unwrap();
    assert!(fixed.check_quantile(0.5).is_ok());
    assert!(fixed.check_quantile(0.6).is_err());
}

#[test]
fn the_quantile_follows_the_central_rule_on_the_pooled_n() {
    let clip = PowerClip::configure(ClipAsk::Auto, 0.01, &replace_one(), 20, 3, 2, 1_000_000).unwrap();
    for n in [3_000u64, 100_000, 1_000_000] {
        let expected = 1.0 - auto_tail(n as usize, 20, 0.01, 2, 1.0).unwrap_or(AUTO_MIN_TAIL);
        assert_eq!(clip.quantile_for(Some(n), 2), expected);
    }
    // The median when n is not known.
    assert_eq!(clip.quantile_for(None, 2), AUTO_QUANTILE);
}

#[test]
fn a_sites_count_is_its_clamped_score_plus_noise_of_the_site_sd() {
    let clip = PowerClip::configure(ClipAsk::Auto, 0.01, &replace_one(), 20, 3, 2, 100).unwrap();
    let norms: Vec<f64> = (0..150).map(|i| 2.0 * f64::from(i) / 150.0).collect();
    let (words, audit) = with_audited_env(7, |env| clip.site_count(&norms, 1.0, 0.5, 100, env).unwrap());
    let value = clip.decode(&words).unwrap();
    let [draw] = audit.draws.as_slice() else {
        panic!("one draw")
    };
    assert_eq!(draw.label, COUNT_RELEASE);
    assert!((draw.scale / clip.search.site_sd() - 1.0).abs() < 1e-4);
    // 75 rows lie inside t(1.0), the score 75 − 0.5·150 = 0; the noise is the release's.
    assert!((value - draw.values[0]).abs() < 1e-6, "{value}");
    // A site with more rows than n_max is clamped to ±n_max.
    let many = vec![0.1; 1_000];
    let (words, audit) = with_audited_env(8, |env| clip.site_count(&many, 1.0, 0.5, 100, env).unwrap());
    let value = clip.decode(&words).unwrap();
    assert!((value - 100.0 - audit.draws[0].values[0]).abs() < 1e-6);
}

/// The noise of t sites' encoded counts summed as secure aggregation sums them (wrapping u64),
/// decoded: `runs` draws, and σ from the spec, Δ·sqrt(T/(2·share·ρ)), not from the code.
fn quorum_noise(neighbours: Neighbours, factor: f64, runs: u64) -> (Vec<f64>, f64) {
    let (rho, t) = (0.01, 3u32);
    let mut clip = PowerClip::configure(ClipAsk::Auto, rho, &neighbours, 20, 4, t, 1_000).unwrap();
    let delta = match neighbours {
        Neighbours::AddRemove { .. } => 0.5,
        _ => 1.0,
    };
    let spec_sd = delta * (8.0 / (2.0 * AUTO_SHARE * rho)).sqrt();
    clip.search.noise_sd *= factor;
    let sites: Vec<Vec<f64>> = (0..t)
        .map(|s| (0..40).map(|i| f64::from(s * 40 + i) / 60.0).collect())
        .collect();
    let truth: f64 = sites.iter().map(|n| score(n, 1.0, 0.5, 20)).sum();
    let noise = (0..runs)
        .map(|run| {
            let (sum, _) = with_audited_env(run, |env| {
                sites.iter().fold(0u64, |acc, norms| {
                    acc.wrapping_add(clip.site_count(norms, 1.0, 0.5, 1_000, env).unwrap()[0])
                })
            });
            clip.decode(&[sum]).unwrap() - truth
        })
        .collect();
    (noise, spec_sd)
}

fn audit(neighbours: Neighbours, factor: f64) -> Result<(), String> {
    let (noise, spec_sd) = quorum_noise(neighbours, factor, 2_500);
    crate::privacy::testing::check_gaussian_scale(&noise, spec_sd)
}

#[test]
fn a_quorums_encoded_counts_carry_the_calibrated_noise() {
    for neighbours in [replace_one(), add_remove()] {
        let result = audit(neighbours, 1.0);
        assert!(result.is_ok(), "{neighbours:?}: {result:?}");
    }
}

#[test]
fn under_noised_counts_fail_the_audit() {
    for neighbours in [replace_one(), add_remove()] {
        crate::algorithms::testing::assert_audit_catches_under_noise(|factor| audit(neighbours, factor), 0.9);
    }
}
