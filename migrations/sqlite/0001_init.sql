-- privpca schema v1: tenants, datasets with their zCDP budget, the append-only ledger, jobs.
--
-- Privacy amounts are integers in ledger units (src/privacy/units.rs: rho in 1e-12, delta in
-- 1e-18) so that admission is an exact integer comparison. Timestamps are RFC 3339 text in UTC
-- with microseconds and a 'Z' suffix (fixed width, so text order is time order). Ids are
-- hyphenated lowercase UUID text.
--
-- Defence in depth (privacy.md §2, service.md): the database itself refuses an overspend
-- (CHECK spent <= budget), refuses negative amounts, never deletes or rewrites a ledger row,
-- and never deletes a dataset row (so a dataset id can never be reused).

CREATE TABLE tenants (
    id          TEXT PRIMARY KEY NOT NULL,
    name        TEXT NOT NULL,
    -- hex SHA-256 of the API key; the key itself is never stored.
    key_hash    TEXT NOT NULL UNIQUE,
    created_at  TEXT NOT NULL
);

CREATE TABLE datasets (
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
    status              TEXT NOT NULL CHECK (status IN ('empty', 'ready', 'deleted')),
    n                   INTEGER NULL CHECK (n IS NULL OR n > 0),
    d                   INTEGER NULL CHECK (d IS NULL OR d > 0),
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL,
    deleted_at          TEXT NULL,
    CHECK ((public = 1 AND budget_rho_units IS NULL AND budget_delta_units IS NULL)
        OR (public = 0 AND budget_rho_units > 0 AND budget_delta_units >= 0)),
    CHECK (spent_rho_units >= 0 AND spent_delta_units >= 0),
    CHECK (budget_rho_units IS NULL OR spent_rho_units <= budget_rho_units),
    CHECK (budget_delta_units IS NULL OR spent_delta_units <= budget_delta_units),
    CHECK (public = 0 OR (spent_rho_units = 0 AND spent_delta_units = 0)),
    CHECK ((status = 'deleted') = (deleted_at IS NOT NULL))
);

CREATE INDEX datasets_tenant ON datasets(tenant_id);

CREATE TRIGGER datasets_never_deleted BEFORE DELETE ON datasets
BEGIN
    SELECT RAISE(ABORT, 'dataset rows are never deleted (ids are never reused)');
END;

CREATE TABLE jobs (
    -- Submission order: the queue is FIFO in seq.
    seq                 INTEGER PRIMARY KEY AUTOINCREMENT,
    id                  TEXT NOT NULL UNIQUE,
    tenant_id           TEXT NOT NULL REFERENCES tenants(id),
    dataset_id          TEXT NOT NULL REFERENCES datasets(id),
    algorithm           TEXT NOT NULL,
    params              TEXT NOT NULL,
    config              TEXT NOT NULL,
    privacy             TEXT NOT NULL,
    cost_rho_units      INTEGER NOT NULL CHECK (cost_rho_units >= 0),
    cost_delta_units    INTEGER NOT NULL CHECK (cost_delta_units >= 0),
    status              TEXT NOT NULL
        CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    progress_done       INTEGER NOT NULL DEFAULT 0 CHECK (progress_done >= 0),
    progress_total      INTEGER NOT NULL DEFAULT 0 CHECK (progress_total >= 0),
    cancel_requested    INTEGER NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1)),
    error               TEXT NULL,
    -- Only ever set for public datasets (privacy.md §4); stored as the i64 with the same bits.
    seed                INTEGER NULL,
    -- f64 little-endian, result_d x result_k, column-major.
    result              BLOB NULL,
    result_d            INTEGER NULL,
    result_k            INTEGER NULL,
    eigenvalues         TEXT NULL,
    created_at          TEXT NOT NULL,
    started_at          TEXT NULL,
    finished_at         TEXT NULL,
    idempotency_key     TEXT NULL,
    request_hash        TEXT NULL,
    UNIQUE (tenant_id, idempotency_key),
    CHECK ((idempotency_key IS NULL) = (request_hash IS NULL)),
    CHECK (result IS NULL OR (status = 'succeeded' AND length(result) = 8 * result_d * result_k))
);

CREATE INDEX jobs_status ON jobs(status, seq);
CREATE INDEX jobs_tenant_dataset ON jobs(tenant_id, dataset_id);

CREATE TABLE ledger (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset_id  TEXT NOT NULL REFERENCES datasets(id),
    job_id      TEXT NULL REFERENCES jobs(id),
    entry       TEXT NOT NULL CHECK (entry IN ('charge', 'refund')),
    algorithm   TEXT NULL,
    rho_units   INTEGER NOT NULL CHECK (rho_units >= 0),
    delta_units INTEGER NOT NULL CHECK (delta_units >= 0),
    created_at  TEXT NOT NULL
);

CREATE INDEX ledger_dataset ON ledger(dataset_id, id);

-- At most one charge and one refund per (job, dataset): a job can never be refunded twice.
CREATE UNIQUE INDEX ledger_once_per_job ON ledger(job_id, dataset_id, entry) WHERE job_id IS NOT NULL;

CREATE TRIGGER ledger_no_update BEFORE UPDATE ON ledger
BEGIN
    SELECT RAISE(ABORT, 'the ledger is append-only');
END;

CREATE TRIGGER ledger_no_delete BEFORE DELETE ON ledger
BEGIN
    SELECT RAISE(ABORT, 'the ledger is append-only');
END;
