//! Private centring in a live `gossip_power` study (issue 38; docs/design/federation.md,
//! "Private centring in studies"). Agent i holds block X_i (its d_i features of every record);
//! the mean of its block is its own to find.
//!
//! **The release.** Each agent draws S̃_i = Σ_r x_{r,i} + N(0, σ²·I_{d_i}) once, before its
//! first exchange, with its block's rows clipped to β_i = β·√(d_i/d) (as the study loads them).
//! Stacked over the agents, (S̃_1, …, S̃_m) is one Gaussian mechanism on (S_1, …, S_m): replacing
//! record r changes row r of every block by δ_i with Σ_i‖δ_i‖² = ‖x_r − x'_r‖² ≤ (2β)², so the
//! stacked sum moves by at most Δ = 2β in L2, and σ = 2β/√(2ρ_c) (`centering::configure`, the
//! central private mean under `replace_one`) makes it cost ρ_c (Bun & Steinke 2016, Prop. 1.6).
//! The agent keeps μ̂_i = S̃_i/n (n is public under `replace_one`, the only relation the protocol
//! has) and never sends it: whatever follows is post-processing of the release.
//!
//! **After it.** The agent maps every row of its block to clip(x_i − μ̂_i) at β_i. Given μ̂ this
//! is a fixed row map whose image keeps every whole row within β (Σ_i β_i² = β²), so every later
//! message and update keeps its sensitivity and its cost composes with ρ_c. A given centre is
//! public: each agent subtracts its features' entries and draws nothing.

use super::super::centering::CenterConfig;
use crate::algorithms::{RunEnv, RunError};
use crate::linalg::Matrix;
use crate::linalg::clip::clip_columns;

/// Audit label of an agent's noise on its block's sum.
pub const SUM_RELEASE: &str = "gossip_center_sum";

/// The centre of agent's block (`block` = X_iᵀ, d_i × n, each column of norm ≤ β_i) holding
/// `features` of the study: the given vector's entries for them, or the private mean
/// (module docs), its noise drawn through `env`.
pub fn block_centre(
    center: &CenterConfig,
    features: &[usize],
    block: &Matrix,
    beta_i: f64,
    env: &mut RunEnv<'_>,
) -> Result<Vec<f64>, RunError> {
    let failed = |what: &str| RunError::Failed(what.to_string());
    if block.nrows() != features.len() || block.ncols() == 0 {
        return Err(failed(
            "the block does not hold the agent's features of at least one record",
        ));
    }
    match center {
        CenterConfig::Given { vector } => features
            .iter()
            .map(|&j| {
                vector
                    .get(j)
                    .copied()
                    .ok_or_else(|| failed("the given centre is too short"))
            })
            .collect(),
        CenterConfig::Private {
            sum_sensitivity,
            noise_sd,
            count_noise_sd: None,
            ..
        } => {
            if block.column_iter().any(|x| !(x.norm() <= beta_i)) {
                return Err(failed("the block's rows are not clipped to its bound"));
            }
            let sum =
                Matrix::from_iterator(features.len(), 1, (0..features.len()).map(|i| block.row(i).sum()));
            let noisy = env.gaussian_release(SUM_RELEASE, sum, *sum_sensitivity, *noise_sd)?;
            let n = block.ncols() as f64;
            Ok(noisy.iter().map(|s| s / n).collect())
        }
        CenterConfig::Private { .. } => Err(failed(
            "a gossip_power centre has a public n (replace_one): no noisy count",
        )),
    }
}

/// The block's rows mapped to clip(x_i − μ_i) at β_i.
pub fn centre_block(block: &Matrix, mu: &[f64], beta_i: f64) -> Matrix {
    let mut out = block.clone();
    for mut column in out.column_iter_mut() {
        for (x, m) in column.iter_mut().zip(mu) {
            *x -= m;
        }
    }
    clip_columns(&mut out, beta_i, None);
    out
}

#[cfg(test)]
#[path = "center_tests.rs"]
mod tests;
