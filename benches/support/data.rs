//! The real datasets of the figure benches (`#[path = "support/data.rs"] mod data;`): numeric
//! CSV files under `data/real/`, one record a line. Nothing here is part of the service.

#![allow(dead_code)]

use std::path::Path;

use privpca::linalg::Matrix;

/// The records of a numeric CSV file without a header, transposed (d×n, one record a column);
/// `None` when the file cannot be read. Blank lines are skipped; a field that is not a number
/// panics.
pub fn read_csv(path: &Path) -> Option<Matrix> {
    let text = std::fs::read_to_string(path).ok()?;
    let rows: Vec<Vec<f64>> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            l.split(',')
                .map(|v| v.trim().parse::<f64>().expect("number"))
                .collect()
        })
        .collect();
    let (n, d) = (rows.len(), rows[0].len());
    Some(Matrix::from_fn(d, n, |i, j| rows[j][i]))
}
