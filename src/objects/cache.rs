//! A replica's local copies of stored objects: the files of `data_dir/datasets` (the paths of
//! the local layout), under a size cap (`PRIVPCA_CACHE_BYTES`), least recently used removed
//! first, each checked against its stored SHA-256 before this process first uses it.
//!
//! A copy is trusted again without rehashing only while its length and modification time are
//! those it had when it was checked: data files are never modified in place, so a change means
//! damage (or a hand edit), and the copy is hashed again (and fetched again if it fails). A job
//! that has a file memory-mapped keeps reading it after eviction removes its name (the pages
//! stay until unmapped); the cap then is exceeded by that file until the job ends.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use uuid::Uuid;

use super::digest::{Sha256Hex, sha256_file};

/// The cache cap when none is configured: 16 GiB.
pub const DEFAULT_CACHE_BYTES: u64 = 16 << 30;

/// This replica's cached objects.
#[derive(Debug)]
pub struct Cache {
    cap: u64,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<PathBuf, Entry>,
    /// A counter that orders uses (least recently used first).
    clock: u64,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    len: u64,
    used: u64,
    /// The checksum the file matched, with the length and modification time it had then.
    checked: Option<(Sha256Hex, u64, SystemTime)>,
}

impl Cache {
    /// A cache of the files in `dir` (`data_dir/datasets`) of at most `cap` bytes. Files already
    /// there (from an earlier run) are counted and will be checked before use.
    pub fn open(dir: &Path, cap: u64) -> std::io::Result<Cache> {
        std::fs::create_dir_all(dir)?;
        let cache = Cache {
            cap,
            inner: Mutex::default(),
        };
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let path = entry.path();
            let is_file = entry.file_type()?.is_file();
            // A fetch an earlier run left half done.
            if is_file && path.extension().is_some_and(|ext| ext == "fetch") {
                let _ = std::fs::remove_file(&path);
                continue;
            }
            if is_file && dataset_of(&path).is_some() {
                let len = entry.metadata()?.len();
                cache.lock().add(path, len, None);
            }
        }
        cache.evict(None);
        Ok(cache)
    }

    /// The bytes the cached copies take.
    pub fn bytes(&self) -> u64 {
        self.lock().entries.values().map(|e| e.len).sum()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether `path` holds a copy matching `expected`: trusted without rehashing while its
    /// length and modification time are those it was checked with, else hashed now. A copy
    /// that does not match is removed (the caller fetches it again).
    pub async fn holds_checked(&self, path: &Path, expected: &Sha256Hex) -> std::io::Result<bool> {
        let Some((len, modified)) = file_stamp(path).await else {
            self.forget(path);
            return Ok(false);
        };
        if self.checked_as(path, len, modified) == Some(*expected) {
            self.touch(path);
            return Ok(true);
        }
        let owned = path.to_path_buf();
        let sum = tokio::task::spawn_blocking(move || sha256_file(&owned))
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        match sum {
            Ok(sum) if sum == *expected => {
                self.lock()
                    .add(path.to_path_buf(), len, Some((sum, len, modified)));
                self.touch(path);
                Ok(true)
            }
            _ => {
                tracing::warn!(file = %path.display(), "a cached copy fails its checksum; it is fetched again");
                let _ = tokio::fs::remove_file(path).await;
                self.forget(path);
                Ok(false)
            }
        }
    }

    /// Whether `path` holds a copy this process checked (or wrote and stored) and that has not
    /// changed since.
    pub async fn holds_verified(&self, path: &Path) -> bool {
        let Some((len, modified)) = file_stamp(path).await else {
            self.forget(path);
            return false;
        };
        let held = self.checked_as(path, len, modified).is_some();
        if held {
            self.touch(path);
        }
        held
    }

    fn checked_as(&self, path: &Path, len: u64, modified: SystemTime) -> Option<Sha256Hex> {
        let inner = self.lock();
        let (sum, checked_len, checked_at) = inner.entries.get(path)?.checked?;
        (checked_len == len && checked_at == modified).then_some(sum)
    }

    /// Records that `path` holds a copy with checksum `sum` (fetched and checked, or written
    /// here and stored), as the most recently used; then removes the least recently used
    /// copies beyond the cap (never this one).
    pub fn insert(&self, path: &Path, sum: Sha256Hex) {
        let Ok(meta) = std::fs::metadata(path) else {
            return;
        };
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        self.lock()
            .add(path.to_path_buf(), meta.len(), Some((sum, meta.len(), modified)));
        self.touch(path);
        self.evict(Some(path));
    }

    fn touch(&self, path: &Path) {
        let mut inner = self.lock();
        inner.clock += 1;
        let now = inner.clock;
        if let Some(entry) = inner.entries.get_mut(path) {
            entry.used = now;
        }
    }

    /// Forgets `path` (its file is gone or about to be removed by the caller).
    pub fn forget(&self, path: &Path) {
        self.lock().entries.remove(path);
    }

    /// Removes every cached copy of `dataset` (deleted, here or on another replica).
    pub fn remove_dataset(&self, dataset: Uuid) {
        let paths: Vec<PathBuf> = {
            let mut inner = self.lock();
            let paths: Vec<PathBuf> = inner
                .entries
                .keys()
                .filter(|p| dataset_of(p) == Some(dataset))
                .cloned()
                .collect();
            for path in &paths {
                inner.entries.remove(path);
            }
            paths
        };
        for path in paths {
            let _ = std::fs::remove_file(path);
        }
    }

    /// The datasets with a cached copy.
    pub fn datasets(&self) -> Vec<Uuid> {
        let mut ids: Vec<Uuid> = self.lock().entries.keys().filter_map(|p| dataset_of(p)).collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Removes least recently used copies (never `keep`) until the cached bytes fit the cap.
    fn evict(&self, keep: Option<&Path>) {
        let removed: Vec<PathBuf> = {
            let mut inner = self.lock();
            let mut total: u64 = inner.entries.values().map(|e| e.len).sum();
            let mut order: Vec<(u64, PathBuf, u64)> = inner
                .entries
                .iter()
                .filter(|(p, _)| Some(p.as_path()) != keep)
                .map(|(p, e)| (e.used, p.clone(), e.len))
                .collect();
            order.sort_unstable_by_key(|(used, _, _)| *used);
            let mut removed = Vec::new();
            for (_, path, len) in order {
                if total <= self.cap {
                    break;
                }
                inner.entries.remove(&path);
                total -= len;
                removed.push(path);
            }
            removed
        };
        for path in removed {
            tracing::debug!(file = %path.display(), "evicted from the object cache");
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Inner {
    fn add(&mut self, path: PathBuf, len: u64, checked: Option<(Sha256Hex, u64, SystemTime)>) {
        let used = self.entries.get(&path).map_or(0, |e| e.used);
        self.entries.insert(path, Entry { len, used, checked });
    }
}

/// The length and modification time of the file at `path`, if there is one.
async fn file_stamp(path: &Path) -> Option<(u64, SystemTime)> {
    let meta = tokio::fs::metadata(path).await.ok()?;
    meta.is_file()
        .then(|| (meta.len(), meta.modified().unwrap_or(SystemTime::UNIX_EPOCH)))
}

/// The dataset a cached file belongs to (`{id}.f64`, `{id}.stats`).
pub fn dataset_of(path: &Path) -> Option<Uuid> {
    let ext = path.extension()?.to_str()?;
    if ext != "f64" && ext != "stats" {
        return None;
    }
    Uuid::parse_str(path.file_stem()?.to_str()?).ok()
}

#[cfg(test)]
#[path = "cache_tests.rs"]
mod tests;
