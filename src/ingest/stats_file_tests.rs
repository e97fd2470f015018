use std::path::PathBuf;

use super::*;
use crate::linalg::gram_t;

fn records(d: usize, n: usize) -> Matrix {
    Matrix::from_fn(d, n, |i, j| ((i * 7 + j * 13) % 11) as f64 / 11.0 - 0.4)
}

/// Writes `xt` as an ingested data file (row-major X is column-major Xᵀ) and returns the
/// paths of the data, its statistics and a temporary name.
fn files(dir: &Path, xt: &Matrix) -> (PathBuf, PathBuf, PathBuf) {
    let data = dir.join("x.f64");
    let bytes: Vec<u8> = xt.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&data, bytes).unwrap();
    (data, dir.join("x.stats"), dir.join("x.tmp"))
}

#[test]
fn a_file_round_trips_and_matches_a_fresh_pass() {
    let xt = records(6, 50);
    let dir = tempfile::tempdir().unwrap();
    let (data, path, temp) = files(dir.path(), &xt);
    let (built, error) = open_records(&data, &path, &temp, 50, 6).unwrap();
    assert!(error.is_none());
    assert!(!temp.exists());
    let built = built.records().stats().unwrap().clone();
    assert_eq!(built.gram, gram_t(&xt), "the same kernel, bit for bit");
    assert!((&built.sums - xt.column_sum()).amax() <= 1e-12);
    let (read, _) = open_records(&data, &path, &temp, 50, 6).unwrap();
    assert_eq!(read.records().stats(), Some(&built));
    assert_eq!(read.records().as_slice(), xt.as_slice());
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
    let (data, path, temp) = files(dir.path(), &xt);
    std::fs::write(&path, &flipped).unwrap();
    let (rebuilt, error) = open_records(&data, &path, &temp, 30, 4).unwrap();
    assert!(error.is_none());
    assert_eq!(rebuilt.records().stats(), Some(&stats));
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "rewritten");
}
