//! `noisy_power`: the private randomized power method (Nicolas et al. 2024, Alg. 1, with the
//! sensitivity of Thm 3.1 and the zCDP accounting of Thm 3.2's proof; Hardt & Price 2014;
//! Balcan et al. 2016).
//!
//! 1. X₀ = Q(Ω), the Q factor of the thin QR of a d×p standard Gaussian Ω (Alg. 1 line 3).
//!    X₀ does not depend on the data, so it is drawn from `env.rng()`, not as privacy noise.
//! 2. For l = 1..L: Y_l = A·X_{l−1} + G_l, G_l iid N(0, (s·Δ(X_{l−1}))²), X_l = Q(Y_l)
//!    (Alg. 1 line 5), Δ from [`super::sensitivity`].
//! 3. Output the top-k left singular vectors of Y_L: a Rayleigh–Ritz step on the last release,
//!    i.e. post-processing. Their singular values are released too, as estimates of the
//!    magnitudes of the top-k eigenvalues (for positive semi-definite A, the eigenvalues).
//!
//! Privacy. Iteration l is a Gaussian mechanism on A·X_{l−1} with sensitivity Δ(X_{l−1}) and
//! noise sd s·Δ(X_{l−1}), hence (1/(2s²))-zCDP (Lemma 2.1); X_{l−1} is a post-processing of
//! X₀ and earlier releases, so adaptive composition (Lemma 2.2) gives ρ = L/(2s²) (eqs. 25–27).
//! Given a job budget ρ_job: s = sqrt(L/(2ρ_job)), nudged up so the cost never exceeds ρ_job.

use rand::RngCore;
use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::sensitivity::{SensitivityMode, check_bounds, power_sensitivity};
use super::{
    Algorithm, AlgorithmInfo, ConfigError, DataInput, NoiseScale, Output, ParamInfo, RunEnv, RunError,
};
use crate::dataset::{DataContext, Kind, Relation};
use crate::linalg::{Matrix, fix_signs, gram_t, gram_t_times, matmul, thin_qr_q, try_thin_svd};
use crate::privacy::{Cost, PrivacyTarget};

/// Default number of iterations. Nicolas et al. (§5) note that L is usually 1–5. At a fixed
/// budget every iteration costs the same 1/(2s²), so the noise sd grows only like √L, while the
/// noiseless error contracts like (σ_{p+1}/σ_k)^L; with the default p = 2k, four iterations
/// shrink it by (σ_{2k+1}/σ_k)⁴ (1/16 at a ratio of 1/2) for twice the noise of one iteration.
pub const DEFAULT_ITERATIONS: u32 = 4;
/// Largest accepted L (bounds the job's run time).
pub const MAX_ITERATIONS: u32 = 1000;
/// Audit label of the per-iteration release.
pub const RELEASE: &str = "power_iteration";

/// The private randomized power method.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoisyPower;

/// What the client sends.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoisyPowerParams {
    /// Target rank k, 1 ≤ k ≤ d.
    pub k: usize,
    /// Iteration rank p, k ≤ p ≤ d; default min(d, 2k).
    #[serde(default)]
    pub p: Option<usize>,
    /// Number of iterations L, 1 ≤ L ≤ 1000; default [`DEFAULT_ITERATIONS`].
    #[serde(default)]
    pub iterations: Option<u32>,
    /// Which sensitivity bound calibrates the noise; default `auto`.
    #[serde(default)]
    pub sensitivity: SensitivityMode,
}

/// Every parameter fixed and the noise multiplier calibrated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoisyPowerConfig {
    pub k: usize,
    pub p: usize,
    pub iterations: u32,
    pub sensitivity: SensitivityMode,
    /// The noise multiplier s: iteration l adds noise of sd s·Δ(X_{l−1}).
    pub multiplier: f64,
}

/// The job's ρ, checked finite and strictly positive.
pub(crate) fn target_rho(target: &PrivacyTarget) -> Result<f64, ConfigError> {
    if target.rho > 0.0 && target.rho.is_finite() {
        Ok(target.rho)
    } else {
        Err(ConfigError::invalid("rho", "must be a finite number > 0"))
    }
}

/// The cost ρ = L/(2s²) (Nicolas et al. eqs. 25–27: L Gaussian mechanisms of cost 1/(2s²)).
fn cost_of(iterations: u32, multiplier: f64) -> f64 {
    // (1/s)² rather than 1/s², so that a huge s cannot overflow s² into a zero cost.
    let inverse = 1.0 / multiplier;
    f64::from(iterations) * inverse * inverse / 2.0
}

/// s = sqrt(L/(2ρ)), the inverse of [`cost_of`], rounded up (never down) so that
/// `cost_of(L, s) ≤ ρ` holds in floating point too.
fn calibrate(iterations: u32, rho: f64) -> f64 {
    let mut s = (f64::from(iterations) / (2.0 * rho)).sqrt();
    while cost_of(iterations, s) > rho {
        s = s.next_up();
    }
    s
}

/// Checks 1 ≤ k ≤ d, reporting the failure on `params.k`.
pub(crate) fn check_k(k: usize, d: usize) -> Result<(), ConfigError> {
    if k >= 1 && k <= d {
        Ok(())
    } else {
        Err(ConfigError::invalid(
            "params.k",
            format!("must satisfy 1 ≤ k ≤ d = {d} (got {k})"),
        ))
    }
}

/// Whether forming A = XᵀX once is cheaper than applying Xᵀ(X·V) every iteration. Flop counts
/// (multiply–adds): forming A costs n·d² once plus d²·p per iteration; the factored product
/// costs 2·n·d·p per iteration. Form A iff n·d² + L·d²·p ≤ 2·L·n·d·p.
pub(crate) fn gram_is_cheaper(n: usize, d: usize, p: usize, iterations: u32) -> bool {
    // In f64: exact for any realistic shape, and no overflow for absurd ones.
    let (n, d, p, l) = (n as f64, d as f64, p as f64, f64::from(iterations));
    n * d * d + l * d * d * p <= 2.0 * l * n * d * p
}

/// The data matrix A as an operator V ↦ A·V.
enum Operator<'a> {
    Dense(std::borrow::Cow<'a, Matrix>),
    /// A = xt·xtᵀ applied in factored form.
    Records(&'a Matrix),
}

impl<'a> Operator<'a> {
    /// Picks the cheaper way to apply A (see [`gram_is_cheaper`]); checks the input against the
    /// dataset's public shape and kind.
    fn new(input: DataInput<'a>, ctx: &DataContext, p: usize, iterations: u32) -> Result<Self, RunError> {
        let d = ctx.d;
        match (input, ctx.kind()) {
            (DataInput::Records { xt }, Kind::Records) if xt.nrows() == d => {
                if gram_is_cheaper(xt.ncols(), d, p, iterations) {
                    Ok(Operator::Dense(std::borrow::Cow::Owned(gram_t(xt))))
                } else {
                    Ok(Operator::Records(xt))
                }
            }
            (DataInput::Matrix { a }, Kind::Matrix) if a.nrows() == d && a.ncols() == d => {
                Ok(Operator::Dense(std::borrow::Cow::Borrowed(a)))
            }
            _ => Err(RunError::Failed(
                "the data does not match the dataset's kind or dimension".into(),
            )),
        }
    }

    fn apply(&self, v: &Matrix) -> Matrix {
        match self {
            Operator::Dense(a) => matmul(a, v),
            Operator::Records(xt) => gram_t_times(xt, v),
        }
    }
}

/// X₀ = Q(Ω), Ω a d×p standard Gaussian (Nicolas et al. Alg. 1 line 3).
fn initial_iterate(rng: &mut dyn RngCore, d: usize, p: usize) -> Matrix {
    let omega = Matrix::from_fn(d, p, |_, _| StandardNormal.sample(&mut *rng));
    thin_qr_q(&omega)
}

impl Algorithm for NoisyPower {
    type Params = NoisyPowerParams;
    type Config = NoisyPowerConfig;

    fn info(&self) -> AlgorithmInfo {
        AlgorithmInfo {
            name: "noisy_power",
            summary: "Private randomized power method: L noisy subspace iterations, then a Rayleigh–Ritz step on the last noisy release.",
            source: "Nicolas et al. 2024, Alg. 1 with Thm 3.1 (sensitivity) and Thm 3.2 (privacy); Hardt & Price 2014; Balcan et al. 2016",
            kinds: vec![Kind::Records, Kind::Matrix],
            relations: vec![Relation::ReplaceOne, Relation::AddRemove, Relation::Entry],
            params: vec![
                ParamInfo::rank(),
                ParamInfo {
                    name: "p",
                    json_type: "integer",
                    description: "Iteration rank (k ≤ p ≤ d); extra columns speed convergence.",
                    default: Some(json!("min(d, 2k)")),
                    required: false,
                    minimum: Some(1.0),
                    allowed: None,
                },
                ParamInfo {
                    name: "iterations",
                    json_type: "integer",
                    description: "Number of noisy power iterations L (1–1000; 1–5 is typical). The noise grows like √L at a fixed budget.",
                    default: Some(json!(DEFAULT_ITERATIONS)),
                    required: false,
                    minimum: Some(1.0),
                    allowed: None,
                },
                ParamInfo {
                    name: "sensitivity",
                    json_type: "string",
                    description: "Sensitivity bound calibrating each iteration's noise: row_norm (Nicolas et al. Thm 3.1), rank_one (records only), hardt_price (baseline), or auto (the smallest applicable).",
                    default: Some(json!("auto")),
                    required: false,
                    minimum: None,
                    allowed: Some(SensitivityMode::NAMES.to_vec()),
                },
            ],
            privacy: "ρ-zCDP with ρ = L/(2s²): each iteration is a Gaussian mechanism with noise sd s·Δ(X_{l−1}).",
            public_only: false,
            scope_reason: None,
        }
    }

    fn configure(
        &self,
        params: NoisyPowerParams,
        ctx: &DataContext,
        target: &PrivacyTarget,
    ) -> Result<NoisyPowerConfig, ConfigError> {
        check_bounds(&ctx.neighbours)?;
        let rho = target_rho(target)?;
        let d = ctx.d;
        let k = params.k;
        check_k(k, d)?;
        let p = params.p.unwrap_or(d.min(2 * k));
        if !(p >= k && p <= d) {
            return Err(ConfigError::invalid(
                "params.p",
                format!("must satisfy k = {k} ≤ p ≤ d = {d} (got {p})"),
            ));
        }
        let iterations = params.iterations.unwrap_or(DEFAULT_ITERATIONS);
        if !(1..=MAX_ITERATIONS).contains(&iterations) {
            return Err(ConfigError::invalid(
                "params.iterations",
                format!("must satisfy 1 ≤ iterations ≤ {MAX_ITERATIONS} (got {iterations})"),
            ));
        }
        if !params.sensitivity.applies_to(&ctx.neighbours) {
            return Err(ConfigError::invalid(
                "params.sensitivity",
                "rank_one applies to records datasets only; use row_norm, hardt_price or auto on a matrix",
            ));
        }
        let multiplier = calibrate(iterations, rho);
        if !multiplier.is_finite() {
            return Err(ConfigError::invalid(
                "rho",
                "is too small to calibrate noise in floating point",
            ));
        }
        Ok(NoisyPowerConfig {
            k,
            p,
            iterations,
            sensitivity: params.sensitivity,
            multiplier,
        })
    }

    /// ρ = L/(2s²) (Nicolas et al. eqs. 25–27), independent of the data and of Δ.
    fn cost(&self, config: &NoisyPowerConfig, _ctx: &DataContext) -> Cost {
        Cost::zcdp(cost_of(config.iterations, config.multiplier))
    }

    fn noise_scales(&self, config: &NoisyPowerConfig, ctx: &DataContext) -> Vec<NoiseScale> {
        let fixed = config.sensitivity.fixed(&ctx.neighbours);
        let description = match fixed {
            Some(delta) => format!(
                "Gaussian noise added to A·X at each of {} iterations; sd = multiplier × {} sensitivity = {:.6e}.",
                config.iterations,
                config.sensitivity.as_str(),
                config.multiplier * delta
            ),
            None => format!(
                "Gaussian noise added to A·X at each of {} iterations; sd = multiplier × Δ(X), the {} sensitivity recomputed from each (public) iterate.",
                config.iterations,
                config.sensitivity.as_str()
            ),
        };
        vec![NoiseScale {
            release: RELEASE.into(),
            distribution: "gaussian".into(),
            multiplier: config.multiplier,
            sensitivity: fixed,
            count: config.iterations as usize,
            description,
        }]
    }

    /// Runs Alg. 1. X₀ is the first thing drawn from `env.rng()`; all noise goes through
    /// `env.gaussian_noise` under the label [`RELEASE`].
    fn run(
        &self,
        input: DataInput<'_>,
        config: &NoisyPowerConfig,
        ctx: &DataContext,
        env: &mut RunEnv<'_>,
    ) -> Result<Output, RunError> {
        let NoisyPowerConfig {
            k,
            p,
            iterations,
            sensitivity,
            multiplier,
        } = *config;
        let d = ctx.d;
        let fits = k >= 1 && k <= p && p <= d && (1..=MAX_ITERATIONS).contains(&iterations);
        if !(fits && multiplier > 0.0 && multiplier.is_finite()) {
            return Err(RunError::Failed(
                "the stored configuration does not fit the dataset".into(),
            ));
        }
        let op = Operator::new(input, ctx, p, iterations)?;
        let mut x = initial_iterate(env.rng(), d, p);
        let mut y = Matrix::zeros(d, p);
        for l in 1..=iterations {
            let delta = power_sensitivity(sensitivity, &ctx.neighbours, &x)
                .ok_or_else(|| RunError::Failed("sensitivity mode does not apply to this dataset".into()))?;
            let sd = multiplier * delta;
            if !(sd > 0.0 && sd.is_finite()) {
                return Err(RunError::Failed(
                    "noise scale is not a finite positive number".into(),
                ));
            }
            // Y_l = A·X_{l−1} + G_l (Alg. 1 line 5).
            y = op.apply(&x) + env.gaussian_noise(RELEASE, d, p, sd);
            // Clipped records and finite bounds keep Y finite unless n·β² overflows f64.
            if !y.iter().all(|v| v.is_finite()) {
                return Err(RunError::Failed(
                    "numerical overflow in the power iteration".into(),
                ));
            }
            if l < iterations {
                x = thin_qr_q(&y);
            }
            env.progress(l, iterations)?;
        }
        // Rayleigh–Ritz on the release Y_L: its top-k left singular vectors.
        let svd = try_thin_svd(&y).map_err(|_| RunError::Failed("the final SVD did not converge".into()))?;
        let mut basis = svd.u.columns(0, k).into_owned();
        fix_signs(&mut basis);
        Ok(Output {
            basis,
            eigenvalues: Some(svd.s.iter().take(k).copied().collect()),
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;
    use serde_json::Value;

    use super::*;
    use crate::algorithms::{Cancelled, DynAlgorithm};
    use crate::dataset::Neighbours;
    use crate::linalg::subspace::{orthonormality_error, sin_theta};
    use crate::linalg::{matmul_tn, sym_eig, thin_svd};
    use crate::privacy::noise::RecordingAudit;
    use crate::privacy::testing::check_gaussian_scale;

    // ---- Fixtures shared with the other algorithms' tests. ----

    pub(crate) fn seeded(seed: u64) -> ChaCha20Rng {
        ChaCha20Rng::seed_from_u64(seed)
    }

    pub(crate) fn gaussian(rng: &mut ChaCha20Rng, rows: usize, cols: usize) -> Matrix {
        Matrix::from_fn(rows, cols, |_, _| StandardNormal.sample(&mut *rng))
    }

    /// Records xt (d×n) with a planted spectrum: x = Σ_j sqrt(spikes_j)·z_j·u_j + background·w,
    /// then clipped to ‖x‖₂ ≤ β (privacy.md §1; ‖x‖₁ ≤ √d·β, the default α, follows).
    pub(crate) fn spiked_records(
        seed: u64,
        d: usize,
        n: usize,
        spikes: &[f64],
        background: f64,
        beta: f64,
    ) -> Matrix {
        let mut rng = seeded(seed);
        let u = thin_qr_q(&gaussian(&mut rng, d, spikes.len()));
        let z = gaussian(&mut rng, spikes.len(), n);
        let w = gaussian(&mut rng, d, n);
        let scaled = Matrix::from_fn(spikes.len(), n, |j, i| spikes[j].sqrt() * z[(j, i)]);
        let mut xt = &u * scaled + w * background;
        for mut col in xt.column_iter_mut() {
            let norm = col.norm();
            if norm > beta {
                col *= beta / norm;
            }
        }
        xt
    }

    /// A symmetric d×d matrix U·diag(spikes)·Uᵀ + a symmetric perturbation of size `background`.
    pub(crate) fn spiked_matrix(seed: u64, d: usize, spikes: &[f64], background: f64) -> Matrix {
        let mut rng = seeded(seed);
        let u = thin_qr_q(&gaussian(&mut rng, d, spikes.len()));
        let lambda = Matrix::from_diagonal(&crate::linalg::Vector::from_column_slice(spikes));
        let e = gaussian(&mut rng, d, d);
        &u * lambda * u.transpose() + (&e + e.transpose()) * (background / 2.0)
    }

    pub(crate) fn ctx(d: usize, n: Option<usize>, neighbours: Neighbours) -> DataContext {
        DataContext {
            d,
            n,
            neighbours,
            public: false,
        }
    }

    pub(crate) fn target(rho: f64) -> PrivacyTarget {
        PrivacyTarget { rho, delta: None }
    }

    /// Runs `alg` with a seeded RNG and a recording audit.
    pub(crate) fn run_audited<A: Algorithm>(
        alg: &A,
        input: DataInput<'_>,
        config: &A::Config,
        ctx: &DataContext,
        seed: u64,
    ) -> (Result<Output, RunError>, RecordingAudit) {
        let mut rng = seeded(seed);
        let mut progress = |_: u32, _: u32| Ok::<(), Cancelled>(());
        let mut audit = RecordingAudit::default();
        let out = {
            let mut env = RunEnv::new(&mut rng, &mut progress).with_audit(&mut audit);
            alg.run(input, config, ctx, &mut env)
        };
        (out, audit)
    }

    /// Orthonormal columns and the sign rule of algorithms.md (largest-magnitude entry > 0).
    pub(crate) fn assert_basis_contract(q: &Matrix, d: usize, k: usize) {
        assert_eq!((q.nrows(), q.ncols()), (d, k));
        let err = orthonormality_error(q);
        assert!(err <= 1e-10, "‖QᵀQ − I‖ = {err:e}");
        for col in q.column_iter() {
            let biggest = col
                .iter()
                .copied()
                .fold(0.0_f64, |b, v| if v.abs() > b.abs() { v } else { b });
            assert!(
                biggest > 0.0,
                "column's largest-magnitude entry {biggest} is not positive"
            );
        }
    }

    /// The exact top-k eigenvectors of `a`.
    pub(crate) fn exact_top(a: &Matrix, k: usize) -> Matrix {
        sym_eig(a).vectors.columns(0, k).into_owned()
    }

    /// The first error of a rejected `prepare`.
    pub(crate) fn rejected(
        alg: &dyn DynAlgorithm,
        params: Value,
        ctx: &DataContext,
        rho: f64,
    ) -> ConfigError {
        alg.prepare(params, ctx, &target(rho))
            .expect_err("must be rejected")
    }

    pub(crate) fn invalid_field(e: &ConfigError) -> &str {
        match e {
            ConfigError::Invalid { field, .. } => field,
            other => panic!("expected ConfigError::Invalid, got {other:?}"),
        }
    }

    const AR: Neighbours = Neighbours::AddRemove {
        beta: 2.0,
        alpha: 6.0,
    };
    const RO: Neighbours = Neighbours::ReplaceOne {
        beta: 2.0,
        alpha: 6.0,
    };
    const EN: Neighbours = Neighbours::Entry { u: 1.0 };

    fn params(k: usize, p: usize, iterations: u32, sensitivity: SensitivityMode) -> NoisyPowerParams {
        NoisyPowerParams {
            k,
            p: Some(p),
            iterations: Some(iterations),
            sensitivity,
        }
    }

    // ---- Cost and calibration. ----

    #[test]
    fn cost_is_l_over_two_s_squared() {
        let c = ctx(10, None, AR);
        let cfg = |iterations, multiplier| NoisyPowerConfig {
            k: 2,
            p: 4,
            iterations,
            sensitivity: SensitivityMode::Auto,
            multiplier,
        };
        // 4 / (2·2²) = 0.5; 1 / (2·0.5²) = 2; 10 / (2·10²) = 0.05.
        assert_eq!(NoisyPower.cost(&cfg(4, 2.0), &c), Cost::zcdp(0.5));
        assert_eq!(NoisyPower.cost(&cfg(1, 0.5), &c), Cost::zcdp(2.0));
        assert_eq!(NoisyPower.cost(&cfg(10, 10.0), &c), Cost::zcdp(0.05));
    }

    #[test]
    fn configure_then_cost_returns_the_target() {
        for neighbours in [AR, RO, EN] {
            let c = ctx(20, None, neighbours);
            for rho in [1e-8, 1e-3, 0.1, 0.5, 1.0, 3.7, 1e4, 1e6] {
                for iterations in [1, 2, 4, 17, 1000] {
                    let p = params(3, 6, iterations, SensitivityMode::RowNorm);
                    let config = NoisyPower.configure(p, &c, &target(rho)).expect("valid");
                    let cost = NoisyPower.cost(&config, &c);
                    assert!(cost.rho <= rho, "cost {} above target {rho}", cost.rho);
                    assert!((rho - cost.rho) / rho <= 1e-12);
                    assert_eq!(cost.delta, 0.0);
                    let s = (f64::from(iterations) / (2.0 * rho)).sqrt();
                    assert!((config.multiplier - s).abs() / s <= 1e-12);
                }
            }
        }
    }

    #[test]
    fn defaults_are_filled_in() {
        let full = NoisyPowerParams {
            k: 3,
            p: None,
            iterations: None,
            sensitivity: SensitivityMode::Auto,
        };
        let config = NoisyPower
            .configure(full.clone(), &ctx(30, None, AR), &target(1.0))
            .expect("valid");
        assert_eq!(
            (config.k, config.p, config.iterations),
            (3, 6, DEFAULT_ITERATIONS)
        );
        assert_eq!(config.sensitivity, SensitivityMode::Auto);
        // p = min(d, 2k) when 2k > d.
        let config = NoisyPower
            .configure(full, &ctx(5, None, AR), &target(1.0))
            .expect("valid");
        assert_eq!(config.p, 5);
        // Through the registry: an empty object is missing k, null parameters likewise.
        let prepared = NoisyPower.prepare(serde_json::json!({"k": 2}), &ctx(8, None, EN), &target(1.0));
        let prepared = prepared.expect("valid");
        assert_eq!(prepared.config["p"], 4);
        assert_eq!(prepared.config["iterations"], 4);
        assert_eq!(prepared.config["sensitivity"], "auto");
        assert!((prepared.cost.rho - 1.0).abs() <= 1e-12);
        assert_eq!(prepared.noise.len(), 1);
        assert_eq!(prepared.noise[0].count, 4);
        assert_eq!(prepared.noise[0].sensitivity, None);
    }

    #[test]
    fn noise_scale_shows_fixed_rank_one_sensitivity() {
        let c = ctx(10, None, RO);
        let config = NoisyPower
            .configure(params(2, 4, 3, SensitivityMode::RankOne), &c, &target(1.5))
            .expect("valid");
        let scales = NoisyPower.noise_scales(&config, &c);
        assert_eq!(scales.len(), 1);
        assert_eq!(scales[0].release, RELEASE);
        assert_eq!(scales[0].distribution, "gaussian");
        assert_eq!(scales[0].count, 3);
        assert_eq!(scales[0].multiplier, config.multiplier);
        // √2·β² with β = 2.
        let expected = 2.0_f64.sqrt() * 4.0;
        assert!((scales[0].sensitivity.expect("fixed") - expected).abs() < 1e-14);
    }

    #[test]
    fn invalid_parameters_name_their_field() {
        use serde_json::json;
        let c = ctx(6, None, AR);
        let cases = [
            (json!({"k": 0}), "params.k"),
            (json!({"k": 7}), "params.k"),
            (json!({"k": 3, "p": 2}), "params.p"),
            (json!({"k": 3, "p": 7}), "params.p"),
            (json!({"k": 2, "iterations": 0}), "params.iterations"),
            (json!({"k": 2, "iterations": 1001}), "params.iterations"),
            (json!({"k": "three"}), "params.k"),
            (json!({"k": -1}), "params.k"),
            (json!({"k": 2.5}), "params.k"),
            (json!({"k": 2, "p": "4"}), "params.p"),
            (json!({"k": 2, "iterations": 1.5}), "params.iterations"),
            (json!({"k": 2, "sensitivity": "frobenius"}), "params.sensitivity"),
            (json!({"k": 2, "sensitivity": 1}), "params.sensitivity"),
        ];
        for (params, field) in cases {
            let e = rejected(&NoisyPower, params.clone(), &c, 1.0);
            assert_eq!(invalid_field(&e), field, "{params}: {e}");
        }
        // Missing k and unknown fields are errors on the parameter object; the message names them.
        for (params, needle) in [
            (json!({}), "`k`"),
            (json!(null), "`k`"),
            (json!({"k": 2, "q": 3}), "`q`"),
        ] {
            let e = rejected(&NoisyPower, params.clone(), &c, 1.0);
            assert!(invalid_field(&e).starts_with("params"), "{params}: {e}");
            assert!(e.to_string().contains(needle), "{params}: {e}");
        }
        // rank_one does not apply to matrices.
        let e = rejected(
            &NoisyPower,
            json!({"k": 2, "sensitivity": "rank_one"}),
            &ctx(6, None, EN),
            1.0,
        );
        assert_eq!(invalid_field(&e), "params.sensitivity");
        // The budget and the bounds are validated too (NaN included).
        for rho in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e-320] {
            assert_eq!(
                invalid_field(&rejected(&NoisyPower, json!({"k": 2}), &c, rho)),
                "rho"
            );
        }
        let bad = ctx(
            6,
            None,
            Neighbours::AddRemove {
                beta: f64::NAN,
                alpha: 1.0,
            },
        );
        assert_eq!(
            invalid_field(&rejected(&NoisyPower, json!({"k": 2}), &bad, 1.0)),
            "bounds.row_norm_bound"
        );
    }

    /// noisy_power supports every kind and relation, so `prepare` never answers `Unsupported`.
    #[test]
    fn every_kind_and_relation_is_supported() {
        let info = Algorithm::info(&NoisyPower);
        assert!(!info.public_only);
        for neighbours in [AR, RO, EN] {
            assert!(
                info.kinds.contains(&neighbours.kind()) && info.relations.contains(&neighbours.relation())
            );
            let prepared = NoisyPower.prepare(
                serde_json::json!({"k": 1}),
                &ctx(4, None, neighbours),
                &target(1.0),
            );
            assert!(prepared.is_ok(), "{neighbours:?}: {prepared:?}");
        }
    }

    // ---- Running. ----

    #[test]
    fn path_choice_follows_the_flop_counts() {
        // n·d² + L·d²·p vs 2·L·n·d·p.
        assert!(gram_is_cheaper(1000, 10, 4, 4)); // 101 600 ≤ 320 000
        assert!(!gram_is_cheaper(100, 1000, 4, 4)); // 100 016 000 > 3 200 000
        assert!(!gram_is_cheaper(usize::MAX, usize::MAX, 1, 1));
        // Both operators compute the same A·V.
        let xt = spiked_records(1, 7, 9, &[3.0], 0.5, 10.0);
        let v = gaussian(&mut seeded(2), 7, 3);
        let dense = Operator::Dense(std::borrow::Cow::Owned(gram_t(&xt))).apply(&v);
        let factored = Operator::Records(&xt).apply(&v);
        let naive = matmul(&xt, &matmul_tn(&xt, &v));
        assert!((&dense - factored).amax() < 1e-12 && (dense - naive).amax() < 1e-12);
    }

    #[test]
    fn gram_cheaper_edge_is_exact() {
        // d(n + L·p) ≤ 2·L·n·p at equality: n = 10, d = 10, p = 1, L = 5 → 150 vs 100 (not
        // cheaper); n = 10, d = 5, p = 1, L = 5 → 75 ≤ 100 (cheaper).
        assert!(!gram_is_cheaper(10, 10, 1, 5));
        assert!(gram_is_cheaper(10, 5, 1, 5));
    }

    #[test]
    fn output_is_orthonormal_with_fixed_signs() {
        let (d, n) = (15, 120);
        let xt = spiked_records(3, d, n, &[5.0, 3.0], 0.3, 3.0);
        let a = spiked_matrix(4, d, &[8.0, 5.0], 0.1);
        for (neighbours, input) in [
            (AR, DataInput::Records { xt: &xt }),
            (RO, DataInput::Records { xt: &xt }),
            (EN, DataInput::Matrix { a: &a }),
        ] {
            for mode in [
                SensitivityMode::Auto,
                SensitivityMode::RowNorm,
                SensitivityMode::HardtPrice,
            ] {
                for rho in [0.01, 1e6] {
                    let c = ctx(d, Some(n), neighbours);
                    let config = NoisyPower
                        .configure(params(4, 6, 3, mode), &c, &target(rho))
                        .expect("valid");
                    let (out, _) = run_audited(&NoisyPower, input, &config, &c, 5);
                    let out = out.expect("run");
                    assert_basis_contract(&out.basis, d, 4);
                    let values = out.eigenvalues.expect("released singular values");
                    assert_eq!(values.len(), 4);
                    assert!(values.windows(2).all(|w| w[0] >= w[1]) && values[3] >= 0.0);
                }
            }
        }
    }

    #[test]
    fn converges_to_the_exact_subspace_at_huge_rho() {
        let (d, n, k) = (30, 400, 3);
        let xt = spiked_records(7, d, n, &[9.0, 6.0, 4.0], 0.3, 4.0);
        let gram = gram_t(&xt);
        let a = spiked_matrix(8, d, &[50.0, 30.0, 20.0], 0.2);
        for (neighbours, input, target_a) in [
            (AR, DataInput::Records { xt: &xt }, &gram),
            (RO, DataInput::Records { xt: &xt }, &gram),
            (EN, DataInput::Matrix { a: &a }, &a),
        ] {
            let c = ctx(d, Some(n), neighbours);
            let p = NoisyPowerParams {
                k,
                p: None,
                iterations: None,
                sensitivity: SensitivityMode::Auto,
            };
            let config = NoisyPower.configure(p, &c, &target(1e12)).expect("valid");
            let (out, _) = run_audited(&NoisyPower, input, &config, &c, 9);
            let out = out.expect("run");
            let exact = sym_eig(target_a);
            let err = sin_theta(&out.basis, &exact.vectors.columns(0, k).into_owned());
            assert!(err < 1e-3, "{neighbours:?}: sin θ = {err:e}");
            let values = out.eigenvalues.expect("released");
            for (got, want) in values.iter().zip(exact.values.iter()) {
                assert!((got - want).abs() <= 1e-4 * want.abs(), "{got} vs {want}");
            }
        }
    }

    #[test]
    fn error_decreases_as_rho_grows() {
        let (d, n, k) = (30, 400, 3);
        let xt = spiked_records(7, d, n, &[9.0, 6.0, 4.0], 0.3, 4.0);
        let exact = exact_top(&gram_t(&xt), k);
        let c = ctx(d, Some(n), AR);
        let rhos = [1e-4, 1e-2, 1.0, 1e2, 1e4];
        let errors: Vec<f64> = rhos
            .iter()
            .map(|&rho| {
                let config = NoisyPower
                    .configure(params(k, 6, 4, SensitivityMode::Auto), &c, &target(rho))
                    .expect("valid");
                // Average over seeds so the comparison is about the noise level, not one draw.
                (0..4)
                    .map(|seed| {
                        let (out, _) =
                            run_audited(&NoisyPower, DataInput::Records { xt: &xt }, &config, &c, seed);
                        sin_theta(&out.expect("run").basis, &exact)
                    })
                    .sum::<f64>()
                    / 4.0
            })
            .collect();
        assert!(errors.windows(2).all(|w| w[1] < w[0]), "errors {errors:?}");
        assert!(errors[0] > 0.5 && errors[4] < 1e-2, "errors {errors:?}");
    }

    #[test]
    fn progress_is_reported_and_cancellation_stops_the_run() {
        let (d, n) = (10, 50);
        let xt = spiked_records(3, d, n, &[4.0], 0.3, 2.0);
        let c = ctx(d, Some(n), AR);
        let config = NoisyPower
            .configure(params(2, 3, 5, SensitivityMode::Auto), &c, &target(1.0))
            .expect("valid");
        let mut rng = seeded(1);
        let mut calls = Vec::new();
        let mut progress = |done: u32, total: u32| {
            calls.push((done, total));
            Ok(())
        };
        {
            let mut env = RunEnv::new(&mut rng, &mut progress);
            NoisyPower
                .run(DataInput::Records { xt: &xt }, &config, &c, &mut env)
                .expect("run");
        }
        assert_eq!(calls, (1..=5).map(|l| (l, 5)).collect::<Vec<_>>());

        let mut rng = seeded(1);
        let mut progress = |done: u32, _: u32| if done >= 2 { Err(Cancelled) } else { Ok(()) };
        let mut audit = RecordingAudit::default();
        let result = {
            let mut env = RunEnv::new(&mut rng, &mut progress).with_audit(&mut audit);
            NoisyPower.run(DataInput::Records { xt: &xt }, &config, &c, &mut env)
        };
        assert_eq!(result.expect_err("cancelled"), RunError::Cancelled);
        assert_eq!(audit.draws.len(), 2, "no noise is drawn after the cancellation");
    }

    #[test]
    fn mismatched_input_fails_cleanly() {
        let xt = spiked_records(3, 6, 20, &[4.0], 0.3, 2.0);
        let a = spiked_matrix(3, 6, &[4.0], 0.1);
        let config = NoisyPowerConfig {
            k: 2,
            p: 3,
            iterations: 2,
            sensitivity: SensitivityMode::Auto,
            multiplier: 1.0,
        };
        let cases = [
            (DataInput::Matrix { a: &a }, ctx(6, None, AR)),
            (DataInput::Records { xt: &xt }, ctx(6, None, EN)),
            (DataInput::Records { xt: &xt }, ctx(7, None, AR)),
            (DataInput::Matrix { a: &a }, ctx(5, None, EN)),
        ];
        for (input, c) in cases {
            let (out, audit) = run_audited(&NoisyPower, input, &config, &c, 1);
            assert!(matches!(out, Err(RunError::Failed(_))), "{out:?}");
            assert!(audit.draws.is_empty());
        }
        // A stored configuration that no longer fits (k > p, rank_one on a matrix) fails too.
        let bad = NoisyPowerConfig {
            k: 4,
            ..config.clone()
        };
        assert!(matches!(
            run_audited(
                &NoisyPower,
                DataInput::Records { xt: &xt },
                &bad,
                &ctx(6, None, AR),
                1
            )
            .0,
            Err(RunError::Failed(_))
        ));
        let bad = NoisyPowerConfig {
            sensitivity: SensitivityMode::RankOne,
            ..config
        };
        assert!(matches!(
            run_audited(
                &NoisyPower,
                DataInput::Matrix { a: &a },
                &bad,
                &ctx(6, None, EN),
                1
            )
            .0,
            Err(RunError::Failed(_))
        ));
    }

    #[test]
    fn registry_round_trip_matches_a_direct_run() {
        let (d, n) = (12, 60);
        let xt = spiked_records(5, d, n, &[4.0, 2.0], 0.3, 2.0);
        let c = ctx(d, Some(n), RO);
        let prepared = NoisyPower
            .prepare(
                serde_json::json!({"k": 2, "p": 4, "iterations": 3, "sensitivity": "row_norm"}),
                &c,
                &target(0.7),
            )
            .expect("valid");
        let mut rng = seeded(4);
        let mut progress = |_: u32, _: u32| Ok::<(), Cancelled>(());
        let mut env = RunEnv::new(&mut rng, &mut progress);
        let via_registry =
            NoisyPower.run_prepared(&prepared.config, DataInput::Records { xt: &xt }, &c, &mut env);
        let config = NoisyPower
            .configure(params(2, 4, 3, SensitivityMode::RowNorm), &c, &target(0.7))
            .expect("valid");
        let (direct, _) = run_audited(&NoisyPower, DataInput::Records { xt: &xt }, &config, &c, 4);
        assert_eq!(via_registry.expect("run").basis, direct.expect("run").basis);
    }

    // ---- Statistical audit of the noise actually drawn. ----

    /// Δ(X) straight from the algorithms.md table, written independently of `sensitivity.rs`.
    fn spec_delta(neighbours: &Neighbours, mode: SensitivityMode, x: &Matrix) -> f64 {
        let root_p = (x.ncols() as f64).sqrt();
        let max_row = x.row_iter().map(|r| r.norm()).fold(0.0, f64::max);
        let max_abs = x.amax();
        let (row_norm, rank_one, hardt_price) = match *neighbours {
            Neighbours::Entry { u } => (u * max_row, f64::INFINITY, u * root_p * max_abs),
            Neighbours::AddRemove { beta, alpha } => (
                alpha * beta * max_row,
                beta * beta,
                alpha * beta * root_p * max_abs,
            ),
            Neighbours::ReplaceOne { beta, alpha } => (
                2.0 * alpha * beta * max_row,
                2.0_f64.sqrt() * beta * beta,
                2.0 * alpha * beta * root_p * max_abs,
            ),
        };
        match mode {
            SensitivityMode::RowNorm => row_norm,
            SensitivityMode::RankOne => rank_one,
            SensitivityMode::HardtPrice => hardt_price,
            SensitivityMode::Auto => row_norm.min(rank_one).min(hardt_price),
        }
    }

    struct AuditReport {
        /// Largest relative gap between the recorded and the spec's sd.
        scale_error: f64,
        per_draw: Vec<Result<(), String>>,
        /// All draws, each divided by its spec sd, against N(0, 1).
        pooled: Result<(), String>,
    }

    /// Runs noisy_power (multiplier scaled by `factor`, 1 = calibrated) with an audit and checks
    /// the drawn noise against sd = sqrt(L/(2ρ))·Δ(X_{l−1}) computed here from the spec. The
    /// iterates are replayed from the audit: X₀ from the same seed, then Y_l = A·X_{l−1} + G_l
    /// with the recorded G_l and X_l = Q(Y_l); the output must be Y_L's Rayleigh–Ritz basis,
    /// which shows the audited noise is the noise that was used.
    fn audit_noise(neighbours: Neighbours, mode: SensitivityMode, factor: f64) -> AuditReport {
        let (d, n, k, p, iterations, rho, seed): (usize, usize, usize, usize, u32, f64, u64) =
            (60, 300, 5, 10, 5, 0.8, 21);
        let xt = spiked_records(13, d, n, &[6.0, 4.0, 3.0], 0.3, 2.0);
        let a = spiked_matrix(14, d, &[40.0, 30.0, 20.0], 0.3);
        let (input, dense) = match neighbours {
            Neighbours::Entry { .. } => (DataInput::Matrix { a: &a }, a.clone()),
            _ => (DataInput::Records { xt: &xt }, gram_t(&xt)),
        };
        let c = ctx(d, None, neighbours);
        let mut config = NoisyPower
            .configure(params(k, p, iterations, mode), &c, &target(rho))
            .expect("valid");
        config.multiplier *= factor;
        let (out, audit) = run_audited(&NoisyPower, input, &config, &c, seed);
        let out = out.expect("run");
        assert_eq!(audit.draws.len(), iterations as usize);

        let s_spec = (f64::from(iterations) / (2.0 * rho)).sqrt();
        let mut x = initial_iterate(&mut seeded(seed), d, p);
        let mut y = Matrix::zeros(d, p);
        let (mut scale_error, mut per_draw, mut pooled) = (0.0_f64, Vec::new(), Vec::new());
        for draw in &audit.draws {
            assert_eq!(
                (draw.label, draw.distribution, draw.values.len()),
                (RELEASE, "gaussian", d * p)
            );
            let sd = s_spec * spec_delta(&neighbours, mode, &x);
            scale_error = scale_error.max((draw.scale - sd).abs() / sd);
            per_draw.push(check_gaussian_scale(&draw.values, sd));
            pooled.extend(draw.values.iter().map(|v| v / sd));
            y = &dense * &x + Matrix::from_column_slice(d, p, &draw.values);
            x = thin_qr_q(&y);
        }
        let replayed = thin_svd(&y).u.columns(0, k).into_owned();
        assert!(
            sin_theta(&out.basis, &replayed) < 1e-8,
            "output is not the replayed Rayleigh–Ritz basis"
        );
        AuditReport {
            scale_error,
            per_draw,
            pooled: check_gaussian_scale(&pooled, 1.0),
        }
    }

    fn assert_calibrated(report: &AuditReport) {
        assert!(
            report.scale_error < 1e-9,
            "recorded sd off by {:e}",
            report.scale_error
        );
        for (l, r) in report.per_draw.iter().enumerate() {
            assert!(r.is_ok(), "iteration {}: {r:?}", l + 1);
        }
        assert!(report.pooled.is_ok(), "{:?}", report.pooled);
    }

    #[test]
    fn noise_matches_spec_rank_one() {
        assert_calibrated(&audit_noise(AR, SensitivityMode::RankOne, 1.0));
        assert_calibrated(&audit_noise(RO, SensitivityMode::RankOne, 1.0));
    }

    #[test]
    fn noise_matches_spec_row_norm_and_hardt_price() {
        assert_calibrated(&audit_noise(RO, SensitivityMode::RowNorm, 1.0));
        assert_calibrated(&audit_noise(AR, SensitivityMode::HardtPrice, 1.0));
        assert_calibrated(&audit_noise(EN, SensitivityMode::RowNorm, 1.0));
    }

    #[test]
    fn noise_matches_spec_auto() {
        assert_calibrated(&audit_noise(AR, SensitivityMode::Auto, 1.0));
        assert_calibrated(&audit_noise(EN, SensitivityMode::Auto, 1.0));
    }

    /// The same check catches a mechanism that adds 10 % too little noise.
    #[test]
    fn under_noised_run_fails_the_audit() {
        for (neighbours, mode) in [
            (RO, SensitivityMode::RankOne),
            (AR, SensitivityMode::RowNorm),
            (EN, SensitivityMode::Auto),
        ] {
            let report = audit_noise(neighbours, mode, 0.9);
            assert!(
                report.pooled.is_err(),
                "{neighbours:?} {mode:?}: under-noising went unnoticed"
            );
        }
    }
}
