//! Running a registered algorithm from the figure benches (`#[path = "support/run.rs"] mod
//! run;`): the context of a private records dataset and one seeded run of a prepared
//! configuration. Nothing here is part of the service.

#![allow(dead_code)]

use privpca::algorithms::{Cancelled, DataInput, DynAlgorithm, Output, RunEnv, RunError};
use privpca::dataset::{DataContext, Neighbours};
use privpca::linalg::Matrix;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde_json::Value;

/// The context of a private dataset of `n` records in d dimensions under replace_one, with
/// row-norm bound β and the default α = √d·β.
pub fn records_ctx(d: usize, n: usize, beta: f64) -> DataContext {
    DataContext {
        d,
        n: Some(n),
        neighbours: Neighbours::ReplaceOne {
            beta,
            alpha: (d as f64).sqrt() * beta,
        },
        public: false,
        sparse: false,
    }
}

/// Runs a configuration `prepare` returned on the records xt, with a ChaCha20 generator seeded
/// by `seed` and progress that never cancels.
pub fn run_prepared(
    alg: &dyn DynAlgorithm,
    config: &Value,
    xt: &Matrix,
    ctx: &DataContext,
    seed: u64,
) -> Result<Output, RunError> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut progress = |_: u32, _: u32| -> Result<(), Cancelled> { Ok(()) };
    let mut env = RunEnv::new(&mut rng, &mut progress);
    alg.run_prepared(config, DataInput::Records { xt: xt.into() }, ctx, &mut env)
}
