//! Upload parsing throughput and memory. Run with `cargo bench --bench ingest`; results are
//! recorded in docs/performance-ingest.md (nothing is asserted here).
//!
//! For each format a ~200 MB body of 200 000 × 100 random values is generated in memory and
//! ingested into `io::sink()` on one thread; the best of three runs is reported in MB/s of
//! input. "Extra memory" is the growth of the peak resident set during the ingest, measured by
//! resetting the kernel's high-water mark (`/proc/self/clear_refs`, Linux) before each run.

use std::fmt::Write as _;
use std::io;
use std::time::Instant;

use privpca::ingest::{Format, Limits, Shape, ingest};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

const LIMITS: Limits = Limits {
    max_bytes: u64::MAX,
    max_rows: u64::MAX,
    max_d: 100_000,
};
const RECORDS: Shape = Shape::Records {
    beta: 10.0,
    alpha: Some(50.0),
};

fn main() {
    let (n, d) = (200_000, 100);
    let values = random(n * d, 1);
    println!("| input | shape | size (MB) | MB/s (best of 3) | extra peak memory (MB) |");
    println!("|---|---|---|---|---|");

    let csv = csv_text(&values, d, |s, v| write!(s, "{v:.8}"));
    report("CSV, 8 decimals", n, d, &csv, Format::Csv, RECORDS);
    drop(csv);
    let csv = csv_text(&values[..n / 2 * d], d, |s, v| write!(s, "{v}"));
    report(
        "CSV, shortest round-trip (~19 chars)",
        n / 2,
        d,
        &csv,
        Format::Csv,
        RECORDS,
    );
    drop(csv);
    let json = json_text(&values, d);
    report("JSON, 8 decimals", n, d, &json, Format::Json, RECORDS);
    drop(json);
    let npy = npy_bytes(&values, n, d);
    report("NPY <f8", n, d, &npy, Format::Npy, RECORDS);
    drop(npy);

    // A symmetric matrix is held whole: memory relative to the f64 matrix (8·m² bytes).
    let m = 3000;
    let a = random(m * m, 2);
    let sym: Vec<f64> = (0..m * m)
        .map(|k| (a[k] + a[(k % m) * m + k / m]) / 2.0)
        .collect();
    let csv = csv_text(&sym, m, |s, v| write!(s, "{v}"));
    let extra = report(
        "CSV symmetric matrix",
        m,
        m,
        &csv,
        Format::Csv,
        Shape::SymmetricMatrix,
    );
    println!(
        "\nsymmetric matrix: extra peak memory / f64 matrix = {:.2}",
        extra / (8.0 * (m * m) as f64 / 1e6)
    );
}

fn random(count: usize, seed: u64) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..count).map(|_| StandardNormal.sample(&mut rng)).collect()
}

fn csv_text(values: &[f64], d: usize, fmt: impl Fn(&mut String, f64) -> std::fmt::Result) -> Vec<u8> {
    let mut s = String::with_capacity(values.len() * 20);
    for row in values.chunks(d) {
        for (j, &v) in row.iter().enumerate() {
            if j > 0 {
                s.push(',');
            }
            fmt(&mut s, v).expect("format into a String");
        }
        s.push('\n');
    }
    s.into_bytes()
}

fn json_text(values: &[f64], d: usize) -> Vec<u8> {
    let mut s = String::with_capacity(values.len() * 13);
    s.push('[');
    for (i, row) in values.chunks(d).enumerate() {
        s.push_str(if i > 0 { ",[" } else { "[" });
        for (j, &v) in row.iter().enumerate() {
            if j > 0 {
                s.push(',');
            }
            write!(s, "{v:.8}").expect("format into a String");
        }
        s.push(']');
    }
    s.push(']');
    s.into_bytes()
}

fn npy_bytes(values: &[f64], n: usize, d: usize) -> Vec<u8> {
    let mut file = privpca::http::jobs::npy_header(n, d);
    file.extend(values.iter().flat_map(|v| v.to_le_bytes()));
    file
}

/// Runs the ingest three times, prints a table row, returns the extra peak memory in MB.
fn report(name: &str, n: usize, d: usize, input: &[u8], format: Format, shape: Shape) -> f64 {
    let mb = input.len() as f64 / 1e6;
    let mut best = f64::INFINITY;
    let mut extra = 0.0f64;
    for _ in 0..3 {
        let before = reset_peak();
        let start = Instant::now();
        let got = ingest(input, format, shape, &LIMITS, io::sink()).expect("the generated input is valid");
        best = best.min(start.elapsed().as_secs_f64());
        assert_eq!((got.n, got.d), (n as u64, d as u64));
        if let (Some(before), Some(peak)) = (before, status_kb("VmHWM")) {
            extra = extra.max((peak.saturating_sub(before)) as f64 / 1e3);
        }
    }
    println!("| {name} | {n} × {d} | {mb:.0} | {:.0} | {extra:.1} |", mb / best);
    extra
}

/// Resets the peak-RSS mark and returns the current RSS in kB (None off Linux).
fn reset_peak() -> Option<u64> {
    std::fs::write("/proc/self/clear_refs", "5").ok()?;
    status_kb("VmRSS")
}

fn status_kb(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
