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
mod tests {
    use super::*;
    use crate::algorithms::testing::{gaussian, gaussian_vector, seeded};
    use crate::linalg::{Vector, thin_qr_q};

    const AR: Neighbours = Neighbours::AddRemove {
        beta: 2.0,
        alpha: 3.0,
    };
    const RO: Neighbours = Neighbours::ReplaceOne {
        beta: 2.0,
        alpha: 3.0,
    };
    const EN: Neighbours = Neighbours::Entry { u: 5.0 };

    /// A 3×2 matrix with orthonormal columns: rows (0.6, 0), (0.8, 0), (0, 1).
    fn hand_x() -> Matrix {
        Matrix::from_row_slice(3, 2, &[0.6, 0.0, 0.8, 0.0, 0.0, 1.0])
    }

    /// A 4×2 iterate whose rows all have norm 1/√2 and whose entries are all 1/2.
    fn flat_x() -> Matrix {
        Matrix::from_row_slice(4, 2, &[0.5, 0.5, 0.5, -0.5, 0.5, 0.5, 0.5, -0.5])
    }

    #[test]
    fn hand_worked_table() {
        let x = hand_x();
        assert_eq!(max_row_norm(&x), 1.0);
        assert_eq!(max_abs_entry(&x), 1.0);
        // row_norm: u·1, αβ·1 = 6, 2αβ·1 = 12.
        assert_eq!(power_sensitivity(SensitivityMode::RowNorm, &EN, &x), Some(5.0));
        assert_eq!(power_sensitivity(SensitivityMode::RowNorm, &AR, &x), Some(6.0));
        assert_eq!(power_sensitivity(SensitivityMode::RowNorm, &RO, &x), Some(12.0));
        // rank_one: β² = 4, √2·β² = 4√2, not applicable to matrices.
        assert_eq!(power_sensitivity(SensitivityMode::RankOne, &AR, &x), Some(4.0));
        let ro = power_sensitivity(SensitivityMode::RankOne, &RO, &x).expect("applies");
        assert!((ro - 4.0 * 2.0_f64.sqrt()).abs() < 1e-15);
        assert_eq!(power_sensitivity(SensitivityMode::RankOne, &EN, &x), None);
        // hardt_price with p = 2: bound·√2·1.
        let hp = power_sensitivity(SensitivityMode::HardtPrice, &AR, &x).expect("applies");
        assert!((hp - 6.0 * 2.0_f64.sqrt()).abs() < 1e-14);
        // auto = min: matrix min(5, 5√2) = 5; add_remove min(6, 6√2, 4) = 4; replace_one min(12, 12√2, 4√2).
        assert_eq!(power_sensitivity(SensitivityMode::Auto, &EN, &x), Some(5.0));
        assert_eq!(power_sensitivity(SensitivityMode::Auto, &AR, &x), Some(4.0));
        let auto = power_sensitivity(SensitivityMode::Auto, &RO, &x).expect("applies");
        assert!((auto - 4.0 * 2.0_f64.sqrt()).abs() < 1e-15);
    }

    #[test]
    fn flat_iterate_makes_row_norm_and_hardt_price_equal() {
        // Eq. 16 is tight when every entry has the same magnitude: √p·(1/2) = 1/√2 = row norm.
        let x = flat_x();
        let rn = power_sensitivity(SensitivityMode::RowNorm, &EN, &x).expect("applies");
        let hp = power_sensitivity(SensitivityMode::HardtPrice, &EN, &x).expect("applies");
        assert!((rn - 5.0 / 2.0_f64.sqrt()).abs() < 1e-14);
        assert!((rn - hp).abs() < 1e-14);
    }

    #[test]
    fn rank_one_only_applies_to_records() {
        assert!(SensitivityMode::RankOne.applies_to(&AR));
        assert!(SensitivityMode::RankOne.applies_to(&RO));
        assert!(!SensitivityMode::RankOne.applies_to(&EN));
        for mode in [
            SensitivityMode::Auto,
            SensitivityMode::RowNorm,
            SensitivityMode::HardtPrice,
        ] {
            assert!(mode.applies_to(&EN));
            assert_eq!(mode.fixed(&AR), None);
        }
        assert_eq!(SensitivityMode::RankOne.fixed(&AR), Some(4.0));
    }

    #[test]
    fn wire_names_round_trip() {
        for name in SensitivityMode::NAMES {
            let mode: SensitivityMode =
                serde_json::from_value(serde_json::Value::String(name.into())).expect("known name");
            assert_eq!(mode.as_str(), name);
        }
        assert!(serde_json::from_str::<SensitivityMode>("\"rowNorm\"").is_err());
    }

    #[test]
    fn bad_bounds_are_rejected() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let e = check_bounds(&Neighbours::Entry { u: bad }).expect_err("must be rejected");
            assert!(matches!(e, ConfigError::Invalid { ref field, .. } if field == "bounds.entry_bound"));
            let e = check_bounds(&Neighbours::AddRemove {
                beta: bad,
                alpha: 1.0,
            })
            .expect_err("must be rejected");
            assert!(matches!(e, ConfigError::Invalid { ref field, .. } if field == "bounds.row_norm_bound"));
            let e = check_bounds(&Neighbours::ReplaceOne {
                beta: 1.0,
                alpha: bad,
            })
            .expect_err("must be rejected");
            assert!(matches!(e, ConfigError::Invalid { ref field, .. } if field == "bounds.row_l1_bound"));
        }
        assert!(check_bounds(&AR).is_ok() && check_bounds(&RO).is_ok() && check_bounds(&EN).is_ok());
    }

    /// Scales `x` into the clipping region ‖x‖₂ ≤ β, ‖x‖₁ ≤ α, landing on its boundary.
    fn on_boundary(x: Vector, beta: f64, alpha: f64) -> Vector {
        let l1 = x.iter().map(|v| v.abs()).sum::<f64>();
        let scale = (beta / x.norm()).min(alpha / l1);
        x * scale
    }

    /// Every bound holds for actual neighbouring changes: ‖C·X‖_F ≤ Δ(X) for random orthonormal
    /// X and clipped records (one added, or one replaced) and for random eq.-12 matrix changes.
    #[test]
    fn bounds_hold_on_random_changes() {
        let mut rng = seeded(11);
        let (d, p) = (12, 4);
        let (beta, alpha) = (2.0, 5.0);
        let ar = Neighbours::AddRemove { beta, alpha };
        let ro = Neighbours::ReplaceOne { beta, alpha };
        let u = 1.5;
        let en = Neighbours::Entry { u };
        let modes = [
            SensitivityMode::Auto,
            SensitivityMode::RowNorm,
            SensitivityMode::RankOne,
            SensitivityMode::HardtPrice,
        ];
        for _ in 0..300 {
            let g = gaussian(&mut rng, d, p);
            let x = thin_qr_q(&g);
            let a = on_boundary(gaussian_vector(&mut rng, d), beta, alpha);
            let b = on_boundary(gaussian_vector(&mut rng, d), beta, alpha);
            let add = &a * a.transpose();
            let replace = &add - &b * b.transpose();
            // A symmetric change scaled so that sqrt(Σ_i ‖C_i:‖₁²) = u exactly (eq. 12).
            let mut c = gaussian(&mut rng, d, d);
            c = &c + c.transpose();
            let l1 = c
                .row_iter()
                .map(|r| r.iter().map(|v| v.abs()).sum::<f64>().powi(2))
                .sum::<f64>()
                .sqrt();
            c *= u / l1;
            for mode in modes {
                let tol = 1e-12;
                let delta = power_sensitivity(mode, &ar, &x).expect("applies");
                assert!((&add * &x).norm() <= delta * (1.0 + tol), "add_remove {mode:?}");
                let delta = power_sensitivity(mode, &ro, &x).expect("applies");
                assert!(
                    (&replace * &x).norm() <= delta * (1.0 + tol),
                    "replace_one {mode:?}"
                );
                if let Some(delta) = power_sensitivity(mode, &en, &x) {
                    assert!((&c * &x).norm() <= delta * (1.0 + tol), "matrix {mode:?}");
                }
            }
        }
    }

    /// The rank_one bound is attained: x = β·X_{:1} gives ‖xxᵀX‖_F = β², and orthogonal x, y on
    /// the first two columns give ‖(xxᵀ − yyᵀ)X‖_F = √2·β².
    #[test]
    fn rank_one_bound_is_tight() {
        let g = gaussian(&mut seeded(12), 10, 3);
        let x = thin_qr_q(&g);
        let beta = 1.7;
        let a: Vector = x.column(0) * beta;
        let b: Vector = x.column(1) * beta;
        let add = (&a * a.transpose() * &x).norm();
        let replace = ((&a * a.transpose() - &b * b.transpose()) * &x).norm();
        let ar = Neighbours::AddRemove { beta, alpha: 100.0 };
        let ro = Neighbours::ReplaceOne { beta, alpha: 100.0 };
        assert!((add - rank_one(&ar).expect("applies")).abs() < 1e-12);
        assert!((replace - rank_one(&ro).expect("applies")).abs() < 1e-12);
    }
}
