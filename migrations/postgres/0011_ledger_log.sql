-- The transparency log: see migrations/sqlite/0011_ledger_log.sql, the same schema.
CREATE TABLE ledger_leaves (
    log        TEXT NOT NULL,
    idx        BIGINT NOT NULL CHECK (idx >= 0),
    leaf       TEXT NOT NULL,
    leaf_hash  TEXT NOT NULL CHECK (length(leaf_hash) = 64),
    PRIMARY KEY (log, idx)
);

CREATE TRIGGER ledger_leaves_no_update BEFORE UPDATE ON ledger_leaves
    FOR EACH ROW EXECUTE FUNCTION privpca_refuse('the transparency log is append-only');
CREATE TRIGGER ledger_leaves_no_delete BEFORE DELETE ON ledger_leaves
    FOR EACH ROW EXECUTE FUNCTION privpca_refuse('the transparency log is append-only');
CREATE TRIGGER ledger_leaves_no_truncate BEFORE TRUNCATE ON ledger_leaves
    FOR EACH STATEMENT EXECUTE FUNCTION privpca_refuse('the transparency log is append-only');
