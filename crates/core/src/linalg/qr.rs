//! Thin QR: the orthonormal factor used to re-orthonormalise power-method iterates.

use faer::Conj;
use faer::dyn_stack::{MemBuffer, MemStack, StackReq};
use faer::linalg::householder;
use faer::linalg::qr::no_pivoting::factor;

use super::Matrix;
use super::threads::{par_for_decomposition, work};
use super::view::{view, view_mut};

/// The Q factor of the thin QR decomposition of `y` (m×p): m×r with r = min(m, p) and
/// orthonormal columns, such that `y = Q·R` with R upper triangular. Column j of Q therefore
/// lies in the span of the first j+1 columns of `y` (the Gram–Schmidt order).
///
/// Blocked Householder QR in faer; Q is formed by applying the reflectors to the first r
/// columns of the identity. Signs of the columns are whatever the reflectors give; apply
/// [`super::fix_signs`] for the deterministic sign rule. Non-finite input gives non-finite output.
pub fn thin_qr_q(y: &Matrix) -> Matrix {
    let (m, p) = y.shape();
    let r = m.min(p);
    if r == 0 {
        return Matrix::zeros(m, r);
    }
    let par = par_for_decomposition(work(m, p, r));
    let blocksize = factor::recommended_blocksize::<f64>(m, p);
    let mut buffer = MemBuffer::new(StackReq::any_of(&[
        factor::qr_in_place_scratch::<f64>(m, p, blocksize, par, Default::default()),
        householder::apply_block_householder_sequence_on_the_left_in_place_scratch::<f64>(m, blocksize, r),
    ]));
    let stack = MemStack::new(&mut buffer);

    // Householder vectors below the diagonal of `reflectors`, R on and above it.
    let mut reflectors = y.clone();
    let mut coeffs = Matrix::zeros(blocksize, r);
    factor::qr_in_place(
        view_mut(&mut reflectors),
        view_mut(&mut coeffs),
        par,
        stack,
        Default::default(),
    );

    let mut q = Matrix::identity(m, r);
    householder::apply_block_householder_sequence_on_the_left_in_place_with_conj(
        view(&reflectors).subcols(0, r),
        view(&coeffs),
        Conj::No,
        view_mut(&mut q),
        par,
        stack,
    );
    q
}

#[cfg(test)]
#[path = "qr_tests.rs"]
mod tests;
