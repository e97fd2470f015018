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
fn a_matrix_market_banner_is_recognised_and_the_body_is_replayed_whole() {
    let body = b"%%MatrixMarket matrix coordinate real symmetric\n2 2 1\n1 1 0.5\n";
    assert_eq!(sniffed(body), (Some(Format::Mtx), body.to_vec()));
}

#[test]
fn other_bodies_have_no_format_and_lose_no_byte() {
    let bodies = [
        &b"1,2\n3,4\n"[..],
        b"[[1, 2]]",
        b"\x93NUMP",
        b"",
        b"\x93NUMPX...",
        b"%%MatrixMarke",
        b"%%matrixmarket matrix coordinate real symmetric\n",
        b"% a comment\n%%MatrixMarket matrix coordinate real symmetric\n",
    ];
    for body in bodies {
        assert_eq!(sniffed(body), (None, body.to_vec()), "{body:?}");
    }
}
