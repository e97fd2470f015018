use super::*;
use crate::algorithms::testing::seeded;
use crate::linalg::clip::clip_columns;
use rand::Rng;

const D: usize = 4;

fn replace_one() -> Neighbours {
    Neighbours::ReplaceOne {
        beta: 2.0,
        alpha: 4.0,
    }
}

fn add_remove() -> Neighbours {
    Neighbours::AddRemove {
        beta: 2.0,
        alpha: 4.0,
    }
}

/// `n` random rows of norm ≤ β = 2 (a record per column).
fn rows(n: usize, seed: u64) -> Matrix {
    let mut rng = seeded(seed);
    let mut xt = Matrix::from_fn(D, n, |_, _| rng.random_range(-2.0..2.0));
    clip_columns(&mut xt, 2.0, None);
    xt
}

fn distance(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum::<f64>().sqrt()
}

#[test]
fn the_statistic_moves_by_at_most_its_sensitivity_and_nearly_by_it() {
    // replace_one: one row replaced; the largest move over random pairs approaches 2β.
    let delta = CapeCenter::sensitivity(&replace_one()).unwrap();
    assert_eq!(delta, 4.0);
    let mut largest: f64 = 0.0;
    for seed in 0..300 {
        let xt = rows(5, seed);
        let mut other = xt.clone();
        let replacement = rows(1, 1000 + seed);
        other.set_column(seed as usize % 5, &replacement.column(0));
        let a = CapeCenter::statistic(&xt, D, &replace_one()).unwrap();
        let b = CapeCenter::statistic(&other, D, &replace_one()).unwrap();
        let moved = distance(&a, &b);
        assert!(moved <= delta * (1.0 + 1e-12), "{moved}");
        largest = largest.max(moved);
    }
    assert!(largest > 0.8 * delta, "{largest}");
    // Opposite rows of norm β move it by exactly 2β.
    let x = Matrix::from_column_slice(D, 1, &[2.0, 0.0, 0.0, 0.0]);
    let y = Matrix::from_column_slice(D, 1, &[-2.0, 0.0, 0.0, 0.0]);
    let moved = distance(
        &CapeCenter::statistic(&x, D, &replace_one()).unwrap(),
        &CapeCenter::statistic(&y, D, &replace_one()).unwrap(),
    );
    assert_eq!(moved, delta);
    // add_remove: one row added moves (S, β·n) by (x, β), at most √2·β.
    let delta = CapeCenter::sensitivity(&add_remove()).unwrap();
    assert!((delta - 2.0 * 2f64.sqrt()).abs() < 1e-12);
    for seed in 0..100 {
        let xt = rows(6, seed);
        let fewer = xt.columns(0, 5).into_owned();
        let a = CapeCenter::statistic(&xt, D, &add_remove()).unwrap();
        let b = CapeCenter::statistic(&fewer, D, &add_remove()).unwrap();
        assert_eq!((a.len(), b.len()), (D + 1, D + 1));
        assert!(distance(&a, &b) <= delta * (1.0 + 1e-12));
    }
    let edge = Matrix::from_column_slice(D, 1, &[2.0, 0.0, 0.0, 0.0]);
    let none = Matrix::zeros(D, 0);
    let moved = distance(
        &CapeCenter::statistic(&edge, D, &add_remove()).unwrap(),
        &CapeCenter::statistic(&none, D, &add_remove()).unwrap(),
    );
    assert!((moved - delta).abs() < 1e-12);
}

#[test]
fn the_statistic_refuses_rows_outside_the_bound() {
    let outside = Matrix::from_element(D, 2, 1.5);
    assert!(CapeCenter::statistic(&outside, D, &replace_one()).is_err());
    assert!(CapeCenter::statistic(&rows(3, 1), D + 1, &replace_one()).is_err());
    let entry = Neighbours::Entry { u: 1.0 };
    assert!(CapeCenter::statistic(&rows(3, 1), D, &entry).is_err());
    assert!(CapeCenter::sensitivity(&entry).is_err());
}

#[test]
fn the_centre_is_the_sum_over_the_survivors_n_or_the_noisy_count() {
    let sum = [6.0, -3.0, 0.0, 30.0];
    assert_eq!(
        CapeCenter::decode(&sum, D, &replace_one(), Some(30)).unwrap(),
        vec![0.2, -0.1, 0.0, 1.0]
    );
    assert!(CapeCenter::decode(&sum, D, &replace_one(), None).is_err());
    assert!(CapeCenter::decode(&sum, D, &replace_one(), Some(0)).is_err());
    assert!(CapeCenter::decode(&sum, D, &add_remove(), None).is_err());
    // add_remove: ñ = (β·n)~/β, at least 1.
    let with_count = [6.0, -3.0, 0.0, 30.0, 60.0];
    assert_eq!(
        CapeCenter::decode(&with_count, D, &add_remove(), None).unwrap(),
        vec![0.2, -0.1, 0.0, 1.0]
    );
    let negative = [6.0, -3.0, 0.0, 30.0, -5.0];
    assert_eq!(
        CapeCenter::decode(&negative, D, &add_remove(), None).unwrap(),
        vec![6.0, -3.0, 0.0, 30.0]
    );
    let overflow = [f64::MAX, f64::MAX, 0.0, 0.0, 1.0];
    assert!(CapeCenter::decode(&overflow, D, &add_remove(), None).is_ok());
    let infinite = [f64::INFINITY, 0.0, 0.0, 0.0];
    assert!(CapeCenter::decode(&infinite, D, &replace_one(), Some(3)).is_err());
}

#[test]
fn a_stored_centre_is_checked() {
    assert_eq!(CapeCenter::Private { share: 0.1 }.stages(), 1);
    assert!(CapeCenter::Private { share: 0.1 }.check(D).is_ok());
    for share in [0.0, 1.0, -0.5, f64::NAN] {
        assert!(CapeCenter::Private { share }.check(D).is_err(), "{share}");
    }
    let given = |vector: Vec<f64>| CapeCenter::Given { vector };
    assert_eq!(given(vec![0.0; D]).stages(), 0);
    assert!(given(vec![0.0; D]).check(D).is_ok());
    assert!(given(vec![0.0; D + 1]).check(D).is_err());
    assert!(given(vec![f64::NAN; D]).check(D).is_err());
}
