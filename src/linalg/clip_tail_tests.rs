use super::*;
use crate::linalg::Matrix;
use crate::linalg::clip::{clip_columns_l2, l2_norm};
use crate::linalg::testing::gaussian;

/// n records of d features with norms spread over two decades and two zero records.
fn spread(d: usize, n: usize, seed: u64) -> Matrix {
    let mut xt = gaussian(d, n, seed);
    for (i, mut column) in xt.column_iter_mut().enumerate() {
        column *= 10f64.powf(2.0 * ((i * 37) % n) as f64 / n as f64);
    }
    for i in [0, n / 2] {
        xt.column_mut(i).fill(0.0);
    }
    xt
}

fn norms(xt: &Matrix) -> Vec<f64> {
    xt.column_iter().map(|c| l2_norm(c.as_slice())).collect()
}

/// The statistics of `xt` clipped at c by the one clipping function, in one direct pass.
fn direct(xt: &Matrix, c: f64) -> RecordStats {
    let mut clipped = xt.clone();
    clip_columns_l2(&mut clipped, c);
    RecordStats::of(Records::from(&clipped))
}

fn relative_error(got: &RecordStats, want: &RecordStats) -> (f64, f64) {
    let gram = (&got.gram - &want.gram).amax() / want.gram.amax().max(f64::MIN_POSITIVE);
    let sums = (&got.sums - &want.sums).amax() / want.sums.amax().max(f64::MIN_POSITIVE);
    (gram, sums)
}

#[test]
fn the_correction_equals_a_direct_clipped_pass_at_every_quantile() {
    let (d, n) = (9, 211);
    let xt = spread(d, n, 3);
    let raw = RecordStats::of(Records::from(&xt));
    let norms = norms(&xt);
    let mut sorted = norms.clone();
    sorted.sort_by(f64::total_cmp);
    for q in [0.01, 0.3, 0.5, 0.9, 0.99] {
        let c = sorted[((n - 1) as f64 * q) as usize].max(1e-3);
        let shortened = norms.iter().filter(|&&r| r > c * (1.0 - margin(d))).count();
        for m in [shortened, shortened + 7, n] {
            let got = clipped_stats_by_tail(Records::from(&xt), &raw, &norms, c, m).expect("within m");
            let (gram, sums) = relative_error(&got, &direct(&xt, c));
            assert!(
                gram <= 1e-10 && sums <= 1e-10,
                "q {q}, m {m}: errors {gram:e}, {sums:e}"
            );
            assert_eq!(got.gram, got.gram.transpose(), "exactly symmetric");
            assert_eq!(got.n, n);
        }
    }
}

#[test]
fn a_bound_above_every_norm_changes_nothing_and_more_shortened_records_than_m_give_none() {
    let (d, n) = (5, 60);
    let xt = spread(d, n, 8);
    let raw = RecordStats::of(Records::from(&xt));
    let norms = norms(&xt);
    let largest = norms.iter().copied().fold(0.0, f64::max);
    let same =
        clipped_stats_by_tail(Records::from(&xt), &raw, &norms, 2.0 * largest, 0).expect("none shortened");
    assert_eq!(same, raw);
    // At the median about half are shortened: m one short of them refuses.
    let c = {
        let mut sorted = norms.clone();
        sorted.sort_by(f64::total_cmp);
        sorted[n / 2]
    };
    let shortened = norms.iter().filter(|&&r| r > c * (1.0 - margin(d))).count();
    assert!(shortened > 0);
    assert!(clipped_stats_by_tail(Records::from(&xt), &raw, &norms, c, shortened - 1).is_none());
    assert!(clipped_stats_by_tail(Records::from(&xt), &raw, &norms, c, shortened).is_some());
}
