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
//! The correction is the Gram matrix of the shortened records scaled by √(1 − s²), gathered
//! into a buffer of m records whose unused slots stay zero records (which add nothing), so the
//! work is one Gram update of m records whether the clip shortens none of them or m. More than
//! m shortened records: `None`, and the caller makes its full pass. Choosing m so that this
//! does not depend on the data (beyond an event of negligible probability) is the caller's
//! (`algorithms::clipping::ClipConfig::tail_bound`). Up to rounding ((1 − s²)·xxᵀ against
//! xxᵀ − (s·x)(s·x)ᵀ), the result is the clipped records' own statistics, as with
//! [`super::clip_blocks`].
//!
//! This module holds arithmetic only: no privacy reasoning, no storage.

use rayon::prelude::*;

use super::Vector;
use super::clip::margin;
use super::record_stats::RecordStats;
use super::records::Records;
use super::stream::gram_t;

/// The statistics of `xt` clipped at c, from its statistics `raw` and its norms (as
/// [`Records::norms`] gives them), with a correction over a buffer of `m` records; `None` when
/// the clip shortens more than `m` records.
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
    let t = c * (1.0 - margin(d));
    let shortened: Vec<usize> = (0..n).filter(|&i| norms[i] > t).collect();
    if shortened.len() > m {
        return None;
    }
    let m = m.min(n);
    let mut buffer = vec![0.0; d * m];
    let data = xt.as_slice();
    let record = |i: usize| &data[i * d..(i + 1) * d];
    if d > 0 {
        buffer
            .par_chunks_exact_mut(d)
            .zip(shortened.par_iter())
            .for_each(|(slot, &i)| {
                let s = t / norms[i];
                let w = ((1.0 - s) * (1.0 + s)).sqrt();
                slot.iter_mut().zip(record(i)).for_each(|(to, v)| *to = w * v);
            });
    }
    let mut removed_sums = Vector::zeros(d);
    for &i in &shortened {
        let s = t / norms[i];
        removed_sums
            .iter_mut()
            .zip(record(i))
            .for_each(|(to, v)| *to += (1.0 - s) * v);
    }
    let removed_gram = gram_t(Records::new(&buffer, d, m));
    xt.release();
    Some(RecordStats {
        n,
        gram: &raw.gram - removed_gram,
        sums: &raw.sums - removed_sums,
    })
}

#[cfg(test)]
#[path = "clip_tail_tests.rs"]
mod tests;
