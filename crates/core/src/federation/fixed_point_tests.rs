use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use super::*;

#[test]
fn round_trip_is_within_half_a_step() {
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    for f in [0, 1, 16, 40, 52] {
        let fp = FixedPoint::new(f).expect("valid");
        let bound = 100.0_f64.min(pow2(61 - f as i32));
        for _ in 0..1000 {
            let v = rng.random_range(-bound..=bound);
            let back = fp.decode(fp.encode(v, bound).expect("in bound"));
            assert!((back - v).abs() <= pow2(-(f as i32) - 1), "f = {f}, v = {v}");
        }
    }
}

#[test]
fn negative_numbers_are_twos_complement() {
    let fp = FixedPoint::new(4).expect("valid");
    assert_eq!(fp.encode(-1.0, 2.0).expect("in bound"), (-16_i64) as u64);
    assert_eq!(fp.encode(-0.03, 2.0).expect("in bound"), 0, "rounds to zero");
    assert_eq!(fp.decode(u64::MAX), -1.0 / 16.0);
    assert_eq!(fp.decode(fp.encode(-1.5, 2.0).expect("in bound")), -1.5);
}

#[test]
fn wrapping_sum_of_encodings_decodes_to_the_sum() {
    let fp = FixedPoint::new(30).expect("valid");
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    let values: Vec<f64> = (0..10_000).map(|_| rng.random_range(-1000.0..1000.0)).collect();
    assert!(fits(1000.0 * 10_000.0, 30));
    let words = fp.encode_all(&values, 1000.0).expect("in bound");
    let sum = words.iter().fold(0_u64, |acc, w| acc.wrapping_add(*w));
    let exact_words: i128 = words.iter().map(|&w| i128::from(w as i64)).sum();
    assert_eq!(i128::from(sum as i64), exact_words, "no wrap in the total");
    let exact: f64 = values.iter().sum();
    let tolerance = 10_000.0 * pow2(-31) + 1e-6;
    assert!((fp.decode(sum) - exact).abs() <= tolerance);
    assert_eq!(fp.decode_all(&words).len(), values.len());
}

#[test]
fn values_out_of_bound_are_refused_without_quoting_them() {
    let fp = FixedPoint::new(10).expect("valid");
    let err = fp.encode(3.25, 3.0).expect_err("out of bound");
    assert_eq!(err, FixedPointError::OutOfBound { bound: 3.0 });
    assert!(!err.to_string().contains("3.25"));
    assert_eq!(fp.encode(f64::NAN, 3.0), Err(FixedPointError::NonFinite));
    assert_eq!(fp.encode(f64::INFINITY, 3.0), Err(FixedPointError::NonFinite));
    let err = fp.encode_all(&[1.0, 2.0, -7.0], 3.0).expect_err("entry 2");
    assert!(matches!(err, FixedPointError::Entry { index: 2, .. }), "{err}");
}

#[test]
fn a_bound_that_would_wrap_is_refused() {
    let fp = FixedPoint::new(40).expect("valid");
    let too_big = pow2(22);
    assert!(!fits(too_big, 40));
    assert!(matches!(
        fp.encode(1.0, too_big),
        Err(FixedPointError::Bound { .. })
    ));
    assert!(fits(too_big * (1.0 - f64::EPSILON), 40));
    assert!(fp.encode(1.0, f64::NAN).is_err());
    assert!(fp.encode(1.0, -1.0).is_err());
    assert_eq!(FixedPoint::new(53), Err(FixedPointError::FractionBits(53)));
}

#[test]
fn fits_and_max_fraction_bits() {
    assert!(fits(0.0, u32::MAX));
    assert!(!fits(1.0, u32::MAX));
    assert!(!fits(f64::INFINITY, 0));
    assert!(!fits(-1.0, 0));
    assert!(fits(pow2(61), 0) && !fits(pow2(62), 0));
    assert_eq!(max_fraction_bits(1.0, 100), Some(52));
    assert_eq!(max_fraction_bits(1.0, 40), Some(40));
    assert_eq!(max_fraction_bits(pow2(20), 100), Some(41));
    assert_eq!(max_fraction_bits(pow2(62), 40), None);
    assert_eq!(max_fraction_bits(0.0, u32::MAX), Some(52));
}
