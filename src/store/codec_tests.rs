use super::*;

#[test]
fn timestamps_round_trip_and_sort_as_text() {
    let a = now();
    let b = a + chrono::Duration::microseconds(1);
    assert_eq!(parse_ts(&ts(a)).ok(), Some(a));
    assert!(ts(a) < ts(b));
    assert_eq!(ts(a).len(), ts(b).len());
}

#[test]
fn seeds_round_trip_across_the_sign_bit() {
    for s in [0u64, 1, i64::MAX as u64, i64::MAX as u64 + 1, u64::MAX] {
        assert_eq!(seed_from_db(seed_to_db(Some(s))), Some(s));
    }
}

#[test]
fn basis_bytes_round_trip_and_reject_ragged_blobs() {
    let basis = vec![1.0, -0.5, f64::MIN_POSITIVE, 3.25e300];
    assert_eq!(basis_from_bytes(&basis_to_bytes(&basis)).ok(), Some(basis));
    assert!(basis_from_bytes(&[0u8; 9]).is_err());
}
