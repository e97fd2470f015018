//! Per-site contributions (docs/design/federation.md): the wire messages, the
//! secure-aggregation primitives and protocol halves, the coordinator's round machine, and the
//! `federated_power` computation on both sides. Pure code: no HTTP, no database; the HTTP hub
//! (`crate::studies`) and the site client (`crate::site`) drive it.

pub mod crypto;
pub mod fixed_point;
pub mod messages;
pub mod rounds;
pub mod secagg;
pub mod shamir;
pub mod wire;
