-- Durable studies, cheaper per message: see migrations/sqlite/0008_study_journal.sql, the same
-- schema.
CREATE TABLE study_journal (
    study_id  TEXT NOT NULL REFERENCES studies(id),
    seq       BIGINT NOT NULL CHECK (seq >= 1),
    entry     TEXT NOT NULL,
    PRIMARY KEY (study_id, seq)
);
