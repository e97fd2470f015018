//! End-to-end tests of [`super::ingest`]: every format's happy paths, every error, clipping,
//! limits, and that the three formats agree byte for byte. One file per format (`csv.rs`,
//! `json.rs`, `npy.rs`, `symmetric.rs`), then what applies to all (`clipping.rs`, `limits.rs`,
//! `formats.rs`); the helpers shared by them are here.

mod clipping;
mod csv;
mod formats;
mod json;
mod limits;
mod npy;
mod symmetric;

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
    let header = format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {dims_text}, }}");
    npy_with_header(header, data)
}

/// An `.npy` file (format 1.0) with the given header dictionary text and raw data.
fn npy_with_header(text: String, data: &[u8]) -> Vec<u8> {
    let mut file = npy_preamble(&text);
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

/// Records clipped to ‖x‖₂ ≤ β, with no L1 bound.
fn l2_records(beta: f64) -> Shape {
    Shape::Records { beta, alpha: None }
}

/// Asserts that `result` is a `Malformed` error whose message contains `needle`.
#[track_caller]
fn assert_malformed<T: std::fmt::Debug>(result: Result<T, IngestError>, needle: &str) {
    match result {
        Err(IngestError::Malformed { message, .. }) => assert!(message.contains(needle), "{message}"),
        other => panic!("expected Malformed, got {other:?}"),
    }
}

/// Asserts that `result` is a `Ragged` error naming (row, expected, got).
#[track_caller]
fn assert_ragged<T: std::fmt::Debug>(result: Result<T, IngestError>, (row, expected, got): (u64, u64, u64)) {
    match result {
        Err(IngestError::Ragged {
            row: r,
            expected: e,
            got: g,
        }) => assert_eq!((r, e, g), (row, expected, got)),
        other => panic!("expected Ragged, got {other:?}"),
    }
}

fn assert_hides(err: &IngestError, secret: &str) {
    assert!(
        !err.to_string().contains(secret),
        "the message echoes a value: {err}"
    );
}
