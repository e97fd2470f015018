-- Durable studies: see migrations/sqlite/0006_durable_studies.sql, the same schema.
ALTER TABLE studies ADD COLUMN coordinator_epoch BIGINT NOT NULL DEFAULT 0 CHECK (coordinator_epoch >= 0);

CREATE TABLE study_states (
    study_id    TEXT PRIMARY KEY NOT NULL REFERENCES studies(id),
    epoch       BIGINT NOT NULL CHECK (epoch >= 0),
    state       TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);

CREATE TABLE site_sessions (
    study_id     TEXT PRIMARY KEY NOT NULL,
    secret_seed  BYTEA NOT NULL,
    fingerprint  TEXT NOT NULL,
    created_at   TEXT NOT NULL
);

CREATE TABLE site_messages (
    study_id    TEXT NOT NULL REFERENCES site_sessions(study_id),
    kind        TEXT NOT NULL CHECK (kind IN ('shares', 'inbox', 'contribution', 'unmask')),
    round       BIGINT NOT NULL CHECK (round >= 0),
    body        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (study_id, kind, round)
);
