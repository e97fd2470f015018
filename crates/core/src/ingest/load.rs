//! Reading an ingested file back for the algorithms: memory-mapped, never copied.
//!
//! **Layout.** A records file is the row-major `n × d` little-endian `f64` matrix X, no header
//! (the shape lives in the database). Read column-major, the same bytes are Xᵀ (`d × n`), one
//! record per column — the layout every kernel in `crate::linalg` reads — and a block of rows
//! of X is one contiguous stretch of the file, which is what the streaming kernels walk
//! (`crate::linalg::stream`). The mapping starts on a page boundary and there is no header, so
//! every value is 8-byte aligned and the bytes are viewed as `&[f64]` in place. Files written
//! by every earlier version have this layout, so nothing needs migrating. A symmetric matrix is
//! stored the same way (`m × m`), and is its own transpose.
//!
//! **Out of core.** A file of up to [`RESIDENT_BYTES`] is mapped with its pages populated up
//! front (one system call instead of a page fault per 64 KiB on each pass). A larger file is
//! mapped for sequential reading, and the streaming kernels tell it ([`Residency`]) when a pass
//! is done with each segment; its pages are then unmapped, so the process's resident set stays
//! a few segments whatever the file's size, and the kernel's page cache keeps (or evicts) the
//! bytes as memory allows. Data larger than memory therefore works for every algorithm that
//! reads the records through the streaming kernels (the power methods, the Gram matrix); an
//! algorithm that copies the records whole needs memory for the copy (docs/performance-out-of-core.md).
//!
//! **Safety of the mapping.** Files are written under a temporary name and renamed into place
//! (`crate::store`), never modified in place, and a replaced or deleted file's inode lives on
//! while it is mapped; so the mapped bytes do not change under a running job. Another process
//! truncating the file by hand would make reads fault (SIGBUS): the data directory belongs to
//! the service.
#![allow(unsafe_code)]

#[cfg(target_endian = "big")]
compile_error!("stored data is little-endian f64, viewed in place: big-endian targets are not supported");

use std::fs::File;
use std::io;
use std::path::Path;

use memmap2::{Advice, Mmap, MmapOptions, UncheckedAdvice};

use crate::linalg::{Records, Residency};

/// Files up to this size are kept resident for the whole job (populated when mapped); larger
/// ones are streamed, their pages dropped behind each pass.
pub const RESIDENT_BYTES: u64 = 1 << 30;

/// An ingested file, memory-mapped read-only.
#[derive(Debug)]
pub struct StoredData {
    /// `None` for an empty file (a zero-length mapping is not allowed).
    map: Option<Mmap>,
    rows: usize,
    cols: usize,
    /// Whether passes drop the pages behind them ([`RESIDENT_BYTES`]).
    streamed: bool,
}

/// Opens a file written by [`super::ingest`] holding `rows` rows of `cols` values.
///
/// **Orientation:** the file is row-major `rows × cols`; [`StoredData::records`] views it as
/// the column-major `cols × rows` matrix, i.e. for a records dataset `open(path, n, d)` gives
/// Xᵀ (d × n), one record per column.
///
/// Fails with `InvalidData` if the file's length is not `rows · cols · 8` bytes, and
/// `InvalidInput` if that size overflows.
pub fn open(path: &Path, rows: usize, cols: usize) -> io::Result<StoredData> {
    open_with(path, rows, cols, RESIDENT_BYTES)
}

/// [`open`] without populating the pages up front: for a job that will probably not read the
/// records at all (their statistics are kept, `super::stats_file`); whatever it does read
/// faults in on first touch.
pub fn open_lazily(path: &Path, rows: usize, cols: usize) -> io::Result<StoredData> {
    map_file(path, rows, cols, RESIDENT_BYTES, false)
}

/// [`open`], streaming the file if it is larger than `resident_bytes` (0: always).
pub fn open_with(path: &Path, rows: usize, cols: usize, resident_bytes: u64) -> io::Result<StoredData> {
    map_file(path, rows, cols, resident_bytes, true)
}

fn map_file(
    path: &Path,
    rows: usize,
    cols: usize,
    resident_bytes: u64,
    populate: bool,
) -> io::Result<StoredData> {
    let bytes = rows
        .checked_mul(cols)
        .and_then(|c| c.checked_mul(8))
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "rows × cols × 8 overflows"))?;
    let file = File::open(path)?;
    let len = file.metadata()?.len();
    if len != bytes as u64 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} holds {len} bytes, expected {rows} × {cols} f64 = {bytes} bytes",
                path.display()
            ),
        ));
    }
    let streamed = len > resident_bytes;
    let map = if bytes == 0 {
        None
    } else {
        let mut options = MmapOptions::new();
        if !streamed && populate {
            options.populate();
        }
        // SAFETY: a read-only shared mapping of a file that is never modified in place (module
        // docs); its length was checked above.
        let map = unsafe { options.map(&file)? };
        if streamed {
            map.advise(Advice::Sequential)?;
        }
        Some(map)
    };
    Ok(StoredData {
        map,
        rows,
        cols,
        streamed,
    })
}

impl StoredData {
    /// The values, in file order.
    fn values(&self) -> &[f64] {
        match &self.map {
            // The mapping is page-aligned and its length a multiple of 8 (checked in `open`),
            // so the cast cannot fail.
            Some(map) => bytemuck::try_cast_slice(&map[..]).unwrap_or(&[]),
            None => &[],
        }
    }

    /// The file as the column-major `cols × rows` matrix (Xᵀ for records), borrowed from the
    /// mapping; streamed files drop their pages behind each pass.
    pub fn records(&self) -> Records<'_> {
        let records = Records::new(self.values(), self.cols, self.rows);
        if self.streamed {
            records.with_residency(self)
        } else {
            records
        }
    }

    /// Whether passes over this file drop their pages behind them.
    pub fn is_streamed(&self) -> bool {
        self.streamed
    }
}

impl Residency for StoredData {
    /// Unmaps the pages of `part`, rounding both ends down to `RELEASE_ALIGN`: the stretch
    /// straddling the end is released with the segment after it. Best effort: a failure only
    /// leaves the pages mapped.
    fn release(&self, part: &[f64]) {
        let Some(map) = &self.map else { return };
        let base = map.as_ptr() as usize;
        let start = part.as_ptr() as usize;
        let end = start + std::mem::size_of_val(part);
        if start < base || end > base + map.len() {
            return;
        }
        let from = (start - base) / RELEASE_ALIGN * RELEASE_ALIGN;
        let to = (end - base) / RELEASE_ALIGN * RELEASE_ALIGN;
        if to > from {
            // SAFETY: the mapping is read-only and shared, over a file that does not change
            // (module docs). MADV_DONTNEED on such a mapping only drops the page-table entries;
            // the next read faults the same bytes back in from the page cache or the file, so
            // every slice borrowed from the mapping keeps its contents.
            let _ = unsafe { map.unchecked_advise_range(UncheckedAdvice::DontNeed, from, to - from) };
        }
    }
}

/// Released ranges are rounded to multiples of this: a multiple of every page size Linux uses
/// (4, 16 or 64 KiB), so no system call is needed to learn it.
const RELEASE_ALIGN: usize = 64 * 1024;

#[cfg(test)]
#[path = "load_tests.rs"]
mod tests;
