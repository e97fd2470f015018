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
