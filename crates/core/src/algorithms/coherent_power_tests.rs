//! Tests of `coherent_power`: cost and calibration, parameters, the run contract, convergence,
//! coherence failures and the search, and a statistical audit of every noise draw against an
//! independent replay of Hardt & Roth Fig. 2/3.

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rand_distr::{Distribution, StandardNormal};
use serde_json::json;

use super::*;
use crate::algorithms::testing::{
    ar, assert_basis_contract, assert_cancellation_stops_the_noise, assert_draws_calibrated,
    assert_errors_fall, assert_fails_cleanly, assert_invalid_fields, assert_k_required_and_unknown_refused,
    assert_matches_exact, assert_recorded_scale, assert_registry_matches_direct, ctx, exact_top, gaussian,
    input_for, invalid_field, mean_sin_theta, rejected, ro, run_audited, run_with_progress, seeded,
    spiked_matrix, spiked_records, spiked_with_ctx, target,
};
use crate::algorithms::{DynAlgorithm, find};
use crate::dataset::Neighbours;
use crate::linalg::gram_t;
use crate::linalg::subspace::sin_theta;
use crate::privacy::testing::{check_gaussian_scale, check_laplace_scale};

/// Records clipped to β = 4 by `spiked_records`; α = √30·β, the default for d = 30.
const AR: Neighbours = ar(4.0, 21.908_902_300_206_645);
const RO: Neighbours = ro(4.0, 21.908_902_300_206_645);
const EN: Neighbours = Neighbours::Entry { u: 1.5 };

/// u_eff straight from the docs/design/algorithms.md table (`row_norm` column), written independently of
/// `sensitivity.rs`: u, αβ, 2αβ.
fn spec_u_eff(neighbours: &Neighbours) -> f64 {
    match *neighbours {
        Neighbours::Entry { u } => u,
        Neighbours::AddRemove { beta, alpha } => alpha * beta,
        Neighbours::ReplaceOne { beta, alpha } => 2.0 * alpha * beta,
    }
}

/// The spec's round sensitivity with coherence bound C: u·sqrt(C/d) for matrices; for records
/// β² under both relations (docs/design/algorithms.md, "Decisions after the first implementation"), or the
/// coherence form αβ·sqrt(C/d) / 2αβ·sqrt(C/d) where that is smaller.
fn spec_round_delta(neighbours: &Neighbours, c: f64, d: usize) -> f64 {
    let coherent = spec_u_eff(neighbours) * (c / d as f64).sqrt();
    match *neighbours {
        Neighbours::Entry { .. } => coherent,
        Neighbours::AddRemove { beta, .. } | Neighbours::ReplaceOne { beta, .. } => {
            (beta * beta).min(coherent)
        }
    }
}

/// The spec's σ̂ sensitivity: u for matrices, β² for records (min with u_eff).
fn spec_estimate_delta(neighbours: &Neighbours) -> f64 {
    match *neighbours {
        Neighbours::Entry { u } => u,
        Neighbours::AddRemove { beta, .. } | Neighbours::ReplaceOne { beta, .. } => {
            (beta * beta).min(spec_u_eff(neighbours))
        }
    }
}

fn params(k: usize, iterations: u32, bound: Option<f64>, search: bool) -> CoherentPowerParams {
    CoherentPowerParams {
        k,
        iterations: Some(iterations),
        coherence_bound: bound,
        coherence_search: search,
        eigenvalue_share: None,
    }
}

fn config(
    k: usize,
    iterations: u32,
    candidates: Vec<f64>,
    multiplier: f64,
    epsilon: f64,
) -> CoherentPowerConfig {
    CoherentPowerConfig {
        k,
        iterations,
        coherence_search: candidates.len() > 1,
        coherence_candidates: candidates,
        eigenvalue_share: 0.1,
        multiplier,
        eigenvalue_epsilon: epsilon,
    }
}

/// The data input and the dense matrix A it stands for.
fn data(neighbours: Neighbours, d: usize, n: usize, seed: u64) -> (Matrix, Matrix) {
    match neighbours {
        Neighbours::Entry { .. } => {
            let a = spiked_matrix(seed, d, &[50.0, 30.0, 20.0], 0.2);
            (a.clone(), a)
        }
        _ => {
            let xt = spiked_records(seed, d, n, &[9.0, 6.0, 4.0], 0.3, 4.0);
            let gram = gram_t(&xt);
            (xt, gram)
        }
    }
}

/// [`data`], with the context of the dataset it stands for (n public).
fn data_in_ctx(neighbours: Neighbours, d: usize, n: usize, seed: u64) -> (Matrix, Matrix, DataContext) {
    let (m, dense) = data(neighbours, d, n, seed);
    (m, dense, ctx(d, Some(n), neighbours))
}

#[path = "coherent_power_tests/audit.rs"]
mod audit;
#[path = "coherent_power_tests/cost.rs"]
mod cost;
#[path = "coherent_power_tests/parameters.rs"]
mod parameters;
#[path = "coherent_power_tests/running.rs"]
mod running;
