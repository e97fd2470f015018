//! Algorithm `auto` (docs/design/algorithms.md, "Decisions after the first implementation"): the service
//! picks a central algorithm from public facts only — the dataset's kind, relation, d, whether
//! it is public — never from the data. The job records which algorithm ran.
//!
//! The rule, backed by the utility tables in `docs/utility.md` (spiked model and the
//! scikit-learn datasets, every algorithm at the same budget):
//! 1. A `public: true` dataset needs no privacy: `exact`.
//! 2. Otherwise `analyze_gauss` while the d×d Gram matrix is cheap (d ≤ [`GRAM_MAX_D`]): it
//!    captured the most energy in every cell of our tables, at every budget, on both relations
//!    and on matrices; `noisy_power` trailed it, and `k_dp_pca`, `dp_oja`, `coherent_power` and
//!    `eigen_sampling` trailed further (docs/utility.md).
//! 3. For larger d, `noisy_power`: O(ndp) per iteration and O(dp) memory, where analyze_gauss
//!    needs O(d²) memory and an O(d³) eigendecomposition.
//!
//! Each candidate is tried in order with the job's parameters; the first that accepts them
//! runs. If none does, the job is refused with every candidate's reason.

use crate::dataset::DataContext;

/// The name clients send.
pub const AUTO: &str = "auto";

/// Largest d for which `auto` prefers the Gram-matrix algorithm (8·d² bytes = 32 MB at 2 000).
pub const GRAM_MAX_D: usize = 2_000;

/// The candidates for a dataset, most preferred first, each with the reason it is chosen.
pub fn candidates(ctx: &DataContext) -> Vec<(&'static str, &'static str)> {
    if ctx.public {
        return vec![
            ("exact", "the dataset is public: exact PCA, no noise"),
            (
                "analyze_gauss",
                "the dataset is public, and exact PCA did not accept the parameters",
            ),
            (
                "noisy_power",
                "the dataset is public, and neither exact PCA nor analyze_gauss accepted the parameters",
            ),
        ];
    }
    if ctx.d <= GRAM_MAX_D {
        vec![
            (
                "analyze_gauss",
                "d ≤ 2000: input perturbation of the Gram matrix had the best utility in every measured cell",
            ),
            ("noisy_power", "analyze_gauss did not accept the parameters"),
        ]
    } else {
        vec![
            (
                "noisy_power",
                "d > 2000: the private power method needs O(dp) memory where the Gram matrix needs O(d²)",
            ),
            ("analyze_gauss", "noisy_power did not accept the parameters"),
        ]
    }
}

#[cfg(test)]
#[path = "auto_tests.rs"]
mod tests;
