-- SecAgg+ studies invite up to 1 000 sites (docs/design/federation.md, "Live SecAgg+"): a site's
-- index is no longer a GF(2⁸) x-coordinate, only a name in the roster. The index check becomes
-- 1..=65535 (the complete graph's largest x in GF(2¹⁶)); the service enforces its own caps
-- (64 on the complete graph, 1 000 on SecAgg+). SQLite cannot alter a CHECK constraint, so the
-- table is rebuilt with its rows and triggers (DROP TABLE fires no delete trigger).
CREATE TABLE study_sites_new (
    study_id            TEXT NOT NULL REFERENCES studies(id),
    idx                 INTEGER NOT NULL CHECK (idx BETWEEN 1 AND 65535),
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
INSERT INTO study_sites_new (study_id, idx, name, token_hash, status, n_samples, budget_rho_units,
        charged_rho_units, charged_delta_units, charged_at, joined_at, dropped_round)
    SELECT study_id, idx, name, token_hash, status, n_samples, budget_rho_units,
        charged_rho_units, charged_delta_units, charged_at, joined_at, dropped_round
    FROM study_sites;
DROP TABLE study_sites;
ALTER TABLE study_sites_new RENAME TO study_sites;

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
