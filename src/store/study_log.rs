//! A study's transparency log, `studies/<id>` (issue 39; docs/design/ledger.md, "The
//! transparency log"): the coordinator's record of a live study as leaves, beside the dataset
//! logs of `ledger_log.rs`.
//!
//! - Leaf 0, `budget_set`, written with the study: the cost each site of the roster will be
//!   charged (the study's ρ and δ), its algorithm, resolved configuration and public bounds.
//! - Leaf 1, `charge`, written in the transaction that charges the roster when the first noisy
//!   round opens (`studies::charge_in`): the same amount, and the roster it charged. A study
//!   result's receipt is this leaf's.
//!
//! Nothing else: a study has no refunds (charges stand once made), and a cancelled or failed
//! study simply has no more leaves. Reading ([`Store::study_log`]) checks the leaves as a
//! dataset's log is checked, and against the study's rows: the budget leaf states the study's
//! cost, and the charge leaf's roster is exactly the sites charged, each charged its amount.

use sqlx::AnyConnection;
use uuid::Uuid;

use super::ledger_log::{StoredLeaf, VerifiedLog, achieved_at, amounts, append, check_leaves, load_leaves};
use super::study_rows::{StudyRecord, StudySiteRecord, sites_of, study_by_id};
use super::{Store, StoreError};
use crate::privacy::admission::Spending;
use crate::transparency::event::PublicBounds;
use crate::transparency::{EventKind, LedgerEvent};

/// The name of a study's log; its origin is `<service origin>/studies/<id>`.
pub fn study_log(study: Uuid) -> String {
    format!("studies/{study}")
}

/// What each site of the study is charged.
fn cost(study: &StudyRecord) -> Spending {
    Spending {
        rho_units: study.cost_rho_units,
        other_rho_units: Default::default(),
        delta_units: study.cost_delta_units,
    }
}

/// An event of `kind` about `study`, with its algorithm, configuration, bounds and cost.
fn study_event(kind: EventKind, study: &StudyRecord) -> LedgerEvent {
    let mut event = LedgerEvent::new(kind, super::ledger_log::service_build());
    event.study = Some(study.id.to_string());
    event.algorithm = Some(study.algorithm.clone());
    event.config = Some(study.config.clone());
    event.bounds = Some(PublicBounds {
        relation: study.relation.as_str().to_string(),
        d: u64::try_from(study.n_features).ok(),
        n: None,
        row_norm_bound: Some(study.row_norm_bound),
        row_l1_bound: study.row_l1_bound,
        entry_bound: None,
    });
    event.amount = Some(amounts(cost(study)));
    event
}

/// Why a study's budget leaf states the amount it states.
const PER_SITE: &str = "the cost each site of the roster is charged when the study's first noisy round opens";

async fn study_now(conn: &mut AnyConnection, study: Uuid) -> Result<StudyRecord, StoreError> {
    study_by_id(conn, study)
        .await?
        .ok_or_else(|| StoreError::Corrupt(format!("study {study} vanished inside its transaction")))
}

/// Opens a new study's log, in the transaction that created it.
pub(super) async fn append_study_budget(conn: &mut AnyConnection, study: Uuid) -> Result<u64, StoreError> {
    let record = study_now(conn, study).await?;
    let mut event = study_event(EventKind::BudgetSet, &record);
    event.reason = Some(PER_SITE.to_string());
    append(conn, &study_log(study), &event).await
}

/// The event of the charge of `roster` (sorted here) at the study's cost.
fn charge_event(record: &StudyRecord, mut roster: Vec<u32>) -> LedgerEvent {
    roster.sort_unstable();
    let mut event = study_event(EventKind::Charge, record);
    event.achieved = achieved_at(&record.privacy, cost(record));
    event.roster = Some(roster);
    event
}

/// Records the charge of `roster` (the sites this transaction charged), in that transaction.
pub(super) async fn append_study_charge(
    conn: &mut AnyConnection,
    study: Uuid,
    roster: Vec<u32>,
) -> Result<u64, StoreError> {
    let record = study_now(conn, study).await?;
    append(conn, &study_log(study), &charge_event(&record, roster)).await
}

/// The leaves of a study created before the log existed: its budget (reason
/// [`super::ledger_log::BACKFILLED`]) and, if its roster was charged, the charge.
pub(super) async fn backfill_events(
    conn: &mut AnyConnection,
    study: Uuid,
) -> Result<Vec<LedgerEvent>, StoreError> {
    let record = study_now(conn, study).await?;
    let mut budget = study_event(EventKind::BudgetSet, &record);
    budget.reason = Some(super::ledger_log::BACKFILLED.to_string());
    let charged: Vec<u32> = sites_of(conn, study)
        .await?
        .iter()
        .filter(|s| s.charged_at.is_some())
        .map(|s| s.index)
        .collect();
    let charge = (!charged.is_empty()).then(|| charge_event(&record, charged));
    Ok([budget].into_iter().chain(charge).collect())
}

/// Checks a study's log against its rows (module documentation).
fn check_against_study(
    log: &VerifiedLog,
    study: &StudyRecord,
    sites: &[StudySiteRecord],
) -> Result<(), String> {
    let kinds: Vec<EventKind> = log.events.iter().map(|e| e.kind).collect();
    let charged: Vec<&StudySiteRecord> = sites.iter().filter(|s| s.charged_at.is_some()).collect();
    let expected: &[EventKind] = if charged.is_empty() {
        &[EventKind::BudgetSet]
    } else {
        &[EventKind::BudgetSet, EventKind::Charge]
    };
    if kinds != expected {
        return Err(format!(
            "the log holds {kinds:?} for a study with {} charged sites",
            charged.len()
        ));
    }
    let cost = cost(study);
    let states_cost = |e: &LedgerEvent| {
        e.amount
            .as_ref()
            .is_some_and(|a| a.rho_units.0 == cost.rho_units.0 && a.delta_units.0 == cost.delta_units.0)
    };
    if !log.events.iter().all(states_cost) {
        return Err("the study's cost is not the amount its log states".to_string());
    }
    if let Some(charge) = log.events.get(1) {
        let roster: Vec<u32> = charged.iter().map(|s| s.index).collect();
        if charge.roster.as_deref() != Some(roster.as_slice()) {
            return Err("the charged sites are not the roster the log's charge names".to_string());
        }
        let each = |s: &&StudySiteRecord| {
            s.charged_rho_units == cost.rho_units && s.charged_delta_units == cost.delta_units
        };
        if !charged.iter().all(each) {
            return Err("a site's charge is not the amount the log states".to_string());
        }
    }
    Ok(())
}

impl Store {
    /// The tenant's study's log, checked leaf by leaf and against the study's rows; `None` if
    /// there is no such study; [`StoreError::LogTampered`] if they disagree.
    pub async fn study_log(&self, tenant: Uuid, study: Uuid) -> Result<Option<VerifiedLog>, StoreError> {
        let mut conn = self.snapshot_tx().await?;
        let Some(record) = study_by_id(&mut conn, study).await? else {
            return Ok(None);
        };
        if record.tenant_id != tenant {
            return Ok(None);
        }
        let sites = sites_of(&mut conn, study).await?;
        let log = study_log(study);
        let stored: Vec<StoredLeaf> = load_leaves(&mut conn, &log).await?;
        let tampered = |reason: String| StoreError::LogTampered {
            log: log.clone(),
            reason,
        };
        let subject = study.to_string();
        let belongs = |e: &LedgerEvent| e.study.as_deref() == Some(subject.as_str());
        let verified = check_leaves(belongs, stored).map_err(tampered)?;
        check_against_study(&verified, &record, &sites).map_err(tampered)?;
        Ok(Some(verified))
    }
}

/// The index of the leaf recording the study's charge, if it has been charged.
pub fn charge_index(log: &VerifiedLog) -> Option<u64> {
    log.events
        .iter()
        .position(|e| e.kind == EventKind::Charge)
        .map(|i| i as u64)
}
