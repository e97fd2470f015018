//! The aggregator's side of capeAGN after stage 1: whitening (Alg. 3 step 8), the tensor power
//! method on the whitened third moment and the back-map to mixture components (App. B-C).

use super::config::Model;
use crate::algorithms::RunError;
use crate::algorithms::tensor_power::{self, Eigenpair, PowerSettings};
use crate::linalg::{Matrix, fix_signs, thin_qr_q, try_sym_eig};

/// The whitening of Alg. 3 step 8: W = U·D^{−1/2} and its back-map (Wᵀ)⁺ = U·D^{1/2}.
#[derive(Debug, Clone)]
pub struct Whitening {
    /// D×K.
    pub w: Matrix,
    /// D×K, (Wᵀ)⁺.
    pub back: Matrix,
    /// How many of the top-K eigenvalues were below the floor and clamped to it.
    pub clamped: usize,
}

/// Top-K eigenpairs of the (noisy) sum-form M̂₂ and the whitening, eigenvalues clamped up to
/// `floor` > 0 (module docs).
pub fn whiten(m2: &Matrix, k: usize, floor: f64) -> Result<Whitening, RunError> {
    let eig = try_sym_eig(m2)
        .map_err(|_| RunError::Failed("the eigendecomposition of M̂₂ did not converge".into()))?;
    let d = m2.nrows();
    let mut w = Matrix::zeros(d, k);
    let mut back = Matrix::zeros(d, k);
    let mut clamped = 0;
    for j in 0..k {
        let mut lambda = eig.values[j];
        if !(lambda >= floor) {
            lambda = floor;
            clamped += 1;
        }
        let root = lambda.sqrt();
        for i in 0..d {
            let u = eig.vectors[(i, j)];
            w[(i, j)] = u / root;
            back[(i, j)] = u * root;
        }
    }
    Ok(Whitening { w, back, clamped })
}

/// Recovered components a_i (length D each) and normalised weights, by decreasing weight.
#[derive(Debug, Clone, PartialEq)]
pub struct Components {
    pub vectors: Vec<Vec<f64>>,
    pub weights: Vec<f64>,
}

/// a_i = λ_i·(Wᵀ)⁺v_i, w_i ∝ 1/λ_i² (App. B-C; Anandkumar et al. 2014 Thm 4.3); STM components
/// post-processed to probability vectors (§VI-B).
pub fn unwhiten(whitening: &Whitening, pairs: &[Eigenpair], model: Model) -> Components {
    let mut items: Vec<(f64, Vec<f64>)> = pairs
        .iter()
        .map(|p| {
            let lambda = p.value.max(f64::MIN_POSITIVE);
            let v = crate::linalg::Vector::from_column_slice(&p.vector);
            let mut a: Vec<f64> = (&whitening.back * v * lambda).iter().copied().collect();
            if model == Model::Stm {
                a.iter_mut().for_each(|x| *x = x.max(0.0));
                let total: f64 = a.iter().sum();
                if total > 0.0 {
                    a.iter_mut().for_each(|x| *x /= total);
                }
            }
            (1.0 / (lambda * lambda), a)
        })
        .collect();
    let total: f64 = items.iter().map(|(w, _)| w).sum();
    items.sort_by(|a, b| b.0.total_cmp(&a.0));
    Components {
        weights: items
            .iter()
            .map(|(w, _)| {
                if total.is_finite() && total > 0.0 {
                    w / total
                } else {
                    f64::NAN
                }
            })
            .collect(),
        vectors: items.into_iter().map(|(_, a)| a).collect(),
    }
}

/// Orthonormal basis of span{a_i} (thin QR, columns in the components' order, signs fixed).
pub fn components_basis(components: &Components, d: usize) -> Matrix {
    let k = components.vectors.len();
    let a = Matrix::from_fn(d, k, |i, j| components.vectors[j][i]);
    let mut q = thin_qr_q(&a);
    fix_signs(&mut q);
    q
}

/// What the aggregator ends with.
#[derive(Debug, Clone)]
pub struct Decomposition {
    pub components: Components,
    pub clamped: usize,
}

/// Aggregator steps after the stage-1 aggregate: whiten M̂₂ (floor as in the module docs), obtain
/// the projected third moment for that W from `third` (stage 2), run the tensor power method,
/// un-whiten. Shared by the simulation and the experiments' baselines.
pub fn decompose(
    m2: &Matrix,
    k: usize,
    floor: f64,
    model: Model,
    settings: PowerSettings,
    rng: &mut dyn rand::RngCore,
    third: impl FnOnce(&Matrix) -> Result<Vec<f64>, RunError>,
) -> Result<Decomposition, RunError> {
    let whitening = whiten(m2, k, floor)?;
    let t = third(&whitening.w)?;
    let pairs = tensor_power::tensor_power(&t, k, k, settings, rng).map_err(RunError::Failed)?;
    Ok(Decomposition {
        components: unwhiten(&whitening, &pairs, model),
        clamped: whitening.clamped,
    })
}

/// The eigenvalue floor: 2√D·τ, τ the per-entry sd of the stage-1 aggregate noise.
pub fn noise_floor(d: usize, aggregate_sd: f64) -> f64 {
    2.0 * (d as f64).sqrt() * aggregate_sd
}
