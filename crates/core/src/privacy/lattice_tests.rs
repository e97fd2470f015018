//! The grid and the sensitivity rounding: the integer vectors of neighbouring queries are never
//! further apart than the widened noise was calibrated for.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use super::*;

#[test]
fn the_grid_is_a_power_of_two_2_to_the_30_below_the_scale() {
    for s in [1e-290, 3e-9, 0.37, 1.0, 2.0, 1e6, 1e300] {
        let h = grid_for(s).unwrap();
        assert_eq!(h.to_bits() & ((1u64 << 52) - 1), 0, "{h} is a power of two");
        let ratio = s / h;
        assert!(
            ratio >= (1u64 << 30) as f64 && ratio < (1u64 << 31) as f64,
            "s/h = {ratio}"
        );
    }
    assert!(grid_for(0.0).is_err() && grid_for(f64::NAN).is_err() && grid_for(1e-310).is_err());
}

/// For random neighbouring queries (‖q − q'‖₂ ≤ Δ), the integer vectors k = round(q/h) satisfy
/// ‖k − k'‖₂/σ_Z ≤ Δ/σ: the zCDP cost on the lattice (CKS Thm. 14) is at most the charged
/// Δ²/(2σ²). Coordinates are chosen near half-grid points, where rounding hurts most.
#[test]
fn rounded_neighbours_never_cost_more_than_charged() {
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    for trial in 0..200 {
        let m = 1 + trial % 50;
        let sd: f64 = rng.random_range(1e-3..1e3);
        // Tiny sensitivities make the grid penalty visible (Δ/σ ≈ 2⁻²⁸).
        let delta = sd * rng.random_range(1e-9..1e-8);
        let lattice = GaussianLattice::new(sd, delta, m).unwrap();
        let h = lattice.grid();
        let q: Vec<f64> = (0..m)
            .map(|_| (rng.random_range(-1e3..1e3_f64)).round() * h + 0.4999 * h)
            .collect();
        let direction: Vec<f64> = (0..m).map(|_| rng.random_range(-1.0..1.0_f64)).collect();
        let norm = direction.iter().map(|v| v * v).sum::<f64>().sqrt();
        let q2: Vec<f64> = q
            .iter()
            .zip(&direction)
            .map(|(a, u)| a + u / norm * delta)
            .collect();
        let distance: f64 = q
            .iter()
            .zip(&q2)
            .map(|(a, b)| {
                let (ka, kb) = (to_grid(*a, h).unwrap(), to_grid(*b, h).unwrap());
                ((ka - kb) as f64).powi(2)
            })
            .sum::<f64>()
            .sqrt();
        let sd_z = (lattice.sampler.variance() as f64).sqrt();
        assert!(
            distance / sd_z <= delta / sd,
            "trial {trial}: {} > {}",
            distance / sd_z,
            delta / sd
        );
    }
}

#[test]
fn widening_is_negligible_at_realistic_sizes() {
    // analyze_gauss at d = 1000 (m = 500 500), ρ = 10⁻³: σ = Δ/√(2ρ).
    let delta = 1.0;
    let sd = delta / (2.0 * 1e-3_f64).sqrt();
    let lattice = GaussianLattice::new(sd, delta, 500_500).unwrap();
    let widening = lattice.sd() / sd - 1.0;
    assert!(widening > 0.0 && widening < 2e-5, "widening {widening:e}");
    let laplace = LaplaceLattice::new(2.0, 1.0, 10).unwrap();
    assert!(laplace.scale() >= 2.0 && laplace.scale() / 2.0 - 1.0 < 1e-7);
}
