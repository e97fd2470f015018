use std::sync::Mutex;

use super::*;
use crate::linalg::records::Residency;
use crate::linalg::testing::{assert_product_close, gaussian, max_abs, max_diff, naive_product};

/// (d, n) shapes: scalars, one record, one feature, square, wide, tall.
const SHAPES: [(usize, usize); 7] = [(1, 1), (1, 9), (6, 1), (8, 8), (3, 200), (90, 400), (260, 40)];

/// Segment lengths: one record, a few, uneven against n, and the production size.
fn segments(d: usize) -> [usize; 4] {
    [1, 3, 37, segment_len(d)]
}

#[test]
fn segments_hold_about_segment_bytes() {
    assert_eq!(segment_len(4096), 1024);
    assert_eq!(segment_len(500), SEGMENT_BYTES / 4000);
    assert_eq!(segment_len(0), SEGMENT_BYTES / 8);
    assert_eq!(segment_len(usize::MAX / 8), 1);
}

#[test]
fn gram_t_is_symmetric_and_matches_the_triple_loop_for_any_segment_length() {
    for (s, &(d, n)) in SHAPES.iter().enumerate() {
        let xt = gaussian(d, n, 50 + s as u64);
        let (want, bound) = naive_product(&xt, &xt.transpose());
        for segment in segments(d) {
            let g = gram_t_in_segments(Records::from(&xt), segment);
            assert_product_close(&g, &want, &bound, n);
            assert_eq!(g, g.transpose(), "gram_t must be exactly symmetric");
            assert!(g.diagonal().iter().all(|&x| x >= 0.0));
        }
        assert_eq!(
            gram_t(&xt),
            gram_t_in_segments(Records::from(&xt), segment_len(d))
        );
    }
}

#[test]
fn centred_gram_equals_the_gram_of_a_centred_copy() {
    for (s, &(d, n)) in SHAPES.iter().enumerate() {
        // Far from the origin, so that centring matters.
        let xt = gaussian(d, n, 80 + s as u64).add_scalar(3.0);
        let mean = xt.column_sum() / n as f64;
        let mut copy = xt.clone();
        for mut col in copy.column_iter_mut() {
            col -= &mean;
        }
        let want = gram_t(&copy);
        let bound = max_abs(&gram_t(&copy.abs()));
        for segment in segments(d) {
            let got = centred_gram_t_in_segments(Records::from(&xt), &mean, segment);
            assert_eq!(got, got.transpose());
            assert!(
                max_diff(&got, &want) <= 8.0 * (n + d) as f64 * f64::EPSILON * bound,
                "d={d} n={n} segment={segment}"
            );
        }
    }
}

#[test]
fn gram_t_times_equals_the_formed_gram_product() {
    // Several record blocks, an uneven last block, and (d=100) enough work to split the records.
    for (s, &(d, n, p)) in [
        (1, 1, 1),
        (4, 3, 1),
        (10, 50, 10),
        (20, 5000, 3),
        (100, 5003, 5),
        (1, 20, 4),
    ]
    .iter()
    .enumerate()
    {
        let (xt, v) = (gaussian(d, n, 60 + s as u64), gaussian(d, p, 70 + s as u64));
        let want = gram_t(&xt) * &v;
        // Both are sums of n·d products of entries of size O(1): scale by the |·| bound.
        let bound = gram_t(&xt.abs()) * v.abs();
        let gamma = 4.0 * (n + d) as f64 * f64::EPSILON;
        for segment in segments(d) {
            let got = gram_t_times_in_segments(Records::from(&xt), &v, segment);
            assert!(
                max_diff(&got, &want) <= gamma * max_abs(&bound),
                "d={d} n={n} p={p} segment={segment}"
            );
        }
    }
}

#[test]
fn projected_energy_is_the_rayleigh_quotient_of_the_gram_matrix() {
    for (s, &(d, n)) in SHAPES.iter().enumerate() {
        let xt = gaussian(d, n, 90 + s as u64);
        let q = gaussian(d, 3.min(d), 91 + s as u64);
        let a = gram_t(&xt);
        let bound = gram_t(&xt.abs());
        for segment in segments(d) {
            let got = projected_energy_in_segments(Records::from(&xt), &q, segment);
            for (j, e) in got.iter().enumerate() {
                let qj = q.column(j);
                let want = qj.dot(&(&a * qj));
                let scale = qj.abs().dot(&(&bound * qj.abs()));
                assert!(*e >= 0.0);
                assert!((e - want).abs() <= 8.0 * (n + d) as f64 * f64::EPSILON * scale);
            }
        }
    }
}

/// Records the ranges released, in values from the start of the data.
struct Released {
    base: usize,
    ranges: Mutex<Vec<(usize, usize)>>,
}

impl Residency for Released {
    fn release(&self, part: &[f64]) {
        let start = (part.as_ptr() as usize - self.base) / 8;
        self.ranges
            .lock()
            .expect("ranges")
            .push((start, start + part.len()));
    }
}

/// One streaming pass over the records.
type Pass<'a> = dyn Fn(Records<'_>) + 'a;

#[test]
fn every_pass_releases_each_record_once_in_bounded_segments() {
    // Enough work for gram_t_times to split the records over the pool's threads.
    let (d, n, segment) = (100, 5003, 40);
    let xt = gaussian(d, n, 9);
    let v = gaussian(d, 5, 10);
    let mean = xt.column_sum() / n as f64;
    let block = BLOCK_BYTES / (8 * d);
    let q = gaussian(d, 3, 11);
    let passes: [(&str, usize, &Pass<'_>); 4] = [
        ("gram_t", segment, &|r| drop(gram_t_in_segments(r, segment))),
        ("gram_t_times", segment.div_ceil(block) * block, &|r| {
            drop(gram_t_times_in_segments(r, &v, segment))
        }),
        ("centred_gram_t", segment, &|r| {
            drop(centred_gram_t_in_segments(r, &mean, segment))
        }),
        ("projected_energy", segment, &|r| {
            drop(projected_energy_in_segments(r, &q, segment))
        }),
    ];
    for (name, longest, pass) in passes {
        let released = Released {
            base: xt.as_slice().as_ptr() as usize,
            ranges: Mutex::new(Vec::new()),
        };
        pass(Records::from(&xt).with_residency(&released));
        let mut ranges = released.ranges.lock().expect("ranges").clone();
        ranges.sort();
        let mut next = 0;
        for &(start, end) in &ranges {
            assert_eq!(start, next, "{name}: gap or overlap in released ranges");
            assert!(end - start <= longest * d, "{name}: a segment is too long");
            next = end;
        }
        assert_eq!(next, d * n, "{name}: not every record was released");
    }
}

#[test]
fn empty_records_give_zeros() {
    let a = Matrix::zeros(3, 0);
    assert_eq!(gram_t(&a), Matrix::zeros(3, 3));
    assert_eq!(centred_gram_t(&a, &Vector::zeros(3)), Matrix::zeros(3, 3));
    assert_eq!(gram_t_times(&a, &Matrix::zeros(3, 2)), Matrix::zeros(3, 2));
    assert_eq!(projected_energy(&a, &Matrix::zeros(3, 2)), vec![0.0, 0.0]);
}

#[test]
fn a_single_record_gives_its_outer_product() {
    let xt = Matrix::from_column_slice(3, 1, &[1.0, -2.0, 0.5]);
    let want = &xt * xt.transpose();
    assert_eq!(gram_t(&xt), want);
    let v = Matrix::from_column_slice(3, 1, &[1.0, 1.0, 1.0]);
    assert_eq!(gram_t_times(&xt, &v), &want * &v);
    let mean = Vector::from_column_slice(&[1.0, 0.0, 0.0]);
    let shifted = Matrix::from_column_slice(3, 1, &[0.0, -2.0, 0.5]);
    assert_eq!(centred_gram_t(&xt, &mean), &shifted * shifted.transpose());
}

#[test]
fn attached_statistics_give_what_a_pass_over_the_records_gives() {
    use crate::linalg::RecordStats;
    let (d, n) = (9, 700);
    let xt = Matrix::from_fn(d, n, |i, j| {
        ((i * 31 + j * 17) % 23) as f64 / 23.0 + 0.25 * i as f64
    });
    let stats = RecordStats::of((&xt).into());
    let plain = Records::from(&xt);
    let cached = plain.with_stats(&stats);
    assert_eq!(gram_t(cached), gram_t(plain), "the same kernel: bit for bit");
    let v = Matrix::from_fn(d, 3, |i, j| (i as f64 - j as f64).sin());
    let close = |a: &Matrix, b: &Matrix| (a - b).amax() <= 1e-10 * b.amax().max(1.0);
    assert!(close(&gram_t_times(cached, &v), &gram_t_times(plain, &v)));
    let mean = column_sums(plain) / n as f64;
    assert!((column_sums(cached) - column_sums(plain)).amax() <= 1e-12);
    assert!(close(
        &centred_gram_t(cached, &mean),
        &centred_gram_t(plain, &mean)
    ));
    let other = Vector::from_fn(d, |i, _| 0.1 * i as f64);
    assert!(close(
        &centred_gram_t(cached, &other),
        &centred_gram_t(plain, &other)
    ));
    let c = centred_gram_t(cached, &mean);
    assert_eq!(c, c.transpose(), "exactly symmetric");
    let q = crate::linalg::thin_qr_q(&v);
    for (a, b) in projected_energy(cached, &q)
        .iter()
        .zip(projected_energy(plain, &q))
    {
        assert!((a - b).abs() <= 1e-10 * b.abs().max(1.0), "{a} vs {b}");
    }
    // A block is other records: it carries no statistics.
    assert!(cached.block(0, 10).stats().is_none());
}

#[test]
fn the_accumulator_over_segments_is_the_pass_and_counts_every_record() {
    let (d, n) = (7, 500);
    let xt = gaussian(d, n, 91);
    let block = 64;
    let mut acc = StatsAccumulator::new(d);
    for start in (0..n).step_by(block) {
        acc.add(Records::from(&xt).block(start, block.min(n - start)));
    }
    let stats = acc.finish();
    let (gram, sums) = gram_and_sums_in_segments(Records::from(&xt), block, true);
    assert_eq!((stats.n, &stats.gram, &stats.sums), (n, &gram, &sums));
    assert_eq!(stats.gram, stats.gram.transpose());
    assert_eq!(stats_block_len(d), segment_len(d));
    assert_eq!(RecordStats::of((&xt).into()).gram, gram_t(&xt));
}

/// An upload's statistics are built on one thread beside its parse, a stored file's on the
/// pool: the same blocks must give the same bits either way (the kept statistics are compared
/// with a pass over the file).
#[test]
fn the_rank_k_update_gives_the_same_bits_on_one_thread_as_on_the_pool() {
    let (d, n) = (300, 6_000);
    let xt = gaussian(d, n, 17);
    let records = Records::from(&xt);
    assert!(
        work(d, d, n) / 2 >= super::super::threads::PRODUCT_MIN_WORK,
        "large enough for the pool"
    );
    let mut alone = Matrix::zeros(d, d);
    let mut pooled = [Matrix::zeros(d, d), Matrix::zeros(d, d)];
    for start in (0..n).step_by(2_048) {
        let block = records.block(start, 2_048.min(n - start));
        add_lower_gram(&mut alone, block.faer(), Par::Seq);
        add_lower_gram(&mut pooled[0], block.faer(), Par::rayon(2));
        add_lower_gram(&mut pooled[1], block.faer(), Par::rayon(3));
    }
    for pooled in &pooled {
        assert!(
            alone
                .iter()
                .zip(pooled.iter())
                .all(|(a, b)| a.to_bits() == b.to_bits())
        );
    }
}
