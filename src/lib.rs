//! privpca: principal components under differential privacy, as a service.
//!
//! Layout: `linalg` (kernels), `privacy` (zCDP arithmetic and noise), `algorithms` (the
//! mechanisms) form the numerical core and never touch the web or the database. `ingest`
//! parses uploads, `store` persists datasets, the ledger and jobs, `runner` executes jobs, and
//! `http` exposes the API.

pub mod algorithms;
pub mod app;
pub mod config;
pub mod context;
pub mod dataset;
pub mod federation;
pub mod http;
pub mod ingest;
pub mod job_control;
pub mod linalg;
pub mod metrics;
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

/// The whole application as a router (tests call `app(state).oneshot(request)`).
pub fn app(state: state::AppState) -> axum::Router {
    http::router(state)
}

/// The operator listener's router (`--metrics-bind`): Prometheus metrics, apart from the API.
pub fn operator_app(state: state::AppState) -> axum::Router {
    http::operator::router(state)
}
