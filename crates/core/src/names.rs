//! The closed sets of names the API speaks, published as named enum schemas so generated
//! clients get enums instead of bare strings. The names come from the domain types' own
//! `as_str`. The schemas of this crate's enums (dataset kinds, relations, admission rules, study
//! and site statuses) are declared here, where the types are; the service declares its own
//! (dataset, job and ledger entry statuses) with the same macro in `http/names.rs`.

use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};

use crate::dataset::{Kind, Relation};
use crate::federation::status::{SiteStatus, StudyStatus};
use crate::privacy::admission::Rule;

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
#[macro_export]
macro_rules! published_enum {
    ($ty:ty, $name:literal, $description:literal, [$($variant:expr),+ $(,)?]) => {
        impl ::utoipa::PartialSchema for $ty {
            fn schema() -> ::utoipa::openapi::RefOr<::utoipa::openapi::schema::Schema> {
                $crate::names::enum_schema($description, &[$($variant.as_str()),+])
            }
        }
        impl ::utoipa::ToSchema for $ty {
            fn name() -> ::std::borrow::Cow<'static, str> {
                ::std::borrow::Cow::Borrowed($name)
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
    Rule,
    "AdmissionRule",
    "Which rule admits charges: `zcdp` (a ρ budget), `exact_gaussian` (an (ε, δ) budget with only \
     Gaussian charges so far) or `cks` (an (ε, δ) budget after any other charge).",
    [Rule::Zcdp, Rule::ExactGaussian, Rule::Cks]
);
