//! Telling an upload's format from its first bytes, for bodies sent as
//! `application/octet-stream` (what generated clients send for a file). Only `.npy` has a
//! magic string (`\x93NUMPY`); CSV and JSON must be named by the client.

use std::io::{self, Chain, Cursor, Read};

use super::Format;

/// The body again: the bytes already peeked, then the rest of the input.
pub type Replayed<R> = Chain<Cursor<Vec<u8>>, R>;

/// The `.npy` magic string.
pub const NPY_MAGIC: &[u8] = b"\x93NUMPY";

/// Reads up to the magic's length from `input` and returns the format it announces (`.npy`,
/// or `None`) with a reader that yields the whole body again, the peeked bytes first.
pub fn sniff<R: Read>(mut input: R) -> io::Result<(Option<Format>, Replayed<R>)> {
    let mut prefix = Vec::with_capacity(NPY_MAGIC.len());
    while prefix.len() < NPY_MAGIC.len() {
        let mut byte = [0u8; 6];
        let wanted = NPY_MAGIC.len() - prefix.len();
        match input.read(&mut byte[..wanted]) {
            Ok(0) => break,
            Ok(read) => prefix.extend_from_slice(&byte[..read]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let format = (prefix == NPY_MAGIC).then_some(Format::Npy);
    Ok((format, Cursor::new(prefix).chain(input)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out one byte per call, as a slow network stream may.
    struct Trickle<'a>(&'a [u8]);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            match (self.0.split_first(), buf.first_mut()) {
                (Some((first, rest)), Some(slot)) => {
                    *slot = *first;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    fn sniffed(bytes: &[u8]) -> (Option<Format>, Vec<u8>) {
        let (format, mut reader) = sniff(Trickle(bytes)).expect("in-memory read");
        let mut again = Vec::new();
        reader.read_to_end(&mut again).expect("in-memory read");
        (format, again)
    }

    #[test]
    fn npy_magic_is_recognised_and_the_body_is_replayed_whole() {
        let body = b"\x93NUMPY\x01\x00rest of the file";
        assert_eq!(sniffed(body), (Some(Format::Npy), body.to_vec()));
    }

    #[test]
    fn other_bodies_have_no_format_and_lose_no_byte() {
        for body in [&b"1,2\n3,4\n"[..], b"[[1, 2]]", b"\x93NUMP", b"", b"\x93NUMPX..."] {
            assert_eq!(sniffed(body), (None, body.to_vec()), "{body:?}");
        }
    }
}
