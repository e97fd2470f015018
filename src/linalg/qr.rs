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
mod tests {
    use super::*;
    use crate::linalg::testing::{gaussian, max_abs, max_diff, orthonormality_reference};
    use crate::linalg::threads::DECOMPOSITION_MIN_WORK;

    /// Checks Q orthonormal, Y = Q·(QᵀY) and QᵀY upper triangular, with tolerances scaled by m.
    fn check(y: &Matrix) {
        let (m, p) = y.shape();
        let q = thin_qr_q(y);
        let r = m.min(p);
        assert_eq!(q.shape(), (m, r));
        let tol = 20.0 * m as f64 * f64::EPSILON;
        assert!(orthonormality_reference(&q) <= tol, "{m}×{p}: QᵀQ ≠ I");
        let coeffs = q.transpose() * y;
        let scale = max_abs(y).max(f64::MIN_POSITIVE);
        assert!(
            max_diff(&(&q * &coeffs), y) <= tol * scale * (p as f64).sqrt(),
            "{m}×{p}: Y ≠ QR"
        );
        for j in 0..p {
            for i in (j + 1)..r {
                assert!(
                    coeffs[(i, j)].abs() <= tol * scale,
                    "{m}×{p}: R[{i},{j}] not zero"
                );
            }
        }
    }

    #[test]
    fn thin_qr_is_orthonormal_spans_y_and_keeps_column_order() {
        let shapes = [
            (1, 1),
            (5, 1),
            (1, 5),
            (6, 6),
            (40, 7),
            (7, 40),
            (1000, 20),
            (300, 300),
        ];
        for (s, &(m, p)) in shapes.iter().enumerate() {
            check(&gaussian(m, p, 100 + s as u64));
        }
    }

    #[test]
    fn large_enough_to_run_in_parallel() {
        let p = 64;
        let m = DECOMPOSITION_MIN_WORK / (p * p) + 1;
        assert!(work(m, p, p) >= DECOMPOSITION_MIN_WORK);
        check(&gaussian(m, p, 150));
    }

    #[test]
    fn rank_deficient_input_still_gives_orthonormal_q() {
        let mut y = gaussian(50, 6, 3);
        let dup = y.column(1).into_owned();
        y.set_column(4, &dup);
        y.column_mut(5).fill(0.0);
        check(&y);
    }

    #[test]
    fn empty_shapes_give_empty_q() {
        assert_eq!(thin_qr_q(&Matrix::zeros(4, 0)).shape(), (4, 0));
        assert_eq!(thin_qr_q(&Matrix::zeros(0, 3)).shape(), (0, 0));
    }
}
