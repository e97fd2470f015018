use super::*;

fn parse(text: &str) -> Result<Csr, IngestError> {
    parse_mtx(text.as_bytes(), 1000)
}

/// The line and message of a `Malformed` error.
fn malformed_at(text: &str) -> (u64, String) {
    match parse(text) {
        Err(IngestError::Malformed { line, message }) => (line, message),
        other => panic!("expected a malformed-input error, got {other:?}"),
    }
}

const SYMMETRIC: &str = "%%MatrixMarket matrix coordinate real symmetric\n% a comment\n%\n3 3 4\n1 1 2.0\n2 1 -1.5\n3 2 1e-1\n3 3 4\n";

#[test]
fn a_symmetric_file_stores_both_triangles() {
    let csr = parse(SYMMETRIC).expect("valid");
    assert_eq!(csr.n, 3);
    assert_eq!(csr.row_ptr, vec![0, 2, 4, 6]);
    assert_eq!(csr.col_idx, vec![0, 1, 0, 2, 1, 2]);
    assert_eq!(csr.values, vec![2.0, -1.5, -1.5, 0.1, 0.1, 4.0]);
}

#[test]
fn a_general_file_with_symmetric_content_is_the_same_matrix() {
    let general = "%%MatrixMarket matrix coordinate real general\n3 3 6\n1 1 2\n2 1 -1.5\n1 2 -1.5\n3 2 0.1\n2 3 0.1\n3 3 4\n";
    assert_eq!(parse(general).expect("valid"), parse(SYMMETRIC).expect("valid"));
}

#[test]
fn the_banner_is_case_insensitive_and_integer_and_pattern_fields_are_read() {
    let integer = parse("%%matrixmarket MATRIX Coordinate integer symmetric\n2 2 1\n2 1 3\n").expect("valid");
    assert_eq!(integer.values, vec![3.0, 3.0]);
    let pattern =
        parse("%%MatrixMarket matrix coordinate pattern symmetric\n2 2 2\n2 1\n1 1\n").expect("valid");
    assert_eq!(pattern.values, vec![1.0, 1.0, 1.0]);
}

#[test]
fn each_bad_line_is_named() {
    let head = "%%MatrixMarket matrix coordinate real symmetric\n3 3 2\n";
    for (body, line, words) in [
        ("1 1 1\n4 1 1\n", 4, "row index is out of range"),
        ("1 1 1\n1 0 1\n", 4, "column index is out of range"),
        ("1 1 nan\n", 3, "not a finite number"),
        ("1 1 inf\n", 3, "not a finite number"),
        ("1 1 1e999\n", 3, "not a finite number"),
        ("1 1 x\n", 3, "not a number"),
        ("1 1\n", 3, "missing value"),
        ("1 1 1 1\n", 3, "unexpected text"),
        ("1.5 1 1\n", 3, "not a whole number"),
        ("2 1 1\n2 1 3\n", 4, "given twice"),
        ("2 1 1\n1 2 1\n", 4, "given twice"),
        ("1 1 1\n2 2 1\n3 3 1\n", 5, "more entries than the 2 declared"),
        ("1 1 1\n", 4, "ends after 1 of the 2"),
    ] {
        let (got_line, message) = malformed_at(&format!("{head}{body}"));
        assert_eq!(got_line, line, "{body:?}: {message}");
        assert!(message.contains(words), "{body:?}: {message}");
    }
}

#[test]
fn an_asymmetric_general_file_is_refused_at_the_line_of_the_entry() {
    let (line, message) =
        malformed_at("%%MatrixMarket matrix coordinate real general\n2 2 2\n1 2 1\n2 1 2\n");
    assert!(line == 3 || line == 4, "{line}");
    assert!(message.contains("not symmetric"), "{message}");
    let (line, message) =
        malformed_at("%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n2 1 2\n");
    assert_eq!(line, 4, "{message}");
    assert!(message.contains("has no entry (1, 2)"), "{message}");
    // Within the tolerance: stored as the exact mean; an explicit zero needs no mirror.
    let close =
        parse("%%MatrixMarket matrix coordinate real general\n2 2 3\n1 2 1\n2 1 1.0000000000001\n1 1 0\n")
            .expect("symmetric within the tolerance");
    assert_eq!(csr_value(&close, 0, 1), csr_value(&close, 1, 0));
    parse("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 2 0\n").expect("an explicit zero");
}

fn csr_value(csr: &Csr, i: usize, j: u32) -> f64 {
    let (start, end) = (csr.row_ptr[i] as usize, csr.row_ptr[i + 1] as usize);
    let at = csr.col_idx[start..end]
        .iter()
        .position(|&c| c == j)
        .expect("stored");
    csr.values[start + at]
}

#[test]
fn banners_and_size_lines_that_do_not_fit_are_refused() {
    for (text, words) in [
        (
            "%%MatrixMarket matrix array real general\n2 2\n1\n0\n0\n1\n",
            "coordinate",
        ),
        (
            "%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n",
            "field",
        ),
        (
            "%%MatrixMarket matrix coordinate real skew-symmetric\n1 1 0\n",
            "symmetry",
        ),
        ("1 1 1\n1 1 1\n", "first line"),
        (
            "%%MatrixMarket matrix coordinate real general\n2 2\n",
            "three whole numbers",
        ),
    ] {
        let (line, message) = malformed_at(text);
        assert!(line <= 2, "{text:?}: line {line}");
        assert!(message.contains(words), "{text:?}: {message}");
    }
    assert!(matches!(
        parse("%%MatrixMarket matrix coordinate real general\n2 3 0\n"),
        Err(IngestError::NotSquare { rows: 2, cols: 3 })
    ));
    assert!(matches!(parse(""), Err(IngestError::Empty)));
    assert!(matches!(
        parse("%%MatrixMarket matrix coordinate real general\n0 0 0\n"),
        Err(IngestError::Empty)
    ));
}

#[test]
fn the_nonzero_cap_counts_both_triangles() {
    let text = "%%MatrixMarket matrix coordinate real symmetric\n3 3 2\n2 1 1\n3 1 1\n";
    assert!(parse_mtx(text.as_bytes(), 4).is_ok());
    assert!(matches!(
        parse_mtx(text.as_bytes(), 3),
        Err(IngestError::TooManyNonzeros { max: 3 })
    ));
    let declared = "%%MatrixMarket matrix coordinate real general\n3 3 9\n";
    assert!(matches!(
        parse_mtx(declared.as_bytes(), 5),
        Err(IngestError::TooManyNonzeros { max: 5 })
    ));
}

#[test]
fn the_byte_limit_applies_and_the_output_is_the_stored_layout() {
    let mut out = Vec::new();
    let got = ingest_mtx(SYMMETRIC.as_bytes(), SYMMETRIC.len() as u64, 100, &mut out).expect("fits");
    assert_eq!(got, SparseIngested { n: 3, nnz: 6 });
    assert_eq!(&out[..8], &super::super::csr_file::MAGIC);
    // Header, 4 row pointers, 6 columns (24 bytes, already a multiple of 8), 6 values.
    assert_eq!(out.len(), 24 + 32 + 24 + 48);
    let too_long = ingest_mtx(SYMMETRIC.as_bytes(), 20, 100, &mut Vec::new());
    assert!(matches!(too_long, Err(IngestError::TooLarge { max_bytes: 20 })));
}
