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
/// The cost is pairing each entry with its mirror. A look-up per upper entry (a binary search
/// in the mirror's row, then a read of its value) is a chain of random reads, and took 17 % of
/// an 8·10⁶-entry upload (docs/performance-sparse.md, session 30). Instead the lower entries
/// (j < i) are first sorted by column with a counting sort ([`LowerByColumn`]: one sequential
/// pass to count, one to place, the value copied beside its row and position), which lists, for
/// each i, the lower entries (r, i) in increasing r: exactly the mirrors of row i's upper
/// entries (i, r), in the same order. Each row is then one merge of two sorted runs, in
/// parallel blocks of rows, with no random read. Values change only where a pair differs
/// (within the tolerance) or a near-zero entry has no mirror: a file written from a symmetric
/// matrix changes nothing.
///
/// The error reported is the first in a sequential check: the first pair (i < j) that differs,
/// or nonzero upper entry without a mirror, in row order; else the first nonzero lower entry
/// without a mirror, in row order.
pub(super) fn symmetrise(csr: &mut Csr, entries: &[Entry]) -> Result<(), IngestError> {
    let max_abs = csr
        .values
        .par_iter()
        .fold(|| 0.0_f64, |m, v| m.max(v.abs()))
        .reduce(|| 0.0, f64::max);
    let tol = SYMMETRY_TOLERANCE * max_abs.max(1.0);
    let a = &*csr;
    let lower = LowerByColumn::of(a);
    let checked: Vec<Checked> = (0..a.n.div_ceil(SYMMETRISE_ROWS))
        .into_par_iter()
        .map(|block| {
            let rows = block * SYMMETRISE_ROWS..((block + 1) * SYMMETRISE_ROWS).min(a.n);
            check_rows(a, &lower, rows, tol)
        })
        .collect();
    let checked = checked.into_iter().fold(Checked::default(), Checked::then);
    if let Some((at, m)) = checked.upper_error {
        let (i, j) = (row_of(a, at), a.col_idx[at] as usize);
        return Err(asymmetric(i, j, entries[at].line, m.map(|m| entries[m].line)));
    }
    if let Some(m) = checked.lower_error {
        let (i, j) = (row_of(a, m), a.col_idx[m] as usize);
        return Err(asymmetric(i, j, entries[m].line, None));
    }
    for (at, value) in checked.changes {
        csr.values[at] = value;
    }
    Ok(())
}

/// Rows per task of [`symmetrise`].
pub(super) const SYMMETRISE_ROWS: usize = 4096;

/// The lower entries (i, j), j < i, of a CSR matrix sorted by column j, then row i: for column
/// j, `rows[start[j]..start[j + 1]]` are the rows i in increasing order, with each entry's
/// position in the CSR arrays and its value beside it: 20 bytes per lower entry, and 8 per
/// column (16 while it is built).
struct LowerByColumn {
    start: Vec<usize>,
    rows: Vec<u32>,
    positions: Vec<u64>,
    values: Vec<f64>,
}

impl LowerByColumn {
    /// A counting sort: count per column, then place each entry in row order, so each column's
    /// rows come out increasing. Both passes read the CSR arrays in order; the placing writes
    /// are scattered but independent of one another.
    fn of(a: &Csr) -> LowerByColumn {
        let lower_of = |i: usize| {
            let row = a.row_ptr[i] as usize..a.row_ptr[i + 1] as usize;
            let len = a.col_idx[row.clone()].partition_point(|&j| (j as usize) < i);
            row.start..row.start + len
        };
        let mut start = vec![0usize; a.n + 1];
        for i in 0..a.n {
            for &j in &a.col_idx[lower_of(i)] {
                start[j as usize + 1] += 1;
            }
        }
        for j in 0..a.n {
            start[j + 1] += start[j];
        }
        let total = start[a.n];
        let mut next = start.clone();
        let (mut rows, mut positions, mut values) = (vec![0u32; total], vec![0u64; total], vec![0.0; total]);
        for i in 0..a.n {
            for at in lower_of(i) {
                let slot = &mut next[a.col_idx[at] as usize];
                rows[*slot] = i as u32;
                positions[*slot] = at as u64;
                values[*slot] = a.values[at];
                *slot += 1;
            }
        }
        LowerByColumn {
            start,
            rows,
            positions,
            values,
        }
    }

    /// The lower entries of column j: (row, position, value) in increasing row.
    fn column(&self, j: usize) -> impl Iterator<Item = (usize, usize, f64)> + '_ {
        let range = self.start[j]..self.start[j + 1];
        self.rows[range.clone()]
            .iter()
            .zip(&self.positions[range.clone()])
            .zip(&self.values[range])
            .map(|((&r, &m), &w)| (r as usize, m as usize, w))
    }
}

/// The row of the entry at CSR position `at`.
fn row_of(a: &Csr, at: usize) -> usize {
    a.row_ptr.partition_point(|&p| p as usize <= at) - 1
}

/// What the entries of some rows found: the first upper entry that breaks symmetry (its
/// position, and its mirror's when the pair differs), the first nonzero lower entry without a
/// mirror (its position), and the values to change (position, value).
#[derive(Debug, Default)]
struct Checked {
    upper_error: Option<(usize, Option<usize>)>,
    lower_error: Option<usize>,
    changes: Vec<(usize, f64)>,
}

impl Checked {
    /// This block's findings followed by the next block's: the first upper error in row order
    /// stays first; the lower error is the smallest position, since a block finds the lower
    /// entries of its columns, which lie in the rows of any later block.
    fn then(mut self, next: Checked) -> Checked {
        self.upper_error = self.upper_error.or(next.upper_error);
        self.lower_error = match (self.lower_error, next.lower_error) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.changes.extend(next.changes);
        self
    }
}

/// Row i's upper entries (i, j), j > i, merged with column i's lower entries (r, i), r > i:
/// both in increasing j (r), so an upper entry and its mirror meet, and an entry of either run
/// that the other lacks has no mirror. Stops at the block's first upper error (nothing after it
/// is reported); lower entries without a mirror are only noted, since any upper error in a
/// later block comes first.
fn check_rows(a: &Csr, lower: &LowerByColumn, rows: Range<usize>, tol: f64) -> Checked {
    let mut out = Checked::default();
    // A lower entry (r, i) without a mirror: 0 within the tolerance is stored as 0; else the
    // first such entry in row order (the smallest position) is the error.
    let orphan = |out: &mut Checked, m: usize, w: f64| {
        if w.abs() <= tol {
            out.changes.push((m, 0.0));
        } else {
            out.lower_error = Some(out.lower_error.map_or(m, |e| e.min(m)));
        }
    };
    for i in rows {
        let row = a.row_ptr[i] as usize..a.row_ptr[i + 1] as usize;
        let first_upper = row.start + a.col_idx[row.clone()].partition_point(|&j| (j as usize) <= i);
        let mut mirrors = lower.column(i).peekable();
        for at in first_upper..row.end {
            let (j, v) = (a.col_idx[at] as usize, a.values[at]);
            while let Some((_, m, w)) = mirrors.next_if(|&(r, _, _)| r < j) {
                orphan(&mut out, m, w);
            }
            match mirrors.next_if(|&(r, _, _)| r == j) {
                Some((_, m, w)) => {
                    if !((v - w).abs() <= tol) {
                        out.upper_error = Some((at, Some(m)));
                        return out;
                    }
                    if v != w {
                        let mean = crate::ingest::symmetric::mean(v, w);
                        out.changes.extend([(at, mean), (m, mean)]);
                    }
                }
                // A zero (within the tolerance) whose mirror is an implicit zero is stored as 0.
                None => {
                    if !(v.abs() <= tol) {
                        out.upper_error = Some((at, None));
                        return out;
                    }
                    out.changes.push((at, 0.0));
                }
            }
        }
        for (_, m, w) in mirrors {
            orphan(&mut out, m, w);
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
