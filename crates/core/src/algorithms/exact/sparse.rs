//! `exact` on a sparse matrix dataset: the top k eigenpairs by block Lanczos
//! (`crate::linalg::lanczos`), through the CSR product only, never densifying.

use std::cell::RefCell;

use rand_distr::{Distribution, StandardNormal};

use super::super::{Output, RunEnv, RunError};
use crate::dataset::{DataContext, Kind};
use crate::linalg::lanczos::{LanczosOptions, LanczosStop, top_eigenpairs};
use crate::linalg::{CsrView, Matrix, fix_signs};

/// The top k eigenvectors (largest eigenvalues first) and eigenvalues of the sparse matrix `a`.
/// The start block, and the columns added when the block grows, are Gaussian from `env.rng()`
/// (seeded on a public dataset when the job asks); each restart reports progress.
pub(super) fn top_k(
    a: CsrView<'_>,
    k: usize,
    ctx: &DataContext,
    env: &mut RunEnv<'_>,
) -> Result<Output, RunError> {
    let n = a.n();
    if ctx.kind() != Kind::Matrix || n != ctx.d {
        return Err(RunError::Failed(
            "the data does not match the dataset's kind or dimension".into(),
        ));
    }
    let options = LanczosOptions::default();
    // `draw` and `progress` both need the environment; the solver calls them one at a time.
    let shared = RefCell::new(&mut *env);
    let mut draw = |c: usize| {
        let mut env = shared.borrow_mut();
        let rng = env.rng();
        Matrix::from_fn(n, c, |_, _| StandardNormal.sample(&mut *rng))
    };
    let apply = |x: &Matrix| a.times(x);
    let mut progress = |done: u32, total: u32| shared.borrow_mut().progress(done, total);
    let found =
        top_eigenpairs(&apply, n, &mut draw, k, &options, &mut progress).map_err(|stop| match stop {
            LanczosStop::Stopped(_) => RunError::Cancelled,
            LanczosStop::Failed(e) => RunError::Failed(format!("the sparse eigensolver failed: {e}")),
        })?;
    let mut basis = found.vectors;
    fix_signs(&mut basis);
    env.progress(options.max_cycles, options.max_cycles)?;
    Ok(Output {
        basis,
        eigenvalues: Some(found.values),
    })
}
