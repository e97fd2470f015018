//! Where parsed rows go. The checks every format shares live here, so CSV, JSON and NPY
//! refuse the same data with the same error: width (ragged rows, the column limit, empty
//! rows), finiteness, the row limit; then records are clipped and written, matrix rows held.

use std::io::{BufWriter, Write};

use super::clip::RowClip;
use super::stats_stream::{StatsStream, StreamedStats};
use super::symmetric::SymmetricRows;
use super::{IngestError, Ingested, Limits, Shape};

/// Output buffer size for records.
const WRITE_BUFFER: usize = 1 << 20;

enum Target<W: Write> {
    Records {
        clip: RowClip,
        out: BufWriter<W>,
        /// The statistics of the rows written, built as they go (when asked for).
        stats: Option<StatsStream>,
    },
    Matrix {
        rows: SymmetricRows,
        out: W,
    },
}

/// Validates rows as they arrive and forwards them to the output.
pub(super) struct RowSink<W: Write> {
    limits: Limits,
    /// Columns per row, fixed by the first row, a CSV header or an NPY header.
    width: Option<usize>,
    /// Rows accepted so far.
    rows: u64,
    target: Target<W>,
}

impl<W: Write> RowSink<W> {
    /// A sink writing to `output`; records also build their statistics when `keep_stats`.
    pub(super) fn new(
        shape: Shape,
        limits: Limits,
        output: W,
        keep_stats: bool,
    ) -> Result<Self, IngestError> {
        let target = match shape {
            Shape::Records { beta, alpha } => Target::Records {
                clip: RowClip::new(beta, alpha)?,
                out: BufWriter::with_capacity(WRITE_BUFFER, output),
                stats: keep_stats.then(StatsStream::default),
            },
            Shape::SymmetricMatrix => Target::Matrix {
                rows: SymmetricRows::default(),
                out: output,
            },
        };
        Ok(RowSink {
            limits,
            width: None,
            rows: 0,
            target,
        })
    }

    pub(super) fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The 1-based index the next row will have.
    pub(super) fn next_row(&self) -> u64 {
        self.rows + 1
    }

    pub(super) fn is_matrix(&self) -> bool {
        matches!(self.target, Target::Matrix { .. })
    }

    /// A shape declared before the data (an NPY header): refused early if it cannot fit.
    pub(super) fn announce(&mut self, rows: u64, cols: u64) -> Result<(), IngestError> {
        let max = &self.limits;
        if rows == 0 || cols == 0 {
            return Err(IngestError::Empty);
        }
        if cols > max.max_d as u64 {
            return Err(IngestError::TooManyColumns {
                d: cols,
                max: max.max_d as u64,
            });
        }
        if rows > max.max_rows {
            return Err(IngestError::TooManyRows { max: max.max_rows });
        }
        if self.is_matrix() && rows != cols {
            return Err(IngestError::NotSquare { rows, cols });
        }
        self.width = Some(cols as usize);
        Ok(())
    }

    /// The width of a CSV header record: later rows must match it.
    pub(super) fn declare_width(&mut self, cols: usize) -> Result<(), IngestError> {
        self.check_width(cols)?;
        self.width = Some(cols);
        Ok(())
    }

    /// Whether the next row may have `cols` columns.
    pub(super) fn check_width(&self, cols: usize) -> Result<(), IngestError> {
        match self.width {
            Some(d) if cols != d => Err(IngestError::Ragged {
                row: self.rows + 1,
                expected: d as u64,
                got: cols as u64,
            }),
            Some(_) => Ok(()),
            None if cols == 0 => Err(IngestError::Empty),
            None if cols > self.limits.max_d => Err(IngestError::TooManyColumns {
                d: cols as u64,
                max: self.limits.max_d as u64,
            }),
            None => Ok(()),
        }
    }

    /// Validates the next row and passes it on (records are clipped in place first).
    pub(super) fn push(&mut self, row: &mut [f64]) -> Result<(), IngestError> {
        self.check_width(row.len())?;
        let index = self.rows + 1;
        if let Some(c) = row.iter().position(|v| !v.is_finite()) {
            return Err(IngestError::NonFinite {
                row: index,
                col: c as u64 + 1,
            });
        }
        if index > self.limits.max_rows {
            return Err(IngestError::TooManyRows {
                max: self.limits.max_rows,
            });
        }
        self.rows = index;
        self.width = Some(row.len());
        match &mut self.target {
            Target::Records { clip, out, stats } => {
                clip.apply(row);
                if let Some(stats) = stats {
                    stats.push(row);
                }
                // Stored as little-endian f64, the machine's own layout (`super::load` refuses
                // to build for big-endian targets): the row's bytes as they are.
                out.write_all(bytemuck::cast_slice(row)).map_err(IngestError::Io)
            }
            Target::Matrix { rows, .. } => {
                rows.push(row);
                Ok(())
            }
        }
    }

    /// Completes the upload: the matrix checks, the last writes and the flush; with the
    /// records' statistics when they were asked for (and could be built).
    pub(super) fn finish(self) -> Result<(Ingested, Option<StreamedStats>), IngestError> {
        let (n, d) = match self.width {
            Some(d) if self.rows > 0 => (self.rows, d as u64),
            _ => return Err(IngestError::Empty),
        };
        let stats = match self.target {
            Target::Records { out, stats, .. } => {
                flush(out)?;
                stats.and_then(StatsStream::finish)
            }
            Target::Matrix { mut rows, out } => {
                if n != d {
                    return Err(IngestError::NotSquare { rows: n, cols: d });
                }
                rows.symmetrise().map_err(|(i, j)| IngestError::NotSymmetric {
                    row: i as u64 + 1,
                    col: j as u64 + 1,
                })?;
                let mut out = BufWriter::with_capacity(WRITE_BUFFER, out);
                rows.write_to(&mut out).map_err(IngestError::Io)?;
                flush(out)?;
                None
            }
        };
        Ok((Ingested { n, d }, stats))
    }
}

/// Empties the buffer and flushes the caller's writer too.
fn flush<W: Write>(out: BufWriter<W>) -> Result<(), IngestError> {
    let mut inner = out.into_inner().map_err(|e| IngestError::Io(e.into_error()))?;
    inner.flush().map_err(IngestError::Io)
}
