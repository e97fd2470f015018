-- Upload claims: several replicas share this database, so an upload holds its dataset in the
-- database, not in one process's memory (docs/design/architecture.md, "Uploads").
--
-- A new status `uploading`: one conditional UPDATE takes an `empty` dataset (or an
-- `uploading` one whose lease ran out: its replica died mid-upload) and writes a fresh random
-- `upload_claim` token and `upload_lease_until` (RFC 3339 text, like every timestamp here),
-- which the uploading replica pushes forward while the body streams. Attaching the data
-- requires the token to still match (the fence); a failed upload puts the dataset back to
-- `empty`. The claim columns are set exactly while the dataset is `uploading`.
--
-- SQLite cannot change a CHECK constraint in place, so the table is rebuilt (SQLite's
-- documented procedure: new table, copy, drop, rename, re-create its index and trigger).
-- Dropping a table other tables reference needs foreign keys off, which SQLite ignores inside
-- a transaction; `Store::migrate` therefore runs the SQLite migrations on a connection of
-- their own with foreign keys off and checks them afterwards (src/store/mod.rs).

CREATE TABLE datasets_new (
    id                  TEXT PRIMARY KEY NOT NULL,
    tenant_id           TEXT NOT NULL REFERENCES tenants(id),
    name                TEXT NOT NULL,
    kind                TEXT NOT NULL CHECK (kind IN ('records', 'matrix')),
    relation            TEXT NOT NULL CHECK (relation IN ('replace_one', 'add_remove', 'entry')),
    row_norm_bound      REAL NULL CHECK (row_norm_bound IS NULL OR row_norm_bound > 0),
    row_l1_bound        REAL NULL CHECK (row_l1_bound IS NULL OR row_l1_bound > 0),
    entry_bound         REAL NULL CHECK (entry_bound IS NULL OR entry_bound > 0),
    public              INTEGER NOT NULL CHECK (public IN (0, 1)),
    -- NULL exactly when the dataset is public: public data carries no budget.
    budget_rho_units    INTEGER NULL,
    budget_delta_units  INTEGER NULL,
    -- Spending against the budget. Public datasets record their charges in the ledger only;
    -- their spent columns stay 0.
    spent_rho_units     INTEGER NOT NULL DEFAULT 0,
    spent_delta_units   INTEGER NOT NULL DEFAULT 0,
    -- JSON: how the owner stated the budget (rho, or epsilon and delta).
    budget_stated       TEXT NOT NULL,
    status              TEXT NOT NULL CHECK (status IN ('empty', 'uploading', 'ready', 'deleted')),
    n                   INTEGER NULL CHECK (n IS NULL OR n > 0),
    d                   INTEGER NULL CHECK (d IS NULL OR d > 0),
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL,
    deleted_at          TEXT NULL,
    budget_epsilon      REAL NULL CHECK (budget_epsilon IS NULL OR budget_epsilon > 0),
    budget_delta        REAL NULL
        CHECK (budget_delta IS NULL OR (budget_delta > 0 AND budget_delta < 1)),
    spent_other_rho_units INTEGER NOT NULL DEFAULT 0
        CHECK (spent_other_rho_units >= 0 AND spent_other_rho_units <= spent_rho_units),
    -- The upload holding the dataset: a random token, and when its lease runs out.
    upload_claim        TEXT NULL,
    upload_lease_until  TEXT NULL,
    CHECK ((public = 1 AND budget_rho_units IS NULL AND budget_delta_units IS NULL)
        OR (public = 0 AND budget_rho_units > 0 AND budget_delta_units >= 0)),
    CHECK (spent_rho_units >= 0 AND spent_delta_units >= 0),
    CHECK (budget_rho_units IS NULL OR spent_rho_units <= budget_rho_units),
    CHECK (budget_delta_units IS NULL OR spent_delta_units <= budget_delta_units),
    CHECK (public = 0 OR (spent_rho_units = 0 AND spent_delta_units = 0)),
    CHECK ((status = 'deleted') = (deleted_at IS NOT NULL)),
    CHECK ((status = 'uploading') = (upload_claim IS NOT NULL AND upload_lease_until IS NOT NULL))
);

INSERT INTO datasets_new (id, tenant_id, name, kind, relation, row_norm_bound, row_l1_bound,
        entry_bound, public, budget_rho_units, budget_delta_units, spent_rho_units,
        spent_delta_units, budget_stated, status, n, d, created_at, updated_at, deleted_at,
        budget_epsilon, budget_delta, spent_other_rho_units)
    SELECT id, tenant_id, name, kind, relation, row_norm_bound, row_l1_bound,
        entry_bound, public, budget_rho_units, budget_delta_units, spent_rho_units,
        spent_delta_units, budget_stated, status, n, d, created_at, updated_at, deleted_at,
        budget_epsilon, budget_delta, spent_other_rho_units
    FROM datasets;

DROP TABLE datasets;
ALTER TABLE datasets_new RENAME TO datasets;

CREATE INDEX datasets_tenant ON datasets(tenant_id);

CREATE TRIGGER datasets_never_deleted BEFORE DELETE ON datasets
BEGIN
    SELECT RAISE(ABORT, 'dataset rows are never deleted (ids are never reused)');
END;
