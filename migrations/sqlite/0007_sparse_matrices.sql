-- Sparse symmetric matrices (Matrix Market uploads, stored as CSR: src/ingest/csr_file.rs).
-- `nnz` is the number of stored entries, both triangles, of a sparse matrix dataset, and NULL
-- for dense data: a job reads the data file in the layout this column names.
ALTER TABLE datasets ADD COLUMN nnz INTEGER NULL CHECK (nnz IS NULL OR nnz >= 0);
