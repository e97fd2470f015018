//! Datasets in S3-compatible object storage (`PRIVPCA_STORAGE_URL=s3://bucket/prefix`, issue 40;
//! docs/design/object-storage.md).
//!
//! The object store holds, per dataset, under `{prefix}/datasets/{id}/`:
//! - `data-{upload}`: the stored data (dense f64 rows, or a sparse matrix's CSR file), one key
//!   per upload attempt, named in the database with its SHA-256 in the transaction that makes
//!   the dataset ready ([`crate::store::DataObject`]): an upload that lost its claim wrote
//!   another key, which it removes;
//! - `stats`: the kept statistics and clip blocks (`crate::ingest::stats_file`), with their
//!   SHA-256 as the object's metadata; derived from the data, rebuilt by any replica that finds
//!   them missing or damaged.
//!
//! Each replica reads them through its own local directory, `data_dir/datasets`, at the paths
//! the local layout uses ([`crate::store::Store::data_path`]), so jobs memory-map and stream
//! exactly as on the local directory. That directory is a read-through cache with a size cap
//! ([`cache::Cache`]): least recently used entries are removed first, and a cached copy is
//! checked against the stored checksum before a process first uses it, and again whenever its
//! size or modification time changed; a copy that fails is fetched again, never used.
//!
//! Uploads go to the store while they are parsed: the parser's output is written to the cache
//! directory and, in parts, to a multipart upload at once ([`ObjectStorage::begin_put`]); the
//! dataset becomes ready only after the whole object is stored. Failed or abandoned multipart
//! uploads are aborted. (A data object's SHA-256 is known only at its end, so it lives in the
//! database, not in the object's metadata; the statistics carry theirs as metadata.)

pub mod cache;
mod digest;
mod stream_put;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use object_store::path::Path as Key;
use object_store::{Attribute, Attributes, ObjectStore, PutMultipartOptions, WriteMultipart};
use tokio::io::AsyncWriteExt;
use uuid::Uuid;

pub use cache::Cache;
pub use digest::{Sha256Hex, sha256_file};
pub use stream_put::{PartSink, PutOutcome, PutTask};

use crate::store::DataObject;

/// Parts written to the object store per request of a multipart upload.
const PART_BYTES: usize = 16 << 20;
/// Parts in flight at once.
const PARTS_IN_FLIGHT: usize = 4;
/// The metadata entry that carries an object's SHA-256 (`x-amz-meta-sha256`).
const SHA256_META: &str = "sha256";

/// Why the object store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum ObjectsError {
    /// The store did not answer, or answered with an error: retry later.
    #[error("the object store failed: {0}")]
    Store(#[from] object_store::Error),
    #[error("a local file of the cache failed: {0}")]
    Io(#[from] std::io::Error),
    /// An object's bytes do not match its recorded checksum, after a fresh fetch.
    #[error("object {key} does not match its recorded SHA-256")]
    Corrupt { key: String },
    #[error("the object store setting is invalid: {0}")]
    Config(String),
}

/// Which object of a dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Data,
    Stats,
}

/// The object store and this replica's cache of it.
#[derive(Debug)]
pub struct ObjectStorage {
    store: Arc<dyn ObjectStore>,
    /// The bucket and prefix, as configured (no credentials in it).
    url: String,
    prefix: Key,
    cache: Cache,
    /// The data object of each dataset this replica has read: a ready dataset's data never
    /// changes, so the database is asked once per dataset ([`ObjectStorage::known_data`]).
    known: std::sync::Mutex<std::collections::HashMap<Uuid, DataObject>>,
}

impl ObjectStorage {
    /// The object store at `url` (`s3://bucket` or `s3://bucket/prefix`), with endpoint, region
    /// and credentials from the usual `AWS_*` variables (`AWS_ENDPOINT_URL`, `AWS_REGION`,
    /// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`; an `http://` endpoint is allowed), read
    /// through `cache`. Nothing is contacted yet.
    pub fn from_url(url: &str, cache: Cache) -> Result<ObjectStorage, ObjectsError> {
        let (bucket, prefix) = parse_url(url)?;
        // Client options first: setting them replaces every client option set before.
        let mut builder = object_store::aws::AmazonS3Builder::new()
            .with_client_options(
                object_store::ClientOptions::new()
                    .with_connect_timeout(Duration::from_secs(5))
                    .with_timeout(Duration::from_secs(300)),
            )
            .with_retry(object_store::RetryConfig {
                max_retries: 3,
                retry_timeout: Duration::from_secs(20),
                ..Default::default()
            });
        for (name, value) in std::env::vars() {
            if let Some(key) = name
                .strip_prefix("AWS_")
                .and_then(|_| name.to_ascii_lowercase().parse().ok())
            {
                builder = builder.with_config(key, value);
            }
        }
        let endpoint = std::env::var("AWS_ENDPOINT_URL").or_else(|_| std::env::var("AWS_ENDPOINT"));
        if endpoint.as_deref().is_ok_and(|e| e.starts_with("http://")) {
            builder = builder.with_allow_http(true);
        }
        // The payload is not signed (no SHA-256 pass per part here, none to verify at the
        // store): every object carries its own SHA-256, checked on every fetch.
        let store = builder
            .with_bucket_name(bucket)
            .with_unsigned_payload(true)
            .build()
            .map_err(|e| ObjectsError::Config(e.to_string()))?;
        Ok(ObjectStorage::new(Arc::new(store), url, &prefix, cache))
    }

    /// Over any store (tests).
    pub fn new(store: Arc<dyn ObjectStore>, url: &str, prefix: &str, cache: Cache) -> ObjectStorage {
        ObjectStorage {
            store,
            url: url.to_owned(),
            prefix: Key::from(prefix),
            cache,
            known: std::sync::Mutex::default(),
        }
    }

    /// The data object of `dataset` this replica already read from the database, if any.
    pub fn known_data(&self, dataset: Uuid) -> Option<DataObject> {
        self.known
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&dataset)
            .cloned()
    }

    /// Drops everything this replica holds of a deleted dataset: its cached files and its
    /// remembered data object.
    pub fn forget_dataset(&self, dataset: Uuid) {
        self.cache.remove_dataset(dataset);
        self.known
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&dataset);
    }

    /// Remembers the data object of a ready dataset (see [`ObjectStorage::known_data`]).
    pub fn know_data(&self, dataset: Uuid, object: &DataObject) {
        self.known
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(dataset, object.clone());
    }

    /// The configured bucket and prefix, for logs.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// This replica's cache.
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// The folder of a dataset's objects.
    fn dataset_folder(&self, dataset: Uuid) -> Key {
        self.prefix.child("datasets").child(dataset.simple().to_string())
    }

    /// A fresh key for an upload's data (one per upload attempt, recorded when it attaches).
    pub fn new_data_key(&self, dataset: Uuid) -> String {
        self.dataset_folder(dataset)
            .child(format!("data-{}", Uuid::new_v4().simple()))
            .to_string()
    }

    /// The key of a dataset's kept statistics.
    fn stats_key(&self, dataset: Uuid) -> Key {
        self.dataset_folder(dataset).child("stats")
    }

    /// Starts a multipart upload to `key` that is fed while it is written (module `stream_put`):
    /// write to the [`PartSink`] on a blocking thread, [`PartSink::finish`] it, then await
    /// [`PutTask::outcome`]. The upload is created here, so an unreachable store fails before
    /// anything is written.
    pub async fn begin_put(&self, key: &str) -> Result<(PartSink, PutTask), ObjectsError> {
        let upload = self.store.put_multipart(&Key::from(key)).await?;
        Ok(stream_put::start(upload, key.to_owned()))
    }

    /// Stores the file at `local` as `key` with a multipart upload that streams it, its SHA-256
    /// (computed here first, in a pass over the file) as the object's metadata. On any failure
    /// the multipart upload is aborted: nothing is left under `key`.
    pub async fn put_file(&self, key: &str, local: &Path) -> Result<Sha256Hex, ObjectsError> {
        let path = local.to_path_buf();
        let sha256 = tokio::task::spawn_blocking(move || sha256_file(&path))
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))??;
        let key = Key::from(key);
        let mut attributes = Attributes::new();
        attributes.insert(Attribute::Metadata(SHA256_META.into()), sha256.to_string().into());
        let opts = PutMultipartOptions {
            attributes,
            ..Default::default()
        };
        let upload = self.store.put_multipart_opts(&key, opts).await?;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
        match stream_file(local, &mut writer).await {
            Ok(()) => {
                writer.finish().await?;
                Ok(sha256)
            }
            Err(e) => {
                if let Err(abort) = writer.abort().await {
                    tracing::warn!(key = %key, error = %abort, "could not abort a failed multipart upload; the store's own clean-up removes its parts");
                }
                Err(e)
            }
        }
    }

    /// Stores a dataset's kept statistics from `local` (replacing any stored before).
    pub async fn put_stats(&self, dataset: Uuid, local: &Path) -> Result<(), ObjectsError> {
        let key = self.stats_key(dataset).to_string();
        let sum = self.put_file(&key, local).await?;
        self.cache.insert(local, sum);
        Ok(())
    }

    /// Makes sure `local` (the cache path of a dataset's data) holds the object `object`
    /// checked against its recorded SHA-256, fetching it if it is missing or fails the check.
    pub async fn fetch_data(&self, object: &DataObject, local: &Path) -> Result<(), ObjectsError> {
        let expected = Sha256Hex::parse(&object.sha256).ok_or_else(|| ObjectsError::Corrupt {
            key: object.key.clone(),
        })?;
        if self.cache.holds_checked(local, &expected).await? {
            return Ok(());
        }
        let fetched = self.fetch(&Key::from(object.key.as_str()), local).await?;
        match fetched {
            Some(sum) if sum == expected => {
                self.cache.insert(local, expected);
                Ok(())
            }
            Some(_) => {
                let _ = tokio::fs::remove_file(local).await;
                Err(ObjectsError::Corrupt {
                    key: object.key.clone(),
                })
            }
            None => Err(ObjectsError::Store(object_store::Error::NotFound {
                path: object.key.clone(),
                source: "the dataset's data object is missing".into(),
            })),
        }
    }

    /// Makes sure `local` holds a dataset's kept statistics if the store has them, checked
    /// against the SHA-256 stored with them. Returns whether it does. A stored copy that fails
    /// its check is removed from the store (statistics are rebuilt from the data).
    pub async fn fetch_stats(&self, dataset: Uuid, local: &Path) -> Result<bool, ObjectsError> {
        if self.cache.holds_verified(local).await {
            return Ok(true);
        }
        let key = self.stats_key(dataset);
        let (fetched, stored) = match self.fetch_with_meta(&key, local).await? {
            None => return Ok(false),
            Some(got) => got,
        };
        if stored.as_ref() == Some(&fetched) {
            self.cache.insert(local, fetched);
            return Ok(true);
        }
        tracing::warn!(dataset = %dataset, "the stored statistics fail their checksum; they are removed and rebuilt");
        let _ = tokio::fs::remove_file(local).await;
        let _ = self.store.delete(&key).await;
        Ok(false)
    }

    /// Fetches `key` into `local` (through a temporary file beside it, renamed into place);
    /// returns the SHA-256 of the bytes fetched, or `None` if there is no such object.
    async fn fetch(&self, key: &Key, local: &Path) -> Result<Option<Sha256Hex>, ObjectsError> {
        Ok(self.fetch_with_meta(key, local).await?.map(|(sum, _)| sum))
    }

    /// [`ObjectStorage::fetch`], with the SHA-256 the object's metadata states.
    async fn fetch_with_meta(
        &self,
        key: &Key,
        local: &Path,
    ) -> Result<Option<(Sha256Hex, Option<Sha256Hex>)>, ObjectsError> {
        let got = match self.store.get(key).await {
            Ok(got) => got,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let stated = got
            .attributes
            .get(&Attribute::Metadata(SHA256_META.into()))
            .and_then(|v| Sha256Hex::parse(v.as_ref()));
        // Removed if the fetch fails or is dropped half-way (a job cancelled or out of time).
        let temp = tempfile::TempPath::try_from_path(temp_beside(local))?;
        let result = async {
            let mut file = tokio::fs::File::create(&temp).await?;
            let mut hasher = digest::Hasher::new();
            let mut body = got.into_stream();
            while let Some(chunk) = body.next().await {
                let chunk: Bytes = chunk?;
                hasher = hash_on_blocking(hasher, chunk.clone()).await?;
                file.write_all(&chunk).await?;
            }
            file.flush().await?;
            file.sync_all().await?;
            drop(file);
            tokio::fs::rename(&temp, local).await?;
            Ok::<Sha256Hex, ObjectsError>(hasher.finish())
        }
        .await;
        if result.is_ok() {
            // Renamed into place: nothing left to remove.
            let _ = temp.keep();
        }
        Ok(Some((result?, stated)))
    }

    /// Removes every object of a dataset (its data of every upload attempt, its statistics)
    /// from the store. Missing objects are not an error.
    pub async fn remove_dataset(&self, dataset: Uuid) -> Result<usize, ObjectsError> {
        self.known
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&dataset);
        self.remove_key_prefix(&self.dataset_folder(dataset)).await
    }

    /// Removes one object (an upload that lost its claim removes the data it stored).
    pub async fn remove_key(&self, key: &str) -> Result<(), ObjectsError> {
        match self.store.delete(&Key::from(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    async fn remove_key_prefix(&self, folder: &Key) -> Result<usize, ObjectsError> {
        let keys: Vec<Key> = self
            .store
            .list(Some(folder))
            .map(|meta| meta.map(|m| m.location))
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<_, _>>()?;
        for key in &keys {
            match self.store.delete(key).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(keys.len())
    }

    /// The datasets that have a folder of objects in the store (for the sweep that removes
    /// the objects of datasets deleted while the store was down).
    pub async fn dataset_folders(&self) -> Result<Vec<Uuid>, ObjectsError> {
        let listed = self
            .store
            .list_with_delimiter(Some(&self.prefix.child("datasets")))
            .await?;
        Ok(listed
            .common_prefixes
            .iter()
            .filter_map(|folder| folder.filename().and_then(|name| Uuid::parse_str(name).ok()))
            .collect())
    }

    /// The keys stored for a dataset (tests and the deletion check).
    pub async fn dataset_keys(&self, dataset: Uuid) -> Result<Vec<String>, ObjectsError> {
        let folder = self.dataset_folder(dataset);
        let mut keys = Vec::new();
        let mut listed = self.store.list(Some(&folder));
        while let Some(meta) = listed.next().await {
            keys.push(meta?.location.to_string());
        }
        Ok(keys)
    }
}

/// Feeds `local` to a multipart upload part by part, waiting while too many parts are in
/// flight, so at most PART_BYTES × (PARTS_IN_FLIGHT + 1) of it is in memory.
async fn stream_file(local: &Path, writer: &mut WriteMultipart) -> Result<(), ObjectsError> {
    use tokio::io::AsyncReadExt;
    let mut file = tokio::fs::File::open(local).await?;
    loop {
        let mut buf = Vec::with_capacity(PART_BYTES);
        let mut limited = (&mut file).take(PART_BYTES as u64);
        let read = limited.read_to_end(&mut buf).await?;
        if read == 0 {
            return Ok(());
        }
        writer.wait_for_capacity(PARTS_IN_FLIGHT).await?;
        writer.put(Bytes::from(buf));
    }
}

/// Hashes a chunk on a blocking thread (a fetched object may be gigabytes).
async fn hash_on_blocking(mut hasher: digest::Hasher, chunk: Bytes) -> std::io::Result<digest::Hasher> {
    if chunk.len() < (1 << 16) {
        hasher.update(&chunk);
        return Ok(hasher);
    }
    tokio::task::spawn_blocking(move || {
        hasher.update(&chunk);
        hasher
    })
    .await
    .map_err(|e| std::io::Error::other(e.to_string()))
}

/// A temporary name beside `path`, unique to this fetch.
fn temp_beside(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}.fetch", Uuid::new_v4().simple()));
    path.with_file_name(name)
}

/// `s3://bucket[/prefix]` → (bucket, prefix without slashes at either end).
pub fn parse_url(url: &str) -> Result<(String, String), ObjectsError> {
    let bad = |why: &str| ObjectsError::Config(format!("PRIVPCA_STORAGE_URL `{url}`: {why}"));
    let rest = url
        .strip_prefix("s3://")
        .ok_or_else(|| bad("must start with s3:// (s3://bucket or s3://bucket/prefix)"))?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let valid_bucket = (3..=63).contains(&bucket.len())
        && bucket
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    if !valid_bucket {
        return Err(bad(
            "the bucket name must have 3 to 63 lowercase letters, digits, '-' or '.'",
        ));
    }
    let prefix = prefix.trim_matches('/');
    if prefix.split('/').any(|part| part == "." || part == "..") || prefix.contains("//") {
        return Err(bad("the prefix must not contain empty, '.' or '..' segments"));
    }
    Ok((bucket.to_owned(), prefix.to_owned()))
}

#[cfg(test)]
#[path = "objects_tests.rs"]
mod tests;
