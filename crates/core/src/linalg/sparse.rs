//! Sparse symmetric matrices in compressed sparse row (CSR) form, borrowed (typically from a
//! memory-mapped file, `crate::ingest::csr_file`), and the one kernel the algorithms need on
//! them: the product A·X with a dense d×p block X, row-parallel over the CSR rows, O(nnz·p)
//! work and O(d·p) memory. A is never densified.
//!
//! Measured against faer's sparse × dense product on the 2-core reference machine at
//! 100 000 × 100 000 with 2·10⁶ entries (docs/performance-sparse.md, `cargo bench --bench
//! sparse`): equal at p = 20 (83 ms against 81 ms), faer faster at p = 64 (285 ms against 424
//! ms), although faer 0.22's product is sequential. Switching needs the row pointers and column
//! indices in one integer type (faer's `Index`), i.e. a change of the stored layout; it is left
//! open there.

use rayon::prelude::*;

use super::Matrix;
use super::prefetch::prefetch;

/// A borrowed n×n matrix in CSR form: row i holds the entries `row_ptr[i]..row_ptr[i + 1]` of
/// `col_idx` (strictly increasing within a row) and `values`.
#[derive(Debug, Clone, Copy)]
pub struct CsrView<'a> {
    n: usize,
    row_ptr: &'a [u64],
    col_idx: &'a [u32],
    values: &'a [f64],
}

/// The update [`CsrView::rows_step`] applies: α·A·X − β·P.
#[derive(Debug, Clone, Copy)]
pub struct Step<'a> {
    pub alpha: f64,
    /// P (by rows) and β, or none (β = 0).
    pub previous: Option<(&'a [f64], f64)>,
}

impl Step<'_> {
    /// The plain product A·X.
    pub const PRODUCT: Step<'static> = Step {
        alpha: 1.0,
        previous: None,
    };
}

/// Why arrays do not form a CSR matrix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid CSR arrays: {0}")]
pub struct CsrError(pub &'static str);

impl<'a> CsrView<'a> {
    /// Checks the arrays (lengths, row pointers nondecreasing from 0 to nnz, column indices in
    /// range and strictly increasing within each row) in one O(n + nnz) pass.
    pub fn new(
        n: usize,
        row_ptr: &'a [u64],
        col_idx: &'a [u32],
        values: &'a [f64],
    ) -> Result<Self, CsrError> {
        if row_ptr.len() != n + 1 {
            return Err(CsrError("row_ptr must hold n + 1 offsets"));
        }
        if col_idx.len() != values.len() || row_ptr[0] != 0 || row_ptr[n] != values.len() as u64 {
            return Err(CsrError(
                "row_ptr must run from 0 to nnz, with as many columns as values",
            ));
        }
        for w in row_ptr.windows(2) {
            if w[0] > w[1] {
                return Err(CsrError("row_ptr must be nondecreasing"));
            }
            let row = &col_idx[w[0] as usize..w[1] as usize];
            if row.windows(2).any(|c| c[0] >= c[1]) || row.last().is_some_and(|&c| c as usize >= n) {
                return Err(CsrError(
                    "column indices must increase within a row and stay below n",
                ));
            }
        }
        Ok(CsrView {
            n,
            row_ptr,
            col_idx,
            values,
        })
    }

    /// The side n.
    pub fn n(&self) -> usize {
        self.n
    }

    /// The number of stored entries (both triangles of a symmetric matrix).
    pub fn nnz(&self) -> usize {
        self.values.len()
    }

    /// Row i: its column indices and values.
    pub fn row(&self, i: usize) -> (&'a [u32], &'a [f64]) {
        let (start, end) = (self.row_ptr[i] as usize, self.row_ptr[i + 1] as usize);
        (&self.col_idx[start..end], &self.values[start..end])
    }

    /// The column indices [`PREFETCH_AHEAD`] entries after those of row i (as many as the row
    /// has, fewer at the end of the matrix): across row boundaries, so that short rows are
    /// prefetched too.
    fn ahead(&self, i: usize) -> &'a [u32] {
        let nnz = self.col_idx.len();
        let (start, end) = (self.row_ptr[i] as usize, self.row_ptr[i + 1] as usize);
        &self.col_idx[(start + PREFETCH_AHEAD).min(nnz)..(end + PREFETCH_AHEAD).min(nnz)]
    }

    /// The arrays (row pointers, column indices, values).
    pub fn parts(&self) -> (&'a [u64], &'a [u32], &'a [f64]) {
        (self.row_ptr, self.col_idx, self.values)
    }

    /// A·X for a dense n×p `x`, row-parallel over the global pool when the work (nnz·p) is
    /// large enough. Row i of the result is Σ_j a_ij·x_j:, read from Xᵀ so that each x_j: is
    /// contiguous.
    ///
    /// # Panics
    /// When `x` does not have n rows (a bug in the caller, as for the dense products).
    pub fn times(&self, x: &Matrix) -> Matrix {
        assert_eq!(x.nrows(), self.n, "A·X: X must have n rows");
        let p = x.ncols();
        if p == 0 || self.n == 0 {
            return Matrix::zeros(self.n, p);
        }
        let xt = x.transpose();
        let mut yt = Matrix::zeros(p, self.n);
        self.rows_step(xt.as_slice(), p, Step::PRODUCT, yt.as_mut_slice());
        yt.transpose()
    }

    /// One step on blocks stored by rows (n×p, row i at `i·p..(i + 1)·p`):
    /// `out` = α·A·X − β·P, with X in `xs` and P, β in `step.previous`. Returns the largest
    /// |entry| of `out` (0 for an empty block). One pass over A and one write of `out`: the
    /// three-term recurrence of `algorithms::filtered_power` runs on it with no transposes and
    /// no further sweeps.
    ///
    /// # Panics
    /// When a block does not hold n·p values (a bug in the caller).
    pub fn rows_step(&self, xs: &[f64], p: usize, step: Step<'_>, out: &mut [f64]) -> f64 {
        let len = self.n * p;
        assert!(
            xs.len() == len && out.len() == len && step.previous.is_none_or(|(prev, _)| prev.len() == len),
            "rows_step: blocks must hold n·p values"
        );
        if len == 0 {
            return 0.0;
        }
        // Row i into its slot, then the update; the largest |entry| of the rows done.
        let row = |i: usize, slot: &mut [f64]| -> f64 {
            let (cols, vals) = self.row(i);
            let ahead = self.ahead(i);
            // Up to ROW_PASS_MAX columns in one pass over the row, summed in registers.
            let mut from = 0;
            while from < p {
                let w = (p - from).min(ROW_PASS_MAX);
                from += row_pass(
                    RowPass {
                        cols,
                        vals,
                        ahead,
                        xs,
                        p,
                        from,
                    },
                    w,
                    slot,
                );
            }
            match step.previous {
                Some((prev, beta)) => {
                    let prev = &prev[i * p..(i + 1) * p];
                    slot.iter_mut().zip(prev).fold(0.0_f64, |m, (v, q)| {
                        *v = step.alpha * *v - beta * q;
                        m.max(v.abs())
                    })
                }
                None => slot.iter_mut().fold(0.0_f64, |m, v| {
                    *v *= step.alpha;
                    m.max(v.abs())
                }),
            }
        };
        if self.nnz().saturating_mul(p) < SPARSE_PRODUCT_MIN_WORK || rayon::current_num_threads() < 2 {
            return out
                .chunks_mut(p)
                .enumerate()
                .fold(0.0, |m, (i, slot)| m.max(row(i, slot)));
        }
        // Chunks of rows large enough that scheduling does not dominate.
        let rows_per_task = (self.n / (8 * rayon::current_num_threads())).max(64);
        out.par_chunks_mut(p * rows_per_task)
            .enumerate()
            .map(|(t, block)| {
                block
                    .chunks_mut(p)
                    .enumerate()
                    .fold(0.0_f64, |m, (r, slot)| m.max(row(t * rows_per_task + r, slot)))
            })
            .reduce(|| 0.0, f64::max)
    }

    /// The dense copy of A, for tests on small matrices only.
    #[cfg(test)]
    pub fn to_dense(&self) -> Matrix {
        let mut a = Matrix::zeros(self.n, self.n);
        for i in 0..self.n {
            let (cols, vals) = self.row(i);
            for (&j, &v) in cols.iter().zip(vals) {
                a[(i, j as usize)] = v;
            }
        }
        a
    }
}

/// Multiply-adds (stored entries × columns) below which [`CsrView::rows_step`] runs on the
/// calling thread. Lower than the dense [`super::threads::PRODUCT_MIN_WORK`]: the rows are
/// handed out as rayon tasks (no spinning barrier to wake), and each multiply-add waits on a
/// scattered read, so 2¹⁷ of them already take 0.1–0.2 ms. At 10⁶ entries and the Lanczos
/// block of 2 columns (2·10⁶, below the dense threshold) the product ran on one core
/// (docs/performance-sparse.md, session 30).
pub(crate) const SPARSE_PRODUCT_MIN_WORK: usize = 1 << 17;

/// How many entries ahead [`row_part`] asks for the row of Xᵀ it will read ([`prefetch`]).
const PREFETCH_AHEAD: usize = 6;

/// Most columns summed in one pass over a row ([`row_pass`]).
const ROW_PASS_MAX: usize = 32;

/// Columns `from..from + w` of row i of A·X (w ≤ [`ROW_PASS_MAX`]) by one pass over the row,
/// with the width a compile-time constant ([`row_part`]). Returns w.
///
/// Why one pass: the rows x_j: the entries read are scattered over Xᵀ (at n = 100 000 and p =
/// 20, 16 MB, beyond the caches), so the product waits on memory, not on arithmetic. Groups of
/// four columns walked the row five times at p = 20, and each walk missed the cache again on
/// the next 64-byte line of every x_j:; one pass asks for every line of x_j: at once. Measured
/// (docs/performance-sparse.md, session 25): 204–246 ms → 158–178 ms per product at 7.8·10⁶
/// entries and p = 20.
#[inline(always)]
fn row_pass(pass: RowPass<'_>, w: usize, out: &mut [f64]) -> usize {
    macro_rules! widths {
        ($($w:literal)*) => {
            match w {
                $($w => row_part::<$w>(pass, out),)*
                _ => unreachable!("row_pass: width {w} above ROW_PASS_MAX"),
            }
        };
    }
    widths!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32)
}

/// One pass over row i: its entries (`cols`, `vals`), the column indices to prefetch
/// ([`CsrView::ahead`]), Xᵀ (`xs`, rows of X with `p` values each) and the first column.
#[derive(Clone, Copy)]
struct RowPass<'a> {
    cols: &'a [u32],
    vals: &'a [f64],
    ahead: &'a [u32],
    xs: &'a [f64],
    p: usize,
    from: usize,
}

/// Columns `from..from + W` of row i of A·X into `out` (row i of the result): Σ_j a_ij·x_j:
/// over the row's entries. The W sums stay in registers (or, for wide W, in the stack's cache
/// lines) over the whole row, so each entry costs W multiply-adds and no store to the result;
/// the row of Xᵀ read [`PREFETCH_AHEAD`] entries later is asked for first. Returns W.
#[inline(always)]
fn row_part<const W: usize>(pass: RowPass<'_>, out: &mut [f64]) -> usize {
    let RowPass {
        cols,
        vals,
        ahead,
        xs,
        p,
        from,
    } = pass;
    let mut sums = [0.0; W];
    for (e, (&j, &a)) in cols.iter().zip(vals).enumerate() {
        if let Some(&later) = ahead.get(e) {
            let start = later as usize * p + from;
            prefetch(&xs[start..start + W]);
        }
        let start = j as usize * p + from;
        let xj: &[f64; W] = xs[start..start + W].try_into().expect("W values");
        for (s, &v) in sums.iter_mut().zip(xj) {
            *s += a * v;
        }
    }
    out[from..from + W].copy_from_slice(&sums);
    W
}

/// An owned CSR matrix (tests, benches and the parser's output before it is written).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Csr {
    pub n: usize,
    pub row_ptr: Vec<u64>,
    pub col_idx: Vec<u32>,
    pub values: Vec<f64>,
}

impl Csr {
    /// Builds a CSR matrix from (row, col, value) triplets with distinct positions.
    pub fn from_triplets(n: usize, mut triplets: Vec<(u32, u32, f64)>) -> Csr {
        triplets.sort_unstable_by_key(|&(i, j, _)| (i, j));
        let mut row_ptr = vec![0u64; n + 1];
        for &(i, _, _) in &triplets {
            row_ptr[i as usize + 1] += 1;
        }
        for i in 0..n {
            row_ptr[i + 1] += row_ptr[i];
        }
        Csr {
            n,
            row_ptr,
            col_idx: triplets.iter().map(|t| t.1).collect(),
            values: triplets.iter().map(|t| t.2).collect(),
        }
    }

    /// The lazy normalised adjacency (I + D^-½·W·D^-½)/2 of the graph on `n` nodes with these
    /// undirected `edges` (distinct pairs a < b; W is their 0/1 adjacency, D its degrees): the
    /// judged test matrix of the sparse path, symmetric positive semi-definite with eigenvalues
    /// in [0, 1]. An isolated node keeps only the diagonal ½.
    pub fn lazy_normalised_adjacency(n: usize, edges: &[(usize, usize)]) -> Csr {
        let mut degree = vec![0.0_f64; n];
        for &(a, b) in edges {
            degree[a] += 1.0;
            degree[b] += 1.0;
        }
        let mut triplets: Vec<(u32, u32, f64)> = (0..n).map(|i| (i as u32, i as u32, 0.5)).collect();
        for &(a, b) in edges {
            let w = 0.5 / (degree[a] * degree[b]).sqrt();
            triplets.push((a as u32, b as u32, w));
            triplets.push((b as u32, a as u32, w));
        }
        Csr::from_triplets(n, triplets)
    }

    /// The borrowed view (checked).
    pub fn view(&self) -> Result<CsrView<'_>, CsrError> {
        CsrView::new(self.n, &self.row_ptr, &self.col_idx, &self.values)
    }
}

#[cfg(test)]
#[path = "sparse_tests.rs"]
mod tests;
