//! Row and byte limits, a body that breaks off (a client error) and an output that fails (a
//! server error), in every format.

use std::io::{self, Read, Write};

use super::*;

#[test]
fn row_and_byte_limits() {
    let two_rows = Limits {
        max_rows: 2,
        ..LIMITS
    };
    assert!(run_with(b"1\n2\n", Format::Csv, RAW, two_rows).is_ok());
    let err = run_with(b"1\n2\n3\n", Format::Csv, RAW, two_rows).expect_err("three rows");
    assert!(matches!(err, IngestError::TooManyRows { max: 2 }));
    let err = run_with(b"[[1],[2],[3]]", Format::Json, RAW, two_rows).expect_err("three rows");
    assert!(matches!(err, IngestError::TooManyRows { max: 2 }));

    let text = b"1,2\n3,4\n"; // 8 bytes
    assert!(
        run_with(
            text,
            Format::Csv,
            RAW,
            Limits {
                max_bytes: 8,
                ..LIMITS
            }
        )
        .is_ok()
    );
    for format in [Format::Csv, Format::Json] {
        let err = run_with(
            text,
            format,
            RAW,
            Limits {
                max_bytes: 7,
                ..LIMITS
            },
        )
        .expect_err("9th byte");
        assert!(
            matches!(err, IngestError::TooLarge { max_bytes: 7 }),
            "{format:?}: {err:?}"
        );
    }
    let file = npy64(&vec![vec![1.0; 10]; 10]);
    let limits = Limits {
        max_bytes: file.len() as u64 - 1,
        ..LIMITS
    };
    let err = run_with(&[file.as_slice(), b"trailing"].concat(), Format::Npy, RAW, limits).expect_err("big");
    assert!(matches!(err, IngestError::TooLarge { .. }), "{err:?}");
}

/// A body that yields its bytes a few at a time, then fails like a dropped connection.
struct BrokenBody<'a>(&'a [u8]);

impl Read for BrokenBody<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.0.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "client went away",
            ));
        }
        let n = self.0.len().min(buf.len()).min(3);
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

#[test]
fn a_broken_body_is_a_client_read_error_in_every_format() {
    let npy = npy64(&[vec![1.0, 2.0], vec![3.0, 4.0]]);
    let bodies: [(&[u8], Format); 3] = [
        (b"1,2\n3,4\n5,", Format::Csv),
        (b"[[1,2],[3,", Format::Json),
        (&npy[..npy.len() - 4], Format::Npy),
    ];
    for (bytes, format) in bodies {
        let err = ingest(BrokenBody(bytes), format, RAW, &LIMITS, io::sink()).expect_err("broken");
        assert!(
            matches!(&err, IngestError::Read(e) if e.kind() == io::ErrorKind::ConnectionAborted),
            "{err:?}"
        );
        assert!(err.is_client_error());
    }
}

struct FullDisk;

impl Write for FullDisk {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::Error::new(io::ErrorKind::StorageFull, "no space"))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_failing_output_is_a_server_error() {
    for shape in [RAW, Shape::SymmetricMatrix] {
        let err = ingest(&b"1,0\n0,1\n"[..], Format::Csv, shape, &LIMITS, FullDisk).expect_err("disk full");
        assert!(
            matches!(&err, IngestError::Io(e) if e.kind() == io::ErrorKind::StorageFull),
            "{err:?}"
        );
        assert!(!err.is_client_error());
    }
}
