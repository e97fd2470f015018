//! Kernels that read the records once per pass, front to back, in row blocks of X (column blocks
//! of Xᵀ): the Gram matrix XᵀX, the centred Gram matrix, and the factored product Xᵀ(X·V).
//!
//! The records may be a memory-mapped file larger than memory ([`Records`]). Each pass walks
//! segments of [`SEGMENT_BYTES`] and, after each, tells the records' residency hook that it is
//! done with them, so the resident set stays a few segments whatever n is; the working memory
//! of the kernels is the d×d or d×p result plus, for the centred Gram, one segment's copy.
//! Everything in the pass is sequential over the file (or over one contiguous part per thread),
//! which is what the kernel's readahead serves best.

use faer::linalg::matmul::{self, triangular, triangular::BlockStructure};
use faer::{Accum, MatRef, Par};
use rayon::prelude::*;

use super::Matrix;
use super::Vector;
use super::record_stats::RecordStats;
use super::records::Records;
use super::threads::{par_for, par_for_beside_a_busy_thread, work};
use super::view::view_mut;

/// Bytes of Xᵀ per segment: the unit after which a pass releases what it read. Large enough
/// that the per-call overhead of a faer product (packing, d² result traffic) is small against
/// the segment's work, small enough that a few segments per thread fit in any memory cap.
pub const SEGMENT_BYTES: usize = 32 << 20;

/// Bytes of Xᵀ per cache block in [`gram_t_times`]: small enough for the block to stay in a
/// core's L2 cache between its two products (measured in docs/performance-linalg.md).
const BLOCK_BYTES: usize = 256 * 1024;

/// Records per segment at `d` features (at least one).
fn segment_len(d: usize) -> usize {
    (SEGMENT_BYTES / (8 * d.max(1))).max(1)
}

/// Calls `f` on consecutive blocks of at most `len` records, then releases each block.
fn for_each_block(xt: Records<'_>, len: usize, mut f: impl FnMut(Records<'_>)) {
    let n = xt.n();
    let mut start = 0;
    while start < n {
        let take = len.min(n - start);
        let block = xt.block(start, take);
        f(block);
        block.release();
        start += take;
    }
}

/// `XᵀX` for records held transposed: given `xt` = Xᵀ (d×n), returns the d×d Gram matrix
/// Σ_i x_i x_iᵀ = xt·xtᵀ, accumulated segment by segment. Computes the lower triangle only
/// (d²n/2 multiply-adds) and mirrors it, so the result is exactly symmetric.
pub fn gram_t<'a>(xt: impl Into<Records<'a>>) -> Matrix {
    let xt = xt.into();
    if let Some(stats) = xt.stats() {
        return stats.gram.clone();
    }
    gram_t_in_segments(xt, segment_len(xt.d()))
}

/// [`gram_t`] with `segment` records per segment.
fn gram_t_in_segments(xt: Records<'_>, segment: usize) -> Matrix {
    gram_and_sums_in_segments(xt, segment, false).0
}

/// XᵀX and Xᵀ1 in one pass (the records are read once, which matters when they stream from
/// disk); the Gram matrix is bit-identical to [`gram_t`]'s. Ignores attached statistics: this is
/// how they are made.
pub fn gram_and_sums<'a>(xt: impl Into<Records<'a>>) -> (Matrix, Vector) {
    let xt = xt.into().without_stats();
    gram_and_sums_in_segments(xt, segment_len(xt.d()), true)
}

impl RecordStats {
    /// One streamed pass over the records for both (the Gram matrix by the same kernel and in
    /// the same order as [`gram_t`], so it is bit-identical to what a job would compute).
    pub fn of(xt: Records<'_>) -> Self {
        let (gram, sums) = gram_and_sums(xt);
        Self {
            n: xt.n(),
            gram,
            sums,
        }
    }
}

/// Records per block that [`StatsAccumulator::add`] must be given (all blocks but the last)
/// for its result to be bit-identical to [`RecordStats::of`]: one segment of the pass.
pub fn stats_block_len(d: usize) -> usize {
    segment_len(d)
}

/// [`RecordStats`] built from records that arrive block by block (an upload as it streams),
/// by the same kernel, block for block, as [`RecordStats::of`]: given blocks of
/// [`stats_block_len`] records (the last may be shorter), the result is bit-identical to one
/// pass over the whole records. The Gram matrix is a symmetric rank-k update per block that
/// forms its lower triangle only (d²k/2 multiply-adds), mirrored at the end.
#[derive(Debug, Clone)]
pub struct StatsAccumulator {
    gram: Matrix,
    sums: Vector,
    n: usize,
    sums_wanted: bool,
    /// Leaves a core to another busy thread ([`StatsAccumulator::beside_a_busy_thread`]).
    beside_busy: bool,
}

impl StatsAccumulator {
    /// Nothing accumulated yet, for records of `d` features.
    pub fn new(d: usize) -> Self {
        Self::with_sums(d, true)
    }

    fn with_sums(d: usize, sums_wanted: bool) -> Self {
        Self {
            gram: Matrix::zeros(d, d),
            sums: Vector::zeros(d),
            n: 0,
            sums_wanted,
            beside_busy: false,
        }
    }

    /// Like [`StatsAccumulator::new`], but each block is added on one thread fewer than the pool
    /// has ([`super::threads::par_for_beside_a_busy_thread`]): for a worker that runs beside
    /// another busy thread (an upload's parse). The bits are those of any thread count (the
    /// rank-k update splits the output, not the sum; `stream_tests` checks it).
    pub fn beside_a_busy_thread(d: usize) -> Self {
        Self {
            beside_busy: true,
            ..Self::new(d)
        }
    }

    /// Adds the records of `block` (which must have d features).
    ///
    /// # Panics
    /// When `block` does not have d features (a bug in the caller).
    pub fn add(&mut self, block: Records<'_>) {
        assert_d(
            &block,
            self.gram.nrows(),
            "StatsAccumulator::add",
            "the accumulator",
        );
        // Threads by the block's own work, so that the same blocks give the same bits whether
        // they come from a stored file or from an upload whose length is not known yet.
        let work = work(block.d(), block.d(), block.n()) / 2;
        let par = if self.beside_busy {
            par_for_beside_a_busy_thread(work)
        } else {
            par_for(work)
        };
        add_lower_gram(&mut self.gram, block.faer(), par);
        if self.sums_wanted {
            self.sums += block.column_sum();
        }
        self.n += block.n();
    }

    /// The statistics of every record added.
    pub fn finish(mut self) -> RecordStats {
        self.gram.fill_upper_triangle_with_lower_triangle();
        RecordStats {
            n: self.n,
            gram: self.gram,
            sums: self.sums,
        }
    }
}

/// The Gram pass, adding each segment's column sums too when `sums` (segment by segment, so
/// they are read while the segment is in cache).
fn gram_and_sums_in_segments(xt: Records<'_>, segment: usize, sums: bool) -> (Matrix, Vector) {
    let mut acc = StatsAccumulator::with_sums(xt.d(), sums);
    for_each_block(xt, segment, |block| acc.add(block));
    let stats = acc.finish();
    (stats.gram, stats.sums)
}

/// Σ_i x_i, the column sums of Xᵀ (d): from the attached statistics when present, else one
/// pass.
pub fn column_sums<'a>(xt: impl Into<Records<'a>>) -> Vector {
    let xt = xt.into();
    match xt.stats() {
        Some(stats) => stats.sums.clone(),
        None => xt.column_sum(),
    }
}

/// `(X − 1μᵀ)ᵀ(X − 1μᵀ)` for records held transposed and a centre μ (length d), without a
/// centred copy of the data: each segment is copied into one reused buffer, centred there and
/// accumulated. Exactly symmetric, like [`gram_t`].
///
/// # Panics
/// When `mean` does not have d entries (a bug in the caller).
pub fn centred_gram_t<'a>(xt: impl Into<Records<'a>>, mean: &Vector) -> Matrix {
    let xt = xt.into();
    if let Some(stats) = xt.stats() {
        // XᵀX − sμᵀ − μsᵀ + nμμᵀ: entry errors of a few ulps of n·max‖x‖², against the
        // centred pass's few ulps of its own entries; the difference matters only for data
        // whose spread is below ~1e-10 of its mean (see record_stats.rs).
        assert_d(&xt, mean.len(), "centred_gram_t", "the centre");
        return stats.centred_gram(mean);
    }
    centred_gram_t_in_segments(xt, mean, segment_len(xt.d()))
}

/// Panics (a bug in the caller of `function`) unless `operand` has d entries or rows (`len`).
fn assert_d(xt: &Records<'_>, len: usize, function: &str, operand: &str) {
    let (d, n) = (xt.d(), xt.n());
    assert_eq!(
        len, d,
        "{function}: xt is {d}×{n} but {operand} has {len} entries or rows"
    );
}

/// [`centred_gram_t`] with `segment` records per segment.
fn centred_gram_t_in_segments(xt: Records<'_>, mean: &Vector, segment: usize) -> Matrix {
    let d = xt.d();
    assert_d(&xt, mean.len(), "centred_gram_t", "the centre");
    let mut g = Matrix::zeros(d, d);
    let par = par_for(work(d, d, xt.n()) / 2);
    let len = segment.min(xt.n());
    let mut buffer = Matrix::zeros(d, len);
    for_each_block(xt, len, |block| {
        let mut centred = buffer.columns_mut(0, block.n());
        centred.copy_from(&*block);
        for mut col in centred.column_iter_mut() {
            col -= mean;
        }
        let values = &buffer.as_slice()[..d * block.n()];
        add_lower_gram(&mut g, MatRef::from_column_major_slice(values, d, block.n()), par);
    });
    g.fill_upper_triangle_with_lower_triangle();
    g
}

/// Adds the lower triangle of x·xᵀ to the lower triangle of `g`.
fn add_lower_gram(g: &mut Matrix, x: MatRef<'_, f64>, par: Par) {
    triangular::matmul(
        view_mut(g),
        BlockStructure::TriangularLower,
        Accum::Add,
        x,
        BlockStructure::Rectangular,
        x.transpose(),
        BlockStructure::Rectangular,
        1.0,
        par,
    );
}

/// `A·V` for the Gram matrix A = XᵀX of records held transposed (`xt` = Xᵀ, d×n; `v` d×p),
/// without forming A: Σ_b X_bᵀ(X_b V) over blocks b of records, O(ndp) instead of O(nd² + d²p).
///
/// This is the data access of the power-method family (docs/design/algorithms.md, "Sensitivities shared by
/// the power-method family": the released quantity is A·X). The records are split into one
/// contiguous part per pool thread (a single part below [`super::threads::PRODUCT_MIN_WORK`]);
/// each thread walks its part in segments, and each segment in cache-sized blocks, so X is read
/// from memory once, front to back; the per-part sums are added in part order, so the result
/// is reproducible for a given thread count.
///
/// # Panics
/// When `v` does not have d rows (a bug in the caller).
pub fn gram_t_times<'a>(xt: impl Into<Records<'a>>, v: &Matrix) -> Matrix {
    let xt = xt.into();
    if let Some(stats) = xt.stats() {
        assert_d(&xt, v.nrows(), "gram_t_times", "v");
        return super::kernels::matmul(&stats.gram, v);
    }
    gram_t_times_in_segments(xt, v, segment_len(xt.d()))
}

/// [`gram_t_times`] with about `segment` records per segment (rounded up to whole cache blocks).
fn gram_t_times_in_segments(xt: Records<'_>, v: &Matrix, segment: usize) -> Matrix {
    let (d, n) = (xt.d(), xt.n());
    let p = v.ncols();
    assert_d(&xt, v.nrows(), "gram_t_times", "v");
    let v = super::view::view(v);
    let parts = match par_for(work(2 * n, d, p)) {
        Par::Seq => 1,
        Par::Rayon(threads) => threads.get().min(n),
    };
    if parts <= 1 {
        return gram_times_part(xt, v, segment);
    }
    let chunk = n.div_ceil(parts);
    let partials: Vec<Matrix> = (0..parts)
        .into_par_iter()
        .map(|t| {
            let start = (t * chunk).min(n);
            gram_times_part(xt.block(start, chunk.min(n - start)), v, segment)
        })
        .collect();
    partials
        .into_iter()
        .fold(Matrix::zeros(d, p), |acc, part| acc + part)
}

/// Σ_b X_bᵀ(X_b V) for the records of `xt`, sequentially, segment by segment, each segment in
/// cache-sized blocks.
fn gram_times_part(xt: Records<'_>, v: MatRef<'_, f64>, segment: usize) -> Matrix {
    let (d, n, p) = (xt.d(), xt.n(), v.ncols());
    let block = (BLOCK_BYTES / (8 * d.max(1))).clamp(16, 4096);
    let segment = segment.max(1).div_ceil(block) * block;
    let mut out = Matrix::zeros(d, p);
    let mut scores = faer::Mat::<f64>::zeros(block.min(n), p);
    for_each_block(xt, segment, |part| {
        let x = part.faer();
        let mut start = 0;
        while start < part.n() {
            let len = block.min(part.n() - start);
            let records = x.subcols(start, len);
            let mut s = scores.as_mut().subrows_mut(0, len);
            matmul::matmul(s.as_mut(), Accum::Replace, records.transpose(), v, 1.0, Par::Seq);
            matmul::matmul(view_mut(&mut out), Accum::Add, records, s.as_ref(), 1.0, Par::Seq);
            start += len;
        }
    });
    out
}

/// ‖X q_j‖² = q_jᵀ(XᵀX)q_j for each column q_j of `q` (d×k): the energy of the records along
/// each direction, one pass segment by segment, holding one segment's scores (segment × k).
///
/// # Panics
/// When `q` does not have d rows (a bug in the caller).
pub fn projected_energy<'a>(xt: impl Into<Records<'a>>, q: &Matrix) -> Vec<f64> {
    let xt = xt.into();
    if let Some(stats) = xt.stats() {
        assert_d(&xt, q.nrows(), "projected_energy", "q");
        let gq = super::kernels::matmul(&stats.gram, q);
        return (0..q.ncols()).map(|j| q.column(j).dot(&gq.column(j))).collect();
    }
    projected_energy_in_segments(xt, q, segment_len(xt.d()))
}

/// [`projected_energy`] with `segment` records per segment.
fn projected_energy_in_segments(xt: Records<'_>, q: &Matrix, segment: usize) -> Vec<f64> {
    let (d, n, k) = (xt.d(), xt.n(), q.ncols());
    assert_d(&xt, q.nrows(), "projected_energy", "q");
    let q = super::view::view(q);
    let mut energy = vec![0.0; k];
    let mut scores = faer::Mat::<f64>::zeros(segment.min(n), k);
    for_each_block(xt, segment, |block| {
        let mut s = scores.as_mut().subrows_mut(0, block.n());
        let par = par_for(work(block.n(), d, k));
        matmul::matmul(s.as_mut(), Accum::Replace, block.faer().transpose(), q, 1.0, par);
        for (j, e) in energy.iter_mut().enumerate() {
            *e += s.as_ref().col(j).iter().map(|v| v * v).sum::<f64>();
        }
    });
    energy
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
