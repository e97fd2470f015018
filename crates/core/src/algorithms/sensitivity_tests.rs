use super::*;
use crate::algorithms::testing::{ar, gaussian, gaussian_vector, ro, seeded};
use crate::linalg::{Vector, thin_qr_q};

const AR: Neighbours = ar(2.0, 3.0);
const RO: Neighbours = ro(2.0, 3.0);
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
        let e = check_bounds(&ar(bad, 1.0)).expect_err("must be rejected");
        assert!(matches!(e, ConfigError::Invalid { ref field, .. } if field == "bounds.row_norm_bound"));
        let e = check_bounds(&ro(1.0, bad)).expect_err("must be rejected");
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
