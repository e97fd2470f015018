//! The protocols' mathematics that needs no transport: what a `federated_power` round computes
//! on either side. The coordinators, the site loops and their storage are in the service
//! crate's `protocols` folder, which re-exports these modules in place.

pub mod power;
