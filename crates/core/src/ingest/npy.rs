//! `.npy` uploads (NumPy format versions 1–3): a 2-D `float64`, `float32`, integer or bool
//! array, little- or big-endian, in C or Fortran order. The header is parsed by npyz; the data is decoded here in blocks
//! of whole rows, so memory is O(d) beyond a fixed 1 MiB buffer.
//!
//! Fortran order (`fortran_order: True`, what `np.save` writes for a column slice `X[:, b]`, a
//! transpose or any F-contiguous array) is read as the same data. Where the order cannot change
//! the result it streams as C order does: symmetric matrices (the bytes then read as Aᵀ, and both
//! the symmetry check and (A + Aᵀ)/2 are invariant under transposition) and single rows or
//! columns (same bytes either way). A Fortran-ordered records array stores column after column,
//! so its rows cannot be streamed: the data is first copied to an anonymous temporary file
//! (`tempfile::tempfile`: created 0600 in `TMPDIR` and unlinked at once, so it goes with the
//! process), then read back a block of rows at a time, one seek per column and block
//! ([`read_fortran_rows`]): memory stays O(d) beyond the 1 MiB block, at the cost of writing the
//! data once more to disk.

use std::io::{Read, Seek, SeekFrom, Write};

use npyz::{DType, Endianness, NpyHeader, Order, TypeChar};
use py_literal::Value;

use super::IngestError;
use super::reader::{read_full, read_some};
use super::sink::RowSink;

/// Largest header accepted (NumPy itself refuses headers over 10 000 bytes by default).
const MAX_HEADER: usize = 1 << 16;
/// Deepest bracket nesting accepted in the header (a plain 2-D header has 1).
const MAX_NESTING: usize = 8;
/// Data is read in blocks of whole rows of about this many bytes.
const BLOCK: usize = 1 << 20;

/// What an element's bytes hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Float,
    Int,
    Uint,
    Bool,
}

/// Element encoding: a float (f64 or f32), a signed or unsigned integer (1, 2, 4 or 8 bytes) or
/// a bool, in either byte order.
#[derive(Debug, Clone, Copy)]
struct Element {
    kind: Kind,
    size: usize,
    big_endian: bool,
}

impl Element {
    fn decode(self, bytes: &[u8], row: &mut Vec<f64>) {
        row.clear();
        if self.kind != Kind::Float {
            row.extend(bytes.chunks_exact(self.size).map(|b| self.integer(b)));
            return;
        }
        match (self.size, self.big_endian) {
            (8, false) => row.extend(bytes.as_chunks::<8>().0.iter().map(|b| f64::from_le_bytes(*b))),
            (8, true) => row.extend(bytes.as_chunks::<8>().0.iter().map(|b| f64::from_be_bytes(*b))),
            (_, false) => row.extend(
                bytes
                    .as_chunks::<4>()
                    .0
                    .iter()
                    .map(|b| f64::from(f32::from_le_bytes(*b))),
            ),
            (_, true) => row.extend(
                bytes
                    .as_chunks::<4>()
                    .0
                    .iter()
                    .map(|b| f64::from(f32::from_be_bytes(*b))),
            ),
        }
    }
}

impl Element {
    /// An integer or bool element as f64, as `x.astype(np.float64)` converts it (exact up to
    /// 2⁵³ in magnitude, rounded to nearest beyond).
    fn integer(self, bytes: &[u8]) -> f64 {
        let mut le = [0u8; 8];
        le[..self.size].copy_from_slice(bytes);
        if self.big_endian {
            le[..self.size].reverse();
        }
        let raw = u64::from_le_bytes(le);
        match self.kind {
            Kind::Int => {
                let shift = 64 - 8 * self.size as u32;
                ((raw << shift) as i64 >> shift) as f64
            }
            Kind::Bool => f64::from(u8::from(raw != 0)),
            Kind::Uint | Kind::Float => raw as f64,
        }
    }
}

/// Parses an `.npy` file from `input` into `sink`.
pub(super) fn parse<W: Write>(input: &mut impl Read, sink: &mut RowSink<W>) -> Result<(), IngestError> {
    let (header, header_len) = read_header(input)?;
    let [rows, cols] = *header.shape() else {
        return Err(IngestError::UnsupportedNpy(format!(
            "expected a 2-D array (rows × columns), got {} dimensions; \
             reshape a single row or column with x.reshape(1, -1) or x.reshape(-1, 1)",
            header.shape().len()
        )));
    };
    let element = element(&header.dtype())?;
    let column_major = header.order() == Order::Fortran && !sink.is_matrix() && rows > 1 && cols > 1;
    sink.announce(rows, cols)?;
    let data_bytes = (rows as u128) * (cols as u128) * (element.size as u128);
    let max_bytes = sink.limits().max_bytes;
    if header_len as u128 + data_bytes > max_bytes as u128 {
        return Err(IngestError::TooLarge { max_bytes });
    }
    if column_major {
        read_fortran_rows(input, sink, element, rows, cols as usize)?;
    } else {
        read_rows(input, sink, element, rows, cols as usize)?;
    }
    let mut probe = [0u8; 1];
    if read_some(input, &mut probe)? != 0 {
        return Err(IngestError::InvalidNpy("bytes follow the array data".into()));
    }
    Ok(())
}

/// Reads `rows` rows of `cols` elements in blocks and pushes them to the sink.
fn read_rows<W: Write>(
    input: &mut impl Read,
    sink: &mut RowSink<W>,
    element: Element,
    rows: u64,
    cols: usize,
) -> Result<(), IngestError> {
    let row_bytes = cols * element.size;
    let block_rows = (BLOCK / row_bytes).max(1) as u64;
    let mut block = vec![0u8; row_bytes * block_rows.min(rows) as usize];
    let mut row = Vec::with_capacity(cols);
    let mut done = 0u64;
    while done < rows {
        let take = block_rows.min(rows - done) as usize;
        let bytes = &mut block[..take * row_bytes];
        if !read_full(input, bytes)? {
            return Err(truncated(rows, cols));
        }
        for chunk in bytes.chunks_exact(row_bytes) {
            element.decode(chunk, &mut row);
            sink.push(&mut row)?;
        }
        done += take as u64;
    }
    Ok(())
}

/// Reads a column-major `rows` × `cols` array: copies it to an anonymous temporary file, then
/// pushes its rows to the sink a block of rows at a time, gathering each block's segment of
/// every column (one seek per column and block).
fn read_fortran_rows<W: Write>(
    input: &mut impl Read,
    sink: &mut RowSink<W>,
    element: Element,
    rows: u64,
    cols: usize,
) -> Result<(), IngestError> {
    let mut spool = tempfile::tempfile().map_err(spool_error)?;
    let mut left = rows * cols as u64 * element.size as u64;
    let mut buffer = vec![0u8; (BLOCK as u64).min(left) as usize];
    while left > 0 {
        let take = (buffer.len() as u64).min(left) as usize;
        if !read_full(input, &mut buffer[..take])? {
            return Err(truncated(rows, cols));
        }
        spool.write_all(&buffer[..take]).map_err(spool_error)?;
        left -= take as u64;
    }
    let size = element.size;
    let block_rows = (BLOCK / (cols * size)).max(1) as u64;
    let mut segment = vec![0u8; block_rows.min(rows) as usize * size];
    let mut block = vec![0u8; block_rows.min(rows) as usize * cols * size];
    let mut row = Vec::with_capacity(cols);
    let mut done = 0u64;
    while done < rows {
        let take = block_rows.min(rows - done) as usize;
        for j in 0..cols {
            let at = (j as u64 * rows + done) * size as u64;
            spool.seek(SeekFrom::Start(at)).map_err(spool_error)?;
            spool
                .read_exact(&mut segment[..take * size])
                .map_err(spool_error)?;
            for (i, value) in segment[..take * size].chunks_exact(size).enumerate() {
                let to = (i * cols + j) * size;
                block[to..to + size].copy_from_slice(value);
            }
        }
        for chunk in block[..take * cols * size].chunks_exact(cols * size) {
            element.decode(chunk, &mut row);
            sink.push(&mut row)?;
        }
        done += take as u64;
    }
    Ok(())
}

/// The data ended before the `rows` × `cols` values its header declares.
fn truncated(rows: u64, cols: usize) -> IngestError {
    IngestError::InvalidNpy(format!(
        "the data ends early: the header declares {rows} × {cols} values (truncated upload?)"
    ))
}

/// A failure of the temporary copy of a Fortran-ordered array: the machine's, not the file's.
fn spool_error(e: std::io::Error) -> IngestError {
    IngestError::Io(std::io::Error::new(
        e.kind(),
        format!("the temporary copy of a fortran_order=True array failed: {e}"),
    ))
}

/// The supported element types, in either byte order: float64 and float32 (`<f8`, `>f4`, ...),
/// signed and unsigned integers of 1, 2, 4 or 8 bytes (`<i8`, `|u1`, ...: genotype and count
/// matrices are saved as integers) and bool (`|b1`), each read as the f64 NumPy's
/// `astype(np.float64)` gives.
fn element(dtype: &DType) -> Result<Element, IngestError> {
    let unsupported = || {
        IngestError::UnsupportedNpy(format!(
            "dtype {} is not supported; use a float, integer or bool array (x.astype(np.float64))",
            dtype.descr()
        ))
    };
    let DType::Plain(ts) = dtype else {
        return Err(unsupported());
    };
    let size = ts.size_field() as usize;
    let kind = match (ts.type_char(), size) {
        (TypeChar::Float, 4 | 8) => Kind::Float,
        (TypeChar::Int, 1 | 2 | 4 | 8) => Kind::Int,
        (TypeChar::Uint, 1 | 2 | 4 | 8) => Kind::Uint,
        (TypeChar::Bool, 1) => Kind::Bool,
        _ => return Err(unsupported()),
    };
    let big_endian = match ts.endianness() {
        Endianness::Little => false,
        Endianness::Big => true,
        // One-byte types carry no byte order (`|u1`, `|b1`).
        Endianness::Irrelevant if size == 1 => false,
        Endianness::Irrelevant => return Err(unsupported()),
    };
    Ok(Element {
        kind,
        size,
        big_endian,
    })
}

/// The start of an `.npy` file in format 1.0: magic, version, header length and the header
/// dictionary `dict`, padded with spaces and ended by a newline so that the data starts at a
/// multiple of 64 bytes, as the format requires. The data follows it.
pub fn npy_preamble(dict: &str) -> Vec<u8> {
    // Magic (6) + version (2) + header length (2) + header + '\n' is a multiple of 64.
    let unpadded = 10 + dict.len() + 1;
    let text_len = dict.len() + (64 - unpadded % 64) % 64 + 1;
    let mut out = Vec::with_capacity(10 + text_len);
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(text_len as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.resize(10 + text_len - 1, b' ');
    out.push(b'\n');
    out
}

/// Reads the magic, version, header length and header text, checks them, and lets npyz
/// interpret the header. Returns the header and its total length in bytes.
fn read_header(input: &mut impl Read) -> Result<(NpyHeader, usize), IngestError> {
    let short = || IngestError::InvalidNpy("the file ends inside the header".into());
    let mut prefix = vec![0u8; 10];
    if !read_full(input, &mut prefix)? {
        return Err(IngestError::InvalidNpy("too short to be an .npy file".into()));
    }
    if &prefix[..6] != b"\x93NUMPY" {
        return Err(IngestError::InvalidNpy(
            "not an .npy file (the \\x93NUMPY magic is missing)".into(),
        ));
    }
    let text_len = match prefix[6] {
        1 => u16::from_le_bytes([prefix[8], prefix[9]]) as usize,
        2 | 3 => {
            prefix.resize(12, 0);
            if !read_full(input, &mut prefix[10..])? {
                return Err(short());
            }
            u32::from_le_bytes([prefix[8], prefix[9], prefix[10], prefix[11]]) as usize
        }
        major => {
            return Err(IngestError::UnsupportedNpy(format!(
                "format version {major}.{}; versions 1.0 to 3.0 are supported",
                prefix[7]
            )));
        }
    };
    if text_len > MAX_HEADER {
        return Err(IngestError::UnsupportedNpy(format!(
            "a header of {text_len} bytes (at most {MAX_HEADER} are accepted)"
        )));
    }
    let mut text = vec![0u8; text_len];
    if !read_full(input, &mut text)? {
        return Err(short());
    }
    check_header_text(&text)?;
    let total = prefix.len() + text.len();
    let header = NpyHeader::from_reader(prefix.as_slice().chain(text.as_slice()))
        .map_err(|e| IngestError::InvalidNpy(format!("unreadable header: {e}")))?;
    Ok((header, total))
}

/// Guards npyz against headers it would mishandle: nesting deep enough to exhaust the stack
/// of its recursive parser, and shapes whose element count overflows u64 (npyz multiplies
/// the dimensions unchecked, which panics in debug builds).
fn check_header_text(text: &[u8]) -> Result<(), IngestError> {
    let mut depth = 0usize;
    for b in text {
        match b {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => continue,
        }
        if depth > MAX_NESTING {
            return Err(IngestError::UnsupportedNpy("the header nests too deeply".into()));
        }
    }
    let text = std::str::from_utf8(text)
        .map_err(|_| IngestError::InvalidNpy("the header is not UTF-8 text".into()))?;
    let Ok(Value::Dict(entries)) = text.trim_end().parse::<Value>() else {
        return Ok(()); // Not a dict literal: npyz reports it.
    };
    let shape = entries
        .iter()
        .find(|(k, _)| k.as_string().is_some_and(|k| k == "shape"));
    let Some((_, Value::Tuple(dims) | Value::List(dims))) = shape else {
        return Ok(());
    };
    // npyz multiplies the dimensions in several orders; the product of the non-zero ones
    // bounds every partial product.
    let count = dims.iter().try_fold(1u64, |acc, dim| {
        match dim.as_integer().map(|i| i.to_u64_digits()) {
            Some((_, digits)) if digits.len() <= 1 => match digits.first() {
                Some(&d) if d > 0 => acc.checked_mul(d),
                _ => Some(acc),
            },
            _ => Some(acc), // Negative or beyond u64: npyz refuses it.
        }
    });
    match count {
        Some(_) => Ok(()),
        None => Err(IngestError::InvalidNpy(
            "the shape's element count overflows".into(),
        )),
    }
}
