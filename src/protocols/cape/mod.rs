//! `cape_pca` and `cape_agn` across sites: one correlated-noise release per site per stage
//! (docs/design/cape.md). The plan and the coordinator's state machine ([`coordinator`]), what
//! of it a snapshot keeps ([`durable`]) and the site's steps ([`site`]). The noise itself is the
//! numerical core's (`crate::algorithms::cape_noise`), shared with the simulate-mode jobs.

pub mod coordinator;
pub(crate) mod durable;
pub(crate) mod site;
