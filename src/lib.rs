//! privpca: principal components under differential privacy, as a service.
//!
//! Layout, from the bottom up (a module imports only from its own layer or below):
//!
//! - **Numerical core**, no I/O: [`linalg`] (kernels), [`privacy`] (zCDP arithmetic, noise,
//!   admission), [`algorithms`] (the mechanisms), [`forecast`] (the utility forecast: the real
//!   algorithms on synthetic records), with [`dataset`] and [`context`] (the public facts of a
//!   dataset). It never names the web, the database or the async runtime
//!   (tests/layering.rs checks the source). It still reaches [`federation`] and [`protocols`]
//!   for the simulated protocols (issue 37 untangles that). Beside it, [`transparency`] (the
//!   ledger's Merkle logs, signed checkpoints and receipts) is pure and checked the same way.
//! - **Protocols**: [`federation`] (what every distributed protocol shares: wire encodings,
//!   secure aggregation, signed transcripts, site messages) and [`protocols`] (one folder per
//!   protocol: its coordinator, site and simulation).
//! - **Storage and execution**: [`ingest`] (upload parsers), [`store`] (datasets, the ledger,
//!   jobs, studies; SQLite or PostgreSQL), [`objects`] (datasets in an S3-compatible object
//!   store, read through a checked local cache), [`stats_builds`], [`runner`] and [`job_control`]
//!   (running jobs across replicas), [`studies`] (the coordinator of live studies).
//! - **Application**: [`mod@app`] (the use cases: submit a job, create a study, upload a dataset),
//!   [`rate_limits`], [`state`], [`config`].
//! - **Edges**: [`http`] (the API; handlers only translate), [`site`] (the `privpca site`
//!   client), [`verify`] (`privpca verify`: receipts and witnesses), [`serve`], [`metrics`],
//!   [`telemetry`].

pub mod algorithms;
pub mod app;
pub mod config;
pub mod context;
pub mod dataset;
pub mod federation;
pub mod forecast;
pub mod http;
pub mod ingest;
pub mod job_control;
pub mod linalg;
pub mod metrics;
pub mod objects;
pub mod privacy;
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
pub mod transparency;
pub mod verify;

/// The whole application as a router (tests call `app(state).oneshot(request)`).
pub fn app(state: state::AppState) -> axum::Router {
    http::router(state)
}

/// The operator listener's router (`--metrics-bind`): Prometheus metrics, apart from the API.
pub fn operator_app(state: state::AppState) -> axum::Router {
    http::operator::router(state)
}
