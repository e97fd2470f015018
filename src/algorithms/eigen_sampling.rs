//! `eigen_sampling`: iterative eigenvector sampling (Amin, Dick, Kulesza, Muñoz Medina &
//! Vassilvitskii, "Differentially Private Covariance Estimation", NeurIPS 2019, Alg. 1 with the
//! Bingham sampler of their Alg. 2), the PCA that OpenDP and IBM diffprivlib ship. The paper is
//! not in ../shared/papers; steps are numbered as in Alg. 1 (the numbering OpenDP cites).
//!
//! On records X (rows clipped to ‖x‖₂ ≤ β), with C = XᵀX and ε = ε₀ + m·ε_v:
//! 1. (Alg. 1 step 1.iii) λ̂_j = λ_j(C) + Lap(Δ₁/ε₀) for the top k eigenvalues; released after
//!    post-processing (clamped at 0, C being PSD, and sorted decreasing). Skipped when ε₀ = 0.
//! 2. P₁ = I_d, C₁ = C. For i = 1..k, on the sphere S^{q−1} of the current q = d − i + 1
//!    dimensional subspace:
//!    (step 2.a) draw û_i with density ∝ exp(ε_v·ûᵀC_iû/(2Δ)) (the exponential mechanism with
//!    score uᵀC_iu; a Bingham distribution, sampled exactly by [`super::bingham`] in the
//!    eigenbasis of C_i) and output v̂_i = P_i û_i;
//!    (steps 2.b, 2.c) P_{i+1} = an orthonormal basis of span(P_i) ∩ v̂_i^⊥, C_{i+1} =
//!    P_{i+1}ᵀ C P_{i+1}. The basis is the last q − 1 columns of the Householder reflector that
//!    maps û_i to ±e₁, applied in O(dq) to P_i and O(q²) to C_i.
//!    When q = 1 (the last vector when k = d) û = 1 is forced and costs nothing, so only
//!    m = min(k, d − 1) vectors are drawn (as OpenDP and diffprivlib do).
//! 3. Output [v̂_1 … v̂_k] in sampling order, signs fixed by [`fix_signs`].
//!
//! Sensitivities (one record x, or x replacing y, with ‖x‖₂, ‖y‖₂ ≤ β):
//! - Eigenvalues, L1. add_remove: C' = C + xxᵀ raises every eigenvalue (Weyl) and the rises sum
//!   to tr(xxᵀ) = ‖x‖² ≤ β², so Δ₁ = β² (for the top k too). replace_one: pass through C − yyᵀ
//!   (lowers by ‖y‖² in total), then add xxᵀ: Δ₁ = 2β², attained (C = diag(3, 1), y = e₁,
//!   x = e₂). The paper's Lap(2/ε₀) is this with β = 1.
//! - Score uᵀC_iu, for every unit u: P_i depends only on earlier releases, so for fixed P_i the
//!   change is (P_iu)ᵀ(C' − C)(P_iu) = ±(wᵀx)² (add_remove) or (wᵀx)² − (wᵀy)² (replace_one)
//!   with w = P_iu a unit vector: a difference of two numbers in [0, β²]. Δ = β² under both
//!   relations. The exponential mechanism exp(ε_v·score/(2Δ)) is therefore ε_v-DP under both
//!   (OpenDP charges replace_one as two add/remove changes and uses half this concentration).
//!
//! Cost. Basic composition of pure-DP mechanisms (the later ones adaptive): ε = ε₀ + m·ε_v,
//! and ε-DP is (ε²/2)-zCDP (Bun & Steinke 2016 Prop. 1.4), so ρ = (ε₀ + m·ε_v)²/2. Given
//! ρ_job: ε = sqrt(2ρ_job), ε₀ = share·ε, ε_v = (1 − share)·ε/m, with `eigenvalue_share`
//! defaulting to 1/2 (OpenDP's even split between eigenvalues and eigenvectors, the vectors'
//! half split evenly); both nudged down so the cost never exceeds ρ_job. When d = 1 no vector
//! is drawn and only ε₀ is spent (and charged).
//! (Not used: the exponential mechanism is also (ε²/8)-zCDP, Cesar & Rogers 2021; charging it
//! that way would be tighter but departs from the spec's pure-DP rule.)
//!
//! Cost of a run: the Gram matrix O(nd²), then one symmetric eigendecomposition per drawn
//! vector (O(q³)); each Bingham proposal is O(q) and the sampler's acceptance rate stays
//! bounded as the signal grows (see [`super::bingham`]).

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::noisy_power::{check_k, target_rho};
use super::sensitivity::check_bounds;
use super::{
    Algorithm, AlgorithmInfo, ConfigError, DataInput, NoiseScale, Output, ParamInfo, RunEnv, RunError,
};
use crate::dataset::{DataContext, Kind, Neighbours, Relation};
use crate::linalg::{Matrix, Vector, fix_signs, gram_t, try_sym_eig};
use crate::privacy::{Cost, PrivacyTarget};

/// Audit label of the Laplace eigenvalue release.
pub const EIGENVALUE_RELEASE: &str = "eigenvalues";
/// Audit label of each exponential-mechanism eigenvector draw.
pub const EIGENVECTOR_RELEASE: &str = "eigenvector";
/// Default share of ε spent on the eigenvalues (OpenDP's split).
pub const DEFAULT_EIGENVALUE_SHARE: f64 = 0.5;

/// Iterative eigenvector sampling (Amin et al. 2019).
#[derive(Debug, Clone, Copy, Default)]
pub struct EigenSampling;

/// What the client sends.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EigenSamplingParams {
    /// Target rank k, 1 ≤ k ≤ d.
    pub k: usize,
    /// Share of ε spent on the eigenvalues, 0 ≤ share < 1; default [`DEFAULT_EIGENVALUE_SHARE`].
    #[serde(default)]
    pub eigenvalue_share: Option<f64>,
}

/// Every parameter fixed and the budget split.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EigenSamplingConfig {
    pub k: usize,
    /// ε₀ of the Laplace eigenvalue release; 0 releases no eigenvalues.
    pub eigenvalue_epsilon: f64,
    /// ε_v of each of the min(k, d − 1) exponential-mechanism draws (0 when d = 1).
    pub vector_epsilon: f64,
}

/// Δ = β², the sensitivity of the score uᵀC_iu under both record relations (module docs);
/// `None` for matrix datasets.
pub fn score_sensitivity(neighbours: &Neighbours) -> Option<f64> {
    match *neighbours {
        Neighbours::AddRemove { beta, .. } | Neighbours::ReplaceOne { beta, .. } => Some(beta * beta),
        Neighbours::Entry { .. } => None,
    }
}

/// Δ₁ = β² (add_remove) or 2β² (replace_one), the L1 sensitivity of the eigenvalues of XᵀX
/// (module docs); `None` for matrix datasets.
pub fn eigenvalue_sensitivity(neighbours: &Neighbours) -> Option<f64> {
    match *neighbours {
        Neighbours::AddRemove { beta, .. } => Some(beta * beta),
        Neighbours::ReplaceOne { beta, .. } => Some(2.0 * beta * beta),
        Neighbours::Entry { .. } => None,
    }
}

/// m = min(k, d − 1): the vectors that are drawn (the last one is forced when k = d).
pub fn sampled_vectors(k: usize, d: usize) -> usize {
    k.min(d.saturating_sub(1))
}

/// ε = ε₀ + m·ε_v (basic composition).
fn total_epsilon(eigenvalue_epsilon: f64, vector_epsilon: f64, m: usize) -> f64 {
    eigenvalue_epsilon + m as f64 * vector_epsilon
}

/// (ε₀, ε_v) = (share·ε, (1 − share)·ε/m) with ε = sqrt(2ρ), nudged down until the pure-DP
/// charge (ε₀ + m·ε_v)²/2 is at most ρ in floating point too.
fn calibrate(rho: f64, share: f64, m: usize) -> (f64, f64) {
    let epsilon = (2.0 * rho).sqrt();
    let mut eigenvalue_epsilon = share * epsilon;
    let mut vector_epsilon = if m == 0 {
        0.0
    } else {
        (1.0 - share) * epsilon / m as f64
    };
    while Cost::pure(total_epsilon(eigenvalue_epsilon, vector_epsilon, m)).rho > rho {
        eigenvalue_epsilon = eigenvalue_epsilon.next_down().max(0.0);
        vector_epsilon = vector_epsilon.next_down().max(0.0);
    }
    (eigenvalue_epsilon, vector_epsilon)
}

/// Steps 2.b–2.c: from û (unit, in the current q-dimensional coordinates), the next frame
/// P_{i+1} = (P_i·H)[:, 1..] and C_{i+1} = (H·C_i·H)[1.., 1..], where H = I − τvvᵀ,
/// v = û + sign(û₀)e₀, τ = 2/‖v‖², is the Householder reflector with H·û = ∓e₀: its last q − 1
/// columns are an orthonormal basis of û^⊥. HCH = C − vwᵀ − wvᵀ with p = Cv and
/// w = τp − (τ²/2)(vᵀp)v, so the update costs O(q²) (and O(dq) for the frame).
fn deflate(frame: &Matrix, scores: &Matrix, u: &Vector) -> (Matrix, Matrix) {
    let q = u.len();
    let mut v = u.clone();
    v[0] += if u[0] >= 0.0 { 1.0 } else { -1.0 };
    let tau = 2.0 / v.norm_squared();
    let p = scores * &v;
    let w = &p * tau - &v * (0.5 * tau * tau * v.dot(&p));
    let reflected = scores - &v * w.transpose() - &w * v.transpose();
    let fv = frame * &v;
    let frame_h = frame - (fv * tau) * v.transpose();
    (
        frame_h.columns(1, q - 1).into_owned(),
        reflected.view((1, 1), (q - 1, q - 1)).into_owned(),
    )
}

fn eig_failed() -> RunError {
    RunError::Failed("the eigendecomposition did not converge".into())
}

impl Algorithm for EigenSampling {
    type Params = EigenSamplingParams;
    type Config = EigenSamplingConfig;

    fn info(&self) -> AlgorithmInfo {
        AlgorithmInfo {
            name: "eigen_sampling",
            summary: "Iterative eigenvector sampling, the PCA of OpenDP and diffprivlib: Laplace eigenvalues, then each eigenvector by the exponential mechanism (a Bingham distribution, sampled exactly) on the complement of the earlier ones. Pure ε-DP.",
            source: "Amin, Dick, Kulesza, Muñoz Medina & Vassilvitskii 2019, Alg. 1 and 2; Bingham sampler with the angular central Gaussian envelope of Kent, Ganeiber & Mardia 2018",
            kinds: vec![Kind::Records],
            relations: vec![Relation::ReplaceOne, Relation::AddRemove],
            params: vec![
                ParamInfo::rank(),
                ParamInfo {
                    name: "eigenvalue_share",
                    json_type: "number",
                    description: "Share of ε spent on the Laplace estimates of the top-k eigenvalues (0 ≤ share < 1; 0 releases none). The rest is split evenly over the min(k, d − 1) eigenvector draws.",
                    default: Some(json!(DEFAULT_EIGENVALUE_SHARE)),
                    required: false,
                    minimum: Some(0.0),
                    allowed: None,
                },
            ],
            privacy: "Pure ε-DP with ε = sqrt(2ρ), charged ρ = ε²/2: Laplace on the top-k eigenvalues (L1 sensitivity β² add_remove, 2β² replace_one) with share·ε, then min(k, d − 1) exponential-mechanism draws (score sensitivity β²) sharing the rest.",
            public_only: false,
            scope_reason: Some(
                "records only: the Laplace eigenvalues and the exponential mechanism's score uᵀCu are calibrated to one clipped row's xxᵀ (Amin et al. 2019); the paper and the spec give no matrix calibration.",
            ),
        }
    }

    fn configure(
        &self,
        params: EigenSamplingParams,
        ctx: &DataContext,
        target: &PrivacyTarget,
    ) -> Result<EigenSamplingConfig, ConfigError> {
        if ctx.kind() != Kind::Records {
            return Err(ConfigError::Unsupported(
                "algorithm `eigen_sampling` needs a records dataset (relation replace_one or add_remove)"
                    .into(),
            ));
        }
        check_bounds(&ctx.neighbours)?;
        let rho = target_rho(target)?;
        check_k(params.k, ctx.d)?;
        let share = params.eigenvalue_share.unwrap_or(DEFAULT_EIGENVALUE_SHARE);
        // `contains` is false for NaN, so NaN is refused too.
        if !(0.0..1.0).contains(&share) {
            return Err(ConfigError::invalid(
                "params.eigenvalue_share",
                format!("must satisfy 0 ≤ eigenvalue_share < 1 (got {share})"),
            ));
        }
        let (eigenvalue_epsilon, vector_epsilon) = calibrate(rho, share, sampled_vectors(params.k, ctx.d));
        Ok(EigenSamplingConfig {
            k: params.k,
            eigenvalue_epsilon,
            vector_epsilon,
        })
    }

    /// ρ = (ε₀ + m·ε_v)²/2 with m = min(k, d − 1) (basic composition, then Bun & Steinke
    /// Prop. 1.4). Independent of the data and of the bounds.
    fn cost(&self, config: &EigenSamplingConfig, ctx: &DataContext) -> Cost {
        let m = sampled_vectors(config.k, ctx.d);
        Cost::pure(total_epsilon(config.eigenvalue_epsilon, config.vector_epsilon, m))
    }

    fn noise_scales(&self, config: &EigenSamplingConfig, ctx: &DataContext) -> Vec<NoiseScale> {
        let mut scales = Vec::new();
        let k = config.k;
        if config.eigenvalue_epsilon > 0.0
            && let Some(delta) = eigenvalue_sensitivity(&ctx.neighbours)
        {
            scales.push(NoiseScale {
                release: EIGENVALUE_RELEASE.into(),
                distribution: "laplace".into(),
                multiplier: 1.0 / config.eigenvalue_epsilon,
                sensitivity: Some(delta),
                count: k,
                description: format!(
                    "Laplace noise of scale b = Δ₁/ε₀ = {:.6e} added to each of the top {k} eigenvalues of XᵀX (ε₀ = {:.6e}).",
                    delta / config.eigenvalue_epsilon,
                    config.eigenvalue_epsilon
                ),
            });
        }
        let m = sampled_vectors(k, ctx.d);
        if m > 0
            && let Some(delta) = score_sensitivity(&ctx.neighbours)
        {
            scales.push(NoiseScale {
                release: EIGENVECTOR_RELEASE.into(),
                distribution: "bingham".into(),
                multiplier: 2.0 / config.vector_epsilon,
                sensitivity: Some(delta),
                count: m,
                description: format!(
                    "Each of {m} eigenvectors drawn by the exponential mechanism on the unit sphere orthogonal to the earlier ones: density ∝ exp(uᵀC_iu/(multiplier·Δ)) = exp(ε_v·uᵀC_iu/(2Δ)) with ε_v = {:.6e}, a Bingham distribution sampled exactly.",
                    config.vector_epsilon
                ),
            });
        }
        scales
    }

    /// Runs Alg. 1. The eigenvalue noise goes through `env.laplace_vector_noise` under
    /// [`EIGENVALUE_RELEASE`], then each vector through `env.bingham_noise` under
    /// [`EIGENVECTOR_RELEASE`]; nothing else is random.
    fn run(
        &self,
        input: DataInput<'_>,
        config: &EigenSamplingConfig,
        ctx: &DataContext,
        env: &mut RunEnv<'_>,
    ) -> Result<Output, RunError> {
        let d = ctx.d;
        let k = config.k;
        let m = sampled_vectors(k, d);
        let unfit = || RunError::Failed("the stored configuration does not fit the dataset".into());
        let (Some(delta), Some(delta_values)) = (
            score_sensitivity(&ctx.neighbours),
            eigenvalue_sensitivity(&ctx.neighbours),
        ) else {
            return Err(unfit());
        };
        let e0 = config.eigenvalue_epsilon;
        let ev = config.vector_epsilon;
        let valid = k >= 1
            && k <= d
            && e0 >= 0.0
            && e0.is_finite()
            && (m == 0 || (ev > 0.0 && ev.is_finite()))
            && delta > 0.0
            && delta.is_finite();
        if !valid {
            return Err(unfit());
        }
        let xt = match (input, ctx.kind()) {
            (DataInput::Records { xt }, Kind::Records) if xt.nrows() == d => xt,
            _ => {
                return Err(RunError::Failed(
                    "the data does not match the dataset's kind or dimension".into(),
                ));
            }
        };
        let gram = gram_t(xt);
        if !gram.iter().all(|v| v.is_finite()) {
            return Err(RunError::Failed("numerical overflow in the Gram matrix".into()));
        }
        let first = try_sym_eig(&gram).map_err(|_| eig_failed())?;

        // Step 1.iii: λ̂_j = λ_j + Lap(Δ₁/ε₀), then clamp at 0 and sort (post-processing).
        let eigenvalues = if e0 > 0.0 {
            let noise = env.laplace_vector_noise(EIGENVALUE_RELEASE, k, delta_values / e0);
            let mut values: Vec<f64> = first
                .values
                .iter()
                .zip(noise)
                .map(|(l, z)| (l + z).max(0.0))
                .collect();
            values.sort_by(|a, b| b.total_cmp(a));
            Some(values)
        } else {
            None
        };

        // Step 2: exponential mechanism exp(ε_v·uᵀC_iu/(2Δ)) on each remaining sphere.
        let concentration = ev / (2.0 * delta);
        let mut basis = Matrix::zeros(d, k);
        let mut frame = Matrix::identity(d, d);
        let mut scores = gram;
        let mut eig = Some(first);
        for i in 0..k {
            let u = if d - i == 1 {
                Vector::from_element(1, 1.0)
            } else {
                let e = match eig.take() {
                    Some(e) => e,
                    None => try_sym_eig(&scores).map_err(|_| eig_failed())?,
                };
                let draw = env
                    .bingham_noise(EIGENVECTOR_RELEASE, e.values.as_slice(), concentration)
                    .map_err(|err| RunError::Failed(format!("the eigenvector sampler failed: {err}")))?;
                &e.vectors * Vector::from_vec(draw.direction)
            };
            basis.set_column(i, &(&frame * &u));
            if i + 1 < k {
                (frame, scores) = deflate(&frame, &scores, &u);
            }
            env.progress(i as u32 + 1, k as u32)?;
        }
        fix_signs(&mut basis);
        Ok(Output { basis, eigenvalues })
    }
}

#[cfg(test)]
#[path = "eigen_sampling_tests.rs"]
mod tests;
