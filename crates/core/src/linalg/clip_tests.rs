//! Tests of the shared clipping: the margin keeps clipped rows inside the ball in computed and
//! in exact norm, where the naive x·(c/‖x‖) does not.

use super::*;
use crate::linalg::testing::{
    columns_beyond, exact_l2_excess, exceeds_l2_exactly, naive_scaled_columns, rows_beyond,
};

#[test]
fn tiny_pow2_is_two_to_the_minus_600() {
    assert_eq!(TINY_POW2, 2f64.powi(-600));
}

#[test]
fn the_exact_check_sees_one_ulp() {
    // (3, 4)·s has exact norm 5s; nudging one entry by an ulp is seen either way.
    assert!(!exceeds_l2_exactly(&[3.0, 4.0], 5.0));
    assert_eq!(exact_l2_excess(&[3.0, 4.0], 5.0), 0.0);
    assert!(exceeds_l2_exactly(&[3.0, 4.0_f64.next_up()], 5.0));
    assert!(!exceeds_l2_exactly(&[3.0, 4.0_f64.next_down()], 5.0));
    assert!(exceeds_l2_exactly(&[3.0, 4.0], 5.0_f64.next_down()));
}

/// The hazard is real: for random rows the naive scaling leaves many just outside the ball
/// (this is what `clip_rows` and `recentre` did before they used [`clip_l2`]), while
/// [`clip_l2`] leaves none, in computed (both norms) or exact norm.
#[test]
fn clipped_rows_stay_inside_where_naive_scaling_does_not() {
    let mut naive_failures = 0;
    for (i, d) in [1_usize, 2, 3, 5, 8, 17, 50, 200].into_iter().enumerate() {
        for (j, c) in [1.0, 0.3, 2.0_f64.sqrt(), 7.77, 1e5].into_iter().enumerate() {
            let rows = rows_beyond(d, 400, c, (100 * i + j) as u64);
            naive_failures += columns_beyond(&naive_scaled_columns(&rows, c), c);
            let mut clipped = rows.clone();
            clip_columns_l2(&mut clipped, c);
            assert_eq!(columns_beyond(&clipped, c), 0, "d = {d}, c = {c}");
            // …and only just inside: the margin costs a relative (d + 8)·ε.
            for col in clipped.column_iter() {
                assert!(col.norm() >= c * (1.0 - 2.0 * margin(d)), "d = {d}, c = {c}");
            }
        }
    }
    assert!(
        naive_failures > 100,
        "naive scaling broke only {naive_failures} of 16 000 rows"
    );
}

#[test]
fn rows_within_the_target_are_untouched() {
    let mut row = [0.3, -0.4, 0.0];
    clip_l2(&mut row, 1.0);
    clip_l1(&mut row, 0.8);
    assert_eq!(row, [0.3, -0.4, 0.0]);
}

#[test]
fn l1_clip_keeps_the_direction_and_the_bound() {
    let mut row = [0.6, 0.8];
    clip_l1(&mut row, 1.0);
    assert!(l1_norm(&row) <= 1.0);
    assert!((row[0] - 0.6 / 1.4).abs() < 1e-14, "{row:?}");
    assert!((row[1] / row[0] - 4.0 / 3.0).abs() < 1e-14, "{row:?}");
}

#[test]
fn rows_and_columns_of_a_matrix_are_clipped_alike() {
    let m = rows_beyond(6, 50, 2.0, 7);
    let mut by_columns = m.clone();
    clip_columns(&mut by_columns, 2.0, None);
    let mut by_rows = m.transpose();
    clip_rows_l2(&mut by_rows, 2.0);
    assert_eq!(by_columns, by_rows.transpose());
    let mut both = m.clone();
    clip_columns(&mut both, 2.0, Some(3.0));
    for col in both.column_iter() {
        let x: Vec<f64> = col.iter().copied().collect();
        assert!(l2_norm(&x) <= 2.0 && l1_norm(&x) <= 3.0);
    }
    // No rows or no columns: nothing to do, no panic.
    clip_columns_l2(&mut Matrix::zeros(0, 3), 1.0);
    clip_rows_l2(&mut Matrix::zeros(3, 0), 1.0);
}

#[test]
fn extreme_magnitudes_clip_to_the_bound_not_to_zero() {
    for scale in [1e-300, 1e-160, 1e160, 1e300, f64::MAX] {
        let mut row = [scale, -scale, scale / 2.0];
        let before = l2_norm(&row);
        clip_l2(&mut row, 2.0);
        let n = l2_norm(&row);
        assert!(
            n <= 2.0 && n > 2.0 * (1.0 - 1e-12) || before <= 2.0,
            "{scale}: {row:?}"
        );
        assert!(row[0] > 0.0 && row[1] < 0.0, "signs kept at {scale}: {row:?}");
    }
}
