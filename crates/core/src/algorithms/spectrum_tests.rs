//! Tests of `spectrum`: cost and calibration from the written Δ, the release is the sorted
//! spectrum plus noise of the calibrated scale, and a 10 % under-noised variant fails the audit.

use super::*;
use crate::algorithms::testing::{AR, RO, ctx, run_on_records, spiked_records, target};
use crate::algorithms::{DataInput, DynAlgorithm};
use crate::dataset::Neighbours;
use crate::linalg::gram_t;
use crate::privacy::testing::{check_gaussian_scale, is_widened, on_grid};

#[test]
fn cost_is_delta_squared_over_two_sigma_squared() {
    // add_remove, β = 2: Δ = 4; σ = 1 → ρ = 8.
    let c = ctx(5, Some(10), AR);
    assert_eq!(
        Spectrum.cost(&SpectrumConfig { noise_sd: 1.0 }, &c),
        Cost::gaussian_zcdp(8.0)
    );
    // replace_one, β = 2: Δ = 4√2; σ = 2 → ρ = 32/8 = 4.
    let c = ctx(5, Some(10), RO);
    assert!((Spectrum.cost(&SpectrumConfig { noise_sd: 2.0 }, &c).rho - 4.0).abs() < 1e-12);
}

#[test]
fn configure_then_cost_returns_the_target_and_never_more() {
    for neighbours in [AR, RO] {
        let c = ctx(7, Some(100), neighbours);
        for rho in [1e-6, 0.05, 0.3, 2.0, 1e6] {
            let config = Spectrum
                .configure(SpectrumParams {}, &c, &target(rho))
                .expect("valid");
            let cost = Spectrum.cost(&config, &c).rho;
            assert!(cost <= rho && cost > rho * (1.0 - 1e-12), "{rho}: {cost}");
        }
    }
}

#[test]
fn bad_targets_and_unknown_parameters_are_refused() {
    let c = ctx(5, Some(10), RO);
    for rho in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(Spectrum.configure(SpectrumParams {}, &c, &target(rho)).is_err());
    }
    let err = DynAlgorithm::prepare(&Spectrum, serde_json::json!({ "k": 2 }), &c, &target(1.0));
    assert!(err.is_err(), "an unknown parameter must be refused");
}

/// Runs the release `runs` times on fixed records and returns the released minus the true
/// sorted spectrum (on the release's grid), checking the recorded scale against σ = Δ/√(2ρ)
/// computed here from the written Δ.
/// The eigenvalues of XᵀX, largest first.
fn sorted_spectrum(xt: &crate::linalg::Matrix) -> Vec<f64> {
    let mut truth: Vec<f64> = crate::linalg::sym_eig(&gram_t(xt))
        .values
        .iter()
        .copied()
        .collect();
    truth.sort_by(|a, b| b.total_cmp(a));
    truth
}

fn noise_of(neighbours: Neighbours, factor: f64, runs: u64) -> Vec<f64> {
    let (d, n, rho) = (60, 200, 0.4_f64);
    let xt = spiked_records(61, d, n, &[6.0, 3.0], 0.3, 2.0);
    let spec_delta = match neighbours {
        Neighbours::AddRemove { beta, .. } => beta * beta,
        Neighbours::ReplaceOne { beta, .. } => 2.0_f64.sqrt() * beta * beta,
        Neighbours::Entry { u } => u,
    };
    let spec_sd = spec_delta / (2.0 * rho).sqrt();
    let c = ctx(d, Some(n), neighbours);
    let mut config = Spectrum
        .configure(SpectrumParams {}, &c, &target(rho))
        .expect("valid");
    config.noise_sd *= factor;
    let truth = sorted_spectrum(&xt);
    let mut noise = Vec::new();
    for seed in 0..runs {
        let (out, audit) = run_on_records(&Spectrum, &xt, &config, &c, 100 + seed);
        let out = out.expect("run");
        assert_eq!(out.basis.shape(), (d, 0), "no basis is released");
        assert_eq!(audit.draws.len(), 1);
        let draw = &audit.draws[0];
        assert_eq!((draw.label, draw.values.len()), (RELEASE, d));
        if factor == 1.0 {
            assert!(is_widened(draw.scale, spec_sd), "{} vs {spec_sd}", draw.scale);
        }
        let released = out.eigenvalues.expect("released");
        for ((got, want), z) in released.iter().zip(&truth).zip(&draw.values) {
            // The release is exactly the sorted spectrum on the grid plus the audited draw.
            assert!((got - (on_grid(*want, draw.grid) + z)).abs() <= 1e-9 * want.abs().max(1.0));
        }
        noise.extend(released.iter().zip(&truth).map(|(got, want)| got - want));
    }
    noise
}

fn audit(neighbours: Neighbours, factor: f64) -> Result<(), String> {
    let spec_sd = crate::algorithms::analyze_gauss::sensitivity(&neighbours) / (2.0 * 0.4_f64).sqrt();
    check_gaussian_scale(&noise_of(neighbours, factor, 40), spec_sd)
}

#[test]
fn noise_matches_the_written_calibration() {
    for neighbours in [AR, RO] {
        let result = audit(neighbours, 1.0);
        assert!(result.is_ok(), "{neighbours:?}: {result:?}");
    }
}

/// The same check catches a release with 10 % too little noise (2 400 draws: z ≈ −6.6).
#[test]
fn under_noised_release_fails_the_audit() {
    for neighbours in [AR, RO] {
        assert!(
            audit(neighbours, 0.9).is_err(),
            "{neighbours:?}: under-noising went unnoticed"
        );
    }
}

#[test]
fn it_is_not_offered_as_a_pca_algorithm() {
    assert!(crate::algorithms::find(NAME).is_none());
    assert!(crate::algorithms::find_runnable(NAME).is_some());
    // A matrix dataset is out of its scope.
    let on_matrix = DynAlgorithm::prepare(
        &Spectrum,
        serde_json::json!({}),
        &ctx(4, None, crate::algorithms::testing::EN),
        &target(1.0),
    );
    assert!(on_matrix.is_err());
    // Matrix input is refused at run time too.
    let a = Matrix::identity(4, 4);
    let (out, _) = crate::algorithms::testing::run_audited(
        &Spectrum,
        DataInput::Matrix { a: &a },
        &SpectrumConfig { noise_sd: 1.0 },
        &ctx(4, Some(4), RO),
        1,
    );
    assert!(out.is_err());
}

#[test]
fn a_public_dataset_without_a_target_gets_the_exact_spectrum_free_and_a_private_one_never() {
    let (d, n) = (12, 80);
    let xt = spiked_records(5, d, n, &[4.0, 2.0], 0.2, 2.0);
    let mut public = ctx(d, Some(n), RO);
    public.public = true;
    let free = PrivacyTarget {
        public_default: true,
        ..target(1.0)
    };
    let config = Spectrum
        .configure(SpectrumParams {}, &public, &free)
        .expect("valid");
    assert_eq!(config.noise_sd, 0.0);
    assert_eq!(Spectrum.cost(&config, &public), Cost::ZERO);
    assert!(Spectrum.noise_scales(&config, &public).is_empty());
    let (out, audit) = run_on_records(&Spectrum, &xt, &config, &public, 1);
    assert!(audit.draws.is_empty(), "no noise drawn");
    let truth = sorted_spectrum(&xt);
    let released = out.expect("runs").eigenvalues.expect("released");
    for (got, want) in released.iter().zip(&truth) {
        assert!((got - want).abs() <= 1e-9 * want.abs().max(1.0));
    }
    // A stated target on the public dataset, or a private dataset: noise as always.
    let private = ctx(d, Some(n), RO);
    for (c, t) in [(&public, target(1.0)), (&private, free)] {
        let config = Spectrum.configure(SpectrumParams {}, c, &t).expect("valid");
        assert!(config.noise_sd > 0.0, "{c:?} {t:?}");
    }
    // A stored noiseless configuration run on a private dataset fails before any draw.
    let (out, audit) = run_on_records(&Spectrum, &xt, &SpectrumConfig { noise_sd: 0.0 }, &private, 1);
    assert!(matches!(out, Err(RunError::Failed(_))), "{out:?}");
    assert!(audit.draws.is_empty());
}
