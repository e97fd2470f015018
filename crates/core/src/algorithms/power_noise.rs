//! The Gaussian noise of the private power method's L iterations (Nicolas et al. 2024, Alg. 1
//! and eqs. 25–27): its cost, the multiplier calibrated to a ρ, and the random starting
//! iterate. Shared by `noisy_power` (central), `federated_power` (a job or a study's rounds,
//! where each site adds its share) and the study's pricing.

use rand::RngCore;
use rand_distr::{Distribution, StandardNormal};

use crate::linalg::{Matrix, thin_qr_q};
use crate::privacy::cost::round_up_while;

/// The cost ρ = L/(2s²) (Nicolas et al. eqs. 25–27: L Gaussian mechanisms of cost 1/(2s²)).
pub fn cost_of(iterations: u32, multiplier: f64) -> f64 {
    // (1/s)² rather than 1/s², so that a huge s cannot overflow s² into a zero cost.
    let inverse = 1.0 / multiplier;
    f64::from(iterations) * inverse * inverse / 2.0
}

/// s = sqrt(L/(2ρ)), the inverse of [`cost_of`], rounded up (never down) so that
/// `cost_of(L, s) ≤ ρ` holds in floating point too.
pub fn calibrate(iterations: u32, rho: f64) -> f64 {
    round_up_while((f64::from(iterations) / (2.0 * rho)).sqrt(), |s| {
        cost_of(iterations, s) > rho
    })
}

/// X₀ = Q(Ω), Ω a d×p standard Gaussian (Nicolas et al. Alg. 1 line 3).
pub fn initial_iterate(rng: &mut dyn RngCore, d: usize, p: usize) -> Matrix {
    let omega = Matrix::from_fn(d, p, |_, _| StandardNormal.sample(&mut *rng));
    thin_qr_q(&omega)
}
