-- Durable studies, cheaper per message (docs/performance-federation.md, "Durable studies at
-- round speed"): the masked vectors and unmasking answers a coordinator accepts between two
-- phase changes are appended here, one row each, in the fenced transaction that acknowledges
-- them, instead of rewriting the study's whole snapshot in `study_states` for every message.
-- A resumed study replays its rows, in `seq` order, onto the snapshot. Every snapshot write
-- deletes the study's rows in the same transaction (the snapshot then holds what they held),
-- and they go with the snapshot when the study ends. What a row may hold is what the snapshot
-- may hold (migrations/sqlite/0006_durable_studies.sql).
CREATE TABLE study_journal (
    study_id  TEXT NOT NULL REFERENCES studies(id),
    seq       INTEGER NOT NULL CHECK (seq >= 1),
    entry     TEXT NOT NULL,
    PRIMARY KEY (study_id, seq)
);
