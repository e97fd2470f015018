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
/// `max_samples` is the study's limit on n; one more record is an error that says so. With
/// `empty_as` = Some(d), a file without records is zero records of d features (a site whose n
/// is private must not refuse because it holds none).
pub fn read_records(
    input: impl Read,
    format: Format,
    beta: f64,
    alpha: f64,
    max_samples: u64,
    empty_as: Option<usize>,
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
    let ingested = match (ingest::ingest(input, format, shape, &limits, &mut sink), empty_as) {
        (Err(IngestError::Empty), Some(d)) => {
            return Ok(Records {
                xt: Matrix::zeros(d, 0),
                n: 0,
                d,
            });
        }
        (other, _) => other,
    };
    let ingested = ingested.map_err(|e| match e {
        IngestError::TooManyRows { .. } => format!(
            "the data holds more than {max_samples} records, the most a site may hold in this study \
             (max_site_samples)"
        ),
        other => other.to_string(),
    })?;
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

/// [`read_records`] from a file.
pub fn load_records(
    path: &Path,
    format: Format,
    beta: f64,
    alpha: f64,
    max_samples: u64,
    empty_as: Option<usize>,
) -> Result<Records, String> {
    let file = File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    read_records(BufReader::new(file), format, beta, alpha, max_samples, empty_as)
        .map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
#[path = "data_tests.rs"]
mod tests;
