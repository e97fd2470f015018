//! `eigen_sampling`: iterative eigenvector sampling (Amin, Dick, Kulesza, Muñoz Medina &
//! Vassilvitskii, "Differentially Private Covariance Estimation", NeurIPS 2019, Alg. 1 with the
//! Bingham sampler of their Alg. 2), the PCA that OpenDP and IBM diffprivlib ship. The paper is
//! not in ../shared/papers; steps are numbered as in Alg. 1 (the numbering OpenDP cites).
//!
//! On records X (rows clipped to ‖x‖₂ ≤ β), with C = XᵀX, ε₀ for the eigenvalues and ε_v for
//! each of the m eigenvector draws:
//! 1. (Alg. 1 step 1.iii) λ̂_j = λ_j(C) + Lap(Δ₁/ε₀) for the top k eigenvalues; released after
//!    post-processing (clamped at 0, C being PSD, and sorted decreasing). Skipped when ε₀ = 0.
//! 2. P₁ = I_d, C₁ = C. For i = 1..k, on the sphere S^{q−1} of the current q = d − i + 1
//!    dimensional subspace:
//!    (step 2.a) draw û_i with density ∝ exp(t·ûᵀC_iû), t = ε_v/Δ (add_remove) or ε_v/(2Δ)
//!    (replace_one) (the exponential mechanism with score uᵀC_iu; a Bingham distribution,
//!    sampled exactly by [`super::bingham`] in the eigenbasis of C_i) and output v̂_i = P_i û_i;
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
//!   relations.
//!
//! Concentration of the exponential mechanism (docs/design/algorithms.md, "Decisions after the first
//! implementation"). The privacy loss of a draw u between neighbours is
//! t·(score(u) − score'(u)) + ln(Z'/Z), so the mechanism is ε_v-DP, and moreover has ε_v-bounded
//! range, when t times the *range* of score − score' over u is at most ε_v (Durfee & Rogers
//! 2019, Def. 2.1; Cesar & Rogers 2021):
//! - add_remove: score' − score = ±(wᵀx)² has one sign for every u (the score is monotone:
//!   adding a row never lowers it), so it ranges over an interval of width Δ = β²: t = ε_v/Δ;
//! - replace_one: (wᵀx)² − (wᵀy)² ranges over [−β², β²], width 2Δ: t = ε_v/(2Δ) (the paper's
//!   exp(ε·score/2) with β = 1; OpenDP charges replace_one as two add/remove changes instead,
//!   and so uses half this concentration).
//!
//! Cost (docs/design/privacy.md §2). The Laplace release is ε₀-DP, hence (ε₀²/2)-zCDP (Bun & Steinke 2016
//! Prop. 1.4); each ε_v-bounded-range draw is (ε_v²/8)-zCDP (Cesar & Rogers 2021, Lemma 3.2 /
//! Thm 3.1 of Durfee & Rogers' bounded range); adaptive composition adds the ρ's:
//! ρ = ε₀²/2 + m·ε_v²/8. Given ρ_job and `eigenvalue_share` s (default 1/2, OpenDP's even split
//! between eigenvalues and eigenvectors, the vectors' half split evenly), now a share of ρ:
//! ρ₀ = s·ρ_job, ε₀ = sqrt(2ρ₀), and each draw ε_v = sqrt(8(1 − s)ρ_job/m); both nudged down
//! so the cost never exceeds ρ_job. When d = 1 no vector is drawn and only ε₀ is spent (and
//! charged). Compared with the earlier pure-DP charge (ε₀ + m·ε_v)²/2 with ε split by s, each
//! draw gets 2·sqrt(m/(1 − s)) times the ε at the same ρ: at s = 1/2 and m = 3,
//! ε_v = 2·sqrt(ρ/3) instead of sqrt(2ρ)/6, about 4.9 times larger.
//!
//! Cost of a run: the Gram matrix O(nd²), then one symmetric eigendecomposition per drawn
//! vector (O(q³)); each Bingham proposal is O(q) and the sampler's acceptance rate stays
//! bounded as the signal grows (see [`super::bingham`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::calibration::check_opening;
use super::{
    Algorithm, AlgorithmInfo, ConfigError, DataInput, NoiseScale, Output, Run, RunError, catalog, ensure_fits,
};
use crate::dataset::{DataContext, Kind, Neighbours};
use crate::linalg::{Matrix, Vector, fix_signs, gram_t, try_sym_eig};
use crate::privacy::{Cost, PrivacyTarget};

/// Audit label of the Laplace eigenvalue release.
pub const EIGENVALUE_RELEASE: &str = "eigenvalues";
/// Audit label of each exponential-mechanism eigenvector draw.
pub const EIGENVECTOR_RELEASE: &str = "eigenvector";
/// Default share of ρ spent on the eigenvalues (OpenDP's even split).
pub const DEFAULT_EIGENVALUE_SHARE: f64 = 0.5;

/// Iterative eigenvector sampling (Amin et al. 2019).
#[derive(Debug, Clone, Copy, Default)]
pub struct EigenSampling;

/// What the client sends.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EigenSamplingParams {
    /// Target rank: number of principal components returned (1 ≤ k ≤ d).
    #[schemars(range(min = 1))]
    pub k: usize,
    /// Share of ρ spent on the Laplace estimates of the top-k eigenvalues (0 ≤ share < 1; 0
    /// releases none). The rest is split evenly over the min(k, d − 1) eigenvector draws.
    #[serde(default)]
    #[schemars(extend("default" = DEFAULT_EIGENVALUE_SHARE, "minimum" = 0, "exclusiveMaximum" = 1))]
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

/// The concentration t of the exponential mechanism exp(t·uᵀC_iu): ε_v/Δ under add_remove
/// (monotone score), ε_v/(2Δ) under replace_one (module docs, "Concentration"); `None` for
/// matrix datasets.
pub fn concentration(neighbours: &Neighbours, vector_epsilon: f64) -> Option<f64> {
    let delta = score_sensitivity(neighbours)?;
    Some(match neighbours {
        Neighbours::AddRemove { .. } => vector_epsilon / delta,
        _ => vector_epsilon / (2.0 * delta),
    })
}

/// ρ = ε₀²/2 + m·ε_v²/8: the Laplace release (pure ε₀-DP, Bun & Steinke 2016 Prop. 1.4) then
/// m exponential-mechanism draws of ε_v-bounded range (Cesar & Rogers 2021), composed by
/// adding ρ's (docs/design/privacy.md §2). When m = 0 no draw is made and ε_v is not charged.
fn total_cost(eigenvalue_epsilon: f64, vector_epsilon: f64, m: usize) -> Cost {
    let draws = (0..m).map(|_| Cost::exponential_mechanism(vector_epsilon));
    Cost::pure(eigenvalue_epsilon).then(Cost::sum(draws))
}

/// (ε₀, ε_v) = (sqrt(2·share·ρ), sqrt(8(1 − share)ρ/m)), so that ε₀²/2 = share·ρ and
/// m·ε_v²/8 = (1 − share)·ρ; both nudged down until [`total_cost`] is at most ρ in floating
/// point too.
fn calibrate(rho: f64, share: f64, m: usize) -> (f64, f64) {
    let mut eigenvalue_epsilon = (2.0 * share * rho).sqrt();
    let mut vector_epsilon = if m == 0 {
        0.0
    } else {
        (8.0 * (1.0 - share) * rho / m as f64).sqrt()
    };
    while total_cost(eigenvalue_epsilon, vector_epsilon, m).rho > rho {
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
    const INFO: &'static AlgorithmInfo = &catalog::EIGEN_SAMPLING;
    type Params = EigenSamplingParams;
    type Config = EigenSamplingConfig;

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
        let rho = check_opening(ctx, target, params.k)?;
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

    /// ρ = ε₀²/2 + m·ε_v²/8 with m = min(k, d − 1) (`total_cost`; module docs, "Cost").
    /// Independent of the data and of the bounds. No part is Gaussian.
    fn cost(&self, config: &EigenSamplingConfig, ctx: &DataContext) -> Cost {
        let m = sampled_vectors(config.k, ctx.d);
        total_cost(config.eigenvalue_epsilon, config.vector_epsilon, m)
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
            && let (Some(delta), Some(t)) = (
                score_sensitivity(&ctx.neighbours),
                concentration(&ctx.neighbours, config.vector_epsilon),
            )
        {
            scales.push(NoiseScale {
                release: EIGENVECTOR_RELEASE.into(),
                distribution: "bingham".into(),
                multiplier: 1.0 / (t * delta),
                sensitivity: Some(delta),
                count: m,
                description: format!(
                    "Each of {m} eigenvectors drawn by the exponential mechanism on the unit sphere orthogonal to the earlier ones: density ∝ exp(uᵀC_iu/(multiplier·Δ)) = exp(t·uᵀC_iu) with t = {t:.6e} (ε_v/Δ under add_remove, ε_v/(2Δ) under replace_one; ε_v = {:.6e}), a Bingham distribution sampled exactly.",
                    config.vector_epsilon
                ),
            });
        }
        scales
    }

    /// Runs Alg. 1. The eigenvalue noise goes through `env.laplace_vector_release` under
    /// [`EIGENVALUE_RELEASE`], then each vector through `env.bingham_noise` under
    /// [`EIGENVECTOR_RELEASE`]; nothing else is random.
    fn run(&self, config: &EigenSamplingConfig, run: Run<'_, '_>) -> Result<Output, RunError> {
        let Run { input, ctx, env } = run;
        let d = ctx.d;
        let k = config.k;
        let m = sampled_vectors(k, d);
        let e0 = config.eigenvalue_epsilon;
        let ev = config.vector_epsilon;
        let (Some(delta), Some(delta_values), Some(concentration)) = (
            score_sensitivity(&ctx.neighbours),
            eigenvalue_sensitivity(&ctx.neighbours),
            concentration(&ctx.neighbours, ev),
        ) else {
            return Err(RunError::unfit());
        };
        let valid = k >= 1
            && k <= d
            && e0 >= 0.0
            && e0.is_finite()
            && (m == 0 || (ev > 0.0 && ev.is_finite()))
            && delta > 0.0
            && delta.is_finite();
        ensure_fits(valid)?;
        let xt = match (input, ctx.kind()) {
            (DataInput::Records { xt }, Kind::Records) if xt.nrows() == d => xt,
            _ => return Err(RunError::mismatched_data()),
        };
        let gram = gram_t(xt);
        if !gram.iter().all(|v| v.is_finite()) {
            return Err(RunError::Failed("numerical overflow in the Gram matrix".into()));
        }
        let first = try_sym_eig(&gram).map_err(|_| eig_failed())?;

        // Step 1.iii: λ̂_j = λ_j + Lap(Δ₁/ε₀), then clamp at 0 and sort (post-processing).
        let eigenvalues = if e0 > 0.0 {
            let exact: Vec<f64> = first.values.iter().take(k).copied().collect();
            let released =
                env.laplace_vector_release(EIGENVALUE_RELEASE, exact, delta_values, delta_values / e0)?;
            let mut values: Vec<f64> = released.into_iter().map(|l| l.max(0.0)).collect();
            values.sort_by(|a, b| b.total_cmp(a));
            Some(values)
        } else {
            None
        };

        // Step 2: exponential mechanism exp(t·uᵀC_iu) on each remaining sphere, t = ε_v/Δ
        // (add_remove) or ε_v/(2Δ) (replace_one).
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
