//! `cape_agn`: distributed differentially private orthogonal tensor decomposition (Imtiaz &
//! Sarwate, Alg. 3, "capeAGN"), simulate mode: a records dataset split into S sites. The CAPE
//! noise itself is the shared core [`crate::federation::cape`] (sum form, joint-view
//! calibration; its module docs explain the accounting).
//!
//! **Models** (App. B; Anandkumar et al. 2014 §3). Both give, in sum form over N records,
//! M₂ = Σ_n m₂(x_n) ≈ N·Σ_k w_k a_k a_kᵀ and M₃ = Σ_n m₃(x_n) ≈ N·Σ_k w_k a_k⊗a_k⊗a_k:
//! - `stm` (single topic model, App. B-A): a record is a document's word-count vector c ∈ ℕ^D
//!   with L = Σ_i c_i ≥ 3 words. Per record, the average over ordered triples of distinct word
//!   positions of t_p⊗t_q⊗t_r (the paper's t₁⊗t₂⊗t₃, symmetrised over all positions):
//!   m₂ = (ccᵀ − diag c)/(L(L−1)),
//!   m₃ = (c⊗c⊗c − Σ_i c_i·sym(e_i⊗e_i⊗c) + 2Σ_i c_i e_i⊗e_i⊗e_i)/(L(L−1)(L−2)),
//!   where sym(u⊗u⊗v) = u⊗u⊗v + u⊗v⊗u + v⊗u⊗u. Domain projection (per record, no data leaves
//!   it): entries are rounded to integers and negatives set to 0; a row with L < 3 contributes
//!   nothing. Components are word distributions; like the paper (§VI-B) we post-process them to
//!   probability vectors (negatives to 0, then divided by their sum).
//! - `mog` (spherical mixture of Gaussians, App. B-B): x = a_h + z, z ~ N(0, σ²I) with σ² a
//!   **public** parameter (`sigma2`, required: the paper treats it as known, and estimating it
//!   privately would need N, which is private under add_remove):
//!   m₂ = xxᵀ − σ²I, m₃ = x⊗x⊗x − σ²·Σ_d sym(e_d⊗e_d⊗x).
//!
//! **Sensitivities** (App. C in sum form: no 1/N_s; Frobenius norms, which bound the L2 norm of
//! the packed unique entries; β = the dataset's row-norm bound):
//!
//! | statistic | replace_one | add_remove |
//! |---|---|---|
//! | STM m₂, m₃ | √2 | 1 |
//! | MOG m₂ | √2·β² | sqrt(max(Dσ⁴, β⁴ − 2σ²β² + Dσ⁴)) |
//! | MOG m₃ | 2β³ + 2β·σ²·√(3D+6) | β³ + β·σ²·√(3D+6) |
//!
//! Why. STM: m₂ and m₃ are averages of one-hot outer products, so they are entrywise ≥ 0 with
//! Frobenius norm ≤ 1; two such tensors T, T' have ⟨T, T'⟩ ≥ 0, hence ‖T − T'‖ ≤ √2 (the
//! paper's Δ_{2,S} = Δ_{3,S} = √2/N). MOG: for replace_one the σ²I terms cancel and
//! ‖xxᵀ − yyᵀ‖_F ≤ √2β² (the paper's Δ_{2,M} = 1/N is a spectral-norm bound, which does not
//! calibrate a Gaussian on the entries; we use the Frobenius one). For add_remove
//! ‖xxᵀ − σ²I‖²_F = t² − 2σ²t + Dσ⁴ with t = ‖x‖² ∈ [0, β²], convex in t, so its maximum is at an
//! end. For m₃, ‖x⊗x⊗x − y⊗y⊗y‖ ≤ 2β³ and the correction T(v) = Σ_d sym(e_d⊗e_d⊗v) has
//! ‖T(v)‖²_F = (3D + 6)‖v‖² (three terms of norm² D‖v‖², six cross terms ‖v‖²), tighter than the
//! paper's 3D‖v‖; ‖x − y‖ ≤ 2β.
//!
//! **Protocol** (Alg. 3, ρ split evenly as the paper splits (ε, δ)). Stage 1: site s releases
//! its packed M₂^s by CAPE at ρ/2 (Alg. 3 steps 1–6); the aggregator forms M̂₂ = Σ_s(M̂₂^s − F₂^s)
//! (step 7), its top-K eigenpairs U, D, and W = U·D^{−1/2} (step 8). Noisy eigenvalues below the
//! public noise floor 2√D·τ₁ (τ₁ the stage-1 aggregate noise sd; 2√D·τ₁ is the spectral norm of
//! that noise) are clamped up to it, so W never divides by a nonpositive or noise-sized number;
//! the count of clamped values is released. Stage 2: site s releases its packed M₃^s with CAPE
//! at ρ/2 on the lattice, h·(round(M₃^s/h) + E₃^s + F₃^s + G₃^s), in the D-dimensional packed
//! space (steps 10–11, [`third_moment`], O(N_s·D³/6)), projects that lattice vector by the
//! public W and sends the K×K×K packed result ([`stage2_message`]); the aggregator subtracts
//! F₃^s(W,W,W) (step 13, App. A-B; [`stage2_sum`]). The message is a deterministic function of
//! the lattice release and W, so its cost is that release's (post-processing). Projecting the
//! unrounded moment instead (cheaper, O(N_s·(DK + K³))) would add M₃'s bits below the grid to
//! the message, which no lattice release covers. Then the robust tensor power method ([`super::tensor_power`]) gives (λ_i, v_i),
//! and (App. B-C; Anandkumar et al. 2014 Thm 4.3) a_i = λ_i·(Wᵀ)⁺v_i = λ_i·U·D^{1/2}·v_i,
//! w_i = 1/λ_i². In sum form M₂ and M₃ carry a factor N: a_i is unchanged and every w_i is
//! multiplied by N, so the weights are released normalised to sum to 1 (N is not needed).
//!
//! **Cost.** Each stage is one CAPE release calibrated against the aggregator's joint view
//! (`CapeNoise::calibrate(Δ, ρ/2, S, κ)`, cost `noise.cost()` ≤ ρ/2); the projection, the
//! eigendecomposition and the tensor power method are post-processing. Total
//! ρ = cost₁ + cost₂ = ρ_job (zCDP composition), Gaussian only.
//!
//! **Simulate mode.** The records are split into S contiguous shards (sizes proportional to
//! `site_shares`, equal by default). The partition stands for the federation's fixed
//! membership: the guarantee is for one record changed at one site, as in a live study.
//! **Dropouts**: a site listed in `dropouts` sends nothing in either stage (it is offline for
//! the whole job); the survivors' pair terms with it do not cancel, the aggregate carries the
//! extra noise, and both stage reports say so (`fallback: true`).

use std::collections::BTreeMap;
use std::ops::Range;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::noisy_power::{check_k, target_rho};
use super::sensitivity::check_bounds;
use super::tensor_power::{self, Eigenpair, PowerSettings, packed_index, packed_len};
use super::{
    Algorithm, AlgorithmInfo, ConfigError, DataInput, NoiseScale, Output, RunEnv, RunError, StudyKind,
};
use crate::dataset::{DataContext, Kind, Neighbours, Relation};
use crate::federation::cape::{
    self, CapeLattice, CapeNoise, CapeReport, DEFAULT_PAIR_RATIO, fresh_seed, pack_upper, site_release,
    unpack_symmetric,
};
use crate::federation::crypto::Seed;
use crate::linalg::{Matrix, Records, fix_signs, gram_t, thin_qr_q, try_sym_eig};
use crate::privacy::{Cost, PrivacyTarget};

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

/// Δ of the packed M₂^s (module docs' table).
pub fn second_moment_sensitivity(model: Model, sigma2: f64, d: usize, neighbours: &Neighbours) -> f64 {
    let s4 = sigma2 * sigma2;
    let dd = d as f64;
    match (model, *neighbours) {
        (Model::Stm, Neighbours::ReplaceOne { .. }) => std::f64::consts::SQRT_2,
        (Model::Stm, _) => 1.0,
        (Model::Mog, Neighbours::ReplaceOne { beta, .. }) => std::f64::consts::SQRT_2 * beta * beta,
        (Model::Mog, Neighbours::AddRemove { beta, .. }) => {
            let b2 = beta * beta;
            (dd * s4).max(b2 * b2 - 2.0 * sigma2 * b2 + dd * s4).sqrt()
        }
        (Model::Mog, Neighbours::Entry { u }) => u,
    }
}

/// Δ of the packed M₃^s (module docs' table).
pub fn third_moment_sensitivity(model: Model, sigma2: f64, d: usize, neighbours: &Neighbours) -> f64 {
    let corr = sigma2 * (3.0 * d as f64 + 6.0).sqrt();
    match (model, *neighbours) {
        (Model::Stm, Neighbours::ReplaceOne { .. }) => std::f64::consts::SQRT_2,
        (Model::Stm, _) => 1.0,
        (Model::Mog, Neighbours::ReplaceOne { beta, .. }) => 2.0 * beta.powi(3) + 2.0 * beta * corr,
        (Model::Mog, Neighbours::AddRemove { beta, .. }) => beta.powi(3) + beta * corr,
        (Model::Mog, Neighbours::Entry { u }) => u,
    }
}

fn parse_model(params: &CapeAgnParams) -> Result<(Model, f64), ConfigError> {
    let model = match params.model.as_deref() {
        Some("stm") => Model::Stm,
        Some("mog") => Model::Mog,
        Some(other) => {
            return Err(ConfigError::invalid(
                "params.model",
                format!("must be \"stm\" or \"mog\" (got \"{other}\")"),
            ));
        }
        None => {
            return Err(ConfigError::invalid(
                "params.model",
                "is required: \"stm\" (single topic model, word counts) or \"mog\" (spherical mixture of Gaussians)",
            ));
        }
    };
    let sigma2 = match (model, params.sigma2) {
        (Model::Mog, Some(s)) if s >= 0.0 && s.is_finite() => s,
        (Model::Mog, Some(s)) => {
            return Err(ConfigError::invalid(
                "params.sigma2",
                format!("must be a finite number ≥ 0 (got {s})"),
            ));
        }
        (Model::Mog, None) => {
            return Err(ConfigError::invalid(
                "params.sigma2",
                "is required for model \"mog\": the public variance σ² of each coordinate's Gaussian noise",
            ));
        }
        (Model::Stm, Some(_)) => {
            return Err(ConfigError::invalid(
                "params.sigma2",
                "applies to model \"mog\" only",
            ));
        }
        (Model::Stm, None) => 0.0,
    };
    Ok((model, sigma2))
}

/// Checks what public facts can say about the model fitting the dataset (kind, bounds).
fn check_model_fits(model: Model, ctx: &DataContext) -> Result<(), ConfigError> {
    if ctx.kind() != Kind::Records {
        return Err(ConfigError::invalid(
            "params.model",
            "both models describe records (documents or samples); this dataset is a matrix",
        ));
    }
    if let (Model::Stm, Neighbours::ReplaceOne { beta, alpha } | Neighbours::AddRemove { beta, alpha }) =
        (model, ctx.neighbours)
    {
        // A document of L ≥ 3 words has ‖c‖₂ ≥ √3 and ‖c‖₁ = L ≥ 3: smaller bounds clip every
        // document below a count vector.
        if !(beta >= 3f64.sqrt() && alpha >= 3.0) {
            return Err(ConfigError::invalid(
                "params.model",
                format!(
                    "\"stm\" needs word-count rows of at least 3 words, so row_norm_bound ≥ √3 and the L1 bound ≥ 3 (got β = {beta}, α = {alpha}); set the bounds to the longest document so no row is clipped"
                ),
            ));
        }
    }
    Ok(())
}

fn check_sites(params: &CapeAgnParams, ctx: &DataContext) -> Result<(u32, Vec<f64>, Vec<u32>), ConfigError> {
    let sites = match (&params.sites, &params.site_shares) {
        (Some(s), _) => *s,
        (None, Some(shares)) => u32::try_from(shares.len()).unwrap_or(u32::MAX),
        (None, None) => DEFAULT_SITES,
    };
    if !(2..=MAX_SITES).contains(&sites) {
        return Err(ConfigError::invalid(
            "params.sites",
            format!(
                "CAPE needs 2 ≤ sites ≤ {MAX_SITES} (got {sites}): with one site there is no correlated noise to cancel"
            ),
        ));
    }
    let shares = match &params.site_shares {
        None => vec![1.0 / f64::from(sites); sites as usize],
        Some(shares) => {
            let ok = shares.len() == sites as usize && shares.iter().all(|s| *s > 0.0 && s.is_finite());
            let total: f64 = shares.iter().sum();
            if !(ok && total.is_finite()) {
                return Err(ConfigError::invalid(
                    "params.site_shares",
                    format!("must be {sites} finite numbers > 0, one per site"),
                ));
            }
            shares.iter().map(|s| s / total).collect()
        }
    };
    if let Some(n) = ctx.n
        && n < sites as usize
    {
        return Err(ConfigError::invalid(
            "params.sites",
            format!("cannot split {n} records into {sites} sites"),
        ));
    }
    let mut dropouts = params.dropouts.clone();
    dropouts.sort_unstable();
    dropouts.dedup();
    if let Some(bad) = dropouts.iter().find(|s| !(1..=sites).contains(*s)) {
        return Err(ConfigError::invalid(
            "params.dropouts",
            format!("site {bad} is not in 1..={sites}"),
        ));
    }
    if dropouts.len() >= sites as usize {
        return Err(ConfigError::invalid(
            "params.dropouts",
            "at least one site must send",
        ));
    }
    // Simulated shards are contiguous by record index. Under add_remove one added record shifts
    // every later shard boundary, so the records a dropped site holds would change with it and
    // the survivors' sum could move by more than one record (docs/design/cape.md, "Outcomes that
    // do not depend on n"). Without dropouts the sum covers every shard and equals the whole
    // statistic whatever the split. The relation is public: this refusal reveals nothing.
    if !dropouts.is_empty() && ctx.relation() == crate::dataset::Relation::AddRemove {
        return Err(ConfigError::invalid(
            "params.dropouts",
            "simulated dropouts need a replace_one dataset: under add_remove the contiguous shards move with the private n",
        ));
    }
    Ok((sites, shares, dropouts))
}

/// Validates `params` against the public context and calibrates both stages at ρ/2 each.
pub fn configure(
    params: CapeAgnParams,
    ctx: &DataContext,
    target: &PrivacyTarget,
) -> Result<CapeAgnConfig, ConfigError> {
    let (model, sigma2) = parse_model(&params)?;
    check_model_fits(model, ctx)?;
    check_bounds(&ctx.neighbours)?;
    let rho = target_rho(target)?;
    let d = ctx.d;
    if d > MAX_D {
        return Err(ConfigError::invalid(
            "params.k",
            format!(
                "cape_agn handles d ≤ {MAX_D} (the sites form C(d+2, 3)-entry third-moment tensors); this dataset has d = {d}"
            ),
        ));
    }
    check_k(params.k, d)?;
    if params.k > MAX_K {
        return Err(ConfigError::invalid(
            "params.k",
            format!("must be ≤ {MAX_K} (the tensor power method costs O(k⁴) per step)"),
        ));
    }
    if let Some(center) = &params.center
        && center != &json!("none")
    {
        return Err(ConfigError::invalid(
            "params.center",
            "cape_agn's moment models are about uncentred data (MOG means, STM counts); only \"none\" is accepted",
        ));
    }
    let (sites, shares, dropouts) = check_sites(&params, ctx)?;
    let pair_ratio = params.pair_ratio.unwrap_or(DEFAULT_PAIR_RATIO);
    if !(pair_ratio > 0.0 && pair_ratio.is_finite()) {
        return Err(ConfigError::invalid(
            "params.pair_ratio",
            "must be a finite number > 0",
        ));
    }
    let starts = params.starts.unwrap_or(DEFAULT_STARTS);
    if !(1..=1000).contains(&starts) {
        return Err(ConfigError::invalid("params.starts", "must lie in 1..=1000"));
    }
    let power_iterations = params.power_iterations.unwrap_or(DEFAULT_POWER_ITERATIONS);
    if !(1..=1000).contains(&power_iterations) {
        return Err(ConfigError::invalid(
            "params.power_iterations",
            "must lie in 1..=1000",
        ));
    }
    let calibrate = |delta: f64| {
        CapeNoise::calibrate(delta, rho / 2.0, sites, pair_ratio).ok_or_else(|| {
            ConfigError::invalid(
                "rho",
                "is too small or too large to calibrate noise in floating point",
            )
        })
    };
    let stage1 = calibrate(second_moment_sensitivity(model, sigma2, d, &ctx.neighbours))?;
    let stage2 = calibrate(third_moment_sensitivity(model, sigma2, d, &ctx.neighbours))?;
    Ok(CapeAgnConfig {
        k: params.k,
        model,
        sigma2,
        sites,
        shares,
        dropouts,
        starts,
        power_iterations,
        pair_ratio,
        stage1,
        stage2,
    })
}

/// Column ranges of `n` records split into contiguous shards proportional to `shares`.
pub fn shard_ranges(n: usize, shares: &[f64]) -> Vec<Range<usize>> {
    let mut out = Vec::with_capacity(shares.len());
    let mut cumulative = 0.0;
    let mut start = 0;
    for (s, share) in shares.iter().enumerate() {
        cumulative += share;
        let end = if s + 1 == shares.len() {
            n
        } else {
            ((cumulative * n as f64).round() as usize).clamp(start, n)
        };
        out.push(start..end);
        start = end;
    }
    out
}

/// The model's domain projection of records (module docs): identity for MOG; for STM, entries
/// rounded to integers ≥ 0 and rows of fewer than 3 words zeroed.
pub fn to_domain<'a>(xt: impl Into<Records<'a>>, model: Model) -> Matrix {
    let xt = xt.into();
    match model {
        Model::Mog => xt.to_matrix(),
        Model::Stm => {
            let mut c = xt.map(|v| if v.is_finite() { v.round().max(0.0) } else { 0.0 });
            for mut col in c.column_iter_mut() {
                if col.sum() < 3.0 {
                    col.fill(0.0);
                }
            }
            c
        }
    }
}

/// Σ_n m₂(x_n) over domain-projected records `xt` (d×n): the D×D sum-form second moment.
pub fn second_moment(xt: &Matrix, model: Model, sigma2: f64) -> Matrix {
    let d = xt.nrows();
    if xt.ncols() == 0 {
        return Matrix::zeros(d, d);
    }
    match model {
        Model::Mog => gram_t(xt) - Matrix::identity(d, d) * (sigma2 * xt.ncols() as f64),
        Model::Stm => {
            // (ccᵀ − diag c)/(L(L−1)) per document: scale columns by 1/sqrt(L(L−1)).
            let mut scaled = xt.clone();
            let mut diag = vec![0.0; d];
            for (mut col, orig) in scaled.column_iter_mut().zip(xt.column_iter()) {
                let l = orig.sum();
                if l < 3.0 {
                    col.fill(0.0);
                    continue;
                }
                let pairs = l * (l - 1.0);
                col /= pairs.sqrt();
                for (acc, c) in diag.iter_mut().zip(orig.iter()) {
                    *acc += c / pairs;
                }
            }
            let mut m = gram_t(&scaled);
            for (i, v) in diag.into_iter().enumerate() {
                m[(i, i)] -= v;
            }
            m
        }
    }
}

/// Adds coef·sym(u⊗u⊗v) = coef·(u⊗u⊗v + u⊗v⊗u + v⊗u⊗u) to a packed K-tensor.
fn add_sym_uuv(out: &mut [f64], k: usize, coef: f64, u: &[f64], v: &[f64]) {
    tensor_power::for_each_packed(k, |idx, a, b, c| {
        out[idx] += coef * (u[a] * u[b] * v[c] + u[a] * v[b] * u[c] + v[a] * u[b] * u[c]);
    });
}

/// Adds coef·u⊗u⊗u to a packed K-tensor.
fn add_cube(out: &mut [f64], k: usize, coef: f64, u: &[f64]) {
    tensor_power::for_each_packed(k, |idx, a, b, c| out[idx] += coef * u[a] * u[b] * u[c]);
}

/// Adds coef·sym(e_i⊗e_i⊗v) to a packed D-tensor: the only entries with index i at least twice,
/// 3v_i at (i, i, i), v_c at (i, i, c) for c > i and v_a at (a, i, i) for a < i.
fn add_sym_eev(out: &mut [f64], coef: f64, i: usize, v: &[f64]) {
    out[packed_index(i, i, i)] += 3.0 * coef * v[i];
    for (c, vc) in v.iter().enumerate().skip(i + 1) {
        out[packed_index(i, i, c)] += coef * vc;
    }
    for (a, va) in v.iter().enumerate().take(i) {
        out[packed_index(a, i, i)] += coef * va;
    }
}

/// Adds coef·x⊗x⊗x to a packed D-tensor, skipping zero entries of x (STM records are sparse).
fn add_cube_packed(out: &mut [f64], coef: f64, x: &[f64]) {
    for (k, xk) in x.iter().enumerate() {
        if *xk == 0.0 {
            continue;
        }
        for (j, xj) in x.iter().enumerate().take(k + 1) {
            if *xj == 0.0 {
                continue;
            }
            let cjk = coef * xj * xk;
            let start = packed_index(0, j, k);
            for (o, xi) in out[start..=start + j].iter_mut().zip(x) {
                *o += cjk * xi;
            }
        }
    }
}

/// Σ_n m₃(x_n) over domain-projected records `xt` (d×n): the packed D-dimensional third moment
/// M₃^s (module docs), C(D+2, 3) entries, O(N·D³/6) for dense records. It is what a site rounds
/// to the grid and releases in stage 2 before projecting ([`stage2_message`]).
pub fn third_moment(xt: &Matrix, model: Model, sigma2: f64) -> Vec<f64> {
    let d = xt.nrows();
    let mut out = vec![0.0; packed_len(d)];
    let mut sum = vec![0.0; d];
    for x in xt.column_iter() {
        let x: Vec<f64> = x.iter().copied().collect();
        match model {
            Model::Mog => {
                add_cube_packed(&mut out, 1.0, &x);
                for (acc, v) in sum.iter_mut().zip(&x) {
                    *acc += v;
                }
            }
            Model::Stm => {
                let l: f64 = x.iter().sum();
                if l < 3.0 {
                    continue;
                }
                let coef = 1.0 / (l * (l - 1.0) * (l - 2.0));
                add_cube_packed(&mut out, coef, &x);
                for (i, ci) in x.iter().enumerate() {
                    if *ci != 0.0 {
                        add_sym_eev(&mut out, -coef * ci, i, &x);
                        out[packed_index(i, i, i)] += 2.0 * coef * ci;
                    }
                }
            }
        }
    }
    if model == Model::Mog && sigma2 > 0.0 {
        // −σ²·Σ_d sym(e_d⊗e_d⊗Σ_n x_n).
        for i in 0..d {
            add_sym_eev(&mut out, -sigma2, i, &sum);
        }
    }
    out
}

/// Σ_n m₃(x_n)(W, W, W) over domain-projected records `xt` (d×n), packed K×K×K, computed from
/// the records directly (module docs): y = Wᵀx and the rows w_i of W replace x and e_i. With
/// W = I it is the D-dimensional packed M₃^s itself.
pub fn projected_third_moment(xt: &Matrix, model: Model, sigma2: f64, w: &Matrix) -> Vec<f64> {
    let (d, k) = w.shape();
    let mut out = vec![0.0; packed_len(k)];
    let rows: Vec<Vec<f64>> = (0..d).map(|i| w.row(i).iter().copied().collect()).collect();
    let mut y_sum = vec![0.0; k];
    for x in xt.column_iter() {
        let mut y = vec![0.0; k];
        for (i, xi) in x.iter().enumerate() {
            if *xi != 0.0 {
                for (acc, wi) in y.iter_mut().zip(&rows[i]) {
                    *acc += xi * wi;
                }
            }
        }
        match model {
            Model::Mog => {
                add_cube(&mut out, k, 1.0, &y);
                for (acc, v) in y_sum.iter_mut().zip(&y) {
                    *acc += v;
                }
            }
            Model::Stm => {
                let l = x.sum();
                if l < 3.0 {
                    continue;
                }
                let coef = 1.0 / (l * (l - 1.0) * (l - 2.0));
                add_cube(&mut out, k, coef, &y);
                for (i, ci) in x.iter().enumerate() {
                    if *ci != 0.0 {
                        add_sym_uuv(&mut out, k, -coef * ci, &rows[i], &y);
                        add_cube(&mut out, k, 2.0 * coef * ci, &rows[i]);
                    }
                }
            }
        }
    }
    if model == Model::Mog && sigma2 > 0.0 {
        // −σ²·Σ_d sym(w_d⊗w_d⊗ȳ) = −σ²·(ȳ_a G_bc + G_ac ȳ_b + G_ab ȳ_c), G = WᵀW.
        let g = w.transpose() * w;
        tensor_power::for_each_packed(k, |idx, a, b, c| {
            out[idx] -= sigma2 * (y_sum[a] * g[(b, c)] + y_sum[b] * g[(a, c)] + y_sum[c] * g[(a, b)]);
        });
    }
    out
}

/// The whitening of Alg. 3 step 8: W = U·D^{−1/2} and its back-map (Wᵀ)⁺ = U·D^{1/2}.
#[derive(Debug, Clone)]
pub struct Whitening {
    /// D×K.
    pub w: Matrix,
    /// D×K, (Wᵀ)⁺.
    pub back: Matrix,
    /// How many of the top-K eigenvalues were below the floor and clamped to it.
    pub clamped: usize,
}

/// Top-K eigenpairs of the (noisy) sum-form M̂₂ and the whitening, eigenvalues clamped up to
/// `floor` > 0 (module docs).
pub fn whiten(m2: &Matrix, k: usize, floor: f64) -> Result<Whitening, RunError> {
    let eig = try_sym_eig(m2)
        .map_err(|_| RunError::Failed("the eigendecomposition of M̂₂ did not converge".into()))?;
    let d = m2.nrows();
    let mut w = Matrix::zeros(d, k);
    let mut back = Matrix::zeros(d, k);
    let mut clamped = 0;
    for j in 0..k {
        let mut lambda = eig.values[j];
        if !(lambda >= floor) {
            lambda = floor;
            clamped += 1;
        }
        let root = lambda.sqrt();
        for i in 0..d {
            let u = eig.vectors[(i, j)];
            w[(i, j)] = u / root;
            back[(i, j)] = u * root;
        }
    }
    Ok(Whitening { w, back, clamped })
}

/// Recovered components a_i (length D each) and normalised weights, by decreasing weight.
#[derive(Debug, Clone, PartialEq)]
pub struct Components {
    pub vectors: Vec<Vec<f64>>,
    pub weights: Vec<f64>,
}

/// a_i = λ_i·(Wᵀ)⁺v_i, w_i ∝ 1/λ_i² (App. B-C; Anandkumar et al. 2014 Thm 4.3); STM components
/// post-processed to probability vectors (§VI-B).
pub fn unwhiten(whitening: &Whitening, pairs: &[Eigenpair], model: Model) -> Components {
    let mut items: Vec<(f64, Vec<f64>)> = pairs
        .iter()
        .map(|p| {
            let lambda = p.value.max(f64::MIN_POSITIVE);
            let v = crate::linalg::Vector::from_column_slice(&p.vector);
            let mut a: Vec<f64> = (&whitening.back * v * lambda).iter().copied().collect();
            if model == Model::Stm {
                a.iter_mut().for_each(|x| *x = x.max(0.0));
                let total: f64 = a.iter().sum();
                if total > 0.0 {
                    a.iter_mut().for_each(|x| *x /= total);
                }
            }
            (1.0 / (lambda * lambda), a)
        })
        .collect();
    let total: f64 = items.iter().map(|(w, _)| w).sum();
    items.sort_by(|a, b| b.0.total_cmp(&a.0));
    Components {
        weights: items
            .iter()
            .map(|(w, _)| {
                if total.is_finite() && total > 0.0 {
                    w / total
                } else {
                    f64::NAN
                }
            })
            .collect(),
        vectors: items.into_iter().map(|(_, a)| a).collect(),
    }
}

/// Orthonormal basis of span{a_i} (thin QR, columns in the components' order, signs fixed).
pub fn components_basis(components: &Components, d: usize) -> Matrix {
    let k = components.vectors.len();
    let a = Matrix::from_fn(d, k, |i, j| components.vectors[j][i]);
    let mut q = thin_qr_q(&a);
    fix_signs(&mut q);
    q
}

/// What the aggregator ends with.
#[derive(Debug, Clone)]
pub struct Decomposition {
    pub components: Components,
    pub clamped: usize,
}

/// Aggregator steps after the stage-1 aggregate: whiten M̂₂ (floor as in the module docs), obtain
/// the projected third moment for that W from `third` (stage 2), run the tensor power method,
/// un-whiten. Shared by the simulation and the experiments' baselines.
pub fn decompose(
    m2: &Matrix,
    k: usize,
    floor: f64,
    model: Model,
    settings: PowerSettings,
    rng: &mut dyn rand::RngCore,
    third: impl FnOnce(&Matrix) -> Result<Vec<f64>, RunError>,
) -> Result<Decomposition, RunError> {
    let whitening = whiten(m2, k, floor)?;
    let t = third(&whitening.w)?;
    let pairs = tensor_power::tensor_power(&t, k, k, settings, rng).map_err(RunError::Failed)?;
    Ok(Decomposition {
        components: unwhiten(&whitening, &pairs, model),
        clamped: whitening.clamped,
    })
}

/// The eigenvalue floor: 2√D·τ, τ the per-entry sd of the stage-1 aggregate noise.
pub fn noise_floor(d: usize, aggregate_sd: f64) -> f64 {
    2.0 * (d as f64).sqrt() * aggregate_sd
}

/// A finished simulation.
#[derive(Debug, Clone)]
pub struct SimulatedRun {
    pub decomposition: Decomposition,
    pub stage1: CapeReport,
    pub stage2: CapeReport,
}

/// Seeds of one CAPE stage: every pair's seed and the aggregator's seed per site (simulate
/// mode draws them from the run's public randomness; live sites agree on pair seeds by X25519).
pub struct StageSeeds {
    pairs: BTreeMap<(u32, u32), Seed>,
    aggregator: BTreeMap<u32, Seed>,
}

impl StageSeeds {
    pub fn fresh(sites: u32, env: &mut RunEnv<'_>) -> Self {
        let mut pairs = BTreeMap::new();
        for a in 1..=sites {
            for b in a + 1..=sites {
                pairs.insert((a, b), fresh_seed(env.rng()));
            }
        }
        let aggregator = (1..=sites).map(|s| (s, fresh_seed(env.rng()))).collect();
        Self { pairs, aggregator }
    }

    /// Site `me`'s pair seeds with every other site.
    pub fn of(&self, me: u32, sites: u32) -> Vec<(u32, Seed)> {
        (1..=sites)
            .filter(|&j| j != me)
            .map(|j| (j, self.pairs[&(me.min(j), me.max(j))]))
            .collect()
    }

    /// The aggregator's seed of every site.
    pub fn aggregator(&self) -> &BTreeMap<u32, Seed> {
        &self.aggregator
    }
}

fn failed(e: impl std::fmt::Display) -> RunError {
    RunError::Failed(e.to_string())
}

fn check_shards(shards: &[Matrix], config: &CapeAgnConfig) -> Result<usize, RunError> {
    let d = shards
        .first()
        .map(Matrix::nrows)
        .ok_or_else(|| failed("no sites"))?;
    if shards.len() != config.sites as usize || shards.iter().any(|s| s.nrows() != d) {
        return Err(failed("the shards do not match the configuration"));
    }
    Ok(d)
}

/// Stage 1 (Alg. 3 steps 1–7): every site sends its packed M₂^s by CAPE; the aggregator's
/// Σ_{s sent}(M̂₂^s − F₂^s), packed upper triangle.
pub fn stage1_aggregate(
    shards: &[Matrix],
    config: &CapeAgnConfig,
    seeds: &StageSeeds,
    env: &mut RunEnv<'_>,
) -> Result<Vec<f64>, RunError> {
    let d = check_shards(shards, config)?;
    let sites = config.sites;
    let mut releases = BTreeMap::new();
    for (s, shard) in (1..=sites).zip(shards) {
        let statistic = pack_upper(&second_moment(shard, config.model, config.sigma2));
        let message = site_release(
            &statistic,
            s,
            &seeds.of(s, sites),
            &seeds.aggregator[&s],
            &config.stage1,
            env,
        )?;
        if !config.dropouts.contains(&s) {
            releases.insert(s, message);
        }
    }
    cape::aggregate(&releases, &seeds.aggregator, d * (d + 1) / 2, &config.stage1).map_err(failed)
}

/// Site s's stage-2 message (Alg. 3 steps 10–11), shared by the simulation and the live site
/// (`src/site/cape.rs`): the CAPE lattice release of its packed D-dimensional M₃^s,
/// h·(round(M₃^s/h) + E₃ + F₃ + G₃) ([`site_release`], the same mechanism and cost as any CAPE
/// release of C(D+2, 3) values with Δ = `noise.sensitivity`), then projected by the public W
/// (packed K×K×K). The projection is a deterministic function of that lattice vector and W,
/// so the message is post-processing of the lattice release whose cost the calibration covers.
#[allow(clippy::too_many_arguments)]
pub fn stage2_message(
    records: &Matrix,
    model: Model,
    sigma2: f64,
    w: &Matrix,
    me: u32,
    pair_seeds: &[(u32, Seed)],
    aggregator_seed: &Seed,
    noise: &CapeNoise,
    env: &mut RunEnv<'_>,
) -> Result<Vec<f64>, RunError> {
    let d = records.nrows();
    if w.nrows() != d {
        return Err(failed("W does not match the records"));
    }
    let m3 = third_moment(records, model, sigma2);
    let release = site_release(&m3, me, pair_seeds, aggregator_seed, noise, env)?;
    tensor_power::project_packed(&release, d, w).map_err(failed)
}

/// The aggregator's stage-2 sum Σ_{s sent}(M̃₃^s − F₃^s(W, W, W)) (Alg. 3 step 13), shared by
/// the simulation and the live coordinator: F₃^s is expanded on the D-dimensional lattice
/// (`packed_len(d)` values) and projected like the messages.
pub fn stage2_sum(
    releases: &BTreeMap<u32, Vec<f64>>,
    aggregator_seeds: &BTreeMap<u32, Seed>,
    noise: &CapeNoise,
    w: &Matrix,
) -> Result<Vec<f64>, String> {
    let d = w.nrows();
    let len3 = packed_len(d);
    let lattice = CapeLattice::new(noise, len3).map_err(|e| e.to_string())?;
    let mut total = vec![0.0; packed_len(w.ncols())];
    for (site, release) in releases {
        if release.len() != total.len() {
            return Err(format!(
                "site {site}'s stage-2 release has {} entries, not {}",
                release.len(),
                total.len()
            ));
        }
        let seed = aggregator_seeds
            .get(site)
            .ok_or_else(|| format!("no aggregator seed for site {site}"))?;
        let f = tensor_power::project_packed(&lattice.aggregator_term(seed, len3), d, w)?;
        for ((acc, m), f) in total.iter_mut().zip(release).zip(f) {
            *acc += m - f;
        }
    }
    if total.iter().all(|v| v.is_finite()) {
        Ok(total)
    } else {
        Err("numerical overflow in the stage-2 aggregate".into())
    }
}

/// Stage 2 (steps 9–13) in simulation: every site forms its [`stage2_message`] (a dropout's is
/// drawn and discarded, so the generator advances as if it had sent), and the aggregator's
/// [`stage2_sum`].
pub fn stage2_aggregate(
    shards: &[Matrix],
    config: &CapeAgnConfig,
    seeds: &StageSeeds,
    w: &Matrix,
    env: &mut RunEnv<'_>,
) -> Result<Vec<f64>, RunError> {
    let d = check_shards(shards, config)?;
    if w.nrows() != d {
        return Err(failed("W does not match the shards"));
    }
    let sites = config.sites;
    let mut releases = BTreeMap::new();
    for (s, shard) in (1..=sites).zip(shards) {
        let message = stage2_message(
            shard,
            config.model,
            config.sigma2,
            w,
            s,
            &seeds.of(s, sites),
            &seeds.aggregator[&s],
            &config.stage2,
            env,
        )?;
        if !config.dropouts.contains(&s) {
            releases.insert(s, message);
        }
    }
    stage2_sum(&releases, &seeds.aggregator, &config.stage2, w).map_err(failed)
}

/// Runs Alg. 3 over the domain-projected shards `shards` (one d×n_s matrix per site), every
/// CAPE message formed as a live site would (module docs).
pub fn simulate(
    shards: &[Matrix],
    config: &CapeAgnConfig,
    env: &mut RunEnv<'_>,
) -> Result<SimulatedRun, RunError> {
    let d = check_shards(shards, config)?;
    let survivors: Vec<u32> = (1..=config.sites)
        .filter(|s| !config.dropouts.contains(s))
        .collect();
    env.progress(0, 3)?;
    let seeds = StageSeeds::fresh(config.sites, env);
    let sum = stage1_aggregate(shards, config, &seeds, env)?;
    let m2 = unpack_symmetric(&sum, d).map_err(failed)?;
    let stage1 = config.stage1.report(survivors.clone(), config.dropouts.clone());
    env.progress(1, 3)?;
    let whitening = whiten(&m2, config.k, noise_floor(d, stage1.noise_sd))?;
    let seeds = StageSeeds::fresh(config.sites, env);
    let t = stage2_aggregate(shards, config, &seeds, &whitening.w, env)?;
    env.progress(2, 3)?;
    let settings = PowerSettings {
        starts: config.starts,
        iterations: config.power_iterations,
    };
    let pairs = tensor_power::tensor_power(&t, config.k, config.k, settings, env.rng()).map_err(failed)?;
    let decomposition = Decomposition {
        components: unwhiten(&whitening, &pairs, config.model),
        clamped: whitening.clamped,
    };
    env.progress(3, 3)?;
    Ok(SimulatedRun {
        decomposition,
        stage1,
        stage2: config.stage2.report(survivors, config.dropouts.clone()),
    })
}

/// Distributed private orthogonal tensor decomposition.
#[derive(Debug, Clone, Copy, Default)]
pub struct CapeAgn;

impl Algorithm for CapeAgn {
    type Params = CapeAgnParams;
    type Config = CapeAgnConfig;

    fn info(&self) -> AlgorithmInfo {
        AlgorithmInfo {
            name: "cape_agn",
            summary: "Distributed private orthogonal tensor decomposition (capeAGN): S simulated sites release their second and third moments with CAPE correlated noise; the aggregator whitens, runs the tensor power method and returns the mixture components (released.components) and an orthonormal basis of their span. Simulate mode over a records dataset.",
            source: "Imtiaz & Sarwate, Distributed differentially private algorithms for matrix and tensor factorization, Alg. 1 and 3, App. B–C; Anandkumar et al. 2014 Alg. 1",
            kinds: vec![Kind::Records],
            relations: vec![Relation::ReplaceOne, Relation::AddRemove],
            privacy: "ρ-zCDP charged to every site: two CAPE releases (second moments, third moments) at ρ/2 each, calibrated against the aggregator's joint view of all messages; Δ from the model (Imtiaz & Sarwate App. C in sum form).",
            public_only: false,
            scope_reason: Some("cape_agn's models (STM, MOG) describe records"),
            releases_eigenvalues: false,
            study: Some(StudyKind::Cape),
        }
    }

    fn configure(
        &self,
        params: CapeAgnParams,
        ctx: &DataContext,
        target: &PrivacyTarget,
    ) -> Result<CapeAgnConfig, ConfigError> {
        configure(params, ctx, target)
    }

    /// ρ = cost₁ + cost₂, each the joint-view CAPE cost of its stage (module docs).
    fn cost(&self, config: &CapeAgnConfig, _ctx: &DataContext) -> Cost {
        Cost::gaussian_zcdp(config.stage1.cost() + config.stage2.cost())
    }

    fn noise_scales(&self, config: &CapeAgnConfig, ctx: &DataContext) -> Vec<NoiseScale> {
        let d = ctx.d;
        let scale = |release: &str, noise: &CapeNoise, len: usize, what: &str| NoiseScale {
            release: release.into(),
            distribution: "gaussian".into(),
            multiplier: noise.own_sd / noise.sensitivity,
            sensitivity: Some(noise.sensitivity),
            count: config.sites as usize,
            description: format!(
                "{what}: each of {} sites adds its own N(0, {:.4e}²) to {len} packed entries, plus pairwise zero-sum terms (sd {:.4e}) and the aggregator's term (sd {:.4e}); the aggregate carries sd {:.4e} per entry when all send (pooled {:.4e}).",
                config.sites,
                noise.own_sd,
                noise.pair_sd,
                noise.aggregator_sd,
                noise.achieved_sd(config.sites as usize, 0),
                noise.pooled_sd
            ),
        };
        vec![
            scale(STAGE1, &config.stage1, d * (d + 1) / 2, "Stage 1, second moments"),
            scale(
                STAGE2,
                &config.stage2,
                packed_len(d),
                "Stage 2, third moments (projected by W before sending)",
            ),
        ]
    }

    fn run(
        &self,
        input: DataInput<'_>,
        config: &CapeAgnConfig,
        ctx: &DataContext,
        env: &mut RunEnv<'_>,
    ) -> Result<Output, RunError> {
        let DataInput::Records { xt } = input else {
            return Err(failed("cape_agn runs on records"));
        };
        let d = ctx.d;
        if xt.nrows() != d
            || !(config.k >= 1 && config.k <= d)
            || config.shares.len() != config.sites as usize
        {
            return Err(failed("the stored configuration does not fit the dataset"));
        }
        let records = to_domain(xt, config.model);
        let shards: Vec<Matrix> = shard_ranges(records.ncols(), &config.shares)
            .into_iter()
            .map(|r| records.columns(r.start, r.len()).into_owned())
            .collect();
        let run = simulate(&shards, config, env)?;
        let c = &run.decomposition.components;
        env.record_release(
            "components",
            json!({
                "model": config.model,
                "components": c.vectors,
                "weights": c.weights,
                "clamped_eigenvalues": run.decomposition.clamped,
            }),
        );
        env.record_release(STAGE1, serde_json::to_value(&run.stage1).map_err(failed)?);
        env.record_release(STAGE2, serde_json::to_value(&run.stage2).map_err(failed)?);
        let basis = components_basis(c, d);
        if basis.ncols() != config.k || !basis.iter().all(|v| v.is_finite()) {
            return Err(failed("the recovered components are degenerate"));
        }
        Ok(Output {
            basis,
            eigenvalues: None,
        })
    }
}

#[cfg(test)]
#[path = "cape_agn_tests.rs"]
mod tests;
