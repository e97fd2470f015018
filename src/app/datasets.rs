//! Dataset use cases: create one (its kind, unit of privacy, public bounds and budget, checked
//! here), read and list them, delete one (its running jobs told to stop), read its ledger, and
//! upload its data once (`datasets/upload.rs`). Each takes typed values and returns store
//! records or an [`AppError`]; the HTTP layer (`http/datasets.rs`) parses and renders.

mod synced_file;
mod upload;
mod upload_object;

use uuid::Uuid;

pub use upload::{UploadRequest, upload};

use crate::app::error::AppError;
use crate::dataset::{Kind, Relation};
use crate::privacy::units::{DeltaUnits, RhoUnits};
use crate::state::AppState;
use crate::store::{DatasetRecord, JobStatus, LedgerEntry, NewDataset};

/// A dataset as its owner describes it, before the checks of [`create`].
#[derive(Debug, Clone)]
pub struct DatasetSpec<B> {
    /// 1 to 200 characters, not only white space (stored trimmed).
    pub name: String,
    pub kind: Kind,
    /// The neighbouring relation; by default `replace_one` for records, `entry` for matrices.
    pub relation: Option<Relation>,
    pub row_norm_bound: Option<f64>,
    pub row_l1_bound: Option<f64>,
    pub entry_bound: Option<f64>,
    /// Required unless `public`, absent when it is.
    pub budget: Option<B>,
    pub public: bool,
}

/// A budget as its owner stated it. It is parsed only after the dataset's other fields passed
/// their checks, so that a request with several faults is told about the first in field order.
pub trait StatedBudget {
    fn parse_budget(&self) -> Result<Budget, AppError>;
}

/// A budget in the ledger's terms, with the statement kept for display.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    pub rho_units: RhoUnits,
    pub delta_units: DeltaUnits,
    /// The stated (ε, δ), for tight accounting.
    pub epsilon_delta: Option<(f64, f64)>,
    /// The budget as stated (and the δ at which ρ amounts are shown as (ε, δ)).
    pub stated: serde_json::Value,
}

/// Checks `spec` and creates the dataset, empty, under a fresh id.
pub async fn create<B: StatedBudget>(
    state: &AppState,
    tenant: Uuid,
    spec: DatasetSpec<B>,
) -> Result<DatasetRecord, AppError> {
    let new = check(spec)?;
    Ok(state.store.create_dataset(tenant, new).await?)
}

/// The tenant's datasets, deleted ones included.
pub async fn list(state: &AppState, tenant: Uuid) -> Result<Vec<DatasetRecord>, AppError> {
    Ok(state.store.list_datasets(tenant).await?)
}

/// The tenant's dataset `id` (a deleted one included).
pub async fn get(state: &AppState, tenant: Uuid, id: Uuid) -> Result<DatasetRecord, AppError> {
    AppError::found(state.store.get_dataset(tenant, id).await?, "dataset", id)
}

/// Deletes a dataset's data: the ledger is kept, queued jobs are cancelled and refunded
/// (by the store), running ones are told to stop, and the id is never reused.
pub async fn delete(state: &AppState, tenant: Uuid, id: Uuid) -> Result<DatasetRecord, AppError> {
    let record = AppError::found(state.store.delete_dataset(tenant, id).await?, "dataset", id)?;
    state.stats_builds.forget(id);
    if let Some(objects) = &state.objects {
        remove_objects(objects.clone(), id).await;
    }
    // The store marked this dataset's running jobs for cancellation; stop those running here now.
    for job in state.store.list_jobs(tenant, Some(id)).await? {
        if job.status == JobStatus::Running {
            state.jobs.request_cancel(job.id);
        }
    }
    Ok(record)
}

/// Removes a deleted dataset's objects from the store and from this replica's cache (other
/// replicas drop their copies at their next sweep, `serve::forget_deleted_objects`). If the store
/// does not answer within 5 s, the removal is retried in the background for five minutes, and
/// after that (or if this replica stops first) by the store sweep of every replica's start and
/// every 10 minutes (`serve::remove_deleted_datasets_objects`); the dataset is deleted either
/// way (its rows say so, and no job reads it again).
async fn remove_objects(objects: std::sync::Arc<crate::objects::ObjectStorage>, id: Uuid) {
    objects.forget_dataset(id);
    // A store that does not answer must not hold the delete's answer past a few seconds.
    let first = tokio::time::timeout(std::time::Duration::from_secs(5), objects.remove_dataset(id)).await;
    if matches!(first, Ok(Ok(_))) {
        return;
    }
    tokio::spawn(async move {
        for _ in 0..30 {
            tokio::time::sleep(std::time::Duration::from_secs(10)).await;
            match objects.remove_dataset(id).await {
                Ok(_) => return,
                Err(e) => {
                    tracing::warn!(dataset = %id, error = %e, "could not remove a deleted dataset's objects; retrying")
                }
            }
        }
        tracing::error!(dataset = %id, "gave up removing a deleted dataset's objects from the object store; remove datasets/{id}/ by hand");
    });
}

/// A dataset and every charge and refund against its budget.
pub async fn ledger(
    state: &AppState,
    tenant: Uuid,
    id: Uuid,
) -> Result<(DatasetRecord, Vec<LedgerEntry>), AppError> {
    let record = get(state, tenant, id).await?;
    let entries = AppError::found(state.store.ledger(tenant, id).await?, "dataset", id)?;
    Ok((record, entries))
}

/// The checks of a new dataset, in field order: name, relation, bounds, budget.
fn check<B: StatedBudget>(spec: DatasetSpec<B>) -> Result<NewDataset, AppError> {
    let name = spec.name.trim().to_string();
    if name.is_empty() || spec.name.chars().count() > 200 {
        return Err(AppError::validation("name", "name must have 1 to 200 characters"));
    }
    let relation = relation(spec.kind, spec.relation)?;
    let (row_norm_bound, row_l1_bound, entry_bound) = bounds(&spec)?;
    let budget = budget(spec.budget.as_ref(), spec.public)?;
    Ok(NewDataset {
        name,
        kind: spec.kind,
        relation,
        row_norm_bound,
        row_l1_bound,
        entry_bound,
        public: spec.public,
        budget_rho_units: budget.as_ref().map(|b| b.rho_units),
        budget_delta_units: budget.as_ref().map(|b| b.delta_units),
        budget_epsilon_delta: budget.as_ref().and_then(|b| b.epsilon_delta),
        budget_stated: budget.map_or_else(|| serde_json::json!({}), |b| b.stated),
    })
}

/// The stated relation, or the kind's default, if it applies to the kind.
fn relation(kind: Kind, stated: Option<Relation>) -> Result<Relation, AppError> {
    let relation = stated.unwrap_or(match kind {
        Kind::Records => Relation::ReplaceOne,
        Kind::Matrix => Relation::Entry,
    });
    if !relation.fits(kind) {
        return Err(AppError::validation(
            "relation",
            format!(
                "relation `{}` does not apply to {} datasets (records: replace_one | add_remove; matrix: entry)",
                relation.as_str(),
                kind.as_str()
            ),
        ));
    }
    Ok(relation)
}

fn positive(field: &str, value: Option<f64>) -> Result<Option<f64>, AppError> {
    match value {
        Some(v) if !(v > 0.0 && v.is_finite()) => Err(AppError::validation(
            field,
            format!("{field} must be a finite number > 0 (got {v})"),
        )),
        other => Ok(other),
    }
}

/// A dataset's public bounds: `(row_norm_bound, row_l1_bound, entry_bound)`.
type Bounds = (Option<f64>, Option<f64>, Option<f64>);

/// The bounds of the kind: records need the L2 bound β and may have an L1 bound; a matrix has
/// an entry bound (default 1).
fn bounds<B>(spec: &DatasetSpec<B>) -> Result<Bounds, AppError> {
    let row_norm_bound = positive("row_norm_bound", spec.row_norm_bound)?;
    let row_l1_bound = positive("row_l1_bound", spec.row_l1_bound)?;
    let entry_bound = positive("entry_bound", spec.entry_bound)?;
    match spec.kind {
        Kind::Records => {
            if entry_bound.is_some() {
                return Err(AppError::validation(
                    "entry_bound",
                    "entry_bound applies to matrix datasets only",
                ));
            }
            let beta = row_norm_bound.ok_or_else(|| {
                AppError::validation(
                    "row_norm_bound",
                    "records datasets need row_norm_bound (the L2 bound β)",
                )
            })?;
            Ok((Some(beta), row_l1_bound, None))
        }
        Kind::Matrix => {
            if row_norm_bound.is_some() || row_l1_bound.is_some() {
                return Err(AppError::validation(
                    "row_norm_bound",
                    "row bounds apply to records datasets only; matrices use entry_bound",
                ));
            }
            Ok((None, None, Some(entry_bound.unwrap_or(1.0))))
        }
    }
}

/// The parsed budget of a private dataset; `None` for a public one, which carries none.
fn budget<B: StatedBudget>(stated: Option<&B>, public: bool) -> Result<Option<Budget>, AppError> {
    match (stated, public) {
        (Some(_), true) => Err(AppError::validation(
            "budget",
            "public datasets carry no budget; omit it",
        )),
        (None, true) => Ok(None),
        (None, false) => Err(AppError::validation(
            "budget",
            "a private dataset needs a budget: {\"rho\": …} or {\"epsilon\": …, \"delta\": …}",
        )),
        (Some(stated), false) => stated.parse_budget().map(Some),
    }
}
