//! A symmetric-matrix upload: its rows are held (symmetry can only be checked once all are
//! in), checked, replaced by the exact symmetrisation (A + Aᵀ)/2 and written row by row.

use std::io::{self, Write};

/// Entries (i, j) and (j, i) may differ by this much, relative to max(1, max |a|).
pub(super) const SYMMETRY_TOLERANCE: f64 = 1e-9;

/// Pairs are visited in tiles of this side, so that reading column j stays in cache.
const TILE: usize = 64;

/// The first `m` rows of a matrix upload, each exactly `m` values (1× the f64 matrix).
#[derive(Debug, Default)]
pub(super) struct SymmetricRows {
    rows: Vec<Box<[f64]>>,
    max_abs: f64,
}

impl SymmetricRows {
    /// Keeps `row` if fewer than `row.len()` rows are held (further rows only count towards
    /// the caller's NotSquare error).
    pub(super) fn push(&mut self, row: &[f64]) {
        if self.rows.len() < row.len() {
            self.max_abs = row.iter().fold(self.max_abs, |m, v| m.max(v.abs()));
            self.rows.push(row.into());
        }
    }

    /// Checks |a_ij − a_ji| ≤ 1e-9·max(1, max|a|) for every pair and replaces both entries by
    /// (a_ij + a_ji)/2. On failure returns the 0-based (i, j), i < j, of a violating pair.
    pub(super) fn symmetrise(&mut self) -> Result<(), (usize, usize)> {
        let m = self.rows.len();
        let tol = SYMMETRY_TOLERANCE * self.max_abs.max(1.0);
        for bi in (0..m).step_by(TILE) {
            for bj in (bi..m).step_by(TILE) {
                for i in bi..(bi + TILE).min(m) {
                    for j in bj.max(i + 1)..(bj + TILE).min(m) {
                        let (a, b) = (self.rows[i][j], self.rows[j][i]);
                        // Written so that a NaN or infinite difference fails too.
                        let close = (a - b).abs() <= tol;
                        if !close {
                            return Err((i, j));
                        }
                        let mean = mean(a, b);
                        self.rows[i][j] = mean;
                        self.rows[j][i] = mean;
                    }
                }
            }
        }
        Ok(())
    }

    /// Writes the held rows as row-major little-endian f64.
    pub(super) fn write_to(&self, out: &mut impl Write) -> io::Result<()> {
        let mut bytes = Vec::new();
        for row in &self.rows {
            bytes.clear();
            bytes.extend(row.iter().flat_map(|v| v.to_le_bytes()));
            out.write_all(&bytes)?;
        }
        Ok(())
    }
}

/// (a + b)/2, symmetric in a and b bit for bit (addition commutes), without overflow.
pub(super) fn mean(a: f64, b: f64) -> f64 {
    let s = a + b;
    if s.is_finite() { s * 0.5 } else { a * 0.5 + b * 0.5 }
}

#[cfg(test)]
#[path = "symmetric_tests.rs"]
mod tests;
