-- Upload claims: several replicas share this database, so an upload holds its dataset in the
-- database, not in one process's memory (docs/design/architecture.md, "Uploads").
--
-- A new status `uploading`: one conditional UPDATE takes an `empty` dataset (or an
-- `uploading` one whose lease ran out: its replica died mid-upload) and writes a fresh random
-- `upload_claim` token and `upload_lease_until` (RFC 3339 text, like every timestamp here),
-- which the uploading replica pushes forward while the body streams. Attaching the data
-- requires the token to still match (the fence); a failed upload puts the dataset back to
-- `empty`. The claim columns are set exactly while the dataset is `uploading`.
ALTER TABLE datasets ADD COLUMN upload_claim TEXT NULL;
ALTER TABLE datasets ADD COLUMN upload_lease_until TEXT NULL;
ALTER TABLE datasets DROP CONSTRAINT datasets_status_check;
ALTER TABLE datasets ADD CONSTRAINT datasets_status_check
    CHECK (status IN ('empty', 'uploading', 'ready', 'deleted'));
ALTER TABLE datasets ADD CONSTRAINT datasets_upload_claim_check
    CHECK ((status = 'uploading') = (upload_claim IS NOT NULL AND upload_lease_until IS NOT NULL));
