//! Private centring in a live `cape_pca` study (issue 38; docs/design/cape.md, "Private
//! centring"): a CAPE stage before the clip's that releases the sum of the sites' rows, after
//! which every site maps each row to clip(x − μ̂) for the clip's counts and the Gram stage.
//!
//! **The statistic.** Site s releases, in CAPE's sum form, a_s = Σ_{x at s} x (d values; its
//! rows are clipped to β at load) under `replace_one`, and a_s = (Σ_{x at s} x, β·n_s) (d + 1
//! values) under `add_remove`. One record of site s moves a_s by x' − x (‖·‖₂ ≤ 2β) under
//! `replace_one`, and by (x, β) (‖·‖₂ ≤ √2·β) under `add_remove`: Δ = 2β or √2·β, the same for
//! every site whatever n_s, as CAPE's calibration needs ([`super::cape_noise`]).
//!
//! **The same noise as the central mean.** CAPE calibrates the stage to its share ρ_c with
//! pooled sd τ_c = Δ/√(2ρ_c) per coordinate. Under `replace_one` that is the central private
//! mean's 2β/√(2ρ_c). Under `add_remove` the central mean spends ρ_c/2 on the sum (Δ = β, sd
//! β/√ρ_c) and ρ_c/2 on the count (Δ = 1, sd 1/√ρ_c); here one Gaussian mechanism on (S, β·n) at
//! ρ_c with Δ = √2·β has sd β/√ρ_c on every coordinate, i.e. β/√ρ_c on S and 1/√ρ_c on n, the
//! same noise at the same cost (docs/design/privacy.md §1.3).
//!
//! **After it.** μ̂ = S̃/n with n the pooled public n of the stage's survivors (`replace_one`),
//! or S̃/max(ñ, 1), ñ = (β·n)~/β (`add_remove`). Given μ̂, x ↦ clip(x − μ̂) to β and α is a fixed
//! row map: the later stages' Δ hold unchanged and their shares compose with ρ_c. A given
//! (public) centre takes no stage and costs nothing.

use serde::{Deserialize, Serialize};

use super::centering::CenterRequest;
use crate::dataset::Neighbours;
use crate::linalg::Matrix;

/// A `cape_pca` study's centre, as stored in its configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case", deny_unknown_fields)]
pub enum CapeCenter {
    /// A public centre: every site maps its rows by it; no stage, no cost.
    Given { vector: Vec<f64> },
    /// A private mean: one stage calibrated to `share` of the charged ρ.
    Private { share: f64 },
}

/// β of a records relation, and whether it is `add_remove`.
fn bounds(neighbours: &Neighbours) -> Result<(f64, bool), String> {
    match *neighbours {
        Neighbours::ReplaceOne { beta, .. } => Ok((beta, false)),
        Neighbours::AddRemove { beta, .. } => Ok((beta, true)),
        Neighbours::Entry { .. } => Err("centring applies to records only".into()),
    }
}

impl CapeCenter {
    /// The centre a study asked for ([`super::centering::request`] validated it).
    pub fn from_request(request: CenterRequest) -> CapeCenter {
        match request {
            CenterRequest::Private { share } => CapeCenter::Private { share },
            CenterRequest::Given(vector) => CapeCenter::Given { vector },
        }
    }

    /// Stages the centre takes: 1 for a private mean, 0 for a given centre.
    pub fn stages(&self) -> u32 {
        u32::from(self.share().is_some())
    }

    /// The private mean's share of the charged ρ.
    pub fn share(&self) -> Option<f64> {
        match self {
            CapeCenter::Private { share } => Some(*share),
            CapeCenter::Given { .. } => None,
        }
    }

    /// The given centre, if this is one.
    pub fn given(&self) -> Option<&[f64]> {
        match self {
            CapeCenter::Given { vector } => Some(vector),
            CapeCenter::Private { .. } => None,
        }
    }

    /// Δ of the centre's statistic: 2β (`replace_one`) or √2·β (`add_remove`).
    pub fn sensitivity(neighbours: &Neighbours) -> Result<f64, String> {
        let (beta, add_remove) = bounds(neighbours)?;
        Ok(if add_remove {
            2f64.sqrt() * beta
        } else {
            2.0 * beta
        })
    }

    /// Values of the centre's statistic: d, and β·n under `add_remove`.
    pub fn len(neighbours: &Neighbours, d: usize) -> usize {
        d + usize::from(matches!(neighbours, Neighbours::AddRemove { .. }))
    }

    /// A site's statistic from its rows `xt` (d×n, each of norm ≤ β): Σ x, and β·n under
    /// `add_remove`.
    pub fn statistic(xt: &Matrix, d: usize, neighbours: &Neighbours) -> Result<Vec<f64>, String> {
        let (beta, add_remove) = bounds(neighbours)?;
        if xt.ncols() > 0 && xt.nrows() != d {
            return Err("the rows have the wrong dimension".into());
        }
        if xt.column_iter().any(|x| !(x.norm() <= beta)) {
            return Err("the site's rows are not clipped to the study's β".into());
        }
        let mut values: Vec<f64> = (0..d)
            .map(|i| if xt.ncols() == 0 { 0.0 } else { xt.row(i).sum() })
            .collect();
        if add_remove {
            values.push(beta * xt.ncols() as f64);
        }
        Ok(values)
    }

    /// μ̂ from the stage's noisy sum: S̃/n with `public_n` the survivors' pooled n
    /// (`replace_one`), S̃/max(ñ, 1) with ñ the noisy β·n over β (`add_remove`).
    pub fn decode(
        sum: &[f64],
        d: usize,
        neighbours: &Neighbours,
        public_n: Option<u64>,
    ) -> Result<Vec<f64>, String> {
        let (beta, add_remove) = bounds(neighbours)?;
        if sum.len() != Self::len(neighbours, d) {
            return Err("the centre's sum has the wrong length".into());
        }
        let n = if add_remove {
            (sum[d] / beta).max(1.0)
        } else {
            match public_n {
                Some(n) if n > 0 => n as f64,
                _ => return Err("the centre's survivors report no records".into()),
            }
        };
        let mu: Vec<f64> = sum[..d].iter().map(|s| s / n).collect();
        super::study_center::check_center(&mu, d)?;
        Ok(mu)
    }

    /// The site's check of the stored centre: a share in (0, 1), or d finite numbers.
    pub fn check(&self, d: usize) -> Result<(), String> {
        match self {
            CapeCenter::Private { share } if *share > 0.0 && *share < 1.0 => Ok(()),
            CapeCenter::Private { .. } => Err("the centre's share must lie in (0, 1)".into()),
            CapeCenter::Given { vector } => super::study_center::check_center(vector, d),
        }
    }
}

#[cfg(test)]
#[path = "cape_center_tests.rs"]
mod tests;
