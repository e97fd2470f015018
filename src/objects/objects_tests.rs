use super::*;
use object_store::memory::InMemory;

fn storage(dir: &Path) -> ObjectStorage {
    let cache = Cache::open(dir, 1 << 30).expect("cache");
    ObjectStorage::new(Arc::new(InMemory::new()), "s3://bucket/pre", "pre", cache)
}

#[test]
fn storage_urls_name_a_bucket_and_a_clean_prefix() {
    assert_eq!(
        parse_url("s3://bucket").unwrap(),
        ("bucket".into(), String::new())
    );
    assert_eq!(
        parse_url("s3://my-bucket/a/b/").unwrap(),
        ("my-bucket".into(), "a/b".into())
    );
    for bad in [
        "http://bucket/x",
        "s3://",
        "s3://Bucket/x",
        "s3://b/x",
        "s3://bucket/a/../b",
        "s3://bucket/a//b",
    ] {
        assert!(parse_url(bad).is_err(), "{bad}");
    }
}

#[tokio::test]
async fn a_file_goes_up_in_parts_and_comes_back_checked() {
    let dir = tempfile::tempdir().expect("dir");
    let objects = storage(dir.path());
    let id = Uuid::new_v4();
    let source = dir.path().join("upload.bin");
    // Three parts and a bit.
    let bytes: Vec<u8> = (0..(3 * PART_BYTES + 1234)).map(|i| (i % 251) as u8).collect();
    std::fs::write(&source, &bytes).expect("write");
    let key = objects.new_data_key(id);
    let sum = objects.put_file(&key, &source).await.expect("put");
    assert_eq!(sum, sha256_file(&source).expect("sum"));
    let object = DataObject {
        key: key.clone(),
        sha256: sum.to_string(),
    };
    let local = dir.path().join(format!("{id}.f64"));
    objects.fetch_data(&object, &local).await.expect("fetch");
    assert_eq!(std::fs::read(&local).expect("read"), bytes);
    // Damaged in the cache: fetched again, never used as it is.
    std::fs::write(&local, b"damaged").expect("damage");
    objects.fetch_data(&object, &local).await.expect("refetch");
    assert_eq!(std::fs::read(&local).expect("read"), bytes);
    // A recorded checksum the object does not match: refused, nothing left in the cache.
    std::fs::remove_file(&local).expect("rm");
    objects.cache().forget(&local);
    let wrong = DataObject {
        key,
        sha256: Sha256Hex::parse(&"0".repeat(64)).unwrap().to_string(),
    };
    assert!(matches!(
        objects.fetch_data(&wrong, &local).await,
        Err(ObjectsError::Corrupt { .. })
    ));
    assert!(!local.exists());
}

#[tokio::test]
async fn statistics_are_fetched_when_stored_and_a_dataset_is_removed_whole() {
    let dir = tempfile::tempdir().expect("dir");
    let objects = storage(dir.path());
    let id = Uuid::new_v4();
    let stats = dir.path().join(format!("{id}.stats"));
    assert!(!objects.fetch_stats(id, &stats).await.expect("none yet"));
    std::fs::write(&stats, b"statistics").expect("write");
    objects.put_stats(id, &stats).await.expect("put");
    std::fs::remove_file(&stats).expect("rm");
    assert!(objects.fetch_stats(id, &stats).await.expect("fetch"));
    assert_eq!(std::fs::read(&stats).expect("read"), b"statistics");
    let source = dir.path().join("data.bin");
    std::fs::write(&source, b"rows").expect("write");
    objects
        .put_file(&objects.new_data_key(id), &source)
        .await
        .expect("put");
    objects
        .put_file(&objects.new_data_key(id), &source)
        .await
        .expect("put");
    let other = Uuid::new_v4();
    objects
        .put_file(&objects.new_data_key(other), &source)
        .await
        .expect("put");
    assert_eq!(objects.dataset_keys(id).await.expect("list").len(), 3);
    let mut folders = objects.dataset_folders().await.expect("folders");
    folders.sort_unstable();
    let mut both = vec![id, other];
    both.sort_unstable();
    assert_eq!(folders, both);
    assert_eq!(objects.remove_dataset(id).await.expect("remove"), 3);
    assert!(objects.dataset_keys(id).await.expect("list").is_empty());
    assert_eq!(objects.dataset_keys(other).await.expect("list").len(), 1);
}

/// Writes `bytes` to a streamed upload of `key` in uneven pieces, on a blocking thread as the
/// upload's parser does; `finish` or drop the sink at the end.
async fn stream(
    objects: &ObjectStorage,
    key: &str,
    bytes: Vec<u8>,
    finish: bool,
) -> (Option<Sha256Hex>, PutOutcome) {
    use std::io::Write;
    let (mut sink, task) = objects.begin_put(key).await.expect("begin");
    let sum = tokio::task::spawn_blocking(move || {
        for piece in bytes.chunks(1_000_003) {
            sink.write_all(piece).expect("write");
        }
        finish.then(|| sink.finish().expect("finish"))
    })
    .await
    .expect("join");
    (sum, task.outcome().await.expect("outcome"))
}

#[tokio::test]
async fn a_streamed_upload_is_stored_whole_with_the_checksum_of_what_was_written() {
    let dir = tempfile::tempdir().expect("dir");
    let objects = storage(dir.path());
    let id = Uuid::new_v4();
    let bytes: Vec<u8> = (0..(2 * PART_BYTES + 777)).map(|i| (i % 253) as u8).collect();
    let key = objects.new_data_key(id);
    let (sum, outcome) = stream(&objects, &key, bytes.clone(), true).await;
    assert!(matches!(outcome, PutOutcome::Stored), "{outcome:?}");
    let sum = sum.expect("sum");
    let source = dir.path().join("expected.bin");
    std::fs::write(&source, &bytes).expect("write");
    assert_eq!(sum, sha256_file(&source).expect("sum"));
    let local = dir.path().join(format!("{id}.f64"));
    let object = DataObject {
        key,
        sha256: sum.to_string(),
    };
    objects.fetch_data(&object, &local).await.expect("fetch");
    assert_eq!(std::fs::read(&local).expect("read"), bytes);
}

#[tokio::test]
async fn a_streamed_upload_whose_writer_goes_away_leaves_no_object() {
    let dir = tempfile::tempdir().expect("dir");
    let objects = storage(dir.path());
    let id = Uuid::new_v4();
    let key = objects.new_data_key(id);
    let bytes: Vec<u8> = vec![7; PART_BYTES + 10];
    let (sum, outcome) = stream(&objects, &key, bytes, false).await;
    assert!(sum.is_none());
    assert!(matches!(outcome, PutOutcome::Abandoned), "{outcome:?}");
    assert!(objects.dataset_keys(id).await.expect("list").is_empty());
}

/// The `.fetch` files beside `local`.
fn partial_fetches(local: &Path) -> Vec<PathBuf> {
    let dir = local.parent().expect("parent");
    std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "fetch"))
        .collect()
}

#[tokio::test]
async fn a_fetch_dropped_half_way_leaves_no_partial_file() {
    let dir = tempfile::tempdir().expect("dir");
    let objects = storage(dir.path());
    let id = Uuid::new_v4();
    let source = dir.path().join("upload.bin");
    std::fs::write(&source, vec![3u8; 3 * PART_BYTES]).expect("write");
    let key = objects.new_data_key(id);
    let sum = objects.put_file(&key, &source).await.expect("put");
    let object = DataObject {
        key,
        sha256: sum.to_string(),
    };
    let local = dir.path().join(format!("{id}.f64"));
    // Polled until its temporary file exists, then dropped (a job cancelled mid-fetch).
    let mut fetch = Box::pin(objects.fetch_data(&object, &local));
    loop {
        tokio::select! {
            biased;
            done = &mut fetch => panic!("the fetch ended ({done:?}) before its temporary file was seen"),
            () = tokio::task::yield_now() => {}
        }
        if !partial_fetches(&local).is_empty() {
            break;
        }
    }
    drop(fetch);
    assert!(partial_fetches(&local).is_empty());
    assert!(!local.exists());
}
