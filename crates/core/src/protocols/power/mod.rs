//! `federated_power`'s per-round state both sides compute ([`state`]) and the whole protocol
//! run in process for a job ([`simulate`]).

pub mod simulate;
pub mod state;
