//! `dp_oja`: k-DP-Ojas (Düngler & Sanyal 2025, Alg. 3 as the 1-PCA step of Alg. 1;
//! algorithms.md `dp_oja`).
//!
//! Alg. 1 ([`super::k_dp_pca::deflation`]): the records are shuffled by a uniformly random
//! permutation and cut into k parts of m = ⌊n/k⌋; round i runs Alg. 3 on part i with projector
//! P_{i−1}, then P_i = P_{i−1} − u_i u_iᵀ.
//!
//! Alg. 3 on a part, one pass, one record per update: ω₀ = Pω'/‖Pω'‖ with ω' uniform on the
//! sphere; for t = 1..m, with A_t = x_t x_tᵀ and z_t ~ N(0, I_d) (lines 5–7):
//!   ω'_t = ω_{t−1} + η_t·P·(clip_c(P·A_t·P·ω_{t−1}) + 2c·a·z_t),  ω_t = P·ω'_t/‖P·ω'_t‖,
//! where clip_c(v) = v·min(1, c/‖v‖₂) (the paper's β is our c), η_t = 1/(offset + slope·t)
//! (default 1/(1 + t), App. G.1).
//!
//! Privacy. Update t releases (a post-processing of) clip_c(P·A_t·P·ω_{t−1}) + 2c·a·z_t. Under
//! `replace_one` only x_t can change, and two vectors of norm ≤ c differ by at most 2c in L2: a
//! Gaussian mechanism with sensitivity 2c and sd 2c·a, hence (1/(2a²))-zCDP (Bun & Steinke 2016
//! Prop. 1.6). Each record enters exactly one update of one round, and each update's other
//! inputs (ω_{t−1}, P) are post-processing of earlier releases, so by parallel composition over
//! disjoint records the job is (1/(2a²))-zCDP: a = 1/sqrt(2ρ_job). (The paper's
//! α = C'·log(n/δ)/(ε√n) has an unspecified constant; this calibration is the sound one.)
//!
//! Clipping: the default c = β² needs no clipping at all, since the service clips rows to
//! ‖x‖₂ ≤ β at upload and ‖P·x·xᵀ·P·ω‖ ≤ ‖x‖₂² for unit ω. A smaller c trades bias for less
//! noise; the noise sd is 2c·a whatever the data.

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::k_dp_pca::deflation::{LearningRate, Parts, Projector, public_n, records};
use super::noisy_power::{check_k, target_rho};
use super::{
    Algorithm, AlgorithmInfo, ConfigError, DataInput, NoiseScale, Output, ParamInfo, RunEnv, RunError,
};
use crate::dataset::{DataContext, Kind, Neighbours, Relation};
use crate::privacy::{Cost, PrivacyTarget};

/// Algorithm name.
pub const NAME: &str = "dp_oja";
/// Audit label of the per-update Gaussian noise 2c·a·z_t.
pub const RELEASE: &str = "oja_update";
/// App. G.1's learning rate for k-DP-Ojas: η_j = 1/(1 + j).
pub const DEFAULT_LEARNING_RATE: LearningRate = LearningRate {
    offset: 1.0,
    slope: 1.0,
};
/// Updates between two progress reports.
const PROGRESS_EVERY: usize = 1024;

/// k-DP-Ojas.
#[derive(Debug, Clone, Copy, Default)]
pub struct DpOja;

/// What the client sends.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DpOjaParams {
    /// Target rank k, 1 ≤ k ≤ d.
    pub k: usize,
    /// The clip threshold c > 0; default β².
    #[serde(default)]
    pub clip: Option<f64>,
    /// η_t = 1/(offset + slope·t); default 1/(1 + t).
    #[serde(default)]
    pub learning_rate: Option<LearningRate>,
}

/// Every parameter fixed and the noise multiplier calibrated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DpOjaConfig {
    pub k: usize,
    /// c.
    pub clip: f64,
    pub learning_rate: LearningRate,
    /// a: each update adds N(0, (2c·a)²·I_d).
    pub noise_multiplier: f64,
    /// m = ⌊n/k⌋, the updates of each round.
    pub updates: usize,
}

/// ρ = 1/(2a²) (module docs).
fn cost_of(a: f64) -> f64 {
    1.0 / (2.0 * a * a)
}

/// a = 1/sqrt(2ρ), nudged up so that `cost_of(a) ≤ ρ` in floating point too.
fn calibrate(rho: f64) -> f64 {
    let mut a = 1.0 / (2.0 * rho).sqrt();
    while cost_of(a) > rho {
        a = a.next_up();
    }
    a
}

/// clip_c(v) = v·min(1, c/‖v‖₂), in place.
fn clip(v: &mut crate::linalg::Vector, c: f64) {
    let norm = v.norm();
    if norm > c {
        *v *= c / norm;
    }
}

impl Algorithm for DpOja {
    type Params = DpOjaParams;
    type Config = DpOjaConfig;

    fn info(&self) -> AlgorithmInfo {
        AlgorithmInfo {
            name: NAME,
            summary: "k-DP-Ojas: deflation over disjoint parts of the records, each round one pass of Oja's rule with a clipped per-record gradient plus Gaussian noise. Records, replace_one only.",
            source: "Düngler & Sanyal 2025, Alg. 1 (deflation) with Alg. 3 (DP-Ojas); learning rate of App. G.1",
            kinds: vec![Kind::Records],
            relations: vec![Relation::ReplaceOne],
            params: vec![
                ParamInfo::rank(),
                ParamInfo {
                    name: "clip",
                    json_type: "number",
                    description: "c > 0: each update's gradient P·x·xᵀ·P·ω is clipped to L2 norm c, and the noise sd is 2c·a. The default β² never clips (rows are clipped to β at upload).",
                    default: Some(json!("β²")),
                    required: false,
                    minimum: None,
                    allowed: None,
                },
                ParamInfo {
                    name: "learning_rate",
                    json_type: "object",
                    description: "{\"offset\": o, \"slope\": s}: η_t = 1/(o + s·t) at update t of each round (both ≥ 0, o + s > 0). App. G.1: η_t = 1/(1 + t).",
                    default: Some(json!({"offset": 1.0, "slope": 1.0})),
                    required: false,
                    minimum: None,
                    allowed: None,
                },
            ],
            privacy: "ρ-zCDP with ρ = 1/(2a²): every update is a Gaussian mechanism (sensitivity 2c, sd 2c·a) on its own record, and records are disjoint across updates and rounds.",
            public_only: false,
            scope_reason: Some(
                "records under replace_one only: each record feeds exactly one update and the job is DP by parallel composition over disjoint updates; adding or removing a record shifts every later update, and matrix datasets have no per-record terms x xᵀ.",
            ),
        }
    }

    fn configure(
        &self,
        params: DpOjaParams,
        ctx: &DataContext,
        target: &PrivacyTarget,
    ) -> Result<DpOjaConfig, ConfigError> {
        let n = public_n(NAME, ctx)?;
        let rho = target_rho(target)?;
        let d = ctx.d;
        check_k(params.k, d)?;
        if n < params.k {
            return Err(ConfigError::invalid(
                "params.k",
                format!("must not exceed the number of records n = {n} (got {})", params.k),
            ));
        }
        let beta = match ctx.neighbours {
            Neighbours::ReplaceOne { beta, .. } => beta,
            _ => f64::NAN,
        };
        let clip = params.clip.unwrap_or(beta * beta);
        if !(clip > 0.0 && clip.is_finite()) {
            return Err(ConfigError::invalid("params.clip", "must be a finite number > 0"));
        }
        let learning_rate = params
            .learning_rate
            .unwrap_or(DEFAULT_LEARNING_RATE)
            .check("params.learning_rate")?;
        Ok(DpOjaConfig {
            k: params.k,
            clip,
            learning_rate,
            noise_multiplier: calibrate(rho),
            updates: n / params.k,
        })
    }

    /// ρ = 1/(2a²), whatever c, k and n (module docs).
    fn cost(&self, config: &DpOjaConfig, _ctx: &DataContext) -> Cost {
        Cost::gaussian_zcdp(cost_of(config.noise_multiplier))
    }

    fn noise_scales(&self, config: &DpOjaConfig, _ctx: &DataContext) -> Vec<NoiseScale> {
        vec![NoiseScale {
            release: RELEASE.into(),
            distribution: "gaussian".into(),
            multiplier: config.noise_multiplier,
            sensitivity: Some(2.0 * config.clip),
            count: config.k * config.updates,
            description: format!(
                "Gaussian noise N(0, (2c·a)²·I_d) added to each clipped per-record gradient: sd {:.6e}, one update per record.",
                2.0 * config.clip * config.noise_multiplier
            ),
        }]
    }

    /// Alg. 1 with Alg. 3. The permutation and each round's ω₀ come from `env.rng()`; the noise
    /// goes through `env.gaussian_noise` under [`RELEASE`], one d-vector per update.
    fn run(
        &self,
        input: DataInput<'_>,
        config: &DpOjaConfig,
        ctx: &DataContext,
        env: &mut RunEnv<'_>,
    ) -> Result<Output, RunError> {
        let d = ctx.d;
        let n = ctx.n.unwrap_or(0);
        let DpOjaConfig {
            k,
            clip: c,
            learning_rate,
            noise_multiplier: a,
            updates,
        } = *config;
        let sd = 2.0 * c * a;
        let fits = k >= 1 && k <= d && updates >= 1 && updates == n / k;
        let usable = sd > 0.0 && sd.is_finite() && learning_rate.check("learning_rate").is_ok();
        if !(ctx.kind() == Kind::Records && ctx.relation() == Relation::ReplaceOne && fits && usable) {
            return Err(RunError::Failed(
                "the stored configuration does not fit the dataset".into(),
            ));
        }
        let xt = records(input, ctx, n)?;
        let parts = Parts::shuffle(env.rng(), n, k);
        let total = u32::try_from(k * updates).unwrap_or(u32::MAX);
        let mut projector = Projector::identity(d);
        for round in 0..k {
            let mut omega = projector.start(env.rng())?;
            for (i, &record) in parts.part(round).iter().enumerate() {
                let x = xt.column(record);
                // P·A_t·P·ω = P·x·(xᵀω) since ω ∈ Im(P) (Alg. 3 line 6).
                let mut gradient = x * x.dot(&omega);
                projector.apply_vector(&mut gradient);
                clip(&mut gradient, c);
                let noise = env.gaussian_noise(RELEASE, d, 1, sd);
                let mut step = gradient + noise.column(0);
                projector.apply_vector(&mut step);
                omega = projector.normalize(omega + step * learning_rate.at(i + 1))?;
                let done = round * updates + i + 1;
                if done % PROGRESS_EVERY == 0 || i + 1 == updates {
                    env.progress(u32::try_from(done).unwrap_or(u32::MAX), total)?;
                }
            }
            projector.push(&omega);
        }
        Ok(Output {
            basis: projector.into_basis(),
            eigenvalues: None,
        })
    }
}

#[cfg(test)]
#[path = "dp_oja_tests.rs"]
mod tests;
