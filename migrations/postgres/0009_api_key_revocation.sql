-- API key rotation and revocation: see migrations/sqlite/0009_api_key_revocation.sql, the same
-- schema.
ALTER TABLE tenants ADD COLUMN key_issued_at TEXT NULL;
ALTER TABLE tenants ADD COLUMN key_revoked_at TEXT NULL;
