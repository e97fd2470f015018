//! `gossip_power` (D-DP-PM, seed 001 Alg. 1): the algorithm and its calibration ([`power`]),
//! one agent's state machine shared by simulate mode and live studies ([`agent`]), and the
//! agents' network, mixing matrices and average consensus ([`graph`]).

pub mod agent;
pub mod center;
pub mod graph;
pub mod power;
pub mod simulate;
