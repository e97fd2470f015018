use super::*;
use crate::ingest::{Format, Limits, Shape, ingest_with_stats};
use crate::linalg::Matrix;

/// Xᵀ (d × n) with values of both signs and uneven magnitudes.
fn records(d: usize, n: usize) -> Matrix {
    Matrix::from_fn(d, n, |i, j| {
        ((i * 7 + j * 13) % 17) as f64 / 7.0 - 1.1 + (j as f64).sqrt() * 1e-3
    })
}

/// The statistics a stream with blocks of `block_len` records builds from the records of `xt`.
fn streamed(xt: &Matrix, block_len: Option<usize>) -> Option<RecordStats> {
    let mut stream = StatsStream {
        block_len,
        ..StatsStream::default()
    };
    for record in xt.column_iter() {
        stream.push(record.as_slice());
    }
    stream.finish().map(|s| s.stats)
}

#[test]
fn streamed_statistics_equal_one_pass_over_the_stored_records_bit_for_bit() {
    for (d, n) in [(1, 1), (3, 200), (17, 5), (40, 1000)] {
        let xt = records(d, n);
        let want = RecordStats::of((&xt).into());
        assert_eq!(streamed(&xt, None), Some(want), "d={d} n={n}");
    }
}

#[test]
fn blocks_of_any_length_give_the_pass_over_the_same_blocks() {
    let (d, n) = (9, 400);
    let xt = records(d, n);
    let whole = RecordStats::of((&xt).into());
    for block_len in [1, 3, 37, 399, 400, 401] {
        let got = streamed(&xt, Some(block_len)).expect("statistics");
        // The same blocks through the accumulator: bit for bit.
        let mut acc = StatsAccumulator::new(d);
        let mut start = 0;
        while start < n {
            let len = block_len.min(n - start);
            acc.add(Records::from(&xt).block(start, len));
            start += len;
        }
        assert_eq!(got, acc.finish(), "block_len={block_len}");
        // Other block boundaries round differently, by a few ulps of the sums at most.
        assert_eq!(got.n, n);
        assert_eq!(got.gram, got.gram.transpose(), "exactly symmetric");
        let scale = n as f64 * 3.0 * 3.0;
        assert!((&got.gram - &whole.gram).amax() <= 8.0 * n as f64 * f64::EPSILON * scale);
        assert!((&got.sums - &whole.sums).amax() <= 8.0 * n as f64 * f64::EPSILON * 3.0 * n as f64);
    }
}

#[test]
fn no_rows_give_no_statistics() {
    assert_eq!(StatsStream::default().finish(), None);
}

#[test]
fn an_upload_returns_the_statistics_of_the_clipped_rows_it_stored() {
    // Rows of norm up to ~4 against a bound of 1: most are clipped before they are counted.
    let (d, n) = (5, 300);
    let xt = records(d, n) * 2.0;
    let body: String = xt
        .column_iter()
        .map(|r| r.iter().map(|v| format!("{v:e}")).collect::<Vec<_>>().join(",") + "\n")
        .collect();
    let limits = Limits {
        max_bytes: 1 << 20,
        max_rows: 1_000,
        max_d: 10,
    };
    let shape = Shape::Records {
        beta: 1.0,
        alpha: None,
    };
    let mut stored = Vec::new();
    let (ingested, stats) =
        ingest_with_stats(body.as_bytes(), Format::Csv, shape, &limits, &mut stored).expect("valid");
    assert_eq!((ingested.n, ingested.d), (n as u64, d as u64));
    let values: Vec<f64> = stored
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let stored = Matrix::from_column_slice(d, n, &values);
    assert!(stored.column_iter().all(|r| r.norm() <= 1.0 + 1e-12), "clipped");
    let streamed = stats.expect("built");
    assert_eq!(streamed.stats, RecordStats::of((&stored).into()));
    assert_eq!(
        streamed.norms,
        Records::from(&stored).norms().into_owned(),
        "bit for bit"
    );

    // A matrix upload has none; a failed upload returns nothing.
    let square = b"1,2\n2,1\n";
    let (_, none) = ingest_with_stats(
        &square[..],
        Format::Csv,
        Shape::SymmetricMatrix,
        &limits,
        Vec::new(),
    )
    .unwrap();
    assert_eq!(none, None);
    let ragged = b"1,0\n0,1\n1\n";
    assert!(ingest_with_stats(&ragged[..], Format::Csv, shape, &limits, Vec::new()).is_err());
}
