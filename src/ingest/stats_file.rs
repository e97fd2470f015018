//! A records dataset's statistics ([`RecordStats`]: XᵀX, Xᵀ1, n) kept beside its data file, so
//! that jobs do not recompute the O(nd²) Gram matrix (docs/design/architecture.md, "Record
//! statistics").
//!
//! **Format** (`{id}.stats` next to `{id}.f64`): the magic `PPCASTA1`, n and d as little-endian
//! u64, the d×d Gram matrix (column-major) and the d sums as little-endian f64, then the SHA-256
//! of everything before it. A file that is short, of another shape, non-finite or fails its hash
//! is ignored and rebuilt, never used.
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

use sha2::{Digest, Sha256};

use super::load::{StoredData, open, open_lazily};
use crate::linalg::{Matrix, RecordStats, Records, Vector};

const MAGIC: &[u8; 8] = b"PPCASTA1";
const HASH_BYTES: usize = 32;

/// The bytes of `stats` in the file format.
pub fn encode(stats: &RecordStats) -> Vec<u8> {
    let d = stats.d();
    let mut out = Vec::with_capacity(8 + 16 + 8 * (d * d + d) + HASH_BYTES);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(stats.n as u64).to_le_bytes());
    out.extend_from_slice(&(d as u64).to_le_bytes());
    for v in stats.gram.iter().chain(stats.sums.iter()) {
        out.extend_from_slice(&v.to_le_bytes());
    }
    let hash = Sha256::digest(&out);
    out.extend_from_slice(&hash);
    out
}

/// The statistics in `bytes` if they are a whole, intact file for records of `d` features and
/// `n` records; `None` otherwise.
pub fn decode(bytes: &[u8], d: usize, n: usize) -> Option<RecordStats> {
    let values = d.checked_mul(d)?.checked_add(d)?;
    let body_len = values.checked_mul(8)?.checked_add(24)?;
    if bytes.len() != body_len.checked_add(HASH_BYTES)? {
        return None;
    }
    let (body, hash) = bytes.split_at(body_len);
    if &bytes[..8] != MAGIC || Sha256::digest(body).as_slice() != hash {
        return None;
    }
    let word = |i: usize| u64::from_le_bytes(body[8 + 8 * i..16 + 8 * i].try_into().unwrap_or_default());
    if word(0) != n as u64 || word(1) != d as u64 {
        return None;
    }
    let mut floats = body[24..]
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap_or_default()));
    let gram = Matrix::from_iterator(d, d, floats.by_ref().take(d * d));
    let sums = Vector::from_iterator(d, floats);
    let stats = RecordStats { n, gram, sums };
    stats.fits(d, n).then_some(stats)
}

/// A records dataset's data, memory-mapped, with its statistics.
#[derive(Debug)]
pub struct OpenedRecords {
    data: StoredData,
    stats: RecordStats,
}

impl OpenedRecords {
    /// Xᵀ (d × n) with the statistics attached, so the kernels use them instead of a pass.
    pub fn records(&self) -> Records<'_> {
        self.data.records().with_stats(&self.stats)
    }
}

/// Opens the records dataset at `data` (`n` records of `d` features) with its statistics, the
/// one way the runner and the upload reach them: read from `stats` when an intact file is there
/// (the data is then mapped lazily: the kernels will hardly read it), else computed in one pass
/// over the data and written to `stats` through `temp` (a fresh name on the same file system).
/// A failure to write is returned beside the opened records, which are good either way; a
/// failure to open the data is the error.
pub fn open_records(
    data: &Path,
    stats: &Path,
    temp: &Path,
    n: usize,
    d: usize,
) -> io::Result<(OpenedRecords, Option<io::Error>)> {
    if let Some(kept) = read(stats, d, n) {
        let data = open_lazily(data, n, d)?;
        return Ok((OpenedRecords { data, stats: kept }, None));
    }
    let data = open(data, n, d)?;
    let (built, written) = build_and_keep(stats, temp, data.records());
    Ok((OpenedRecords { data, stats: built }, written))
}

/// The statistics kept at `path` for records of `d` features and `n` records, if an intact
/// file is there.
pub fn read(path: &Path, d: usize, n: usize) -> Option<RecordStats> {
    decode(&fs::read(path).ok()?, d, n)
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
    let result = (|| {
        let mut file = fs::File::create(temp)?;
        file.write_all(&encode(stats))?;
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
