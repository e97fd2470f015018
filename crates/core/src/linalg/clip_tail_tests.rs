use super::*;
use crate::linalg::Matrix;
use crate::linalg::clip::l2_norm;
use crate::linalg::gather;
use crate::linalg::testing::{clipped_directly as direct, spread};

fn norms(xt: &Matrix) -> Vec<f64> {
    xt.column_iter().map(|c| l2_norm(c.as_slice())).collect()
}

/// How many of the records with these norms the clip at c shortens.
fn shortened(norms: &[f64], c: f64, d: usize) -> usize {
    norms.iter().filter(|&&r| r > c * (1.0 - margin(d))).count()
}

/// The norm at quantile q (the one at index ⌊(n − 1)·q⌋ in ascending order).
fn quantile(norms: &[f64], q: f64) -> f64 {
    let mut sorted = norms.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[((sorted.len() - 1) as f64 * q) as usize]
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
    for q in [0.01, 0.3, 0.5, 0.9, 0.99] {
        let c = quantile(&norms, q).max(1e-3);
        let shortened = shortened(&norms, c, d);
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
    let c = quantile(&norms, 0.5);
    let shortened = shortened(&norms, c, d);
    assert!(shortened > 0);
    assert!(clipped_stats_by_tail(Records::from(&xt), &raw, &norms, c, shortened - 1).is_none());
    assert!(clipped_stats_by_tail(Records::from(&xt), &raw, &norms, c, shortened).is_some());
}

#[test]
fn the_pages_read_are_every_page_whatever_records_the_clip_shortens() {
    // Issue 36: the records a clip shortens may lie anywhere; the pass must not read only
    // theirs. Three datasets of the same shape, clipped at the same c, m and norms spread alike,
    // whose long records are none, a few at the back, or many scattered.
    let (d, n, m) = (6, 400, 60);
    let c = 1.0;
    let base = spread(d, n, 5);
    let short = base.map(|v| v * 1e-3);
    let datasets = [
        short.clone(),
        lengthened(&short, &[n - 3, n - 2, n - 1]),
        lengthened(&short, &(1..n).step_by(7).collect::<Vec<_>>()),
    ];
    let mut walks = Vec::new();
    for xt in &datasets {
        let raw = RecordStats::of(Records::from(xt));
        let norms = norms(xt);
        let mut got = None;
        let walk = gather::touched::during(xt.as_slice(), || {
            got = clipped_stats_by_tail(Records::from(xt), &raw, &norms, c, m);
        });
        let got = got.expect("within m");
        let (gram, sums) = relative_error(&got, &direct(xt, c));
        assert!(gram <= 1e-10 && sums <= 1e-10, "errors {gram:e}, {sums:e}");
        walks.push(walk);
    }
    assert_eq!(walks[0], vec![(0, d * n)], "every value of the records, once");
    assert!(walks.iter().all(|walk| *walk == walks[0]));
}

/// `xt` with the records at `indices` scaled to norm 10.
fn lengthened(xt: &Matrix, indices: &[usize]) -> Matrix {
    let mut out = xt.clone();
    for &i in indices {
        let norm = l2_norm(out.column(i).as_slice());
        out.column_mut(i).scale_mut(10.0 / norm);
    }
    out
}
