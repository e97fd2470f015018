use utoipa::PartialSchema;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::Schema;

use crate::dataset::{Kind, Relation};
use crate::privacy::admission::Rule;
use crate::store::{DatasetStatus, JobStatus, LedgerEntryKind, SiteStatus, StudyStatus};

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
