//! CSV bodies: header detection, line numbers, malformed and ragged rows, non-finite values.

use super::*;

#[test]
fn csv_without_header() {
    let (got, v) = csv("1,2,3\n4,5,6\n").expect("valid");
    assert_eq!(got, shape(2, 3));
    assert_eq!(v, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
}

#[test]
fn csv_with_header_bom_crlf_quotes_whitespace_and_blank_lines() {
    let text = "\u{feff}a, b ,\"c\"\r\n\r\n 1 , 2,3\r\n   \r\n\n\"4\",5e0,\t-6.5";
    let (got, v) = csv(text).expect("valid");
    assert_eq!(got, shape(2, 3));
    assert_eq!(v, [1.0, 2.0, 3.0, 4.0, 5.0, -6.5]);
}

#[test]
fn csv_header_with_numeric_looking_names_mixed_in() {
    let (got, _) = csv("x1,2,z\n1,2,3\n").expect("valid");
    assert_eq!(got, shape(1, 3));
}

#[test]
fn csv_with_a_pandas_index_column_is_refused() {
    // `df.to_csv(path)` with the default index=True, and such a file read and written again.
    for text in [
        ",a,b\n0,1.5,2\n1,3,4\n",
        "\u{feff}\"\",a\n0,1\n",
        "Unnamed: 0,a,b\n0,1,2\n",
        " ,x\n0,1\n",
    ] {
        match csv(text) {
            Err(IngestError::IndexColumn { line: 1 }) => {}
            other => panic!("{text:?}: expected IndexColumn, got {other:?}"),
        }
    }
    let message = IngestError::IndexColumn { line: 1 }.to_string();
    assert!(message.contains("index=False"), "{message}");
    // A named first column and an empty first field of a data row are not index headers.
    assert_eq!(csv("id,a\n0,1\n").expect("valid").0, shape(1, 2));
    assert!(matches!(
        csv("1,2\n,3\n"),
        Err(IngestError::Malformed { line: 2, .. })
    ));
}

#[test]
fn csv_without_rows_is_empty() {
    for text in ["", "\n\n", "  \n", "a,b,c\n", "a,b,c\n\n"] {
        assert!(matches!(csv(text), Err(IngestError::Empty)), "{text:?}");
    }
}

#[test]
fn csv_header_after_the_first_record_is_malformed_without_echo() {
    let err = csv("1,2\n3,s3cret\n").expect_err("not a number");
    match &err {
        IngestError::Malformed { line, message } => {
            assert_eq!(*line, 2);
            assert!(message.contains("row 2, column 2"), "{message}");
        }
        other => panic!("expected Malformed, got {other:?}"),
    }
    assert_hides(&err, "s3cret");
}

#[test]
fn csv_line_numbers_count_blank_lines_and_header() {
    let line = |text: &str| match csv(text) {
        Err(IngestError::Malformed { line, .. }) => line,
        other => panic!("expected Malformed, got {other:?}"),
    };
    assert_eq!(line("a,b\n1,2\n\n\n3,x\n"), 5);
    assert_eq!(line("1,2\r\n3,x\r\n"), 2);
    assert_eq!(line("1,2\n3,x"), 2);
    assert_eq!(line("\"1\n\",2\n3,x\n"), 3);
}

#[test]
fn csv_empty_field_is_malformed() {
    assert_malformed(csv("1,2\n3,\n"), "is empty");
}

#[test]
fn csv_ragged_rows_name_the_data_row() {
    assert_ragged(csv("1,2,3\n4,5\n"), (2, 3, 2));
    assert_ragged(csv("a,b,c\n1,2,3\n4,5\n"), (2, 3, 2));
    assert_ragged(csv("a,b\n1,2,3\n"), (1, 2, 3));
}

#[test]
fn csv_non_finite_values_are_refused_with_position() {
    for bad in ["nan", "NaN", "inf", "-inf", "Infinity", "1e400"] {
        let err = csv(&format!("1,2\n3,{bad}\n")).expect_err(bad);
        assert!(
            matches!(err, IngestError::NonFinite { row: 2, col: 2 }),
            "{bad}: {err:?}"
        );
    }
    assert!(matches!(
        csv("h1,h2\nnan,1\n"),
        Err(IngestError::NonFinite { row: 1, col: 1 })
    ));
}

#[test]
fn csv_too_many_columns_counts_the_whole_record() {
    let limits = Limits { max_d: 3, ..LIMITS };
    let err = run_with(b"1,2,3,4\n", Format::Csv, RAW, limits).expect_err("too wide");
    assert!(
        matches!(err, IngestError::TooManyColumns { d: 4, max: 3 }),
        "{err:?}"
    );
    let wide = vec!["1"; 1000].join(",");
    let err = run_with(wide.as_bytes(), Format::Csv, RAW, limits).expect_err("too wide");
    assert!(
        matches!(err, IngestError::TooManyColumns { d: 1000, max: 3 }),
        "{err:?}"
    );
    let err = run_with(format!("1,2\n{wide}\n").as_bytes(), Format::Csv, RAW, limits).expect_err("ragged");
    assert!(
        matches!(
            err,
            IngestError::Ragged {
                row: 2,
                expected: 2,
                got: 1000
            }
        ),
        "{err:?}"
    );
}

#[test]
fn csv_an_endless_field_is_malformed_not_buffered() {
    let text = format!("1,{}\n", "9".repeat(200_000));
    let err = csv(&text).expect_err("field too long");
    assert!(matches!(err, IngestError::Malformed { line: 1, .. }), "{err:?}");
}
