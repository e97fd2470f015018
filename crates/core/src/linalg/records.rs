//! A borrowed view of a records dataset: Xᵀ (d × n), one record per column, over any contiguous
//! column-major `&[f64]` — an owned [`Matrix`] or a memory-mapped file (`crate::ingest::mapped`).
//!
//! [`Records`] dereferences to a nalgebra [`DMatrixView`], so algorithms read it as they read a
//! matrix (`xt.column(i)`, `xt.column_sum()`, `xt.ncols()`), and the streaming kernels
//! ([`super::stream`]) hand its slice to faer without copying. A mapped file may also carry a
//! [`Residency`] hook: the kernels tell it when a stretch of records has been read for the last
//! time in a pass, so data larger than memory streams through with a bounded resident set.

use std::borrow::Cow;
use std::fmt;
use std::ops::Deref;
use std::sync::OnceLock;

use faer::MatRef;
use nalgebra::DMatrixView;
use rayon::prelude::*;

use super::Matrix;
use super::clip_blocks::ClipBlocks;
use super::record_stats::RecordStats;

/// Told by the streaming kernels when a stretch of records will not be read again in this pass.
/// The data must stay readable afterwards (a later pass reads it again); an implementation may
/// only drop its cached copy (e.g. unmap the pages, which the next read faults back in).
pub trait Residency: Sync {
    /// `part` is a sub-slice of the records' data that this pass is done with.
    fn release(&self, part: &[f64]);
}

/// Xᵀ (d × n), column-major, borrowed. Cheap to copy.
#[derive(Clone, Copy)]
pub struct Records<'a> {
    data: &'a [f64],
    view: DMatrixView<'a, f64>,
    residency: Option<&'a dyn Residency>,
    /// Precomputed XᵀX, Xᵀ1 and n of exactly these records, used by the kernels instead of a
    /// pass over the data (see [`super::record_stats`]).
    stats: Option<&'a RecordStats>,
    /// Statistics kept in blocks of the records sorted by norm, from which those of the records
    /// clipped at any bound follow (see [`super::clip_blocks`]).
    clip_blocks: Option<&'a ClipBlocks>,
    /// Where the records' norms are kept once computed (see [`Records::norms`]).
    norms: Option<&'a OnceLock<Vec<f64>>>,
}

impl<'a> Records<'a> {
    /// Xᵀ with `d` rows (features) and `n` columns (records) over `data`, column-major.
    ///
    /// # Panics
    /// When `data.len() != d·n`: the caller built the shape, this is a bug, not bad input.
    pub fn new(data: &'a [f64], d: usize, n: usize) -> Self {
        assert_eq!(
            Some(data.len()),
            d.checked_mul(n),
            "Records::new: {d}×{n} does not match {} values",
            data.len()
        );
        Records {
            data,
            view: DMatrixView::from_slice(data, d, n),
            residency: None,
            stats: None,
            clip_blocks: None,
            norms: None,
        }
    }

    /// The same records, with `cell` to keep their norms in once computed: whoever holds the
    /// cell for these records (the process's kept statistics of a dataset) computes them once.
    pub fn with_norms(self, cell: &'a OnceLock<Vec<f64>>) -> Self {
        Records {
            norms: Some(cell),
            ..self
        }
    }

    /// ‖x_i‖₂ of every record, in record order ([`super::clip::l2_norm`], the norm clipping
    /// compares): from the attached cell, computed into it on first use, else computed (one
    /// pass, on every core).
    pub fn norms(&self) -> Cow<'a, [f64]> {
        let compute = || -> Vec<f64> {
            let d = self.d();
            if d == 0 {
                return vec![0.0; self.n()];
            }
            self.data.par_chunks_exact(d).map(super::clip::l2_norm).collect()
        };
        match self.norms {
            Some(cell) => Cow::Borrowed(cell.get_or_init(compute).as_slice()),
            None => Cow::Owned(compute()),
        }
    }

    /// The same records, with their precomputed statistics.
    ///
    /// # Panics
    /// When the statistics do not fit the records' shape (a bug in the caller, which must check
    /// [`RecordStats::fits`] on statistics read from storage).
    pub fn with_stats(self, stats: &'a RecordStats) -> Self {
        assert!(
            stats.fits(self.d(), self.n()),
            "Records::with_stats: statistics of another shape"
        );
        Records {
            stats: Some(stats),
            ..self
        }
    }

    /// The precomputed statistics of these records, if attached.
    pub fn stats(&self) -> Option<&'a RecordStats> {
        self.stats
    }

    /// The same records, with their kept blocks for clipping.
    ///
    /// # Panics
    /// When the blocks do not fit the records' shape (a bug in the caller, which must check
    /// [`ClipBlocks::fits`] on blocks read from storage).
    pub fn with_clip_blocks(mut self, blocks: &'a ClipBlocks) -> Self {
        let fits = blocks.fits(self.d(), self.n());
        assert!(fits, "Records::with_clip_blocks: blocks of another shape");
        self.clip_blocks = Some(blocks);
        self
    }

    /// The kept blocks for clipping of these records, if attached.
    pub fn clip_blocks(&self) -> Option<&'a ClipBlocks> {
        self.clip_blocks
    }

    /// The same records without precomputed statistics (the kernels then read the data).
    pub fn without_stats(self) -> Self {
        Records { stats: None, ..self }
    }

    /// The same records, with `residency` told when a streaming pass is done with a stretch.
    pub fn with_residency(self, residency: &'a dyn Residency) -> Self {
        Records {
            residency: Some(residency),
            ..self
        }
    }

    /// Features per record.
    pub fn d(&self) -> usize {
        self.view.nrows()
    }

    /// Number of records.
    pub fn n(&self) -> usize {
        self.view.ncols()
    }

    /// The column-major values, record after record.
    pub fn as_slice(&self) -> &'a [f64] {
        self.data
    }

    /// The records `start .. start + len` (the residency hook goes along, statistics do not).
    ///
    /// # Panics
    /// When the range is out of bounds.
    pub fn block(&self, start: usize, len: usize) -> Records<'a> {
        let d = self.d();
        Records {
            data: &self.data[start * d..(start + len) * d],
            view: DMatrixView::from_slice(&self.data[start * d..(start + len) * d], d, len),
            residency: self.residency,
            // A block is other records: the whole set's statistics do not describe it.
            stats: None,
            clip_blocks: None,
            norms: None,
        }
    }

    /// A faer view (no copy).
    pub(crate) fn faer(&self) -> MatRef<'a, f64> {
        MatRef::from_column_major_slice(self.data, self.d(), self.n())
    }

    /// Tells the residency hook, if any, that this pass is done with these records.
    pub(crate) fn release(&self) {
        if let Some(r) = self.residency {
            r.release(self.data);
        }
    }

    /// An owned copy (d × n).
    pub fn to_matrix(&self) -> Matrix {
        Matrix::from_column_slice(self.d(), self.n(), self.data)
    }
}

impl<'a> Deref for Records<'a> {
    type Target = DMatrixView<'a, f64>;

    fn deref(&self) -> &Self::Target {
        &self.view
    }
}

impl<'a> From<&'a Matrix> for Records<'a> {
    fn from(m: &'a Matrix) -> Self {
        Records::new(m.as_slice(), m.nrows(), m.ncols())
    }
}

impl fmt::Debug for Records<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Records")
            .field("d", &self.d())
            .field("n", &self.n())
            .field("residency", &self.residency.is_some())
            .finish()
    }
}

#[cfg(test)]
#[path = "records_tests.rs"]
mod tests;
