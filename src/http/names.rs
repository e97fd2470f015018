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

    /// Asserts that `$ty` publishes exactly `$variant`s, in this order. The exhaustive match
    /// stops compiling when the domain type gains a variant that is not listed.
    macro_rules! assert_publishes {
        ($ty:ident: $($variant:ident),+) => {{
            let _exhaustive = |value: $ty| match value {
                $($ty::$variant)|+ => (),
            };
            let listed: Vec<String> = vec![$($ty::$variant.as_str().to_string()),+];
            assert_eq!(published::<$ty>(), listed, stringify!($ty));
        }};
    }

    #[test]
    fn variants_are_complete() {
        assert_publishes!(Kind: Records, Matrix);
        assert_publishes!(Relation: ReplaceOne, AddRemove, Entry);
        assert_publishes!(DatasetStatus: Empty, Uploading, Ready, Deleted);
        assert_publishes!(JobStatus: Queued, Running, Succeeded, Failed, Cancelled);
        assert_publishes!(StudyStatus: Enrolling, Running, Succeeded, Failed, Cancelled);
        assert_publishes!(SiteStatus: Invited, Joined, Contributing, Dropped, Done);
        assert_publishes!(LedgerEntryKind: Charge, Refund);
        assert_publishes!(Rule: Zcdp, ExactGaussian, Cks);
        assert_eq!(
            published::<JobStatus>(),
            JobStatus::ALL.map(|s| s.as_str().to_string())
        );
    }

    /// Every published name of `T` read back by `parse` is the same name.
    fn assert_round_trips<T: PartialSchema>(parse: impl Fn(&str) -> Option<&'static str>) {
        for name in published::<T>() {
            assert_eq!(parse(&name), Some(name.as_str()));
        }
    }

    /// The published names are the ones the domain types parse and serialise to.
    #[test]
    fn published_names_parse_back() {
        assert_round_trips::<DatasetStatus>(|n| DatasetStatus::parse(n).map(|s| s.as_str()));
        assert_round_trips::<StudyStatus>(|n| StudyStatus::parse(n).map(|s| s.as_str()));
        assert_round_trips::<SiteStatus>(|n| SiteStatus::parse(n).map(|s| s.as_str()));
        assert_round_trips::<LedgerEntryKind>(|n| LedgerEntryKind::parse(n).map(|s| s.as_str()));
        assert_round_trips::<Rule>(|n| Rule::parse(n).map(|s| s.as_str()));
        assert_round_trips::<Kind>(|n| serde_json::from_value::<Kind>(n.into()).ok().map(|k| k.as_str()));
        assert_round_trips::<Relation>(|n| {
            serde_json::from_value::<Relation>(n.into())
                .ok()
                .map(|r| r.as_str())
        });
    }
}
