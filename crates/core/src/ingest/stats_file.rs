//! A records dataset's statistics ([`RecordStats`]: XᵀX, Xᵀ1, n) kept beside its data file, so
//! that jobs do not recompute the O(nd²) Gram matrix (docs/design/architecture.md, "Record
//! statistics").
//!
//! **Format** (`{id}.stats` next to `{id}.f64`): the magic `PPCASTA1`, n and d as little-endian
//! u64, the d×d Gram matrix (column-major) and the d sums as little-endian f64, then the SHA-256
//! of everything before it. A file that is short, of another shape, non-finite or fails its hash
//! is ignored and rebuilt, never used.
//!
//! **Version 2** (`PPCASTA2`) adds, between the sums and the hash, the blocks for clipped jobs
//! ([`ClipBlocks`]): B and the block length L as u64; per block its largest norm, the raw Gram's
//! packed lower triangle and sums, the normalised Gram's packed lower triangle and sums (f64);
//! then the records' order by norm (n × u32). A version-1 file (kept before the blocks existed,
//! or where B = 1) still loads, with no blocks: its clipped jobs make the full pass. The blocks
//! are added after the statistics are kept ([`add_clip_blocks`]), never by a job.
//!
//! **Writing.** Under a temporary name, then renamed into place, so a reader sees a whole file
//! or none; two jobs (or two replicas) building at once both write the same bytes and the last
//! rename wins. Datasets are immutable once uploaded, so a statistics file never goes stale; it
//! is removed with its dataset.
//!
//! **One path.** The job runner reaches the statistics through [`open_records`]: the kept file
//! when it is intact, else one pass over the data, kept for the next reader. An upload builds
//! them while it streams (`super::ingest_with_stats`) and keeps them with [`keep`] once its data
//! is attached; only if that failed does it fall back to [`open_records`].

use std::fs;
use std::io::{self, Write};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use sha2::{Digest, Sha256};

use super::load::{StoredData, open, open_lazily};
use crate::linalg::clip_blocks::{ClipBlock, Moments, block_count, packed_len};
use crate::linalg::{ClipBlocks, Matrix, RecordStats, Records, Vector};

const MAGIC: &[u8; 8] = b"PPCASTA1";
const MAGIC_WITH_BLOCKS: &[u8; 8] = b"PPCASTA2";
const HASH_BYTES: usize = 32;

/// The bytes of `stats` in the file format (version 1).
pub fn encode(stats: &RecordStats) -> Vec<u8> {
    encode_with_blocks(stats, None)
}

/// The bytes of `stats` and, when given, `blocks` in the file format (version 2 with blocks,
/// version 1 without).
pub fn encode_with_blocks(stats: &RecordStats, blocks: Option<&ClipBlocks>) -> Vec<u8> {
    let d = stats.d();
    let block_values = blocks.map_or(0, |b| b.blocks.len() * (2 * packed_len(d) + 2 * d + 1));
    let order_bytes = blocks.map_or(0, |b| 4 * b.order.len());
    let mut out = Vec::with_capacity(8 + 32 + 8 * (d * d + d + block_values) + order_bytes + HASH_BYTES);
    out.extend_from_slice(if blocks.is_some() {
        MAGIC_WITH_BLOCKS
    } else {
        MAGIC
    });
    let put = |out: &mut Vec<u8>, values: &mut dyn Iterator<Item = &f64>| {
        values.for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
    };
    out.extend_from_slice(&(stats.n as u64).to_le_bytes());
    out.extend_from_slice(&(d as u64).to_le_bytes());
    put(&mut out, &mut stats.gram.iter().chain(stats.sums.iter()));
    if let Some(blocks) = blocks {
        out.extend_from_slice(&(blocks.blocks.len() as u64).to_le_bytes());
        out.extend_from_slice(&(blocks.block_len as u64).to_le_bytes());
        for b in &blocks.blocks {
            put(&mut out, &mut std::iter::once(&b.max_norm));
            for m in [&b.raw, &b.unit] {
                put(&mut out, &mut m.gram.iter().chain(m.sums.iter()));
            }
        }
        blocks
            .order
            .iter()
            .for_each(|i| out.extend_from_slice(&i.to_le_bytes()));
    }
    let hash = Sha256::digest(&out);
    out.extend_from_slice(&hash);
    out
}

/// The statistics in `bytes` if they are a whole, intact file (either version) for records of
/// `d` features and `n` records; `None` otherwise.
pub fn decode(bytes: &[u8], d: usize, n: usize) -> Option<RecordStats> {
    decode_with_blocks(bytes, d, n).map(|(stats, _)| stats)
}

/// The statistics in `bytes` and, in a version-2 file, the blocks, if the file is whole and
/// intact for records of `d` features and `n` records; `None` otherwise.
pub fn decode_with_blocks(bytes: &[u8], d: usize, n: usize) -> Option<(RecordStats, Option<ClipBlocks>)> {
    let body_len = bytes.len().checked_sub(HASH_BYTES)?;
    let (body, hash) = bytes.split_at(body_len);
    let with_blocks = match body.get(..8)? {
        magic if magic == MAGIC => false,
        magic if magic == MAGIC_WITH_BLOCKS => true,
        _ => return None,
    };
    let word =
        |i: usize| -> Option<u64> { Some(u64::from_le_bytes(body.get(8 * i..8 * i + 8)?.try_into().ok()?)) };
    if word(1)? != n as u64 || word(2)? != d as u64 {
        return None;
    }
    let values = d.checked_mul(d)?.checked_add(d)?;
    let stats_end = values.checked_mul(8)?.checked_add(24)?;
    let (block_count, block_len) = if with_blocks {
        let at = stats_end / 8;
        (
            usize::try_from(word(at)?).ok()?,
            usize::try_from(word(at + 1)?).ok()?,
        )
    } else {
        (0, 0)
    };
    let per_block = packed_len(d).checked_mul(2)?.checked_add(2 * d + 1)?;
    let blocks_len = block_count.checked_mul(per_block)?.checked_mul(8)?;
    let expected = if with_blocks {
        stats_end
            .checked_add(16)?
            .checked_add(blocks_len)?
            .checked_add(n.checked_mul(4)?)?
    } else {
        stats_end
    };
    if body_len != expected || Sha256::digest(body).as_slice() != hash {
        return None;
    }
    let mut floats = body[24..]
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap_or_default()));
    let gram = Matrix::from_iterator(d, d, floats.by_ref().take(d * d));
    let sums = Vector::from_iterator(d, floats.by_ref().take(d));
    let stats = RecordStats { n, gram, sums };
    if !stats.fits(d, n) {
        return None;
    }
    if !with_blocks {
        return Some((stats, None));
    }
    let mut floats = floats.skip(2);
    let blocks = (0..block_count)
        .map(|_| {
            let max_norm = floats.next().unwrap_or(f64::NAN);
            let mut moments = || Moments {
                gram: floats.by_ref().take(packed_len(d)).collect(),
                sums: Vector::from_iterator(d, floats.by_ref().take(d)),
            };
            let raw = moments();
            let unit = moments();
            ClipBlock { max_norm, raw, unit }
        })
        .collect();
    let order = body[stats_end + 16 + blocks_len..]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap_or_default()))
        .collect();
    let blocks = ClipBlocks {
        block_len,
        order,
        blocks,
    };
    blocks.fits(d, n).then_some((stats, Some(blocks)))
}

/// A records dataset's kept statistics and, when built, its blocks for clipped jobs: what a
/// stats file holds, decoded. Shared (`Arc`) so that a process may keep the latest in memory
/// between jobs (`crate::stats_builds`): a dataset is immutable, so they never go stale.
#[derive(Debug)]
pub struct KeptStats {
    pub stats: RecordStats,
    pub blocks: Option<ClipBlocks>,
    /// The records' norms, computed by the first job that needs them
    /// ([`Records::with_norms`]).
    pub norms: OnceLock<Vec<f64>>,
}

impl KeptStats {
    /// Statistics and blocks, with no norms computed yet.
    pub fn new(stats: RecordStats, blocks: Option<ClipBlocks>) -> Self {
        KeptStats {
            stats,
            blocks,
            norms: OnceLock::new(),
        }
    }

    /// Statistics without blocks, with the records' norms already known (an upload computed
    /// them as it streamed).
    pub fn with_norms(stats: RecordStats, norms: Vec<f64>) -> Self {
        KeptStats {
            stats,
            blocks: None,
            norms: OnceLock::from(norms),
        }
    }

    /// The same statistics and norms (if computed), with `blocks` added.
    pub fn and_blocks(&self, blocks: ClipBlocks) -> Self {
        KeptStats {
            stats: self.stats.clone(),
            blocks: Some(blocks),
            norms: self
                .norms
                .get()
                .cloned()
                .map_or_else(OnceLock::new, OnceLock::from),
        }
    }

    /// Bytes they take in memory, roughly (the matrices, the order and the norms), the same
    /// before and after the norms are computed.
    pub fn bytes(&self) -> usize {
        let d = self.stats.d();
        let blocks = self.blocks.as_ref().map_or(0, |b| {
            8 * b.blocks.len() * (2 * packed_len(d) + 2 * d + 1) + 4 * b.order.len()
        });
        // The norms are counted whether computed yet or not: the size must not change while
        // the entry is kept.
        8 * (d * d + d + self.stats.n) + blocks
    }

    /// Whether they can be those of `d`-feature records with `n` records.
    fn fits(&self, d: usize, n: usize) -> bool {
        self.stats.fits(d, n) && self.blocks.as_ref().is_none_or(|b| b.fits(d, n))
    }
}

/// A records dataset's data, memory-mapped, with its statistics.
#[derive(Debug)]
pub struct OpenedRecords {
    data: StoredData,
    kept: Arc<KeptStats>,
}

impl OpenedRecords {
    /// Xᵀ (d × n) with the statistics attached, so the kernels use them instead of a pass, and
    /// the blocks for clipped jobs when the file has them.
    pub fn records(&self) -> Records<'_> {
        let records = self
            .data
            .records()
            .with_stats(&self.kept.stats)
            .with_norms(&self.kept.norms);
        match &self.kept.blocks {
            Some(blocks) => records.with_clip_blocks(blocks),
            None => records,
        }
    }

    /// The statistics and blocks these records were opened with.
    pub fn kept(&self) -> &Arc<KeptStats> {
        &self.kept
    }
}

/// Opens the records dataset at `data` (`n` records of `d` features) with its statistics, the
/// one way the runner and the upload reach them: `cached` when given (what this process decoded
/// before) and of this shape, else read from `stats` when an intact file is there (the data is
/// then mapped lazily: the kernels will hardly read it), else computed in one pass over the
/// data and written to `stats` through `temp` (a fresh name on the same file system). A
/// failure to write is returned beside the opened records, which are good either way; a
/// failure to open the data is the error.
pub fn open_records(
    data: &Path,
    stats: &Path,
    temp: &Path,
    (n, d): (usize, usize),
    cached: Option<Arc<KeptStats>>,
) -> io::Result<(OpenedRecords, Option<io::Error>)> {
    let kept = cached.filter(|kept| kept.fits(d, n)).or_else(|| {
        read_with_blocks(stats, d, n).map(|(stats, blocks)| Arc::new(KeptStats::new(stats, blocks)))
    });
    if let Some(kept) = kept {
        let data = open_lazily(data, n, d)?;
        return Ok((OpenedRecords { data, kept }, None));
    }
    let data = open(data, n, d)?;
    let (built, written) = build_and_keep(stats, temp, data.records());
    let opened = OpenedRecords {
        data,
        kept: Arc::new(KeptStats::new(built, None)),
    };
    Ok((opened, written))
}

/// The statistics kept at `path` for records of `d` features and `n` records, if an intact
/// file is there.
pub fn read(path: &Path, d: usize, n: usize) -> Option<RecordStats> {
    read_with_blocks(path, d, n).map(|(stats, _)| stats)
}

/// The statistics and blocks kept at `path` (see [`decode_with_blocks`]).
fn read_with_blocks(path: &Path, d: usize, n: usize) -> Option<(RecordStats, Option<ClipBlocks>)> {
    decode_with_blocks(&fs::read(path).ok()?, d, n)
}

/// Adds the blocks for clipped jobs ([`ClipBlocks`], B = [`block_count`]) to the statistics
/// kept at `path` for the records at `data`: one sort by norm and two Gram updates per record,
/// then the file is rewritten (version 2) through `temp`, and the blocks are returned. Nothing
/// is done, and `Ok(None)` returned, when no intact statistics are kept, they have blocks
/// already, or B = 1.
pub fn add_clip_blocks(
    data: &Path,
    path: &Path,
    temp: &Path,
    n: usize,
    d: usize,
) -> io::Result<Option<ClipBlocks>> {
    let blocks = block_count(d, n);
    let Some((stats, None)) = read_with_blocks(path, d, n) else {
        return Ok(None);
    };
    if blocks <= 1 {
        return Ok(None);
    }
    let data = open(data, n, d)?;
    let built = ClipBlocks::build(data.records(), blocks);
    write_atomically(path, temp, &encode_with_blocks(&stats, Some(&built)))?;
    Ok(Some(built))
}

/// Computes the statistics of `xt` (one pass) and writes them to `path` through `temp`. A
/// failure to write is returned beside the statistics, which are good either way.
fn build_and_keep(path: &Path, temp: &Path, xt: Records<'_>) -> (RecordStats, Option<io::Error>) {
    let stats = RecordStats::of(xt);
    let written = keep(path, temp, &stats).err();
    (stats, written)
}

/// Keeps `stats` at `path`: writes them to `temp` (a fresh name on the same file system), syncs
/// it and renames it into place, so a reader sees a whole file or none. The upload keeps the
/// statistics it built while streaming this way (`stats_stream.rs`).
pub fn keep(path: &Path, temp: &Path, stats: &RecordStats) -> io::Result<()> {
    write_atomically(path, temp, &encode(stats))
}

/// Writes `bytes` to `temp`, syncs it and renames it to `path`; removes `temp` on failure.
fn write_atomically(path: &Path, temp: &Path, bytes: &[u8]) -> io::Result<()> {
    let result = (|| {
        let mut file = fs::File::create(temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(temp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(temp);
    }
    result
}

#[cfg(test)]
#[path = "stats_file_tests.rs"]
mod tests;
