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
mod tests {
    use super::*;

    fn published<T: PartialSchema>() -> Vec<String> {
        let RefOr::T(Schema::Object(object)) = T::schema() else {
            panic!("not an object schema");
        };
        object
            .enum_values
            .unwrap_or_default()
            .into_iter()
            .map(|v| v.as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// The exhaustive matches below stop compiling when a variant is added; the assertions
    /// check that the published list is the one the domain type serialises to.
    #[test]
    fn variants_are_complete() {
        fn count_kind(k: Kind) -> usize {
            match k {
                Kind::Records | Kind::Matrix => 2,
            }
        }
        fn count_relation(r: Relation) -> usize {
            match r {
                Relation::ReplaceOne | Relation::AddRemove | Relation::Entry => 3,
            }
        }
        fn count_dataset(s: DatasetStatus) -> usize {
            match s {
                DatasetStatus::Empty
                | DatasetStatus::Uploading
                | DatasetStatus::Ready
                | DatasetStatus::Deleted => 4,
            }
        }
        fn count_study(s: StudyStatus) -> usize {
            match s {
                StudyStatus::Enrolling
                | StudyStatus::Running
                | StudyStatus::Succeeded
                | StudyStatus::Failed
                | StudyStatus::Cancelled => 5,
            }
        }
        fn count_site(s: SiteStatus) -> usize {
            match s {
                SiteStatus::Invited
                | SiteStatus::Joined
                | SiteStatus::Contributing
                | SiteStatus::Dropped
                | SiteStatus::Done => 5,
            }
        }
        fn count_entry(e: LedgerEntryKind) -> usize {
            match e {
                LedgerEntryKind::Charge | LedgerEntryKind::Refund => 2,
            }
        }
        fn count_rule(r: Rule) -> usize {
            match r {
                Rule::Zcdp | Rule::ExactGaussian | Rule::Cks => 3,
            }
        }
        assert_eq!(published::<Kind>().len(), count_kind(Kind::Records));
        assert_eq!(published::<Relation>().len(), count_relation(Relation::Entry));
        assert_eq!(
            published::<DatasetStatus>().len(),
            count_dataset(DatasetStatus::Ready)
        );
        assert_eq!(
            published::<JobStatus>(),
            JobStatus::ALL.map(|s| s.as_str().to_string())
        );
        assert_eq!(
            published::<StudyStatus>().len(),
            count_study(StudyStatus::Running)
        );
        assert_eq!(published::<SiteStatus>().len(), count_site(SiteStatus::Done));
        assert_eq!(
            published::<LedgerEntryKind>().len(),
            count_entry(LedgerEntryKind::Charge)
        );
        assert_eq!(published::<Rule>().len(), count_rule(Rule::Cks));
        for name in published::<DatasetStatus>() {
            assert_eq!(
                DatasetStatus::parse(&name).map(|s| s.as_str()),
                Some(name.as_str())
            );
        }
        for name in published::<StudyStatus>() {
            assert_eq!(StudyStatus::parse(&name).map(|s| s.as_str()), Some(name.as_str()));
        }
        for name in published::<SiteStatus>() {
            assert_eq!(SiteStatus::parse(&name).map(|s| s.as_str()), Some(name.as_str()));
        }
        for name in published::<LedgerEntryKind>() {
            assert_eq!(
                LedgerEntryKind::parse(&name).map(|s| s.as_str()),
                Some(name.as_str())
            );
        }
        for name in published::<Rule>() {
            assert_eq!(Rule::parse(&name).map(|s| s.as_str()), Some(name.as_str()));
        }
        for name in published::<Kind>() {
            let kind: Kind = serde_json::from_value(name.clone().into()).expect("kind");
            assert_eq!(kind.as_str(), name);
        }
        for name in published::<Relation>() {
            let relation: Relation = serde_json::from_value(name.clone().into()).expect("relation");
            assert_eq!(relation.as_str(), name);
        }
    }
}
