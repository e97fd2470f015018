//! `k_dp_pca`: k-DP-PCA with adaptive noise (Düngler & Sanyal 2025, Alg. 1 with Alg. 2 as the
//! 1-PCA step, PrivRange = Alg. 6 and PrivMean = Alg. 7; algorithms.md `k_dp_pca`).
//!
//! Alg. 1 ([`deflation`]): the records are shuffled by a uniformly random permutation and cut
//! into k parts of m = ⌊n/k⌋; round i runs Alg. 2 on part i with projector P_{i−1} and deflates,
//! P_i = P_{i−1} − u_i u_iᵀ. Each record gives A_i = x_i x_iᵀ.
//!
//! Alg. 2 (ModifiedDP-PCA) on a part: ω₀ = Pω'/‖Pω'‖, ω' uniform on the sphere; for
//! t = 1..T = ⌊m/B⌋, on the t-th batch of B records (disjoint):
//! - g_i = P·A_i·P·ω_{t−1} = P·x_i·(x_iᵀω_{t−1}) for the B records of the batch;
//! - Λ̂ = PrivRange({g_i}, (ε/2, δ/2), τ/(2T)) (line 3; [`priv_range`]); ⊥ ends the job;
//! - ĝ = PrivMean({g_i}, Λ̂, (ε/2, δ/2), τ/(2T)) (line 4; [`priv_mean`]);
//! - ω'_t = ω_{t−1} + η_t·P·ĝ, ω_t = P·ω'_t/‖P·ω'_t‖ (lines 5–6).
//!
//! The paper's lines 3–4 index both subroutines' inputs to the batch's first ⌊B/2⌋ records;
//! we give both the whole batch of B records, which is what the step's composition (below)
//! pays for. Logs are natural throughout.
//!
//! Privacy. PrivRange and PrivMean are each (ε/2, δ/2)-DP on the batch (their module docs),
//! so a step is (ε, δ)-DP on its batch by basic composition (the paper's Alg. 2). Batches are
//! disjoint within a round and parts are disjoint across rounds, and a step's other inputs
//! (ω_{t−1}, P) are post-processing of earlier releases, so the job is (ε, δ)-DP by parallel
//! composition over disjoint records (Alg. 1's privacy, Thm 2). The ledger charges it as
//! δ-approximate (ε²/2)-zCDP (privacy.md §2): given ρ_job and the job's δ, ε = sqrt(2ρ_job)
//! and the cost is exactly (ρ_job, δ).
//!
//! Clipping. The privacy argument does not use a norm bound on the records: PrivMean's
//! truncation bounds each step's sensitivity. The service still clips every row to ‖x‖₂ ≤ β
//! (and ‖x‖₁ ≤ α) at upload; that per-row map is fixed and public, so it neither helps nor
//! hurts the guarantee, but a β below the data's typical norm biases A_i = x_i x_iᵀ towards
//! small records. Upload k_dp_pca data with a generous β. β appears here only in the default
//! learning rate, as a public scale.

pub mod deflation;
pub mod priv_mean;
pub mod priv_range;
pub mod stability_histogram;

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};
use serde_json::json;

use self::deflation::{LearningRate, Parts, Projector, gather, gradients, public_n, records};
use self::priv_mean::{MEAN_HISTOGRAM, MEAN_NOISE, MeanCalibration, priv_mean};
use self::priv_range::{RANGE_HISTOGRAM, RangeCalibration, minimum_subsets, priv_range};
use self::stability_histogram::StabilityHistogram;
use super::noisy_power::{check_k, target_rho};
use super::{
    Algorithm, AlgorithmInfo, ConfigError, DataInput, NoiseScale, Output, ParamInfo, RunEnv, RunError,
};
use crate::dataset::{DataContext, Kind, Neighbours, Relation};
use crate::privacy::{Cost, PrivacyTarget};

/// Algorithm name.
pub const NAME: &str = "k_dp_pca";
/// K of Assumption A.4, App. G.1's value for the spiked covariance model.
pub const DEFAULT_TAIL_SCALE: f64 = 1.0;
/// a of Assumption A.4, App. G.1's value.
pub const DEFAULT_TAIL_EXPONENT: f64 = 1.0;
/// τ, the failure probability of the whole 1-PCA step (App. G.1 sets ζ = 0.01 for all methods).
pub const DEFAULT_FAILURE_PROBABILITY: f64 = 0.01;
/// The default number of PrivRange subsets is this many times the minimum (so the estimates
/// may spread over a few neighbouring bins), capped by the number of pairs in a batch.
pub const SUBSETS_SPREAD: f64 = 4.0;
/// Floor of the default number of PrivRange subsets. At a large ε the histogram keeps any bin
/// holding two estimates (its threshold tends to 1), but small subsets give estimates that
/// spread over many bins; 64 estimates lying within a factor 2^{63/4} ≈ 5·10⁴ of each other
/// (63 bins) must share a bin.
pub const MIN_DEFAULT_SUBSETS: usize = 64;

/// k-DP-PCA.
#[derive(Debug, Clone, Copy, Default)]
pub struct KDpPca;

/// What the client sends.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KDpPcaParams {
    /// Target rank k, 1 ≤ k ≤ d.
    pub k: usize,
    /// B, records per batch; default ⌊√n⌋ (App. G.1).
    #[serde(default)]
    pub batch_size: Option<usize>,
    /// η_t = 1/(offset + slope·t); default offset 0, slope β²/ln n.
    #[serde(default)]
    pub learning_rate: Option<LearningRate>,
    /// K of Assumption A.4; default 1 (App. G.1).
    #[serde(default)]
    pub tail_scale: Option<f64>,
    /// a of Assumption A.4; default 1 (App. G.1).
    #[serde(default)]
    pub tail_exponent: Option<f64>,
    /// τ ∈ (0, 1); default 0.01 (App. G.1).
    #[serde(default)]
    pub failure_probability: Option<f64>,
    /// k', PrivRange's number of subsets; default min(⌊B/2⌋, max(64, 4·minimum)).
    #[serde(default)]
    pub range_subsets: Option<usize>,
}

/// Every parameter fixed. The noise scales follow from (ε, δ) and the constants by
/// [`KDpPcaConfig::calibration`]; PrivMean's Gaussian also scales with each step's Λ̂.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KDpPcaConfig {
    pub k: usize,
    /// B.
    pub batch_size: usize,
    /// T = ⌊⌊n/k⌋/B⌋, the steps of each round.
    pub steps: usize,
    pub learning_rate: LearningRate,
    /// K.
    pub tail_scale: f64,
    /// a.
    pub tail_exponent: f64,
    /// τ.
    pub failure_probability: f64,
    /// k'.
    pub range_subsets: usize,
    /// ε of every step, and of the job: sqrt(2ρ_job).
    pub epsilon: f64,
    /// δ of every step, and of the job.
    pub delta: f64,
}

/// The calibrated subroutines of one step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepCalibration {
    pub range: RangeCalibration,
    pub mean: MeanCalibration,
}

impl KDpPcaConfig {
    /// τ/(2T), the failure probability each subroutine call receives (Alg. 2 lines 3–4).
    pub fn call_failure_probability(&self) -> f64 {
        self.failure_probability / (2.0 * self.steps as f64)
    }

    /// PrivRange at (ε/2, δ/2) with k' subsets; PrivMean at (ε/2, δ/2) (Alg. 2 lines 3–4).
    pub fn calibration(&self, d: usize) -> StepCalibration {
        let (epsilon, delta) = (self.epsilon / 2.0, self.delta / 2.0);
        StepCalibration {
            range: RangeCalibration {
                histogram: StabilityHistogram { epsilon, delta },
                subsets: self.range_subsets,
            },
            mean: MeanCalibration::new(
                epsilon,
                delta,
                d,
                self.tail_scale,
                self.tail_exponent,
                self.call_failure_probability(),
            ),
        }
    }

    /// Whether the configuration is internally consistent for d features and n records.
    fn fits(&self, d: usize, n: usize) -> bool {
        let positive = |v: f64| v > 0.0 && v.is_finite();
        let k_ok = self.k >= 1 && self.k <= d;
        let steps_ok =
            k_ok && self.batch_size >= 2 && self.steps >= 1 && self.steps == n / self.k / self.batch_size;
        let subsets_ok = self.range_subsets >= 1 && self.range_subsets <= self.batch_size / 2;
        let budget_ok = positive(self.epsilon) && self.delta > 0.0 && self.delta < 1.0;
        let tails_ok = positive(self.tail_scale) && positive(self.tail_exponent);
        let tau_ok = self.failure_probability > 0.0 && self.failure_probability < 1.0;
        let lr_ok = self.learning_rate.check("learning_rate").is_ok();
        steps_ok && subsets_ok && budget_ok && tails_ok && tau_ok && lr_ok
    }
}

/// ε = sqrt(2ρ), nudged down so that ε²/2 ≤ ρ in floating point too.
pub(crate) fn epsilon_for(rho: f64) -> f64 {
    let mut epsilon = (2.0 * rho).sqrt();
    while epsilon * epsilon / 2.0 > rho {
        epsilon = epsilon.next_down();
    }
    epsilon
}

/// The job's δ, required by the (ε, δ) subroutines.
fn target_delta(target: &PrivacyTarget) -> Result<f64, ConfigError> {
    match target.delta {
        Some(delta) if delta > 0.0 && delta < 1.0 => Ok(delta),
        Some(_) => Err(ConfigError::invalid(
            "privacy.delta",
            "must lie in the open interval (0, 1)",
        )),
        None => Err(ConfigError::invalid(
            "privacy.delta",
            "k_dp_pca is (ε, δ)-DP (stability histograms): the job's privacy target must include delta",
        )),
    }
}

/// The default learning rate: offset 0, slope β²/ln n, i.e. η_t = ln n/(β²·t). This is App.
/// G.1's η_t = 1/(20σλ_i + (λ_i − λ_{i+1})·t/ln n) in the low-noise limit σ → 0 (where
/// k-DP-PCA is meant to shine) with the unknown eigengap, which would leak if read from the
/// data, replaced by the public bound β² ≥ λ_1 ≥ λ_i − λ_{i+1} of clipped rows: a smaller,
/// safer step than the paper's.
fn default_learning_rate(ctx: &DataContext, n: usize) -> LearningRate {
    let beta = match ctx.neighbours {
        Neighbours::ReplaceOne { beta, .. } | Neighbours::AddRemove { beta, .. } => beta,
        Neighbours::Entry { u } => u,
    };
    LearningRate {
        offset: 0.0,
        slope: beta * beta / (n.max(3) as f64).ln(),
    }
}

fn positive_param(value: Option<f64>, default: f64, field: &str) -> Result<f64, ConfigError> {
    let v = value.unwrap_or(default);
    if v > 0.0 && v.is_finite() {
        Ok(v)
    } else {
        Err(ConfigError::invalid(field, "must be a finite number > 0"))
    }
}

fn param(
    name: &'static str,
    json_type: &'static str,
    description: &'static str,
    default: Option<serde_json::Value>,
    minimum: Option<f64>,
) -> ParamInfo {
    ParamInfo {
        name,
        json_type,
        description,
        default,
        required: false,
        minimum,
        allowed: None,
    }
}

impl Algorithm for KDpPca {
    type Params = KDpPcaParams;
    type Config = KDpPcaConfig;

    fn info(&self) -> AlgorithmInfo {
        AlgorithmInfo {
            name: NAME,
            summary: "k-DP-PCA: deflation over disjoint parts of the records, each round a private Oja iteration whose noise adapts to the batch's spread (PrivRange, then a truncated PrivMean). Records, replace_one only; needs a δ.",
            source: "Düngler & Sanyal 2025, Alg. 1 (deflation), Alg. 2 (ModifiedDP-PCA), Alg. 6 (PrivRange), Alg. 7 (PrivMean); histograms: Karwa & Vadhan 2018",
            kinds: vec![Kind::Records],
            relations: vec![Relation::ReplaceOne],
            params: vec![
                ParamInfo::rank(),
                param(
                    "batch_size",
                    "integer",
                    "B, records per step (2 ≤ B ≤ ⌊n/k⌋); each round takes T = ⌊⌊n/k⌋/B⌋ steps. App. G.1 found B = √n better in practice than the theory's n/ln³n. PrivRange needs ⌊B/2⌋ ≥ its minimum number of subsets, which grows like ln(1/(δτ))/ε.",
                    Some(json!("floor(sqrt(n))")),
                    Some(2.0),
                ),
                param(
                    "learning_rate",
                    "object",
                    "{\"offset\": o, \"slope\": s}: η_t = 1/(o + s·t) at step t of each round (both ≥ 0, o + s > 0). App. G.1 uses o = 20σλ_i, s = (λ_i − λ_{i+1})/ln n, which needs the spectrum; the default takes σ → 0 and the public bound β² for the eigengap: o = 0, s = β²/ln n.",
                    Some(json!({"offset": 0.0, "slope": "β²/ln(n)"})),
                    None,
                ),
                param(
                    "tail_scale",
                    "number",
                    "K of Assumption A.4 (sub-Weibull tail of the gradients): scales PrivMean's bin width 2^{1/4}·K·sqrt(Λ̂)·ln²(25) and truncation radius 3K·sqrt(Λ̂)·ln^a(Bd/τ'). App. G.1: 1.",
                    Some(json!(DEFAULT_TAIL_SCALE)),
                    None,
                ),
                param(
                    "tail_exponent",
                    "number",
                    "a of Assumption A.4 (a = 1 for sub-Gaussian data): the power of the log in the truncation radius. App. G.1: 1.",
                    Some(json!(DEFAULT_TAIL_EXPONENT)),
                    None,
                ),
                param(
                    "failure_probability",
                    "number",
                    "τ ∈ (0, 1): each PrivRange/PrivMean call gets τ/(2T); sets the truncation radius and the default number of PrivRange subsets. App. G.1: 0.01.",
                    Some(json!(DEFAULT_FAILURE_PROBABILITY)),
                    None,
                ),
                param(
                    "range_subsets",
                    "integer",
                    "k', PrivRange's number of subsets (Alg. 6 line 3). At least the minimum 1 + 2·ln(1/(δ'τ'))/ε' (ε' = ε/2, δ' = δ/2, τ' = τ/(2T)) for which the histogram keeps a bin with probability ≥ 1 − τ', and at most ⌊B/2⌋. Default: min(⌊B/2⌋, max(64, 4 × that minimum)).",
                    Some(json!("min(floor(B/2), max(64, 4*minimum))")),
                    Some(1.0),
                ),
            ],
            privacy: "(ε, δ)-DP with ε = sqrt(2ρ) and δ the job's delta, charged as δ-approximate ρ-zCDP: every step is (ε, δ)-DP on its own disjoint batch (stability histograms + Gaussian mechanism).",
            public_only: false,
            scope_reason: Some(
                "records under replace_one only: one shuffle splits the records into disjoint positional batches, each step is DP on its own batch, and the job is DP by parallel composition; adding or removing a record shifts every later batch, and matrix datasets have no per-record terms x xᵀ.",
            ),
        }
    }

    fn configure(
        &self,
        params: KDpPcaParams,
        ctx: &DataContext,
        target: &PrivacyTarget,
    ) -> Result<KDpPcaConfig, ConfigError> {
        let n = public_n(NAME, ctx)?;
        let rho = target_rho(target)?;
        let delta = target_delta(target)?;
        let d = ctx.d;
        let k = params.k;
        check_k(k, d)?;
        let m = n / k;
        let batch_size = params.batch_size.unwrap_or((n as f64).sqrt().floor() as usize);
        if !(batch_size >= 2 && batch_size <= m) {
            return Err(ConfigError::invalid(
                "params.batch_size",
                format!("must satisfy 2 ≤ batch_size ≤ ⌊n/k⌋ = {m} (got {batch_size})"),
            ));
        }
        let learning_rate = params
            .learning_rate
            .unwrap_or_else(|| default_learning_rate(ctx, n))
            .check("params.learning_rate")?;
        let tail_scale = positive_param(params.tail_scale, DEFAULT_TAIL_SCALE, "params.tail_scale")?;
        let tail_exponent = positive_param(
            params.tail_exponent,
            DEFAULT_TAIL_EXPONENT,
            "params.tail_exponent",
        )?;
        let failure_probability = params.failure_probability.unwrap_or(DEFAULT_FAILURE_PROBABILITY);
        if !(failure_probability > 0.0 && failure_probability < 1.0) {
            return Err(ConfigError::invalid(
                "params.failure_probability",
                "must lie in the open interval (0, 1)",
            ));
        }
        let mut config = KDpPcaConfig {
            k,
            batch_size,
            steps: m / batch_size,
            learning_rate,
            tail_scale,
            tail_exponent,
            failure_probability,
            range_subsets: 0,
            epsilon: epsilon_for(rho),
            delta,
        };
        let pairs = batch_size / 2;
        let range = config.calibration(d).range.histogram;
        let minimum = minimum_subsets(&range, config.call_failure_probability()).ceil();
        let subsets = match params.range_subsets {
            Some(s) => s,
            None => (SUBSETS_SPREAD * minimum)
                .max(MIN_DEFAULT_SUBSETS as f64)
                .min(pairs as f64) as usize,
        };
        if !(subsets as f64 >= minimum && subsets <= pairs) {
            let field = if params.range_subsets.is_some() {
                "params.range_subsets"
            } else {
                "params.batch_size"
            };
            return Err(ConfigError::invalid(
                field,
                format!(
                    "PrivRange needs at least {minimum} subsets at this budget (ε = {:.4}, δ = {delta:e}) and at most ⌊B/2⌋ = {pairs} (got {subsets} subsets with batch_size {batch_size}); raise batch_size (to at least {}) or the budget",
                    config.epsilon,
                    2.0 * minimum
                ),
            ));
        }
        config.range_subsets = subsets;
        Ok(config)
    }

    /// δ-approximate (ε²/2)-zCDP with (ε, δ) the per-step (= job) guarantee (privacy.md §2).
    fn cost(&self, config: &KDpPcaConfig, _ctx: &DataContext) -> Cost {
        Cost::approximate(config.epsilon, config.delta)
    }

    fn noise_scales(&self, config: &KDpPcaConfig, ctx: &DataContext) -> Vec<NoiseScale> {
        let cal = config.calibration(ctx.d);
        let steps = config.k * config.steps;
        vec![
            NoiseScale {
                release: RANGE_HISTOGRAM.into(),
                distribution: "laplace".into(),
                multiplier: 1.0 / cal.range.histogram.epsilon,
                sensitivity: Some(2.0),
                count: steps,
                description: format!(
                    "PrivRange: Laplace noise of scale {:.6e} on each non-empty bin of a histogram of {} top-eigenvalue estimates; bins kept above {:.4}.",
                    cal.range.histogram.scale(),
                    config.range_subsets,
                    cal.range.histogram.threshold()
                ),
            },
            NoiseScale {
                release: MEAN_HISTOGRAM.into(),
                distribution: "laplace".into(),
                multiplier: 1.0 / cal.mean.histogram.epsilon,
                sensitivity: Some(2.0),
                count: steps * ctx.d,
                description: format!(
                    "PrivMean: one histogram per coordinate, Laplace noise of scale {:.6e} on each non-empty bin; bins kept above {:.4} (else the coordinate is centred at 0).",
                    cal.mean.histogram.scale(),
                    cal.mean.histogram.threshold()
                ),
            },
            NoiseScale {
                release: MEAN_NOISE.into(),
                distribution: "gaussian".into(),
                multiplier: cal.mean.noise_multiplier(),
                sensitivity: None,
                count: steps,
                description: format!(
                    "PrivMean: Gaussian noise on the truncated batch mean, sd = multiplier × 6K·sqrt(Λ̂)·ln^a(Bd/τ')·sqrt(d)/B = {:.6e} × sqrt(Λ̂), Λ̂ the step's private PrivRange estimate.",
                    cal.mean.noise_sd(1.0, config.batch_size, ctx.d)
                ),
            },
        ]
    }

    /// Alg. 1 with Alg. 2. The permutation and each round's ω₀ come from `env.rng()`; all
    /// noise goes through `env` under [`RANGE_HISTOGRAM`], [`MEAN_HISTOGRAM`] and [`MEAN_NOISE`].
    fn run(
        &self,
        input: DataInput<'_>,
        config: &KDpPcaConfig,
        ctx: &DataContext,
        env: &mut RunEnv<'_>,
    ) -> Result<Output, RunError> {
        let d = ctx.d;
        let n = ctx.n.unwrap_or(0);
        if !(ctx.kind() == Kind::Records && ctx.relation() == Relation::ReplaceOne && config.fits(d, n)) {
            return Err(RunError::Failed(
                "the stored configuration does not fit the dataset".into(),
            ));
        }
        let xt = records(input, ctx, n)?;
        let (k, batch, steps) = (config.k, config.batch_size, config.steps);
        let cal = config.calibration(d);
        let parts = Parts::shuffle(env.rng(), n, k);
        let total = u32::try_from(k * steps).unwrap_or(u32::MAX);
        let mut projector = Projector::identity(d);
        for round in 0..k {
            let part = parts.part(round);
            let mut omega = projector.start(env.rng())?;
            for t in 1..=steps {
                let g = gradients(&gather(xt, &part[(t - 1) * batch..t * batch]), &omega, &projector);
                let Some(lambda) = priv_range(&g, &cal.range, env)? else {
                    return Err(RunError::Failed(format!(
                        "PrivRange returned ⊥ (no stable range) in round {} at step {t} of {steps}: the batch is too small for this budget or its gradients too spread out; the charge stands. A larger batch_size or budget helps.",
                        round + 1
                    )));
                };
                let mut step = priv_mean(&g, lambda, &cal.mean, env)?;
                projector.apply_vector(&mut step);
                omega = projector.normalize(omega + step * config.learning_rate.at(t))?;
                let done = u32::try_from(round * steps + t).unwrap_or(u32::MAX);
                env.progress(done, total)?;
            }
            projector.push(&omega);
        }
        Ok(Output {
            basis: projector.into_basis(),
            eigenvalues: None,
        })
    }
}
