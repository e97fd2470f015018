//! The data matrix A as an operator V ↦ A·V, in the cheapest form the input allows: a formed
//! Gram matrix, the records' factored product Xᵀ(X·V), or the sparse product. Shared by the
//! power methods (`noisy_power`, `filtered_power`, `coherent_power`).

use super::{DataInput, RunError};
use crate::dataset::{DataContext, Kind};
use crate::linalg::sparse::Step;
use crate::linalg::{CsrView, Matrix, Records, gram_t, gram_t_times, matmul, tall, thin_qr_q};

/// Whether forming A = XᵀX once is cheaper than applying Xᵀ(X·V) every iteration. Flop counts
/// (multiply–adds): forming A costs n·d² once plus d²·p per iteration; the factored product
/// costs 2·n·d·p per iteration. Form A iff n·d² + L·d²·p ≤ 2·L·n·d·p.
pub(crate) fn gram_is_cheaper(n: usize, d: usize, p: usize, iterations: u32) -> bool {
    // In f64: exact for any realistic shape, and no overflow for absurd ones.
    let (n, d, p, l) = (n as f64, d as f64, p as f64, f64::from(iterations));
    n * d * d + l * d * d * p <= 2.0 * l * n * d * p
}

/// The data matrix A as an operator V ↦ A·V.
pub(crate) enum Operator<'a> {
    Dense(std::borrow::Cow<'a, Matrix>),
    /// A = xt·xtᵀ applied in factored form.
    Records(Records<'a>),
    /// A sparse matrix, applied by the row-parallel CSR product (never densified).
    Sparse(CsrView<'a>),
}

impl<'a> Operator<'a> {
    /// Picks the cheaper way to apply A (see [`gram_is_cheaper`]; with the records' statistics
    /// attached A is already formed); checks the input against the dataset's public shape and
    /// kind.
    pub(crate) fn new(
        input: DataInput<'a>,
        ctx: &DataContext,
        p: usize,
        iterations: u32,
    ) -> Result<Self, RunError> {
        let d = ctx.d;
        match (input, ctx.kind()) {
            (DataInput::Records { xt }, Kind::Records) if xt.nrows() == d => {
                if xt.stats().is_some() || gram_is_cheaper(xt.ncols(), d, p, iterations) {
                    Ok(Operator::Dense(std::borrow::Cow::Owned(gram_t(xt))))
                } else {
                    Ok(Operator::Records(xt))
                }
            }
            (DataInput::Matrix { a }, Kind::Matrix) if a.nrows() == d && a.ncols() == d => {
                Ok(Operator::Dense(std::borrow::Cow::Borrowed(a)))
            }
            (DataInput::Sparse { a }, Kind::Matrix) if a.n() == d => Ok(Operator::Sparse(a)),
            _ => Err(RunError::mismatched_data()),
        }
    }

    /// Q(Y), the next iterate: on a sparse matrix (d large, p small) by CholeskyQR2 in row
    /// chunks ([`tall::orthonormal_columns`]; faer's parallel Householder QR spins between its
    /// halves), elsewhere by the Householder [`thin_qr_q`]. Both give orthonormal columns with
    /// the span of Y (Alg. 1 line 5 asks for no more); the signs of the columns may differ.
    pub(crate) fn orthonormalise(&self, y: &Matrix) -> Matrix {
        match self {
            Operator::Sparse(_) => tall::orthonormal_columns(y),
            _ => thin_qr_q(y),
        }
    }

    /// α·A·X − β·P on blocks stored by rows (d×p, as the column-major storage of Xᵀ and Pᵀ),
    /// into `out`; returns the largest |entry| of `out`. The sparse product does it in one
    /// pass ([`CsrView::rows_step`]); the dense forms go through [`Self::apply`].
    pub(crate) fn rows_step(&self, xs: &[f64], p: usize, step: Step<'_>, out: &mut [f64]) -> f64 {
        if let Operator::Sparse(a) = self {
            return a.rows_step(xs, p, step, out);
        }
        let d = xs.len() / p.max(1);
        let ax = self.apply(&Matrix::from_row_slice(d, p, xs)).transpose();
        let previous = step.previous.map_or(&[][..], |(prev, _)| prev);
        let beta = step.previous.map_or(0.0, |(_, beta)| beta);
        out.iter_mut()
            .zip(ax.as_slice())
            .enumerate()
            .fold(0.0_f64, |m, (i, (o, v))| {
                *o = step.alpha * v - previous.get(i).map_or(0.0, |q| beta * q);
                m.max(o.abs())
            })
    }

    pub(crate) fn apply(&self, v: &Matrix) -> Matrix {
        match self {
            Operator::Dense(a) => matmul(a, v),
            Operator::Records(xt) => gram_t_times(*xt, v),
            Operator::Sparse(a) => a.times(v),
        }
    }
}
