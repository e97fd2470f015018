//! Reading an ingested file back for the algorithms.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use crate::linalg::Matrix;

/// Bytes converted per read: a multiple of 8, so no value straddles two reads.
const CHUNK: usize = 1 << 20;

/// Loads a file written by [`super::ingest`] holding `rows` rows of `cols` values.
///
/// **Orientation:** the file is row-major `rows × cols`; it is returned as the column-major
/// `cols × rows` matrix, i.e. **`load(path, n, d)` returns Xᵀ (d × n)**, one record per
/// column, without any reshuffling of the bytes (the layout `crate::linalg` expects). For a
/// symmetric `m × m` matrix the result is the matrix itself either way.
///
/// Memory is the matrix plus a 1 MiB buffer. Fails with `InvalidData` if the file's length is
/// not `rows · cols · 8` bytes, and `InvalidInput` if that size overflows.
pub fn load(path: &Path, rows: usize, cols: usize) -> io::Result<Matrix> {
    let count = rows
        .checked_mul(cols)
        .filter(|c| c.checked_mul(8).is_some())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "rows × cols × 8 overflows"))?;
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    if len != count as u64 * 8 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} holds {len} bytes, expected {rows} × {cols} f64 = {} bytes",
                path.display(),
                count * 8
            ),
        ));
    }
    let mut values = Vec::with_capacity(count);
    let mut buf = vec![0u8; CHUNK.min(count * 8)];
    while values.len() < count {
        let take = CHUNK.min((count - values.len()) * 8);
        file.read_exact(&mut buf[..take])?;
        values.extend(
            buf[..take]
                .as_chunks::<8>()
                .0
                .iter()
                .map(|b| f64::from_le_bytes(*b)),
        );
    }
    Ok(Matrix::from_vec(cols, rows, values))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_with(values: &[f64]) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().expect("temp file");
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        f.write_all(&bytes).expect("write");
        f
    }

    #[test]
    fn row_major_bytes_load_as_the_transpose() {
        // X = [[1, 2, 3], [4, 5, 6]] (n = 2 records, d = 3).
        let f = file_with(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let xt = load(f.path(), 2, 3).expect("load");
        assert_eq!(xt.shape(), (3, 2));
        assert_eq!(xt.column(0).as_slice(), &[1.0, 2.0, 3.0]);
        assert_eq!(xt.column(1).as_slice(), &[4.0, 5.0, 6.0]);
        assert_eq!(xt[(2, 1)], 6.0);
    }

    #[test]
    fn files_larger_than_one_chunk_load_completely() {
        let (n, d) = (1000, 300); // 2.4 MB, three chunks
        let values: Vec<f64> = (0..n * d).map(|i| i as f64).collect();
        let f = file_with(&values);
        let xt = load(f.path(), n, d).expect("load");
        assert_eq!(xt.shape(), (d, n));
        assert_eq!(xt[(d - 1, n - 1)], (n * d - 1) as f64);
        assert_eq!(xt[(5, 700)], (700 * d + 5) as f64);
    }

    #[test]
    fn a_wrong_size_is_invalid_data() {
        let f = file_with(&[1.0, 2.0, 3.0]);
        let err = load(f.path(), 2, 2).expect_err("size mismatch");
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        let err = load(f.path(), usize::MAX, 2).expect_err("overflow");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn an_empty_shape_loads_an_empty_matrix() {
        let f = file_with(&[]);
        assert_eq!(load(f.path(), 0, 4).expect("load").shape(), (4, 0));
    }
}
