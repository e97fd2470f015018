-- privpca schema for PostgreSQL: the same tables, columns, constraints and guarantees as the
-- SQLite migrations 0001-0003 (migrations/sqlite/), in one step. See those files for the
-- meaning of every column; the comments here only note what PostgreSQL does differently.
--
-- Column types are chosen so that both backends hand the store the same values through sqlx's
-- `Any` driver: BIGINT for every integer (flags included, 0/1 as on SQLite), DOUBLE PRECISION
-- for reals, TEXT for ids, JSON and RFC 3339 timestamps (fixed width, so text order is time
-- order), BYTEA for bases. Triggers are PL/pgSQL functions that raise, as SQLite's RAISE(ABORT).

CREATE FUNCTION privpca_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '%', TG_ARGV[0];
END;
$$;

CREATE TABLE tenants (
    id          TEXT PRIMARY KEY NOT NULL,
    name        TEXT NOT NULL,
    key_hash    TEXT NOT NULL UNIQUE,
    created_at  TEXT NOT NULL
);

CREATE TABLE datasets (
    id                    TEXT PRIMARY KEY NOT NULL,
    tenant_id             TEXT NOT NULL REFERENCES tenants(id),
    name                  TEXT NOT NULL,
    kind                  TEXT NOT NULL CHECK (kind IN ('records', 'matrix')),
    relation              TEXT NOT NULL CHECK (relation IN ('replace_one', 'add_remove', 'entry')),
    row_norm_bound        DOUBLE PRECISION NULL CHECK (row_norm_bound IS NULL OR row_norm_bound > 0),
    row_l1_bound          DOUBLE PRECISION NULL CHECK (row_l1_bound IS NULL OR row_l1_bound > 0),
    entry_bound           DOUBLE PRECISION NULL CHECK (entry_bound IS NULL OR entry_bound > 0),
    public                BIGINT NOT NULL CHECK (public IN (0, 1)),
    budget_rho_units      BIGINT NULL,
    budget_delta_units    BIGINT NULL,
    spent_rho_units       BIGINT NOT NULL DEFAULT 0,
    spent_delta_units     BIGINT NOT NULL DEFAULT 0,
    budget_stated         TEXT NOT NULL,
    status                TEXT NOT NULL CHECK (status IN ('empty', 'ready', 'deleted')),
    n                     BIGINT NULL CHECK (n IS NULL OR n > 0),
    d                     BIGINT NULL CHECK (d IS NULL OR d > 0),
    created_at            TEXT NOT NULL,
    updated_at            TEXT NOT NULL,
    deleted_at            TEXT NULL,
    budget_epsilon        DOUBLE PRECISION NULL CHECK (budget_epsilon IS NULL OR budget_epsilon > 0),
    budget_delta          DOUBLE PRECISION NULL
        CHECK (budget_delta IS NULL OR (budget_delta > 0 AND budget_delta < 1)),
    spent_other_rho_units BIGINT NOT NULL DEFAULT 0
        CHECK (spent_other_rho_units >= 0 AND spent_other_rho_units <= spent_rho_units),
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
    FOR EACH ROW EXECUTE FUNCTION privpca_refuse('dataset rows are never deleted (ids are never reused)');

CREATE TABLE jobs (
    seq                  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id                   TEXT NOT NULL UNIQUE,
    tenant_id            TEXT NOT NULL REFERENCES tenants(id),
    dataset_id           TEXT NOT NULL REFERENCES datasets(id),
    algorithm            TEXT NOT NULL,
    params               TEXT NOT NULL,
    config               TEXT NOT NULL,
    privacy              TEXT NOT NULL,
    cost_rho_units       BIGINT NOT NULL CHECK (cost_rho_units >= 0),
    cost_delta_units     BIGINT NOT NULL CHECK (cost_delta_units >= 0),
    status               TEXT NOT NULL
        CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    progress_done        BIGINT NOT NULL DEFAULT 0 CHECK (progress_done >= 0),
    progress_total       BIGINT NOT NULL DEFAULT 0 CHECK (progress_total >= 0),
    cancel_requested     BIGINT NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1)),
    error                TEXT NULL,
    seed                 BIGINT NULL,
    result               BYTEA NULL,
    result_d             BIGINT NULL,
    result_k             BIGINT NULL,
    eigenvalues          TEXT NULL,
    created_at           TEXT NOT NULL,
    started_at           TEXT NULL,
    finished_at          TEXT NULL,
    idempotency_key      TEXT NULL,
    request_hash         TEXT NULL,
    cost_other_rho_units BIGINT NOT NULL DEFAULT 0
        CHECK (cost_other_rho_units >= 0 AND cost_other_rho_units <= cost_rho_units),
    released             TEXT NULL,
    selection            TEXT NULL,
    UNIQUE (tenant_id, idempotency_key),
    CHECK ((idempotency_key IS NULL) = (request_hash IS NULL)),
    CHECK (result IS NULL OR (status = 'succeeded' AND octet_length(result) = 8 * result_d * result_k))
);

CREATE INDEX jobs_status ON jobs(status, seq);
CREATE INDEX jobs_tenant_dataset ON jobs(tenant_id, dataset_id);

CREATE TABLE ledger (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dataset_id      TEXT NOT NULL REFERENCES datasets(id),
    job_id          TEXT NULL REFERENCES jobs(id),
    entry           TEXT NOT NULL CHECK (entry IN ('charge', 'refund')),
    algorithm       TEXT NULL,
    rho_units       BIGINT NOT NULL CHECK (rho_units >= 0),
    delta_units     BIGINT NOT NULL CHECK (delta_units >= 0),
    created_at      TEXT NOT NULL,
    study_id        TEXT NULL,
    other_rho_units BIGINT NOT NULL DEFAULT 0 CHECK (other_rho_units >= 0),
    rule            TEXT NULL CHECK (rule IS NULL OR rule IN ('zcdp', 'exact_gaussian', 'cks'))
);

CREATE INDEX ledger_dataset ON ledger(dataset_id, id);
CREATE UNIQUE INDEX ledger_once_per_job ON ledger(job_id, dataset_id, entry) WHERE job_id IS NOT NULL;
CREATE UNIQUE INDEX ledger_once_per_study ON ledger(study_id, dataset_id, entry) WHERE study_id IS NOT NULL;

CREATE TRIGGER ledger_no_update BEFORE UPDATE ON ledger
    FOR EACH ROW EXECUTE FUNCTION privpca_refuse('the ledger is append-only');
CREATE TRIGGER ledger_no_delete BEFORE DELETE ON ledger
    FOR EACH ROW EXECUTE FUNCTION privpca_refuse('the ledger is append-only');
-- Row triggers do not fire on TRUNCATE; refuse it too.
CREATE TRIGGER ledger_no_truncate BEFORE TRUNCATE ON ledger
    FOR EACH STATEMENT EXECUTE FUNCTION privpca_refuse('the ledger is append-only');

CREATE TABLE studies (
    seq                 BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id                  TEXT NOT NULL UNIQUE,
    tenant_id           TEXT NOT NULL REFERENCES tenants(id),
    name                TEXT NOT NULL,
    algorithm           TEXT NOT NULL,
    n_features          BIGINT NOT NULL CHECK (n_features > 0),
    relation            TEXT NOT NULL CHECK (relation IN ('replace_one', 'add_remove')),
    row_norm_bound      DOUBLE PRECISION NOT NULL CHECK (row_norm_bound > 0),
    row_l1_bound        DOUBLE PRECISION NULL CHECK (row_l1_bound IS NULL OR row_l1_bound > 0),
    params              TEXT NOT NULL,
    config              TEXT NOT NULL,
    privacy             TEXT NOT NULL,
    cost_rho_units      BIGINT NOT NULL CHECK (cost_rho_units > 0),
    cost_delta_units    BIGINT NOT NULL CHECK (cost_delta_units >= 0),
    threshold           BIGINT NOT NULL CHECK (threshold >= 2),
    n_sites             BIGINT NOT NULL CHECK (n_sites >= threshold),
    join_deadline       TEXT NOT NULL,
    round_timeout_ms    BIGINT NOT NULL CHECK (round_timeout_ms > 0),
    status              TEXT NOT NULL
        CHECK (status IN ('enrolling', 'running', 'succeeded', 'failed', 'cancelled')),
    progress_done       BIGINT NOT NULL DEFAULT 0 CHECK (progress_done >= 0),
    progress_total      BIGINT NOT NULL CHECK (progress_total > 0),
    error               TEXT NULL,
    result              BYTEA NULL,
    result_d            BIGINT NULL,
    result_k            BIGINT NULL,
    eigenvalues         TEXT NULL,
    report              TEXT NULL,
    created_at          TEXT NOT NULL,
    started_at          TEXT NULL,
    finished_at         TEXT NULL,
    CHECK (result IS NULL OR (status = 'succeeded' AND octet_length(result) = 8 * result_d * result_k))
);

CREATE INDEX studies_tenant ON studies(tenant_id, seq);

CREATE TRIGGER studies_never_deleted BEFORE DELETE ON studies
    FOR EACH ROW EXECUTE FUNCTION privpca_refuse('study rows are never deleted');

CREATE TABLE study_sites (
    study_id            TEXT NOT NULL REFERENCES studies(id),
    idx                 BIGINT NOT NULL CHECK (idx BETWEEN 1 AND 255),
    name                TEXT NOT NULL,
    token_hash          TEXT NOT NULL UNIQUE,
    status              TEXT NOT NULL
        CHECK (status IN ('invited', 'joined', 'contributing', 'dropped', 'done')),
    n_samples           BIGINT NULL CHECK (n_samples IS NULL OR n_samples > 0),
    budget_rho_units    BIGINT NULL CHECK (budget_rho_units IS NULL OR budget_rho_units > 0),
    charged_rho_units   BIGINT NOT NULL DEFAULT 0 CHECK (charged_rho_units >= 0),
    charged_delta_units BIGINT NOT NULL DEFAULT 0 CHECK (charged_delta_units >= 0),
    charged_at          TEXT NULL,
    joined_at           TEXT NULL,
    dropped_round       BIGINT NULL,
    PRIMARY KEY (study_id, idx),
    UNIQUE (study_id, name),
    CHECK (budget_rho_units IS NULL OR charged_rho_units <= budget_rho_units)
);

CREATE TRIGGER study_charges_stand BEFORE UPDATE OF charged_rho_units, charged_delta_units ON study_sites
    FOR EACH ROW
    WHEN (NEW.charged_rho_units < OLD.charged_rho_units OR NEW.charged_delta_units < OLD.charged_delta_units
        OR (OLD.charged_at IS NOT NULL AND (NEW.charged_rho_units <> OLD.charged_rho_units
            OR NEW.charged_delta_units <> OLD.charged_delta_units)))
    EXECUTE FUNCTION privpca_refuse('a study charge stands once made');

CREATE TRIGGER study_sites_never_deleted BEFORE DELETE ON study_sites
    FOR EACH ROW EXECUTE FUNCTION privpca_refuse('study site rows are never deleted');
