use super::*;
use crate::linalg::testing::{gaussian, max_abs, max_diff, orthonormality_reference};
use crate::linalg::threads::DECOMPOSITION_MIN_WORK;

/// Checks Q orthonormal, Y = Q·(QᵀY) and QᵀY upper triangular, with tolerances scaled by m.
fn check(y: &Matrix) {
    let (m, p) = y.shape();
    let q = thin_qr_q(y);
    let r = m.min(p);
    assert_eq!(q.shape(), (m, r));
    let tol = 20.0 * m as f64 * f64::EPSILON;
    assert!(orthonormality_reference(&q) <= tol, "{m}×{p}: QᵀQ ≠ I");
    let coeffs = q.transpose() * y;
    let scale = max_abs(y).max(f64::MIN_POSITIVE);
    assert!(
        max_diff(&(&q * &coeffs), y) <= tol * scale * (p as f64).sqrt(),
        "{m}×{p}: Y ≠ QR"
    );
    for j in 0..p {
        for i in (j + 1)..r {
            assert!(
                coeffs[(i, j)].abs() <= tol * scale,
                "{m}×{p}: R[{i},{j}] not zero"
            );
        }
    }
}

#[test]
fn thin_qr_is_orthonormal_spans_y_and_keeps_column_order() {
    let shapes = [
        (1, 1),
        (5, 1),
        (1, 5),
        (6, 6),
        (40, 7),
        (7, 40),
        (1000, 20),
        (300, 300),
    ];
    for (s, &(m, p)) in shapes.iter().enumerate() {
        check(&gaussian(m, p, 100 + s as u64));
    }
}

#[test]
fn large_enough_to_run_in_parallel() {
    let p = 64;
    let m = DECOMPOSITION_MIN_WORK / (p * p) + 1;
    assert!(work(m, p, p) >= DECOMPOSITION_MIN_WORK);
    check(&gaussian(m, p, 150));
}

#[test]
fn rank_deficient_input_still_gives_orthonormal_q() {
    let mut y = gaussian(50, 6, 3);
    let dup = y.column(1).into_owned();
    y.set_column(4, &dup);
    y.column_mut(5).fill(0.0);
    check(&y);
}

#[test]
fn empty_shapes_give_empty_q() {
    assert_eq!(thin_qr_q(&Matrix::zeros(4, 0)).shape(), (4, 0));
    assert_eq!(thin_qr_q(&Matrix::zeros(0, 3)).shape(), (0, 0));
}
