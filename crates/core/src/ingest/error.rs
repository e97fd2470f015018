//! Why an upload was refused. Messages go to the uploader (the data owner) at upload time:
//! they name positions (1-based data rows and columns, input lines) but never echo a value
//! (docs/design/privacy.md §3).

use std::io;

/// An upload that could not be stored. Every variant except [`IngestError::Io`] and
/// [`IngestError::InvalidBounds`] is the client's fault (a 4xx); see
/// [`IngestError::is_client_error`].
///
/// `row` and `col` count data rows and columns from 1 (a CSV header and blank lines are not
/// rows); `line` is the 1-based line of the input text.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// The text is not valid CSV/JSON of numbers at this line.
    #[error("malformed input at line {line}: {message}")]
    Malformed { line: u64, message: String },
    /// A CSV header whose first column has no name: a pandas row index, not a feature.
    #[error(
        "the CSV header at line {line} starts with an unnamed column: that is the row index pandas \
         writes unless told not to, and it would become a feature. Write the file with \
         DataFrame.to_csv(path, index=False), or remove the first column"
    )]
    IndexColumn { line: u64 },
    /// A row has a different number of columns than the first row (or the CSV header).
    #[error("row {row} has {got} columns, expected {expected}")]
    Ragged { row: u64, expected: u64, got: u64 },
    /// A NaN or infinite value (including numbers too large for f64).
    #[error("row {row}, column {col} is not a finite number (NaN and infinities are not allowed)")]
    NonFinite { row: u64, col: u64 },
    /// No data rows, or rows without columns.
    #[error("the upload contains no data (no rows, or rows without columns)")]
    Empty,
    /// More columns than the configured maximum.
    #[error("{d} columns exceed the limit of {max}")]
    TooManyColumns { d: u64, max: u64 },
    /// More rows than the configured maximum.
    #[error("more than {max} rows")]
    TooManyRows { max: u64 },
    /// A sparse matrix with more stored entries (both triangles) than the configured maximum.
    #[error("the sparse matrix has more than {max} stored entries (both triangles count)")]
    TooManyNonzeros { max: u64 },
    /// The body is longer than the configured maximum.
    #[error("the upload exceeds {max_bytes} bytes")]
    TooLarge { max_bytes: u64 },
    /// A matrix upload that is not square.
    #[error("a symmetric matrix must be square; got {rows} rows of {cols} columns")]
    NotSquare { rows: u64, cols: u64 },
    /// A matrix upload whose entries (row, col) and (col, row) differ beyond the tolerance.
    #[error("the matrix is not symmetric: entries ({row}, {col}) and ({col}, {row}) differ")]
    NotSymmetric { row: u64, col: u64 },
    /// A well-formed `.npy` file this service does not accept (dtype, rank, order, version).
    #[error("unsupported npy file: {0}")]
    UnsupportedNpy(String),
    /// A damaged `.npy` file: bad magic, unreadable header, missing or trailing data.
    #[error("invalid npy file: {0}")]
    InvalidNpy(String),
    /// Reading the upload body failed (the client went away or the body broke off mid-way).
    #[error("reading the upload failed: {0}")]
    Read(#[source] io::Error),
    /// Writing the parsed data failed (server side: disk full, permissions, ...).
    #[error("storing the upload failed: {0}")]
    Io(#[source] io::Error),
    /// The dataset's clipping bounds are not finite positive numbers. They are validated when
    /// the dataset is created, so this is a server-side bug, not the uploader's fault.
    #[error("invalid clipping bound: {0}")]
    InvalidBounds(&'static str),
}

impl IngestError {
    /// Whether the upload itself is at fault (answer 4xx). `false` for failures to write the
    /// output ([`IngestError::Io`]) and for invalid dataset bounds: those are 500s.
    pub fn is_client_error(&self) -> bool {
        !matches!(self, IngestError::Io(_) | IngestError::InvalidBounds(_))
    }
}

#[cfg(test)]
#[path = "error_tests.rs"]
mod tests;
