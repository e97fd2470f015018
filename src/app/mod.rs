//! The application layer: the service's use cases (submit a job, create a study, upload a
//! dataset, plan a budget). Each takes a typed request and returns a domain result or an
//! [`error::AppError`]; none sees an HTTP type. Handlers in `http` parse a request, call one
//! use case and render its answer.

pub mod datasets;
pub mod error;
pub mod forecast;
pub mod jobs;
pub mod ledger_key;
pub mod ledger_log;
pub mod log_cache;
pub mod plan;
pub mod pricing;
pub mod site;
pub mod spectrum;
pub mod studies;
pub mod targets;
pub mod tenants;
