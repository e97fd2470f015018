-- privpca schema v2: per-site studies (docs/design/federation.md).
--
-- A study is a multi-site run; each invited site gets a token (stored hashed) and, once the
-- study opens round 1, a charge of the study's cost recorded on its row (the coordinator's copy
-- of what the site's own ledger charges). Charges are written once and never lowered; study
-- rows are never deleted. Protocol state (keys, boxes, masked vectors) is not persisted: a
-- coordinator restart fails unfinished studies, charges kept.

CREATE TABLE studies (
    seq                 INTEGER PRIMARY KEY AUTOINCREMENT,
    id                  TEXT NOT NULL UNIQUE,
    tenant_id           TEXT NOT NULL REFERENCES tenants(id),
    name                TEXT NOT NULL,
    algorithm           TEXT NOT NULL,
    n_features          INTEGER NOT NULL CHECK (n_features > 0),
    relation            TEXT NOT NULL CHECK (relation IN ('replace_one', 'add_remove')),
    row_norm_bound      REAL NOT NULL CHECK (row_norm_bound > 0),
    row_l1_bound        REAL NULL CHECK (row_l1_bound IS NULL OR row_l1_bound > 0),
    params              TEXT NOT NULL,
    config              TEXT NOT NULL,
    privacy             TEXT NOT NULL,
    cost_rho_units      INTEGER NOT NULL CHECK (cost_rho_units > 0),
    cost_delta_units    INTEGER NOT NULL CHECK (cost_delta_units >= 0),
    threshold           INTEGER NOT NULL CHECK (threshold >= 2),
    n_sites             INTEGER NOT NULL CHECK (n_sites >= threshold),
    join_deadline       TEXT NOT NULL,
    round_timeout_ms    INTEGER NOT NULL CHECK (round_timeout_ms > 0),
    status              TEXT NOT NULL
        CHECK (status IN ('enrolling', 'running', 'succeeded', 'failed', 'cancelled')),
    progress_done       INTEGER NOT NULL DEFAULT 0 CHECK (progress_done >= 0),
    progress_total      INTEGER NOT NULL CHECK (progress_total > 0),
    error               TEXT NULL,
    -- f64 little-endian, result_d x result_k, column-major.
    result              BLOB NULL,
    result_d            INTEGER NULL,
    result_k            INTEGER NULL,
    eigenvalues         TEXT NULL,
    -- JSON: survivors per round and the noise actually achieved.
    report              TEXT NULL,
    created_at          TEXT NOT NULL,
    started_at          TEXT NULL,
    finished_at         TEXT NULL,
    CHECK (result IS NULL OR (status = 'succeeded' AND length(result) = 8 * result_d * result_k))
);

CREATE INDEX studies_tenant ON studies(tenant_id, seq);

CREATE TRIGGER studies_never_deleted BEFORE DELETE ON studies
BEGIN
    SELECT RAISE(ABORT, 'study rows are never deleted');
END;

CREATE TABLE study_sites (
    study_id            TEXT NOT NULL REFERENCES studies(id),
    idx                 INTEGER NOT NULL CHECK (idx BETWEEN 1 AND 255),
    name                TEXT NOT NULL,
    -- hex SHA-256 of the site token; the token itself is never stored.
    token_hash          TEXT NOT NULL UNIQUE,
    status              TEXT NOT NULL
        CHECK (status IN ('invited', 'joined', 'contributing', 'dropped', 'done')),
    -- Public only under replace_one; never stored under add_remove.
    n_samples           INTEGER NULL CHECK (n_samples IS NULL OR n_samples > 0),
    -- The coordinator-side budget of this site, when the study creator stated one.
    budget_rho_units    INTEGER NULL CHECK (budget_rho_units IS NULL OR budget_rho_units > 0),
    charged_rho_units   INTEGER NOT NULL DEFAULT 0 CHECK (charged_rho_units >= 0),
    charged_delta_units INTEGER NOT NULL DEFAULT 0 CHECK (charged_delta_units >= 0),
    charged_at          TEXT NULL,
    joined_at           TEXT NULL,
    dropped_round       INTEGER NULL,
    PRIMARY KEY (study_id, idx),
    UNIQUE (study_id, name),
    CHECK (budget_rho_units IS NULL OR charged_rho_units <= budget_rho_units)
);

-- A charge is written once and stands: never lowered, never rewritten.
CREATE TRIGGER study_charges_stand BEFORE UPDATE OF charged_rho_units, charged_delta_units ON study_sites
WHEN NEW.charged_rho_units < OLD.charged_rho_units OR NEW.charged_delta_units < OLD.charged_delta_units
    OR (OLD.charged_at IS NOT NULL AND (NEW.charged_rho_units != OLD.charged_rho_units
        OR NEW.charged_delta_units != OLD.charged_delta_units))
BEGIN
    SELECT RAISE(ABORT, 'a study charge stands once made');
END;

CREATE TRIGGER study_sites_never_deleted BEFORE DELETE ON study_sites
BEGIN
    SELECT RAISE(ABORT, 'study site rows are never deleted');
END;

-- Site-local ledgers (`privpca site --ledger`) charge a study to the site's own dataset row:
-- job_id stays NULL and study_id names the study (no foreign key: the study lives at the
-- coordinator). One charge per (study, dataset): a replayed study can never be charged twice.
ALTER TABLE ledger ADD COLUMN study_id TEXT NULL;
CREATE UNIQUE INDEX ledger_once_per_study ON ledger(study_id, dataset_id, entry) WHERE study_id IS NOT NULL;
