-- Durable studies (issue 19, docs/design/federation.md "Durable studies"): a study's protocol
-- state lives in the database, so any replica, or the same one restarted, continues it.
--
-- `coordinator_epoch` is the fence: every claim of a study (by a restarted replica, or by one
-- that takes over a study whose lease ran out) bumps it, and every write of the protocol state
-- names the epoch its writer claimed, so a replica that lost its lease can no longer write.
--
-- `study_states` holds one snapshot per unfinished study (JSON text): only public values, DP
-- releases, masked vectors and unmasking shares of the open round (which reveal nothing but the
-- round's sum), and sealed share boxes the coordinator cannot open. It is deleted when the
-- study ends.
ALTER TABLE studies ADD COLUMN coordinator_epoch INTEGER NOT NULL DEFAULT 0 CHECK (coordinator_epoch >= 0);

CREATE TABLE study_states (
    study_id    TEXT PRIMARY KEY NOT NULL REFERENCES studies(id),
    epoch       INTEGER NOT NULL CHECK (epoch >= 0),
    state       TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);

-- A site's own study state, in its local ledger file (`privpca site --ledger`, readable by its
-- owner only): the per-study secret seed its keys derive from, the fingerprint of the data file
-- and parameters it joined with, and every message it sent, so that a restarted site sends the
-- same bytes again and never a fresh draw. Unused in the service's own database.
CREATE TABLE site_sessions (
    study_id     TEXT PRIMARY KEY NOT NULL,
    secret_seed  BLOB NOT NULL,
    fingerprint  TEXT NOT NULL,
    created_at   TEXT NOT NULL
);

CREATE TABLE site_messages (
    study_id    TEXT NOT NULL REFERENCES site_sessions(study_id),
    kind        TEXT NOT NULL CHECK (kind IN ('shares', 'inbox', 'contribution', 'unmask')),
    round       INTEGER NOT NULL CHECK (round >= 0),
    body        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (study_id, kind, round)
);
