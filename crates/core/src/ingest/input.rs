//! A job's data opened for reading, in the layout the kernels read: records memory-mapped with
//! their kept statistics, a sparse matrix through its CSR arrays, a dense matrix loaded. The
//! runner opens it on its blocking thread and hands [`Opened::input`] to the algorithm.

use std::io;
use std::path::Path;
use std::sync::Arc;

use super::csr_file::{StoredCsr, open_csr};
use super::stats_file::{KeptStats, OpenedRecords, open_records};
use crate::algorithms::DataInput;
use crate::dataset::Kind;
use crate::linalg::Matrix;

/// Where a dataset's files are.
pub struct Paths<'a> {
    pub data: &'a Path,
    pub stats: &'a Path,
    /// Where a statistics file is written before it is renamed into place.
    pub stats_temp: &'a Path,
}

/// A dataset's data, open.
pub enum Opened {
    /// Records (memory-mapped) with XᵀX, Xᵀ1 and n kept beside them once computed: the kernels
    /// then cost O(d³) instead of a pass over n records (linalg/record_stats.rs).
    Records(OpenedRecords),
    /// A sparse matrix, read in place through its CSR arrays, never densified.
    Sparse(StoredCsr),
    /// A dense matrix.
    Matrix(Matrix),
}

/// What [`open`] found besides the data: a statistics file it could not keep (the next job
/// computes the statistics again; not an error of this job).
pub type KeepFailure = Option<io::Error>;

/// Opens a dataset of `kind` with n × d values (`nnz` stored entries when sparse); `cached`
/// is statistics this process already keeps for it.
pub fn open(
    kind: Kind,
    nnz: Option<u64>,
    paths: &Paths<'_>,
    (n, d): (usize, usize),
    cached: Option<Arc<KeptStats>>,
) -> io::Result<(Opened, KeepFailure)> {
    Ok(match (kind, nnz) {
        (Kind::Records, _) => {
            let (opened, write_error) =
                open_records(paths.data, paths.stats, paths.stats_temp, (n, d), cached)?;
            (Opened::Records(opened), write_error)
        }
        (Kind::Matrix, Some(nnz)) => (Opened::Sparse(open_csr(paths.data, d as u64, nnz)?), None),
        (Kind::Matrix, None) => (
            Opened::Matrix(super::open(paths.data, n, d)?.records().to_matrix()),
            None,
        ),
    })
}

impl Opened {
    /// The statistics kept with records, for the process to share with later jobs.
    pub fn kept(&self) -> Option<&Arc<KeptStats>> {
        match self {
            Opened::Records(records) => Some(records.kept()),
            Opened::Sparse(_) | Opened::Matrix(_) => None,
        }
    }

    /// The algorithm's view of the data.
    pub fn input(&self) -> io::Result<DataInput<'_>> {
        Ok(match self {
            Opened::Records(records) => DataInput::Records {
                xt: records.records(),
            },
            Opened::Sparse(csr) => DataInput::Sparse { a: csr.view()? },
            Opened::Matrix(a) => DataInput::Matrix { a },
        })
    }
}
