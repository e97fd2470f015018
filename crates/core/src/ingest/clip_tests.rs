use super::*;
use crate::linalg::clip::{l1_norm, l2_norm};
use proptest::prelude::*;

fn clip(row: &[f64], beta: f64, alpha: Option<f64>) -> Vec<f64> {
    let mut out = row.to_vec();
    RowClip::new(beta, alpha).expect("valid bounds").apply(&mut out);
    out
}

#[test]
fn rows_within_the_bound_are_untouched() {
    let row = [0.3, -0.4, 0.0];
    assert_eq!(clip(&row, 1.0, None), row);
    assert_eq!(clip(&row, 1.0, Some(0.8)), row);
}

#[test]
fn long_rows_are_scaled_onto_the_sphere() {
    let out = clip(&[3.0, 4.0], 1.0, None);
    assert!(l2_norm(&out) <= 1.0);
    assert!(
        (out[0] - 0.6).abs() < 1e-14 && (out[1] - 0.8).abs() < 1e-14,
        "{out:?}"
    );
}

#[test]
fn l1_clip_follows_the_l2_clip() {
    // ‖(3,4)‖₂ = 5 → (0.6, 0.8), ‖·‖₁ = 1.4 > 1 → scaled by 1/1.4.
    let out = clip(&[3.0, 4.0], 1.0, Some(1.0));
    assert!(l1_norm(&out) <= 1.0 && l2_norm(&out) <= 1.0);
    assert!((out[0] - 0.6 / 1.4).abs() < 1e-14, "{out:?}");
    assert!(
        (out[1] / out[0] - 4.0 / 3.0).abs() < 1e-14,
        "direction kept: {out:?}"
    );
}

#[test]
fn extreme_magnitudes_clip_to_the_bound_not_to_zero() {
    for scale in [1e-300, 1e-160, 1e160, 1e300, f64::MAX] {
        let row = [scale, -scale, scale / 2.0];
        let out = clip(&row, 2.0, None);
        let n = l2_norm(&out);
        assert!(
            n <= 2.0 && n > 2.0 * (1.0 - 1e-12) || l2_norm(&row) <= 2.0,
            "{scale}: {out:?}"
        );
        assert!(out[0] > 0.0 && out[1] < 0.0, "signs kept at {scale}: {out:?}");
    }
}

#[test]
fn bad_bounds_are_rejected() {
    for beta in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(matches!(
            RowClip::new(beta, None),
            Err(IngestError::InvalidBounds(_))
        ));
        assert!(matches!(
            RowClip::new(1.0, Some(beta)),
            Err(IngestError::InvalidBounds(_))
        ));
    }
}

proptest! {
    #[test]
    fn clipped_rows_respect_both_bounds(
        row in prop::collection::vec(-1e6f64..1e6, 1..200),
        exp in -20i32..20,
        beta in 1e-3f64..1e3,
        alpha_factor in 0.1f64..3.0,
    ) {
        let row: Vec<f64> = row.iter().map(|v| v * 10f64.powi(exp)).collect();
        let alpha = beta * alpha_factor;
        let out = clip(&row, beta, Some(alpha));
        prop_assert!(l2_norm(&out) <= beta);
        prop_assert!(l1_norm(&out) <= alpha);
        // The same direction: out is a non-negative multiple of row.
        let s = out.iter().zip(&row).filter(|(_, r)| **r != 0.0).map(|(o, r)| o / r).next();
        if let Some(s) = s {
            prop_assert!((0.0..=1.0).contains(&s));
            for (o, r) in out.iter().zip(&row) {
                prop_assert!((o - s * r).abs() <= 4.0 * f64::EPSILON * (s * r).abs() + f64::MIN_POSITIVE);
            }
        }
    }
}
