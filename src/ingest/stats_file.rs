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

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

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

/// The statistics of `xt`, read from `path` when an intact file is there, else computed (one
/// pass over the records) and written to `path` through `temp` (a fresh name on the same file
/// system). A failure to write is reported but the computed statistics are still returned.
pub fn load_or_build(path: &Path, temp: &Path, xt: Records<'_>) -> (RecordStats, Option<io::Error>) {
    match read(path, xt.d(), xt.n()) {
        Some(stats) => (stats, None),
        None => build_and_keep(path, temp, xt),
    }
}

/// The statistics kept at `path` for records of `d` features and `n` records, if an intact
/// file is there.
pub fn read(path: &Path, d: usize, n: usize) -> Option<RecordStats> {
    decode(&fs::read(path).ok()?, d, n)
}

/// Computes the statistics of `xt` (one pass) and writes them to `path` through `temp`. A
/// failure to write is returned beside the statistics, which are good either way.
pub fn build_and_keep(path: &Path, temp: &Path, xt: Records<'_>) -> (RecordStats, Option<io::Error>) {
    let stats = RecordStats::of(xt);
    let written = write(path, temp, &stats).err();
    (stats, written)
}

/// Writes `stats` to `temp`, syncs it and renames it to `path`.
fn write(path: &Path, temp: &Path, stats: &RecordStats) -> io::Result<()> {
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
mod tests {
    use super::*;
    use crate::linalg::gram_t;

    fn records(d: usize, n: usize) -> Matrix {
        Matrix::from_fn(d, n, |i, j| ((i * 7 + j * 13) % 11) as f64 / 11.0 - 0.4)
    }

    #[test]
    fn a_file_round_trips_and_matches_a_fresh_pass() {
        let xt = records(6, 50);
        let dir = tempfile::tempdir().unwrap();
        let (path, temp) = (dir.path().join("x.stats"), dir.path().join("x.tmp"));
        let (built, error) = load_or_build(&path, &temp, (&xt).into());
        assert!(error.is_none());
        assert!(!temp.exists());
        assert_eq!(built.gram, gram_t(&xt), "the same kernel, bit for bit");
        assert!((&built.sums - xt.column_sum()).amax() <= 1e-12);
        let (read, _) = load_or_build(&path, &temp, (&xt).into());
        assert_eq!(read, built);
    }

    #[test]
    fn a_damaged_or_foreign_file_is_rebuilt_not_used() {
        let xt = records(4, 30);
        let stats = RecordStats::of((&xt).into());
        let bytes = encode(&stats);
        assert_eq!(decode(&bytes, 4, 30), Some(stats.clone()));
        assert_eq!(decode(&bytes, 4, 31), None, "another n");
        assert_eq!(decode(&bytes, 5, 30), None, "another d");
        assert_eq!(decode(&bytes[..bytes.len() - 1], 4, 30), None, "short");
        let mut flipped = bytes.clone();
        flipped[40] ^= 1;
        assert_eq!(decode(&flipped, 4, 30), None, "hash");

        let dir = tempfile::tempdir().unwrap();
        let (path, temp) = (dir.path().join("x.stats"), dir.path().join("x.tmp"));
        std::fs::write(&path, &flipped).unwrap();
        let (rebuilt, error) = load_or_build(&path, &temp, (&xt).into());
        assert!(error.is_none());
        assert_eq!(rebuilt, stats);
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "rewritten");
    }
}
