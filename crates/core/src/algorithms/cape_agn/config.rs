//! `cape_agn`'s public terms: its limits, release labels, the parsed parameters and the fixed
//! configuration (the derivation is on the module page, [`super`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::algorithms::cape_noise::{CapeNoise, DEFAULT_PAIR_RATIO};

/// Largest D: the sites form D-dimensional packed third-order noise (C(D+2, 3) entries, 171 700
/// at D = 100) and project it, O(D³K) per site.
pub const MAX_D: usize = 100;
/// Largest K: the tensor power method costs O(L·N·K⁴).
pub const MAX_K: usize = 20;
/// Default number of simulated sites.
pub const DEFAULT_SITES: u32 = 3;
/// Most simulated sites (every pair shares a seed).
pub const MAX_SITES: u32 = 64;
/// Default random starts L of the tensor power method.
pub const DEFAULT_STARTS: usize = 20;
/// Default power iterations N per start.
pub const DEFAULT_POWER_ITERATIONS: usize = 30;
/// Release names of the two stages' noise reports.
pub const STAGE1: &str = "cape_stage1";
pub const STAGE2: &str = "cape_stage2";

/// The latent-variable model the moments come from (App. B).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Model {
    /// Single topic model: records are word counts.
    Stm,
    /// Spherical mixture of Gaussians with public variance σ².
    Mog,
}

/// What the client sends.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapeAgnParams {
    /// Number of mixture components / topics K (1 ≤ K ≤ min(d, 20)); d ≤ 100.
    #[schemars(range(min = 1, max = MAX_K))]
    pub k: usize,
    /// Latent-variable model (required): "stm" (rows are word counts of documents with ≥ 3
    /// words) or "mog" (spherical mixture of Gaussians with public variance sigma2).
    #[schemars(required, extend("enum" = ["stm", "mog"]))]
    pub model: Option<String>,
    /// mog only, required there: the public per-coordinate noise variance σ² ≥ 0.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub sigma2: Option<f64>,
    /// Number of simulated sites S, 2–64 (contiguous shards of the rows).
    #[serde(default)]
    #[schemars(range(min = 2, max = MAX_SITES), extend("default" = DEFAULT_SITES))]
    pub sites: Option<u32>,
    /// S positive numbers: shard sizes proportional to them. Default: equal shards.
    #[serde(default)]
    pub site_shares: Option<Vec<f64>>,
    /// Sites (1-based) that send nothing in either stage; the noise reports say the correlated
    /// terms did not cancel.
    #[serde(default)]
    pub dropouts: Vec<u32>,
    /// κ > 0: variance of each pairwise zero-sum term as a multiple of the pooled noise
    /// variance.
    #[serde(default)]
    #[schemars(extend("default" = DEFAULT_PAIR_RATIO, "exclusiveMinimum" = 0))]
    pub pair_ratio: Option<f64>,
    /// Random starts L of the tensor power method.
    #[serde(default)]
    #[schemars(extend("default" = DEFAULT_STARTS))]
    pub starts: Option<usize>,
    /// Power iterations N per start (1–1000).
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000), extend("default" = DEFAULT_POWER_ITERATIONS))]
    pub power_iterations: Option<usize>,
    /// Only "none": the moment models are about uncentred data.
    #[serde(default)]
    #[schemars(extend("enum" = ["none", null], "default" = "none"))]
    pub center: Option<serde_json::Value>,
}

/// Every parameter fixed and both stages' noise calibrated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapeAgnConfig {
    pub k: usize,
    pub model: Model,
    /// σ² (0 for STM).
    pub sigma2: f64,
    pub sites: u32,
    /// Shard proportions, summing to 1.
    pub shares: Vec<f64>,
    /// Sites (1-based, sorted) that send nothing.
    pub dropouts: Vec<u32>,
    pub starts: usize,
    pub power_iterations: usize,
    /// κ, the pair ratio both stages were calibrated with (a live site recalibrates from it).
    #[serde(default = "default_pair_ratio")]
    pub pair_ratio: f64,
    /// Stage 1 (second moments) at ρ/2.
    pub stage1: CapeNoise,
    /// Stage 2 (third moments) at ρ/2.
    pub stage2: CapeNoise,
}

fn default_pair_ratio() -> f64 {
    DEFAULT_PAIR_RATIO
}
