//! End-to-end tests of [`super::ingest`]: every format's happy paths, every error, clipping,
//! limits, and that the three formats agree byte for byte.

use std::io::{self, Read, Write};

use proptest::prelude::*;

use super::*;

const LIMITS: Limits = Limits {
    max_bytes: 1 << 20,
    max_rows: 1000,
    max_d: 100,
};
/// Records whose bound never binds in these tests.
const RAW: Shape = Shape::Records {
    beta: 1e12,
    alpha: None,
};

fn run_with(
    input: &[u8],
    format: Format,
    shape: Shape,
    limits: Limits,
) -> Result<(Ingested, Vec<f64>), IngestError> {
    let mut out = Vec::new();
    let got = ingest(input, format, shape, &limits, &mut out)?;
    assert_eq!(
        out.len() as u64,
        got.n * got.d * 8,
        "output length matches the reported shape"
    );
    let values = out
        .as_chunks::<8>()
        .0
        .iter()
        .map(|b| f64::from_le_bytes(*b))
        .collect();
    Ok((got, values))
}

fn run(input: &[u8], format: Format) -> Result<(Ingested, Vec<f64>), IngestError> {
    run_with(input, format, RAW, LIMITS)
}

fn csv(input: &str) -> Result<(Ingested, Vec<f64>), IngestError> {
    run(input.as_bytes(), Format::Csv)
}

fn json(input: &str) -> Result<(Ingested, Vec<f64>), IngestError> {
    run(input.as_bytes(), Format::Json)
}

fn shape(n: u64, d: u64) -> Ingested {
    Ingested { n, d }
}

/// An `.npy` file (format 1.0) with the given header fields and raw data.
fn npy_file(descr: &str, fortran: bool, dims: &[u64], data: &[u8]) -> Vec<u8> {
    let dims_text = match dims {
        [one] => format!("({one},)"),
        _ => format!(
            "({})",
            dims.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
        ),
    };
    let order = if fortran { "True" } else { "False" };
    let mut text = format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {dims_text}, }}");
    while !(10 + text.len() + 1).is_multiple_of(64) {
        text.push(' ');
    }
    text.push('\n');
    let mut file = b"\x93NUMPY\x01\x00".to_vec();
    file.extend((text.len() as u16).to_le_bytes());
    file.extend(text.as_bytes());
    file.extend(data);
    file
}

fn le64(values: &[f64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn npy64(rows: &[Vec<f64>]) -> Vec<u8> {
    let data: Vec<f64> = rows.concat();
    npy_file(
        "<f8",
        false,
        &[rows.len() as u64, rows[0].len() as u64],
        &le64(&data),
    )
}

fn assert_hides(err: &IngestError, secret: &str) {
    assert!(
        !err.to_string().contains(secret),
        "the message echoes a value: {err}"
    );
}

// ---------------------------------------------------------------- CSV

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
    match csv("1,2\n3,\n") {
        Err(IngestError::Malformed { message, .. }) => assert!(message.contains("is empty"), "{message}"),
        other => panic!("expected Malformed, got {other:?}"),
    }
}

#[test]
fn csv_ragged_rows_name_the_data_row() {
    assert!(matches!(
        csv("1,2,3\n4,5\n"),
        Err(IngestError::Ragged {
            row: 2,
            expected: 3,
            got: 2
        })
    ));
    assert!(matches!(
        csv("a,b,c\n1,2,3\n4,5\n"),
        Err(IngestError::Ragged {
            row: 2,
            expected: 3,
            got: 2
        })
    ));
    assert!(matches!(
        csv("a,b\n1,2,3\n"),
        Err(IngestError::Ragged {
            row: 1,
            expected: 2,
            got: 3
        })
    ));
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

// ---------------------------------------------------------------- JSON

#[test]
fn json_rows_of_numbers() {
    let text = " [ [1, 2.5],\n [-3, 4e2], [18446744073709551615, -9223372036854775808] ] \n";
    let unclipped = Shape::Records {
        beta: 1e30,
        alpha: None,
    };
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
    match json("[[1, 2], [3, 4") {
        Err(IngestError::Malformed { message, .. }) => assert!(message.contains("ends early"), "{message}"),
        other => panic!("expected Malformed, got {other:?}"),
    }
}

#[test]
fn json_ragged_and_wide_rows() {
    assert!(matches!(
        json("[[1, 2], [3]]"),
        Err(IngestError::Ragged {
            row: 2,
            expected: 2,
            got: 1
        })
    ));
    let limits = Limits { max_d: 3, ..LIMITS };
    let wide = format!("[[{}]]", vec!["0"; 50].join(","));
    let err = run_with(wide.as_bytes(), Format::Json, RAW, limits).expect_err("too wide");
    assert!(
        matches!(err, IngestError::TooManyColumns { d: 50, max: 3 }),
        "{err:?}"
    );
}

// ---------------------------------------------------------------- NPY

#[test]
fn npy_f64_and_f32_in_both_byte_orders() {
    let values = [1.5, -2.0, 0.25, 1e10, -3.0, 7.0];
    let f32s: Vec<f32> = values.iter().map(|&v| v as f32).collect();
    let files = [
        npy_file("<f8", false, &[2, 3], &le64(&values)),
        npy_file(
            ">f8",
            false,
            &[2, 3],
            &values.iter().flat_map(|v| v.to_be_bytes()).collect::<Vec<_>>(),
        ),
        npy_file(
            "<f4",
            false,
            &[2, 3],
            &f32s.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>(),
        ),
        npy_file(
            ">f4",
            false,
            &[2, 3],
            &f32s.iter().flat_map(|v| v.to_be_bytes()).collect::<Vec<_>>(),
        ),
    ];
    for file in files {
        let (got, v) = run(&file, Format::Npy).expect("valid");
        assert_eq!(got, shape(2, 3));
        assert_eq!(v, values);
    }
}

#[test]
fn npy_written_by_npyz_with_a_version_2_header() {
    use npyz::WriterBuilder;
    let values: Vec<f64> = (0..12).map(|i| i as f64 / 3.0).collect();
    let mut file = Vec::new();
    let mut writer = npyz::WriteOptions::new()
        .default_dtype()
        .shape(&[4, 3])
        .writer(&mut file)
        .begin_nd()
        .expect("npyz writer");
    writer.extend(values.iter().copied()).expect("write");
    writer.finish().expect("finish");
    let (got, v) = run(&file, Format::Npy).expect("valid");
    assert_eq!((got, v.as_slice()), (shape(4, 3), values.as_slice()));

    // The same file with a version 2.0 header (4-byte length).
    let text_len = u16::from_le_bytes([file[8], file[9]]) as usize;
    let mut v2 = b"\x93NUMPY\x02\x00".to_vec();
    v2.extend((text_len as u32 + 2).to_le_bytes());
    v2.extend(&file[10..10 + text_len - 1]);
    v2.extend(b"  \n");
    v2.extend(&file[10 + text_len..]);
    assert_eq!(run(&v2, Format::Npy).expect("valid v2").1, values);
}

#[test]
fn npy_other_dtypes_and_ranks_are_unsupported() {
    let cases: [(&str, &[u64], usize, &str); 5] = [
        ("<i8", &[2, 2], 32, "'<i8'"),
        ("<f2", &[2, 2], 8, "'<f2'"),
        ("|u1", &[2, 2], 4, "'|u1'"),
        ("<f8", &[4], 32, "1 dimensions"),
        ("<f8", &[1, 2, 2], 32, "3 dimensions"),
    ];
    for (descr, dims, bytes, expected) in cases {
        let err = run(&npy_file(descr, false, dims, &vec![0; bytes]), Format::Npy).expect_err(descr);
        match &err {
            IngestError::UnsupportedNpy(message) => assert!(message.contains(expected), "{message}"),
            other => panic!("{descr} {dims:?}: expected UnsupportedNpy, got {other:?}"),
        }
    }
}

#[test]
fn npy_structured_dtype_is_unsupported() {
    let mut text = "{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (1, 1), }".to_string();
    while !(10 + text.len() + 1).is_multiple_of(64) {
        text.push(' ');
    }
    text.push('\n');
    let mut file = b"\x93NUMPY\x01\x00".to_vec();
    file.extend((text.len() as u16).to_le_bytes());
    file.extend(text.as_bytes());
    file.extend([0u8; 8]);
    assert!(matches!(
        run(&file, Format::Npy),
        Err(IngestError::UnsupportedNpy(_))
    ));
}

#[test]
fn npy_fortran_order_only_where_it_cannot_matter() {
    let data = le64(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let err = run(&npy_file("<f8", true, &[2, 3], &data), Format::Npy).expect_err("fortran records");
    assert!(
        matches!(err, IngestError::UnsupportedNpy(ref m) if m.contains("fortran_order")),
        "{err:?}"
    );
    // A single column is the same bytes in either order.
    let (got, v) = run(&npy_file("<f8", true, &[6, 1], &data), Format::Npy).expect("column");
    assert_eq!((got, v[5]), (shape(6, 1), 6.0));
    // A symmetric matrix: column-major bytes of A are row-major bytes of Aᵀ.
    let a = [[2.0, 1.0 + 1e-12, 0.5], [1.0, 3.0, -1.0], [0.5, -1.0, 4.0]];
    let c_order: Vec<f64> = a.iter().flatten().copied().collect();
    let f_order: Vec<f64> = (0..3).flat_map(|j| a.iter().map(move |row| row[j])).collect();
    let sym = Shape::SymmetricMatrix;
    let from_c = run_with(
        &npy_file("<f8", false, &[3, 3], &le64(&c_order)),
        Format::Npy,
        sym,
        LIMITS,
    );
    let from_f = run_with(
        &npy_file("<f8", true, &[3, 3], &le64(&f_order)),
        Format::Npy,
        sym,
        LIMITS,
    );
    assert_eq!(from_c.expect("C order").1, from_f.expect("Fortran order").1);
}

#[test]
fn npy_damaged_files_are_invalid() {
    let good = npy64(&[vec![1.0, 2.0], vec![3.0, 4.0]]);
    let cases: [(Vec<u8>, &str); 5] = [
        (b"PK\x03\x04 not npy at all".to_vec(), "magic"),
        (good[..5].to_vec(), "too short"),
        (good[..40].to_vec(), "inside the header"),
        (good[..good.len() - 3].to_vec(), "ends early"),
        ([good.as_slice(), b"x"].concat(), "bytes follow"),
    ];
    for (file, expected) in cases {
        match run(&file, Format::Npy) {
            Err(IngestError::InvalidNpy(message)) => assert!(message.contains(expected), "{message}"),
            other => panic!("{expected}: expected InvalidNpy, got {other:?}"),
        }
    }
    let garbage = npy_file("<f8", false, &[2, 2], &[]);
    let garbage = String::from_utf8_lossy(&garbage)
        .replace("'shape'", "'shap!'")
        .into_bytes();
    assert!(matches!(
        run(&garbage, Format::Npy),
        Err(IngestError::InvalidNpy(_))
    ));
}

#[test]
fn npy_hostile_headers_are_refused_without_panic_or_allocation() {
    // A version 2 header claiming 1 GiB of header text.
    let mut huge = b"\x93NUMPY\x02\x00".to_vec();
    huge.extend((1u32 << 30).to_le_bytes());
    assert!(matches!(
        run(&huge, Format::Npy),
        Err(IngestError::UnsupportedNpy(_))
    ));
    // A shape whose element count overflows u64 (npyz would panic computing it).
    let overflow = npy_file("<f8", false, &[1 << 40, 1 << 40], &[]);
    assert!(matches!(
        run(&overflow, Format::Npy),
        Err(IngestError::InvalidNpy(_))
    ));
    let overflow = npy_file("<f8", false, &[0, 1 << 40, 1 << 40], &[]);
    assert!(matches!(
        run(&overflow, Format::Npy),
        Err(IngestError::InvalidNpy(_))
    ));
    // Deep nesting (npyz's parser is recursive).
    let deep = format!("{}{}", "(".repeat(10_000), ")".repeat(10_000));
    let deep = npy_file(&deep, false, &[1, 1], &[0; 8]);
    assert!(matches!(
        run(&deep, Format::Npy),
        Err(IngestError::UnsupportedNpy(_))
    ));
}

#[test]
fn npy_declared_shape_is_checked_before_reading_data() {
    let header_only = |dims: &[u64]| npy_file("<f8", false, dims, &[]);
    assert!(matches!(
        run(&header_only(&[0, 3]), Format::Npy),
        Err(IngestError::Empty)
    ));
    assert!(matches!(
        run(&header_only(&[2, 101]), Format::Npy),
        Err(IngestError::TooManyColumns { d: 101, max: 100 })
    ));
    assert!(matches!(
        run(&header_only(&[1001, 2]), Format::Npy),
        Err(IngestError::TooManyRows { max: 1000 })
    ));
    // 1000 × 100 f64 = 800 kB fits the row and column limits but not 100 kB.
    let small = Limits {
        max_bytes: 100_000,
        ..LIMITS
    };
    let err = run_with(&header_only(&[1000, 100]), Format::Npy, RAW, small).expect_err("too large");
    assert!(
        matches!(err, IngestError::TooLarge { max_bytes: 100_000 }),
        "{err:?}"
    );
    let sym = run_with(&header_only(&[2, 3]), Format::Npy, Shape::SymmetricMatrix, LIMITS);
    assert!(
        matches!(sym, Err(IngestError::NotSquare { rows: 2, cols: 3 })),
        "{sym:?}"
    );
}

#[test]
fn npy_non_finite_values_are_refused_with_position() {
    let file = npy64(&[vec![1.0, 2.0], vec![3.0, f64::NAN]]);
    assert!(matches!(
        run(&file, Format::Npy),
        Err(IngestError::NonFinite { row: 2, col: 2 })
    ));
    let file = npy_file("<f4", false, &[1, 2], &[0, 0, 0, 0, 0, 0, 0x80, 0x7f]); // f32 +inf
    assert!(matches!(
        run(&file, Format::Npy),
        Err(IngestError::NonFinite { row: 1, col: 2 })
    ));
}

// ---------------------------------------------------------------- symmetric matrices

#[test]
fn symmetric_matrix_is_stored_as_its_exact_symmetrisation() {
    let text = "1,2,3\n2.000000000001,5,6\n3,6,9\n";
    let (got, v) = run_with(text.as_bytes(), Format::Csv, Shape::SymmetricMatrix, LIMITS).expect("valid");
    assert_eq!(got, shape(3, 3));
    let mean = (2.0 + 2.000000000001) / 2.0;
    assert_eq!(v, [1.0, mean, 3.0, mean, 5.0, 6.0, 3.0, 6.0, 9.0]);
}

#[test]
fn symmetric_matrix_errors() {
    let sym = |text: &str, limits| run_with(text.as_bytes(), Format::Csv, Shape::SymmetricMatrix, limits);
    assert!(matches!(
        sym("1,2,3\n4,5,6\n", LIMITS),
        Err(IngestError::NotSquare { rows: 2, cols: 3 })
    ));
    assert!(matches!(
        sym("1,2\n2,1\n0,0\n", LIMITS),
        Err(IngestError::NotSquare { rows: 3, cols: 2 })
    ));
    assert!(matches!(
        sym("1,2,3\n2,1,0\n3,0.5,1\n", LIMITS),
        Err(IngestError::NotSymmetric { row: 2, col: 3 })
    ));
    let narrow = Limits { max_d: 2, ..LIMITS };
    assert!(matches!(
        sym("1,0,0\n0,1,0\n0,0,1\n", narrow),
        Err(IngestError::TooManyColumns { d: 3, max: 2 })
    ));
    let err = run_with(
        b"[[1, 2], [2, 1], [0, 0]]",
        Format::Json,
        Shape::SymmetricMatrix,
        LIMITS,
    );
    assert!(matches!(err, Err(IngestError::NotSquare { rows: 3, cols: 2 })));
}

// ---------------------------------------------------------------- clipping

#[test]
fn records_are_clipped_per_row() {
    let text = "3,4\n0.3,0.4\n-30,40\n0,0\n";
    let bounds = Shape::Records {
        beta: 1.0,
        alpha: None,
    };
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
    let bad = Shape::Records {
        beta: f64::NAN,
        alpha: None,
    };
    let err = run_with(b"1\n", Format::Csv, bad, LIMITS).expect_err("NaN bound");
    assert!(matches!(err, IngestError::InvalidBounds(_)) && !err.is_client_error());
}

// ---------------------------------------------------------------- limits and I/O

#[test]
fn row_and_byte_limits() {
    let two_rows = Limits {
        max_rows: 2,
        ..LIMITS
    };
    assert!(run_with(b"1\n2\n", Format::Csv, RAW, two_rows).is_ok());
    let err = run_with(b"1\n2\n3\n", Format::Csv, RAW, two_rows).expect_err("three rows");
    assert!(matches!(err, IngestError::TooManyRows { max: 2 }));
    let err = run_with(b"[[1],[2],[3]]", Format::Json, RAW, two_rows).expect_err("three rows");
    assert!(matches!(err, IngestError::TooManyRows { max: 2 }));

    let text = b"1,2\n3,4\n"; // 8 bytes
    assert!(
        run_with(
            text,
            Format::Csv,
            RAW,
            Limits {
                max_bytes: 8,
                ..LIMITS
            }
        )
        .is_ok()
    );
    for format in [Format::Csv, Format::Json] {
        let err = run_with(
            text,
            format,
            RAW,
            Limits {
                max_bytes: 7,
                ..LIMITS
            },
        )
        .expect_err("9th byte");
        assert!(
            matches!(err, IngestError::TooLarge { max_bytes: 7 }),
            "{format:?}: {err:?}"
        );
    }
    let file = npy64(&vec![vec![1.0; 10]; 10]);
    let limits = Limits {
        max_bytes: file.len() as u64 - 1,
        ..LIMITS
    };
    let err = run_with(&[file.as_slice(), b"trailing"].concat(), Format::Npy, RAW, limits).expect_err("big");
    assert!(matches!(err, IngestError::TooLarge { .. }), "{err:?}");
}

/// A body that yields its bytes a few at a time, then fails like a dropped connection.
struct BrokenBody<'a>(&'a [u8]);

impl Read for BrokenBody<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.0.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "client went away",
            ));
        }
        let n = self.0.len().min(buf.len()).min(3);
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

#[test]
fn a_broken_body_is_a_client_read_error_in_every_format() {
    let npy = npy64(&[vec![1.0, 2.0], vec![3.0, 4.0]]);
    let bodies: [(&[u8], Format); 3] = [
        (b"1,2\n3,4\n5,", Format::Csv),
        (b"[[1,2],[3,", Format::Json),
        (&npy[..npy.len() - 4], Format::Npy),
    ];
    for (bytes, format) in bodies {
        let err = ingest(BrokenBody(bytes), format, RAW, &LIMITS, io::sink()).expect_err("broken");
        assert!(
            matches!(&err, IngestError::Read(e) if e.kind() == io::ErrorKind::ConnectionAborted),
            "{err:?}"
        );
        assert!(err.is_client_error());
    }
}

struct FullDisk;

impl Write for FullDisk {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::Error::new(io::ErrorKind::StorageFull, "no space"))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_failing_output_is_a_server_error() {
    for shape in [RAW, Shape::SymmetricMatrix] {
        let err = ingest(&b"1,0\n0,1\n"[..], Format::Csv, shape, &LIMITS, FullDisk).expect_err("disk full");
        assert!(
            matches!(&err, IngestError::Io(e) if e.kind() == io::ErrorKind::StorageFull),
            "{err:?}"
        );
        assert!(!err.is_client_error());
    }
}

#[test]
fn content_types() {
    assert_eq!(Format::from_content_type("text/csv"), Some(Format::Csv));
    assert_eq!(
        Format::from_content_type("Text/CSV; charset=utf-8"),
        Some(Format::Csv)
    );
    assert_eq!(
        Format::from_content_type(" application/json ;charset=UTF-8"),
        Some(Format::Json)
    );
    assert_eq!(Format::from_content_type("application/x-npy"), Some(Format::Npy));
    for other in [
        "",
        "text/plain",
        "application/octet-stream",
        "text/csvx",
        "multipart/form-data",
    ] {
        assert_eq!(Format::from_content_type(other), None, "{other}");
    }
    for f in [Format::Csv, Format::Json, Format::Npy] {
        assert_eq!(Format::from_content_type(f.content_type()), Some(f));
    }
}

#[test]
fn ingested_records_load_back_as_the_transpose() {
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    let got = ingest(
        &b"1,2,3\n4,5,6\n"[..],
        Format::Csv,
        RAW,
        &LIMITS,
        file.as_file_mut(),
    )
    .expect("valid");
    let data = open(file.path(), got.n as usize, got.d as usize).expect("open");
    let xt = data.records();
    assert_eq!(xt.shape(), (3, 2));
    assert_eq!(xt.column(1).as_slice(), &[4.0, 5.0, 6.0]);
}

// ---------------------------------------------------------------- formats agree

fn finite() -> impl Strategy<Value = f64> {
    use prop::num::f64::{NEGATIVE, NORMAL, POSITIVE, SUBNORMAL, ZERO};
    POSITIVE | NEGATIVE | NORMAL | SUBNORMAL | ZERO
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn csv_json_and_npy_of_the_same_matrix_store_the_same_bytes(
        rows in (1usize..6).prop_flat_map(|d| prop::collection::vec(prop::collection::vec(finite(), d), 1..20)),
        header in any::<bool>(),
        alpha in prop::option::of(0.5f64..2.0),
    ) {
        let d = rows[0].len();
        let mut text = String::new();
        if header {
            text += &(1..=d).map(|j| format!("col{j}")).collect::<Vec<_>>().join(",");
            text += "\n";
        }
        for row in &rows {
            text += &row.iter().map(f64::to_string).collect::<Vec<_>>().join(",");
            text += "\n";
        }
        let json_text = serde_json::to_string(&rows).expect("serialize");
        let bounds = Shape::Records { beta: 1.0, alpha };
        let mut outputs = Vec::new();
        for (input, format) in [(text.into_bytes(), Format::Csv), (json_text.into_bytes(), Format::Json), (npy64(&rows), Format::Npy)] {
            let mut out = Vec::new();
            let got = ingest(input.as_slice(), format, bounds, &LIMITS, &mut out);
            prop_assert!(got.is_ok(), "{format:?}: {got:?}");
            outputs.push(out);
        }
        prop_assert_eq!(&outputs[0], &outputs[1]);
        prop_assert_eq!(&outputs[0], &outputs[2]);
    }
}
