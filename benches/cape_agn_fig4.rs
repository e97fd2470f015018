//! Imtiaz & Sarwate, Fig. 4 (§VI-B) and the bottom row of Fig. 5: capeAGN on the single topic
//! model (STM), q^comp against ε and against the per-site sample size N_s (Fig. 4) and against δ
//! (Fig. 5, bottom row), for (D, K) = (10, 5) and (50, 10), S = 5 sites, δ = 0.01 (ε and N_s
//! sweeps), ε and δ split evenly between the two stages (we split ρ evenly, which is the same
//! thing in zCDP). Components are post-processed to probability vectors before q^comp, as in
//! the paper (`cape_agn`'s un-whitening does it for every method).
//!
//! Methods, baselines and accounting: `benches/support/otd.rs` (shared with the MOG figure,
//! `benches/cape_agn_fig3.rs`).
//!
//! Data (the paper says only "pre-determined w and {a_k}"): topic k's word distribution a_k puts
//! weight 1 on the words i ≡ k (mod K) and 0.1 elsewhere, each weight multiplied by a draw in
//! [0.75, 1.25], then normalised; topic weights w_k ∝ 1 + k/(2K). Each document draws its topic
//! from w and L = 3 words iid from a_h (the paper's estimator uses a document's first three
//! words), and is recorded as its word-count vector. Public bounds β = 3 (‖c‖₂ ≤ L) and the
//! default α = √D·β ≥ L = ‖c‖₁, so nothing is clipped; the STM sensitivities (√2 per stage
//! under replace_one) do not depend on them.
//!
//! Run: `cargo bench --profile dev --bench cape_agn_fig4` (options after `--`: `--quick`,
//! `--reps R`). Prints markdown tables to stdout and writes docs/img/cape_agn_fig4_eps.png,
//! docs/img/cape_agn_fig4_ns.png and docs/img/cape_agn_fig4_delta.png. Nothing is asserted.

#[path = "support/cli.rs"]
mod cli;
#[path = "support/otd.rs"]
mod otd;
#[path = "support/plot.rs"]
mod plot;
#[path = "support/run.rs"]
mod run;

use otd::{Data, SITES, Spec, pick, weights};
use privpca::algorithms::cape_agn::Model;
use privpca::linalg::Matrix;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

/// Words per document.
const WORDS: usize = 3;

fn make_data(d: usize, k: usize, ns: usize, seed: u64) -> Data {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let truth: Vec<Vec<f64>> = (0..k)
        .map(|j| {
            let a: Vec<f64> = (0..d)
                .map(|i| (if i % k == j { 1.0 } else { 0.1 }) * rng.random_range(0.75..1.25))
                .collect();
            let total: f64 = a.iter().sum();
            a.iter().map(|x| x / total).collect()
        })
        .collect();
    let weights = weights(k);
    let n = ns * SITES;
    let mut xt = Matrix::zeros(d, n);
    for mut col in xt.column_iter_mut() {
        let h = pick(&mut rng, &weights);
        for _ in 0..WORDS {
            col[pick(&mut rng, &truth[h])] += 1.0;
        }
    }
    Data::split(truth, &xt, WORDS as f64)
}

fn main() {
    let spec = Spec {
        model: Model::Stm,
        sigma2: 0.0,
        name: "STM",
        prefix: "cape_agn_fig4",
    };
    otd::run_figure(
        spec,
        &otd::setups(&[1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.1]),
        make_data,
    );
}
