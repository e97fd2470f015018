//! `dp_oja`: k-DP-Ojas (Düngler & Sanyal 2025, Alg. 3 as the 1-PCA step of Alg. 1;
//! docs/design/algorithms.md `dp_oja`), with a scale-free default learning rate and mini-batches.
//!
//! Alg. 1 ([`super::k_dp_pca::deflation`]): the records are shuffled by a uniformly random
//! permutation and cut into k parts of m = ⌊n/k⌋; round i runs Alg. 3 on part i with projector
//! P_{i−1}, then P_i = P_{i−1} − u_i u_iᵀ.
//!
//! Alg. 3 on a part, one pass: ω₀ = Pω'/‖Pω'‖ with ω' uniform on the sphere; the part is cut
//! into T = ⌊m/B⌋ disjoint batches of B records; for t = 1..T, with A_j = x_j x_jᵀ and
//! z_t ~ N(0, I_d) (lines 5–7, averaged over the batch):
//!   ω'_t = ω_{t−1} + η_t·P·((1/B)·Σ_{j ∈ batch t} clip_c(P·A_j·P·ω_{t−1}) + (2c·a/B)·z_t),
//!   ω_t = P·ω'_t/‖P·ω'_t‖,
//! where clip_c(v) = v·min(1, c/‖v‖₂) (the paper's β is our c). B = 1 is Alg. 3 exactly.
//!
//! Privacy. Update t releases (a post-processing of) the batch mean of clipped gradients plus
//! (2c·a/B)·z_t. Under `replace_one` only one record x_j of one batch can change, and two
//! vectors of norm ≤ c differ by at most 2c in L2, so the mean moves by at most 2c/B: a Gaussian
//! mechanism with sensitivity 2c/B and sd 2c·a/B, hence (1/(2a²))-zCDP (Bun & Steinke 2016
//! Prop. 1.6). Each record enters exactly one update of one round, and each update's other
//! inputs (ω_{t−1}, P, η) are post-processing of earlier releases, so by parallel composition
//! over disjoint records the updates are (1/(2a²))-zCDP together. (The paper's
//! α = C'·log(n/δ)/(ε√n) has an unspecified constant; this calibration is the sound one.)
//!
//! Clipping: the default c = β² needs no clipping at all, since the service clips rows to
//! ‖x‖₂ ≤ β at upload and ‖P·x·xᵀ·P·ω‖ ≤ ‖x‖₂² for unit ω. A smaller c trades bias for less
//! noise; the noise sd is 2c·a/B whatever the data.
//!
//! # Default learning rate (docs/design/algorithms.md, "Decisions after the first implementation")
//! Why App. G.1's η_j = 1/(1 + j) fails: Oja's update is scale-covariant only if η scales like
//! 1/‖A‖. Its progress along the top direction after T updates is about
//! exp(2·Σ_t η_t(λ̃₁ − λ̃₂)) = T^{2(λ̃₁ − λ̃₂)} for η_t = 1/(1 + t) (Theorem 7's bound, our
//! λ̃ the eigenvalues of PΣP). With rows clipped to β, the eigenvalues are at most β², and on
//! data whose gap is small in absolute terms (say 0.05, e.g. features in small units) the
//! iterate barely leaves its random start even without noise; k rounds on n/k records each
//! make it worse. The paper's own experiments have λ₁ = 10, which hides this.
//!
//! The default is Theorem 7's schedule, η_t = α/((λ̃₁ − λ̃₂)(t₀ + t)), with the gap of each
//! round estimated privately: round i uses
//!   η_t^i = α/(g_i·(t₀ + t)),  g_i = max(λ̂_i − λ̂_{i+1}, r·λ̂_i),
//! with α = 2 (> 1/2 as Theorem 7 needs; 1 converged too slowly in a few of our runs at
//! ρ = 1e12), t₀ = 10 (Theorem 7's β, in updates) and r = 0.2 (a noisy or vanishing gap
//! estimate cannot make η exceed 5α/λ̂_i). λ̂_1..λ̂_{k+1} are the top eigenvalues of
//! Σ̂ = XᵀX/n (λ̂_{d+1} = 0) plus N(0, s_e²) each, sorted and floored at 1e-9·β²
//! (post-processing): round i's PΣP has top eigenvalues ≈ λ_i, λ_{i+1} once the earlier rounds
//! have found u_1..u_{i−1}. Sensitivity: under `replace_one`, nΣ̂ changes by E = xxᵀ − yyᵀ,
//! and by Hoffman–Wielandt Σ_j (λ_j(A + E) − λ_j(A))² ≤ ‖E‖_F² = ‖x‖⁴ + ‖y‖⁴ − 2(xᵀy)² ≤ 2β⁴,
//! so the sorted eigenvalue vector (and any prefix) has L2 sensitivity √2·β²/n: a Gaussian
//! mechanism with s_e = √2·β²/(n·sqrt(2ρ_e)), ρ_e = `estimate_share`·ρ_job (default 5 %).
//! It touches every record, so it composes sequentially with the updates:
//! ρ_job = ρ_e + 1/(2a²), both Gaussian. A user-given `learning_rate` replaces the schedule
//! (the same η_t in every round, App. G.1's form) and then nothing is spent on the estimate.
//!
//! # Default batch size
//! The DP noise, not the schedule, limits accuracy at moderate budgets: with B = 1 every record
//! gets its own noise vector of norm ≈ 2β²·a·√d, several times the signal x·xᵀω. Averaging B
//! records per update divides the noise on each record's contribution by B while the number of
//! updates drops to T = m/B: the DP part of Theorem 7's variance term, ∝ Σ_t η_t²·(sd)²·d, falls
//! by a factor B (one draw of sd 2c·a/B per B records, instead of B draws of sd 2c·a). Fewer
//! updates slow the noiseless convergence d·(t₀/T)^{2α} down, so the default keeps T ≥ 4√m:
//! B = max(1, ⌊√m/4⌋) (B = 20 at n = 20 000, k = 3). On the spiked model (n = 20 000, d = 30,
//! k = 3) the captured energy at ρ = 10 rose from 0.85–0.93 (B = 1) to ≥ 0.96 (B = 20), at any
//! data scale (dp_oja_tests.rs).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::calibration::{check_k, target_rho};
use super::centering::calibrate_sd;
use super::k_dp_pca::deflation::{LearningRate, Parts, Projector, public_n, records};
use super::{
    Algorithm, AlgorithmInfo, ConfigError, NoiseScale, Output, Run, RunEnv, RunError, catalog, ensure_fits,
};
use crate::dataset::{DataContext, Kind, Neighbours, Relation};
use crate::linalg::{Matrix, Records, Vector, gram_t, try_sym_eigenvalues};
use crate::privacy::cost::round_up_while;
use crate::privacy::{Cost, PrivacyTarget};

/// Audit label of the per-update Gaussian noise 2c·a·z_t/B.
pub const RELEASE: &str = "oja_update";
/// Audit label of the Gaussian noise on the eigenvalue estimate of the default schedule.
pub const ESTIMATE_RELEASE: &str = "oja_eigenvalues";
/// App. G.1's learning rate for k-DP-Ojas, η_j = 1/(1 + j): still accepted as an explicit
/// `learning_rate`, no longer the default (it is not scale-invariant; module docs).
pub const PAPER_LEARNING_RATE: LearningRate = LearningRate {
    offset: 1.0,
    slope: 1.0,
};
/// Default share of the job's ρ spent on the eigenvalue estimate of the default schedule.
pub const DEFAULT_ESTIMATE_SHARE: f64 = 0.05;
/// Default schedule constants (module docs, "Default learning rate").
pub const DEFAULT_SCHEDULE: GapSchedule = GapSchedule {
    alpha: 2.0,
    offset: 10.0,
    min_relative_gap: 0.2,
};
/// B = max(1, ⌊√m/4⌋) for parts of m records (module docs, "Default batch size").
pub fn default_batch_size(m: usize) -> usize {
    ((m as f64).sqrt() / 4.0).floor().max(1.0) as usize
}
/// Updates between two progress reports.
const PROGRESS_EVERY: usize = 1024;

/// k-DP-Ojas.
#[derive(Debug, Clone, Copy, Default)]
pub struct DpOja;

/// What the client sends.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DpOjaParams {
    /// Target rank: number of principal components returned (1 ≤ k ≤ d).
    #[schemars(range(min = 1))]
    pub k: usize,
    /// c > 0: each record's gradient P·x·xᵀ·P·ω is clipped to L2 norm c, and the noise sd is
    /// 2c·a/B. The default β² never clips (rows are clipped to β at upload). (Named
    /// `gradient_clip` in JSON: `clip` is the generic adaptive row clipping every records
    /// algorithm takes.) Default: β².
    #[serde(default, rename = "gradient_clip")]
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub clip: Option<f64>,
    /// {"offset": o, "slope": s}: a fixed η_t = 1/(o + s·t) at update t of every round (both ≥ 0,
    /// o + s > 0; App. G.1 used 1/(1 + t), which only suits data with eigengaps of order 1).
    /// Default: η_t = 2/(g_i·(10 + t)) in round i, g_i = max(λ̂_i − λ̂_{i+1}, 0.2·λ̂_i) from
    /// private eigenvalues of XᵀX/n (Theorem 7), charged estimate_share of ρ.
    #[serde(default)]
    pub learning_rate: Option<LearningRate>,
    /// Share of ρ (strictly between 0 and 1) spent on the default schedule's eigenvalue
    /// estimate (Gaussian, L2 sensitivity √2·β²/n). Not allowed with learning_rate.
    #[serde(default)]
    #[schemars(extend("default" = DEFAULT_ESTIMATE_SHARE, "exclusiveMinimum" = 0, "exclusiveMaximum" = 1))]
    pub estimate_share: Option<f64>,
    /// B: records averaged in each update (1 ≤ B ≤ ⌊n/k⌋; B = 1 is Alg. 3). The noise on the
    /// mean has sd 2c·a/B, so larger B means less noise per record but fewer updates. Default:
    /// max(1, ⌊√(n/k)/4⌋).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub batch_size: Option<usize>,
}

/// η_t^i = α/(g_i·(offset + t)) in round i, with g_i = max(λ̂_i − λ̂_{i+1}, r·λ̂_i) from the
/// private eigenvalues λ̂ of Σ̂ = XᵀX/n (Theorem 7's η_t = α/((λ̃₁ − λ̃₂)(β + t)), module docs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GapSchedule {
    /// α (> 1/2 in Theorem 7).
    pub alpha: f64,
    /// Theorem 7's β, in updates.
    pub offset: f64,
    /// r ∈ (0, 1]: the gap used is at least r·λ̂_i (a noisy or tiny gap cannot blow η up).
    pub min_relative_gap: f64,
}

/// The default schedule's private estimate of the top eigenvalues of Σ̂ = XᵀX/n.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EigenvalueEstimate {
    pub schedule: GapSchedule,
    /// ρ_e, spent on the estimate.
    pub rho: f64,
    /// Noise sd per eigenvalue: √2·β²/(n·sqrt(2ρ_e)).
    pub noise_sd: f64,
}

/// Every parameter fixed and the noise multiplier calibrated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DpOjaConfig {
    pub k: usize,
    /// c (`gradient_clip` in the stored configuration).
    #[serde(rename = "gradient_clip")]
    pub clip: f64,
    /// A fixed learning rate for every round, or `None` for the default schedule.
    #[serde(default)]
    pub learning_rate: Option<LearningRate>,
    /// The default schedule and its estimate (exactly one of this and `learning_rate`).
    #[serde(default)]
    pub estimate: Option<EigenvalueEstimate>,
    /// a: each update adds N(0, (2c·a/B)²·I_d).
    pub noise_multiplier: f64,
    /// B, records per update.
    #[serde(default = "one")]
    pub batch_size: usize,
    /// ⌊m/B⌋ with m = ⌊n/k⌋: the updates of each round.
    pub updates: usize,
}

fn one() -> usize {
    1
}

/// ρ of the updates, 1/(2a²) (module docs).
fn cost_of(a: f64) -> f64 {
    1.0 / (2.0 * a * a)
}

/// a = 1/sqrt(2ρ), nudged up so that `cost_of(a) ≤ ρ` in floating point too.
fn calibrate(rho: f64) -> f64 {
    round_up_while(1.0 / (2.0 * rho).sqrt(), |a| cost_of(a) > rho)
}

/// √2·β²/n: the L2 sensitivity of the sorted eigenvalues of Σ̂ = XᵀX/n under replace_one
/// (module docs, "Default learning rate").
fn estimate_sensitivity(beta: f64, n: usize) -> f64 {
    std::f64::consts::SQRT_2 * beta * beta / n as f64
}

/// clip_c(v) = v·min(1, c/‖v‖₂), in place, by the shared [`crate::linalg::clip`] with its
/// rounding margin: the sensitivity 2c/B needs the exact ‖clip_c(v)‖₂ ≤ c.
fn clip(v: &mut Vector, c: f64) {
    crate::linalg::clip::clip_l2(v.as_mut_slice(), c);
}

/// The per-round learning rates: a fixed η_t, or η_t^i = α/(g_i·(offset + t)).
enum Rates {
    Fixed(LearningRate),
    Gap { schedule: GapSchedule, gaps: Vec<f64> },
}

impl Rates {
    /// η at update t ≥ 1 of round i (0-based).
    fn at(&self, round: usize, t: usize) -> f64 {
        match self {
            Rates::Fixed(rate) => rate.at(t),
            Rates::Gap { schedule, gaps } => schedule.alpha / (gaps[round] * (schedule.offset + t as f64)),
        }
    }
}

/// g_i = max(λ̂_i − λ̂_{i+1}, r·λ̂_i) for i = 1..k, from released λ̂ (sorted decreasing, then
/// clamped at a positive floor, all post-processing); λ̂_{d+1} = 0.
fn gaps(released: &[f64], k: usize, r: f64, floor: f64) -> Vec<f64> {
    let mut values: Vec<f64> = released.iter().map(|v| v.max(floor)).collect();
    values.sort_by(|a, b| b.total_cmp(a));
    (0..k)
        .map(|i| {
            let next = values.get(i + 1).copied().unwrap_or(0.0);
            (values[i] - next).max(r * values[i]).max(floor)
        })
        .collect()
}

/// Private λ̂_1..λ̂_{k+1} (at most d) of Σ̂ = XᵀX/n: exact eigenvalues plus N(0, sd²) each.
fn private_eigenvalues(
    xt: Records<'_>,
    k: usize,
    sensitivity: f64,
    sd: f64,
    env: &mut RunEnv<'_>,
) -> Result<Vec<f64>, RunError> {
    let (d, n) = xt.shape();
    let sigma = gram_t(xt) / n as f64;
    let exact = try_sym_eigenvalues(&sigma)
        .map_err(|_| RunError::Failed("the eigenvalue estimate did not converge".into()))?;
    let count = (k + 1).min(d);
    let query = Matrix::from_fn(count, 1, |i, _| exact[i]);
    let released = env.gaussian_release(ESTIMATE_RELEASE, query, sensitivity, sd)?;
    Ok(released.as_slice().to_vec())
}

impl Algorithm for DpOja {
    const INFO: &'static AlgorithmInfo = &catalog::DP_OJA;
    type Params = DpOjaParams;
    type Config = DpOjaConfig;

    fn configure(
        &self,
        params: DpOjaParams,
        ctx: &DataContext,
        target: &PrivacyTarget,
    ) -> Result<DpOjaConfig, ConfigError> {
        let n = public_n(Self::INFO.name, ctx)?;
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
            return Err(ConfigError::invalid(
                "params.gradient_clip",
                "must be a finite number > 0",
            ));
        }
        let part = n / params.k;
        let batch_size = params.batch_size.unwrap_or_else(|| default_batch_size(part));
        if !(batch_size >= 1 && batch_size <= part) {
            return Err(ConfigError::invalid(
                "params.batch_size",
                format!("must satisfy 1 ≤ B ≤ ⌊n/k⌋ = {part} (got {batch_size})"),
            ));
        }
        let (learning_rate, estimate, update_rho) = schedule_of(&params, beta, n, rho)?;
        let mut config = DpOjaConfig {
            k: params.k,
            clip,
            learning_rate,
            estimate,
            noise_multiplier: calibrate(update_rho),
            batch_size,
            updates: part / batch_size,
        };
        // The two parts may round up past ρ by an ulp: nudge a up (never the estimate's sd).
        for _ in 0..64 {
            if self.cost(&config, ctx).rho <= rho {
                break;
            }
            config.noise_multiplier = config.noise_multiplier.next_up();
        }
        let calibrated = config.noise_multiplier.is_finite() && self.cost(&config, ctx).rho <= rho;
        if !calibrated {
            return Err(ConfigError::invalid(
                "rho",
                "is too small or too large to calibrate the noise in floating point",
            ));
        }
        Ok(config)
    }

    /// ρ = 1/(2a²) for the updates, whatever c, B, k and n (module docs), plus, with the default
    /// schedule, the estimate's Δ²/(2s_e²) = ρ_e; all of it Gaussian.
    fn cost(&self, config: &DpOjaConfig, ctx: &DataContext) -> Cost {
        let updates = Cost::gaussian_zcdp(cost_of(config.noise_multiplier));
        match (&config.estimate, ctx.neighbours, ctx.n) {
            (None, _, _) => updates,
            (Some(e), Neighbours::ReplaceOne { beta, .. }, Some(n)) if n >= 1 => {
                Cost::gaussian(estimate_sensitivity(beta, n), e.noise_sd).then(updates)
            }
            // Not computable for this dataset: refuse to charge a finite amount.
            (Some(_), _, _) => Cost::gaussian_zcdp(f64::INFINITY),
        }
    }

    fn noise_scales(&self, config: &DpOjaConfig, ctx: &DataContext) -> Vec<NoiseScale> {
        let b = config.batch_size as f64;
        let mut scales = vec![NoiseScale {
            release: RELEASE.into(),
            distribution: "gaussian".into(),
            multiplier: config.noise_multiplier,
            sensitivity: Some(2.0 * config.clip / b),
            count: config.k * config.updates,
            description: format!(
                "Gaussian noise N(0, (2c·a/B)²·I_d) added to the mean of B = {} clipped per-record gradients in each update: sd {:.6e}.",
                config.batch_size,
                2.0 * config.clip * config.noise_multiplier / b
            ),
        }];
        if let (Some(e), Neighbours::ReplaceOne { beta, .. }, Some(n)) =
            (&config.estimate, ctx.neighbours, ctx.n)
        {
            let sensitivity = estimate_sensitivity(beta, n.max(1));
            scales.push(NoiseScale::gaussian(
                ESTIMATE_RELEASE,
                e.noise_sd,
                sensitivity,
                (config.k + 1).min(ctx.d),
                format!(
                    "Gaussian noise on the top min(k + 1, d) eigenvalues of XᵀX/n (L2 sensitivity √2·β²/n), for the default learning-rate schedule: sd {:.6e}.",
                    e.noise_sd
                ),
            ));
        }
        scales
    }

    /// Alg. 1 with Alg. 3. The permutation and each round's ω₀ come from `env.rng()`; the noise
    /// goes through `env.gaussian_release`: the estimate under [`ESTIMATE_RELEASE`] first (default
    /// schedule), then one d-vector per update under [`RELEASE`].
    fn run(&self, config: &DpOjaConfig, run: Run<'_, '_>) -> Result<Output, RunError> {
        let Run { input, ctx, env } = run;
        let d = ctx.d;
        let n = ctx.n.unwrap_or(0);
        let DpOjaConfig {
            k,
            clip: c,
            noise_multiplier: a,
            batch_size,
            updates,
            ..
        } = *config;
        // Replacing one record changes one of the B clipped gradients by at most 2c.
        let sensitivity = 2.0 * c / batch_size as f64;
        let sd = sensitivity * a;
        let beta = match ctx.neighbours {
            Neighbours::ReplaceOne { beta, .. } => beta,
            _ => f64::NAN,
        };
        let fits = k >= 1 && k <= d && batch_size >= 1 && updates >= 1 && updates == (n / k) / batch_size;
        let usable =
            sd > 0.0 && sd.is_finite() && schedule_is_usable(config) && beta > 0.0 && beta.is_finite();
        ensure_fits(ctx.kind() == Kind::Records && ctx.relation() == Relation::ReplaceOne && fits && usable)?;
        let xt = records(input, ctx, n)?;
        let rates = match (config.learning_rate, config.estimate) {
            (Some(rate), _) => Rates::Fixed(rate),
            (None, Some(e)) => {
                let released = private_eigenvalues(xt, k, estimate_sensitivity(beta, n), e.noise_sd, env)?;
                // A positive floor far below any eigenvalue worth finding (public).
                let floor = beta * beta * 1e-9;
                Rates::Gap {
                    schedule: e.schedule,
                    gaps: gaps(&released, k, e.schedule.min_relative_gap, floor),
                }
            }
            (None, None) => unreachable!("checked above"),
        };
        let parts = Parts::shuffle(env.rng(), n, k);
        let total = u32::try_from(k * updates).unwrap_or(u32::MAX);
        let mut projector = Projector::identity(d);
        for round in 0..k {
            let mut omega = projector.start(env.rng())?;
            let part = parts.part(round);
            for t in 1..=updates {
                // The mean of B clipped gradients P·A_j·P·ω = P·x_j·(x_jᵀω), ω ∈ Im(P)
                // (Alg. 3 line 6, averaged over the batch).
                let mean = batch_gradient(
                    xt,
                    &part[(t - 1) * batch_size..t * batch_size],
                    &omega,
                    &projector,
                    c,
                );
                let noisy = env.gaussian_release(
                    RELEASE,
                    Matrix::from_column_slice(d, 1, mean.as_slice()),
                    sensitivity,
                    sd,
                )?;
                let mut step = Vector::from_column_slice(noisy.as_slice());
                projector.apply_vector(&mut step);
                omega = projector.normalize(omega + step * rates.at(round, t))?;
                let done = round * updates + t;
                if done % PROGRESS_EVERY == 0 || t == updates {
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

/// Whether a stored configuration's schedule is one `configure` could have made: a checked
/// learning rate, or the default schedule with a usable estimate.
fn schedule_is_usable(config: &DpOjaConfig) -> bool {
    match (&config.learning_rate, &config.estimate) {
        (Some(rate), None) => rate.check("learning_rate").is_ok(),
        (None, Some(e)) => {
            let s = e.schedule;
            e.noise_sd > 0.0
                && e.noise_sd.is_finite()
                && s.alpha > 0.0
                && s.alpha.is_finite()
                && s.offset >= 0.0
                && s.offset.is_finite()
                && s.min_relative_gap > 0.0
                && s.min_relative_gap <= 1.0
        }
        _ => false,
    }
}

/// The mean of the batch's clipped gradients P·x_j·(x_jᵀω), ω ∈ Im(P) (Alg. 3 line 6,
/// averaged over the batch); each clipped to L2 norm `c`.
fn batch_gradient(xt: Records<'_>, batch: &[usize], omega: &Vector, projector: &Projector, c: f64) -> Vector {
    let mut mean = Vector::zeros(omega.len());
    for &record in batch {
        let x = xt.column(record);
        let mut gradient = x * x.dot(omega);
        projector.apply_vector(&mut gradient);
        clip(&mut gradient, c);
        mean += gradient;
    }
    mean / batch.len() as f64
}

/// The learning-rate schedule: a stated one (the whole ρ to the updates), or the default one,
/// whose private eigenvalue estimate spends `estimate_share` of ρ first; returns the rate, the
/// estimate and the updates' ρ.
fn schedule_of(
    params: &DpOjaParams,
    beta: f64,
    n: usize,
    rho: f64,
) -> Result<(Option<LearningRate>, Option<EigenvalueEstimate>, f64), ConfigError> {
    Ok(match (params.learning_rate, params.estimate_share) {
        (Some(rate), None) => (Some(rate.check("params.learning_rate")?), None, rho),
        (Some(_), Some(_)) => {
            return Err(ConfigError::invalid(
                "params.estimate_share",
                "applies to the default schedule only; drop it or drop learning_rate",
            ));
        }
        (None, share) => {
            let share = share.unwrap_or(DEFAULT_ESTIMATE_SHARE);
            if !(share > 0.0 && share < 1.0) {
                return Err(ConfigError::invalid(
                    "params.estimate_share",
                    format!("must lie strictly between 0 and 1 (got {share})"),
                ));
            }
            let estimate_rho = share * rho;
            // Δ/sqrt(2ρ_e), nudged up so that its Gaussian cost is at most ρ_e.
            let noise_sd = calibrate_sd(estimate_sensitivity(beta, n), estimate_rho);
            let estimate = EigenvalueEstimate {
                schedule: DEFAULT_SCHEDULE,
                rho: estimate_rho,
                noise_sd,
            };
            (
                None,
                Some(estimate),
                rho - Cost::gaussian(estimate_sensitivity(beta, n), noise_sd).rho,
            )
        }
    })
}

#[cfg(test)]
#[path = "dp_oja_tests.rs"]
mod tests;
