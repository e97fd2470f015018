-- Replicas: several `privpca serve` processes share this database (docs/deployment.md).
--
-- A running job is held by one replica under a lease: `claimed_by` names the replica,
-- `attempt` counts claims (the fence every completion must match), `lease_until` (RFC 3339
-- text, like every timestamp here) is pushed forward by the holder's heartbeat. A job whose
-- lease ran out is failed by any replica's reaper, its charge kept; it never returns to the
-- queue, so no job is run twice.
ALTER TABLE jobs ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0);
ALTER TABLE jobs ADD COLUMN claimed_by TEXT NULL;
ALTER TABLE jobs ADD COLUMN lease_until TEXT NULL;
CREATE INDEX jobs_lease ON jobs(status, lease_until);

-- A live study is coordinated in the memory of one replica; that replica holds it under a
-- lease, and a study whose coordinator's lease ran out is failed (charges made stand).
ALTER TABLE studies ADD COLUMN coordinator TEXT NULL;
ALTER TABLE studies ADD COLUMN coordinator_lease_until TEXT NULL;
