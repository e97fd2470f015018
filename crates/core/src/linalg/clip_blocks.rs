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

use super::clip::{clip_columns_l2, l2_norm, margin};
use super::gather::gather_walking;
use super::record_stats::RecordStats;
use super::records::Records;
use super::stream::StatsAccumulator;
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
    fn of(stats: RecordStats) -> Self {
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
fn pack_lower(m: &Matrix) -> Vec<f64> {
    let d = m.nrows();
    let mut out = Vec::with_capacity(packed_len(d));
    for j in 0..d {
        out.extend(m.column(j).iter().skip(j));
    }
    out
}

/// The symmetric matrix whose packed lower triangle is `packed`.
fn unpack_symmetric(packed: &[f64], d: usize) -> Matrix {
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
fn add_scaled(acc: &mut [f64], part: &[f64], scale: f64) {
    acc.iter_mut().zip(part).for_each(|(a, p)| *a += scale * p);
}

/// Copies the records `order[start..start + len]` of `xt` into the first columns of `buffer`
/// (d × L) and zeroes the rest.
fn gather(xt: Records<'_>, order: &[u32], buffer: &mut Matrix) {
    buffer.fill(0.0);
    for (slot, &i) in order.iter().enumerate() {
        buffer.column_mut(slot).copy_from(&xt.column(i as usize));
    }
}

/// [`gather`] by a walk over every page of `xt` ([`gather_walking`]), so that the pages read
/// are all of them, not those of the records of one norm block (issue 36).
fn gather_by_walk(xt: Records<'_>, order: &[u32], buffer: &mut Matrix) {
    buffer.fill(0.0);
    // (record, slot), in record order for the walk.
    let mut by_record: Vec<(usize, usize)> = order
        .iter()
        .enumerate()
        .map(|(slot, &i)| (i as usize, slot))
        .collect();
    by_record.sort_unstable();
    let indices: Vec<usize> = by_record.iter().map(|&(i, _)| i).collect();
    gather_walking(xt, &indices, |k, record| {
        buffer.column_mut(by_record[k].1).copy_from_slice(record);
    });
}

impl ClipBlocks {
    /// Sorts the records of `xt` by norm and keeps `blocks` blocks of them (at most n; at
    /// least 1). Two Gram updates per record (raw and normalised).
    ///
    /// # Panics
    /// When n does not fit in u32 (more than the service's `max_rows` allows).
    pub fn build(xt: Records<'_>, blocks: usize) -> Self {
        let (d, n) = (xt.d(), xt.n());
        let norms: Vec<f64> = xt
            .as_slice()
            .chunks_exact(d.max(1))
            .map(l2_norm)
            .take(n)
            .collect();
        let n32 = u32::try_from(n).expect("ClipBlocks::build: more than u32::MAX records");
        let mut order: Vec<u32> = (0..n32).collect();
        order.sort_by(|&a, &b| norms[a as usize].total_cmp(&norms[b as usize]).then(a.cmp(&b)));
        let block_len = n.div_ceil(blocks.clamp(1, n.max(1))).max(1);
        let mut buffer = Matrix::zeros(d, block_len);
        let blocks = order
            .chunks(block_len)
            .map(|part| {
                gather(xt, part, &mut buffer);
                let raw = accumulate(Records::from(&buffer), d);
                for (slot, &i) in part.iter().enumerate() {
                    let norm = norms[i as usize];
                    let scale = if norm > 0.0 { 1.0 / norm } else { 0.0 };
                    buffer.column_mut(slot).iter_mut().for_each(|v| *v *= scale);
                }
                let unit = accumulate(Records::from(&buffer), d);
                ClipBlock {
                    max_norm: part.last().map_or(0.0, |&i| norms[i as usize]),
                    raw: Moments::of(raw),
                    unit: Moments::of(unit),
                }
            })
            .collect();
        ClipBlocks {
            block_len,
            order,
            blocks,
        }
    }

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

    /// The statistics of the records of `xt` (the records these blocks were built from) clipped
    /// at `c` as [`clip_columns_l2`] clips them, and the work done, which is the same whatever
    /// c and the data are (module doc). `c` must be finite and > 0.
    pub fn clipped_stats(&self, xt: Records<'_>, c: f64) -> (RecordStats, ClipWork) {
        let d = xt.d();
        let target = c * (1.0 - margin(d));
        // The blocks' maxima ascend: b is the number of blocks within the target (every block
        // is compared, not only up to b), or the last block.
        let within = self
            .blocks
            .iter()
            .filter(|block| block.max_norm <= target)
            .count();
        let b = within.min(self.blocks.len().saturating_sub(1));
        let mut raw = vec![0.0; packed_len(d)];
        let mut unit = vec![0.0; packed_len(d)];
        let (mut raw_sums, mut unit_sums) = (Vector::zeros(d), Vector::zeros(d));
        let mut blocks_summed = 0;
        for (j, block) in self.blocks.iter().enumerate().filter(|&(j, _)| j != b) {
            let (gram, sums, part) = if j < b {
                (&mut raw, &mut raw_sums, &block.raw)
            } else {
                (&mut unit, &mut unit_sums, &block.unit)
            };
            add_scaled(gram, &part.gram, 1.0);
            *sums += &part.sums;
            blocks_summed += 1;
        }
        // Block b, padded to the block length, clipped record by record.
        let start = b * self.block_len;
        let end = (start + self.block_len).min(self.order.len());
        let mut buffer = Matrix::zeros(d, self.block_len);
        gather_by_walk(xt, &self.order[start..end], &mut buffer);
        clip_columns_l2(&mut buffer, c);
        let direct = accumulate(Records::from(&buffer), d);
        add_scaled(&mut raw, &unit, target * target);
        add_scaled(&mut raw, &pack_lower(&direct.gram), 1.0);
        let sums = raw_sums + unit_sums * target + direct.sums;
        let stats = RecordStats {
            n: xt.n(),
            gram: unpack_symmetric(&raw, d),
            sums,
        };
        let work = ClipWork {
            rows_gathered: self.block_len,
            blocks_summed,
        };
        (stats, work)
    }
}

/// Σ x xᵀ (full, symmetric) and Σ x of `records` by the statistics kernel.
fn accumulate(records: Records<'_>, d: usize) -> RecordStats {
    let mut acc = StatsAccumulator::new(d);
    acc.add(records);
    acc.finish()
}

#[cfg(test)]
#[path = "clip_blocks_tests.rs"]
mod tests;
