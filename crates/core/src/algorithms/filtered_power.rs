//! `noisy_power`'s run to convergence when it has no privacy at all (a public sparse matrix, no
//! privacy target, no `iterations` given; [`super::noisy_power::NoisyPowerConfig::until_converged`]):
//! subspace iteration with a Chebyshev filter, stopped when the top-k Ritz pairs have converged.
//!
//! **Why a filter.** Without noise there is nothing to trade against more products, and the
//! only question is how many products of A reach the top-k invariant subspace. Plain subspace
//! iteration (the power method, X ← Q(A·X)) shrinks the error by |λ_{p+1}|/|λ_k| per product; on
//! the planted-partition graphs of issue 41 that ratio is 0.7–0.85 and the run needed 20–44
//! products. Replacing A by the polynomial T_m(A/b), with T_m the Chebyshev polynomial of
//! degree m and |λ_{k+1}| ≤ b < |λ_k| (Rutishauser 1970; Zhou & Saad 2007, "Chebyshev-filtered
//! subspace iteration"), shrinks it by T_m(|λ_{k+1}|/b)/T_m(|λ_k|/b) per m products, about
//! e^{−acosh(|λ_k|/b)} per product: at |λ_{k+1}|/|λ_k| = 0.8 and b = |λ_{k+1}| that is 0.52
//! against 0.8. T_m(−x) = (−1)^m·T_m(x), so λ and −λ are filtered alike in magnitude and the
//! subspace reached is the one the power method reaches: the eigenvectors of the top
//! eigenvalues in magnitude. It is the power method applied to a polynomial of A.
//!
//! **b.** The (k+1)-th largest Ritz value in magnitude of the current block, |θ_{k+1}| (|θ_p|
//! when p = k). Interlacing (Cauchy; for magnitudes, applied to the positive and the negative
//! Ritz values apart) gives |θ_{k+1}| ≤ |λ_{k+1}| < |λ_k|, so the wanted eigenvalues always lie
//! outside [−b, b]; b may start below |λ_{k+1}|, and eigenvalues between b and |λ_{k+1}| are
//! then amplified too, but less than the wanted ones (T_m increases on [1, ∞)), so the filter is
//! never worse than m power steps, and b grows to |λ_{k+1}| as the block converges. Only the
//! top k must converge (the stop reads them), so damping everything up to |λ_{k+1}| is the
//! target. The three-term recurrence is rescaled at every product (`filter`), which keeps
//! it finite (the span is what matters).
//!
//! **The stop.** After each filtered block, one product Y = A·X of the orthonormalised block
//! gives the Ritz pairs (θ_i, X·w_i) of sym(XᵀY), and the run stops when every one of the top
//! k has a residual ‖Y·w_i − θ_i·X·w_i‖₂ ≤ [`RESIDUAL_TOLERANCE`]·|θ₁|: the subspace itself has
//! converged (a residual r bounds the angle to the true eigenvector by r/gap), not only the
//! Ritz values, which converge twice as fast. That Y is the release the job's Rayleigh–Ritz step
//! reads, as in the noisy run. The number of products run is data-dependent, which is allowed
//! only because the run has no privacy at all (public data, no noise): it is released as
//! [`super::noisy_power::ITERATIONS_RUN`].

use super::RunError;
use super::operator::Operator;
use crate::linalg::sparse::Step;
use crate::linalg::{Matrix, SymEig, matmul, tall, try_sym_eig};

/// Degree m of the filter between two orthonormalisations (the last filter of a run may be
/// shorter, to stay within the product budget: any degree treats ±λ alike). Higher degrees need
/// fewer orthonormalisations but may run up to m − 1 products past convergence:
/// on the 4-million-entry bench matrix, m = 4 stopped after 21 products, m = 6, 8 and 12 after
/// 25 (docs/performance-sparse.md, session 25).
pub const FILTER_DEGREE: u32 = 4;
/// The stop: every top-k Ritz pair's residual at most this fraction of |θ₁|.
pub const RESIDUAL_TOLERANCE: f64 = 1e-4;

/// The last block reached and its product.
#[derive(Debug)]
pub struct Converged {
    /// Y = A·X of the last orthonormal block X: the release the final Rayleigh–Ritz step reads.
    pub y: Matrix,
    /// Products of A run in all.
    pub products: u32,
    /// Whether the residual rule was met (else the product budget ran out first).
    pub converged: bool,
}

/// Runs from the orthonormal block `x` (d×p) until the top-k Ritz pairs of A have converged
/// or `max_products` products have run. `progress(products)` is called after every product
/// (a cancelled job returns its error).
pub(crate) fn run(
    op: &Operator<'_>,
    mut x: Matrix,
    k: usize,
    max_products: u32,
    mut progress: impl FnMut(u32) -> Result<(), RunError>,
) -> Result<Converged, RunError> {
    let mut products = 0;
    loop {
        let y = product(op, &x, &mut products, &mut progress)?;
        let ritz = ritz_pairs(&x, &y)?;
        let top = ritz.values.first().map_or(0.0, |v| v.abs());
        let converged = residuals(&x, &y, &ritz, k)
            .iter()
            .all(|&r| r <= RESIDUAL_TOLERANCE * top);
        if converged || products >= max_products {
            return Ok(Converged {
                y,
                products,
                converged,
            });
        }
        // b = |θ_{k+1}| (|θ_p| when the block has no column beyond k): at most |λ_{k+1}|.
        let b = ritz.values.get(k).or(ritz.values.last()).map_or(0.0, |v| v.abs());
        let degree = FILTER_DEGREE.min(max_products - products);
        // A rank-deficient block (b ≈ 0) or one product left: a plain power step.
        if !(b > top * 1e-12) || degree < 2 {
            x = tall::orthonormal_columns(&y);
            continue;
        }
        x = filter(op, &x, &y, b, degree, &mut products, &mut progress)?;
    }
}

/// Q(T_m(A/b)·X), given Y = A·X (= b·T_1(A/b)·X): the recurrence Z_{j+1} = (2/b)·A·Z_j − Z_{j−1}
/// on blocks stored by rows ([`Operator::rows_step`]), one pass over A per step and no other
/// sweep. Z_j = c_j·U_j is kept as U_j with its scale apart: with m_j = max|U_j| and
/// r_j = c_{j−1}/c_j, the step U_{j+1} = (2/(b·m_j))·A·U_j − (r_j/m_j)·U_{j−1} sets
/// c_{j+1} = c_j·m_j, so every stored block has entries of order one and only the span matters.
fn filter(
    op: &Operator<'_>,
    x: &Matrix,
    y: &Matrix,
    b: f64,
    degree: u32,
    products: &mut u32,
    progress: &mut impl FnMut(u32) -> Result<(), RunError>,
) -> Result<Matrix, RunError> {
    let p = x.ncols();
    // Rows of X and Y are the column-major storage of Xᵀ and Yᵀ.
    let mut previous = x.transpose();
    let mut current = y.transpose();
    let mut next = Matrix::zeros(p, x.nrows());
    // U_0 = X (c_0 = 1), U_1 = Y (c_1 = 1/b): r_1 = b.
    let mut largest = current.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
    let mut ratio = b;
    for _ in 1..degree {
        if !(largest > 0.0 && largest.is_finite()) {
            return Err(RunError::Failed(
                "numerical overflow in the filtered power iteration".into(),
            ));
        }
        let step = Step {
            alpha: 2.0 / (b * largest),
            previous: Some((previous.as_slice(), ratio / largest)),
        };
        let reached = op.rows_step(current.as_slice(), p, step, next.as_mut_slice());
        *products += 1;
        if !reached.is_finite() {
            return Err(RunError::Failed(
                "numerical overflow in the power iteration".into(),
            ));
        }
        progress(*products)?;
        ratio = 1.0 / largest;
        largest = reached;
        // U_{j−1} ← U_j, U_j ← U_{j+1}; the oldest block is written over next.
        std::mem::swap(&mut previous, &mut current);
        std::mem::swap(&mut current, &mut next);
    }
    Ok(tall::orthonormal_columns(&current.transpose()))
}

/// One product A·V, counted and reported, checked finite.
fn product(
    op: &Operator<'_>,
    v: &Matrix,
    products: &mut u32,
    progress: &mut impl FnMut(u32) -> Result<(), RunError>,
) -> Result<Matrix, RunError> {
    let y = op.apply(v);
    *products += 1;
    if !y.iter().all(|v| v.is_finite()) {
        return Err(RunError::Failed(
            "numerical overflow in the power iteration".into(),
        ));
    }
    progress(*products)?;
    Ok(y)
}

/// Ritz values of A on span(X) (X orthonormal, Y = A·X), largest in magnitude first, with
/// their vectors' coordinates in X (columns of `vectors`).
struct Ritz {
    values: Vec<f64>,
    vectors: Matrix,
}

fn ritz_pairs(x: &Matrix, y: &Matrix) -> Result<Ritz, RunError> {
    let h = tall::gram_tn(x, y);
    let h = (&h + h.transpose()) * 0.5;
    let SymEig { values, vectors } =
        try_sym_eig(&h).map_err(|_| RunError::Failed("the Ritz values did not converge".into()))?;
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[b].abs().total_cmp(&values[a].abs()));
    Ok(Ritz {
        values: order.iter().map(|&i| values[i]).collect(),
        vectors: Matrix::from_fn(vectors.nrows(), order.len(), |r, c| vectors[(r, order[c])]),
    })
}

/// ‖Y·w_i − θ_i·X·w_i‖₂ for the top k Ritz pairs.
fn residuals(x: &Matrix, y: &Matrix, ritz: &Ritz, k: usize) -> Vec<f64> {
    let k = k.min(ritz.values.len());
    let w = ritz.vectors.columns(0, k).into_owned();
    let (yw, xw) = (matmul(y, &w), matmul(x, &w));
    (0..k)
        .map(|i| (yw.column(i) - xw.column(i) * ritz.values[i]).norm())
        .collect()
}

#[cfg(test)]
#[path = "filtered_power_tests.rs"]
mod tests;
