//! Mapping database rows (either backend, through the `Any` driver) to the store's records.
//! Ledger amounts are `i64` columns; they become `RhoUnits`/`DeltaUnits` here, and go back with `.0` where bound. Each `*_COLUMNS` list is the one `SELECT` list
//! (and `RETURNING` list) its mapper expects.

use sqlx::Row;
use sqlx::any::AnyRow;

use super::StoreError;
use super::codec::{parse_id, parse_json, parse_kind, parse_opt_ts, parse_relation, parse_ts, seed_from_db};
use super::models::{
    DatasetRecord, DatasetStatus, JobDatasetFacts, JobRecord, JobStatus, LedgerEntry, LedgerEntryKind, Tenant,
};
use crate::privacy::admission::Spending;
use crate::privacy::units::{DeltaUnits, RhoUnits};

pub(crate) const TENANT_COLUMNS: &str = "id, name, created_at";

pub(crate) const DATASET_COLUMNS: &str = "id, tenant_id, name, kind, relation, row_norm_bound, row_l1_bound, \
     entry_bound, public, budget_rho_units, budget_delta_units, spent_rho_units, spent_delta_units, \
     spent_other_rho_units, budget_epsilon, budget_delta, budget_stated, status, n, d, nnz, created_at, deleted_at";

pub(crate) const JOB_COLUMNS: &str = "id, tenant_id, dataset_id, algorithm, params, config, privacy, \
     cost_rho_units, cost_delta_units, cost_other_rho_units, selection, status, progress_done, progress_total, cancel_requested, error, \
     seed, created_at, started_at, finished_at, attempt";

pub(crate) const LEDGER_COLUMNS: &str =
    "id, dataset_id, job_id, entry, algorithm, rho_units, delta_units, other_rho_units, rule, created_at";

/// The status read: the tenant's job (`$1`, tenant `$2`) joined with its dataset's
/// [`JobDatasetFacts`] (absent when the dataset row is). Read by [`job`] and
/// [`job_dataset_facts`]; built once, as status reads are the most frequent request.
pub(crate) static JOB_WITH_DATASET_FACTS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let job: Vec<String> = JOB_COLUMNS
        .split(',')
        .map(|c| format!("j.{0} AS {0}", c.trim()))
        .collect();
    format!(
        "SELECT {}, d.public AS dataset_public, d.relation AS dataset_relation, d.nnz AS dataset_nnz \
         FROM jobs j LEFT JOIN datasets d ON d.id = j.dataset_id AND d.tenant_id = j.tenant_id \
         WHERE j.id = $1 AND j.tenant_id = $2",
        job.join(", ")
    )
});

/// The dataset facts of a row read with [`JOB_WITH_DATASET_FACTS`]; `None` if the job's dataset
/// row is gone.
pub(crate) fn job_dataset_facts(row: &AnyRow) -> Result<Option<JobDatasetFacts>, StoreError> {
    let Some(relation) = row.try_get::<Option<&str>, _>("dataset_relation")? else {
        return Ok(None);
    };
    Ok(Some(JobDatasetFacts {
        public: flag(row, "dataset_public")?,
        relation: parse_relation(relation)?,
        sparse: row.try_get::<Option<i64>, _>("dataset_nnz")?.is_some(),
    }))
}

/// The row's `status` column, read by `parse`; `what` names the record in a corruption error.
fn status<T>(row: &AnyRow, what: &str, parse: fn(&str) -> Option<T>) -> Result<T, StoreError> {
    let status: &str = row.try_get("status")?;
    parse(status).ok_or_else(|| StoreError::Corrupt(format!("{what} status {status:?}")))
}

pub(crate) fn tenant(row: &AnyRow) -> Result<Tenant, StoreError> {
    Ok(Tenant {
        id: parse_id(row.try_get("id")?)?,
        name: row.try_get("name")?,
        created_at: parse_ts(row.try_get("created_at")?)?,
    })
}

pub(crate) fn dataset(row: &AnyRow) -> Result<DatasetRecord, StoreError> {
    Ok(DatasetRecord {
        id: parse_id(row.try_get("id")?)?,
        tenant_id: parse_id(row.try_get("tenant_id")?)?,
        name: row.try_get("name")?,
        kind: parse_kind(row.try_get("kind")?)?,
        relation: parse_relation(row.try_get("relation")?)?,
        row_norm_bound: row.try_get("row_norm_bound")?,
        row_l1_bound: row.try_get("row_l1_bound")?,
        entry_bound: row.try_get("entry_bound")?,
        public: flag(row, "public")?,
        budget_rho_units: row.try_get::<Option<i64>, _>("budget_rho_units")?.map(RhoUnits),
        budget_delta_units: row
            .try_get::<Option<i64>, _>("budget_delta_units")?
            .map(DeltaUnits),
        spent_rho_units: RhoUnits(row.try_get("spent_rho_units")?),
        spent_delta_units: DeltaUnits(row.try_get("spent_delta_units")?),
        spent_other_rho_units: RhoUnits(row.try_get("spent_other_rho_units")?),
        budget_epsilon_delta: match (
            row.try_get::<Option<f64>, _>("budget_epsilon")?,
            row.try_get::<Option<f64>, _>("budget_delta")?,
        ) {
            (Some(epsilon), Some(delta)) => Some((epsilon, delta)),
            (None, None) => None,
            _ => return Err(StoreError::Corrupt("budget_epsilon without budget_delta".into())),
        },
        budget_stated: parse_json(row.try_get("budget_stated")?)?,
        status: status(row, "dataset", DatasetStatus::parse)?,
        n: row.try_get("n")?,
        d: row.try_get("d")?,
        nnz: row.try_get("nnz")?,
        created_at: parse_ts(row.try_get("created_at")?)?,
        deleted_at: parse_opt_ts(row.try_get("deleted_at")?)?,
    })
}

pub(crate) fn job(row: &AnyRow) -> Result<JobRecord, StoreError> {
    Ok(JobRecord {
        id: parse_id(row.try_get("id")?)?,
        tenant_id: parse_id(row.try_get("tenant_id")?)?,
        dataset_id: parse_id(row.try_get("dataset_id")?)?,
        algorithm: row.try_get("algorithm")?,
        params: parse_json(row.try_get("params")?)?,
        config: parse_json(row.try_get("config")?)?,
        privacy: parse_json(row.try_get("privacy")?)?,
        cost: Spending {
            rho_units: RhoUnits(row.try_get("cost_rho_units")?),
            other_rho_units: RhoUnits(row.try_get("cost_other_rho_units")?),
            delta_units: DeltaUnits(row.try_get("cost_delta_units")?),
        },
        selection: row
            .try_get::<Option<&str>, _>("selection")?
            .map(parse_json)
            .transpose()?,
        status: status(row, "job", JobStatus::parse)?,
        progress_done: row.try_get("progress_done")?,
        progress_total: row.try_get("progress_total")?,
        cancel_requested: flag(row, "cancel_requested")?,
        error: row.try_get("error")?,
        seed: seed_from_db(row.try_get("seed")?),
        created_at: parse_ts(row.try_get("created_at")?)?,
        started_at: parse_opt_ts(row.try_get("started_at")?)?,
        finished_at: parse_opt_ts(row.try_get("finished_at")?)?,
        attempt: row.try_get("attempt")?,
    })
}

/// The basis, shape and eigenvalues of a succeeded job or study (`result`, `result_d`,
/// `result_k`, `eigenvalues` columns); `owner` names it in a corruption error.
pub(crate) fn basis_result(row: &AnyRow, owner: &str) -> Result<super::models::JobResult, StoreError> {
    let corrupt = || StoreError::Corrupt(format!("result shape of {owner}"));
    let d = usize::try_from(row.try_get::<i64, _>("result_d")?).map_err(|_| corrupt())?;
    let k = usize::try_from(row.try_get::<i64, _>("result_k")?).map_err(|_| corrupt())?;
    let basis = super::codec::basis_from_bytes(row.try_get("result")?)?;
    if d.checked_mul(k) != Some(basis.len()) {
        return Err(corrupt());
    }
    let eigenvalues: Option<&str> = row.try_get("eigenvalues")?;
    let eigenvalues = match eigenvalues {
        Some(text) => Some(serde_json::from_value(parse_json(text)?)?),
        None => None,
    };
    // Jobs have a `released` column (other DP releases, JSON); studies do not.
    let released = match row.try_get::<Option<&str>, _>("released") {
        Ok(Some(text)) => Some(parse_json(text)?),
        Ok(None) | Err(sqlx::Error::ColumnNotFound(_)) => None,
        Err(e) => return Err(e.into()),
    };
    Ok(super::models::JobResult {
        d,
        k,
        basis,
        eigenvalues,
        released,
    })
}

pub(crate) fn ledger_entry(row: &AnyRow) -> Result<LedgerEntry, StoreError> {
    let entry: &str = row.try_get("entry")?;
    let job_id: Option<&str> = row.try_get("job_id")?;
    Ok(LedgerEntry {
        id: row.try_get("id")?,
        dataset_id: parse_id(row.try_get("dataset_id")?)?,
        job_id: job_id.map(parse_id).transpose()?,
        entry: LedgerEntryKind::parse(entry)
            .ok_or_else(|| StoreError::Corrupt(format!("ledger entry {entry:?}")))?,
        algorithm: row.try_get("algorithm")?,
        rho_units: RhoUnits(row.try_get("rho_units")?),
        delta_units: DeltaUnits(row.try_get("delta_units")?),
        other_rho_units: RhoUnits(row.try_get("other_rho_units")?),
        rule: match row.try_get::<Option<&str>, _>("rule")? {
            None => None,
            Some(r) => Some(
                crate::privacy::admission::Rule::parse(r)
                    .ok_or_else(|| StoreError::Corrupt(format!("ledger rule {r:?}")))?,
            ),
        },
        created_at: parse_ts(row.try_get("created_at")?)?,
    })
}

/// A 0/1 flag column (both backends store flags as integers, so one decoding serves both).
fn flag(row: &AnyRow, column: &str) -> Result<bool, StoreError> {
    match row.try_get::<i64, _>(column)? {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(StoreError::Corrupt(format!("{column} = {other}"))),
    }
}
