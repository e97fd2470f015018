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
#[path = "sniff_tests.rs"]
mod tests;
