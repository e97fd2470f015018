//! The machinery every distributed protocol shares (docs/design/federation.md): the wire
//! messages, the secure-aggregation primitives and protocol halves, Shamir shares, key
//! agreement, the fixed-point encoding and the coordinator's round machine. Pure code: no HTTP,
//! no database. The protocols' coordinators and site loops are in the service crate.

pub mod crypto;
pub mod fixed_point;
pub mod messages;
pub mod rounds;
pub mod secagg;
pub mod shamir;
pub mod status;
pub mod transcript;
pub mod wire;
