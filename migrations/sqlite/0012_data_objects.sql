-- Datasets in S3-compatible object storage (PRIVPCA_STORAGE_URL, docs/design/object-storage.md).
-- `data_object` is the key, under the store's prefix, of the object that holds a ready
-- dataset's data, and `data_sha256` its SHA-256 (hex): both are set in the transaction that
-- makes the dataset ready, so a replica reads exactly the object that upload completed (an
-- upload that lost its claim wrote another key) and checks every copy it caches against a
-- checksum the object store cannot change. NULL on the local directory (the default).
ALTER TABLE datasets ADD COLUMN data_object TEXT NULL;
ALTER TABLE datasets ADD COLUMN data_sha256 TEXT NULL;
