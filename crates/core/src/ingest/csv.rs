//! CSV uploads: comma-separated numbers, one row per record, streamed through `csv_core`.
//!
//! - An optional header: the first record is a header iff one of its fields is not a number;
//!   it fixes the width. Any later non-numeric field is [`IngestError::Malformed`].
//! - A header whose first name is empty (or pandas' `Unnamed: 0`) is the row index that
//!   `DataFrame.to_csv` writes unless `index=False`: refused ([`IngestError::IndexColumn`]),
//!   never stored as a feature.
//! - Fields are trimmed of ASCII whitespace and may be quoted; blank lines (also lines of
//!   only whitespace) are skipped; a UTF-8 byte-order mark is ignored; LF, CRLF and CR end
//!   records (line numbers in errors count LFs).
//! - Memory is O(d): one record's field bytes at a time, capped at
//!   [`MAX_FIELD_BYTES`] per field on average; a record wider than the column limit is
//!   counted, not stored.

use std::io::{Read, Write};

use csv_core::ReadRecordResult;

use super::IngestError;
use super::reader::read_some;
use super::sink::RowSink;

/// Input chunk size.
const CHUNK: usize = 1 << 16;
/// The longest field accepted, on average over a record. A number needs about 25 bytes.
const MAX_FIELD_BYTES: usize = 256;

/// Parses CSV from `input` into `sink`.
pub(super) fn parse<W: Write>(input: &mut impl Read, sink: &mut RowSink<W>) -> Result<(), IngestError> {
    let mut records = RecordReader::new(sink.limits().max_d);
    let mut row = Vec::new();
    let mut first = true;
    while let Some(record) = records.next(input)? {
        if record.is_blank() {
            continue;
        }
        let header_allowed = std::mem::replace(&mut first, false);
        sink.check_width(record.count)?;
        if !record.is_complete() {
            // Wider than the column limit; check_width has refused it already if d is known.
            let max = sink.limits().max_d as u64;
            return Err(IngestError::TooManyColumns {
                d: record.count as u64,
                max,
            });
        }
        row.clear();
        let mut bad = None;
        for (c, field) in record.fields().enumerate() {
            match parse_number(field) {
                Some(v) => row.push(v),
                None => {
                    bad = Some((c, field.is_empty()));
                    break;
                }
            }
        }
        match bad {
            None => sink.push(&mut row)?,
            Some(_) if header_allowed => {
                if record.count > 1 && record.fields().next().is_some_and(is_index_name) {
                    return Err(IngestError::IndexColumn { line: record.line });
                }
                sink.declare_width(record.count)?
            }
            Some((c, empty)) => {
                let what = if empty { "is empty" } else { "is not a number" };
                let message = format!("row {}, column {} {what}", sink.next_row(), c + 1);
                return Err(IngestError::Malformed {
                    line: record.line,
                    message,
                });
            }
        }
    }
    Ok(())
}

/// Whether a header name is the one pandas gives its row index: empty (`to_csv` with the
/// default `index=True`), or `Unnamed: 0` (such a file read back and written again).
fn is_index_name(name: &[u8]) -> bool {
    let name = name.trim_ascii();
    name.is_empty() || name.starts_with(b"Unnamed: 0")
}

/// A trimmed field as a number (NaN and infinities included; the sink refuses them).
fn parse_number(field: &[u8]) -> Option<f64> {
    std::str::from_utf8(field).ok()?.parse().ok()
}

/// One record: its unescaped field bytes and their end offsets.
struct Record<'a> {
    out: &'a [u8],
    ends: &'a [usize],
    /// Fields in the record, including any that were counted but not kept.
    count: usize,
    /// 1-based line of the record's end.
    line: u64,
}

impl Record<'_> {
    /// Whether every field was kept (the record is not wider than the column limit).
    fn is_complete(&self) -> bool {
        self.ends.len() == self.count
    }

    fn fields(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(self.ends.iter().copied())
            .map(|(s, e)| self.out[s..e].trim_ascii())
    }

    /// A line of only whitespace (csv_core itself skips empty lines).
    fn is_blank(&self) -> bool {
        self.count == 1 && self.is_complete() && self.fields().all(<[u8]>::is_empty)
    }
}

/// Reads records with bounded buffers.
struct RecordReader {
    core: csv_core::Reader,
    buf: Box<[u8]>,
    lo: usize,
    hi: usize,
    eof: bool,
    started: bool,
    out: Vec<u8>,
    ends: Vec<usize>,
    /// Fields kept per record: one more than the column limit, to detect wide records.
    max_fields: usize,
    max_out: usize,
}

impl RecordReader {
    fn new(max_d: usize) -> Self {
        let max_fields = max_d.saturating_add(1);
        RecordReader {
            core: csv_core::Reader::new(),
            buf: vec![0; CHUNK].into_boxed_slice(),
            lo: 0,
            hi: 0,
            eof: false,
            started: false,
            out: vec![0; 4096],
            ends: vec![0; 64.min(max_fields).max(1)],
            max_fields,
            max_out: max_fields.saturating_mul(MAX_FIELD_BYTES).max(CHUNK),
        }
    }

    /// Reads the next chunk; the first one holds at least 3 bytes (csv_core strips a BOM
    /// only if it sees all of it).
    fn refill(&mut self, input: &mut impl Read) -> Result<(), IngestError> {
        let want = if self.started { 1 } else { 3 };
        self.started = true;
        self.lo = 0;
        self.hi = 0;
        while self.hi < want {
            let n = read_some(input, &mut self.buf[self.hi..])?;
            if n == 0 {
                self.eof = self.hi == 0;
                break;
            }
            self.hi += n;
        }
        Ok(())
    }

    fn next(&mut self, input: &mut impl Read) -> Result<Option<Record<'_>>, IngestError> {
        let (mut olen, mut elen, mut dropped) = (0usize, 0usize, 0usize);
        let mut last_byte = None;
        loop {
            if self.lo == self.hi && !self.eof {
                self.refill(input)?;
            }
            let chunk = &self.buf[self.lo..self.hi];
            let (res, nin, nout, nend) =
                self.core
                    .read_record(chunk, &mut self.out[olen..], &mut self.ends[elen..]);
            self.lo += nin;
            if nin > 0 {
                last_byte = Some(self.buf[self.lo - 1]);
            }
            olen += nout;
            elen += nend;
            match res {
                ReadRecordResult::InputEmpty => {
                    if self.eof {
                        return Ok(None);
                    }
                }
                ReadRecordResult::OutputFull if dropped > 0 => olen = 0,
                ReadRecordResult::OutputFull => {
                    if self.out.len() >= self.max_out {
                        let message = format!(
                            "a field is longer than {MAX_FIELD_BYTES} bytes on average; \
                             is this a file of numbers?"
                        );
                        return Err(IngestError::Malformed {
                            line: self.core.line(),
                            message,
                        });
                    }
                    let grown = (self.out.len() * 2).min(self.max_out);
                    self.out.resize(grown, 0);
                }
                ReadRecordResult::OutputEndsFull if self.ends.len() >= self.max_fields => {
                    // Wider than the limit: keep counting fields, drop their contents.
                    dropped += elen;
                    (olen, elen) = (0, 0);
                }
                ReadRecordResult::OutputEndsFull => {
                    let grown = (self.ends.len() * 2).min(self.max_fields);
                    self.ends.resize(grown, 0);
                }
                ReadRecordResult::Record => {
                    // csv_core counts LFs; a record ending in LF has had its LF counted (a
                    // CRLF record ends at the CR, its LF is consumed with the next record).
                    let ends_with_lf = !self.eof && last_byte == Some(b'\n');
                    let line = self.core.line() - u64::from(ends_with_lf);
                    let (ends, count) = if dropped > 0 {
                        (&self.ends[..0], dropped + elen)
                    } else {
                        (&self.ends[..elen], elen)
                    };
                    return Ok(Some(Record {
                        out: &self.out[..olen],
                        ends,
                        count,
                        line,
                    }));
                }
                ReadRecordResult::End => return Ok(None),
            }
        }
    }
}
