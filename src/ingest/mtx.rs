//! Matrix Market coordinate uploads of a sparse symmetric matrix (`%%MatrixMarket matrix
//! coordinate real symmetric`, or `general` with symmetric content: what `scipy.io.mmwrite`
//! writes), parsed line by line into CSR and stored in the layout of `csr_file.rs`, never
//! densified.
//!
//! What is checked, each failure naming the 1-based line of the input (never a value):
//! - the banner: object `matrix`, format `coordinate`, field `real`, `integer` or `pattern`
//!   (`pattern` entries are 1), symmetry `general` or `symmetric`;
//! - the size line: square, 1 ≤ n < 2³², and the declared entry count;
//! - every entry: two indices in 1..=n, a finite value, nothing else on the line; exactly the
//!   declared number of entries;
//! - no position given twice (in a `symmetric` file, (i, j) and (j, i) are the same position);
//! - a `general` file must be symmetric: (i, j) and (j, i) agree within the tolerance of the
//!   dense matrix kind (relative to max(1, max |a|)); an entry whose mirror is absent must be 0
//!   within it. The exact symmetrisation (a_ij + a_ji)/2 is stored, as for dense matrices;
//! - at most `max_nnz` stored entries (both triangles), counted while reading.
//!
//! Memory: 24 bytes per stored entry while sorting (positions, value, line), then the CSR
//! arrays, 12 bytes per entry plus 8 per row.

use std::io::{BufRead, BufReader, Read, Write};

use rayon::iter::{IntoParallelIterator, ParallelIterator};
use rayon::slice::ParallelSliceMut;

use super::IngestError;
use super::symmetric::SYMMETRY_TOLERANCE;
use crate::linalg::sparse::Csr;

/// What was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SparseIngested {
    /// The side n.
    pub n: u64,
    /// Stored entries, both triangles.
    pub nnz: u64,
}

/// One stored entry while the file is read.
#[derive(Debug, Clone, Copy)]
struct Entry {
    row: u32,
    col: u32,
    line: u64,
    value: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Symmetry {
    General,
    Symmetric,
}

/// The banner's field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Real,
    Pattern,
}

fn malformed(line: u64, message: impl Into<String>) -> IngestError {
    IngestError::Malformed {
        line,
        message: message.into(),
    }
}

/// Parses a Matrix Market body of at most `max_bytes` bytes into CSR with at most `max_nnz`
/// stored entries and writes it to `output` (`csr_file.rs` layout).
pub fn ingest_mtx(
    input: impl Read,
    max_bytes: u64,
    max_nnz: u64,
    output: &mut impl Write,
) -> Result<SparseIngested, IngestError> {
    let mut body = super::reader::BodyReader::new(input, max_bytes);
    let csr = parse_mtx(&mut body, max_nnz).map_err(|e| body.explain(e))?;
    super::csr_file::write_csr(&csr, output).map_err(IngestError::Io)?;
    Ok(SparseIngested {
        n: csr.n as u64,
        nnz: csr.values.len() as u64,
    })
}

/// Reads lines, numbering them from 1; skips `%` comments and blank lines after the banner.
struct Lines<R> {
    input: BufReader<R>,
    buffer: Vec<u8>,
    number: u64,
}

impl<R: Read> Lines<R> {
    /// Reads the next line into the buffer; its number, or `None` at the end.
    fn next_raw(&mut self) -> Result<Option<u64>, IngestError> {
        self.buffer.clear();
        let read = self
            .input
            .read_until(b'\n', &mut self.buffer)
            .map_err(IngestError::Read)?;
        if read == 0 {
            return Ok(None);
        }
        self.number += 1;
        if std::str::from_utf8(&self.buffer).is_err() {
            return Err(malformed(self.number, "not UTF-8 text"));
        }
        Ok(Some(self.number))
    }

    /// The line last read, trimmed.
    fn text(&self) -> &str {
        std::str::from_utf8(&self.buffer).unwrap_or_default().trim()
    }

    /// The next line that is not a `%` comment or blank; its number, or `None` at the end.
    fn next_data(&mut self) -> Result<Option<u64>, IngestError> {
        while let Some(line) = self.next_raw()? {
            let text = self.text();
            if !(text.is_empty() || text.starts_with('%')) {
                return Ok(Some(line));
            }
        }
        Ok(None)
    }
}

/// Parses the banner line: `%%MatrixMarket matrix coordinate <field> <symmetry>`.
fn banner(line: &str) -> Result<(Field, Symmetry), IngestError> {
    let words: Vec<String> = line.split_whitespace().map(str::to_ascii_lowercase).collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let ["%%matrixmarket", object, format, field, symmetry] = words.as_slice() else {
        return Err(malformed(
            1,
            "the first line must be `%%MatrixMarket matrix coordinate real symmetric` (or general)",
        ));
    };
    if *object != "matrix" || *format != "coordinate" {
        return Err(malformed(
            1,
            "only `matrix coordinate` Matrix Market files are accepted (a dense `array` file can be sent as .npy)",
        ));
    }
    let field = match *field {
        "real" | "integer" | "double" => Field::Real,
        "pattern" => Field::Pattern,
        _ => return Err(malformed(1, "the field must be real, integer or pattern")),
    };
    let symmetry = match *symmetry {
        "general" => Symmetry::General,
        "symmetric" => Symmetry::Symmetric,
        _ => {
            return Err(malformed(
                1,
                "the symmetry must be symmetric or general (with symmetric content)",
            ));
        }
    };
    Ok((field, symmetry))
}

/// Parses a whole body into CSR, both triangles.
pub(super) fn parse_mtx(input: impl Read, max_nnz: u64) -> Result<Csr, IngestError> {
    let mut lines = Lines {
        input: BufReader::with_capacity(1 << 20, input),
        buffer: Vec::new(),
        number: 0,
    };
    if lines.next_raw()?.is_none() {
        return Err(IngestError::Empty);
    }
    let (field, symmetry) = banner(lines.text())?;
    let (n, declared) = size_line(&mut lines, max_nnz)?;
    let mut entries = Vec::with_capacity(usize::try_from(declared.min(1 << 24)).unwrap_or(0));
    let mut seen = 0u64;
    let mut line_base = lines.number;
    let mut chunk = Vec::with_capacity(CHUNK_BYTES + 4096);
    // The entries in chunks of whole lines, each chunk split into pieces parsed in parallel and
    // then taken in line order, so every check fails at the same line as a sequential parse.
    while read_chunk(&mut lines.input, &mut chunk)? {
        let pieces = split_at_lines(&chunk, 4 * rayon::current_num_threads());
        let parsed: Vec<Piece> = pieces.into_par_iter().map(|p| parse_piece(p, n, field)).collect();
        for piece in parsed {
            for mut entry in piece.entries {
                entry.line += line_base;
                seen += 1;
                if seen > declared {
                    return Err(malformed(
                        entry.line,
                        format!("more entries than the {declared} declared on the size line"),
                    ));
                }
                entries.push(entry);
                if symmetry == Symmetry::Symmetric && entry.row != entry.col {
                    entries.push(Entry {
                        row: entry.col,
                        col: entry.row,
                        ..entry
                    });
                }
                if entries.len() as u64 > max_nnz {
                    return Err(IngestError::TooManyNonzeros { max: max_nnz });
                }
            }
            if let Some((line, message)) = piece.error {
                return Err(malformed(line_base + line, message));
            }
            line_base += piece.lines;
        }
    }
    if seen < declared {
        return Err(malformed(
            line_base + 1,
            format!("the file ends after {seen} of the {declared} entries declared on the size line"),
        ));
    }
    if entries.is_empty() {
        return Err(IngestError::Empty);
    }
    // Files written row by row (as scipy.io.mmwrite writes a CSR matrix) are already in order:
    // one pass checks it and the sort is skipped; the result is the same either way.
    if !entries.is_sorted_by_key(|e| (e.row, e.col)) {
        entries.par_sort_unstable_by_key(|e| (e.row, e.col));
    }
    if let Some(pair) = entries
        .windows(2)
        .find(|w| (w[0].row, w[0].col) == (w[1].row, w[1].col))
    {
        let (first, second) = (pair[0].line.min(pair[1].line), pair[0].line.max(pair[1].line));
        return Err(malformed(
            second,
            format!(
                "entry ({}, {}) is given twice (lines {first} and {second}{})",
                pair[0].row + 1,
                pair[0].col + 1,
                if symmetry == Symmetry::Symmetric {
                    "; a symmetric file lists each off-diagonal pair once"
                } else {
                    ""
                }
            ),
        ));
    }
    let mut csr = to_csr(n, &entries);
    if symmetry == Symmetry::General {
        symmetrise(&mut csr, &entries)?;
    }
    Ok(csr)
}

/// Bytes of input parsed at a time (then up to the end of the line).
const CHUNK_BYTES: usize = 8 << 20;

/// Reads about [`CHUNK_BYTES`] of whole lines into `chunk` (replacing its contents); false at
/// the end of the input.
fn read_chunk(input: &mut impl BufRead, chunk: &mut Vec<u8>) -> Result<bool, IngestError> {
    chunk.clear();
    (&mut *input)
        .take(CHUNK_BYTES as u64)
        .read_to_end(chunk)
        .map_err(IngestError::Read)?;
    if chunk.last().is_some_and(|&b| b != b'\n') {
        input.read_until(b'\n', chunk).map_err(IngestError::Read)?;
    }
    Ok(!chunk.is_empty())
}

/// `bytes` (whole lines) in about `parts` pieces of whole lines.
fn split_at_lines(bytes: &[u8], parts: usize) -> Vec<&[u8]> {
    let step = (bytes.len() / parts.max(1)).max(1);
    let mut pieces = Vec::with_capacity(parts + 1);
    let mut start = 0;
    while start < bytes.len() {
        let end = match bytes[(start + step).min(bytes.len())..]
            .iter()
            .position(|&b| b == b'\n')
        {
            Some(at) => (start + step).min(bytes.len()) + at + 1,
            None => bytes.len(),
        };
        pieces.push(&bytes[start..end]);
        start = end;
    }
    pieces
}

/// The entries of a piece of whole lines, their `line` counted from 1 within the piece; its
/// line count; and the first error (its line within the piece, the message), after which the
/// piece was not read further.
struct Piece {
    entries: Vec<Entry>,
    lines: u64,
    error: Option<(u64, String)>,
}

/// Parses the entry lines of a piece; `%` comments and blank lines are skipped.
fn parse_piece(bytes: &[u8], n: u32, field: Field) -> Piece {
    let mut entries = Vec::with_capacity(bytes.len() / 16);
    let mut number = 0u64;
    for raw in bytes.split_inclusive(|&b| b == b'\n') {
        number += 1;
        let parsed = match std::str::from_utf8(raw) {
            Err(_) => Err(malformed(number, "not UTF-8 text")),
            Ok(text) => {
                let text = text.trim();
                if text.is_empty() || text.starts_with('%') {
                    continue;
                }
                entry(number, text, n, field)
            }
        };
        match parsed {
            Ok(entry) => entries.push(entry),
            Err(e) => {
                let error = match e {
                    IngestError::Malformed { line, message } => (line, message),
                    other => (number, other.to_string()),
                };
                return Piece {
                    entries,
                    lines: number,
                    error: Some(error),
                };
            }
        }
    }
    Piece {
        entries,
        lines: number,
        error: None,
    }
}

/// The size line `n n entries`, checked against the limits.
fn size_line<R: Read>(lines: &mut Lines<R>, max_nnz: u64) -> Result<(u32, u64), IngestError> {
    let Some(line) = lines.next_data()? else {
        return Err(IngestError::Empty);
    };
    let text = lines.text();
    let numbers: Vec<u64> = text
        .split_whitespace()
        .map(|w| w.parse::<u64>())
        .collect::<Result<_, _>>()
        .map_err(|_| {
            malformed(
                line,
                "the size line must be three whole numbers: rows, columns, entries",
            )
        })?;
    let [rows, cols, declared] = numbers.as_slice() else {
        return Err(malformed(
            line,
            "the size line must be three whole numbers: rows, columns, entries",
        ));
    };
    if rows != cols {
        return Err(IngestError::NotSquare {
            rows: *rows,
            cols: *cols,
        });
    }
    if *rows == 0 {
        return Err(IngestError::Empty);
    }
    let n = u32::try_from(*rows)
        .ok()
        .filter(|&n| u64::from(n) <= max_nnz)
        .ok_or_else(|| {
            malformed(
                line,
                format!(
                    "the side {rows} exceeds the limit of {}",
                    max_nnz.min(u64::from(u32::MAX))
                ),
            )
        })?;
    if *declared > max_nnz {
        return Err(IngestError::TooManyNonzeros { max: max_nnz });
    }
    Ok((n, *declared))
}

/// One entry line: `i j value` (`i j` for a pattern).
fn entry(line: u64, text: &str, n: u32, field: Field) -> Result<Entry, IngestError> {
    let mut words = text.split_ascii_whitespace();
    let mut index = |which: &str| -> Result<u32, IngestError> {
        let word = words
            .next()
            .ok_or_else(|| malformed(line, format!("missing {which} index")))?;
        let i: u64 = word
            .parse()
            .map_err(|_| malformed(line, format!("the {which} index is not a whole number")))?;
        if i >= 1 && i <= u64::from(n) {
            Ok((i - 1) as u32)
        } else {
            Err(malformed(
                line,
                format!("the {which} index is out of range 1..={n}"),
            ))
        }
    };
    let row = index("row")?;
    let col = index("column")?;
    let value = match field {
        Field::Pattern => 1.0,
        Field::Real => {
            let word = words.next().ok_or_else(|| malformed(line, "missing value"))?;
            let value: f64 = word
                .parse()
                .map_err(|_| malformed(line, "the value is not a number"))?;
            if !value.is_finite() {
                return Err(malformed(
                    line,
                    "the value is not a finite number (NaN and infinities are not allowed)",
                ));
            }
            value
        }
    };
    if words.next().is_some() {
        return Err(malformed(line, "unexpected text after the entry"));
    }
    Ok(Entry {
        row,
        col,
        line,
        value,
    })
}

/// CSR from entries sorted by (row, col), positions distinct.
fn to_csr(n: u32, entries: &[Entry]) -> Csr {
    let n = n as usize;
    let mut row_ptr = vec![0u64; n + 1];
    for e in entries {
        row_ptr[e.row as usize + 1] += 1;
    }
    for i in 0..n {
        row_ptr[i + 1] += row_ptr[i];
    }
    Csr {
        n,
        row_ptr,
        col_idx: entries.iter().map(|e| e.col).collect(),
        values: entries.iter().map(|e| e.value).collect(),
    }
}

/// Checks a `general` file's symmetry and stores (a_ij + a_ji)/2 in both places; `entries` is
/// in CSR order (for the line numbers).
fn symmetrise(csr: &mut Csr, entries: &[Entry]) -> Result<(), IngestError> {
    let max_abs = csr.values.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
    let tol = SYMMETRY_TOLERANCE * max_abs.max(1.0);
    for i in 0..csr.n {
        for at in csr.row_ptr[i] as usize..csr.row_ptr[i + 1] as usize {
            let j = csr.col_idx[at] as usize;
            if j <= i {
                continue;
            }
            let (start, end) = (csr.row_ptr[j] as usize, csr.row_ptr[j + 1] as usize);
            let mirror = csr.col_idx[start..end]
                .binary_search(&(i as u32))
                .ok()
                .map(|k| start + k);
            let a = csr.values[at];
            let b = mirror.map_or(0.0, |m| csr.values[m]);
            if !((a - b).abs() <= tol) {
                return Err(asymmetric(
                    i,
                    j,
                    entries[at].line,
                    mirror.map(|m| entries[m].line),
                ));
            }
            match mirror {
                Some(m) => {
                    let mean = super::symmetric::mean(a, b);
                    csr.values[at] = mean;
                    csr.values[m] = mean;
                }
                // A zero (within the tolerance) whose mirror is an implicit zero.
                None => csr.values[at] = 0.0,
            }
        }
    }
    // Entries below the diagonal whose mirror is absent were checked from their side above
    // only if they are above it; check the lower ones against an absent upper entry too.
    for i in 0..csr.n {
        let (first, last) = (csr.row_ptr[i] as usize, csr.row_ptr[i + 1] as usize);
        for (at, entry) in entries.iter().enumerate().take(last).skip(first) {
            let j = csr.col_idx[at] as usize;
            if j >= i {
                continue;
            }
            let (start, end) = (csr.row_ptr[j] as usize, csr.row_ptr[j + 1] as usize);
            if csr.col_idx[start..end].binary_search(&(i as u32)).is_err() {
                if !(csr.values[at].abs() <= tol) {
                    return Err(asymmetric(i, j, entry.line, None));
                }
                csr.values[at] = 0.0;
            }
        }
    }
    Ok(())
}

/// The 0-based entry (i, j) on `line` breaks symmetry: its mirror (on `mirror_line`) differs,
/// or is absent while the entry is not 0.
fn asymmetric(i: usize, j: usize, line: u64, mirror_line: Option<u64>) -> IngestError {
    let (i, j) = (i + 1, j + 1);
    let message = match mirror_line {
        Some(other) => format!(
            "the matrix is not symmetric: entry ({i}, {j}) differs from entry ({j}, {i}) on line {other}"
        ),
        None => format!("the matrix is not symmetric: entry ({i}, {j}) has no entry ({j}, {i})"),
    };
    malformed(line, message)
}

#[cfg(test)]
#[path = "mtx_tests.rs"]
mod tests;
