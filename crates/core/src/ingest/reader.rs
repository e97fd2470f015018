//! The upload body as the parsers see it: a reader that enforces the byte limit and remembers
//! why reading stopped, so that a parser's error caused by the body (too long, broken off) is
//! reported as such and not as a parse error.

use std::io::{self, Read};

use super::IngestError;

/// Why the body stopped yielding bytes.
#[derive(Debug)]
enum Failure {
    TooLarge,
    Io(io::Error),
}

/// Counts the bytes read from the body, fails once more than `max_bytes` arrive, and keeps the
/// first read failure (the parsers only see a placeholder error).
pub(super) struct BodyReader<R> {
    inner: R,
    read: u64,
    max_bytes: u64,
    failure: Option<Failure>,
}

impl<R: Read> BodyReader<R> {
    pub(super) fn new(inner: R, max_bytes: u64) -> Self {
        BodyReader {
            inner,
            read: 0,
            max_bytes,
            failure: None,
        }
    }

    /// Replaces a parser's error by the body failure that caused it, if there was one.
    pub(super) fn explain(&mut self, err: IngestError) -> IngestError {
        match self.failure.take() {
            Some(Failure::TooLarge) => IngestError::TooLarge {
                max_bytes: self.max_bytes,
            },
            Some(Failure::Io(e)) => IngestError::Read(e),
            None => err,
        }
    }

    fn placeholder() -> io::Error {
        io::Error::other("the upload body failed")
    }
}

impl<R: Read> Read for BodyReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.failure.is_some() {
            return Err(Self::placeholder());
        }
        if buf.is_empty() {
            return Ok(0);
        }
        // Ask for at most one byte beyond the limit: enough to notice that it was exceeded.
        let allowed = self.max_bytes.saturating_sub(self.read).saturating_add(1);
        let take = usize::try_from(allowed).map_or(buf.len(), |a| a.min(buf.len()));
        match self.inner.read(&mut buf[..take]) {
            Ok(n) => {
                self.read += n as u64;
                if self.read > self.max_bytes {
                    self.failure = Some(Failure::TooLarge);
                    return Err(Self::placeholder());
                }
                Ok(n)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Err(e),
            Err(e) => {
                self.failure = Some(Failure::Io(e));
                Err(Self::placeholder())
            }
        }
    }
}

/// One `read` into `buf`, retrying on `Interrupted`; errors become [`IngestError::Read`]
/// (which [`BodyReader::explain`] then refines).
pub(super) fn read_some(input: &mut impl Read, buf: &mut [u8]) -> Result<usize, IngestError> {
    loop {
        match input.read(buf) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(IngestError::Read(e)),
        }
    }
}

/// Fills `buf` completely; `Ok(false)` if the input ended first (`buf` is then partly filled).
pub(super) fn read_full(input: &mut impl Read, buf: &mut [u8]) -> Result<bool, IngestError> {
    let mut filled = 0;
    while filled < buf.len() {
        let n = read_some(input, &mut buf[filled..])?;
        if n == 0 {
            return Ok(false);
        }
        filled += n;
    }
    Ok(true)
}

#[cfg(test)]
#[path = "reader_tests.rs"]
mod tests;
