//! Tenants and their API keys. A key is `ppk_` followed by 64 hex characters (32 bytes from
//! the operating system's generator); only its SHA-256 is stored, so the plaintext is shown
//! once, at creation or rotation. A tenant has one key at a time: rotation replaces it, and
//! revocation leaves the tenant without one until the next rotation. Authentication reads the
//! key through a short-lived cache ([`Store::tenant_id_by_api_key`], `key_cache.rs`).

use std::time::Instant;

use rand::TryRngCore;
use rand::rngs::OsRng;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use chrono::{DateTime, Utc};

use super::codec::{id, now, parse_id, ts};
use super::models::Tenant;
use super::rows::{self, TENANT_COLUMNS};
use super::{Store, StoreError};

/// Prefix of every API key, so keys are recognisable in logs and secret scanners.
pub const API_KEY_PREFIX: &str = "ppk_";

/// The condition on `tenants` that finds the row whose key, hashed as `$1`, is not revoked.
const LIVE_KEY: &str = "key_hash = $1 AND key_revoked_at IS NULL";

/// Hex SHA-256 of an API key: what is stored and looked up.
pub(crate) fn key_hash(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

pub(crate) fn new_api_key() -> Result<String, StoreError> {
    new_secret(API_KEY_PREFIX)
}

/// A fresh secret: `prefix` followed by 64 hex characters from the operating system's generator.
pub(crate) fn new_secret(prefix: &str) -> Result<String, StoreError> {
    let mut bytes = [0u8; 32];
    OsRng
        .try_fill_bytes(&mut bytes)
        .map_err(|e| StoreError::Entropy(e.to_string()))?;
    Ok(format!("{prefix}{}", hex::encode(bytes)))
}

impl Store {
    /// Creates a tenant and returns it with its API key. The key is not stored and cannot be
    /// recovered; only its hash is kept.
    pub async fn create_tenant(&self, name: &str) -> Result<(Tenant, String), StoreError> {
        super::error::text_without_nul("name", name)?;
        let key = new_api_key()?;
        let tenant = Tenant {
            id: Uuid::new_v4(),
            name: name.to_owned(),
            created_at: now(),
        };
        sqlx::query(
            "INSERT INTO tenants (id, name, key_hash, created_at, key_issued_at) VALUES ($1, $2, $3, $4, $4)",
        )
        .bind(id(tenant.id))
        .bind(&tenant.name)
        .bind(key_hash(&key))
        .bind(ts(tenant.created_at))
        .execute(&self.pool)
        .await?;
        Ok((tenant, key))
    }

    /// The tenant holding `key`, or `None` for an unknown or revoked key. Reads the database.
    pub async fn tenant_by_api_key(&self, key: &str) -> Result<Option<Tenant>, StoreError> {
        self.tenant_where(LIVE_KEY, key_hash(key)).await
    }

    /// The id of the tenant holding `key`, or `None` for an unknown or revoked key: what
    /// authentication needs. A key found is remembered for the store's key cache time to live
    /// (unknown keys are not), so a key revoked through another store is still accepted here
    /// for at most that long after the revocation commits; through this store, not at all.
    pub async fn tenant_id_by_api_key(&self, key: &str) -> Result<Option<Uuid>, StoreError> {
        let hash = key_hash(key);
        if let Some(tenant) = self.api_keys.get(&hash, Instant::now()) {
            return Ok(Some(tenant));
        }
        let start = self.api_keys.read_start(Instant::now());
        let found: Option<String> = sqlx::query_scalar(&format!("SELECT id FROM tenants WHERE {LIVE_KEY}"))
            .bind(&hash)
            .fetch_optional(&self.reads)
            .await?;
        let Some(found) = found else { return Ok(None) };
        let tenant = parse_id(&found)?;
        self.api_keys.insert(hash, tenant, start, Instant::now());
        Ok(Some(tenant))
    }

    /// Issues `tenant` a new API key and revokes its current one (if any) in one statement;
    /// `None` if there is no such tenant. The new key is returned once, with when it was issued.
    pub async fn rotate_api_key(&self, tenant: Uuid) -> Result<Option<(String, DateTime<Utc>)>, StoreError> {
        let key = new_api_key()?;
        let issued_at = now();
        let changed = sqlx::query(
            "UPDATE tenants SET key_hash = $1, key_issued_at = $2, key_revoked_at = NULL WHERE id = $3",
        )
        .bind(key_hash(&key))
        .bind(ts(issued_at))
        .bind(id(tenant))
        .execute(&self.pool)
        .await?
        .rows_affected();
        self.api_keys.forget_tenant(tenant);
        Ok((changed > 0).then_some((key, issued_at)))
    }

    /// Revokes `tenant`'s API key, leaving it none until [`Store::rotate_api_key`]; false if
    /// there is no such tenant. Revoking a revoked key keeps its first revocation time.
    pub async fn revoke_api_key(&self, tenant: Uuid) -> Result<bool, StoreError> {
        let changed =
            sqlx::query("UPDATE tenants SET key_revoked_at = COALESCE(key_revoked_at, $1) WHERE id = $2")
                .bind(ts(now()))
                .bind(id(tenant))
                .execute(&self.pool)
                .await?
                .rows_affected();
        self.api_keys.forget_tenant(tenant);
        Ok(changed > 0)
    }

    /// The tenant with this id, if any.
    pub async fn get_tenant(&self, tenant: Uuid) -> Result<Option<Tenant>, StoreError> {
        self.tenant_where("id = $1", id(tenant)).await
    }

    /// The tenant matching `condition` (on a unique column, with `value` as `$1`), if any.
    async fn tenant_where(&self, condition: &str, value: String) -> Result<Option<Tenant>, StoreError> {
        let sql = format!("SELECT {TENANT_COLUMNS} FROM tenants WHERE {condition}");
        let row = sqlx::query(&sql).bind(value).fetch_optional(&self.pool).await?;
        row.as_ref().map(rows::tenant).transpose()
    }
}

#[cfg(test)]
#[path = "tenants_tests.rs"]
mod tests;
