//! Upload parsing: CSV, JSON and `.npy` bodies in, validated (and, for records, clipped) raw
//! little-endian `f64` out.
//!
//! [`ingest`] is pure, synchronous code over [`std::io::Read`] and [`std::io::Write`]; the
//! upload use case (`app/datasets/upload.rs`) feeds it the request body through a blocking
//! bridge. It streams: the input text is
//! never held whole. Records use O(d) memory; a symmetric matrix is held once (it must be, to
//! check symmetry), as `m` rows of `m` values, i.e. 1× the `f64` matrix plus O(m).
//!
//! What happens to the data (`docs/design/privacy.md` §1, docs/design/architecture.md "bad input"):
//! - every value must be finite; rows must all have the same width; limits on bytes, rows and
//!   columns are enforced while reading, so an oversize upload stops early;
//! - records are clipped per row, data-independently, to the dataset's public bounds
//!   ([`clip::RowClip`]), so the algorithms may rely on ‖x‖₂ ≤ β (and ‖x‖₁ ≤ α);
//! - a symmetric matrix must be square and symmetric within a relative tolerance; the exact
//!   symmetrisation (A + Aᵀ)/2 is stored.
//!
//! Errors are reported to the uploader (the data owner) at upload time only, so they name
//! row and column positions, but never echo a value ([`IngestError`]).
//!
//! Output layout: row-major `n × d` (records) or `m × m` (matrix) little-endian `f64`, no
//! header. [`open`] memory-maps it and views it in place as the transposed, column-major
//! `d × n` matrix Xᵀ, with no copy and no reshuffling (see `load.rs` and `crate::linalg`).

pub mod clip;
pub mod csr_file;
mod csv;
mod error;
pub mod input;
mod json;
mod load;
mod mtx;
mod npy;
mod reader;
mod sink;
pub mod sniff;
pub mod stats_file;
mod stats_stream;
mod symmetric;

#[cfg(test)]
mod tests;

use std::io::{Read, Write};

pub use error::IngestError;
pub use load::{RESIDENT_BYTES, StoredData, open, open_lazily, open_with};
pub use mtx::{SparseIngested, ingest_mtx};
pub use npy::npy_preamble;
pub use stats_stream::StreamedStats;

/// The wire format of an upload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Comma-separated numbers, optional header record (`text/csv`).
    Csv,
    /// An array of rows, each an array of numbers (`application/json`).
    Json,
    /// A NumPy `.npy` file, 2-D, `float64` or `float32`, either byte order (`application/x-npy`).
    Npy,
    /// A Matrix Market coordinate file of a sparse symmetric matrix
    /// (`application/x-matrix-market`), stored sparse ([`ingest_mtx`]); matrix datasets only.
    Mtx,
}

impl Format {
    /// The format for a `Content-Type` header value; parameters such as `; charset=utf-8` and
    /// the letter case of the media type are ignored. `None` for anything else.
    pub fn from_content_type(ct: &str) -> Option<Format> {
        let media_type = ct.split(';').next().unwrap_or_default().trim();
        [
            ("text/csv", Format::Csv),
            ("application/json", Format::Json),
            ("application/x-npy", Format::Npy),
            ("application/x-matrix-market", Format::Mtx),
        ]
        .into_iter()
        .find(|(name, _)| media_type.eq_ignore_ascii_case(name))
        .map(|(_, format)| format)
    }

    /// The canonical media type of this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Csv => "text/csv",
            Format::Json => "application/json",
            Format::Npy => "application/x-npy",
            Format::Mtx => "application/x-matrix-market",
        }
    }
}

/// Upload limits (configurable, docs/design/architecture.md "oversize uploads").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most bytes read from the body; one more byte is a [`IngestError::TooLarge`].
    pub max_bytes: u64,
    /// Most data rows (records) or matrix rows.
    pub max_rows: u64,
    /// Most columns d (records) or matrix side m.
    pub max_d: usize,
}

/// What the upload is, with the public bounds that apply on the way in (docs/design/privacy.md §1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shape {
    /// One row per individual; `beta` = `row_norm_bound` (L2), `alpha` = `row_l1_bound`.
    /// Without `alpha` only the L2 clip applies (its default √d·β is implied by ‖x‖₂ ≤ β).
    Records { beta: f64, alpha: Option<f64> },
    /// A symmetric m×m matrix.
    SymmetricMatrix,
}

/// What was stored: `n` rows of `d` values (for a matrix, `n == d == m`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ingested {
    pub n: u64,
    pub d: u64,
}

/// Parses `input` as `format`, validates it against `shape` and `limits`, and writes the
/// result to `output` as row-major little-endian `f64` (clipped rows for records, the exact
/// symmetrisation for a matrix).
///
/// On error the bytes already written to `output` are meaningless; the caller discards them.
/// Read failures of `input` are reported as [`IngestError::Read`] (a client error: the body
/// broke off), write failures of `output` as [`IngestError::Io`] (a server error); see
/// [`IngestError::is_client_error`].
pub fn ingest(
    input: impl Read,
    format: Format,
    shape: Shape,
    limits: &Limits,
    output: impl Write,
) -> Result<Ingested, IngestError> {
    ingest_into(input, format, shape, limits, output, false).map(|(ingested, _)| ingested)
}

/// [`ingest`], and for records their statistics ([`RecordStats`](crate::linalg::RecordStats) of the clipped rows written)
/// and norms too ([`StreamedStats`]), built while the input streams, in the same pass and on a worker thread that overlaps the
/// parse (`stats_stream.rs`); bit-identical to [`RecordStats::of`](crate::linalg::RecordStats::of) and `Records::norms` on the stored output. `None`
/// for a symmetric matrix (or if the worker failed: the upload is good either way). On error
/// nothing is returned and the partial statistics are dropped.
pub fn ingest_with_stats(
    input: impl Read,
    format: Format,
    shape: Shape,
    limits: &Limits,
    output: impl Write,
) -> Result<(Ingested, Option<StreamedStats>), IngestError> {
    ingest_into(input, format, shape, limits, output, true)
}

fn ingest_into(
    input: impl Read,
    format: Format,
    shape: Shape,
    limits: &Limits,
    output: impl Write,
    keep_stats: bool,
) -> Result<(Ingested, Option<StreamedStats>), IngestError> {
    let mut body = reader::BodyReader::new(input, limits.max_bytes);
    let mut sink = sink::RowSink::new(shape, *limits, output, keep_stats)?;
    let parsed = match format {
        Format::Csv => csv::parse(&mut body, &mut sink),
        Format::Json => json::parse(&mut body, &mut sink),
        Format::Npy => npy::parse(&mut body, &mut sink),
        // Stored sparse, through `ingest_mtx`: only a matrix dataset takes it.
        Format::Mtx => Err(IngestError::Malformed {
            line: 1,
            message: "a Matrix Market file is accepted only by a matrix dataset".into(),
        }),
    };
    parsed.map_err(|e| body.explain(e))?;
    sink.finish()
}
