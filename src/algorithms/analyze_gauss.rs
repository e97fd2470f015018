//! `analyze_gauss`: input perturbation, "Analyze Gauss" / DP-Gauss-1 (Dwork, Talwar, Thakurta
//! & Zhang 2014, Alg. 1; seed 004 App. G).
//!
//! Â = A + E with E symmetric, its upper triangle (diagonal included) iid N(0, σ²); the output
//! is the top-k eigenvectors of Â (largest eigenvalues first) and those eigenvalues, all
//! post-processing of the single release Â.
//!
//! Privacy. The release is the upper triangle of A plus iid Gaussian noise, a Gaussian mechanism
//! whose L2 sensitivity is at most ‖A' − A‖_F = ‖C‖_F:
//! - records `add_remove`: C = xxᵀ, ‖C‖_F = ‖x‖₂² ≤ β²;
//! - records `replace_one`: C = xxᵀ − yyᵀ, ‖C‖_F² = ‖x‖⁴ + ‖y‖⁴ − 2(xᵀy)² ≤ 2β⁴, so Δ = √2·β²;
//! - matrix: ‖C‖_F ≤ sqrt(Σ_i ‖C_i:‖₁²) ≤ u (Nicolas et al. eq. 12, as ‖·‖₂ ≤ ‖·‖₁ per row).
//!
//! Cost ρ = Δ²/(2σ²) (Bun & Steinke 2016 Prop. 1.6); given ρ_job, σ = Δ/sqrt(2ρ_job).

use serde::{Deserialize, Serialize};

use super::noisy_power::{check_k, target_rho};
use super::sensitivity::check_bounds;
use super::{
    Algorithm, AlgorithmInfo, ConfigError, DataInput, NoiseScale, Output, ParamInfo, RunEnv, RunError,
};
use crate::dataset::{DataContext, Kind, Neighbours, Relation};
use crate::linalg::{fix_signs, gram_t, try_sym_eig};
use crate::privacy::{Cost, PrivacyTarget};

/// Audit label of the perturbation.
pub const RELEASE: &str = "symmetric_perturbation";

/// Input perturbation of the Gram / data matrix.
#[derive(Debug, Clone, Copy, Default)]
pub struct AnalyzeGauss;

/// What the client sends.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnalyzeGaussParams {
    /// Target rank k, 1 ≤ k ≤ d.
    pub k: usize,
}

/// Every parameter fixed and the noise calibrated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnalyzeGaussConfig {
    pub k: usize,
    /// σ, the standard deviation of each independent entry of E.
    pub noise_sd: f64,
}

/// Δ = β² (add_remove), √2·β² (replace_one), u (matrix): the L2 sensitivity of A's upper
/// triangle (module docs).
pub fn sensitivity(neighbours: &Neighbours) -> f64 {
    match *neighbours {
        Neighbours::AddRemove { beta, .. } => beta * beta,
        Neighbours::ReplaceOne { beta, .. } => std::f64::consts::SQRT_2 * beta * beta,
        Neighbours::Entry { u } => u,
    }
}

/// ρ = Δ²/(2σ²) (Bun & Steinke 2016 Prop. 1.6).
fn cost_of(delta: f64, sd: f64) -> f64 {
    // (Δ/σ)² rather than Δ²/σ², so that neither square can overflow or underflow alone.
    let ratio = delta / sd;
    ratio * ratio / 2.0
}

/// σ = Δ/sqrt(2ρ), rounded up (never down) so that `cost_of(Δ, σ) ≤ ρ` in floating point too.
fn calibrate(delta: f64, rho: f64) -> f64 {
    let mut sd = delta / (2.0 * rho).sqrt();
    while cost_of(delta, sd) > rho {
        sd = sd.next_up();
    }
    sd
}

impl Algorithm for AnalyzeGauss {
    type Params = AnalyzeGaussParams;
    type Config = AnalyzeGaussConfig;

    fn info(&self) -> AlgorithmInfo {
        AlgorithmInfo {
            name: "analyze_gauss",
            summary: "Input perturbation: add a symmetric Gaussian matrix to A once, return the top-k eigenvectors of the noisy matrix.",
            source: "Dwork, Talwar, Thakurta & Zhang 2014 (Analyze Gauss, DP-Gauss-1); seed 004 App. G",
            kinds: vec![Kind::Records, Kind::Matrix],
            relations: vec![Relation::ReplaceOne, Relation::AddRemove, Relation::Entry],
            params: vec![ParamInfo::rank()],
            privacy: "ρ-zCDP with ρ = Δ²/(2σ²): one Gaussian mechanism on the upper triangle of A, Δ = β² (add_remove), √2·β² (replace_one) or u (matrix).",
            public_only: false,
            scope_reason: None,
        }
    }

    fn configure(
        &self,
        params: AnalyzeGaussParams,
        ctx: &DataContext,
        target: &PrivacyTarget,
    ) -> Result<AnalyzeGaussConfig, ConfigError> {
        check_bounds(&ctx.neighbours)?;
        let rho = target_rho(target)?;
        check_k(params.k, ctx.d)?;
        let noise_sd = calibrate(sensitivity(&ctx.neighbours), rho);
        if !noise_sd.is_finite() {
            return Err(ConfigError::invalid(
                "rho",
                "is too small to calibrate noise in floating point",
            ));
        }
        Ok(AnalyzeGaussConfig {
            k: params.k,
            noise_sd,
        })
    }

    /// ρ = Δ²/(2σ²) with Δ from the dataset's public bounds.
    fn cost(&self, config: &AnalyzeGaussConfig, ctx: &DataContext) -> Cost {
        Cost::zcdp(cost_of(sensitivity(&ctx.neighbours), config.noise_sd))
    }

    fn noise_scales(&self, config: &AnalyzeGaussConfig, ctx: &DataContext) -> Vec<NoiseScale> {
        let delta = sensitivity(&ctx.neighbours);
        let d = ctx.d;
        vec![NoiseScale {
            release: RELEASE.into(),
            distribution: "gaussian".into(),
            multiplier: config.noise_sd / delta,
            sensitivity: Some(delta),
            count: 1,
            description: format!(
                "One symmetric Gaussian matrix added to A: {} independent entries (upper triangle) of sd {:.6e}.",
                d * (d + 1) / 2,
                config.noise_sd
            ),
        }]
    }

    /// Draws E through `env.gaussian_symmetric_noise` under the label [`RELEASE`].
    fn run(
        &self,
        input: DataInput<'_>,
        config: &AnalyzeGaussConfig,
        ctx: &DataContext,
        env: &mut RunEnv<'_>,
    ) -> Result<Output, RunError> {
        let d = ctx.d;
        let k = config.k;
        if !(k >= 1 && k <= d && config.noise_sd > 0.0 && config.noise_sd.is_finite()) {
            return Err(RunError::Failed(
                "the stored configuration does not fit the dataset".into(),
            ));
        }
        let a = match (input, ctx.kind()) {
            (DataInput::Records { xt }, Kind::Records) if xt.nrows() == d => gram_t(xt),
            (DataInput::Matrix { a }, Kind::Matrix) if a.nrows() == d && a.ncols() == d => a.clone(),
            _ => {
                return Err(RunError::Failed(
                    "the data does not match the dataset's kind or dimension".into(),
                ));
            }
        };
        // Â = A + E (DP-Gauss-1); only the upper triangle of A enters, mirrored with E's.
        let mut noisy = env.gaussian_symmetric_noise(RELEASE, d, config.noise_sd);
        for j in 0..d {
            for i in 0..=j {
                noisy[(i, j)] += a[(i, j)];
                if i != j {
                    noisy[(j, i)] = noisy[(i, j)];
                }
            }
        }
        if !noisy.iter().all(|v| v.is_finite()) {
            return Err(RunError::Failed(
                "numerical overflow in the perturbed matrix".into(),
            ));
        }
        // sym_eig sorts by decreasing eigenvalue (nalgebra's own order is unsorted).
        let eig = try_sym_eig(&noisy)
            .map_err(|_| RunError::Failed("the eigendecomposition did not converge".into()))?;
        let mut basis = eig.vectors.columns(0, k).into_owned();
        fix_signs(&mut basis);
        Ok(Output {
            basis,
            eigenvalues: Some(eig.values.iter().take(k).copied().collect()),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::algorithms::DynAlgorithm;
    use crate::algorithms::noisy_power::tests::{
        assert_basis_contract, ctx, exact_top, invalid_field, rejected, run_audited, spiked_matrix,
        spiked_records, target,
    };
    use crate::linalg::subspace::sin_theta;
    use crate::linalg::{Matrix, sym_eig};
    use crate::privacy::testing::check_gaussian_scale;

    const AR: Neighbours = Neighbours::AddRemove {
        beta: 2.0,
        alpha: 6.0,
    };
    const RO: Neighbours = Neighbours::ReplaceOne {
        beta: 2.0,
        alpha: 6.0,
    };
    const EN: Neighbours = Neighbours::Entry { u: 3.0 };

    #[test]
    fn cost_is_delta_squared_over_two_sigma_squared() {
        let cfg = |noise_sd| AnalyzeGaussConfig { k: 1, noise_sd };
        // add_remove, β = 2: Δ = 4, σ = 1 → 16/2 = 8.
        assert_eq!(AnalyzeGauss.cost(&cfg(1.0), &ctx(5, None, AR)), Cost::zcdp(8.0));
        // replace_one, β = 1: Δ = √2, σ = 0.5 → 2/(2·0.25) = 4.
        let ro = ctx(
            5,
            None,
            Neighbours::ReplaceOne {
                beta: 1.0,
                alpha: 2.0,
            },
        );
        assert!((AnalyzeGauss.cost(&cfg(0.5), &ro).rho - 4.0).abs() < 1e-14);
        // matrix, u = 3: Δ = 3, σ = 3 → 9/18 = 0.5.
        assert_eq!(AnalyzeGauss.cost(&cfg(3.0), &ctx(5, None, EN)), Cost::zcdp(0.5));
    }

    #[test]
    fn configure_then_cost_returns_the_target() {
        for neighbours in [AR, RO, EN] {
            let c = ctx(10, None, neighbours);
            for rho in [1e-8, 1e-3, 0.1, 1.0, 3.7, 1e6] {
                let config = AnalyzeGauss
                    .configure(AnalyzeGaussParams { k: 2 }, &c, &target(rho))
                    .expect("valid");
                let cost = AnalyzeGauss.cost(&config, &c);
                assert!(
                    cost.rho <= rho && (rho - cost.rho) / rho <= 1e-12,
                    "{} vs {rho}",
                    cost.rho
                );
                let sd = sensitivity(&neighbours) / (2.0 * rho).sqrt();
                assert!((config.noise_sd - sd).abs() / sd <= 1e-12);
            }
        }
    }

    #[test]
    fn invalid_parameters_name_their_field() {
        let c = ctx(6, None, AR);
        for (params, field) in [
            (json!({"k": 0}), "params.k"),
            (json!({"k": 7}), "params.k"),
            (json!({"k": "two"}), "params.k"),
            (json!({"k": -2}), "params.k"),
        ] {
            let e = rejected(&AnalyzeGauss, params.clone(), &c, 1.0);
            assert_eq!(invalid_field(&e), field, "{params}: {e}");
        }
        for (params, needle) in [(json!({}), "`k`"), (json!({"k": 2, "p": 4}), "`p`")] {
            let e = rejected(&AnalyzeGauss, params.clone(), &c, 1.0);
            assert!(
                invalid_field(&e).starts_with("params") && e.to_string().contains(needle),
                "{params}: {e}"
            );
        }
        assert_eq!(
            invalid_field(&rejected(&AnalyzeGauss, json!({"k": 2}), &c, f64::NAN)),
            "rho"
        );
        let bad = ctx(6, None, Neighbours::Entry { u: 0.0 });
        assert_eq!(
            invalid_field(&rejected(&AnalyzeGauss, json!({"k": 2}), &bad, 1.0)),
            "bounds.entry_bound"
        );
    }

    /// analyze_gauss supports every kind and relation, so `prepare` never answers `Unsupported`.
    #[test]
    fn every_kind_and_relation_is_supported() {
        for neighbours in [AR, RO, EN] {
            let prepared = AnalyzeGauss.prepare(json!({"k": 2}), &ctx(4, None, neighbours), &target(0.5));
            let prepared = prepared.expect("supported");
            assert!((prepared.cost.rho - 0.5).abs() <= 1e-12);
            let noise = &prepared.noise[0];
            assert_eq!(
                (noise.count, noise.sensitivity),
                (1, Some(sensitivity(&neighbours)))
            );
            assert!(
                (noise.multiplier - 1.0).abs() < 1e-12,
                "σ/Δ = 1/sqrt(2ρ) = 1 at ρ = 0.5"
            );
        }
    }

    #[test]
    fn output_is_orthonormal_sorted_and_converges() {
        let (d, n, k) = (20, 200, 3);
        let xt = spiked_records(31, d, n, &[9.0, 6.0, 4.0], 0.3, 4.0);
        let gram = gram_t(&xt);
        let a = spiked_matrix(32, d, &[50.0, 30.0, 20.0], 0.2);
        for (neighbours, input, exact) in [
            (AR, DataInput::Records { xt: &xt }, &gram),
            (RO, DataInput::Records { xt: &xt }, &gram),
            (EN, DataInput::Matrix { a: &a }, &a),
        ] {
            let c = ctx(d, Some(n), neighbours);
            let mut errors = Vec::new();
            for rho in [1e-3, 1e-1, 10.0, 1e3, 1e12] {
                let config = AnalyzeGauss
                    .configure(AnalyzeGaussParams { k }, &c, &target(rho))
                    .expect("valid");
                let (out, _) = run_audited(&AnalyzeGauss, input, &config, &c, 33);
                let out = out.expect("run");
                assert_basis_contract(&out.basis, d, k);
                let values = out.eigenvalues.expect("released");
                assert!(values.windows(2).all(|w| w[0] >= w[1]), "{values:?}");
                errors.push(sin_theta(&out.basis, &exact_top(exact, k)));
            }
            assert!(
                errors.windows(2).all(|w| w[1] < w[0]),
                "{neighbours:?}: errors {errors:?}"
            );
            assert!(
                errors[0] > 0.5 && errors[4] < 1e-3,
                "{neighbours:?}: errors {errors:?}"
            );
        }
    }

    /// Audits the noise against σ = Δ/sqrt(2ρ) computed here from the spec (Δ = β², √2β², u),
    /// and checks that the output is exactly the eigen-decomposition of A + E for the audited E.
    fn audit_noise(neighbours: Neighbours, factor: f64) -> Result<(), String> {
        let (d, n, k, rho) = (80, 150, 4, 0.3_f64);
        let xt = spiked_records(41, d, n, &[6.0, 4.0], 0.3, 2.0);
        let a = spiked_matrix(42, d, &[40.0, 30.0], 0.3);
        let (input, dense) = match neighbours {
            Neighbours::Entry { .. } => (DataInput::Matrix { a: &a }, a.clone()),
            _ => (DataInput::Records { xt: &xt }, gram_t(&xt)),
        };
        let spec_delta = match neighbours {
            Neighbours::AddRemove { beta, .. } => beta * beta,
            Neighbours::ReplaceOne { beta, .. } => 2.0_f64.sqrt() * beta * beta,
            Neighbours::Entry { u } => u,
        };
        let spec_sd = spec_delta / (2.0 * rho).sqrt();
        let c = ctx(d, None, neighbours);
        let mut config = AnalyzeGauss
            .configure(AnalyzeGaussParams { k }, &c, &target(rho))
            .expect("valid");
        config.noise_sd *= factor;
        let (out, audit) = run_audited(&AnalyzeGauss, input, &config, &c, 43);
        let out = out.expect("run");
        assert_eq!(audit.draws.len(), 1);
        let draw = &audit.draws[0];
        assert_eq!(
            (draw.label, draw.distribution, draw.values.len()),
            (RELEASE, "gaussian", d * (d + 1) / 2)
        );
        // Rebuild E from the audited upper triangle (column by column) and redo the maths.
        let mut e = Matrix::zeros(d, d);
        let mut values = draw.values.iter();
        for j in 0..d {
            for i in 0..=j {
                let v = *values.next().expect("enough draws");
                e[(i, j)] = v;
                e[(j, i)] = v;
            }
        }
        let eig = sym_eig(&(dense + e));
        assert!(sin_theta(&out.basis, &eig.vectors.columns(0, k).into_owned()) < 1e-8);
        for (got, want) in out.eigenvalues.expect("released").iter().zip(eig.values.iter()) {
            assert!((got - want).abs() <= 1e-9 * want.abs().max(1.0));
        }
        if factor == 1.0 {
            assert!(
                (draw.scale - spec_sd).abs() / spec_sd < 1e-12,
                "recorded sd {} vs spec {spec_sd}",
                draw.scale
            );
        }
        check_gaussian_scale(&draw.values, spec_sd)
    }

    #[test]
    fn noise_matches_spec() {
        for neighbours in [AR, RO, EN] {
            let result = audit_noise(neighbours, 1.0);
            assert!(result.is_ok(), "{neighbours:?}: {result:?}");
        }
    }

    /// The same check catches a mechanism that adds 10 % too little noise.
    #[test]
    fn under_noised_run_fails_the_audit() {
        for neighbours in [AR, RO, EN] {
            assert!(
                audit_noise(neighbours, 0.9).is_err(),
                "{neighbours:?}: under-noising went unnoticed"
            );
        }
    }

    #[test]
    fn mismatched_input_fails_cleanly() {
        let xt = spiked_records(3, 6, 20, &[4.0], 0.3, 2.0);
        let config = AnalyzeGaussConfig { k: 2, noise_sd: 1.0 };
        for c in [ctx(6, None, EN), ctx(5, None, AR)] {
            let (out, audit) = run_audited(&AnalyzeGauss, DataInput::Records { xt: &xt }, &config, &c, 1);
            assert!(matches!(out, Err(RunError::Failed(_))), "{out:?}");
            assert!(audit.draws.is_empty());
        }
        let bad = AnalyzeGaussConfig { k: 7, noise_sd: 1.0 };
        let (out, _) = run_audited(
            &AnalyzeGauss,
            DataInput::Records { xt: &xt },
            &bad,
            &ctx(6, None, AR),
            1,
        );
        assert!(matches!(out, Err(RunError::Failed(_))));
    }

    #[test]
    fn info_describes_the_algorithm() {
        let info = Algorithm::info(&AnalyzeGauss);
        assert_eq!(info.name, "analyze_gauss");
        assert!(!info.public_only && info.source.contains("Dwork"));
        assert_eq!(
            info.params
                .iter()
                .map(|p| (p.name, p.required))
                .collect::<Vec<_>>(),
            [("k", true)]
        );
    }
}
