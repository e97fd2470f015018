use super::*;
use crate::algorithms::testing::with_audited_env;
use crate::privacy::noise::RecordingAudit;
use crate::privacy::testing::check_laplace_scale;

fn run_select(
    hist: StabilityHistogram,
    counts: &BTreeMap<i64, usize>,
    seed: u64,
) -> (Option<i64>, RecordingAudit) {
    with_audited_env(seed, |env| {
        hist.select(counts, "test_histogram", env).expect("calibrated")
    })
}

#[test]
fn threshold_and_scale_are_the_karwa_vadhan_values() {
    let h = StabilityHistogram {
        epsilon: 0.5,
        delta: 0.01,
    };
    // 1 + 2·ln(200)/0.5 = 1 + 4·5.298317366548036.
    assert!((h.threshold() - 22.193269466192144).abs() < 1e-12);
    assert_eq!(h.scale(), 4.0);
    let tiny = StabilityHistogram {
        epsilon: 1.0,
        delta: 1e-320,
    };
    assert!(tiny.threshold().is_finite());
}

#[test]
fn counts_non_empty_bins() {
    let c = count([3_i64, -1, 3, 7, 3, -1]);
    assert_eq!(c.into_iter().collect::<Vec<_>>(), [(-1, 2), (3, 3), (7, 1)]);
}

#[test]
fn picks_the_dominant_bin_and_returns_bottom_below_threshold() {
    let h = StabilityHistogram {
        epsilon: 1.0,
        delta: 1e-3,
    };
    // Threshold 1 + 2·ln(2000) ≈ 16.2; Laplace(2) noise.
    let counts = count((0..200).map(|i| if i < 150 { 4_i64 } else { i64::from(i % 5) }));
    let (bin, audit) = run_select(h, &counts, 1);
    assert_eq!(bin, Some(4));
    assert_eq!(audit.draws.len(), 1);
    assert_eq!(audit.draws[0].values.len(), counts.len());
    let sparse = count(0..40_i64);
    assert_eq!(run_select(h, &sparse, 2).0, None);
    assert_eq!(run_select(h, &BTreeMap::new(), 3).0, None);
}

/// A bin holding a single value (the neighbour's extra bin) is kept with probability δ/4.
#[test]
fn a_lone_value_is_kept_with_probability_delta_over_four() {
    let h = StabilityHistogram {
        epsilon: 1.0,
        delta: 0.2,
    };
    let counts = count([0_i64]);
    let trials = 20_000;
    let kept = (0..trials)
        .filter(|&s| run_select(h, &counts, 100 + s).0.is_some())
        .count() as f64;
    let p = h.delta / 4.0;
    let sd = (p * (1.0 - p) / trials as f64).sqrt();
    assert!(((kept / trials as f64) - p).abs() < 5.0 * sd, "kept {kept}");
}

/// The audit sees Laplace(2/ε) noise; 10 % too little noise is caught.
fn audit(factor: f64) -> Result<(), String> {
    let epsilon = 0.7;
    let h = StabilityHistogram {
        epsilon: epsilon / factor,
        delta: 1e-4,
    };
    let counts = count((0..6000_i64).flat_map(|b| [b, b]));
    let (_, audit) = run_select(h, &counts, 9);
    let values: Vec<f64> = audit.draws.iter().flat_map(|d| d.values.clone()).collect();
    assert_eq!(values.len(), 6000);
    check_laplace_scale(&values, 2.0 / epsilon)
}

#[test]
fn noise_has_the_calibrated_scale() {
    assert!(audit(1.0).is_ok(), "{:?}", audit(1.0));
}

#[test]
fn under_noised_histogram_fails_the_audit() {
    assert!(audit(0.9).is_err());
}
