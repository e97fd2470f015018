use super::*;
use crate::linalg::testing::{assert_product_close, gaussian, naive_product};

/// (m, k, n) shapes: scalars, vectors, square, tall, wide, one big enough to run in parallel.
const SHAPES: [(usize, usize, usize); 9] = [
    (1, 1, 1),
    (1, 7, 1),
    (7, 1, 5),
    (5, 5, 5),
    (40, 3, 2),
    (3, 40, 50),
    (33, 65, 17),
    (150, 120, 130),
    (1, 300, 200),
];

#[test]
fn matmul_matches_the_triple_loop() {
    for (s, &(m, k, n)) in SHAPES.iter().enumerate() {
        let (a, b) = (gaussian(m, k, 10 + s as u64), gaussian(k, n, 20 + s as u64));
        let (want, bound) = naive_product(&a, &b);
        assert_product_close(&matmul(&a, &b), &want, &bound, k);
    }
}

#[test]
fn matmul_tn_matches_the_triple_loop() {
    for (s, &(m, k, n)) in SHAPES.iter().enumerate() {
        let (a, b) = (gaussian(k, m, 30 + s as u64), gaussian(k, n, 40 + s as u64));
        let (want, bound) = naive_product(&a.transpose(), &b);
        assert_product_close(&matmul_tn(&a, &b), &want, &bound, k);
    }
}

#[test]
fn empty_inner_dimension_gives_zeros() {
    let (a, b) = (Matrix::zeros(3, 0), Matrix::zeros(0, 4));
    assert_eq!(matmul(&a, &b), Matrix::zeros(3, 4));
    assert_eq!(matmul_tn(&b, &Matrix::zeros(0, 2)), Matrix::zeros(4, 2));
}

#[test]
fn fix_signs_makes_the_largest_entry_positive_first_on_ties() {
    let mut q = Matrix::from_column_slice(
        3,
        4,
        &[
            0.1, -0.9, 0.3, // largest negative -> flipped
            0.5, 0.2, -0.1, // largest positive -> kept
            -0.5, 0.5, 0.0, // tie: first (negative) wins -> flipped
            0.0, 0.0, 0.0, // zero column -> untouched
        ],
    );
    fix_signs(&mut q);
    let want = Matrix::from_column_slice(
        3,
        4,
        &[-0.1, 0.9, -0.3, 0.5, 0.2, -0.1, 0.5, -0.5, 0.0, 0.0, 0.0, 0.0],
    );
    assert_eq!(q, want);
}

#[test]
fn fix_signs_is_idempotent_and_removes_sign_ambiguity() {
    let mut q = gaussian(30, 6, 7);
    let mut flipped = q.clone();
    flipped.column_mut(2).neg_mut();
    flipped.column_mut(5).neg_mut();
    fix_signs(&mut q);
    fix_signs(&mut flipped);
    assert_eq!(q, flipped);
    let again = {
        let mut r = q.clone();
        fix_signs(&mut r);
        r
    };
    assert_eq!(again, q);
}
