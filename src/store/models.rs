//! The records the store persists: tenants, datasets with their budget state, ledger entries
//! and jobs. Privacy amounts are integers in ledger units (`crate::privacy::units`).

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::privacy::admission::{Budget, Rule, Spending, delta_capacity_units, rho_capacity_units};
use crate::privacy::units::{DeltaUnits, RhoUnits};

use crate::dataset::{Kind, Relation};

/// A tenant: owner of datasets and jobs, authenticated by an API key stored hashed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tenant {
    pub id: Uuid,
    pub name: String,
    pub created_at: DateTime<Utc>,
}

/// Lifecycle of a dataset: created without data (`Empty`), held by one upload while its body
/// streams (`Uploading`; back to `Empty` if the upload fails), data attached once (`Ready`),
/// deleted (data removed, ledger kept, id never reused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DatasetStatus {
    Empty,
    Uploading,
    Ready,
    Deleted,
}

impl DatasetStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DatasetStatus::Empty => "empty",
            DatasetStatus::Uploading => "uploading",
            DatasetStatus::Ready => "ready",
            DatasetStatus::Deleted => "deleted",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "empty" => Some(DatasetStatus::Empty),
            "uploading" => Some(DatasetStatus::Uploading),
            "ready" => Some(DatasetStatus::Ready),
            "deleted" => Some(DatasetStatus::Deleted),
            _ => None,
        }
    }
}

/// Where a ready dataset's data is in the object store (PRIVPCA_STORAGE_URL): the object's key
/// under the store's prefix and its SHA-256 in hex, recorded when the upload attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataObject {
    pub key: String,
    pub sha256: String,
}

/// A dataset's metadata and budget state.
///
/// `budget_*` are `None` exactly when `public` is true. For budgeted datasets
/// `spent_* ≤ budget_*` always holds (the database refuses anything else) and `spent_*` equals
/// the dataset's ledger charges minus its refunds. Public datasets record their charges in the
/// ledger only; their `spent_*` stay 0.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DatasetRecord {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub name: String,
    pub kind: Kind,
    pub relation: Relation,
    pub row_norm_bound: Option<f64>,
    pub row_l1_bound: Option<f64>,
    pub entry_bound: Option<f64>,
    pub public: bool,
    pub budget_rho_units: Option<RhoUnits>,
    pub budget_delta_units: Option<DeltaUnits>,
    pub spent_rho_units: RhoUnits,
    pub spent_delta_units: DeltaUnits,
    /// The part of `spent_rho_units` not spent by Gaussian mechanisms.
    pub spent_other_rho_units: RhoUnits,
    /// The owner's (ε, δ), when the budget was stated that way (tight accounting applies;
    /// `budget_rho_units` is then the exact-Gaussian ceiling).
    pub budget_epsilon_delta: Option<(f64, f64)>,
    /// How the owner stated the budget (ρ, or ε and δ), as given at creation.
    pub budget_stated: serde_json::Value,
    pub status: DatasetStatus,
    pub n: Option<i64>,
    pub d: Option<i64>,
    /// Stored entries of a sparse matrix (both triangles); `None` for dense data.
    pub nnz: Option<i64>,
    pub created_at: DateTime<Utc>,
    pub deleted_at: Option<DateTime<Utc>>,
}

impl DatasetRecord {
    /// The budget as the admission rule sees it; `None` for public datasets.
    pub fn budget(&self) -> Option<Budget> {
        let rho_units = self.budget_rho_units?;
        Some(match self.budget_epsilon_delta {
            Some((epsilon, delta)) => Budget::EpsilonDelta { epsilon, delta },
            None => Budget::Zcdp {
                rho_units,
                delta_units: self.budget_delta_units.unwrap_or_default(),
            },
        })
    }

    /// What has been spent, in units.
    pub fn spent(&self) -> Spending {
        Spending {
            rho_units: self.spent_rho_units,
            other_rho_units: self.spent_other_rho_units,
            delta_units: self.spent_delta_units,
        }
    }

    /// Remaining ρ units for a Gaussian-only job under the rule now in force (for an (ε, δ)
    /// budget this depends on what was spent: the exact Gaussian curve while only Gaussian
    /// mechanisms were charged, CKS afterwards). `None` for public datasets (no budget).
    pub fn remaining_rho_units(&self) -> Option<RhoUnits> {
        Some((self.rho_ceiling_units()? - self.spent_rho_units).max(RhoUnits::ZERO))
    }

    /// The most ρ units the dataset's spending may total under the rule now in force: the
    /// budget itself for a zCDP budget; for an (ε, δ) budget the admission capacity
    /// (docs/design/privacy.md §2.6), which depends on whether anything but Gaussian mechanisms
    /// was charged. `None` for public datasets. `remaining = ceiling − spent`.
    pub fn rho_ceiling_units(&self) -> Option<RhoUnits> {
        let budget = self.budget()?;
        Some(rho_capacity_units(&budget, self.spent()).min(self.budget_rho_units?))
    }

    /// Remaining δ units that approximate parts may still spend, `None` for public datasets (no
    /// budget): δ_max for a zCDP budget, the fixed cap δ/10 for an (ε, δ) budget
    /// (docs/design/privacy.md §2.6); never negative, also for datasets that spent under an
    /// older rule.
    pub fn remaining_delta_units(&self) -> Option<DeltaUnits> {
        let budget = self.budget()?;
        let cap = delta_capacity_units(&budget).min(self.budget_delta_units?);
        Some((cap - self.spent_delta_units).max(DeltaUnits::ZERO))
    }
}

/// What a caller supplies to create a dataset. `budget_*` must be `Some` (ρ > 0, δ ≥ 0 units)
/// for private datasets and `None` for public ones.
#[derive(Debug, Clone, PartialEq)]
pub struct NewDataset {
    pub name: String,
    pub kind: Kind,
    pub relation: Relation,
    pub row_norm_bound: Option<f64>,
    pub row_l1_bound: Option<f64>,
    pub entry_bound: Option<f64>,
    pub public: bool,
    pub budget_rho_units: Option<RhoUnits>,
    pub budget_delta_units: Option<DeltaUnits>,
    /// The stated (ε, δ) of a budget given that way (then `budget_rho_units` must be the
    /// exact-Gaussian ceiling and `budget_delta_units` the δ in units).
    pub budget_epsilon_delta: Option<(f64, f64)>,
    pub budget_stated: serde_json::Value,
}

/// A ledger row: a charge (at submission) or a refund (cancelled while queued).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LedgerEntryKind {
    Charge,
    Refund,
}

impl LedgerEntryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LedgerEntryKind::Charge => "charge",
            LedgerEntryKind::Refund => "refund",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "charge" => Some(LedgerEntryKind::Charge),
            "refund" => Some(LedgerEntryKind::Refund),
            _ => None,
        }
    }
}

/// One line of a dataset's ledger. Ledger rows are never updated or deleted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LedgerEntry {
    pub id: i64,
    pub dataset_id: Uuid,
    pub job_id: Option<Uuid>,
    pub entry: LedgerEntryKind,
    pub algorithm: Option<String>,
    pub rho_units: RhoUnits,
    pub delta_units: DeltaUnits,
    /// The part of `rho_units` not spent by Gaussian mechanisms.
    pub other_rho_units: RhoUnits,
    /// Which rule admitted a charge (`None` on refunds and on public datasets).
    pub rule: Option<Rule>,
    pub created_at: DateTime<Utc>,
}

/// Lifecycle of a job. `Succeeded`, `Failed` and `Cancelled` are terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    Queued,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

impl JobStatus {
    pub const ALL: [JobStatus; 5] = [
        JobStatus::Queued,
        JobStatus::Running,
        JobStatus::Succeeded,
        JobStatus::Failed,
        JobStatus::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Queued => "queued",
            JobStatus::Running => "running",
            JobStatus::Succeeded => "succeeded",
            JobStatus::Failed => "failed",
            JobStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        JobStatus::ALL.into_iter().find(|status| status.as_str() == s)
    }

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobStatus::Succeeded | JobStatus::Failed | JobStatus::Cancelled
        )
    }
}

/// The facts of a job's dataset that decide whether the job's timings may be shown
/// (`crate::context::run_time_is_public`), read in the same query as the job on a status read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobDatasetFacts {
    pub public: bool,
    pub relation: Relation,
    /// The dataset is a sparse matrix (it has a count of stored entries).
    pub sparse: bool,
}

/// A job as stored (without its result; see [`JobResult`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobRecord {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub dataset_id: Uuid,
    pub algorithm: String,
    /// Parameters as the client sent them.
    pub params: serde_json::Value,
    /// Validated and calibrated configuration the runner executes.
    pub config: serde_json::Value,
    /// Privacy as the client stated it.
    pub privacy: serde_json::Value,
    /// What the job was charged, in ledger units.
    pub cost: Spending,
    /// How `algorithm` was chosen when the client asked for `auto`.
    pub selection: Option<serde_json::Value>,
    pub status: JobStatus,
    pub progress_done: i64,
    pub progress_total: i64,
    pub cancel_requested: bool,
    pub error: Option<String>,
    /// Only ever present on public datasets (docs/design/privacy.md §4).
    pub seed: Option<u64>,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// How many times the job was claimed (0 while queued; a job is claimed at most once, as
    /// it never returns to the queue). Completion is fenced by it (`Lease`).
    pub attempt: i64,
}

/// What a caller supplies to submit a job. The cost is computed by the caller from the
/// parameters and public bounds before submission (docs/design/privacy.md §2); both amounts must be ≥ 0.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    pub dataset_id: Uuid,
    pub algorithm: String,
    pub params: serde_json::Value,
    pub config: serde_json::Value,
    pub privacy: serde_json::Value,
    /// The charge, in ledger units; its non-Gaussian ρ lies between 0 and its whole ρ.
    pub cost: Spending,
    /// How `algorithm` was chosen when the client asked for `auto`.
    pub selection: Option<serde_json::Value>,
    /// Refused (`StoreError::SeedNotAllowed`) unless the dataset is public.
    pub seed: Option<u64>,
    pub idempotency: Option<Idempotency>,
}

/// An `Idempotency-Key` and a hash of the request it came with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Idempotency {
    pub key: String,
    pub request_hash: String,
}

/// The result of [`super::Store::submit_job`]. Only `Created` charged the budget.
#[derive(Debug, Clone, PartialEq)]
pub enum SubmitOutcome {
    /// The job was admitted, charged and queued.
    Created(JobRecord),
    /// The same idempotency key and request were seen before: that job, no new charge.
    Replayed(JobRecord),
    /// The charge does not fit the remaining budget; nothing was written.
    OverBudget {
        remaining_rho_units: RhoUnits,
        requested_rho_units: RhoUnits,
        remaining_delta_units: DeltaUnits,
        requested_delta_units: DeltaUnits,
    },
    /// The idempotency key was used before with a different request.
    IdempotencyMismatch,
    DatasetNotFound,
    DatasetNotReady(DatasetStatus),
}

/// The result of [`super::Store::cancel_job`].
#[derive(Debug, Clone, PartialEq)]
pub enum CancelOutcome {
    /// It was queued: now cancelled and its charge refunded.
    Refunded(JobRecord),
    /// It is running: the runner is asked to stop; the charge is kept.
    CancelRequested(JobRecord),
    /// It had already finished (succeeded, failed or cancelled); nothing changed.
    AlreadyFinished(JobRecord),
    NotFound,
}

/// A finished job's output: the orthonormal basis, column-major d×k, and optional
/// post-processed values (docs/design/privacy.md §3).
#[derive(Debug, Clone, PartialEq)]
pub struct JobResult {
    pub d: usize,
    pub k: usize,
    pub basis: Vec<f64>,
    pub eigenvalues: Option<Vec<f64>>,
    /// Other DP releases returned with the basis, by name (e.g. `clip_norm`).
    pub released: Option<serde_json::Value>,
}
