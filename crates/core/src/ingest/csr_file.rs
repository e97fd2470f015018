//! The stored layout of a sparse symmetric matrix, and reading it back memory-mapped, never
//! copied or densified (the sparse counterpart of `load.rs`).
//!
//! **Layout** (little-endian, every array 8-byte aligned from the page-aligned mapping):
//!
//! | offset | what |
//! |---|---|
//! | 0 | the magic `PPCSR\0\0\x01` |
//! | 8 | n (`u64`) |
//! | 16 | nnz (`u64`) |
//! | 24 | row pointers, n + 1 × `u64` |
//! | then | column indices, nnz × `u32`, padded with zeros to a multiple of 8 bytes |
//! | then | values, nnz × `f64` |
//!
//! Both triangles are stored (the product reads whole rows), each row's columns increasing.
//! The dataset row in the database records n (as `n` and `d`) and nnz; [`open_csr`] checks the
//! file against both and the arrays against each other before a job reads them.
#![allow(unsafe_code)]

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

use memmap2::{Mmap, MmapOptions};

use crate::linalg::CsrView;
use crate::linalg::sparse::Csr;

/// The first 8 bytes of a stored sparse matrix.
pub const MAGIC: [u8; 8] = *b"PPCSR\0\0\x01";
const HEADER: usize = 24;

/// The byte offsets of the three arrays and the file's length for side n and nnz entries.
fn layout(n: u64, nnz: u64) -> Option<(usize, usize, usize, usize)> {
    let n = usize::try_from(n).ok()?;
    let nnz = usize::try_from(nnz).ok()?;
    let row_ptr = HEADER;
    let col_idx = row_ptr.checked_add(n.checked_add(1)?.checked_mul(8)?)?;
    let values = col_idx.checked_add(nnz.checked_mul(4)?.checked_next_multiple_of(8)?)?;
    let len = values.checked_add(nnz.checked_mul(8)?)?;
    Some((row_ptr, col_idx, values, len))
}

/// Writes `csr` in the stored layout.
pub fn write_csr(csr: &Csr, out: &mut impl Write) -> io::Result<()> {
    let nnz = csr.values.len();
    out.write_all(&MAGIC)?;
    out.write_all(&(csr.n as u64).to_le_bytes())?;
    out.write_all(&(nnz as u64).to_le_bytes())?;
    out.write_all(bytemuck::cast_slice(&csr.row_ptr))?;
    out.write_all(bytemuck::cast_slice(&csr.col_idx))?;
    if nnz % 2 == 1 {
        out.write_all(&[0; 4])?;
    }
    out.write_all(bytemuck::cast_slice(&csr.values))
}

/// A stored sparse matrix, memory-mapped read-only.
#[derive(Debug)]
pub struct StoredCsr {
    map: Mmap,
    n: usize,
    offsets: (usize, usize, usize, usize),
}

/// Opens the sparse matrix at `path`, which the database says is n×n with nnz entries; fails
/// with `InvalidData` if the file disagrees (length, header, or arrays that are not CSR).
pub fn open_csr(path: &Path, n: u64, nnz: u64) -> io::Result<StoredCsr> {
    let invalid =
        |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {what}", path.display()));
    let offsets = layout(n, nnz).ok_or_else(|| invalid("n and nnz overflow the address space"))?;
    let file = File::open(path)?;
    if file.metadata()?.len() != offsets.3 as u64 {
        return Err(invalid("the file's length does not match n and nnz"));
    }
    // SAFETY: a read-only shared mapping of a file that is never modified in place (load.rs,
    // "Safety of the mapping"); its length was checked above.
    let map = unsafe { MmapOptions::new().populate().map(&file)? };
    let header_fits = map[..8] == MAGIC && map[8..16] == n.to_le_bytes() && map[16..24] == nnz.to_le_bytes();
    if !header_fits {
        return Err(invalid("the header does not match the dataset's n and nnz"));
    }
    Ok(StoredCsr {
        map,
        n: n as usize,
        offsets,
    })
}

impl StoredCsr {
    /// The matrix, borrowed from the mapping, its arrays checked (one O(n + nnz) pass: take it
    /// once per job); `InvalidData` if they are not CSR.
    pub fn view(&self) -> io::Result<CsrView<'_>> {
        self.try_view()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    fn try_view(&self) -> Result<CsrView<'_>, crate::linalg::sparse::CsrError> {
        let (row_ptr, col_idx, values, len) = self.offsets;
        let nnz = (len - values) / 8;
        let bad = crate::linalg::sparse::CsrError("misaligned arrays");
        let rows: &[u64] = bytemuck::try_cast_slice(&self.map[row_ptr..col_idx]).map_err(|_| bad.clone())?;
        let cols: &[u32] =
            bytemuck::try_cast_slice(&self.map[col_idx..col_idx + 4 * nnz]).map_err(|_| bad.clone())?;
        let vals: &[f64] = bytemuck::try_cast_slice(&self.map[values..len]).map_err(|_| bad)?;
        CsrView::new(self.n, rows, cols, vals)
    }
}

#[cfg(test)]
#[path = "csr_file_tests.rs"]
mod tests;
