use super::*;

#[test]
fn a_small_csv_is_loaded_transposed_and_clipped() {
    let csv = "a,b\n3,4\n0.3,0.4\n-6,8\n";
    let records = read_records(csv.as_bytes(), Format::Csv, 1.0, 2.0, 10, None).expect("loads");
    assert_eq!((records.n, records.d), (3, 2));
    assert_eq!(records.xt.shape(), (2, 3));
    // Row 1 (‖x‖₂ = 5) is scaled to norm 1, row 2 kept, row 3 (norm 10) scaled to norm 1.
    let expected = [[0.6, 0.8], [0.3, 0.4], [-0.6, 0.8]];
    for (j, row) in expected.iter().enumerate() {
        for (i, want) in row.iter().enumerate() {
            assert!((records.xt[(i, j)] - want).abs() < 1e-12, "({i}, {j})");
        }
    }
}

#[test]
fn the_l1_bound_clips_too() {
    let records = read_records("1,1\n".as_bytes(), Format::Csv, 10.0, 1.0, 10, None).expect("loads");
    assert!((records.xt[(0, 0)] - 0.5).abs() < 1e-12);
    assert!((records.xt[(1, 0)] - 0.5).abs() < 1e-12);
}

#[test]
fn more_records_than_the_study_allows_are_refused() {
    let csv = "1,0\n0,1\n1,1\n";
    let err = read_records(csv.as_bytes(), Format::Csv, 1.0, 2.0, 2, None)
        .err()
        .expect("refused");
    assert!(err.contains("more than 2 records"), "{err}");
    assert!(read_records(csv.as_bytes(), Format::Csv, 1.0, 2.0, 3, None).is_ok());
}

#[test]
fn an_empty_file_is_zero_records_only_when_asked() {
    assert!(read_records("".as_bytes(), Format::Csv, 1.0, 2.0, 10, None).is_err());
    let records = read_records("".as_bytes(), Format::Csv, 1.0, 2.0, 10, Some(3)).expect("empty");
    assert_eq!((records.n, records.d, records.xt.shape()), (0, 3, (3, 0)));
}

#[test]
fn bad_values_are_reported_without_echoing_them() {
    let err = read_records("1,2\n3,nan\n".as_bytes(), Format::Csv, 1.0, 2.0, 10, None)
        .err()
        .expect("refused");
    assert!(err.contains("row 2"), "{err}");
    assert!(read_records("1,2\n3\n".as_bytes(), Format::Csv, 1.0, 2.0, 10, None).is_err());
}

#[test]
fn json_and_the_sink_across_odd_writes() {
    let records = read_records(
        "[[0.5, 0], [0, 0.5]]".as_bytes(),
        Format::Json,
        1.0,
        2.0,
        10,
        None,
    )
    .expect("json");
    assert_eq!(records.xt.as_slice(), &[0.5, 0.0, 0.0, 0.5]);
    let mut sink = F64Sink::default();
    let bytes: Vec<u8> = [1.5f64, -2.0, 3.25]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    for chunk in bytes.chunks(3) {
        sink.write_all(chunk).expect("write");
    }
    assert_eq!(sink.values, vec![1.5, -2.0, 3.25]);
    assert_eq!(sink.filled, 0);
}
