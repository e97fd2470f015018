//! What a site knows once it has prepared for a study, before it joins: the study's view, the
//! per-round computation its protocol checked, the loaded records and the study's cost in
//! ledger units. The protocols' site steps read it; [`super::prepare`] builds it.

use super::Failure;
use super::data::Records;
use crate::algorithms::federated_power::state::SiteComputation;
use crate::dataset::Relation;
use crate::federation::messages::SiteStudyView;
use crate::privacy::units::{DeltaUnits, RhoUnits};

/// The study's cost in ledger units (charges round up).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cost {
    pub(crate) rho_units: RhoUnits,
    pub(crate) delta_units: DeltaUnits,
}

/// Everything before joining: the study, the loaded data and its cost.
pub(crate) struct Prepared {
    pub(crate) view: SiteStudyView,
    /// `federated_power` only; CAPE studies compute their one statistic directly.
    pub(crate) computation: Option<SiteComputation>,
    pub(crate) records: Records,
    pub(crate) cost: Cost,
    /// `--expect-roster-hash`, parsed.
    pub(crate) expected_roster: Option<[u8; 32]>,
}

/// The study's neighbouring relation, if a site can take part in it.
pub(crate) fn relation(view: &SiteStudyView) -> Result<Relation, Failure> {
    match view.relation {
        Relation::ReplaceOne | Relation::AddRemove => Ok(view.relation),
        other => Err(Failure::Refused(format!(
            "the study's relation `{}` is not supported",
            other.as_str()
        ))),
    }
}
