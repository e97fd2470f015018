use super::*;
use crate::linalg::clip::{l2_norm, margin};
use crate::linalg::records::Records;
use crate::linalg::testing::{clipped_directly as direct, spread};

/// Asserts the shortcut's statistics at c equal the direct pass's (relative 1e-10) and
/// returns its work.
fn check(xt: &Matrix, kept: &ClipBlocks, c: f64) -> ClipWork {
    let (got, work) = kept.clipped_stats(Records::from(xt), c);
    let want = direct(xt, c);
    assert_eq!(got.n, want.n);
    let gram_scale = want.gram.amax().max(f64::MIN_POSITIVE);
    let gram_error = (&got.gram - &want.gram).amax() / gram_scale;
    assert!(gram_error <= 1e-10, "c = {c}: gram differs by {gram_error:e}");
    let sums_scale = want.sums.amax().max(f64::MIN_POSITIVE);
    let sums_error = (&got.sums - &want.sums).amax() / sums_scale;
    assert!(sums_error <= 1e-10, "c = {c}: sums differ by {sums_error:e}");
    assert_eq!(got.gram, got.gram.transpose(), "exactly symmetric");
    work
}

/// The clip norms that put the target exactly at a value v: clip_l2 scales to c·(1 − margin).
fn c_for_target(v: f64, d: usize) -> f64 {
    v / (1.0 - margin(d))
}

#[test]
fn the_shortcut_equals_a_direct_clipped_pass_at_every_kind_of_bound() {
    // n = 103 is not a multiple of any B tried; B = 1 is one block of every record.
    let (d, n) = (7, 103);
    let xt = spread(d, n, 11);
    let mut norms: Vec<f64> = xt.column_iter().map(|c| l2_norm(c.as_slice())).collect();
    norms.sort_by(f64::total_cmp);
    let largest = norms[n - 1];
    let smallest_positive = norms.iter().copied().find(|&v| v > 0.0).unwrap_or(1.0);
    for blocks in [1, 2, 5, 16] {
        let kept = ClipBlocks::build(Records::from(&xt), blocks);
        assert!(kept.fits(d, n));
        assert_eq!(kept.blocks.len(), n.div_ceil(n.div_ceil(blocks)));
        let mut bounds = vec![
            smallest_positive / 2.0, // below every (nonzero) norm
            largest * 2.0,           // above every norm
            largest,                 // at the largest: only it is shortened
        ];
        for block in &kept.blocks {
            bounds.push(block.max_norm); // at a block's boundary norm
            bounds.push(c_for_target(block.max_norm, d)); // target exactly at it
        }
        // In the middle of each block.
        for part in kept.order.chunks(kept.block_len) {
            let middle = part[part.len() / 2] as usize;
            bounds.push(l2_norm(xt.column(middle).as_slice()));
        }
        for c in bounds.into_iter().filter(|&c| c > 0.0) {
            let work = check(&xt, &kept, c);
            assert_eq!(work.rows_gathered, kept.block_len, "blocks {blocks}, c {c}");
            assert_eq!(
                work.blocks_summed,
                kept.blocks.len() - 1,
                "blocks {blocks}, c {c}"
            );
        }
    }
}

#[test]
fn the_work_is_the_same_at_every_quantile() {
    let (d, n) = (12, 1000);
    let xt = spread(d, n, 5);
    let kept = ClipBlocks::build(Records::from(&xt), 8);
    let mut norms: Vec<f64> = xt.column_iter().map(|c| l2_norm(c.as_slice())).collect();
    norms.sort_by(f64::total_cmp);
    let works: Vec<ClipWork> = [0.10, 0.50, 0.99]
        .iter()
        .map(|q| check(&xt, &kept, norms[(q * n as f64) as usize]))
        .collect();
    assert_eq!(works[0], works[1]);
    assert_eq!(works[1], works[2]);
    assert_eq!(
        works[0],
        ClipWork {
            rows_gathered: 125,
            blocks_summed: 7
        }
    );
}

#[test]
fn the_pages_read_are_every_page_at_every_quantile() {
    // Issue 36: block b's records lie anywhere in the data; the pass reads every page, once,
    // whichever block the clip falls in.
    let (d, n) = (12, 1000);
    let xt = spread(d, n, 5);
    let kept = ClipBlocks::build(Records::from(&xt), 8);
    let mut norms: Vec<f64> = xt.column_iter().map(|c| l2_norm(c.as_slice())).collect();
    norms.sort_by(f64::total_cmp);
    for q in [0.05, 0.5, 0.99] {
        let c = norms[(q * n as f64) as usize];
        let walk = crate::linalg::gather::touched::during(xt.as_slice(), || {
            check(&xt, &kept, c);
        });
        assert_eq!(walk, vec![(0, d * n)], "q {q}");
    }
}

#[test]
fn blocks_hold_sorted_records_and_sum_to_the_raw_statistics() {
    let (d, n) = (5, 50);
    let xt = spread(d, n, 3);
    let kept = ClipBlocks::build(Records::from(&xt), 4);
    let whole = RecordStats::of(Records::from(&xt));
    let mut gram = vec![0.0; packed_len(d)];
    let mut sums = Vector::zeros(d);
    for block in &kept.blocks {
        add_scaled(&mut gram, &block.raw.gram, 1.0);
        sums += &block.raw.sums;
    }
    assert!((unpack_symmetric(&gram, d) - &whole.gram).amax() <= 1e-12 * whole.gram.amax());
    assert!((sums - &whole.sums).amax() <= 1e-12 * whole.sums.amax());
    let norm = |i: u32| l2_norm(xt.column(i as usize).as_slice());
    assert!(
        kept.order
            .windows(2)
            .all(|w| (norm(w[0]), w[0]) < (norm(w[1]), w[1]))
    );
    // Ties (records 1/3 and 2/4 are equal) by index.
    let at = |i: u32| kept.order.iter().position(|&j| j == i).unwrap();
    assert!(at(1) < at(3) && at(2) < at(4));
}

#[test]
fn a_damaged_set_of_blocks_does_not_fit() {
    let (d, n) = (4, 30);
    let kept = ClipBlocks::build(Records::from(&spread(d, n, 9)), 3);
    assert!(kept.fits(d, n));
    assert!(!kept.fits(d + 1, n));
    assert!(!kept.fits(d, n + 1));
    let mut repeated = kept.clone();
    repeated.order[0] = repeated.order[1];
    assert!(!repeated.fits(d, n));
    let mut descending = kept.clone();
    descending.blocks[0].max_norm = f64::MAX;
    assert!(!descending.fits(d, n));
    let mut infinite = kept;
    infinite.blocks[1].unit.gram[0] = f64::INFINITY;
    assert!(!infinite.fits(d, n));
}

#[test]
fn the_block_count_depends_on_d_and_n_only_and_fits_the_budget() {
    assert_eq!(block_count(500, 100_000), 16);
    assert_eq!(block_count(1000, 100_000), 8);
    assert_eq!(block_count(2000, 100_000), 2);
    assert_eq!(block_count(4000, 100_000), 1);
    assert_eq!(block_count(10, 3), 3);
    for d in [1, 100, 700, 1500, 3000] {
        let b = block_count(d, 1 << 20);
        assert!(b == 1 || 2 * b * d * d * 8 <= BLOCK_BUDGET_BYTES);
    }
}
