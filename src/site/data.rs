//! Loading the site's records with the service's own ingest code: parsed, checked (finite,
//! rectangular) and clipped per row to the study's public bounds, then held as Xᵀ (d×n, one
//! record per column), as `crate::linalg` expects. Nothing here prints a value.

use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::Path;

use crate::ingest::{self, Format, IngestError, Limits, Shape};
use crate::linalg::Matrix;

/// Most bytes read from a data file (64 GiB).
const MAX_BYTES: u64 = 64 << 30;
/// Most columns accepted before the check against the study's d.
const MAX_D: usize = 100_000;

/// The site's clipped records.
pub struct Records {
    /// Xᵀ, d×n.
    pub xt: Matrix,
    pub n: usize,
    pub d: usize,
}

/// Collects ingest's row-major little-endian f64 output straight into a `Vec<f64>`, so the
/// data is held once.
#[derive(Default)]
struct F64Sink {
    values: Vec<f64>,
    pending: [u8; 8],
    filled: usize,
}

impl Write for F64Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut rest = buf;
        if self.filled > 0 {
            let take = (8 - self.filled).min(rest.len());
            self.pending[self.filled..self.filled + take].copy_from_slice(&rest[..take]);
            self.filled += take;
            rest = &rest[take..];
            if self.filled < 8 {
                return Ok(buf.len());
            }
            self.values.push(f64::from_le_bytes(self.pending));
            self.filled = 0;
        }
        let (words, tail) = rest.as_chunks::<8>();
        self.values.extend(words.iter().map(|w| f64::from_le_bytes(*w)));
        self.pending[..tail.len()].copy_from_slice(tail);
        self.filled = tail.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Parses and clips records from `input`: rows clipped to ‖x‖₂ ≤ `beta` and ‖x‖₁ ≤ `alpha`.
/// `max_samples` is the study's limit on n; one more record is an error that says so. (The
/// client loads files through [`load_records_or_empty`]; the tests parse text with this.)
#[cfg(test)]
pub fn read_records(
    input: impl Read,
    format: Format,
    beta: f64,
    alpha: f64,
    max_samples: u64,
) -> Result<Records, String> {
    read_or_empty(input, format, beta, alpha, max_samples, None)
}

/// [`read_records`], except that data with no rows is `empty_d`'s zero records (d×0) when it is
/// given: a CAPE site under add_remove takes part whatever its n, 0 included.
fn read_or_empty(
    input: impl Read,
    format: Format,
    beta: f64,
    alpha: f64,
    max_samples: u64,
    empty_d: Option<usize>,
) -> Result<Records, String> {
    let limits = Limits {
        max_bytes: MAX_BYTES,
        // One more row stops the parse with a clear message.
        max_rows: max_samples,
        max_d: MAX_D,
    };
    let shape = Shape::Records {
        beta,
        alpha: Some(alpha),
    };
    let mut sink = F64Sink::default();
    let ingested = match ingest::ingest(input, format, shape, &limits, &mut sink) {
        Ok(ingested) => ingested,
        Err(IngestError::Empty) if empty_d.is_some() => {
            let d = empty_d.unwrap_or(0);
            return Ok(Records {
                xt: Matrix::zeros(d, 0),
                n: 0,
                d,
            });
        }
        Err(IngestError::TooManyRows { .. }) => {
            return Err(format!(
                "the data holds more than {max_samples} records, the most a site may hold in this study \
                 (max_site_samples)"
            ));
        }
        Err(other) => return Err(other.to_string()),
    };
    let (Ok(n), Ok(d)) = (usize::try_from(ingested.n), usize::try_from(ingested.d)) else {
        return Err("the data is too large for this machine".to_owned());
    };
    if sink.filled != 0 || Some(sink.values.len()) != n.checked_mul(d) {
        return Err("internal error: the parsed data has the wrong length".to_owned());
    }
    // Row-major n×d read column-major is Xᵀ (d×n).
    let xt = Matrix::from_vec(d, n, sink.values);
    Ok(Records { xt, n, d })
}

/// [`read_records`] from a file, or, with `empty_d`, zero records of that width when the file
/// holds no rows.
pub fn load_records_or_empty(
    path: &Path,
    format: Format,
    beta: f64,
    alpha: f64,
    max_samples: u64,
    empty_d: Option<usize>,
) -> Result<Records, String> {
    let file = File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    read_or_empty(BufReader::new(file), format, beta, alpha, max_samples, empty_d)
        .map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_csv_is_loaded_transposed_and_clipped() {
        let csv = "a,b\n3,4\n0.3,0.4\n-6,8\n";
        let records = read_records(csv.as_bytes(), Format::Csv, 1.0, 2.0, 10).expect("loads");
        assert_eq!((records.n, records.d), (3, 2));
        assert_eq!(records.xt.shape(), (2, 3));
        // Row 1 (‖x‖₂ = 5) is scaled to norm 1, row 2 kept, row 3 (norm 10) scaled to norm 1.
        let expected = [[0.6, 0.8], [0.3, 0.4], [-0.6, 0.8]];
        for (j, row) in expected.iter().enumerate() {
            for (i, want) in row.iter().enumerate() {
                assert!((records.xt[(i, j)] - want).abs() < 1e-12, "({i}, {j})");
            }
        }
    }

    #[test]
    fn the_l1_bound_clips_too() {
        let records = read_records("1,1\n".as_bytes(), Format::Csv, 10.0, 1.0, 10).expect("loads");
        assert!((records.xt[(0, 0)] - 0.5).abs() < 1e-12);
        assert!((records.xt[(1, 0)] - 0.5).abs() < 1e-12);
    }

    #[test]
    fn no_rows_are_zero_records_only_when_asked() {
        for text in ["", "a,b\n"] {
            let records = read_or_empty(text.as_bytes(), Format::Csv, 1.0, 2.0, 10, Some(2)).expect("empty");
            assert_eq!((records.n, records.d, records.xt.shape()), (0, 2, (2, 0)));
            assert!(read_records(text.as_bytes(), Format::Csv, 1.0, 2.0, 10).is_err());
        }
    }

    #[test]
    fn more_records_than_the_study_allows_are_refused() {
        let csv = "1,0\n0,1\n1,1\n";
        let err = read_records(csv.as_bytes(), Format::Csv, 1.0, 2.0, 2)
            .err()
            .expect("refused");
        assert!(err.contains("more than 2 records"), "{err}");
        assert!(read_records(csv.as_bytes(), Format::Csv, 1.0, 2.0, 3).is_ok());
    }

    #[test]
    fn bad_values_are_reported_without_echoing_them() {
        let err = read_records("1,2\n3,nan\n".as_bytes(), Format::Csv, 1.0, 2.0, 10)
            .err()
            .expect("refused");
        assert!(err.contains("row 2"), "{err}");
        assert!(read_records("1,2\n3\n".as_bytes(), Format::Csv, 1.0, 2.0, 10).is_err());
    }

    #[test]
    fn json_and_the_sink_across_odd_writes() {
        let records =
            read_records("[[0.5, 0], [0, 0.5]]".as_bytes(), Format::Json, 1.0, 2.0, 10).expect("json");
        assert_eq!(records.xt.as_slice(), &[0.5, 0.0, 0.0, 0.5]);
        let mut sink = F64Sink::default();
        let bytes: Vec<u8> = [1.5f64, -2.0, 3.25]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        for chunk in bytes.chunks(3) {
            sink.write_all(chunk).expect("write");
        }
        assert_eq!(sink.values, vec![1.5, -2.0, 3.25]);
        assert_eq!(sink.filled, 0);
    }
}
