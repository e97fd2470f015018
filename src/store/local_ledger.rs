//! The ledger of one site (`privpca site --ledger PATH`, docs/design/federation.md "Site
//! client"): the service's own schema, migrations and check-and-charge step, in a SQLite file
//! the site keeps next to its data.
//!
//! One ledger file holds one budget for the data it protects: the first use creates a tenant
//! `site` and one private records dataset named after the data file, with the budget stated
//! then; every later use must state the same budget (it is never changed silently) and the
//! same neighbouring relation (ρ under `replace_one` and under `add_remove` do not add up).
//! A study is charged at most once per dataset: the charge is a ledger row with `job_id` NULL
//! and `study_id` set, and the schema's unique index `ledger_once_per_study` refuses a second
//! one. A file that holds anything else (another tenant, several datasets, the service's own
//! database) is refused.

use std::path::Path;

use sha2::{Digest, Sha256};
use sqlx::AnyConnection;
use uuid::Uuid;

use super::codec::{id, now, ts};
use super::ledger::reserve;
use super::rows::{self, DATASET_COLUMNS};
use super::{Backend, Commits, Store, StoreError, open_pool};
use crate::dataset::{Kind, Relation};
use crate::privacy::admission::{Rule, Spending};
use crate::privacy::units::{DeltaUnits, RhoUnits};

/// The name of the one tenant of a site ledger.
const SITE_TENANT: &str = "site";

/// What a site ledger records about the data it protects when it is first used.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalDataset {
    /// The data file's name (for the owner's eyes only).
    pub name: String,
    /// The neighbouring relation the budget is stated under (`replace_one` or `add_remove`).
    pub relation: Relation,
    pub row_norm_bound: f64,
    pub row_l1_bound: Option<f64>,
    pub n: u64,
    pub d: u64,
}

/// The budget of a site ledger and what is spent of it, in ledger units
/// (`crate::privacy::units`).
#[derive(Debug, Clone, PartialEq)]
pub struct LocalBudget {
    pub tenant: Uuid,
    pub dataset: Uuid,
    /// The data file's name when the ledger was created.
    pub name: String,
    pub relation: Relation,
    pub budget_rho_units: RhoUnits,
    pub budget_delta_units: DeltaUnits,
    pub spent_rho_units: RhoUnits,
    pub spent_delta_units: DeltaUnits,
    /// Whether this call created the ledger's dataset (first use of the file).
    pub created: bool,
}

impl LocalBudget {
    pub fn remaining_rho_units(&self) -> RhoUnits {
        self.budget_rho_units - self.spent_rho_units
    }

    pub fn remaining_delta_units(&self) -> DeltaUnits {
        self.budget_delta_units - self.spent_delta_units
    }

    /// Whether a charge of `rho_units`/`delta_units` fits what remains.
    pub fn fits(&self, rho_units: RhoUnits, delta_units: DeltaUnits) -> bool {
        self.budget_rho_units.admits(self.spent_rho_units, rho_units)
            && self
                .budget_delta_units
                .admits(self.spent_delta_units, delta_units)
    }
}

/// The result of [`Store::charge_study`]. Only `Charged` wrote anything.
#[derive(Debug, Clone, PartialEq)]
pub enum ChargeOutcome {
    /// Charged; the budget as it stands after the charge.
    Charged(LocalBudget),
    /// This study was charged to this dataset before; nothing was charged now.
    AlreadyCharged,
    /// The charge does not fit what remains; nothing was written.
    OverBudget {
        remaining_rho_units: RhoUnits,
        remaining_delta_units: DeltaUnits,
    },
}

/// ρ and δ, for messages.
fn show(rho_units: RhoUnits, delta_units: DeltaUnits) -> String {
    format!("rho = {}, delta = {}", rho_units.to_real(), delta_units.to_real())
}

fn not_a_site_ledger(why: &str) -> StoreError {
    StoreError::InvalidDataset(format!(
        "this file is not a site ledger ({why}); give `privpca site` a ledger file of its own"
    ))
}

/// The one dataset of a site ledger, if it has been created; refuses files that hold
/// anything else.
async fn site_dataset(conn: &mut AnyConnection) -> Result<Option<LocalBudget>, StoreError> {
    let tenants: Vec<(String, String)> = sqlx::query_as("SELECT id, name FROM tenants")
        .fetch_all(&mut *conn)
        .await?;
    let sql = format!("SELECT {DATASET_COLUMNS} FROM datasets");
    let datasets = sqlx::query(&sql).fetch_all(&mut *conn).await?;
    match (tenants.as_slice(), datasets.as_slice()) {
        ([], []) => Ok(None),
        ([(_, name)], [row]) if name == SITE_TENANT => {
            let found = rows::dataset(row)?;
            let (Some(budget_rho_units), Some(budget_delta_units)) =
                (found.budget_rho_units, found.budget_delta_units)
            else {
                return Err(not_a_site_ledger("its dataset carries no budget"));
            };
            if found.kind != Kind::Records || found.status != super::DatasetStatus::Ready {
                return Err(not_a_site_ledger("its dataset is not a ready records dataset"));
            }
            Ok(Some(LocalBudget {
                tenant: found.tenant_id,
                dataset: found.id,
                name: found.name,
                relation: found.relation,
                budget_rho_units,
                budget_delta_units,
                spent_rho_units: found.spent_rho_units,
                spent_delta_units: found.spent_delta_units,
                created: false,
            }))
        }
        _ => Err(not_a_site_ledger(&format!(
            "it holds {} tenants and {} datasets",
            tenants.len(),
            datasets.len()
        ))),
    }
}

/// Checks a budget stated in units the way the service checks a dataset's.
fn check_budget(rho_units: RhoUnits, delta_units: DeltaUnits) -> Result<(), StoreError> {
    if !rho_units.is_valid_budget() {
        return Err(StoreError::InvalidCharge(
            "the rho budget must be > 0 and at most the largest allowed budget".to_owned(),
        ));
    }
    if !delta_units.is_valid_budget() {
        return Err(StoreError::InvalidCharge(
            "the delta budget must lie in [0, 1)".to_owned(),
        ));
    }
    Ok(())
}

/// Creates the site tenant and its one dataset (ready, with its budget) in `conn`'s
/// transaction.
async fn create_site_dataset(
    conn: &mut AnyConnection,
    budget_rho_units: RhoUnits,
    budget_delta_units: DeltaUnits,
    data: &LocalDataset,
) -> Result<LocalBudget, StoreError> {
    let bad = |msg: &str| Err(StoreError::InvalidDataset(msg.to_owned()));
    if !data.relation.fits(Kind::Records) {
        return bad("a site ledger protects records (replace_one or add_remove)");
    }
    let bounds_ok = data.row_norm_bound > 0.0
        && data.row_norm_bound.is_finite()
        && data.row_l1_bound.is_none_or(|a| a > 0.0 && a.is_finite());
    if !bounds_ok {
        return bad("bounds must be finite and > 0");
    }
    let (Ok(n), Ok(d)) = (i64::try_from(data.n), i64::try_from(data.d)) else {
        return bad("n and d must fit in 63 bits");
    };
    if !(n > 0 && d > 0) {
        return bad("n and d must be > 0");
    }
    let at = ts(now());
    let tenant = Uuid::new_v4();
    // The tenant never authenticates: its key hash is the hash of a key nobody holds.
    let key_hash = hex::encode(Sha256::digest(Uuid::new_v4().as_bytes()));
    sqlx::query("INSERT INTO tenants (id, name, key_hash, created_at) VALUES ($1, $2, $3, $4)")
        .bind(id(tenant))
        .bind(SITE_TENANT)
        .bind(key_hash)
        .bind(&at)
        .execute(&mut *conn)
        .await?;
    let dataset = Uuid::new_v4();
    let stated = serde_json::json!({
        "rho": budget_rho_units.to_real(),
        "delta": budget_delta_units.to_real(),
        "stated_by": "privpca site",
    });
    sqlx::query(
        "INSERT INTO datasets (id, tenant_id, name, kind, relation, row_norm_bound, row_l1_bound, \
             entry_bound, public, budget_rho_units, budget_delta_units, budget_stated, status, n, d, \
             created_at, updated_at) \
         VALUES ($1, $2, $3, 'records', $4, $5, $6, NULL, 0, $7, $8, $9, 'ready', $10, $11, $12, $13)",
    )
    .bind(id(dataset))
    .bind(id(tenant))
    .bind(&data.name)
    .bind(data.relation.as_str())
    .bind(data.row_norm_bound)
    .bind(data.row_l1_bound)
    .bind(budget_rho_units.0)
    .bind(budget_delta_units.0)
    .bind(serde_json::to_string(&stated)?)
    .bind(n)
    .bind(d)
    .bind(&at)
    .bind(&at)
    .execute(&mut *conn)
    .await?;
    super::ledger_log::append_budget_leaf(conn, dataset).await?;
    Ok(LocalBudget {
        tenant,
        dataset,
        name: data.name.clone(),
        relation: data.relation,
        budget_rho_units,
        budget_delta_units,
        spent_rho_units: RhoUnits::ZERO,
        spent_delta_units: DeltaUnits::ZERO,
        created: true,
    })
}

/// Creates the ledger file readable and writable by its owner only (0600), or narrows an
/// existing one to that: it holds the secret seeds of the site's study sessions.
fn owner_only(path: &Path) -> Result<(), StoreError> {
    let io = |e: std::io::Error| StoreError::InvalidDataset(format!("the ledger {}: {e}", path.display()));
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)
            .map_err(io)?;
        let mode = std::fs::metadata(path).map_err(io)?.permissions().mode();
        if mode & 0o077 != 0 {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
        }
    }
    #[cfg(not(unix))]
    {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(io)?;
    }
    Ok(())
}

impl Store {
    /// Opens (creating if missing, mode 0600) the site ledger at `path` and applies pending migrations.
    /// It needs no data directory. Commits are synchronous (`synchronous = FULL`): a charge
    /// that returned has reached the disk before anything is sent.
    pub async fn open_ledger(path: &Path) -> Result<Store, StoreError> {
        owner_only(path)?;
        let url = format!("sqlite://{}", path.display());
        let pool = open_pool(&url, Backend::Sqlite, Commits::SyncedSelfCheckpointed).await?;
        let store = Store {
            reads: pool.clone(),
            synced: pool.clone(),
            pool,
            backend: Backend::Sqlite,
            data_dir: path.parent().unwrap_or(Path::new("")).to_path_buf(),
            replica: super::default_replica_name(),
            lease: super::DEFAULT_LEASE,
            lease_clock_ahead: std::sync::Arc::default(),
            site_tokens: std::sync::Arc::default(),
            api_keys: std::sync::Arc::default(),
        };
        store.migrate().await?;
        Ok(store)
    }

    /// The site ledger's budget: on first use (an empty file) creates the tenant `site` and
    /// one ready records dataset described by `data` with this budget; later, checks that the
    /// stated budget and relation are those of the ledger and refuses otherwise
    /// (`StoreError::InvalidDataset`, never changing the budget). All in one `BEGIN IMMEDIATE`
    /// transaction.
    pub async fn ensure_local_budget(
        &self,
        budget_rho_units: RhoUnits,
        budget_delta_units: DeltaUnits,
        data: &LocalDataset,
    ) -> Result<LocalBudget, StoreError> {
        check_budget(budget_rho_units, budget_delta_units)?;
        let mut tx = self.write_tx().await?;
        let budget = match site_dataset(&mut tx).await? {
            None => create_site_dataset(&mut tx, budget_rho_units, budget_delta_units, data).await?,
            Some(found) => {
                if (found.budget_rho_units, found.budget_delta_units)
                    != (budget_rho_units, budget_delta_units)
                {
                    return Err(StoreError::InvalidDataset(format!(
                        "this ledger's budget is {} and never changes; the budget stated now is {} \
                         (state the ledger's budget, or use a new ledger file for other data)",
                        show(found.budget_rho_units, found.budget_delta_units),
                        show(budget_rho_units, budget_delta_units),
                    )));
                }
                if found.relation != data.relation {
                    return Err(StoreError::InvalidDataset(format!(
                        "this ledger's budget protects its data under the {} relation; this study uses {} \
                         (use a separate ledger file)",
                        found.relation.as_str(),
                        data.relation.as_str(),
                    )));
                }
                found
            }
        };
        tx.commit().await?;
        Ok(budget)
    }

    /// The site ledger's budget, `None` before its first use.
    pub async fn local_budget(&self) -> Result<Option<LocalBudget>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        site_dataset(&mut conn).await
    }

    /// Whether `study` was charged to `dataset`.
    pub async fn study_charged(&self, dataset: Uuid, study: Uuid) -> Result<bool, StoreError> {
        let found: Option<i64> = sqlx::query_scalar(
            "SELECT 1 FROM ledger WHERE study_id = $1 AND dataset_id = $2 AND entry = 'charge'",
        )
        .bind(id(study))
        .bind(id(dataset))
        .fetch_optional(&self.pool)
        .await?;
        Ok(found.is_some())
    }

    /// Charges a study's cost to the site's dataset: in one `BEGIN IMMEDIATE` transaction,
    /// refuses a study charged before (`AlreadyCharged`), reserves the amount iff
    /// spent + cost ≤ budget for ρ and δ (`OverBudget` otherwise), and appends the ledger row
    /// (`job_id` NULL, `study_id` set).
    pub async fn charge_study(
        &self,
        dataset: Uuid,
        study: Uuid,
        algorithm: &str,
        rho_units: RhoUnits,
        delta_units: DeltaUnits,
    ) -> Result<ChargeOutcome, StoreError> {
        if !(rho_units.0 >= 0 && delta_units.0 >= 0) {
            return Err(StoreError::InvalidCharge(
                "a study's cost must be >= 0".to_owned(),
            ));
        }
        let mut tx = self.write_tx().await?;
        let charged_before: Option<i64> = sqlx::query_scalar(
            "SELECT 1 FROM ledger WHERE study_id = $1 AND dataset_id = $2 AND entry = 'charge'",
        )
        .bind(id(study))
        .bind(id(dataset))
        .fetch_optional(&mut *tx)
        .await?;
        if charged_before.is_some() {
            tx.rollback().await?;
            return Ok(ChargeOutcome::AlreadyCharged);
        }
        let at = now();
        // Site budgets are stated in zCDP, so the split into Gaussian and other ρ does not
        // change admission; the study's charge is recorded as "other", the conservative reading.
        let charge = Spending {
            rho_units,
            other_rho_units: rho_units,
            delta_units,
        };
        if reserve(&mut tx, dataset, charge, at).await?.is_none() {
            let found = site_dataset(&mut tx).await?;
            tx.rollback().await?;
            let found = found.filter(|b| b.dataset == dataset).ok_or_else(|| {
                StoreError::InvalidCharge("the dataset is not this ledger's ready dataset".to_owned())
            })?;
            return Ok(ChargeOutcome::OverBudget {
                remaining_rho_units: found.remaining_rho_units(),
                remaining_delta_units: found.remaining_delta_units(),
            });
        }
        // The row states what `reserve` added to the dataset's totals (all of ρ as "other",
        // admitted by the zCDP rule), so the entries always sum to the totals.
        sqlx::query(
            "INSERT INTO ledger (dataset_id, job_id, entry, algorithm, rho_units, delta_units, \
                 other_rho_units, rule, created_at, study_id) \
             VALUES ($1, NULL, 'charge', $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(id(dataset))
        .bind(algorithm)
        .bind(rho_units.0)
        .bind(delta_units.0)
        .bind(charge.other_rho_units.0)
        .bind(Rule::Zcdp.as_str())
        .bind(ts(at))
        .bind(id(study))
        .execute(&mut *tx)
        .await?;
        let after = site_dataset(&mut tx)
            .await?
            .filter(|b| b.dataset == dataset)
            .ok_or_else(|| {
                StoreError::InvalidCharge("the dataset is not this ledger's dataset".to_owned())
            })?;
        tx.commit().await?;
        Ok(ChargeOutcome::Charged(after))
    }
}

#[cfg(test)]
#[path = "local_ledger_tests.rs"]
mod tests;
