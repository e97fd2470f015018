//! The symmetry check of a `general` Matrix Market file (`super`), and the exact
//! symmetrisation stored in its place.

use std::ops::Range;

use rayon::iter::{IntoParallelIterator, IntoParallelRefIterator, ParallelIterator};

use super::{Entry, malformed};
use crate::ingest::IngestError;
use crate::ingest::symmetric::SYMMETRY_TOLERANCE;
use crate::linalg::sparse::Csr;

/// Checks a `general` file's symmetry and stores (a_ij + a_ji)/2 in both places; `entries` is
/// in CSR order (for the line numbers).
///
/// The cost is finding each pair's mirror: a binary search in the mirror's row and a read of its
/// value, random accesses. So only the upper entries (j > i) look for theirs, in blocks of rows
/// in parallel. A mirror found is a lower entry, and distinct upper entries have distinct
/// mirrors, so when as many were found as there are lower entries, every lower entry has its
/// mirror and needs no look-up; otherwise the lower entries look for theirs too, to find the
/// ones without. Values change only where a pair differs (within the tolerance) or a near-zero
/// entry has no mirror: a file written from a symmetric matrix changes nothing.
///
/// The error reported is the first in a sequential check: the first pair (i < j) that differs,
/// or nonzero upper entry without a mirror, in row order; else the first nonzero lower entry
/// without a mirror.
pub(super) fn symmetrise(csr: &mut Csr, entries: &[Entry]) -> Result<(), IngestError> {
    let max_abs = csr
        .values
        .par_iter()
        .fold(|| 0.0_f64, |m, v| m.max(v.abs()))
        .reduce(|| 0.0, f64::max);
    let tol = SYMMETRY_TOLERANCE * max_abs.max(1.0);
    let a = &*csr;
    let blocks = |side: Side| -> Checked {
        let checked: Vec<Checked> = (0..a.n.div_ceil(SYMMETRISE_ROWS))
            .into_par_iter()
            .map(|block| {
                let rows = block * SYMMETRISE_ROWS..((block + 1) * SYMMETRISE_ROWS).min(a.n);
                check_rows(a, entries, rows, tol, side)
            })
            .collect();
        checked.into_iter().fold(Checked::default(), Checked::then)
    };
    let upper = blocks(Side::Upper);
    if let Some(error) = upper.error {
        return Err(error);
    }
    let lower_entries = (0..a.n)
        .into_par_iter()
        .map(|i| {
            let (start, end) = (a.row_ptr[i] as usize, a.row_ptr[i + 1] as usize);
            a.col_idx[start..end]
                .iter()
                .take_while(|&&j| (j as usize) < i)
                .count()
        })
        .sum::<usize>();
    let mut changes = upper.changes;
    if upper.found != lower_entries {
        let lower = blocks(Side::Lower);
        if let Some(error) = lower.error {
            return Err(error);
        }
        changes.extend(lower.changes);
    }
    for (at, value) in changes {
        csr.values[at] = value;
    }
    Ok(())
}

/// Rows per task of [`symmetrise`].
pub(super) const SYMMETRISE_ROWS: usize = 4096;

/// Which entries look for their mirror.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// j > i: the pair is compared, and set to its mean where it differs.
    Upper,
    /// j < i: only an entry without a mirror is checked (to be 0 within the tolerance).
    Lower,
}

/// What the entries of some rows found: the mirrors found, the values to change (position,
/// value), and the first failure.
#[derive(Debug, Default)]
struct Checked {
    found: usize,
    changes: Vec<(usize, f64)>,
    error: Option<IngestError>,
}

impl Checked {
    /// This block's findings followed by the next block's (the first error stays first).
    fn then(mut self, next: Checked) -> Checked {
        self.found += next.found;
        self.changes.extend(next.changes);
        self.error = self.error.or(next.error);
        self
    }
}

fn check_rows(a: &Csr, entries: &[Entry], rows: Range<usize>, tol: f64, side: Side) -> Checked {
    let row = |i: usize| a.row_ptr[i] as usize..a.row_ptr[i + 1] as usize;
    let mut out = Checked::default();
    for i in rows {
        for at in row(i) {
            let j = a.col_idx[at] as usize;
            let wanted = match side {
                Side::Upper => j > i,
                Side::Lower => j < i,
            };
            if !wanted {
                continue;
            }
            let mirror_row = row(j);
            let mirror = a.col_idx[mirror_row.clone()]
                .binary_search(&(i as u32))
                .ok()
                .map(|k| mirror_row.start + k);
            let v = a.values[at];
            match mirror {
                Some(m) if side == Side::Upper => {
                    out.found += 1;
                    let w = a.values[m];
                    if !((v - w).abs() <= tol) {
                        let error = asymmetric(i, j, entries[at].line, Some(entries[m].line));
                        out.error = out.error.or(Some(error));
                        return out;
                    }
                    if v != w {
                        let mean = crate::ingest::symmetric::mean(v, w);
                        out.changes.extend([(at, mean), (m, mean)]);
                    }
                }
                // A lower entry with a mirror was compared from the upper side.
                Some(_) => {}
                // A zero (within the tolerance) whose mirror is an implicit zero is stored as 0.
                None => {
                    if !(v.abs() <= tol) {
                        out.error = Some(asymmetric(i, j, entries[at].line, None));
                        return out;
                    }
                    out.changes.push((at, 0.0));
                }
            }
        }
    }
    out
}

/// The 0-based entry (i, j) on `line` breaks symmetry: its mirror (on `mirror_line`) differs,
/// or is absent while the entry is not 0.
fn asymmetric(i: usize, j: usize, line: u64, mirror_line: Option<u64>) -> IngestError {
    let (i, j) = (i + 1, j + 1);
    let message = match mirror_line {
        Some(other) => format!(
            "the matrix is not symmetric: entry ({i}, {j}) differs from entry ({j}, {i}) on line {other}"
        ),
        None => format!("the matrix is not symmetric: entry ({i}, {j}) has no entry ({j}, {i})"),
    };
    malformed(line, message)
}
