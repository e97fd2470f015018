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
//! The entry lines are read in chunks while a second thread parses the chunk before
//! (`crates/core/src/ingest/mtx/chunks.rs`), each chunk split into pieces parsed in parallel; the checks
//! still run in line order, so the errors are those of a sequential parse. A `general` file's
//! symmetry is checked by pairing each entry with its mirror through a counting sort of the
//! lower triangle by column, then one merge per row in parallel blocks of rows
//! (`crates/core/src/ingest/mtx/symmetrise.rs`). The order check, the search for a repeated position and
//! the row pointers are one parallel pass (`crates/core/src/ingest/mtx/order.rs`).
//!
//! Memory: 24 bytes per stored entry while sorting (positions, value, line), then the CSR
//! arrays, 12 bytes per entry plus 8 per row; a `general` file's symmetry check adds 20 bytes
//! per entry below the diagonal (row, position, value) and 16 per row, while it runs.

use std::io::{BufRead, BufReader, Read, Write};

use super::IngestError;
use crate::linalg::sparse::Csr;
use chunks::{CHUNK_BYTES, Header, collect_entries};
use symmetrise::symmetrise;

mod chunks;
mod order;
mod symmetrise;

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
    let csr = parse_body(input, max_bytes, max_nnz, CHUNK_BYTES)?;
    super::csr_file::write_csr(&csr, output).map_err(IngestError::Io)?;
    Ok(SparseIngested {
        n: csr.n as u64,
        nnz: csr.values.len() as u64,
    })
}

/// Parses a body of at most `max_bytes` bytes, its entry lines in chunks of about
/// `chunk_bytes`; a failure of the body is reported as such (too large, broken off).
fn parse_body(
    input: impl Read,
    max_bytes: u64,
    max_nnz: u64,
    chunk_bytes: usize,
) -> Result<Csr, IngestError> {
    let mut body = super::reader::BodyReader::new(input, max_bytes);
    // Only a read error can come from the body's failure: a parse error is in lines read
    // before it, and is reported as a sequential parse would report it.
    parse_mtx_in_chunks(&mut body, max_nnz, chunk_bytes).map_err(|e| match e {
        IngestError::Read(_) => body.explain(e),
        other => other,
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
#[cfg(test)]
fn parse_mtx(input: impl Read, max_nnz: u64) -> Result<Csr, IngestError> {
    parse_mtx_in_chunks(input, max_nnz, CHUNK_BYTES)
}

/// [`parse_mtx`], with the entry lines read in chunks of about `chunk_bytes` (tests make them
/// small, to put chunk boundaries everywhere).
fn parse_mtx_in_chunks(input: impl Read, max_nnz: u64, chunk_bytes: usize) -> Result<Csr, IngestError> {
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
    let header = Header {
        n,
        field,
        symmetry,
        declared,
        max_nnz,
    };
    let mut entries = collect_entries(&mut lines.input, header, lines.number, chunk_bytes)?;
    // Files written row by row (as scipy.io.mmwrite writes a CSR matrix) are already in order:
    // the pass that builds the CSR arrays checks it and the sort is skipped; the result is the
    // same either way.
    let order::Ordered { mut csr, repeated } = order::into_csr(n, &mut entries);
    if let Some(at) = repeated {
        let pair = &entries[at..at + 2];
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
    if symmetry == Symmetry::General {
        symmetrise(&mut csr, &entries)?;
    }
    Ok(csr)
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

#[cfg(test)]
#[path = "mtx_tests.rs"]
mod tests;
