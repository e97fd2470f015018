//! L2 sensitivities of the power-method family (docs/design/algorithms.md, "Sensitivities shared by the
//! power-method family").
//!
//! The released quantity of one power iteration is A·X for a d×p iterate X with orthonormal
//! columns that is itself a post-processing of earlier releases. Its Frobenius sensitivity
//! Δ(X) = sup ‖(A' − A)·X‖_F over neighbouring A' depends on the relation:
//!
//! | relation | `row_norm` (Thm 3.1) | `rank_one` | `hardt_price` (Δ^a) |
//! |---|---|---|---|
//! | matrix, bound u | u·max_i ‖X_i:‖₂ | — | u·√p·max_ij abs(X_ij) |
//! | records, add_remove | αβ·max_i ‖X_i:‖₂ | β² | αβ·√p·max_ij abs(X_ij) |
//! | records, replace_one | 2αβ·max_i ‖X_i:‖₂ | √2·β² | 2αβ·√p·max_ij abs(X_ij) |
//!
//! Derivations. `row_norm` is Nicolas et al. 2024 Thm 3.1, eq. 13, for a change C with
//! sqrt(Σ_i ‖C_i:‖₁²) ≤ 1 (eq. 12), scaled by the bound on that quantity: u for matrices; for
//! records C = xxᵀ, whose row i has L1 norm abs(x_i)·‖x‖₁, so sqrt(Σ_i ‖C_i:‖₁²) = ‖x‖₂‖x‖₁ ≤ αβ,
//! and C = xxᵀ − yyᵀ gives 2αβ by the triangle inequality. `rank_one`: ‖xxᵀX‖_F = ‖x‖₂‖Xᵀx‖₂ ≤ β²
//! because X has orthonormal columns, and ‖(xxᵀ − yyᵀ)X‖_F ≤ ‖xxᵀ − yyᵀ‖_F ≤ √2·β² (the squared
//! norm is ‖x‖⁴ + ‖y‖⁴ − 2(xᵀy)²). `hardt_price` is the baseline Δ^q of Nicolas et al. §2.4
//! (Hardt & Price 2014, Balcan et al. 2016), always ≥ `row_norm` by eq. 16. `auto` is the
//! minimum of the applicable bounds: a minimum of valid upper bounds is a valid upper bound.

use serde::{Deserialize, Serialize};

use super::ConfigError;
use crate::dataset::Neighbours;
use crate::linalg::Matrix;

/// Which sensitivity bound calibrates each power iteration's noise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SensitivityMode {
    /// The minimum of every bound that applies to the dataset's relation.
    #[default]
    Auto,
    /// Nicolas et al. 2024 Thm 3.1 (eq. 13), scaled to the relation.
    RowNorm,
    /// β² (add_remove) or √2·β² (replace_one); records only.
    RankOne,
    /// The Hardt & Price 2014 baseline √p·max_ij abs(X_ij) (Nicolas et al. Δ^q), scaled.
    HardtPrice,
}

impl SensitivityMode {
    /// Every mode's wire name, for the parameter schema.
    pub const NAMES: [&'static str; 4] = ["auto", "row_norm", "rank_one", "hardt_price"];

    pub fn as_str(self) -> &'static str {
        match self {
            SensitivityMode::Auto => "auto",
            SensitivityMode::RowNorm => "row_norm",
            SensitivityMode::RankOne => "rank_one",
            SensitivityMode::HardtPrice => "hardt_price",
        }
    }

    /// Whether this mode applies to datasets with these neighbours (`rank_one` needs records).
    pub fn applies_to(self, neighbours: &Neighbours) -> bool {
        !(self == SensitivityMode::RankOne && matches!(neighbours, Neighbours::Entry { .. }))
    }

    /// The sensitivity when it does not depend on the iterate (`rank_one`), `None` otherwise.
    pub fn fixed(self, neighbours: &Neighbours) -> Option<f64> {
        match self {
            SensitivityMode::RankOne => rank_one(neighbours),
            _ => None,
        }
    }
}

/// Checks that the public bounds are finite and strictly positive, so that no sensitivity can
/// come out as 0, ∞ or NaN (which would void the calibration).
pub fn check_bounds(neighbours: &Neighbours) -> Result<(), ConfigError> {
    let ok = |v: f64| v > 0.0 && v.is_finite();
    match *neighbours {
        Neighbours::ReplaceOne { beta, alpha } | Neighbours::AddRemove { beta, alpha } => {
            if !ok(beta) {
                return Err(ConfigError::invalid(
                    "bounds.row_norm_bound",
                    "must be a finite number > 0",
                ));
            }
            if !ok(alpha) {
                return Err(ConfigError::invalid(
                    "bounds.row_l1_bound",
                    "must be a finite number > 0",
                ));
            }
        }
        Neighbours::Entry { u } => {
            if !ok(u) {
                return Err(ConfigError::invalid(
                    "bounds.entry_bound",
                    "must be a finite number > 0",
                ));
            }
        }
    }
    Ok(())
}

/// The bound on sqrt(Σ_i ‖C_i:‖₁²) for one change C (Nicolas et al. eq. 12): u, αβ or 2αβ.
pub fn change_l1_bound(neighbours: &Neighbours) -> f64 {
    match *neighbours {
        Neighbours::Entry { u } => u,
        Neighbours::AddRemove { beta, alpha } => alpha * beta,
        Neighbours::ReplaceOne { beta, alpha } => 2.0 * alpha * beta,
    }
}

/// max_i ‖X_i:‖₂, the largest row norm of `x` (Nicolas et al. eq. 13).
pub fn max_row_norm(x: &Matrix) -> f64 {
    let mut sq = vec![0.0_f64; x.nrows()];
    for col in x.column_iter() {
        for (s, v) in sq.iter_mut().zip(col.iter()) {
            *s += v * v;
        }
    }
    sq.into_iter().fold(0.0, f64::max).sqrt()
}

/// max_ij abs(X_ij).
pub fn max_abs_entry(x: &Matrix) -> f64 {
    x.iter().fold(0.0_f64, |m, v| m.max(v.abs()))
}

/// `row_norm`: bound·max_i ‖X_i:‖₂ (Nicolas et al. Thm 3.1, eq. 13, scaled by eq. 12's bound).
pub fn row_norm(neighbours: &Neighbours, x: &Matrix) -> f64 {
    change_l1_bound(neighbours) * max_row_norm(x)
}

/// `rank_one`: β² (add_remove) or √2·β² (replace_one); `None` for matrices.
pub fn rank_one(neighbours: &Neighbours) -> Option<f64> {
    match *neighbours {
        Neighbours::AddRemove { beta, .. } => Some(beta * beta),
        Neighbours::ReplaceOne { beta, .. } => Some(std::f64::consts::SQRT_2 * beta * beta),
        Neighbours::Entry { .. } => None,
    }
}

/// `hardt_price`: bound·√p·max_ij abs(X_ij) (Nicolas et al. §2.4 Δ^q; ≥ `row_norm` by eq. 16).
pub fn hardt_price(neighbours: &Neighbours, x: &Matrix) -> f64 {
    change_l1_bound(neighbours) * (x.ncols() as f64).sqrt() * max_abs_entry(x)
}

/// Δ(X) for the iterate `x` (d×p, orthonormal columns) under `mode`. `None` when the mode does
/// not apply to the relation (`rank_one` on a matrix).
pub fn power_sensitivity(mode: SensitivityMode, neighbours: &Neighbours, x: &Matrix) -> Option<f64> {
    match mode {
        SensitivityMode::RowNorm => Some(row_norm(neighbours, x)),
        SensitivityMode::RankOne => rank_one(neighbours),
        SensitivityMode::HardtPrice => Some(hardt_price(neighbours, x)),
        SensitivityMode::Auto => {
            let bound = row_norm(neighbours, x).min(hardt_price(neighbours, x));
            Some(rank_one(neighbours).map_or(bound, |r| bound.min(r)))
        }
    }
}

#[cfg(test)]
#[path = "sensitivity_tests.rs"]
mod tests;
