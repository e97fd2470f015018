//! Records clipped per row to the declared bounds; invalid bounds are a server error.

use super::*;

#[test]
fn records_are_clipped_per_row() {
    let text = "3,4\n0.3,0.4\n-30,40\n0,0\n";
    let bounds = l2_records(1.0);
    let (_, v) = run_with(text.as_bytes(), Format::Csv, bounds, LIMITS).expect("valid");
    for row in v.chunks(2) {
        assert!(row[0].hypot(row[1]) <= 1.0, "{row:?}");
    }
    assert_eq!(&v[2..4], &[0.3, 0.4], "a row within the bound is untouched");
    assert_eq!(&v[6..8], &[0.0, 0.0]);
    assert!((v[0] - 0.6).abs() < 1e-12 && (v[4] + 0.6).abs() < 1e-12, "{v:?}");

    let with_l1 = Shape::Records {
        beta: 1.0,
        alpha: Some(1.0),
    };
    let (_, v) = run_with(text.as_bytes(), Format::Csv, with_l1, LIMITS).expect("valid");
    for row in v.chunks(2) {
        assert!(
            row[0].abs() + row[1].abs() <= 1.0 && row[0].hypot(row[1]) <= 1.0,
            "{row:?}"
        );
    }
    assert!(
        (v[0] - 0.6 / 1.4).abs() < 1e-12,
        "L1 clip of (0.6, 0.8) to 1: {v:?}"
    );
    assert_eq!(&v[2..4], &[0.3, 0.4], "within both bounds: untouched");
}

#[test]
fn invalid_bounds_are_a_server_error() {
    let bad = l2_records(f64::NAN);
    let err = run_with(b"1\n", Format::Csv, bad, LIMITS).expect_err("NaN bound");
    assert!(matches!(err, IngestError::InvalidBounds(_)) && !err.is_client_error());
}
