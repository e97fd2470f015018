use super::*;
use crate::linalg::gram_t;
use std::io::Write;

fn file_with(values: &[f64]) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().expect("temp file");
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    f.write_all(&bytes).expect("write");
    f
}

#[test]
fn row_major_bytes_map_as_the_transpose() {
    // X = [[1, 2, 3], [4, 5, 6]] (n = 2 records, d = 3).
    let f = file_with(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let data = open(f.path(), 2, 3).expect("open");
    let xt = data.records();
    assert_eq!(xt.shape(), (3, 2));
    assert_eq!(xt.column(0).as_slice(), &[1.0, 2.0, 3.0]);
    assert_eq!(xt.column(1).as_slice(), &[4.0, 5.0, 6.0]);
    assert_eq!(xt[(2, 1)], 6.0);
    assert!(!data.is_streamed());
}

#[test]
fn large_files_map_completely() {
    let (n, d) = (1000, 300); // 2.4 MB
    let values: Vec<f64> = (0..n * d).map(|i| i as f64).collect();
    let f = file_with(&values);
    let data = open(f.path(), n, d).expect("open");
    let xt = data.records();
    assert_eq!(xt.shape(), (d, n));
    assert_eq!(xt[(d - 1, n - 1)], (n * d - 1) as f64);
    assert_eq!(xt[(5, 700)], (700 * d + 5) as f64);
    assert_eq!(xt.as_slice(), &values[..]);
}

#[test]
fn a_wrong_size_is_invalid_data() {
    let f = file_with(&[1.0, 2.0, 3.0]);
    let err = open(f.path(), 2, 2).expect_err("size mismatch");
    assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    let err = open(f.path(), usize::MAX, 2).expect_err("overflow");
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
}

#[test]
fn an_empty_shape_maps_empty_records() {
    let f = file_with(&[]);
    assert_eq!(open(f.path(), 0, 4).expect("open").records().shape(), (4, 0));
}

/// This process's resident file-backed memory, in bytes (Linux).
/// Bytes of `path` resident in this process's mappings (the `Rss:` of its entries in
/// /proc/self/smaps). Only the file's own pages: the whole process's RssFile also counts the
/// test binary's code, which other tests running at the same time page in.
fn resident_of(path: &std::path::Path) -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
    let name = path.to_str().expect("a UTF-8 temp path");
    let mut ours = false;
    let mut kib = 0u64;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            ours = line.trim_end().ends_with(name);
        } else if ours && let Some(rest) = line.strip_prefix("Rss:") {
            kib += rest
                .split_whitespace()
                .next()
                .expect("value")
                .parse::<u64>()
                .expect("number");
        }
    }
    kib * 1024
}

#[test]
fn streamed_passes_leave_no_pages_mapped_behind_them() {
    // 256 MB forced to stream: after a Gram pass, and after the statistics pass, the
    // mapping holds at most a segment or so, not the file.
    let (n, d) = (64_000, 500);
    let values: Vec<f64> = (0..n * d).map(|i| ((i % 97) as f64) / 97.0).collect();
    let f = file_with(&values);
    drop(values);
    let data = open_with(f.path(), n, d, 0).expect("open");
    let before = resident_of(f.path());
    let _ = gram_t(data.records());
    let after_gram = resident_of(f.path());
    let _ = crate::linalg::RecordStats::of(data.records());
    let after_stats = resident_of(f.path());
    let slack = 2 * crate::linalg::stream::SEGMENT_BYTES as u64 + (16 << 20);
    assert!(after_gram <= before + slack, "gram: {before} → {after_gram}");
    assert!(after_stats <= before + slack, "stats: {before} → {after_stats}");
}

#[test]
fn released_pages_read_back_the_same_values() {
    // A streamed mapping (forced): release every segment of a pass, then read it all again.
    let (n, d) = (3000, 40);
    let values: Vec<f64> = (0..n * d).map(|i| (i as f64).sin()).collect();
    let f = file_with(&values);
    let data = open_with(f.path(), n, d, 0).expect("open");
    assert!(data.is_streamed());
    let xt = data.records();
    let before = gram_t(xt);
    xt.block(0, n).release();
    xt.block(17, 1000).release();
    assert_eq!(xt.as_slice(), &values[..]);
    assert_eq!(gram_t(xt), before);
    // Slices outside the mapping are ignored.
    data.release(&values[..100]);
}
