//! Thin singular value decomposition.

use faer::diag::DiagMut;
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::svd::{self, ComputeSvdVectors};

use super::error::{LinalgError, check_finite};
use super::threads::{par_for_svd, work};
use super::view::{view, view_mut};
use super::{Matrix, Vector};

/// Thin SVD `y = U diag(s) Vᵀ`, singular values in decreasing order.
#[derive(Debug, Clone)]
pub struct ThinSvd {
    /// m×r left singular vectors.
    pub u: Matrix,
    /// r singular values, decreasing.
    pub s: Vector,
    /// n×r right singular vectors (V, not Vᵀ).
    pub v: Matrix,
}

/// Thin SVD of `y` (m×n), r = min(m, n), singular values decreasing (faer's documented order,
/// checked by the tests), columns of `u` and `v` in the same order.
///
/// Errors on a non-finite matrix or if the bidiagonal iteration does not converge.
pub fn try_thin_svd(y: &Matrix) -> Result<ThinSvd, LinalgError> {
    check_finite(y)?;
    let (m, n) = y.shape();
    let r = m.min(n);
    let mut out = ThinSvd {
        u: Matrix::zeros(m, r),
        s: Vector::zeros(r),
        v: Matrix::zeros(n, r),
    };
    if r == 0 {
        return Ok(out);
    }
    let par = par_for_svd(work(m, n, r));
    let thin = ComputeSvdVectors::Thin;
    let mut buffer = MemBuffer::new(svd::svd_scratch::<f64>(m, n, thin, thin, par, Default::default()));
    svd::svd(
        view(y),
        DiagMut::from_slice_mut(out.s.as_mut_slice()),
        Some(view_mut(&mut out.u)),
        Some(view_mut(&mut out.v)),
        par,
        MemStack::new(&mut buffer),
        Default::default(),
    )
    .map_err(|_| LinalgError::NoConvergence("singular value decomposition"))?;
    Ok(out)
}

/// Thin SVD of `y` (m×n), r = min(m, n).
///
/// Infallible form of [`try_thin_svd`]: on a non-finite matrix or without convergence it returns
/// NaN factors of the right shapes, so that the failure propagates to any finiteness check
/// downstream. Code handling untrusted input should call [`try_thin_svd`].
pub fn thin_svd(y: &Matrix) -> ThinSvd {
    try_thin_svd(y).unwrap_or_else(|_| {
        let (m, n) = y.shape();
        let r = m.min(n);
        ThinSvd {
            u: Matrix::from_element(m, r, f64::NAN),
            s: Vector::from_element(r, f64::NAN),
            v: Matrix::from_element(n, r, f64::NAN),
        }
    })
}

#[cfg(test)]
#[path = "svd_tests.rs"]
mod tests;
