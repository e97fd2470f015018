-- The transparency log (issue 39; docs/design/ledger.md, "The transparency log"): one
-- append-only RFC 6962 Merkle log per dataset (`datasets/<id>`) and per study
-- (`studies/<id>`). Each row is one leaf: the RFC 8785 canonical JSON of a ledger event, as
-- text, and its leaf hash SHA-256(0x00 ‖ leaf) in lowercase hex. A leaf is appended in the
-- same transaction as the ledger row it records, at `idx` = the number of leaves the log
-- already holds (the primary key refuses a second leaf at the same index). Leaves are never
-- updated or deleted; the service recomputes each hash from its leaf and each leaf's amounts
-- against the ledger before it signs a checkpoint, and refuses a log where they differ.
CREATE TABLE ledger_leaves (
    log        TEXT NOT NULL,
    idx        INTEGER NOT NULL CHECK (idx >= 0),
    leaf       TEXT NOT NULL,
    leaf_hash  TEXT NOT NULL CHECK (length(leaf_hash) = 64),
    PRIMARY KEY (log, idx)
);

CREATE TRIGGER ledger_leaves_no_update BEFORE UPDATE ON ledger_leaves
BEGIN
    SELECT RAISE(ABORT, 'the transparency log is append-only');
END;

CREATE TRIGGER ledger_leaves_no_delete BEFORE DELETE ON ledger_leaves
BEGIN
    SELECT RAISE(ABORT, 'the transparency log is append-only');
END;
