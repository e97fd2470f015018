-- SecAgg+ studies invite up to 1 000 sites (docs/design/federation.md, "Live SecAgg+"): a site's
-- index is no longer a GF(2⁸) x-coordinate, only a name in the roster. The index check becomes
-- 1..=65535; the service enforces its own caps (64 on the complete graph, 1 000 on SecAgg+).
ALTER TABLE study_sites DROP CONSTRAINT study_sites_idx_check;
ALTER TABLE study_sites ADD CONSTRAINT study_sites_idx_check CHECK (idx BETWEEN 1 AND 65535);
