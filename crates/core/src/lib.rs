//! privpca-core: the numerical core of privpca. Everything here is a function of its inputs,
//! injected randomness and, for ingest, local files; nothing names the web, the database or
//! the async runtime, and Cargo enforces that: this crate does not depend on tokio, axum,
//! hyper, tower or sqlx (tests/layering.rs checks `cargo tree -p privpca-core`).
//!
//! Layout, from the bottom up (a module imports only from its own layer or below):
//!
//! - [`linalg`] (kernels over dense, memory-mapped and sparse matrices) and [`dataset`] (the
//!   public facts of a dataset: kind, relation, bounds).
//! - [`privacy`]: zCDP arithmetic, the noise, admission and budget units.
//! - [`federation`]: what every distributed protocol shares (fixed-point encodings, secure
//!   aggregation, Shamir sharing, signed transcripts, the site messages).
//! - [`algorithms`]: the mechanisms, each behind the `Algorithm` trait (with the per-round
//!   mathematics of `federated_power` that both the in-process simulation and a live study
//!   run); [`forecast`]: the utility forecast (the real algorithms on synthetic records).
//! - [`ingest`]: the upload parsers and the stored file formats; [`transparency`]: the
//!   ledger's Merkle logs, signed checkpoints and receipts.
//!
//! The service crate (`privpca`, the workspace root) re-exports these modules under the same
//! names, so `privpca::linalg` and `crate::linalg` inside the service mean the same module.

pub mod algorithms;
pub mod dataset;
pub mod federation;
pub mod forecast;
pub mod ingest;
pub mod linalg;
pub mod names;
pub mod privacy;
pub mod transparency;
