//! Generic job option `center` for records datasets (docs/design/privacy.md §1 "Centering"): no centre
//! (default), a public centre vector given by the analyst, or a private mean. Implemented once
//! for every algorithm in [`super::registry()`]; algorithms that declare their own `center`
//! parameter (`exact`) keep theirs and are not touched.
//!
//! Private mean: the Gaussian mechanism on the clipped sum S = Σ_i x_i (Bun & Steinke 2016,
//! Prop. 1.6: ρ = Δ²/(2s²), so s = Δ/sqrt(2ρ)), with ρ_c = `center_share`·ρ_job.
//! - `replace_one` (n public): replacing one row x by x' changes S by x' − x, ‖x' − x‖₂ ≤ 2β,
//!   so Δ_S = 2β, s = 2β/sqrt(2ρ_c) per coordinate, μ̂ = (S + g)/n.
//! - `add_remove` (n private): ρ_c is split in halves. Adding or removing a row changes S by
//!   at most β (Δ_S = β, s_S = β/sqrt(2·ρ_c/2)) and the count n by 1 (Δ_n = 1,
//!   s_n = 1/sqrt(2·ρ_c/2)); μ̂ = (S + g)/max(ñ, 1) with ñ = n + g_n. Cost ρ_c/2 + ρ_c/2 = ρ_c
//!   (sequential composition).
//!
//! The algorithm is then configured with the rest of the budget and runs on the rows
//! x_i − μ̂, each clipped again to ‖·‖₂ ≤ β and ‖·‖₁ ≤ α (docs/design/privacy.md §1). Given the released μ̂,
//! this is a fixed row-by-row map f(x) = clip(x − μ̂): a neighbouring dataset (one row replaced,
//! added or removed) maps to a neighbouring dataset under the same relation with the same
//! bounds β and α, so the algorithm's own sensitivity analysis holds unchanged, and its cost
//! composes sequentially (adaptively) with ρ_c. A given centre is public, so it costs nothing.

use serde::{Deserialize, Serialize};

use super::{ConfigError, NoiseScale, RunEnv, RunError};
use crate::dataset::{DataContext, Kind, Neighbours};
use crate::linalg::clip::clip_columns;
use crate::linalg::{Matrix, Records, Vector};
use crate::privacy::Cost;
use crate::privacy::cost::round_up_while;

/// Default share of the job's ρ spent on a private mean.
pub const DEFAULT_CENTER_SHARE: f64 = 0.1;
/// Audit label of the noise on the clipped sum.
pub const SUM_RELEASE: &str = "center_sum";
/// Audit label of the noise on the record count (`add_remove` only).
pub const COUNT_RELEASE: &str = "center_count";

/// What the client asked for, before calibration.
#[derive(Debug, Clone, PartialEq)]
pub enum CenterRequest {
    Private { share: f64 },
    Given(Vec<f64>),
}

/// The centring step of a job, fixed at submission and stored in its configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case", deny_unknown_fields)]
pub enum CenterConfig {
    /// A public centre vector: no cost.
    Given { vector: Vec<f64> },
    /// The private mean.
    Private {
        /// ρ_c spent on the mean (the exact cost of the two releases below).
        rho: f64,
        /// L2 sensitivity of the clipped sum (2β for `replace_one`, β for `add_remove`).
        sum_sensitivity: f64,
        /// Per-coordinate noise sd on the sum.
        noise_sd: f64,
        /// Noise sd on the record count (`add_remove`; `None` when n is public).
        count_noise_sd: Option<f64>,
    },
}

// The published schema of `center` is derived from this type (see `super::parameters`), so its
// doc comments are what clients read.
/// "none", "private", or a public centre.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum CenterParam {
    Named(CenterMode),
    /// A public centre: d finite numbers.
    Given(Vec<f64>),
}

/// "none": no centring; "private": a private mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CenterMode {
    None,
    Private,
}

/// Validates the `center` and `center_share` options. `Ok(None)` for `"none"` (the default) or
/// when absent.
pub fn request(
    center: Option<CenterParam>,
    share: Option<f64>,
    ctx: &DataContext,
) -> Result<Option<CenterRequest>, ConfigError> {
    let share = match share {
        None => None,
        Some(s) if s > 0.0 && s < 1.0 => Some(s),
        Some(_) => {
            return Err(ConfigError::invalid(
                "params.center_share",
                "must be a number strictly between 0 and 1",
            ));
        }
    };
    let request = match center {
        None | Some(CenterParam::Named(CenterMode::None)) => None,
        Some(CenterParam::Named(CenterMode::Private)) => Some(CenterRequest::Private {
            share: share.unwrap_or(DEFAULT_CENTER_SHARE),
        }),
        Some(CenterParam::Given(vector)) => {
            if !vector.iter().all(|x| x.is_finite()) {
                return Err(ConfigError::invalid(
                    "params.center",
                    "a given centre must be an array of finite numbers",
                ));
            }
            if vector.len() != ctx.d {
                return Err(ConfigError::invalid(
                    "params.center",
                    format!(
                        "a given centre must have d = {} entries (got {})",
                        ctx.d,
                        vector.len()
                    ),
                ));
            }
            Some(CenterRequest::Given(vector))
        }
    };
    if share.is_some() && !matches!(request, Some(CenterRequest::Private { .. })) {
        return Err(ConfigError::invalid(
            "params.center_share",
            "applies only with center = \"private\"",
        ));
    }
    if request.is_some() && ctx.kind() != Kind::Records {
        return Err(ConfigError::invalid(
            "params.center",
            "centering applies to records datasets only",
        ));
    }
    Ok(request)
}

/// s = Δ/sqrt(2ρ) (docs/design/privacy.md §2), nudged up until Cost::gaussian(Δ, s) ≤ ρ in floating point.
pub(crate) fn calibrate_sd(sensitivity: f64, rho: f64) -> f64 {
    round_up_while(sensitivity / (2.0 * rho).sqrt(), |sd| {
        Cost::gaussian(sensitivity, sd).rho > rho
    })
}

/// The L2 row bound β and L1 row bound α of a records dataset.
fn bounds(ctx: &DataContext) -> Result<(f64, f64), ConfigError> {
    match ctx.neighbours {
        Neighbours::ReplaceOne { beta, alpha } | Neighbours::AddRemove { beta, alpha } => Ok((beta, alpha)),
        Neighbours::Entry { .. } => Err(ConfigError::invalid(
            "params.center",
            "centering applies to records datasets only",
        )),
    }
}

/// Calibrates the request against the job's ρ (`rho_job`, finite and > 0).
pub fn configure(
    request: CenterRequest,
    ctx: &DataContext,
    rho_job: f64,
) -> Result<CenterConfig, ConfigError> {
    let (beta, _) = bounds(ctx)?;
    Ok(match request {
        CenterRequest::Given(vector) => CenterConfig::Given { vector },
        CenterRequest::Private { share } => {
            let rho_c = share * rho_job;
            match ctx.neighbours {
                Neighbours::ReplaceOne { .. } => {
                    let sum_sensitivity = 2.0 * beta;
                    let noise_sd = calibrate_sd(sum_sensitivity, rho_c);
                    CenterConfig::Private {
                        rho: Cost::gaussian(sum_sensitivity, noise_sd).rho,
                        sum_sensitivity,
                        noise_sd,
                        count_noise_sd: None,
                    }
                }
                _ => {
                    let half = rho_c / 2.0;
                    let noise_sd = calibrate_sd(beta, half);
                    let count_sd = calibrate_sd(1.0, half);
                    CenterConfig::Private {
                        rho: Cost::gaussian(beta, noise_sd)
                            .then(Cost::gaussian(1.0, count_sd))
                            .rho,
                        sum_sensitivity: beta,
                        noise_sd,
                        count_noise_sd: Some(count_sd),
                    }
                }
            }
        }
    })
}

impl CenterConfig {
    /// The spec cost: Gaussian mechanism on the sum (and on the count under `add_remove`),
    /// recomputed from the stored noise scales.
    pub fn cost(&self) -> Cost {
        match self {
            CenterConfig::Given { .. } => Cost::ZERO,
            CenterConfig::Private {
                sum_sensitivity,
                noise_sd,
                count_noise_sd,
                ..
            } => {
                let sum = Cost::gaussian(*sum_sensitivity, *noise_sd);
                match count_noise_sd {
                    Some(sd) => sum.then(Cost::gaussian(1.0, *sd)),
                    None => sum,
                }
            }
        }
    }

    pub fn noise_scales(&self, d: usize) -> Vec<NoiseScale> {
        let CenterConfig::Private {
            sum_sensitivity,
            noise_sd,
            count_noise_sd,
            ..
        } = self
        else {
            return Vec::new();
        };
        let mut scales = vec![NoiseScale::gaussian(
            SUM_RELEASE,
            *noise_sd,
            *sum_sensitivity,
            d,
            "private centering: Gaussian noise on each coordinate of the clipped sum of the rows",
        )];
        if let Some(sd) = count_noise_sd {
            scales.push(NoiseScale {
                release: COUNT_RELEASE.into(),
                distribution: "gaussian".into(),
                multiplier: *sd,
                sensitivity: Some(1.0),
                count: 1,
                description: "private centering: Gaussian noise on the record count (n is private)".into(),
            });
        }
        scales
    }

    /// The centre μ̂: the given vector, or the private mean of the columns of `xt` (d×n).
    pub fn centre<'a>(
        &self,
        xt: impl Into<Records<'a>>,
        ctx: &DataContext,
        env: &mut RunEnv<'_>,
    ) -> Result<Vector, RunError> {
        let xt = xt.into();
        let d = xt.nrows();
        match self {
            CenterConfig::Given { vector } if vector.len() == d => Ok(Vector::from_column_slice(vector)),
            CenterConfig::Given { .. } => Err(RunError::Failed(
                "the given centre does not match the dataset's dimension".into(),
            )),
            CenterConfig::Private {
                sum_sensitivity,
                noise_sd,
                count_noise_sd,
                ..
            } => {
                let sum = Matrix::from_column_slice(d, 1, xt.column_sum().as_slice());
                let released = env.gaussian_release(SUM_RELEASE, sum, *sum_sensitivity, *noise_sd)?;
                let noisy = Vector::from_column_slice(released.as_slice());
                let count = match count_noise_sd {
                    Some(sd) => {
                        // Adding or removing one record changes the count by 1.
                        let n = env.gaussian_scalar_release(COUNT_RELEASE, xt.ncols() as f64, 1.0, *sd)?;
                        n.max(1.0)
                    }
                    None => {
                        // replace_one: n is public.
                        let n = ctx.n.unwrap_or(xt.ncols());
                        if n == 0 {
                            return Err(RunError::Failed("centering needs at least one record".into()));
                        }
                        n as f64
                    }
                };
                Ok(noisy / count)
            }
        }
    }

    /// Centres the records (d×n, one per column) and clips them again to β and α; a private
    /// mean is recorded as the release `center`.
    pub fn apply<'a>(
        &self,
        xt: impl Into<Records<'a>>,
        ctx: &DataContext,
        env: &mut RunEnv<'_>,
    ) -> Result<Matrix, RunError> {
        let xt = xt.into();
        let (beta, alpha) = bounds(ctx).map_err(|e| RunError::Failed(e.to_string()))?;
        let mu = self.centre(xt, ctx, env)?;
        // The private mean is a DP release: the job's `released.center` shows it, so that new
        // rows can be centred as the basis was computed.
        if matches!(self, CenterConfig::Private { .. }) {
            env.record_release("center", mu.iter().copied().collect::<Vec<f64>>());
        }
        Ok(recentre(xt, &mu, beta, alpha))
    }
}

/// x ← clip(x − μ): x·min(1, β/‖x‖₂), then x·min(1, α/‖x‖₁) (docs/design/privacy.md §1), per
/// column, by the shared [`crate::linalg::clip`] with the upload's rounding margin, so the exact
/// norms of the stored rows are ≤ β and ≤ α.
pub fn recentre<'a>(xt: impl Into<Records<'a>>, mu: &Vector, beta: f64, alpha: f64) -> Matrix {
    let mut out = xt.into().to_matrix();
    for mut col in out.column_iter_mut() {
        col -= mu;
    }
    clip_columns(&mut out, beta, Some(alpha));
    out
}

#[cfg(test)]
#[path = "centering_tests.rs"]
mod tests;
