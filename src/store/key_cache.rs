//! API keys' tenants, remembered for a short time so that an authenticated request does not
//! read the database for its key (docs/deployment.md, "API keys").
//!
//! The bound on a revocation: an entry is used only while younger than the time to live T,
//! and its age counts from before the read that found it was sent. A read sent after a
//! revocation committed does not find the key, so a revoked key is accepted at most T after
//! the revocation commits, on any replica (each has its own cache). On the replica that
//! revokes, [`KeyCache::forget_tenant`] drops the tenant's entries once the revocation has
//! committed, and a read that was under way meanwhile is not kept (the generation changed),
//! so there it takes effect at once.
//!
//! Only keys that were found are kept, and at most [`KeyCache`]'s capacity of them: unknown
//! keys, which anyone can send, never take memory. A full cache first drops its expired
//! entries and otherwise keeps nothing new (the request reads the database, as without it).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use uuid::Uuid;

/// The time to live when none is configured (`PRIVPCA_API_KEY_CACHE_MS`).
pub const DEFAULT_KEY_CACHE_TTL: Duration = Duration::from_secs(1);
/// Most keys kept at once (about 150 bytes each).
pub(crate) const KEY_CACHE_CAPACITY: usize = 10_000;

/// Key hash → tenant, each with when the read that found it was sent.
#[derive(Debug)]
pub(crate) struct KeyCache {
    ttl: Duration,
    capacity: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<String, Entry>,
    /// Counts [`KeyCache::forget_tenant`] calls: a read that began under an older generation
    /// may have seen a key revoked since, so its answer is not kept.
    generation: u64,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    tenant: Uuid,
    read_at: Instant,
}

/// What a caller notes before it reads the database for a key: pass it back to
/// [`KeyCache::insert`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadStart {
    at: Instant,
    generation: u64,
}

impl Default for KeyCache {
    /// [`DEFAULT_KEY_CACHE_TTL`] and [`KEY_CACHE_CAPACITY`].
    fn default() -> Self {
        Self::new(DEFAULT_KEY_CACHE_TTL, KEY_CACHE_CAPACITY)
    }
}

impl KeyCache {
    /// A cache whose entries live `ttl` (zero keeps nothing) and that holds at most `capacity`.
    pub(crate) fn new(ttl: Duration, capacity: usize) -> Self {
        Self {
            ttl,
            capacity,
            inner: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The tenant of the key with hash `hash`, if an entry younger than the time to live holds it.
    pub(crate) fn get(&self, hash: &str, now: Instant) -> Option<Uuid> {
        let mut inner = self.lock();
        let entry = *inner.entries.get(hash)?;
        if now.saturating_duration_since(entry.read_at) < self.ttl {
            Some(entry.tenant)
        } else {
            inner.entries.remove(hash);
            None
        }
    }

    /// Note this before sending the read whose answer goes to [`KeyCache::insert`].
    pub(crate) fn read_start(&self, now: Instant) -> ReadStart {
        ReadStart {
            at: now,
            generation: self.lock().generation,
        }
    }

    /// Keeps `tenant` for `hash`, found by a read begun at `start`; unless a tenant was
    /// forgotten since `start`, the time to live is zero, or the cache is full of live entries.
    pub(crate) fn insert(&self, hash: String, tenant: Uuid, start: ReadStart, now: Instant) {
        if self.ttl.is_zero() {
            return;
        }
        let mut inner = self.lock();
        if inner.generation != start.generation {
            return;
        }
        if inner.entries.len() >= self.capacity && !inner.entries.contains_key(&hash) {
            let ttl = self.ttl;
            inner
                .entries
                .retain(|_, e| now.saturating_duration_since(e.read_at) < ttl);
            if inner.entries.len() >= self.capacity {
                return;
            }
        }
        inner.entries.insert(
            hash,
            Entry {
                tenant,
                read_at: start.at,
            },
        );
    }

    /// Drops every entry of `tenant` and every answer still being read: call it once a change
    /// to the tenant's key has committed.
    pub(crate) fn forget_tenant(&self, tenant: Uuid) {
        let mut inner = self.lock();
        inner.generation = inner.generation.wrapping_add(1);
        inner.entries.retain(|_, e| e.tenant != tenant);
    }

    /// How many entries are kept (expired ones included until they are dropped).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().entries.len()
    }
}

#[cfg(test)]
#[path = "key_cache_tests.rs"]
mod tests;
