//! Test support shared by the algorithms' tests: contexts and targets, seeded randomness,
//! data with a planted spectrum, audited runs, and the checks every algorithm's output and
//! every refusal must pass.

use std::fmt::Debug;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rand_distr::{Distribution, StandardNormal};
use serde_json::{Value, json};

use super::{Algorithm, Cancelled, ConfigError, DataInput, DynAlgorithm, Output, Run, RunEnv, RunError};
use crate::dataset::{DataContext, Neighbours};
use crate::linalg::subspace::{orthonormality_error, sin_theta};
use crate::linalg::{Matrix, Vector, gram_t, sym_eig, thin_qr_q};
use crate::privacy::PrivacyTarget;
use crate::privacy::noise::RecordingAudit;

// ---- Contexts, targets and inputs. ----

/// replace_one record neighbours with clipping bound β and α.
pub const fn ro(beta: f64, alpha: f64) -> Neighbours {
    Neighbours::ReplaceOne { beta, alpha }
}

/// add_remove record neighbours with clipping bound β and α.
pub const fn ar(beta: f64, alpha: f64) -> Neighbours {
    Neighbours::AddRemove { beta, alpha }
}

/// add_remove records with β = 2, α = 6.
pub const AR: Neighbours = ar(2.0, 6.0);
/// replace_one records with β = 2, α = 6.
pub const RO: Neighbours = ro(2.0, 6.0);
/// A matrix dataset with entry-level neighbours, u = 1.
pub const EN: Neighbours = Neighbours::Entry { u: 1.0 };

/// The public context of a private (not `public: true`) dataset.
pub fn ctx(d: usize, n: Option<usize>, neighbours: Neighbours) -> DataContext {
    DataContext {
        d,
        n,
        neighbours,
        public: false,
        sparse: false,
    }
}

/// A pure zCDP target: ρ and no δ.
pub fn target(rho: f64) -> PrivacyTarget {
    PrivacyTarget {
        public_default: false,
        rho,
        delta: None,
        epsilon: None,
    }
}

/// The context of a public records dataset under replace_one with row-norm bound β and the
/// default α = √d·β: what the registry-wide tests run every algorithm on.
pub fn public_records_ctx(d: usize, n: usize, beta: f64) -> DataContext {
    DataContext {
        d,
        n: Some(n),
        neighbours: Neighbours::ReplaceOne {
            beta,
            alpha: (d as f64).sqrt() * beta,
        },
        public: true,
        sparse: false,
    }
}

/// The target the registry-wide tests give algorithm `name`: ρ = `rho` with δ = 1e-5, except
/// `k_dp_pca`, which gets ρ = 200: what "ε 20" meant when k_dp_pca ran at ρ = ε²/2
/// (docs/k_dp_pca.md).
pub fn registry_target(name: &str, rho: f64) -> PrivacyTarget {
    let rho = if name == "k_dp_pca" { 200.0 } else { rho };
    PrivacyTarget {
        public_default: false,
        rho,
        delta: Some(1e-5),
        epsilon: None,
    }
}

/// The least parameters algorithm `name` accepts for rank k: `k` alone, except `cape_agn`,
/// whose model has no neutral default (`mog` with σ² = 0, moments of the raw data).
pub fn least_params(name: &str, k: usize) -> Value {
    if name == "cape_agn" {
        json!({ "k": k, "model": "mog", "sigma2": 0.0 })
    } else {
        json!({ "k": k })
    }
}

/// The input of a dataset under `neighbours`: the matrix for entry-level neighbours, records Xᵀ
/// otherwise.
pub fn input_for<'a>(neighbours: &Neighbours, data: &'a Matrix) -> DataInput<'a> {
    match neighbours {
        Neighbours::Entry { .. } => DataInput::Matrix { a: data },
        _ => DataInput::Records { xt: data.into() },
    }
}

/// The input under `neighbours` (`a` for entry-level neighbours, the records `xt` otherwise) and
/// the dense matrix it stands for (`a`, or XᵀX).
pub fn input_and_dense<'a>(
    neighbours: &Neighbours,
    xt: &'a Matrix,
    a: &'a Matrix,
) -> (DataInput<'a>, Matrix) {
    match neighbours {
        Neighbours::Entry { .. } => (DataInput::Matrix { a }, a.clone()),
        _ => (DataInput::Records { xt: xt.into() }, gram_t(xt)),
    }
}

// ---- Seeded randomness and data with a planted spectrum. ----

/// The tests' random generator, seeded.
pub fn seeded(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

/// A rows×cols matrix of iid standard normal entries (filled column by column).
pub fn gaussian(rng: &mut ChaCha20Rng, rows: usize, cols: usize) -> Matrix {
    Matrix::from_fn(rows, cols, |_, _| StandardNormal.sample(&mut *rng))
}

/// A vector of `d` iid standard normal entries.
pub fn gaussian_vector(rng: &mut ChaCha20Rng, d: usize) -> Vector {
    Vector::from_fn(d, |_, _| StandardNormal.sample(&mut *rng))
}

/// Records xt (d×n) with a planted spectrum: x = Σ_j sqrt(spikes_j)·z_j·u_j + background·w,
/// then clipped to ‖x‖₂ ≤ β (docs/design/privacy.md §1; ‖x‖₁ ≤ √d·β, the default α, follows).
pub fn spiked_records(seed: u64, d: usize, n: usize, spikes: &[f64], background: f64, beta: f64) -> Matrix {
    planted_records(seed, (d, n), spikes, background, beta, |z| z)
}

/// [`spiked_records`] with β = 2, and their context under `neighbours` (n public).
pub fn spiked_with_ctx(
    seed: u64,
    (d, n): (usize, usize),
    spikes: &[f64],
    background: f64,
    neighbours: Neighbours,
) -> (Matrix, DataContext) {
    (
        spiked_records(seed, d, n, spikes, background, 2.0),
        ctx(d, Some(n), neighbours),
    )
}

/// Records of the App. G.1 spiked model: x = Σ_j s_j·sqrt(λ_j)·v_j + σ·w with random signs s_j
/// and w ~ N(0, I_d), so E[xxᵀ] = Σ_j λ_j v_j v_jᵀ + σ²·I; clipped to ‖x‖₂ ≤ β.
pub fn sign_spiked_records(
    seed: u64,
    (d, n): (usize, usize),
    spikes: &[f64],
    sigma: f64,
    beta: f64,
) -> Matrix {
    planted_records(seed, (d, n), spikes, sigma, beta, f64::signum)
}

/// x = Σ_j sqrt(spikes_j)·amplitude(z_j)·u_j + background·w for a random orthonormal U and
/// standard normal z, w (drawn in that order from `seeded(seed)`), clipped to ‖x‖₂ ≤ β.
fn planted_records(
    seed: u64,
    (d, n): (usize, usize),
    spikes: &[f64],
    background: f64,
    beta: f64,
    amplitude: fn(f64) -> f64,
) -> Matrix {
    let mut rng = seeded(seed);
    let u = thin_qr_q(&gaussian(&mut rng, d, spikes.len()));
    let z = gaussian(&mut rng, spikes.len(), n);
    let w = gaussian(&mut rng, d, n);
    let scaled = Matrix::from_fn(spikes.len(), n, |j, i| spikes[j].sqrt() * amplitude(z[(j, i)]));
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
pub fn spiked_matrix(seed: u64, d: usize, spikes: &[f64], background: f64) -> Matrix {
    let mut rng = seeded(seed);
    let u = thin_qr_q(&gaussian(&mut rng, d, spikes.len()));
    let lambda = Matrix::from_diagonal(&Vector::from_column_slice(spikes));
    let e = gaussian(&mut rng, d, d);
    &u * lambda * u.transpose() + (&e + e.transpose()) * (background / 2.0)
}

/// Calls `check(neighbours, input, dense, ctx)` on planted-spectrum data under each relation
/// (add_remove and replace_one records, then an entry-level matrix; [`AR`], [`RO`], [`EN`]): d×n
/// records with spikes 9, 6, 4 (background 0.3, β = 4, drawn from `seeds.0`) and a symmetric
/// d×d matrix with spikes 50, 30, 20 (perturbation 0.2, from `seeds.1`); `dense` is what the
/// input stands for (see [`input_and_dense`]).
pub fn on_every_relation(
    seeds: (u64, u64),
    d: usize,
    n: usize,
    mut check: impl FnMut(Neighbours, DataInput<'_>, &Matrix, &DataContext),
) {
    let xt = spiked_records(seeds.0, d, n, &[9.0, 6.0, 4.0], 0.3, 4.0);
    let a = spiked_matrix(seeds.1, d, &[50.0, 30.0, 20.0], 0.2);
    for neighbours in [AR, RO, EN] {
        let (input, dense) = input_and_dense(&neighbours, &xt, &a);
        check(neighbours, input, &dense, &ctx(d, Some(n), neighbours));
    }
}

// ---- Runs. ----

/// What a run returned, and every noise draw it made.
pub type Audited = (Result<Output, RunError>, RecordingAudit);

/// Calls `f` with an environment on `seeded(seed)` whose progress never cancels, and returns
/// its result with every noise draw it made.
pub fn with_audited_env<T>(seed: u64, f: impl FnOnce(&mut RunEnv<'_>) -> T) -> (T, RecordingAudit) {
    with_env(seed, &mut |_, _| Ok(()), f)
}

/// Calls `f` with an environment on `seeded(seed)`, the given progress callback and a recording
/// audit.
fn with_env<T>(
    seed: u64,
    progress: &mut dyn FnMut(u32, u32) -> Result<(), Cancelled>,
    f: impl FnOnce(&mut RunEnv<'_>) -> T,
) -> (T, RecordingAudit) {
    let mut rng = seeded(seed);
    let mut audit = RecordingAudit::default();
    let out = {
        let mut env = RunEnv::new(&mut rng, progress).with_audit(&mut audit);
        f(&mut env)
    };
    (out, audit)
}

/// Runs `alg` with a seeded RNG and a recording audit.
pub fn run_audited<A: Algorithm>(
    alg: &A,
    input: DataInput<'_>,
    config: &A::Config,
    ctx: &DataContext,
    seed: u64,
) -> Audited {
    with_audited_env(seed, |env| alg.run(config, Run { input, ctx, env }))
}

/// [`run_audited`] on records xt.
pub fn run_on_records<A: Algorithm>(
    alg: &A,
    xt: &Matrix,
    config: &A::Config,
    ctx: &DataContext,
    seed: u64,
) -> Audited {
    run_audited(alg, DataInput::Records { xt: xt.into() }, config, ctx, seed)
}

/// Runs a configuration from `prepare` through the registry, with a seeded RNG and a recording
/// audit.
pub fn run_prepared_audited(
    alg: &dyn DynAlgorithm,
    config: &Value,
    input: DataInput<'_>,
    ctx: &DataContext,
    seed: u64,
) -> Audited {
    with_audited_env(seed, |env| alg.run_prepared(config, Run { input, ctx, env }))
}

/// Runs records xt twice with the same seed: the configuration `prepare` stores for `params`
/// under `target`, through the registry, and `config`, directly. Both runs must succeed and
/// release the same basis; both outputs are returned for further checks.
pub fn assert_registry_matches_direct<A: Algorithm>(
    alg: &A,
    params: Value,
    target: &PrivacyTarget,
    config: &A::Config,
    xt: &Matrix,
    ctx: &DataContext,
    seed: u64,
) -> (Output, Output) {
    // The direct run does not clip: turn off the default `clip: "auto"` (issue 21) unless the
    // test asks for a clip itself.
    let mut params = params;
    if let Value::Object(map) = &mut params {
        map.entry("clip").or_insert_with(|| Value::from("none"));
    }
    let prepared = alg.prepare(params, ctx, target).expect("valid");
    let (via_registry, _) = run_prepared_audited(
        alg,
        &prepared.config,
        DataInput::Records { xt: xt.into() },
        ctx,
        seed,
    );
    let (direct, _) = run_on_records(alg, xt, config, ctx, seed);
    let (via_registry, direct) = (
        via_registry.expect("run through the registry"),
        direct.expect("direct run"),
    );
    assert_eq!(via_registry.basis, direct.basis);
    (via_registry, direct)
}

/// The mean sin θ between `exact` and the bases of runs on records xt with seeds 0..runs, so
/// that a comparison is about the noise level rather than one draw.
pub fn mean_sin_theta<A: Algorithm>(
    alg: &A,
    xt: &Matrix,
    config: &A::Config,
    ctx: &DataContext,
    exact: &Matrix,
    runs: u64,
) -> f64 {
    (0..runs)
        .map(|seed| {
            let (out, _) = run_on_records(alg, xt, config, ctx, seed);
            sin_theta(&out.expect("run").basis, exact)
        })
        .sum::<f64>()
        / runs as f64
}

/// Runs `alg` with a seeded RNG and a recording audit, logging every progress report
/// (done, total) and cancelling the job at the first report for which `cancel` holds.
pub fn run_with_progress<A: Algorithm>(
    alg: &A,
    input: DataInput<'_>,
    config: &A::Config,
    ctx: &DataContext,
    seed: u64,
    mut cancel: impl FnMut(u32, u32) -> bool,
) -> (Result<Output, RunError>, Vec<(u32, u32)>, RecordingAudit) {
    let mut reports = Vec::new();
    let mut progress = |done: u32, total: u32| {
        reports.push((done, total));
        if cancel(done, total) {
            Err(Cancelled)
        } else {
            Ok(())
        }
    };
    let (out, audit) = with_env(seed, &mut progress, |env| {
        alg.run(config, Run { input, ctx, env })
    });
    (out, reports, audit)
}

// ---- Checks. ----

/// Orthonormal columns and the sign rule of docs/design/algorithms.md (largest-magnitude entry > 0).
pub fn assert_basis_contract(q: &Matrix, d: usize, k: usize) {
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

/// Asserts that the basis is within sin θ < `angle` of the top-k eigenvectors of `a`, and each
/// released eigenvalue within `relative` of the exact one.
pub fn assert_matches_exact(
    out: &Output,
    a: &Matrix,
    k: usize,
    (angle, relative): (f64, f64),
    case: impl Debug,
) {
    let exact = sym_eig(a);
    let top = exact.vectors.columns(0, k).into_owned();
    let err = sin_theta(&out.basis, &top);
    assert!(err < angle, "{case:?}: sin θ = {err:e}");
    let values = out.eigenvalues.as_ref().expect("released");
    for (got, want) in values.iter().zip(exact.values.iter()) {
        assert!(
            (got - want).abs() <= relative * want.abs(),
            "{case:?}: {got} vs {want}"
        );
    }
}

/// Runs `config` on records xt (seed `seed`): the output keeps the basis contract for rank k,
/// releases no eigenvalues, and is within sin θ < `angle` of the exact top-k eigenvectors of XᵀX.
pub fn assert_converges_on_records<A: Algorithm>(
    alg: &A,
    xt: &Matrix,
    config: &A::Config,
    ctx: &DataContext,
    k: usize,
    seed: u64,
    angle: f64,
) {
    let (out, _) = run_on_records(alg, xt, config, ctx, seed);
    let out = out.expect("run");
    assert_basis_contract(&out.basis, ctx.d, k);
    assert!(out.eigenvalues.is_none());
    let err = sin_theta(&out.basis, &exact_top(&gram_t(xt), k));
    assert!(err < angle, "sin θ = {err}");
}

/// An audit and its under-noised twin: `audit(1.0)`, the noise as calibrated, must pass, and
/// `audit(under)`, noise scaled as `under` says, must fail.
pub fn assert_audit_catches_under_noise<E: Debug>(audit: impl Fn(f64) -> Result<(), E>, under: f64) {
    assert_audits_catch_under_noise(|factor| [("the audit", audit(factor))], under);
}

/// Asserts that every draw recorded the specified scale: `excess`, the largest relative excess
/// over it, is below 1e-6.
pub fn assert_recorded_scale(excess: f64, case: impl Debug) {
    assert!(excess < 1e-6, "{case:?}: recorded scale off by {excess:e}");
}

/// [`assert_recorded_scale`], and every draw (numbered from 1) passes its own scale check.
pub fn assert_draws_calibrated<E: Debug>(excess: f64, per_draw: &[Result<(), E>], case: impl Debug) {
    assert_recorded_scale(excess, &case);
    for (t, r) in per_draw.iter().enumerate() {
        assert!(r.is_ok(), "{case:?} draw {}: {r:?}", t + 1);
    }
}

/// Audits of several releases, each named, and their under-noised twin: every audit must pass at
/// `audits(1.0)`, the noise as calibrated, and every one must fail at `audits(under)`.
pub fn assert_audits_catch_under_noise<E: Debug, const N: usize>(
    audits: impl Fn(f64) -> [(&'static str, Result<(), E>); N],
    under: f64,
) {
    for (release, result) in audits(1.0) {
        assert!(result.is_ok(), "{release}: {result:?}");
    }
    for (release, result) in audits(under) {
        assert!(
            result.is_err(),
            "{release}: under-noising ({under}) went unnoticed"
        );
    }
}

/// Asserts that cancelling at the progress report of step 2 ends the run with `Cancelled`, and
/// that no noise is drawn after it (for algorithms that draw once per reported step).
pub fn assert_cancellation_stops_the_noise<A: Algorithm>(
    alg: &A,
    input: DataInput<'_>,
    config: &A::Config,
    ctx: &DataContext,
) {
    let (result, _, audit) = run_with_progress(alg, input, config, ctx, 1, |done, _| done >= 2);
    assert_eq!(result.expect_err("cancelled"), RunError::Cancelled);
    assert_eq!(audit.draws.len(), 2, "no noise is drawn after the cancellation");
}

/// Asserts that a run fails cleanly: `RunError::Failed`, and no noise drawn.
pub fn assert_fails_cleanly<A: Algorithm>(
    alg: &A,
    input: DataInput<'_>,
    config: &A::Config,
    ctx: &DataContext,
    case: impl Debug,
) {
    let (out, audit) = run_audited(alg, input, config, ctx, 1);
    assert!(matches!(out, Err(RunError::Failed(_))), "case {case:?}: {out:?}");
    assert!(audit.draws.is_empty(), "case {case:?}: noise drawn");
}

/// Records xt under each of the `mismatched` contexts (ones they do not fit), and a matrix in
/// place of the records under `ctx`, must all fail cleanly.
pub fn assert_mismatched_inputs_fail<A: Algorithm>(
    alg: &A,
    xt: &Matrix,
    config: &A::Config,
    ctx: &DataContext,
    mismatched: impl IntoIterator<Item = DataContext>,
) {
    for context in mismatched {
        assert_fails_cleanly(
            alg,
            DataInput::Records { xt: xt.into() },
            config,
            &context,
            context,
        );
    }
    let a = Matrix::identity(ctx.d, ctx.d);
    assert_fails_cleanly(alg, DataInput::Matrix { a: &a }, config, ctx, "matrix input");
}

/// [`assert_mismatched_inputs_fail`], and a run of the `broken` configuration on records xt
/// under `ctx` must fail too (see [`assert_run_fails`]).
pub fn assert_bad_inputs_fail<A: Algorithm>(
    alg: &A,
    xt: &Matrix,
    config: &A::Config,
    broken: &A::Config,
    ctx: &DataContext,
    mismatched: impl IntoIterator<Item = DataContext>,
) {
    assert_mismatched_inputs_fail(alg, xt, config, ctx, mismatched);
    assert_run_fails(alg, DataInput::Records { xt: xt.into() }, broken, ctx);
}

/// A run of `alg` on `input` (seed 1) must fail with [`RunError::Failed`] (whatever it drew
/// first).
pub fn assert_run_fails<A: Algorithm>(alg: &A, input: DataInput<'_>, config: &A::Config, ctx: &DataContext) {
    let (out, _) = run_audited(alg, input, config, ctx, 1);
    assert!(matches!(out, Err(RunError::Failed(_))), "{out:?}");
}

/// The errors of runs at growing budgets must fall strictly, from above `first_above` at the
/// smallest budget to below `last_below` at the largest.
pub fn assert_errors_fall(errors: &[f64], first_above: f64, last_below: f64, case: impl Debug) {
    assert!(
        errors.windows(2).all(|w| w[1] < w[0]),
        "{case:?}: errors {errors:?}"
    );
    let (first, last) = (errors[0], errors[errors.len() - 1]);
    assert!(
        first > first_above && last < last_below,
        "{case:?}: errors {errors:?}"
    );
}

/// The exact top-k eigenvectors of `a`.
pub fn exact_top(a: &Matrix, k: usize) -> Matrix {
    sym_eig(a).vectors.columns(0, k).into_owned()
}

/// The error of a `prepare` that must be rejected at ρ = `rho` (no δ).
pub fn rejected(alg: &dyn DynAlgorithm, params: Value, ctx: &DataContext, rho: f64) -> ConfigError {
    rejected_under(alg, params, ctx, &target(rho))
}

/// The error of a `prepare` that must be rejected under `target`.
pub fn rejected_under(
    alg: &dyn DynAlgorithm,
    params: Value,
    ctx: &DataContext,
    target: &PrivacyTarget,
) -> ConfigError {
    alg.prepare(params, ctx, target).expect_err("must be rejected")
}

/// The field named by a `prepare` that must be rejected under `target`.
pub fn rejected_field(
    alg: &dyn DynAlgorithm,
    params: Value,
    ctx: &DataContext,
    target: &PrivacyTarget,
) -> String {
    invalid_field(&rejected_under(alg, params, ctx, target)).to_string()
}

/// Asserts that `prepare` refuses matrices and add_remove records as unsupported (an algorithm
/// for replace_one records only), and returns those two contexts (d = 10).
pub fn assert_replace_one_records_only(alg: &dyn DynAlgorithm, target: &PrivacyTarget) -> [DataContext; 2] {
    let matrix = ctx(10, None, Neighbours::Entry { u: 1.0 });
    let add_remove = ctx(10, None, ar(1.0, 3.0));
    for c in [matrix, add_remove] {
        assert!(matches!(
            alg.prepare(serde_json::json!({"k": 1}), &c, target),
            Err(ConfigError::Unsupported(_))
        ));
    }
    [matrix, add_remove]
}

/// The invalid numbers of components on d dimensions, each naming `params.k`: none, and one more
/// than there are dimensions.
pub fn k_out_of_range(d: usize) -> [(Value, &'static str); 2] {
    [(json!({"k": 0}), "params.k"), (json!({"k": d + 1}), "params.k")]
}

/// Asserts that `prepare` under `target` rejects each parameter object naming the field paired
/// with it.
pub fn assert_invalid_fields<'a>(
    alg: &dyn DynAlgorithm,
    ctx: &DataContext,
    target: &PrivacyTarget,
    cases: impl IntoIterator<Item = (Value, &'a str)>,
) {
    for (params, field) in cases {
        let e = rejected_under(alg, params.clone(), ctx, target);
        assert_eq!(invalid_field(&e), field, "{params}: {e}");
    }
}

/// [`assert_invalid_fields`] with the [`k_out_of_range`] of the context's d before `cases`.
pub fn assert_invalid_k_and_fields<'a>(
    alg: &dyn DynAlgorithm,
    ctx: &DataContext,
    target: &PrivacyTarget,
    cases: impl IntoIterator<Item = (Value, &'a str)>,
) {
    assert_invalid_fields(alg, ctx, target, k_out_of_range(ctx.d).into_iter().chain(cases));
}

/// Asserts that `prepare` at ρ = 1 rejects each parameter object as a whole (a missing or unknown
/// field: an error on `params…`) with a message containing the text paired with it.
pub fn assert_object_errors<'a>(
    alg: &dyn DynAlgorithm,
    ctx: &DataContext,
    cases: impl IntoIterator<Item = (Value, &'a str)>,
) {
    for (params, needle) in cases {
        let e = rejected(alg, params.clone(), ctx, 1.0);
        assert!(invalid_field(&e).starts_with("params"), "{params}: {e}");
        assert!(e.to_string().contains(needle), "{params}: {e}");
    }
}

/// The JSON Schema of the parameters `P`, after asserting that it lists exactly the
/// properties `names`, in order.
pub fn schema_listing<P: schemars::JsonSchema>(names: &[&str]) -> serde_json::Map<String, Value> {
    let schema = super::parameters::schema_of::<P>();
    assert_eq!(super::parameters::property_names(&schema), names);
    schema
}

/// [`assert_object_errors`] for what any parameter object can get wrong: no `k` (an empty
/// object, or null), an error naming `k`; and the unknown field in `unknown`, an error naming
/// `field`.
pub fn assert_k_required_and_unknown_refused(
    alg: &dyn DynAlgorithm,
    ctx: &DataContext,
    unknown: Value,
    field: &str,
) {
    let unknown_named = format!("`{field}`");
    let cases = [
        (json!({}), "`k`"),
        (json!(null), "`k`"),
        (unknown, unknown_named.as_str()),
    ];
    assert_object_errors(alg, ctx, cases);
}

/// The field of a `ConfigError::Invalid` (panics on any other error).
pub fn invalid_field(e: &ConfigError) -> &str {
    match e {
        ConfigError::Invalid { field, .. } => field,
        other => panic!("expected ConfigError::Invalid, got {other:?}"),
    }
}
