//! The closed sets of names the API speaks (dataset kinds, relations, statuses, ledger entry
//! kinds, admission rules), published as named enum schemas so generated clients get enums
//! instead of bare strings. The names come from the domain types' own `as_str`; the schemas
//! live here so that the domain modules stay free of web crates.

use std::borrow::Cow;

use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::{PartialSchema, ToSchema};

use crate::dataset::{Kind, Relation};
use crate::privacy::admission::Rule;
use crate::store::{DatasetStatus, JobStatus, LedgerEntryKind, SiteStatus, StudyStatus};

/// A string schema whose values are `names`.
pub fn enum_schema(description: &str, names: &[&'static str]) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(description))
        .enum_values(Some(names.iter().copied()))
        .into()
}

/// Every variant of each published enum, in display order. `variants_are_complete` fails when a
/// domain enum gains a variant that is not listed here.
macro_rules! published_enum {
    ($ty:ty, $name:literal, $description:literal, [$($variant:expr),+ $(,)?]) => {
        impl PartialSchema for $ty {
            fn schema() -> RefOr<Schema> {
                enum_schema($description, &[$($variant.as_str()),+])
            }
        }
        impl ToSchema for $ty {
            fn name() -> Cow<'static, str> {
                Cow::Borrowed($name)
            }
        }
    };
}

published_enum!(
    Kind,
    "DatasetKind",
    "`records`: one row per individual; `matrix`: a symmetric m×m matrix.",
    [Kind::Records, Kind::Matrix]
);
published_enum!(
    Relation,
    "Relation",
    "The neighbouring relation: `replace_one` or `add_remove` (records), `entry` (matrices).",
    [Relation::ReplaceOne, Relation::AddRemove, Relation::Entry]
);
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
    StudyStatus,
    "StudyStatus",
    "`enrolling`, `running`, then one of the terminal `succeeded`, `failed`, `cancelled`.",
    [
        StudyStatus::Enrolling,
        StudyStatus::Running,
        StudyStatus::Succeeded,
        StudyStatus::Failed,
        StudyStatus::Cancelled
    ]
);
published_enum!(
    SiteStatus,
    "SiteStatus",
    "Where a site stands in its study.",
    [
        SiteStatus::Invited,
        SiteStatus::Joined,
        SiteStatus::Contributing,
        SiteStatus::Dropped,
        SiteStatus::Done
    ]
);
published_enum!(
    LedgerEntryKind,
    "LedgerEntryKind",
    "`charge` (at submission) or `refund` (a job cancelled before it started).",
    [LedgerEntryKind::Charge, LedgerEntryKind::Refund]
);
published_enum!(
    Rule,
    "AdmissionRule",
    "Which rule admits charges: `zcdp` (a ρ budget), `exact_gaussian` (an (ε, δ) budget with only \
     Gaussian charges so far) or `cks` (an (ε, δ) budget after any other charge).",
    [Rule::Zcdp, Rule::ExactGaussian, Rule::Cks]
);

#[cfg(test)]
#[path = "names_tests.rs"]
mod tests;
