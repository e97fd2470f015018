//! A study's row and its sites' rows as the store reads them: the records, their columns and
//! parsing, and the two reads every writer of a study's history needs (`study_by_id`,
//! `sites_of`). Apart from `studies.rs` (which writes the rows) so that a study's log
//! (`study_log.rs`), appended in the same transactions, reads the rows without importing their
//! writer.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};
use uuid::Uuid;

use super::StoreError;
use super::codec::{id, parse_id, parse_json, parse_opt_ts, parse_relation, parse_ts};
use crate::dataset::Relation;
use crate::federation::status::{SiteStatus, StudyStatus};
use crate::privacy::units::{DeltaUnits, RhoUnits};

/// A study's metadata and state.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StudyRecord {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub name: String,
    pub algorithm: String,
    pub n_features: i64,
    pub relation: Relation,
    pub row_norm_bound: f64,
    pub row_l1_bound: Option<f64>,
    pub params: serde_json::Value,
    pub config: serde_json::Value,
    pub privacy: serde_json::Value,
    pub cost_rho_units: RhoUnits,
    pub cost_delta_units: DeltaUnits,
    pub threshold: i64,
    pub n_sites: i64,
    pub join_deadline: DateTime<Utc>,
    pub round_timeout_ms: i64,
    pub status: StudyStatus,
    pub progress_done: i64,
    pub progress_total: i64,
    pub error: Option<String>,
    pub report: Option<serde_json::Value>,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// One site of a study.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StudySiteRecord {
    pub study_id: Uuid,
    pub index: u32,
    pub name: String,
    pub status: SiteStatus,
    pub n_samples: Option<i64>,
    pub budget_rho_units: Option<RhoUnits>,
    pub charged_rho_units: RhoUnits,
    pub charged_delta_units: DeltaUnits,
    pub charged_at: Option<DateTime<Utc>>,
    pub joined_at: Option<DateTime<Utc>>,
    pub dropped_round: Option<i64>,
}

pub(super) const STUDY_COLUMNS: &str = "id, tenant_id, name, algorithm, n_features, relation, row_norm_bound, row_l1_bound, \
     params, config, privacy, cost_rho_units, cost_delta_units, threshold, n_sites, join_deadline, \
     round_timeout_ms, status, progress_done, progress_total, error, report, created_at, started_at, finished_at";

pub(super) const SITE_COLUMNS: &str = "study_id, idx, name, status, n_samples, budget_rho_units, charged_rho_units, \
     charged_delta_units, charged_at, joined_at, dropped_round";

pub(super) fn study_row(row: &AnyRow) -> Result<StudyRecord, StoreError> {
    let status: &str = row.try_get("status")?;
    let report: Option<&str> = row.try_get("report")?;
    Ok(StudyRecord {
        id: parse_id(row.try_get("id")?)?,
        tenant_id: parse_id(row.try_get("tenant_id")?)?,
        name: row.try_get("name")?,
        algorithm: row.try_get("algorithm")?,
        n_features: row.try_get("n_features")?,
        relation: parse_relation(row.try_get("relation")?)?,
        row_norm_bound: row.try_get("row_norm_bound")?,
        row_l1_bound: row.try_get("row_l1_bound")?,
        params: parse_json(row.try_get("params")?)?,
        config: parse_json(row.try_get("config")?)?,
        privacy: parse_json(row.try_get("privacy")?)?,
        cost_rho_units: RhoUnits(row.try_get("cost_rho_units")?),
        cost_delta_units: DeltaUnits(row.try_get("cost_delta_units")?),
        threshold: row.try_get("threshold")?,
        n_sites: row.try_get("n_sites")?,
        join_deadline: parse_ts(row.try_get("join_deadline")?)?,
        round_timeout_ms: row.try_get("round_timeout_ms")?,
        status: StudyStatus::parse(status)
            .ok_or_else(|| StoreError::Corrupt(format!("study status {status:?}")))?,
        progress_done: row.try_get("progress_done")?,
        progress_total: row.try_get("progress_total")?,
        error: row.try_get("error")?,
        report: report.map(parse_json).transpose()?,
        created_at: parse_ts(row.try_get("created_at")?)?,
        started_at: parse_opt_ts(row.try_get("started_at")?)?,
        finished_at: parse_opt_ts(row.try_get("finished_at")?)?,
    })
}

pub(super) fn site_row(row: &AnyRow) -> Result<StudySiteRecord, StoreError> {
    let status: &str = row.try_get("status")?;
    let idx: i64 = row.try_get("idx")?;
    Ok(StudySiteRecord {
        study_id: parse_id(row.try_get("study_id")?)?,
        index: u32::try_from(idx).map_err(|_| StoreError::Corrupt(format!("site index {idx}")))?,
        name: row.try_get("name")?,
        status: SiteStatus::parse(status)
            .ok_or_else(|| StoreError::Corrupt(format!("site status {status:?}")))?,
        n_samples: row.try_get("n_samples")?,
        budget_rho_units: row.try_get::<Option<i64>, _>("budget_rho_units")?.map(RhoUnits),
        charged_rho_units: RhoUnits(row.try_get("charged_rho_units")?),
        charged_delta_units: DeltaUnits(row.try_get("charged_delta_units")?),
        charged_at: parse_opt_ts(row.try_get("charged_at")?)?,
        joined_at: parse_opt_ts(row.try_get("joined_at")?)?,
        dropped_round: row.try_get("dropped_round")?,
    })
}

pub(super) async fn sites_of(
    conn: &mut AnyConnection,
    study: Uuid,
) -> Result<Vec<StudySiteRecord>, StoreError> {
    let sql = format!("SELECT {SITE_COLUMNS} FROM study_sites WHERE study_id = $1 ORDER BY idx");
    let rows = sqlx::query(&sql).bind(id(study)).fetch_all(conn).await?;
    rows.iter().map(site_row).collect()
}

pub(super) async fn study_by_id(
    conn: &mut AnyConnection,
    study: Uuid,
) -> Result<Option<StudyRecord>, StoreError> {
    let sql = format!("SELECT {STUDY_COLUMNS} FROM studies WHERE id = $1");
    let row = sqlx::query(&sql).bind(id(study)).fetch_optional(conn).await?;
    row.as_ref().map(study_row).transpose()
}
