//! Every algorithm of the registry gives the same output, bit for bit, on a stored file mapped
//! and streamed (pages released behind every pass) as on the same records held in memory: the
//! mapping changes where the bytes come from, never the arithmetic.

use std::io::Write;

use serde_json::json;

use super::testing::{
    least_params, public_records_ctx, registry_target, run_prepared_audited, sign_spiked_records,
};
use super::{DataInput, Output, registry};
use crate::ingest;
use crate::linalg::Matrix;

/// d, n, k and β of both tests.
const SHAPE: (usize, usize, usize, f64) = (12, 3_000, 2, 4.0);

/// The spiked records both tests run on.
fn records() -> Matrix {
    let (d, n, _, beta) = SHAPE;
    sign_spiked_records(3, (d, n), &[8.0, 4.0], 0.3, beta)
}

/// Runs every algorithm of the registry (ρ 10, the job options that copy the records
/// included) on `reference` and on `other` with the same seed, and hands the name and both
/// outputs to `compare`.
fn compare_every_algorithm(
    reference: DataInput<'_>,
    other: DataInput<'_>,
    compare: impl Fn(&str, &Output, &Output),
) {
    let (d, n, k, beta) = SHAPE;
    let ctx = public_records_ctx(d, n, beta);
    for algorithm in registry() {
        let name = algorithm.info().name;
        let params = match name {
            // The job options that copy the records run on the mapping too.
            "noisy_power" => json!({ "k": k, "with_eigenvalues": true }),
            "analyze_gauss" => json!({ "k": k, "center": "private" }),
            _ => least_params(name, k),
        };
        let prepared = algorithm
            .prepare(params, &ctx, &registry_target(name, 10.0))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let run = |input: DataInput<'_>| -> Output {
            let (out, _) = run_prepared_audited(*algorithm, &prepared.config, input, &ctx, 9);
            out.unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        compare(name, &run(reference), &run(other));
    }
}

#[test]
fn every_algorithm_gives_the_same_output_on_a_streamed_mapping() {
    let (d, n, _, _) = SHAPE;
    let xt = records();
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    let bytes: Vec<u8> = xt.as_slice().iter().flat_map(|v| v.to_le_bytes()).collect();
    file.write_all(&bytes).expect("write");
    let stored = ingest::open_with(file.path(), n, d, 0).expect("open");
    assert!(stored.is_streamed());
    compare_every_algorithm(
        DataInput::Records { xt: (&xt).into() },
        DataInput::Records { xt: stored.records() },
        |name, in_memory, mapped| {
            assert_eq!(mapped.basis, in_memory.basis, "{name}: bases differ");
            assert_eq!(
                mapped.eigenvalues, in_memory.eigenvalues,
                "{name}: eigenvalues differ"
            );
        },
    );
}

/// With the records' statistics attached (what the runner does once a dataset's XᵀX is kept),
/// every algorithm gives the output it gives reading the records: exactly where the kernel
/// returns the same Gram matrix, and to rounding where it is derived (the centred Gram, the
/// projected energies).
#[test]
fn every_algorithm_gives_the_same_output_with_the_records_statistics() {
    let xt = records();
    let stats = crate::linalg::RecordStats::of((&xt).into());
    compare_every_algorithm(
        DataInput::Records { xt: (&xt).into() },
        DataInput::Records {
            xt: crate::linalg::Records::from(&xt).with_stats(&stats),
        },
        |name, plain, with_stats| {
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
        },
    );
}
