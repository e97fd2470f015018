//! The records' second-moment statistics: the Gram matrix XᵀX (d×d), the column sums Xᵀ1 (d)
//! and n. Every kernel the algorithms apply to records as a whole is a function of them:
//!
//! - XᵀX itself ([`super::gram_t`]);
//! - the Gram matrix centred at any μ: Σ(x_i − μ)(x_i − μ)ᵀ = XᵀX − sμᵀ − μsᵀ + nμμᵀ, with s = Xᵀ1
//!   ([`super::centred_gram_t`]; at μ = s/n this is XᵀX − ssᵀ/n);
//! - the product Xᵀ(XV) = (XᵀX)V ([`super::gram_t_times`]);
//! - the energies ‖Xq_j‖² = q_jᵀ(XᵀX)q_j ([`super::projected_energy`]).
//!
//! So once a dataset's statistics are computed (one O(nd²) pass) and kept beside its data, a
//! job that uses the records unchanged costs O(d³) whatever n is. They are computed by one
//! streamed pass ([`RecordStats::of`], in `stream.rs` beside the other passes) and
//! [`Records::with_stats`](super::Records::with_stats) attaches them to a view; the kernels use
//! them when present. Records changed in any way (clipped,
//! centred, a block of them) are new data and carry none; the statistics of records clipped at
//! any bound follow from blocks kept beside these ([`super::clip_blocks`]). The statistics are as sensitive as the
//! data: they stay inside the service like the data file and never leave it.
//!
//! This module holds the values only and imports neither the records view nor the kernels,
//! which both use it.

use super::{Matrix, Vector};

/// XᵀX, Xᵀ1 and n of a records dataset Xᵀ (d × n).
#[derive(Debug, Clone, PartialEq)]
pub struct RecordStats {
    /// Number of records.
    pub n: usize,
    /// Σ_i x_i x_iᵀ (d×d, exactly symmetric).
    pub gram: Matrix,
    /// Σ_i x_i (d).
    pub sums: Vector,
}

impl RecordStats {
    /// Features per record.
    pub fn d(&self) -> usize {
        self.sums.len()
    }

    /// Whether these statistics can be those of `d`-feature records with `n` records: the
    /// shapes agree and every value is finite (a corrupt cache is refused, not used).
    pub fn fits(&self, d: usize, n: usize) -> bool {
        self.n == n
            && self.gram.nrows() == d
            && self.gram.ncols() == d
            && self.sums.len() == d
            && self.gram.iter().chain(self.sums.iter()).all(|v| v.is_finite())
    }

    /// Σ(x_i − μ)(x_i − μ)ᵀ = XᵀX − sμᵀ − μsᵀ + nμμᵀ, mirrored to exact symmetry.
    pub fn centred_gram(&self, mean: &Vector) -> Matrix {
        let n = self.n as f64;
        let d = self.d();
        let mut g = self.gram.clone();
        for j in 0..d {
            for i in j..d {
                let v = g[(i, j)] - self.sums[i] * mean[j] - mean[i] * self.sums[j] + n * mean[i] * mean[j];
                g[(i, j)] = v;
                g[(j, i)] = v;
            }
        }
        g
    }
}
