//! The public context of a stored dataset, as the algorithms see it.

use crate::dataset::{DataContext, Neighbours, Relation};
use crate::store::{DatasetRecord, JobDatasetFacts};

/// What an algorithm may know about `record`: shape, unit of privacy and bounds, with the
/// defaults of docs/design/privacy.md §1 filled in. `None` while no data is attached.
pub fn data_context(record: &DatasetRecord) -> Option<DataContext> {
    let d = usize::try_from(record.d?).ok()?;
    let n = usize::try_from(record.n?).ok()?;
    let neighbours = match record.relation {
        Relation::Entry => Neighbours::Entry {
            u: record.entry_bound.unwrap_or(1.0),
        },
        relation => {
            let beta = record.row_norm_bound?;
            // ‖x‖₁ ≤ √d·‖x‖₂ ≤ √d·β always holds, so the effective α is the smaller of the two.
            let alpha = (d as f64).sqrt() * beta;
            let alpha = record.row_l1_bound.map_or(alpha, |a| a.min(alpha));
            if relation == Relation::ReplaceOne {
                Neighbours::ReplaceOne { beta, alpha }
            } else {
                Neighbours::AddRemove { beta, alpha }
            }
        }
    };
    Some(DataContext {
        d,
        n: n_is_public(record).then_some(n),
        neighbours,
        public: record.public,
        sparse: record.nnz.is_some(),
    })
}

/// Whether a job's run time on `record` may be shown or recorded: it grows with n, and on a
/// sparse matrix with its number of stored entries, which is a statistic of the data unless the
/// dataset is public.
pub fn run_time_is_public(record: &DatasetRecord) -> bool {
    run_time_is_public_by(&JobDatasetFacts {
        public: record.public,
        relation: record.relation,
        sparse: record.nnz.is_some(),
    })
}

/// [`run_time_is_public`] from the dataset facts a status read fetches with the job.
pub fn run_time_is_public_by(facts: &JobDatasetFacts) -> bool {
    n_public(facts.public, facts.relation) && (facts.public || !facts.sparse)
}

/// The row count is public under `replace_one`, for matrices (it is the side) and on public
/// datasets; under `add_remove` it is private and never shown.
pub fn n_is_public(record: &DatasetRecord) -> bool {
    n_public(record.public, record.relation)
}

fn n_public(public: bool, relation: Relation) -> bool {
    public || relation != Relation::AddRemove
}
