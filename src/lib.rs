//! privpca: principal components under differential privacy, as a service.
//!
//! Layout: `linalg` (kernels), `privacy` (zCDP arithmetic and noise), `algorithms` (the
//! mechanisms) form the numerical core and never touch the web or the database. `ingest`
//! parses uploads, `store` persists datasets, the ledger and jobs, `runner` executes jobs, and
//! `http` exposes the API.

pub mod algorithms;
pub mod dataset;
pub mod linalg;
pub mod privacy;
