-- A SecAgg+ site's ledger keeps the roster it revealed its share of the graph seed for (kind
-- 'reveal'; docs/design/federation.md, "Live SecAgg+"). SQLite cannot alter a CHECK
-- constraint, so the table is rebuilt with its rows.
CREATE TABLE site_messages_new (
    study_id    TEXT NOT NULL REFERENCES site_sessions(study_id),
    kind        TEXT NOT NULL CHECK (kind IN ('shares', 'inbox', 'contribution', 'unmask', 'confirm', 'reveal')),
    round       INTEGER NOT NULL CHECK (round >= 0),
    body        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (study_id, kind, round)
);
INSERT INTO site_messages_new (study_id, kind, round, body, created_at)
    SELECT study_id, kind, round, body, created_at FROM site_messages;
DROP TABLE site_messages;
ALTER TABLE site_messages_new RENAME TO site_messages;
