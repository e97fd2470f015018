//! JSON bodies (an array of rows): types, syntax errors, truncation, ragged and wide rows.

use super::*;

#[test]
fn json_rows_of_numbers() {
    let text = " [ [1, 2.5],\n [-3, 4e2], [18446744073709551615, -9223372036854775808] ] \n";
    let unclipped = l2_records(1e30);
    let (got, v) = run_with(text.as_bytes(), Format::Json, unclipped, LIMITS).expect("valid");
    assert_eq!(got, shape(3, 2));
    assert_eq!(
        v,
        [
            1.0,
            2.5,
            -3.0,
            400.0,
            18446744073709551615.0,
            -9223372036854775808.0
        ]
    );
}

#[test]
fn json_without_rows_or_columns_is_empty() {
    for text in ["[]", "[[]]", "[[],[]]", " [ ] "] {
        assert!(matches!(json(text), Err(IngestError::Empty)), "{text}");
    }
}

#[test]
fn json_wrong_types_are_malformed_with_position_and_without_echo() {
    let cases = [
        ("{\"s3cret\": 1}", "found an object"),
        ("\"s3cret\"", "found a string"),
        ("12345", "found a number"),
        ("[1, 2]", "row 1: expected a row"),
        (
            "[[1, \"s3cret\"]]",
            "row 1, column 2: expected a number, found a string",
        ),
        (
            "[[1, 2], [3, null]]",
            "row 2, column 2: expected a number, found null",
        ),
        ("[[true]]", "found a boolean"),
        ("[[[1]]]", "expected a number, found an array"),
        (
            "[[1, 2], {\"a\": 1}]",
            "row 2: expected a row (an array of numbers), found an object",
        ),
    ];
    for (text, expected) in cases {
        let err = json(text).expect_err(text);
        match &err {
            IngestError::Malformed { message, .. } => {
                assert!(message.contains(expected), "{text}: {message}")
            }
            other => panic!("{text}: expected Malformed, got {other:?}"),
        }
        assert_hides(&err, "s3cret");
    }
}

#[test]
fn json_syntax_errors_and_truncation_are_malformed_with_line() {
    let err = json("[\n[1, 2],\n[3, x]\n]").expect_err("syntax");
    assert!(matches!(err, IngestError::Malformed { line: 3, .. }), "{err:?}");
    for text in [
        "[[1, 2]] extra",
        "[[1, 2], [3, 4]",
        "[[1e400]]",
        "[[1, 2] [3, 4]]",
        "[[1,]]",
    ] {
        assert!(matches!(json(text), Err(IngestError::Malformed { .. })), "{text}");
    }
    assert_malformed(json("[[1, 2], [3, 4"), "ends early");
}

#[test]
fn json_ragged_and_wide_rows() {
    assert_ragged(json("[[1, 2], [3]]"), (2, 2, 1));
    let limits = Limits { max_d: 3, ..LIMITS };
    let wide = format!("[[{}]]", vec!["0"; 50].join(","));
    let err = run_with(wide.as_bytes(), Format::Json, RAW, limits).expect_err("too wide");
    assert!(
        matches!(err, IngestError::TooManyColumns { d: 50, max: 3 }),
        "{err:?}"
    );
}
