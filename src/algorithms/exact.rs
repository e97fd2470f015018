//! `exact`: non-private PCA, for `public: true` datasets only (algorithms.md, `exact`).
//!
//! The symmetric eigendecomposition of the data matrix: for records the Gram matrix
//! A = XᵀX = Σ_i x_i x_iᵀ, or with `center` the centred Gram Σ_i (x_i − x̄)(x_i − x̄)ᵀ (n times the
//! covariance; unnormalised, like the A the private algorithms work on); for a matrix dataset
//! A itself. Returns the top-k eigenvectors (largest eigenvalues first) and the exact
//! eigenvalues, which privacy.md §3 allows on public data only. It is the ground truth of the
//! utility metrics. Costs nothing and draws no noise; refused (403) on private datasets.

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::noisy_power::check_k;
use super::{
    Algorithm, AlgorithmInfo, ConfigError, DataInput, NoiseScale, Output, ParamInfo, RunEnv, RunError,
};
use crate::dataset::{DataContext, Kind, Relation};
use crate::linalg::{Matrix, fix_signs, gram_t, try_sym_eig};
use crate::privacy::{Cost, PrivacyTarget};

/// Exact PCA (public data only).
#[derive(Debug, Clone, Copy, Default)]
pub struct Exact;

/// What the client sends.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExactParams {
    /// Target rank k, 1 ≤ k ≤ d.
    pub k: usize,
    /// Records only: subtract the column means before forming the Gram matrix.
    #[serde(default)]
    pub center: bool,
}

/// The validated parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExactConfig {
    pub k: usize,
    pub center: bool,
}

fn public_only_error() -> ConfigError {
    ConfigError::PublicOnly(
        "algorithm `exact` computes non-private results and runs only on datasets marked public".into(),
    )
}

/// xt with the mean record subtracted from every column: (X − 1x̄ᵀ)ᵀ.
fn centred(xt: &Matrix) -> Matrix {
    let n = xt.ncols() as f64;
    let mean = xt.column_sum() / n;
    let mut c = xt.clone();
    for mut col in c.column_iter_mut() {
        col -= &mean;
    }
    c
}

impl Algorithm for Exact {
    type Params = ExactParams;
    type Config = ExactConfig;

    fn info(&self) -> AlgorithmInfo {
        AlgorithmInfo {
            name: "exact",
            summary: "Exact (non-private) PCA by symmetric eigendecomposition; ground truth for utility metrics.",
            source: "Symmetric eigendecomposition of the (optionally centred) Gram matrix or of the data matrix",
            kinds: vec![Kind::Records, Kind::Matrix],
            relations: vec![Relation::ReplaceOne, Relation::AddRemove, Relation::Entry],
            params: vec![
                ParamInfo::rank(),
                ParamInfo {
                    name: "center",
                    json_type: "boolean",
                    description: "Records only: subtract the column means before forming the Gram matrix.",
                    default: Some(json!(false)),
                    required: false,
                    minimum: None,
                    allowed: None,
                },
            ],
            privacy: "Not private: allowed only on datasets marked public; charges nothing.",
            public_only: true,
            scope_reason: None,
        }
    }

    fn configure(
        &self,
        params: ExactParams,
        ctx: &DataContext,
        _target: &PrivacyTarget,
    ) -> Result<ExactConfig, ConfigError> {
        if !ctx.public {
            return Err(public_only_error());
        }
        check_k(params.k, ctx.d)?;
        if params.center && ctx.kind() == Kind::Matrix {
            return Err(ConfigError::invalid(
                "params.center",
                "centering applies to records datasets only",
            ));
        }
        Ok(ExactConfig {
            k: params.k,
            center: params.center,
        })
    }

    /// Zero: public data carry no budget.
    fn cost(&self, _config: &ExactConfig, _ctx: &DataContext) -> Cost {
        Cost::ZERO
    }

    fn noise_scales(&self, _config: &ExactConfig, _ctx: &DataContext) -> Vec<NoiseScale> {
        Vec::new()
    }

    fn run(
        &self,
        input: DataInput<'_>,
        config: &ExactConfig,
        ctx: &DataContext,
        env: &mut RunEnv<'_>,
    ) -> Result<Output, RunError> {
        if !ctx.public {
            return Err(RunError::Failed(
                "algorithm `exact` runs only on datasets marked public".into(),
            ));
        }
        let d = ctx.d;
        if !(config.k >= 1 && config.k <= d) {
            return Err(RunError::Failed(
                "the stored configuration does not fit the dataset".into(),
            ));
        }
        let a = match (input, ctx.kind()) {
            (DataInput::Records { xt }, Kind::Records) if xt.nrows() == d => {
                if !config.center {
                    gram_t(xt)
                } else if xt.ncols() == 0 {
                    return Err(RunError::Failed("centering needs at least one record".into()));
                } else {
                    gram_t(&centred(xt))
                }
            }
            (DataInput::Matrix { a }, Kind::Matrix) if a.nrows() == d && a.ncols() == d && !config.center => {
                a.clone()
            }
            _ => {
                return Err(RunError::Failed(
                    "the data does not match the dataset's kind or dimension".into(),
                ));
            }
        };
        // sym_eig sorts by decreasing eigenvalue.
        let eig = try_sym_eig(&a).map_err(|e| RunError::Failed(format!("eigendecomposition failed: {e}")))?;
        let mut basis = eig.vectors.columns(0, config.k).into_owned();
        fix_signs(&mut basis);
        env.progress(1, 1)?;
        Ok(Output {
            basis,
            eigenvalues: Some(eig.values.iter().take(config.k).copied().collect()),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::algorithms::DynAlgorithm;
    use crate::algorithms::noisy_power::tests::{
        assert_basis_contract, invalid_field, run_audited, spiked_matrix, spiked_records, target,
    };
    use crate::dataset::Neighbours;
    use crate::linalg::subspace::sin_theta;
    use crate::linalg::{Vector, thin_svd};

    const AR: Neighbours = Neighbours::AddRemove {
        beta: 2.0,
        alpha: 6.0,
    };
    const RO: Neighbours = Neighbours::ReplaceOne {
        beta: 2.0,
        alpha: 6.0,
    };
    const EN: Neighbours = Neighbours::Entry { u: 1.0 };

    fn public(d: usize, n: Option<usize>, neighbours: Neighbours) -> DataContext {
        DataContext {
            d,
            n,
            neighbours,
            public: true,
        }
    }

    fn run(input: DataInput<'_>, config: &ExactConfig, c: &DataContext) -> Result<Output, RunError> {
        let (out, audit) = run_audited(&Exact, input, config, c, 1);
        assert!(audit.draws.is_empty(), "exact draws no noise");
        out
    }

    #[test]
    fn refuses_private_datasets() {
        for neighbours in [AR, RO, EN] {
            let private = DataContext {
                public: false,
                ..public(5, None, neighbours)
            };
            let e = Exact
                .prepare(json!({"k": 2}), &private, &target(1.0))
                .expect_err("private");
            assert!(matches!(e, ConfigError::PublicOnly(_)), "{e:?}");
            let e = Exact.configure(ExactParams { k: 2, center: false }, &private, &target(1.0));
            assert!(matches!(e, Err(ConfigError::PublicOnly(_))));
            // A configuration smuggled past `configure` still does not run on private data.
            let xt = Matrix::identity(5, 5);
            let config = ExactConfig { k: 2, center: false };
            let input = match neighbours {
                Neighbours::Entry { .. } => DataInput::Matrix { a: &xt },
                _ => DataInput::Records { xt: &xt },
            };
            assert!(matches!(run(input, &config, &private), Err(RunError::Failed(_))));
        }
        assert!(Algorithm::info(&Exact).public_only);
    }

    #[test]
    fn costs_nothing_on_public_data() {
        for neighbours in [AR, RO, EN] {
            let prepared = Exact.prepare(json!({"k": 2}), &public(5, Some(9), neighbours), &target(1.0));
            let prepared = prepared.expect("public");
            assert_eq!(prepared.cost, Cost::ZERO);
            assert!(prepared.noise.is_empty());
            assert_eq!(prepared.config, json!({"k": 2, "center": false}));
        }
    }

    #[test]
    fn invalid_parameters_name_their_field() {
        let c = public(6, Some(10), AR);
        for (params, field) in [
            (json!({"k": 0}), "params.k"),
            (json!({"k": 7}), "params.k"),
            (json!({"k": 2, "center": "yes"}), "params.center"),
            (json!({"k": 2, "center": 1}), "params.center"),
        ] {
            let e = Exact
                .prepare(params.clone(), &c, &target(1.0))
                .expect_err("invalid");
            assert_eq!(invalid_field(&e), field, "{params}: {e}");
        }
        let e = Exact
            .prepare(json!({"k": 2, "centre": true}), &c, &target(1.0))
            .expect_err("unknown field");
        assert!(
            invalid_field(&e).starts_with("params") && e.to_string().contains("`centre`"),
            "{e}"
        );
        let e = Exact
            .prepare(
                json!({"k": 2, "center": true}),
                &public(6, None, EN),
                &target(1.0),
            )
            .expect_err("matrix");
        assert_eq!(invalid_field(&e), "params.center");
    }

    /// On records the Gram eigenpairs are the squared singular values and left singular vectors
    /// of Xᵀ: an independent route (SVD of the data, not an eigensolver on XᵀX).
    #[test]
    fn matches_the_svd_of_the_records() {
        let (d, n, k) = (12, 40, 4);
        let xt = spiked_records(51, d, n, &[9.0, 5.0, 3.0, 2.0], 0.3, 4.0);
        let c = public(d, Some(n), RO);
        let out = run(
            DataInput::Records { xt: &xt },
            &ExactConfig { k, center: false },
            &c,
        )
        .expect("run");
        assert_basis_contract(&out.basis, d, k);
        let svd = thin_svd(&xt);
        let values = out.eigenvalues.expect("exact eigenvalues");
        for (i, got) in values.iter().enumerate() {
            let want = svd.s[i] * svd.s[i];
            assert!((got - want).abs() <= 1e-10 * want, "λ_{i}: {got} vs {want}");
        }
        let err = sin_theta(&out.basis, &svd.u.columns(0, k).into_owned());
        assert!(err < 1e-8, "sin θ = {err:e}");
    }

    /// On a matrix dataset each returned pair satisfies A·q = λ·q, eigenvalues decrease and, at
    /// k = d, sum to tr(A).
    #[test]
    fn matrix_eigenpairs_are_exact() {
        let d = 10;
        let a = spiked_matrix(52, d, &[7.0, -9.0, 3.0], 0.5);
        let out = run(
            DataInput::Matrix { a: &a },
            &ExactConfig { k: d, center: false },
            &public(d, None, EN),
        )
        .expect("run");
        assert_basis_contract(&out.basis, d, d);
        let values = out.eigenvalues.expect("exact eigenvalues");
        assert!(values.windows(2).all(|w| w[0] >= w[1]), "{values:?}");
        let scale = a.norm();
        for (i, lambda) in values.iter().enumerate() {
            let q = out.basis.column(i);
            assert!((&a * q - q * *lambda).norm() <= 1e-10 * scale);
        }
        assert!((values.iter().sum::<f64>() - a.trace()).abs() <= 1e-10 * scale);
    }

    #[test]
    fn centering_uses_the_mean_record() {
        let (d, n) = (6, 25);
        let xt = spiked_records(53, d, n, &[4.0, 2.0], 0.5, 3.0);
        let c = public(d, Some(n), AR);
        let config = ExactConfig { k: d, center: true };
        let out = run(DataInput::Records { xt: &xt }, &config, &c).expect("run");
        // Reference: Σ_i (x_i − x̄)(x_i − x̄)ᵀ accumulated record by record.
        let mean: Vector = xt.column_iter().fold(Vector::zeros(d), |acc, x| acc + x) / n as f64;
        let mut cov = Matrix::zeros(d, d);
        for x in xt.column_iter() {
            let r = x - &mean;
            cov += &r * r.transpose();
        }
        let values = out.eigenvalues.expect("exact eigenvalues");
        assert!((values.iter().sum::<f64>() - cov.trace()).abs() <= 1e-10 * cov.trace());
        for (i, lambda) in values.iter().enumerate() {
            let q = out.basis.column(i);
            assert!((&cov * q - q * *lambda).norm() <= 1e-10 * cov.norm());
        }
        // Shifting every record by the same vector changes nothing once centred.
        let shift = Vector::from_fn(d, |i, _| i as f64 - 2.5);
        let mut moved = xt.clone();
        for mut col in moved.column_iter_mut() {
            col += &shift;
        }
        let again = run(DataInput::Records { xt: &moved }, &config, &c).expect("run");
        for (a, b) in values.iter().zip(again.eigenvalues.expect("exact").iter()) {
            assert!((a - b).abs() <= 1e-9 * values[0]);
        }
        // Without centering the shift does change the spectrum.
        let plain = run(
            DataInput::Records { xt: &moved },
            &ExactConfig { k: d, center: false },
            &c,
        )
        .expect("run");
        assert!((plain.eigenvalues.expect("exact")[0] - values[0]).abs() > 1.0);
    }

    #[test]
    fn degenerate_and_mismatched_inputs_fail_cleanly() {
        let empty = Matrix::zeros(4, 0);
        let c = public(4, Some(0), RO);
        let out = run(
            DataInput::Records { xt: &empty },
            &ExactConfig { k: 1, center: true },
            &c,
        );
        assert!(matches!(out, Err(RunError::Failed(_))), "{out:?}");
        // Without centering, no records is a zero Gram matrix: a valid (if dull) answer.
        let out = run(
            DataInput::Records { xt: &empty },
            &ExactConfig { k: 2, center: false },
            &c,
        )
        .expect("run");
        assert_basis_contract(&out.basis, 4, 2);
        let a = Matrix::identity(4, 4);
        for (input, ctx) in [
            (DataInput::Matrix { a: &a }, public(4, None, AR)),
            (DataInput::Records { xt: &a }, public(4, None, EN)),
            (DataInput::Matrix { a: &a }, public(5, None, EN)),
        ] {
            assert!(matches!(
                run(input, &ExactConfig { k: 1, center: false }, &ctx),
                Err(RunError::Failed(_))
            ));
        }
    }
}
