//! The statistics of records clipped at any bound c, from statistics kept in blocks of the
//! records sorted by norm, at a cost that does not depend on the data (issue 21 §2;
//! docs/performance-service.md, "Clipped jobs on kept statistics").
//!
//! **What is kept.** The records sorted by norm (ascending, ties by index; the permutation as
//! u32) and split into B blocks of L = ⌈n/B⌉ consecutive sorted records (the last may be
//! shorter). Per block: the raw Σ x xᵀ and Σ x, the normalised Σ x xᵀ/‖x‖² and Σ x/‖x‖ (a zero
//! record adds nothing to them), and its largest norm. Matrices are kept as packed lower
//! triangles. B depends on public facts only ([`block_count`]: d, and n through B ≤ n).
//!
//! **The clipped statistics.** Clipping at c scales a record x to t·x/‖x‖ when ‖x‖ > t, with
//! t = c·(1 − margin(d)) the target of [`super::clip::clip_l2`], and keeps it otherwise. Let b
//! be the first block whose largest norm exceeds t (the last block if none does). Every record
//! of a block before b has norm ≤ t (kept as it is); every record of a block after b has norm
//! ≥ the largest of block b > t (scaled). So
//!
//!   Σ clip(x) clip(x)ᵀ = Σ_{j<b} raw_j + t²·Σ_{j>b} normalised_j + (block b, clipped directly),
//!
//! and the same for the sums, where block b's rows are gathered through the permutation, padded
//! with zero records to L, and clipped by the same [`super::clip::clip_columns_l2`] as every
//! clipped record. Whatever c and the data are, the work is the same: B − 1 packed additions
//! (each to one of two accumulators), L gathered records and one Gram update of L records
//! ([`ClipWork`] counts it). Block b's records lie wherever the data put them, so they are
//! gathered by a walk over every page of the records ([`super::gather`]): the pages read are
//! all of them, not those of the records whose norms fall in block b (issue 36). Up to rounding (t²·xxᵀ/‖x‖² against (t/‖x‖·x)(t/‖x‖·x)ᵀ), the
//! result is the clipped records' own statistics, so the algorithm's calibration to c holds.
//!
//! This module holds values and arithmetic only; the file format is `ingest::stats_file`.

use super::record_stats::RecordStats;
use super::{Matrix, Vector};

/// Bytes the kept block Grams may take (two d×d matrices per block, counted whole).
pub const BLOCK_BUDGET_BYTES: usize = 128 << 20;
/// The most blocks kept.
pub const MAX_BLOCKS: usize = 16;

/// B for records of `d` features and `n` records: the largest B ≤ [`MAX_BLOCKS`] with
/// 2·B·d²·8 bytes ≤ [`BLOCK_BUDGET_BYTES`], at most n, at least 1. A function of the public d
/// and n only. B = 1 gives no shortcut (its one block is every record), so nothing is kept then.
pub fn block_count(d: usize, n: usize) -> usize {
    let per_block = 2 * 8 * d.max(1).saturating_mul(d.max(1));
    (BLOCK_BUDGET_BYTES / per_block)
        .clamp(1, MAX_BLOCKS)
        .min(n.max(1))
}

/// Σ y yᵀ (packed lower triangle, column by column) and Σ y over a block's records y.
#[derive(Debug, Clone, PartialEq)]
pub struct Moments {
    pub gram: Vec<f64>,
    pub sums: Vector,
}

/// One block's kept statistics: its largest norm, the moments of its records x (`raw`) and of
/// x/‖x‖ (`unit`, 0 for a zero record).
#[derive(Debug, Clone, PartialEq)]
pub struct ClipBlock {
    pub max_norm: f64,
    pub raw: Moments,
    pub unit: Moments,
}

impl Moments {
    pub(crate) fn of(stats: RecordStats) -> Self {
        Moments {
            gram: pack_lower(&stats.gram),
            sums: stats.sums,
        }
    }

    fn is_finite(&self) -> bool {
        self.gram.iter().chain(self.sums.iter()).all(|v| v.is_finite())
    }
}

/// The kept blocks of a records dataset (see the module doc).
#[derive(Debug, Clone, PartialEq)]
pub struct ClipBlocks {
    /// Records per block (the last block may have fewer; its direct pass pads to this).
    pub block_len: usize,
    /// Record indices sorted by norm, ascending, ties by index.
    pub order: Vec<u32>,
    pub blocks: Vec<ClipBlock>,
}

/// The work one [`ClipBlocks::clipped_stats`] did: the same for every c (tests check it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClipWork {
    /// Records gathered and clipped directly (always the block length L).
    pub rows_gathered: usize,
    /// Kept blocks added (always B − 1).
    pub blocks_summed: usize,
}

/// Entries of a packed lower triangle of a d×d matrix.
pub fn packed_len(d: usize) -> usize {
    d * (d + 1) / 2
}

/// The lower triangle of `m`, column by column.
pub(crate) fn pack_lower(m: &Matrix) -> Vec<f64> {
    let d = m.nrows();
    let mut out = Vec::with_capacity(packed_len(d));
    for j in 0..d {
        out.extend(m.column(j).iter().skip(j));
    }
    out
}

/// The symmetric matrix whose packed lower triangle is `packed`.
pub(crate) fn unpack_symmetric(packed: &[f64], d: usize) -> Matrix {
    let mut m = Matrix::zeros(d, d);
    let mut at = 0;
    for j in 0..d {
        for i in j..d {
            m[(i, j)] = packed[at];
            m[(j, i)] = packed[at];
            at += 1;
        }
    }
    m
}

/// `acc += scale·part`, entry by entry.
pub(crate) fn add_scaled(acc: &mut [f64], part: &[f64], scale: f64) {
    acc.iter_mut().zip(part).for_each(|(a, p)| *a += scale * p);
}

impl ClipBlocks {
    /// Whether these blocks can describe `d`-feature records with `n` records: the shapes agree,
    /// the order is a permutation of 0..n cut into blocks of `block_len`, the block maxima
    /// ascend and every value is finite (a corrupt file is refused, not used).
    pub fn fits(&self, d: usize, n: usize) -> bool {
        let len = self.block_len;
        let shapes = len > 0
            && self.order.len() == n
            && self.blocks.len() == n.div_ceil(len)
            && self.blocks.iter().all(|b| {
                [&b.raw, &b.unit]
                    .iter()
                    .all(|m| m.gram.len() == packed_len(d) && m.sums.len() == d)
            });
        if !shapes {
            return false;
        }
        let mut seen = vec![false; n];
        let permutation = self
            .order
            .iter()
            .all(|&i| (i as usize) < n && !std::mem::replace(&mut seen[i as usize], true));
        let ascending = self.blocks.windows(2).all(|w| w[0].max_norm <= w[1].max_norm);
        let finite = self
            .blocks
            .iter()
            .all(|b| b.max_norm.is_finite() && b.raw.is_finite() && b.unit.is_finite());
        permutation && ascending && finite
    }
}

#[cfg(test)]
#[path = "clip_blocks_tests.rs"]
mod tests;
