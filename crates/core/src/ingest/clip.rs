//! Per-row clipping of records (docs/design/privacy.md §1):
//! x ← x·min(1, β/‖x‖₂), then, if α is set, x ← x·min(1, α/‖x‖₁).
//!
//! The scale depends on the row alone and on public bounds, never on other rows, so it costs
//! no privacy. Floating-point rounding is handled against the data: a computed norm of a
//! d-vector can be below the exact one by a relative γ ≈ d·u (u = f64::EPSILON/2, Higham,
//! *Accuracy and Stability of Numerical Algorithms*, §3.1), so rows are clipped to
//! β·(1 − (d + 8)·ε) in computed norm. That makes the exact norm of the stored floats ≤ β,
//! which is what the sensitivity arguments of the algorithms need. Rows already within that
//! target are left bit-for-bit untouched. The scaling itself is [`crate::linalg::clip`], shared
//! with every job-time step that scales rows to a bound.

use super::IngestError;
use crate::linalg::clip::{clip_l1, clip_l2};

/// Validated clipping bounds of a records dataset.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowClip {
    beta: f64,
    alpha: Option<f64>,
}

impl RowClip {
    /// `beta` = `row_norm_bound` (L2), `alpha` = optional `row_l1_bound`; both must be finite
    /// and > 0.
    pub fn new(beta: f64, alpha: Option<f64>) -> Result<RowClip, IngestError> {
        if !(beta > 0.0 && beta.is_finite()) {
            return Err(IngestError::InvalidBounds(
                "row_norm_bound must be finite and > 0",
            ));
        }
        if let Some(a) = alpha
            && !(a > 0.0 && a.is_finite())
        {
            return Err(IngestError::InvalidBounds("row_l1_bound must be finite and > 0"));
        }
        Ok(RowClip { beta, alpha })
    }

    /// Clips `row` in place. Its values must be finite (the caller has checked).
    pub fn apply(&self, row: &mut [f64]) {
        clip_l2(row, self.beta);
        if let Some(alpha) = self.alpha {
            clip_l1(row, alpha);
        }
    }
}

#[cfg(test)]
#[path = "clip_tests.rs"]
mod tests;
