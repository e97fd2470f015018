//! Errors of the fallible kernels.

/// Why a decomposition could not be computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LinalgError {
    /// A square matrix was required.
    #[error("expected a square matrix, got {nrows}×{ncols}")]
    NotSquare { nrows: usize, ncols: usize },
    /// An entry is NaN or infinite.
    #[error("the matrix holds a NaN or infinite entry")]
    NonFinite,
    /// The iterative part of a decomposition hit its iteration limit.
    #[error("the {0} did not converge")]
    NoConvergence(&'static str),
}

use super::Matrix;

/// `Err(NonFinite)` unless every entry of `m` is finite.
pub(crate) fn check_finite(m: &Matrix) -> Result<(), LinalgError> {
    if m.iter().all(|x| x.is_finite()) {
        Ok(())
    } else {
        Err(LinalgError::NonFinite)
    }
}

/// `Err(NotSquare)` unless `m` is square.
pub(crate) fn check_square(m: &Matrix) -> Result<(), LinalgError> {
    let (nrows, ncols) = m.shape();
    if nrows == ncols {
        Ok(())
    } else {
        Err(LinalgError::NotSquare { nrows, ncols })
    }
}
