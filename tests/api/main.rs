//! Black-box tests of the HTTP API: the app is driven through `tower::ServiceExt::oneshot`,
//! with the real store (SQLite in a temp dir) and, where jobs must run, the real job runner.

#![allow(clippy::unwrap_used)]

#[path = "../support/bodies.rs"]
mod bodies;
mod helpers;
#[path = "../support/poll.rs"]
mod poll;

mod auth;
mod cape;
mod cape_agn;
mod central;
mod contract;
mod datasets;
mod extremes;
mod federated;
mod forecast;
mod gossip;
mod hostile;
mod jobs;
mod ledger;
mod meta;
mod options;
mod receipts;
mod secagg_plus;
mod sparse;
mod studies;
mod study_clip;
mod ui;
