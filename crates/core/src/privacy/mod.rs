//! Privacy arithmetic: zCDP costs and their composition ([`cost`]), conversions between ρ and
//! (ε, δ) ([`convert`]), the ledger's integer units ([`units`]), the discrete noise every
//! release draws ([`noise`], on the grids of [`lattice`], sampled exactly by [`discrete`]), data-free planning helpers ([`plan`]) and statistical
//! checks of noise scale for tests ([`testing`]).
//!
//! Everything here follows `docs/design/privacy.md` §2 (Bun & Steinke 2016; Canonne, Kamath &
//! Steinke 2020). Arithmetic rounds against the user: charges are rounded up, budgets down.

pub mod admission;
pub mod convert;
pub mod cost;
pub mod discrete;
pub mod gaussian_curve;
pub mod lattice;
pub mod noise;
pub mod plan;
pub mod target;
pub mod testing;
pub mod units;

pub use convert::{epsilon_delta_to_rho, rho_to_epsilon};
pub use cost::{Cost, Delta, Epsilon, PrivacyError, PrivacyTarget, Rho};
pub use noise::{NoiseAudit, NoiseDraw};
pub use plan::{Conversions, describe, gaussian_sd};
