-- API keys can be rotated and revoked (`POST` and `DELETE /v1/tenants/{id}/api-key`, admin only).
-- A tenant has one key at a time, still stored only as its SHA-256 in `key_hash`:
-- - rotation replaces `key_hash` with the new key's hash (the old key is then unknown) and
--   clears `key_revoked_at`;
-- - revocation sets `key_revoked_at`; a key whose row has it set authenticates nothing.
-- `key_issued_at` is when the key in `key_hash` was issued (NULL: with the tenant, at
-- `created_at`, for tenants created before this migration).
-- Replicas remember a key's tenant for a short time (docs/deployment.md, "API keys"), so a
-- revocation takes effect on every replica within that time of its commit.
ALTER TABLE tenants ADD COLUMN key_issued_at TEXT NULL;
ALTER TABLE tenants ADD COLUMN key_revoked_at TEXT NULL;
