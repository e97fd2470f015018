//! `cape_agn`: distributed differentially private orthogonal tensor decomposition (Imtiaz &
//! Sarwate, Alg. 3, "capeAGN"), simulate mode: a records dataset split into S sites. The CAPE
//! noise itself is the shared core [`crate::algorithms::cape_noise`] (sum form, joint-view
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

mod config;
mod moments;
mod stages;
mod whitening;

pub use self::config::*;
pub use self::moments::{
    projected_third_moment, second_moment, second_moment_sensitivity, third_moment, third_moment_sensitivity,
    to_domain,
};
pub use self::stages::{
    SimulatedRun, StageSeeds, shard_ranges, simulate, stage1_aggregate, stage2_aggregate, stage2_message,
    stage2_sum,
};
pub use self::whitening::{
    Components, Decomposition, Whitening, components_basis, decompose, noise_floor, unwhiten, whiten,
};

use serde_json::json;

use self::stages::failed;
use super::calibration::{check_k, target_rho};
use super::cape_pca::simulated_split;
use super::sensitivity::check_bounds;
use super::tensor_power::packed_len;
use super::{
    Algorithm, AlgorithmInfo, ConfigError, DataInput, NoiseScale, Output, Run, RunError, catalog, ensure_fits,
};
use crate::algorithms::cape_noise::{CapeNoise, DEFAULT_PAIR_RATIO};
use crate::dataset::{DataContext, Kind, Neighbours};
use crate::linalg::Matrix;
use crate::privacy::{Cost, PrivacyTarget};

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
    let dropouts = simulated_split(ctx, sites, &params.dropouts)?;
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

/// Distributed private orthogonal tensor decomposition.
#[derive(Debug, Clone, Copy, Default)]
pub struct CapeAgn;

impl Algorithm for CapeAgn {
    const INFO: &'static AlgorithmInfo = &catalog::CAPE_AGN;
    type Params = CapeAgnParams;
    type Config = CapeAgnConfig;

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
        let scale = |release: &str, noise: &CapeNoise, len: usize, what: &str| {
            NoiseScale::gaussian(
                release,
                noise.own_sd,
                noise.sensitivity,
                config.sites as usize,
                format!(
                    "{what}: each of {} sites adds its own N(0, {:.4e}²) to {len} packed entries, plus pairwise zero-sum terms (sd {:.4e}) and the aggregator's term (sd {:.4e}); the aggregate carries sd {:.4e} per entry when all send (pooled {:.4e}).",
                    config.sites,
                    noise.own_sd,
                    noise.pair_sd,
                    noise.aggregator_sd,
                    noise.achieved_sd(config.sites as usize, 0),
                    noise.pooled_sd
                ),
            )
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

    fn run(&self, config: &CapeAgnConfig, run: Run<'_, '_>) -> Result<Output, RunError> {
        let Run { input, ctx, env } = run;
        let DataInput::Records { xt } = input else {
            return Err(failed("cape_agn runs on records"));
        };
        let d = ctx.d;
        ensure_fits(
            xt.nrows() == d && config.k >= 1 && config.k <= d && config.shares.len() == config.sites as usize,
        )?;
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
