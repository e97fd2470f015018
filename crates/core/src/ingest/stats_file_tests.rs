use std::path::PathBuf;

use super::*;
use crate::linalg::gram_t;
use crate::linalg::{ClipBlocks, Records};

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
    let (built, error) = open_records(&data, &path, &temp, (50, 6), None).unwrap();
    assert!(error.is_none());
    assert!(!temp.exists());
    let built = built.records().stats().unwrap().clone();
    assert_eq!(built.gram, gram_t(&xt), "the same kernel, bit for bit");
    assert!((&built.sums - xt.column_sum()).amax() <= 1e-12);
    let (read, _) = open_records(&data, &path, &temp, (50, 6), None).unwrap();
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
    let (rebuilt, error) = open_records(&data, &path, &temp, (30, 4), None).unwrap();
    assert!(error.is_none());
    assert_eq!(rebuilt.records().stats(), Some(&stats));
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "rewritten");
}

/// Records of `d` features and `n` records stored in a fresh directory (returned, to keep it),
/// with their statistics kept in a version-1 file.
fn kept_without_blocks(d: usize, n: usize) -> (Matrix, tempfile::TempDir, (PathBuf, PathBuf, PathBuf)) {
    let xt = records(d, n);
    let dir = tempfile::tempdir().unwrap();
    let paths = files(dir.path(), &xt);
    open_records(&paths.0, &paths.1, &paths.2, (n, d), None).unwrap();
    (xt, dir, paths)
}

#[test]
fn blocks_for_clipped_jobs_are_added_to_a_kept_file_and_read_back() {
    let (d, n) = (5, 40);
    let (xt, _dir, (data, path, temp)) = kept_without_blocks(d, n);
    // A version-1 file (kept before the blocks existed) loads, with no blocks.
    let (opened, _) = open_records(&data, &path, &temp, (n, d), None).unwrap();
    let stats = opened.records().stats().unwrap().clone();
    assert!(opened.records().clip_blocks().is_none());
    assert_eq!(&std::fs::read(&path).unwrap()[..8], MAGIC);
    let added = add_clip_blocks(&data, &path, &temp, n, d).unwrap();
    assert!(!temp.exists());
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[..8], MAGIC_WITH_BLOCKS);
    let want = ClipBlocks::build((&xt).into(), block_count(d, n));
    assert_eq!(added.as_ref(), Some(&want), "the blocks added are returned");
    assert_eq!(
        decode_with_blocks(&bytes, d, n),
        Some((stats.clone(), Some(want.clone())))
    );
    let (reopened, _) = open_records(&data, &path, &temp, (n, d), None).unwrap();
    assert_eq!(reopened.records().stats(), Some(&stats));
    assert_eq!(reopened.records().clip_blocks(), Some(&want));
    assert!(
        add_clip_blocks(&data, &path, &temp, n, d).unwrap().is_none(),
        "once only"
    );
    assert_eq!(encode_with_blocks(&stats, Some(&want)), bytes);

    // A damaged or foreign version-2 file is refused whole, never used.
    assert_eq!(decode_with_blocks(&bytes, d, n + 1), None, "another n");
    assert_eq!(decode_with_blocks(&bytes[..bytes.len() - 5], d, n), None, "short");
    let mut flipped = bytes.clone();
    flipped[bytes.len() - 40] ^= 1;
    assert_eq!(decode_with_blocks(&flipped, d, n), None, "hash");
    let mut shuffled = want.clone();
    shuffled.order.swap(0, 1);
    shuffled.order[0] = shuffled.order[1];
    let bad = encode_with_blocks(&stats, Some(&shuffled));
    assert_eq!(decode_with_blocks(&bad, d, n), None, "not a permutation");
}

#[test]
fn no_blocks_are_kept_when_one_block_would_hold_every_record() {
    let (d, n) = (3, 1);
    let (_, _dir, (data, path, temp)) = kept_without_blocks(d, n);
    assert!(add_clip_blocks(&data, &path, &temp, n, d).unwrap().is_none());
    assert_eq!(&std::fs::read(&path).unwrap()[..8], MAGIC);
}

/// Timings of the clipped Gram formation and of the statistics build, before (a pass over the
/// clipped records; one streamed Gram) and after (the kept blocks), printed for
/// docs/performance-service.md. `PRIVPCA_CLIP_BENCH_N` sets n (default 100 000), d = 500.
#[test]
#[ignore = "timing: run by hand with --ignored --nocapture (docs/performance-service.md)"]
fn clipped_gram_timings() {
    use std::time::Instant;
    let d = 500;
    let n: usize = std::env::var("PRIVPCA_CLIP_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let xt = crate::linalg::testing::gaussian(d, n, 1)
        .map_with_location(|_, j, v| v * (1.0 + (j % 97) as f64 / 10.0));
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let stats = RecordStats::of((&xt).into());
    let build_before = ms(t);
    let t = Instant::now();
    let blocks = ClipBlocks::build((&xt).into(), block_count(d, n));
    let build_blocks = ms(t);
    let mut norms: Vec<f64> = xt.column_iter().map(|c| c.norm()).collect();
    norms.sort_by(f64::total_cmp);
    println!("n {n} d {d} B {} L {}", blocks.blocks.len(), blocks.block_len);
    println!("build: streamed-equivalent stats {build_before:.0} ms, blocks {build_blocks:.0} ms");
    let t = Instant::now();
    let bytes = encode_with_blocks(&stats, Some(&blocks));
    let encode_ms = ms(t);
    let t = Instant::now();
    let back = decode_with_blocks(&bytes, d, n).expect("decodes");
    let decode_ms = ms(t);
    let v1 = encode(&stats);
    let t = Instant::now();
    decode(&v1, d, n).expect("decodes");
    let decode_v1_ms = ms(t);
    assert_eq!(back.1.as_ref(), Some(&blocks));
    println!(
        "file: v2 {:.1} MB (encode {encode_ms:.0} ms, decode {decode_ms:.0} ms), v1 {:.1} MB (decode {decode_v1_ms:.0} ms)",
        bytes.len() as f64 / 1e6,
        v1.len() as f64 / 1e6
    );
    let records = Records::from(&xt).with_stats(&stats).with_clip_blocks(&blocks);
    let mut works = Vec::new();
    for q in [0.10, 0.50, 0.99] {
        let c = norms[(q * n as f64) as usize];
        let t = Instant::now();
        let mut clipped = xt.clone();
        crate::linalg::clip::clip_columns_l2(&mut clipped, c);
        let clip_ms = ms(t);
        let t = Instant::now();
        let direct = RecordStats::of((&clipped).into());
        let before = ms(t);
        let t = Instant::now();
        let (shortcut, work) = blocks.clipped_stats(records, c);
        let after = ms(t);
        let error = (&shortcut.gram - &direct.gram).amax() / direct.gram.amax();
        assert!(error <= 1e-10, "q {q}: {error:e}");
        works.push(work);
        println!(
            "q {q}: clip copy {clip_ms:.0} ms; Gram+sums: full pass {before:.0} ms, blocks {after:.0} ms, ratio {:.3} ({work:?})",
            after / before
        );
    }
    assert!(works.windows(2).all(|w| w[0] == w[1]));
}
