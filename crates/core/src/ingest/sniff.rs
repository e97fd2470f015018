//! Telling an upload's format from its first bytes, for bodies sent as
//! `application/octet-stream` (what generated clients send for a file). Two formats announce
//! themselves: `.npy` by its magic string (`\x93NUMPY`) and Matrix Market by its banner
//! (`%%MatrixMarket`, which the format requires on the first line and which no CSV or JSON
//! body can start with); CSV and JSON must be named by the client.

use std::io::{self, Chain, Cursor, Read};

use super::Format;

/// The body again: the bytes already peeked, then the rest of the input.
pub type Replayed<R> = Chain<Cursor<Vec<u8>>, R>;

/// The `.npy` magic string.
pub const NPY_MAGIC: &[u8] = b"\x93NUMPY";

/// The first bytes of every Matrix Market file (the banner's first word, as the format spells
/// it; `scipy.io.mmwrite` writes it so).
pub const MTX_BANNER: &[u8] = b"%%MatrixMarket";

/// Reads up to the longer magic's length from `input` and returns the format it announces
/// (`.npy`, Matrix Market, or `None`) with a reader that yields the whole body again, the
/// peeked bytes first.
pub fn sniff<R: Read>(mut input: R) -> io::Result<(Option<Format>, Replayed<R>)> {
    const PEEK: usize = MTX_BANNER.len();
    let mut prefix = Vec::with_capacity(PEEK);
    while prefix.len() < PEEK {
        let mut byte = [0u8; PEEK];
        let wanted = PEEK - prefix.len();
        match input.read(&mut byte[..wanted]) {
            Ok(0) => break,
            Ok(read) => prefix.extend_from_slice(&byte[..read]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let format = if prefix.starts_with(NPY_MAGIC) {
        Some(Format::Npy)
    } else if prefix == MTX_BANNER {
        Some(Format::Mtx)
    } else {
        None
    };
    Ok((format, Cursor::new(prefix).chain(input)))
}

#[cfg(test)]
#[path = "sniff_tests.rs"]
mod tests;
