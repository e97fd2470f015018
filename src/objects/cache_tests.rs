use super::*;

fn file(dir: &Path, id: Uuid, ext: &str, len: usize, byte: u8) -> PathBuf {
    let path = dir.join(format!("{id}.{ext}"));
    std::fs::write(&path, vec![byte; len]).expect("write");
    path
}

#[tokio::test]
async fn a_checked_copy_is_trusted_until_it_changes_and_a_damaged_one_is_removed() {
    let dir = tempfile::tempdir().expect("dir");
    let cache = Cache::open(dir.path(), 1 << 20).expect("cache");
    let id = Uuid::new_v4();
    let path = file(dir.path(), id, "f64", 64, 7);
    let sum = sha256_file(&path).expect("sum");
    assert!(cache.holds_checked(&path, &sum).await.expect("check"));
    assert!(cache.holds_verified(&path).await);
    // The same length, other bytes, a later modification time: hashed again, refused, removed.
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&path, vec![8u8; 64]).expect("damage");
    assert!(!cache.holds_verified(&path).await);
    assert!(!cache.holds_checked(&path, &sum).await.expect("check"));
    assert!(!path.exists(), "a copy that fails its checksum is removed");
    assert_eq!(cache.bytes(), 0);
}

#[tokio::test]
async fn the_least_recently_used_copies_go_first_and_never_the_one_just_added() {
    let dir = tempfile::tempdir().expect("dir");
    let cache = Cache::open(dir.path(), 250).expect("cache");
    let ids: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
    let paths: Vec<PathBuf> = ids
        .iter()
        .map(|id| file(dir.path(), *id, "f64", 100, 1))
        .collect();
    let sum = sha256_file(&paths[0]).expect("sum");
    cache.insert(&paths[0], sum);
    cache.insert(&paths[1], sum);
    // Using the first makes the second the least recently used.
    assert!(cache.holds_checked(&paths[0], &sum).await.expect("check"));
    cache.insert(&paths[2], sum);
    assert!(paths[0].exists() && !paths[1].exists() && paths[2].exists());
    assert_eq!(cache.bytes(), 200);
    // One larger than the cap stays while it is the newest.
    let big = file(dir.path(), Uuid::new_v4(), "stats", 400, 2);
    cache.insert(&big, sha256_file(&big).expect("sum"));
    assert!(big.exists());
    assert_eq!(cache.bytes(), 400);
    assert_eq!(cache.datasets().len(), 1);
}

#[tokio::test]
async fn files_of_an_earlier_run_are_counted_checked_before_use_and_removed_with_their_dataset() {
    let dir = tempfile::tempdir().expect("dir");
    let id = Uuid::new_v4();
    let data = file(dir.path(), id, "f64", 32, 3);
    let stats = file(dir.path(), id, "stats", 16, 4);
    std::fs::create_dir_all(dir.path().join(".uploads-a")).expect("uploads dir");
    let half_fetched = dir.path().join(format!("{id}.f64.0123.fetch"));
    std::fs::write(&half_fetched, [0u8; 8]).expect("fetch temp");
    let cache = Cache::open(dir.path(), 1 << 20).expect("cache");
    assert_eq!(cache.bytes(), 48);
    assert!(
        !cache.holds_verified(&stats).await,
        "not checked by this process yet"
    );
    assert_eq!(cache.datasets(), vec![id]);
    cache.remove_dataset(id);
    assert!(!data.exists() && !stats.exists());
    assert_eq!(cache.bytes(), 0);
}
