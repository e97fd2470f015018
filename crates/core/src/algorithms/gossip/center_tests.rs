use super::*;
use crate::algorithms::centering::{CenterRequest, configure};
use crate::algorithms::federated_power::study_context;
use crate::algorithms::testing::with_audited_env;
use crate::dataset::Neighbours;

const D: usize = 6;
const RHO: f64 = 0.01;

/// The private centre of a study of d = 6, β = 1, ρ = 0.01 (10 % of it on the centre).
fn private() -> CenterConfig {
    let ctx = study_context(
        D,
        Neighbours::ReplaceOne {
            beta: 1.0,
            alpha: (D as f64).sqrt(),
        },
    );
    configure(CenterRequest::Private { share: 0.1 }, &ctx, RHO).unwrap()
}

/// Agent 2 of 3 holds features 2 and 3: β_i = √(2/6).
fn block(n: usize) -> Matrix {
    let beta_i = (2.0f64 / 6.0).sqrt();
    let mut xt = Matrix::from_fn(2, n, |i, j| 0.3 + 0.05 * ((i + j) % 3) as f64);
    clip_columns(&mut xt, beta_i, None);
    xt
}

#[test]
fn a_given_centre_is_sliced_to_the_agents_features() {
    let given = CenterConfig::Given {
        vector: (0..D).map(|j| j as f64).collect(),
    };
    let (mu, audit) = with_audited_env(1, |env| {
        block_centre(&given, &[2, 3], &block(10), 0.6, env).unwrap()
    });
    assert_eq!(mu, vec![2.0, 3.0]);
    assert!(audit.draws.is_empty(), "a given centre draws nothing");
    let short = CenterConfig::Given { vector: vec![0.0; 3] };
    assert!(
        with_audited_env(1, |env| block_centre(&short, &[2, 3], &block(10), 0.6, env))
            .0
            .is_err()
    );
}

#[test]
fn the_private_centre_refuses_rows_outside_the_blocks_bound() {
    let wide = Matrix::from_element(2, 4, 1.0);
    let (result, audit) = with_audited_env(1, |env| block_centre(&private(), &[2, 3], &wide, 0.6, env));
    assert!(result.is_err());
    assert!(audit.draws.is_empty(), "nothing is drawn before the checks");
}

#[test]
fn centred_rows_stay_within_the_blocks_bound() {
    let beta_i = (2.0f64 / 6.0).sqrt();
    let centred = centre_block(&block(30), &[-0.5, 0.5], beta_i);
    assert!(centred.column_iter().all(|x| x.norm() <= beta_i));
}

/// The noise on the agent's sum over `runs` draws, decoded from μ̂ = S̃/n, against the spec's
/// σ = 2β/√(2ρ_c) (Δ = 2β over the agents' stacked sums).
fn audit(factor: f64) -> Result<(), String> {
    let mut center = private();
    if let CenterConfig::Private { noise_sd, .. } = &mut center {
        *noise_sd *= factor;
    }
    let xt = block(40);
    let beta_i = (2.0f64 / 6.0).sqrt();
    let truth: Vec<f64> = (0..2).map(|i| xt.row(i).sum()).collect();
    let mut noise = Vec::new();
    for run in 0..3_000 {
        let (mu, _) = with_audited_env(run, |env| {
            block_centre(&center, &[2, 3], &xt, beta_i, env).unwrap()
        });
        noise.extend(mu.iter().zip(&truth).map(|(m, t)| m * 40.0 - t));
    }
    let spec_sd = 2.0 / (2.0 * 0.1 * RHO).sqrt();
    crate::privacy::testing::check_gaussian_scale(&noise, spec_sd)
}

#[test]
fn the_agents_sum_carries_the_calibrated_noise() {
    let result = audit(1.0);
    assert!(result.is_ok(), "{result:?}");
}

#[test]
fn an_under_noised_sum_fails_the_audit() {
    crate::algorithms::testing::assert_audit_catches_under_noise(audit, 0.9);
}
