//! Symmetric eigendecomposition (exact PCA, utility metrics, spectral quantities).

use faer::diag::DiagMut;
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::evd::{self, ComputeEigenvectors};

use super::error::{LinalgError, check_finite, check_square};
use super::threads::{par_for_decomposition, work};
use super::view::{view, view_mut};
use super::{Matrix, Vector};

/// Symmetric eigendecomposition A = V·diag(λ)·Vᵀ.
///
/// Ordering: `values` are in decreasing order (λ₀ ≥ λ₁ ≥ …) and column j of `vectors` is the unit
/// eigenvector of `values[j]`; `vectors` is orthogonal.
#[derive(Debug, Clone)]
pub struct SymEig {
    pub values: Vector,
    pub vectors: Matrix,
}

/// Eigendecomposition of the symmetric matrix `a`, sorted by decreasing eigenvalue.
///
/// Only the lower triangle of `a` is read. Errors on a non-square or non-finite matrix, or if the
/// tridiagonal iteration does not converge.
pub fn try_sym_eig(a: &Matrix) -> Result<SymEig, LinalgError> {
    check_square(a)?;
    check_finite(a)?;
    let d = a.nrows();
    let mut values = Vector::zeros(d);
    let mut vectors = Matrix::zeros(d, d);
    decompose(a, &mut values, Some(&mut vectors))?;
    // faer returns nondecreasing eigenvalues: reverse values and columns together.
    values.as_mut_slice().reverse();
    for j in 0..d / 2 {
        vectors.swap_columns(j, d - 1 - j);
    }
    Ok(SymEig { values, vectors })
}

/// Eigenvalues only of the symmetric matrix `a` (lower triangle read), decreasing. Several times
/// cheaper than [`try_sym_eig`] when the eigenvectors are not needed.
pub fn try_sym_eigenvalues(a: &Matrix) -> Result<Vector, LinalgError> {
    check_square(a)?;
    check_finite(a)?;
    let mut values = Vector::zeros(a.nrows());
    decompose(a, &mut values, None)?;
    values.as_mut_slice().reverse();
    Ok(values)
}

/// Eigendecomposition of the symmetric matrix `a` (only symmetric input is meaningful; the lower
/// triangle is read), sorted by decreasing eigenvalue.
///
/// Infallible form of [`try_sym_eig`]: on a non-square or non-finite matrix, or without
/// convergence, it returns NaN values and vectors (n×n with n = `a.nrows()`) so that the failure
/// propagates to any finiteness check downstream. Code handling untrusted input should call
/// [`try_sym_eig`] and report the typed error.
pub fn sym_eig(a: &Matrix) -> SymEig {
    try_sym_eig(a).unwrap_or_else(|_| {
        let d = a.nrows();
        SymEig {
            values: Vector::from_element(d, f64::NAN),
            vectors: Matrix::from_element(d, d, f64::NAN),
        }
    })
}

/// faer's self-adjoint EVD of `a` (square, finite) into `values` (nondecreasing) and `vectors`.
fn decompose(a: &Matrix, values: &mut Vector, vectors: Option<&mut Matrix>) -> Result<(), LinalgError> {
    let d = a.nrows();
    if d == 0 {
        return Ok(());
    }
    let par = par_for_decomposition(work(d, d, d));
    let compute = if vectors.is_some() {
        ComputeEigenvectors::Yes
    } else {
        ComputeEigenvectors::No
    };
    let mut buffer = MemBuffer::new(evd::self_adjoint_evd_scratch::<f64>(
        d,
        compute,
        par,
        Default::default(),
    ));
    evd::self_adjoint_evd(
        view(a),
        DiagMut::from_slice_mut(values.as_mut_slice()),
        vectors.map(view_mut),
        par,
        MemStack::new(&mut buffer),
        Default::default(),
    )
    .map_err(|_| LinalgError::NoConvergence("symmetric eigendecomposition"))
}

#[cfg(test)]
#[path = "eigen_tests.rs"]
mod tests;
