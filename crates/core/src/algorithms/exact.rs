//! `exact`: non-private PCA, for `public: true` datasets only (docs/design/algorithms.md, `exact`).
//!
//! The symmetric eigendecomposition of the data matrix: for records the Gram matrix
//! A = XᵀX = Σ_i x_i x_iᵀ, or with `center` the centred Gram Σ_i (x_i − x̄)(x_i − x̄)ᵀ (n times the
//! covariance; unnormalised, like the A the private algorithms work on); for a matrix dataset
//! A itself. Returns the top-k eigenvectors (largest eigenvalues first) and the exact
//! eigenvalues, which docs/design/privacy.md §3 allows on public data only. It is the ground truth of the
//! utility metrics. Costs nothing and draws no noise; refused (403) on private datasets.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::calibration::check_k;
use super::{
    Algorithm, AlgorithmInfo, ConfigError, DataInput, NoiseScale, Output, Run, RunError, catalog, ensure_fits,
};
use crate::dataset::{DataContext, Kind};
use crate::linalg::{centred_gram_t, column_sums, try_sym_eig};
use crate::privacy::{Cost, PrivacyTarget};

/// Exact PCA (public data only).
#[derive(Debug, Clone, Copy, Default)]
pub struct Exact;

/// What the client sends.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExactParams {
    /// Target rank: number of principal components returned (1 ≤ k ≤ d).
    #[schemars(range(min = 1))]
    pub k: usize,
    /// Records only: subtract the column means before forming the Gram matrix.
    #[serde(default)]
    pub center: bool,
}

/// The validated parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExactConfig {
    pub k: usize,
    pub center: bool,
}

fn public_only_error() -> ConfigError {
    ConfigError::PublicOnly(
        "algorithm `exact` computes non-private results and runs only on datasets marked public".into(),
    )
}

impl Algorithm for Exact {
    const INFO: &'static AlgorithmInfo = &catalog::EXACT;
    type Params = ExactParams;
    type Config = ExactConfig;

    fn configure(
        &self,
        params: ExactParams,
        ctx: &DataContext,
        _target: &PrivacyTarget,
    ) -> Result<ExactConfig, ConfigError> {
        if !ctx.public {
            return Err(public_only_error());
        }
        check_k(params.k, ctx.d)?;
        if params.center && ctx.kind() == Kind::Matrix {
            return Err(ConfigError::invalid(
                "params.center",
                "centering applies to records datasets only",
            ));
        }
        Ok(ExactConfig {
            k: params.k,
            center: params.center,
        })
    }

    /// Zero: public data carry no budget.
    fn cost(&self, _config: &ExactConfig, _ctx: &DataContext) -> Cost {
        Cost::ZERO
    }

    fn noise_scales(&self, _config: &ExactConfig, _ctx: &DataContext) -> Vec<NoiseScale> {
        Vec::new()
    }

    fn run(&self, config: &ExactConfig, run: Run<'_, '_>) -> Result<Output, RunError> {
        let Run { input, ctx, env } = run;
        if !ctx.public {
            return Err(RunError::Failed(
                "algorithm `exact` runs only on datasets marked public".into(),
            ));
        }
        let d = ctx.d;
        ensure_fits(config.k >= 1 && config.k <= d)?;
        if let DataInput::Sparse { a } = input {
            return sparse::top_k(a, config.k, ctx, env);
        }
        let a = match input {
            _ if !config.center => input.symmetric_matrix(ctx)?,
            DataInput::Records { xt } if ctx.kind() == Kind::Records && xt.nrows() == d => {
                if xt.ncols() == 0 {
                    return Err(RunError::Failed("centering needs at least one record".into()));
                }
                // (X − 1x̄ᵀ)ᵀ(X − 1x̄ᵀ), streamed: no centred copy of the data.
                centred_gram_t(xt, &(column_sums(xt) / xt.ncols() as f64))
            }
            _ => return Err(RunError::mismatched_data()),
        };
        // sym_eig sorts by decreasing eigenvalue.
        let eig = try_sym_eig(&a).map_err(|e| RunError::Failed(format!("eigendecomposition failed: {e}")))?;
        env.progress(1, 1)?;
        Ok(Output::leading(&eig.vectors, eig.values.as_slice(), config.k))
    }
}

mod sparse;

#[cfg(test)]
#[path = "exact_tests.rs"]
mod tests;
