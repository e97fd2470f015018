//! Imtiaz & Sarwate, Fig. 3 (§VI-B): capeAGN on the mixture-of-Gaussians model, q^comp against
//! ε (top row) and against the per-site sample size N_s (bottom row), for (D, K) = (10, 5) and
//! (50, 10), σ² = 0.05, ‖a_k‖ ≤ 1, S = 5 sites, δ = 0.01, ε and δ split evenly between the
//! two stages (we split ρ evenly, which is the same thing in zCDP).
//!
//! Methods, baselines and accounting: `benches/support/otd.rs` (shared with the STM figure,
//! `benches/cape_agn_fig4.rs`).
//!
//! Data: means a_k = orthonormal directions (QR of a Gaussian matrix) with norms drawn in
//! [0.6, 1], weights ∝ 1 + k/(2K), x = a_h + N(0, σ²I). The public row bound is
//! β = max‖a_k‖ + σ(√D + 4) (a chi bound: clipping essentially never happens; the paper instead
//! divides by the data's max norm, a non-private step). (ε, δ) → ρ by the crate's conversion
//! (`PrivacyTarget::from_epsilon_delta`: the tightest of Bun–Steinke Prop. 1.3 and CKS 2020
//! Prop. 12), ρ/2 per stage.
//!
//! Run: `cargo bench --profile dev --bench cape_agn_fig3` (options after `--`: `--quick`,
//! `--reps R`). Prints markdown tables to stdout and writes docs/img/cape_agn_fig3_eps.png and
//! docs/img/cape_agn_fig3_ns.png. Nothing is asserted.

#[path = "support/cli.rs"]
mod cli;
#[path = "support/otd.rs"]
mod otd;
#[path = "support/plot.rs"]
mod plot;
#[path = "support/run.rs"]
mod run;

use otd::{Data, SITES, Spec, gaussian, pick, weights};
use privpca::algorithms::cape_agn::Model;
use privpca::linalg::{Matrix, thin_qr_q};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

const SIGMA2: f64 = 0.05;

fn make_data(d: usize, k: usize, ns: usize, seed: u64) -> Data {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let q = thin_qr_q(&Matrix::from_fn(d, k, |_, _| gaussian(&mut rng)));
    let truth: Vec<Vec<f64>> = (0..k)
        .map(|j| {
            let norm = rng.random_range(0.6..1.0);
            q.column(j).iter().map(|v| v * norm).collect()
        })
        .collect();
    let weights = weights(k);
    let sd = SIGMA2.sqrt();
    let n = ns * SITES;
    let mut xt = Matrix::zeros(d, n);
    for mut col in xt.column_iter_mut() {
        let h = pick(&mut rng, &weights);
        for (x, m) in col.iter_mut().zip(&truth[h]) {
            *x = m + sd * gaussian(&mut rng);
        }
    }
    let max_norm = truth
        .iter()
        .map(|a| a.iter().map(|v| v * v).sum::<f64>().sqrt())
        .fold(0.0, f64::max);
    let beta = max_norm + sd * ((d as f64).sqrt() + 4.0);
    // Clip at β (the service's rule: rows above β scaled onto the sphere).
    for mut col in xt.column_iter_mut() {
        let norm = col.norm();
        if norm > beta {
            col *= beta / norm;
        }
    }
    Data::split(truth, &xt, beta)
}

fn main() {
    let spec = Spec {
        model: Model::Mog,
        sigma2: SIGMA2,
        name: "MOG",
        prefix: "cape_agn_fig3",
    };
    otd::run_figure(spec, &otd::setups(&[]), make_data);
}
