//! Zero-copy faer views of nalgebra's column-major storage.
//!
//! A `DMatrix<f64>` stores its entries column by column with no padding, which is exactly the
//! layout `faer::MatRef::from_column_major_slice` reads, so kernels hand nalgebra buffers to faer
//! (and let faer write results into nalgebra buffers) without copying.

use faer::{MatMut, MatRef};

use super::Matrix;

/// Read-only faer view of `m`.
pub(crate) fn view(m: &Matrix) -> MatRef<'_, f64> {
    MatRef::from_column_major_slice(m.as_slice(), m.nrows(), m.ncols())
}

/// Mutable faer view of `m`.
pub(crate) fn view_mut(m: &mut Matrix) -> MatMut<'_, f64> {
    let (nrows, ncols) = m.shape();
    MatMut::from_column_major_slice_mut(m.as_mut_slice(), nrows, ncols)
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod tests;
