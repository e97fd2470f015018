//! Tenants and their API keys. A key is `ppk_` followed by 64 hex characters (32 bytes from
//! the operating system's generator); only its SHA-256 is stored, so the plaintext is shown
//! once, at creation.

use rand::TryRngCore;
use rand::rngs::OsRng;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::codec::{id, now, ts};
use super::models::Tenant;
use super::rows::{self, TENANT_COLUMNS};
use super::{Store, StoreError};

/// Prefix of every API key, so keys are recognisable in logs and secret scanners.
pub const API_KEY_PREFIX: &str = "ppk_";

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
        sqlx::query("INSERT INTO tenants (id, name, key_hash, created_at) VALUES ($1, $2, $3, $4)")
            .bind(id(tenant.id))
            .bind(&tenant.name)
            .bind(key_hash(&key))
            .bind(ts(tenant.created_at))
            .execute(&self.pool)
            .await?;
        Ok((tenant, key))
    }

    /// The tenant holding `key`, or `None` for an unknown key.
    pub async fn tenant_by_api_key(&self, key: &str) -> Result<Option<Tenant>, StoreError> {
        self.tenant_where("key_hash", key_hash(key)).await
    }

    /// The tenant with this id, if any.
    pub async fn get_tenant(&self, tenant: Uuid) -> Result<Option<Tenant>, StoreError> {
        self.tenant_where("id", id(tenant)).await
    }

    /// The tenant whose `column` (a unique one) holds `value`, if any.
    async fn tenant_where(&self, column: &str, value: String) -> Result<Option<Tenant>, StoreError> {
        let sql = format!("SELECT {TENANT_COLUMNS} FROM tenants WHERE {column} = $1");
        let row = sqlx::query(&sql).bind(value).fetch_optional(&self.pool).await?;
        row.as_ref().map(rows::tenant).transpose()
    }
}

#[cfg(test)]
#[path = "tenants_tests.rs"]
mod tests;
