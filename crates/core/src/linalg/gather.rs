//! Reading chosen records so that the pages read do not say which were chosen (issue 36;
//! docs/design/privacy.md §3.1, "Which pages a clipped job reads").
//!
//! A record read where the data put it faults in its own page of a memory-mapped file. When
//! which records are read depends on private values (the records a clip shortens, the records
//! of one norm block), the pages a job faults in — counted by the kernel, visible in the page
//! cache, and paid for in time — would say where those records are and how many of them lie
//! outside pages read anyway. [`gather_walking`] reads one value of every page of the records,
//! front to back, segment by segment, and copies each chosen record while its segment is being
//! walked: the pages touched, their order and the segments released are a function of n and d
//! only, and every chosen record is read from a page the walk has just mapped. What still
//! depends on the data is below the page: which cache lines the copies read.
//!
//! Cost: one read per 4 KiB of the records and the page faults of mapping them all once (on a
//! lazily mapped file), no arithmetic on the values; the copies are those of the chosen records.

use std::hint::black_box;

use super::records::Records;
use super::stream::stats_block_len;

/// f64 values per 4 KiB, the smallest page Linux uses: a read this far apart touches every page.
const PAGE_VALUES: usize = 4096 / 8;

/// Walks every page of `xt` once, front to back, one segment of [`stats_block_len`] records at
/// a time (released after it, as the streaming kernels do), and calls `copy(k, record)` for
/// the k-th of `indices` with that record's values, while its segment is walked.
///
/// # Panics
/// When `indices` are not strictly ascending record indices of `xt` (a bug in the caller).
pub fn gather_walking(xt: Records<'_>, indices: &[usize], copy: impl FnMut(usize, &[f64])) {
    gather_walking_in_segments(xt, indices, stats_block_len(xt.d()), copy);
}

/// [`gather_walking`] with `segment` records per segment.
fn gather_walking_in_segments(
    xt: Records<'_>,
    indices: &[usize],
    segment: usize,
    mut copy: impl FnMut(usize, &[f64]),
) {
    let (d, n) = (xt.d(), xt.n());
    assert!(
        indices.windows(2).all(|w| w[0] < w[1]) && indices.last().is_none_or(|&i| i < n),
        "gather_walking: indices must be ascending records of xt"
    );
    let segment = segment.max(1);
    let mut next = 0;
    let mut start = 0;
    while start < n {
        let take = segment.min(n - start);
        let block = xt.block(start, take);
        let values = block.as_slice();
        touch_every_page(values);
        while let Some(&i) = indices.get(next).filter(|&&i| i < start + take) {
            let at = (i - start) * d;
            copy(next, &values[at..at + d]);
            next += 1;
        }
        block.release();
        start += take;
    }
}

/// Reads one value in every 4 KiB of `values` and the last one, so every page they lie on is
/// mapped. The bits are combined by XOR, not added: floating-point addition can take longer on
/// some values (subnormals), integer XOR does not.
fn touch_every_page(values: &[f64]) {
    let bits = values
        .iter()
        .step_by(PAGE_VALUES)
        .chain(values.last())
        .fold(0_u64, |acc, v| acc ^ v.to_bits());
    black_box(bits);
    #[cfg(test)]
    touched::record(values);
}

/// Test-only: the stretches [`touch_every_page`] walked on this thread, so that tests of the
/// callers can check which memory a pass touched. Not compiled into the service.
#[cfg(test)]
pub(crate) mod touched {
    use std::cell::RefCell;

    thread_local! {
        static LOG: RefCell<Vec<(usize, usize)>> = const { RefCell::new(Vec::new()) };
    }

    pub(super) fn record(values: &[f64]) {
        LOG.with(|log| log.borrow_mut().push((values.as_ptr() as usize, values.len())));
    }

    /// Runs `f` and returns the stretches touched meanwhile on this thread, as (first value,
    /// values) counted from `base`.
    pub(crate) fn during(base: &[f64], f: impl FnOnce()) -> Vec<(usize, usize)> {
        LOG.with(|log| log.borrow_mut().clear());
        f();
        let origin = base.as_ptr() as usize;
        LOG.with(|log| {
            log.borrow_mut()
                .drain(..)
                .map(|(at, len)| ((at - origin) / 8, len))
                .collect()
        })
    }
}

#[cfg(test)]
#[path = "gather_tests.rs"]
mod tests;
