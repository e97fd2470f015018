-- Tight accounting for budgets stated as (epsilon, delta) (privacy.md section 2).
--
-- A dataset whose owner stated (epsilon, delta) keeps them here and two rho sums: all rho
-- (spent_rho_units) and the part not spent by Gaussian mechanisms (spent_other_rho_units).
-- While the other part and the delta spent are 0, admission uses the exact curve of the
-- composed Gaussian mechanism; otherwise the CKS 2020 conversion at delta minus the delta
-- spent. The rule is evaluated by the service (src/privacy/admission.rs) inside the write
-- transaction, and the update re-checks the sums it read (compare-and-set).
--
-- budget_rho_units stays the hard ceiling the database enforces (CHECK spent <= budget): for
-- (epsilon, delta) budgets it is the exact-Gaussian maximum, the most any rule can admit.
-- Datasets created before this migration keep the zCDP rule with the rho they were given
-- (converted then by the Bun-Steinke inverse, which is sound and more conservative).

ALTER TABLE datasets ADD COLUMN budget_epsilon REAL NULL CHECK (budget_epsilon IS NULL OR budget_epsilon > 0);
ALTER TABLE datasets ADD COLUMN budget_delta REAL NULL
    CHECK (budget_delta IS NULL OR (budget_delta > 0 AND budget_delta < 1));
ALTER TABLE datasets ADD COLUMN spent_other_rho_units INTEGER NOT NULL DEFAULT 0
    CHECK (spent_other_rho_units >= 0 AND spent_other_rho_units <= spent_rho_units);

ALTER TABLE jobs ADD COLUMN cost_other_rho_units INTEGER NOT NULL DEFAULT 0
    CHECK (cost_other_rho_units >= 0 AND cost_other_rho_units <= cost_rho_units);

ALTER TABLE ledger ADD COLUMN other_rho_units INTEGER NOT NULL DEFAULT 0 CHECK (other_rho_units >= 0);
-- Which rule admitted a charge: 'zcdp', 'exact_gaussian' or 'cks' (NULL on refunds, on public
-- datasets, and on rows written before this migration).
ALTER TABLE ledger ADD COLUMN rule TEXT NULL CHECK (rule IS NULL OR rule IN ('zcdp', 'exact_gaussian', 'cks'));

-- Other DP releases of a job returned with its basis, as JSON (e.g. {"clip_norm": c}, the
-- bound the adaptive clip released; privacy.md section 2).
ALTER TABLE jobs ADD COLUMN released TEXT NULL;

-- How the algorithm was chosen when the client asked for "auto": {"requested": "auto",
-- "chose": name, "because": reason} (public facts only; src/algorithms/auto.rs).
ALTER TABLE jobs ADD COLUMN selection TEXT NULL;
