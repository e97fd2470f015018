use std::io::Read;

use super::*;

#[test]
fn what_is_written_is_what_is_read_back_across_many_background_syncs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("upload");
    let mut file = SyncedFile::create(&path).unwrap();
    // 3.5 × SYNC_EVERY in uneven pieces: several background syncs and a tail.
    let piece: Vec<u8> = (0..1_000_003u32).map(|i| (i % 251) as u8).collect();
    let mut total = 0u64;
    while total < 7 * SYNC_EVERY / 2 {
        file.write_all(&piece).unwrap();
        total += piece.len() as u64;
    }
    let mut file = file.finish().unwrap();
    assert_eq!(file.metadata().unwrap().len(), total);
    let mut back = Vec::new();
    File::open(&path).unwrap().read_to_end(&mut back).unwrap();
    assert_eq!(back.len() as u64, total);
    assert!(back.chunks(piece.len()).all(|c| c == &piece[..c.len()]));
    file.flush().unwrap();
}

#[test]
fn a_small_file_is_synced_once_at_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("small");
    let mut file = SyncedFile::create(&path).unwrap();
    file.write_all(b"abc").unwrap();
    file.finish().unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"abc");
}
