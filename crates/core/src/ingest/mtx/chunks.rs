//! The entry lines of a Matrix Market body (`super`), read in chunks of whole lines while a
//! second thread parses the chunk before, so that the parse overlaps the body's arrival; each
//! chunk is split into pieces parsed in parallel and taken in line order, so every check fails
//! at the same line as a sequential parse.

use std::io::{BufRead, Read};
use std::sync::mpsc;

use rayon::iter::{IntoParallelIterator, ParallelIterator};

use super::{Entry, Field, Symmetry, malformed};
use crate::ingest::IngestError;

/// Bytes of input parsed at a time (then up to the end of the line): small enough that little
/// is left to parse when the last byte arrives, large enough to split among the threads.
pub(super) const CHUNK_BYTES: usize = 2 << 20;

/// What the banner and the size line say.
#[derive(Debug, Clone, Copy)]
pub(super) struct Header {
    pub(super) n: u32,
    pub(super) field: Field,
    pub(super) symmetry: Symmetry,
    pub(super) declared: u64,
    pub(super) max_nnz: u64,
}

/// The entries parsed so far, in line order (with the mirror of each off-diagonal entry of a
/// `symmetric` file), and the line the next chunk starts after.
struct Collector {
    header: Header,
    entries: Vec<Entry>,
    seen: u64,
    line_base: u64,
}

impl Collector {
    /// Parses a chunk of whole lines, split into pieces parsed in parallel and then taken in
    /// line order, so every check fails at the same line as a sequential parse.
    fn add(&mut self, chunk: &[u8]) -> Result<(), IngestError> {
        let Header {
            n,
            field,
            symmetry,
            declared,
            max_nnz,
        } = self.header;
        let pieces = split_at_lines(chunk, 4 * rayon::current_num_threads());
        let parsed: Vec<Piece> = pieces.into_par_iter().map(|p| parse_piece(p, n, field)).collect();
        for piece in parsed {
            for mut entry in piece.entries {
                entry.line += self.line_base;
                self.seen += 1;
                if self.seen > declared {
                    return Err(malformed(
                        entry.line,
                        format!("more entries than the {declared} declared on the size line"),
                    ));
                }
                self.entries.push(entry);
                if symmetry == Symmetry::Symmetric && entry.row != entry.col {
                    self.entries.push(Entry {
                        row: entry.col,
                        col: entry.row,
                        ..entry
                    });
                }
                if self.entries.len() as u64 > max_nnz {
                    return Err(IngestError::TooManyNonzeros { max: max_nnz });
                }
            }
            if let Some((line, message)) = piece.error {
                return Err(malformed(self.line_base + line, message));
            }
            self.line_base += piece.lines;
        }
        Ok(())
    }

    /// The entries, once the input has ended: exactly the declared number, at least one.
    fn finish(self) -> Result<Vec<Entry>, IngestError> {
        let (seen, declared) = (self.seen, self.header.declared);
        if seen < declared {
            return Err(malformed(
                self.line_base + 1,
                format!("the file ends after {seen} of the {declared} entries declared on the size line"),
            ));
        }
        if self.entries.is_empty() {
            return Err(IngestError::Empty);
        }
        Ok(self.entries)
    }
}

/// The entry lines of `input`, read in chunks of whole lines on this thread while a second
/// thread parses the chunk before, so that the parse overlaps the body's arrival and little is
/// left when its last byte comes. Errors are those of a sequential parse: an error in a line
/// already read comes before a failure of the body after it (which the parser never saw), and
/// after a parse error nothing more is read.
pub(super) fn collect_entries(
    input: &mut impl BufRead,
    header: Header,
    lines_before: u64,
    chunk_bytes: usize,
) -> Result<Vec<Entry>, IngestError> {
    let mut collector = Collector {
        entries: Vec::with_capacity(usize::try_from(header.declared.min(1 << 24)).unwrap_or(0)),
        seen: 0,
        line_base: lines_before,
        header,
    };
    std::thread::scope(|scope| {
        // One chunk queued while one is parsed and one is read; parsed chunks come back to be
        // refilled.
        let (queue, chunks) = mpsc::sync_channel::<Vec<u8>>(1);
        let (give_back, spare) = mpsc::channel::<Vec<u8>>();
        let parser = scope.spawn(move || -> Result<Collector, IngestError> {
            for chunk in chunks {
                collector.add(&chunk)?;
                // The reader may have stopped already; then the buffer is simply dropped.
                let _ = give_back.send(chunk);
            }
            Ok(collector)
        });
        let read = loop {
            let mut chunk = spare
                .try_recv()
                .unwrap_or_else(|_| Vec::with_capacity(chunk_bytes + 4096));
            match read_chunk(input, &mut chunk, chunk_bytes) {
                // A refused send: the parser stopped at an error, which `join` returns.
                Ok(true) if queue.send(chunk).is_ok() => {}
                Ok(_) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        drop(queue);
        let collector = match parser.join() {
            Ok(parsed) => parsed?,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        read?;
        collector.finish()
    })
}

/// Reads about `chunk_bytes` of whole lines into `chunk` (replacing its contents); false at
/// the end of the input.
fn read_chunk(
    input: &mut impl BufRead,
    chunk: &mut Vec<u8>,
    chunk_bytes: usize,
) -> Result<bool, IngestError> {
    chunk.clear();
    (&mut *input)
        .take(chunk_bytes as u64)
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
