//! The statistics of records clipped at a bound c, from the records' own kept statistics
//! corrected on the records the clip shortens, at the cost of m records whatever the data
//! (issue 21 §2; docs/performance-service.md, "The first clipped job: a correction on the
//! tail").
//!
//! Clipping at c scales a record x to y = s·x with s = t/‖x‖ when ‖x‖ > t, t = c·(1 − margin(d))
//! the target of [`super::clip::clip_l2`], and keeps it otherwise. So, over the shortened
//! records only,
//!
//!   Σ y yᵀ = XᵀX − Σ_{‖x‖>t} (1 − s²)·x xᵀ,   Σ y = Xᵀ1 − Σ_{‖x‖>t} (1 − s)·x.
//!
//! The correction is the Gram matrix of the shortened records scaled by √(1 − s²), over m slots
//! whose unused ones hold records the clip keeps, weighted 0, so the work (records copied, values
//! written, the Gram update) is that of m records whether the clip shortens none of them or m.
//! The shortened records may lie anywhere, so they are read by a walk over every page of the
//! records ([`super::gather`]): the pages read, and so the page faults of a mapped file, are
//! all of them whatever the data, not the pages of the shortened records (issue 36). More than
//! m shortened records: `None`, and the caller makes its full pass. Choosing m so that this
//! does not depend on the data (beyond an event of negligible probability) is the caller's
//! (`algorithms::clipping::ClipConfig::tail_bound`). Up to rounding ((1 − s²)·xxᵀ against
//! xxᵀ − (s·x)(s·x)ᵀ), the result is the clipped records' own statistics, as with
//! [`super::clip_blocks`].
//!
//! This module holds arithmetic only: no privacy reasoning, no storage.

use super::Vector;
use super::clip::margin;
use super::gather::gather_walking;
use super::record_stats::RecordStats;
use super::records::Records;
use super::stream::{StatsAccumulator, stats_block_len};

/// The statistics of `xt` clipped at c, from its statistics `raw` and its norms (as
/// [`Records::norms`] gives them), with a correction over `m` records; `None` when the clip
/// shortens more than `m` records.
///
/// The work is that of m records whatever the data: m slots, the shortened records weighted and
/// then the first records the clip keeps, weighted 0, each copied (during one walk over every
/// page of `xt`, [`gather_walking`]), scaled and written, and added to the Gram matrix and the
/// sums, a segment of [`stats_block_len`] slots at a time in one reused buffer. Only the
/// weights, which records fill the slots, and so which cache lines are copied, depend on the
/// data; the pages read do not.
///
/// # Panics
/// When `raw` or `norms` do not fit `xt` (a bug in the caller).
pub fn clipped_stats_by_tail(
    xt: Records<'_>,
    raw: &RecordStats,
    norms: &[f64],
    c: f64,
    m: usize,
) -> Option<RecordStats> {
    let (d, n) = (xt.d(), xt.n());
    assert!(
        raw.fits(d, n) && norms.len() == n,
        "clipped_stats_by_tail: statistics or norms of other records"
    );
    let m = m.min(n);
    let t = c * (1.0 - margin(d));
    // (record, s) per slot: s = t/‖x‖ for a shortened record; a kept record fills a slot with
    // s = 1, which weighs it 0 in both corrections.
    let mut shortened = Vec::with_capacity(m);
    let mut fillers = Vec::with_capacity(m);
    for (i, &norm) in norms.iter().enumerate() {
        if norm > t {
            shortened.push((i, t / norm));
        } else if fillers.len() < m {
            fillers.push((i, 1.0));
        }
    }
    if shortened.len() > m {
        return None;
    }
    let fill = m - shortened.len();
    // In record order, for the walk.
    let mut slots: Vec<(usize, f64)> = shortened
        .into_iter()
        .chain(fillers.into_iter().take(fill))
        .collect();
    slots.sort_unstable_by_key(|&(i, _)| i);
    let indices: Vec<usize> = slots.iter().map(|&(i, _)| i).collect();
    let mut removed_sums = Vector::zeros(d);
    let mut removed_gram = StatsAccumulator::new(d);
    let segment = stats_block_len(d).min(m).max(1);
    let mut buffer = vec![0.0; d * segment];
    let mut filled = 0;
    // Every page of the records is walked, the slots' records copied as their pages come by:
    // the pages read do not depend on where the shortened records are (module doc).
    gather_walking(xt, &indices, |k, record| {
        let s = slots[k].1;
        let w = ((1.0 - s) * (1.0 + s)).sqrt();
        let slot = &mut buffer[filled * d..(filled + 1) * d];
        slot.iter_mut().zip(record).for_each(|(to, v)| *to = w * v);
        removed_sums
            .iter_mut()
            .zip(record)
            .for_each(|(to, v)| *to += (1.0 - s) * v);
        filled += 1;
        if filled == segment {
            removed_gram.add(Records::new(&buffer, d, segment));
            filled = 0;
        }
    });
    if filled > 0 {
        removed_gram.add(Records::new(&buffer[..d * filled], d, filled));
    }
    Some(RecordStats {
        n,
        gram: &raw.gram - removed_gram.finish().gram,
        sums: &raw.sums - removed_sums,
    })
}

#[cfg(test)]
#[path = "clip_tail_tests.rs"]
mod tests;
