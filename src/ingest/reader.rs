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
mod tests {
    use super::*;

    /// Yields its bytes, then fails with `ConnectionReset`.
    struct BreaksOff(&'static [u8]);

    impl Read for BreaksOff {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() {
                return Err(io::Error::new(io::ErrorKind::ConnectionReset, "client went away"));
            }
            let n = self.0.len().min(buf.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn exactly_max_bytes_is_allowed_one_more_is_too_large() {
        let data = [7u8; 10];
        let mut ok = BodyReader::new(&data[..], 10);
        let mut out = Vec::new();
        assert_eq!(ok.read_to_end(&mut out).ok(), Some(10));

        let mut over = BodyReader::new(&data[..], 9);
        assert!(over.read_to_end(&mut Vec::new()).is_err());
        let err = over.explain(IngestError::Empty);
        assert!(matches!(err, IngestError::TooLarge { max_bytes: 9 }), "{err:?}");
    }

    #[test]
    fn a_broken_body_is_a_read_error_even_if_the_parser_says_otherwise() {
        let mut body = BodyReader::new(BreaksOff(b"1,2\n3,"), 100);
        let mut out = Vec::new();
        assert!(body.read_to_end(&mut out).is_err());
        assert_eq!(out, b"1,2\n3,");
        let err = body.explain(IngestError::Malformed {
            line: 2,
            message: "eof".into(),
        });
        match err {
            IngestError::Read(e) => assert_eq!(e.kind(), io::ErrorKind::ConnectionReset),
            other => panic!("expected Read, got {other:?}"),
        }
    }

    #[test]
    fn parser_errors_pass_through_when_the_body_is_fine() {
        let mut body = BodyReader::new(&b"abc"[..], 100);
        assert_eq!(body.read_to_end(&mut Vec::new()).ok(), Some(3));
        assert!(matches!(body.explain(IngestError::Empty), IngestError::Empty));
    }
}
