//! privpca: principal components under differential privacy, as a service.
//!
//! Layout, from the bottom up (a module imports only from its own layer or below):
//!
//! - **Numerical core**: the crate `privpca-core` (crates/core), re-exported here under the same
//!   names: [`linalg`] (kernels), [`privacy`] (zCDP arithmetic, noise, admission),
//!   [`algorithms`] (the mechanisms, with `federated_power`'s round mathematics), [`forecast`]
//!   (the utility forecast), [`dataset`] (the public facts of a dataset), [`federation`] (what
//!   every distributed protocol shares: fixed-point encodings, secure aggregation, Shamir
//!   shares, signed transcripts, the site messages), [`ingest`] (the upload parsers and stored
//!   file formats) and [`transparency`] (the ledger's Merkle logs, signed checkpoints and
//!   receipts). Cargo keeps the web, the database and the async runtime out of it: it does not
//!   depend on them (tests/layering.rs checks `cargo tree`).
//! - **Protocols**: [`protocols`] (one folder per protocol: its coordinator, site steps and
//!   durable state) over the core's [`federation`].
//! - **Storage and execution**: [`store`] (datasets, the ledger, jobs, studies; SQLite or
//!   PostgreSQL), [`context`] (a stored dataset's public facts for an algorithm), [`objects`] (datasets in an S3-compatible object
//!   store, read through a checked local cache), [`stats_builds`], [`runner`] and [`job_control`]
//!   (running jobs across replicas), [`studies`] (the coordinator of live studies).
//! - **Application**: [`mod@app`] (the use cases: submit a job, create a study, upload a dataset),
//!   [`rate_limits`], [`state`], [`config`].
//! - **Edges**: [`http`] (the API; handlers only translate), [`site`] (the `privpca site`
//!   client), [`verify`] (`privpca verify`: receipts and witnesses), [`serve`], [`metrics`],
//!   [`telemetry`].

// The numerical core (crates/core), re-exported under the same names: `crate::linalg` here is
// `privpca_core::linalg`.
pub use privpca_core::{algorithms, dataset, federation, forecast, ingest, linalg, privacy, transparency};

pub mod app;
pub mod config;
pub mod context;
pub mod http;
pub mod job_control;
pub mod metrics;
pub mod objects;
pub mod protocols;
pub mod rate_limits;
pub mod runner;
pub mod serve;
pub mod site;
pub mod state;
pub mod stats_builds;
pub mod store;
pub mod studies;
pub mod telemetry;
pub mod verify;

/// The whole application as a router (tests call `app(state).oneshot(request)`).
pub fn app(state: state::AppState) -> axum::Router {
    http::router(state)
}

/// The operator listener's router (`--metrics-bind`): Prometheus metrics, apart from the API.
pub fn operator_app(state: state::AppState) -> axum::Router {
    http::operator::router(state)
}
