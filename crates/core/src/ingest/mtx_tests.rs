use super::symmetrise::SYMMETRISE_ROWS;
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
fn each_bad_line_is_named_whatever_the_chunks() {
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
        // Comments, blank lines and CRLF among the entries still count as lines.
        (
            "1 1 1\r\n% between\r\n\r\n4 1 1\r\n",
            6,
            "row index is out of range",
        ),
        ("% between\n2 1 1\n\n1 2 1\n", 6, "given twice"),
        ("1 1 1\n%\n2 2 1 % not a comment\n", 5, "unexpected text"),
        (
            "1 1 1\n% a comment\n2 2 1\n3 3 1\n",
            6,
            "more entries than the 2 declared",
        ),
    ] {
        let text = format!("{head}{body}");
        let (got_line, message) = malformed_at(&text);
        assert_eq!(got_line, line, "{body:?}: {message}");
        assert!(message.contains(words), "{body:?}: {message}");
        // Chunks of 1 to 30 bytes, the body arriving 1 or 7 bytes at a time: the same line.
        for chunk_bytes in 1..=30 {
            for per_read in [1, 7] {
                match parse_chunked(&text, chunk_bytes, per_read) {
                    Err(IngestError::Malformed { line: got, .. }) => {
                        assert_eq!(got, line, "{body:?}, chunks of {chunk_bytes}");
                    }
                    other => panic!("{body:?}, chunks of {chunk_bytes}: {other:?}"),
                }
            }
        }
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

/// A body that arrives a few bytes per read, as a slow upload does.
struct Trickle<'a> {
    bytes: &'a [u8],
    per_read: usize,
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.per_read.min(buf.len()).min(self.bytes.len());
        buf[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        Ok(n)
    }
}

/// `text` parsed with its entry lines in chunks of `chunk_bytes`, arriving `per_read` bytes at
/// a time.
fn parse_chunked(text: &str, chunk_bytes: usize, per_read: usize) -> Result<Csr, IngestError> {
    let body = Trickle {
        bytes: text.as_bytes(),
        per_read,
    };
    parse_body(body, u64::MAX, 1000, chunk_bytes)
}

/// A `general` file with comments and blank lines among the entries, out of row order.
const GENERAL: &str = "%%MatrixMarket matrix coordinate real general\n% written by hand\n4 4 8\n1 1 2.5\n2 1 -1.25e-1\n% a comment between entries\n\n1 2 -0.125\n4 4 3\n3 2 1e2\n2 3 100.0\n4 1 0.0625\n1 4 6.25e-2\n";

#[test]
fn chunk_boundaries_anywhere_give_the_same_matrix() {
    let whole = parse(GENERAL).expect("valid");
    let crlf = GENERAL.replace('\n', "\r\n");
    assert_eq!(parse(&crlf).expect("CRLF is valid"), whole);
    // Chunks of 1 to 40 bytes cut the header, the lines and the numbers in every place; the
    // body arrives 1, 3 or 1000 bytes at a time.
    for text in [GENERAL, crlf.as_str(), SYMMETRIC] {
        let want = parse(text).expect("valid");
        for chunk_bytes in 1..=40 {
            for per_read in [1, 3, 1000] {
                let got = parse_chunked(text, chunk_bytes, per_read)
                    .unwrap_or_else(|e| panic!("chunks of {chunk_bytes}, reads of {per_read}: {e}"));
                assert_eq!(got, want, "chunks of {chunk_bytes}, reads of {per_read}");
            }
        }
    }
}

#[test]
fn a_bad_line_is_reported_before_a_later_failure_of_the_body() {
    let head = "%%MatrixMarket matrix coordinate real symmetric\n3 3 40\n1 1 1\n4 1 1\n";
    let text = format!("{head}{}", "2 2 1\n".repeat(38));
    // The body is one byte over its limit. The bad line is in a chunk read whole before the
    // failure; the reader may run ahead of the parser into the failure, and the bad line is
    // still what is reported.
    for chunk_bytes in [4, 16, 64] {
        let body = Trickle {
            bytes: text.as_bytes(),
            per_read: 5,
        };
        match parse_body(body, text.len() as u64 - 1, 1000, chunk_bytes) {
            Err(IngestError::Malformed { line, message }) => {
                assert_eq!(line, 4, "chunks of {chunk_bytes}: {message}");
            }
            other => panic!("chunks of {chunk_bytes}: {other:?}"),
        }
    }
    // Without the bad line, the same body is too large.
    let fine = text.replace("4 1 1\n", "3 1 1\n");
    let body = Trickle {
        bytes: fine.as_bytes(),
        per_read: 5,
    };
    assert!(matches!(
        parse_body(body, fine.len() as u64 - 1, 1000, 16),
        Err(IngestError::TooLarge { .. })
    ));
}

/// A `general` tridiagonal file of side n (several blocks of [`SYMMETRISE_ROWS`] rows), with
/// `extra` lines added before the entries; the declared count includes them.
fn tridiagonal(n: usize, extra: &[String]) -> String {
    let mut lines: Vec<String> = extra.to_vec();
    for i in 1..=n {
        lines.push(format!("{i} {i} 2"));
        if i < n {
            lines.push(format!("{i} {} -1", i + 1));
            lines.push(format!("{} {i} -1", i + 1));
        }
    }
    format!(
        "%%MatrixMarket matrix coordinate real general\n{n} {n} {}\n{}\n",
        lines.len(),
        lines.join("\n")
    )
}

#[test]
fn symmetry_errors_across_blocks_of_rows_come_in_the_order_of_a_sequential_check() {
    let n = 3 * SYMMETRISE_ROWS + 5;
    let csr = parse_mtx(tridiagonal(n, &[]).as_bytes(), 1 << 20).expect("symmetric");
    assert_eq!(csr.values.len(), 3 * n - 2);
    // A lower entry without its mirror in the first block, and a pair that differs in the last:
    // the pair is reported (a sequential check looks at every upper entry first).
    let orphan = "3 1 0.5".to_string();
    let differs = format!("{} {} 7", n - 2, n);
    let other = format!("{} {} 8", n, n - 2);
    let text = tridiagonal(n, &[orphan.clone(), differs, other]);
    let (line, message) = match parse_mtx(text.as_bytes(), 1 << 20) {
        Err(IngestError::Malformed { line, message }) => (line, message),
        other => panic!("{other:?}"),
    };
    assert_eq!(line, 4, "{message}");
    assert!(
        message.contains(&format!("entry ({}, {n}) differs", n - 2)),
        "{message}"
    );
    assert!(message.contains("on line 5"), "{message}");
    // Without the pair, the orphan.
    let (line, message) = match parse_mtx(tridiagonal(n, &[orphan]).as_bytes(), 1 << 20) {
        Err(IngestError::Malformed { line, message }) => (line, message),
        other => panic!("{other:?}"),
    };
    assert_eq!(line, 3, "{message}");
    assert!(message.contains("entry (3, 1) has no entry (1, 3)"), "{message}");
}

/// What a sequential check of a `general` file's symmetry gives, written from its definition
/// (docs of `symmetrise`): the upper entries in row order, each against its mirror; then the
/// lower entries without a mirror. `entries` are (i, j, value, line), 0-based, distinct.
fn symmetrised_by_definition(n: usize, entries: &[(u32, u32, f64, u64)]) -> Result<Csr, (u64, String)> {
    use std::collections::BTreeMap;
    let at: BTreeMap<(u32, u32), (f64, u64)> = entries.iter().map(|&(i, j, v, l)| ((i, j), (v, l))).collect();
    let max_abs = entries.iter().fold(0.0_f64, |m, e| m.max(e.2.abs()));
    let tol = crate::ingest::symmetric::SYMMETRY_TOLERANCE * max_abs.max(1.0);
    let mut out = at.clone();
    for (&(i, j), &(v, line)) in at.iter().filter(|((i, j), _)| j > i) {
        match at.get(&(j, i)) {
            Some(&(w, other)) if !((v - w).abs() <= tol) => {
                return Err((
                    line,
                    format!(
                        "entry ({}, {}) differs from entry ({}, {}) on line {other}",
                        i + 1,
                        j + 1,
                        j + 1,
                        i + 1
                    ),
                ));
            }
            Some(&(w, _)) => {
                let mean = crate::ingest::symmetric::mean(v, w);
                out.insert((i, j), (mean, line));
                out.insert((j, i), (mean, 0));
            }
            None if !(v.abs() <= tol) => {
                return Err((
                    line,
                    format!("entry ({}, {}) has no entry ({}, {})", i + 1, j + 1, j + 1, i + 1),
                ));
            }
            None => {
                out.insert((i, j), (0.0, line));
            }
        }
    }
    for (&(i, j), &(v, line)) in at.iter().filter(|((i, j), _)| j < i) {
        if !at.contains_key(&(j, i)) {
            if !(v.abs() <= tol) {
                return Err((
                    line,
                    format!("entry ({}, {}) has no entry ({}, {})", i + 1, j + 1, j + 1, i + 1),
                ));
            }
            out.insert((i, j), (0.0, line));
        }
    }
    Ok(Csr::from_triplets(
        n,
        out.into_iter().map(|((i, j), (v, _))| (i, j, v)).collect(),
    ))
}

#[test]
fn the_symmetry_check_agrees_with_its_definition_on_random_general_files() {
    use rand::{Rng, SeedableRng};
    // Small sides, and sides over several blocks of rows with few entries, so that a block's
    // columns have their lower entries in the rows of later blocks; three seeds.
    for case in 0..1200 {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64([41, 7, 2026][case / 400] * 1000 + case as u64);
        let n = if case % 4 == 3 {
            2 * SYMMETRISE_ROWS + rng.random_range(1..50)
        } else {
            rng.random_range(1..12)
        };
        let mut positions = std::collections::BTreeSet::new();
        let wanted = rng.random_range(1..(3 * n).min(60) + 2).min(n * n);
        while positions.len() < wanted {
            let (i, j) = (rng.random_range(0..n as u32), rng.random_range(0..n as u32));
            positions.insert((i, j));
            // Mostly symmetric: the mirror too, with the same value or a near one.
            if rng.random_bool(0.8) {
                positions.insert((j, i));
            }
        }
        let mut values = std::collections::BTreeMap::new();
        for &(i, j) in &positions {
            let v = match values.get(&(j, i)) {
                Some(&w) => match rng.random_range(0..10) {
                    0 => w + 1.0,
                    1 => w + 1e-12,
                    _ => w,
                },
                None if rng.random_bool(0.3) => 0.0,
                None => (rng.random_range(-4..5) as f64) * 0.25,
            };
            values.insert((i, j), v);
        }
        // The lines in a random order.
        let mut lines: Vec<(u32, u32, f64)> = values.iter().map(|(&(i, j), &v)| (i, j, v)).collect();
        for k in (1..lines.len()).rev() {
            lines.swap(k, rng.random_range(0..=k));
        }
        let text = format!(
            "%%MatrixMarket matrix coordinate real general\n{n} {n} {}\n{}\n",
            lines.len(),
            lines
                .iter()
                .map(|(i, j, v)| format!("{} {} {v:e}", i + 1, j + 1))
                .collect::<Vec<_>>()
                .join("\n")
        );
        let entries: Vec<(u32, u32, f64, u64)> = lines
            .iter()
            .enumerate()
            .map(|(k, &(i, j, v))| (i, j, v, k as u64 + 3))
            .collect();
        let got = parse_mtx(text.as_bytes(), 1 << 20).map_err(|e| match e {
            IngestError::Malformed { line, message } => (line, message),
            other => panic!("case {case}: {other:?}"),
        });
        match (got, symmetrised_by_definition(n, &entries)) {
            (Ok(got), Ok(want)) => assert_eq!(got, want, "case {case}"),
            (Err((line, message)), Err((want_line, want))) => {
                assert_eq!(line, want_line, "case {case}: {message}");
                assert!(message.ends_with(&want), "case {case}: {message} / {want}");
            }
            (got, want) => panic!("case {case}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn of_two_lower_entries_without_a_mirror_the_first_in_row_order_is_reported() {
    // Column 1's orphan lies in the last row (found by the first block of rows, which holds
    // column 1); the other orphan's column is in the second block, its row before the last.
    let n = 3 * SYMMETRISE_ROWS + 5;
    let (r, c) = (SYMMETRISE_ROWS + 3, SYMMETRISE_ROWS + 1);
    let text = tridiagonal(n, &[format!("{n} 1 0.5"), format!("{r} {c} 0.25")]);
    let (line, message) = match parse_mtx(text.as_bytes(), 1 << 20) {
        Err(IngestError::Malformed { line, message }) => (line, message),
        other => panic!("{other:?}"),
    };
    assert_eq!(line, 4, "{message}");
    assert!(
        message.ends_with(&format!("entry ({r}, {c}) has no entry ({c}, {r})")),
        "{message}"
    );
}
