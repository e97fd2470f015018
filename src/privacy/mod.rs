//! Privacy arithmetic: zCDP costs and their composition, conversions between ρ and (ε, δ),
//! the ledger's integer units, and the noise samplers every mechanism draws from.
//!
//! Everything here follows `shared/spec/privacy.md` §2 (Bun & Steinke 2016; Canonne, Kamath &
//! Steinke 2020). Arithmetic rounds against the user: charges are rounded up, budgets down.

pub mod convert;
pub mod cost;
pub mod noise;
pub mod testing;
pub mod units;

pub use convert::{epsilon_delta_to_rho, rho_to_epsilon};
pub use cost::{Cost, Delta, Epsilon, PrivacyError, PrivacyTarget, Rho};
pub use noise::{NoiseAudit, NoiseDraw};
