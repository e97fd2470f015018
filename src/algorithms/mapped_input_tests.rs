//! Every algorithm of the registry gives the same output, bit for bit, on a stored file mapped
//! and streamed (pages released behind every pass) as on the same records held in memory: the
//! mapping changes where the bytes come from, never the arithmetic.

use std::io::Write;

use serde_json::json;

use super::testing::{seeded, sign_spiked_records};
use super::{Cancelled, DataInput, Output, RunEnv, registry};
use crate::dataset::{DataContext, Neighbours};
use crate::ingest;
use crate::privacy::PrivacyTarget;

#[test]
fn every_algorithm_gives_the_same_output_on_a_streamed_mapping() {
    let (d, n, k, beta) = (12, 3_000, 2, 4.0);
    let xt = sign_spiked_records(3, d, n, &[8.0, 4.0], 0.3, beta);
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    let bytes: Vec<u8> = xt.as_slice().iter().flat_map(|v| v.to_le_bytes()).collect();
    file.write_all(&bytes).expect("write");
    let stored = ingest::open_with(file.path(), n, d, 0).expect("open");
    assert!(stored.is_streamed());
    let ctx = DataContext {
        d,
        n: Some(n),
        neighbours: Neighbours::ReplaceOne {
            beta,
            alpha: (d as f64).sqrt() * beta,
        },
        public: true,
    };
    let target = PrivacyTarget {
        rho: 10.0,
        delta: Some(1e-5),
        epsilon: None,
    };
    // ρ = 200: what "ε 20" meant when k_dp_pca ran at ρ = ε²/2 (docs/k_dp_pca.md).
    let k_dp = PrivacyTarget {
        rho: 200.0,
        delta: Some(1e-5),
        epsilon: None,
    };
    for algorithm in registry() {
        let name = algorithm.info().name;
        let params = match name {
            "cape_agn" => json!({ "k": k, "model": "mog", "sigma2": 0.0 }),
            // The job options that copy the records run on the mapping too.
            "noisy_power" => json!({ "k": k, "with_eigenvalues": true }),
            "analyze_gauss" => json!({ "k": k, "center": "private" }),
            _ => json!({ "k": k }),
        };
        let target = if name == "k_dp_pca" { k_dp } else { target };
        let prepared = algorithm
            .prepare(params, &ctx, &target)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let run = |input: DataInput<'_>| -> Output {
            let mut rng = seeded(9);
            let mut progress = |_: u32, _: u32| -> Result<(), Cancelled> { Ok(()) };
            let mut env = RunEnv::new(&mut rng, &mut progress);
            algorithm
                .run_prepared(&prepared.config, input, &ctx, &mut env)
                .unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        let in_memory = run(DataInput::Records { xt: (&xt).into() });
        let mapped = run(DataInput::Records { xt: stored.records() });
        assert_eq!(mapped.basis, in_memory.basis, "{name}: bases differ");
        assert_eq!(
            mapped.eigenvalues, in_memory.eigenvalues,
            "{name}: eigenvalues differ"
        );
    }
}

/// With the records' statistics attached (what the runner does once a dataset's XᵀX is kept),
/// every algorithm gives the output it gives reading the records: exactly where the kernel
/// returns the same Gram matrix, and to rounding where it is derived (the centred Gram, the
/// projected energies).
#[test]
fn every_algorithm_gives_the_same_output_with_the_records_statistics() {
    let (d, n, k, beta) = (12, 3_000, 2, 4.0);
    let xt = sign_spiked_records(3, d, n, &[8.0, 4.0], 0.3, beta);
    let stats = crate::linalg::RecordStats::of((&xt).into());
    let ctx = DataContext {
        d,
        n: Some(n),
        neighbours: Neighbours::ReplaceOne {
            beta,
            alpha: (d as f64).sqrt() * beta,
        },
        public: true,
    };
    let target = PrivacyTarget {
        rho: 10.0,
        delta: Some(1e-5),
        epsilon: None,
    };
    // ρ = 200: what "ε 20" meant when k_dp_pca ran at ρ = ε²/2 (docs/k_dp_pca.md).
    let k_dp = PrivacyTarget {
        rho: 200.0,
        delta: Some(1e-5),
        epsilon: None,
    };
    for algorithm in registry() {
        let name = algorithm.info().name;
        let params = match name {
            "cape_agn" => json!({ "k": k, "model": "mog", "sigma2": 0.0 }),
            "noisy_power" => json!({ "k": k, "with_eigenvalues": true }),
            "analyze_gauss" => json!({ "k": k, "center": "private" }),
            _ => json!({ "k": k }),
        };
        let target = if name == "k_dp_pca" { k_dp } else { target };
        let prepared = algorithm
            .prepare(params, &ctx, &target)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let run = |input: DataInput<'_>| -> Output {
            let mut rng = seeded(9);
            let mut progress = |_: u32, _: u32| -> Result<(), Cancelled> { Ok(()) };
            let mut env = RunEnv::new(&mut rng, &mut progress);
            algorithm
                .run_prepared(&prepared.config, input, &ctx, &mut env)
                .unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        let plain = run(DataInput::Records { xt: (&xt).into() });
        let with_stats = run(DataInput::Records {
            xt: crate::linalg::Records::from(&xt).with_stats(&stats),
        });
        let diff = (&with_stats.basis - &plain.basis).amax();
        assert!(diff <= 1e-8, "{name}: bases differ by {diff:e}");
        match (&with_stats.eigenvalues, &plain.eigenvalues) {
            (Some(a), Some(b)) => {
                for (x, y) in a.iter().zip(b) {
                    assert!(
                        (x - y).abs() <= 1e-8 * y.abs().max(1.0),
                        "{name}: eigenvalues {a:?} vs {b:?}"
                    );
                }
            }
            (a, b) => assert_eq!(a.is_some(), b.is_some(), "{name}"),
        }
    }
}
