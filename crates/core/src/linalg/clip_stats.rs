//! Building [`ClipBlocks`] from records and reading clipped statistics from them (the
//! algorithm of [`super::clip_blocks`]'s module doc). Apart from the kept blocks' types so that
//! [`Records`], which carries blocks read from storage, does not depend on the records'
//! passes.

use super::clip::{clip_columns_l2, l2_norm, margin};
use super::clip_blocks::{
    ClipBlock, ClipBlocks, ClipWork, Moments, add_scaled, pack_lower, packed_len, unpack_symmetric,
};
use super::gather::gather_walking;
use super::record_stats::RecordStats;
use super::records::Records;
use super::stream::StatsAccumulator;
use super::{Matrix, Vector};

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
