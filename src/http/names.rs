//! The closed sets of names the API speaks, published as named enum schemas so generated
//! clients get enums instead of bare strings: the service's own statuses here, with the
//! numerical core's macro (`privpca_core::names`, which also declares the core's enums:
//! dataset kinds, relations, admission rules, study and site statuses).

use privpca_core::published_enum;

use crate::store::{DatasetStatus, JobStatus, LedgerEntryKind};

published_enum!(
    DatasetStatus,
    "DatasetStatus",
    "`empty` (awaiting data), `uploading` (an upload is in progress; `empty` again if it fails), `ready`, or `deleted` (data gone, ledger kept).",
    [
        DatasetStatus::Empty,
        DatasetStatus::Uploading,
        DatasetStatus::Ready,
        DatasetStatus::Deleted
    ]
);
published_enum!(
    JobStatus,
    "JobStatus",
    "`queued`, `running`, then one of the terminal `succeeded`, `failed`, `cancelled`.",
    [
        JobStatus::Queued,
        JobStatus::Running,
        JobStatus::Succeeded,
        JobStatus::Failed,
        JobStatus::Cancelled
    ]
);
published_enum!(
    LedgerEntryKind,
    "LedgerEntryKind",
    "`charge` (at submission) or `refund` (a job cancelled before it started).",
    [LedgerEntryKind::Charge, LedgerEntryKind::Refund]
);
#[cfg(test)]
#[path = "names_tests.rs"]
mod tests;
