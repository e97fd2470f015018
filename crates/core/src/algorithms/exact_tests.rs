//! Tests of `exact`: the public-only refusal, the zero cost, parameters, agreement with
//! independent routes (SVD of the records, eigen-equations, a reference covariance) and clean
//! failures.

use serde_json::json;

use super::*;
use crate::algorithms::DynAlgorithm;
use crate::algorithms::testing::{
    AR, EN, RO, assert_basis_contract, assert_invalid_k_and_fields, input_for, invalid_field, rejected,
    run_audited, spiked_matrix, spiked_records, target,
};
use crate::dataset::Neighbours;
use crate::linalg::Matrix;
use crate::linalg::subspace::sin_theta;
use crate::linalg::{Vector, thin_svd};

fn public(d: usize, n: Option<usize>, neighbours: Neighbours) -> DataContext {
    DataContext {
        d,
        n,
        neighbours,
        public: true,
        sparse: false,
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
        let e = rejected(&Exact, json!({"k": 2}), &private, 1.0);
        assert!(matches!(e, ConfigError::PublicOnly(_)), "{e:?}");
        let e = Exact.configure(ExactParams { k: 2, center: false }, &private, &target(1.0));
        assert!(matches!(e, Err(ConfigError::PublicOnly(_))));
        // A configuration smuggled past `configure` still does not run on private data.
        let xt = Matrix::identity(5, 5);
        let config = ExactConfig { k: 2, center: false };
        let input = input_for(&neighbours, &xt);
        assert!(matches!(run(input, &config, &private), Err(RunError::Failed(_))));
    }
    assert!(Exact::INFO.public_only);
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
    assert_invalid_k_and_fields(
        &Exact,
        &c,
        &target(1.0),
        [
            (json!({"k": 2, "center": "yes"}), "params.center"),
            (json!({"k": 2, "center": 1}), "params.center"),
        ],
    );
    let e = rejected(&Exact, json!({"k": 2, "centre": true}), &c, 1.0);
    assert!(
        invalid_field(&e).starts_with("params") && e.to_string().contains("`centre`"),
        "{e}"
    );
    let e = rejected(&Exact, json!({"k": 2, "center": true}), &public(6, None, EN), 1.0);
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
        DataInput::Records { xt: (&xt).into() },
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
    let out = run(DataInput::Records { xt: (&xt).into() }, &config, &c).expect("run");
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
    let again = run(DataInput::Records { xt: (&moved).into() }, &config, &c).expect("run");
    for (a, b) in values.iter().zip(again.eigenvalues.expect("exact").iter()) {
        assert!((a - b).abs() <= 1e-9 * values[0]);
    }
    // Without centering the shift does change the spectrum.
    let plain = run(
        DataInput::Records { xt: (&moved).into() },
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
        DataInput::Records { xt: (&empty).into() },
        &ExactConfig { k: 1, center: true },
        &c,
    );
    assert!(matches!(out, Err(RunError::Failed(_))), "{out:?}");
    // Without centering, no records is a zero Gram matrix: a valid (if dull) answer.
    let out = run(
        DataInput::Records { xt: (&empty).into() },
        &ExactConfig { k: 2, center: false },
        &c,
    )
    .expect("run");
    assert_basis_contract(&out.basis, 4, 2);
    let a = Matrix::identity(4, 4);
    for (input, ctx) in [
        (DataInput::Matrix { a: &a }, public(4, None, AR)),
        (DataInput::Records { xt: (&a).into() }, public(4, None, EN)),
        (DataInput::Matrix { a: &a }, public(5, None, EN)),
    ] {
        assert!(matches!(
            run(input, &ExactConfig { k: 1, center: false }, &ctx),
            Err(RunError::Failed(_))
        ));
    }
}
