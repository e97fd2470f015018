//! Store tests: each test gets its own database, a SQLite file in a temporary directory, or a
//! fresh PostgreSQL database when `PRIVPCA_TEST_POSTGRES_URL` is set (super::testing).

mod admission;
mod api_keys;
mod datasets;
mod ledger_log;
mod ledger_props;
mod queue;
mod tenancy;
mod uploads;

use std::time::Duration;

use serde_json::json;
use tempfile::TempDir;
use tokio::task::JoinHandle;
use uuid::Uuid;

use super::{
    DatasetRecord, JobRecord, Lease, LedgerEntry, NewDataset, NewJob, Store, StoreError, SubmitOutcome,
};
use crate::dataset::{Kind, Relation};
use crate::privacy::admission::Spending;
use crate::privacy::units::{DeltaUnits, RhoUnits};

/// A store on a fresh database file, with one tenant.
pub(super) struct Fixture {
    pub store: Store,
    pub tenant: Uuid,
    pub dir: TempDir,
    /// The database's URL, to open it again.
    pub url: String,
}

pub(super) async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = super::testing::fresh_database_url(dir.path()).await;
    let store = Store::connect(&url, dir.path()).await.expect("connect");
    let (tenant, _key) = store.create_tenant("alice").await.expect("tenant");
    Fixture {
        store,
        tenant: tenant.id,
        dir,
        url,
    }
}

/// Asserts that `dataset` is ready with n × d data.
#[track_caller]
pub(super) fn assert_ready(dataset: &DatasetRecord, n: i64, d: i64) {
    assert_eq!(
        (dataset.status, dataset.n, dataset.d),
        (super::DatasetStatus::Ready, Some(n), Some(d))
    );
}

/// A [`fixture`] with a ready dataset from `spec` (see [`Fixture::ready`]).
pub(super) async fn fixture_with(spec: NewDataset) -> (Fixture, DatasetRecord) {
    let f = fixture().await;
    let ds = f.ready(spec).await;
    (f, ds)
}

impl Fixture {
    /// The stored result of the tenant's job `id` (none unless it succeeded).
    pub(super) async fn job_result(&self, id: Uuid) -> Option<super::JobResult> {
        self.store.job_result(self.tenant, id).await.expect("result")
    }

    /// A ready dataset of the tenant's from `spec` (see [`ready_dataset`]).
    pub(super) async fn ready(&self, spec: NewDataset) -> DatasetRecord {
        ready_dataset(&self.store, self.tenant, spec).await
    }

    /// Submits `new` for the tenant and expects admission (see [`submit_ok`]).
    pub(super) async fn submit_ok(&self, new: NewJob) -> JobRecord {
        submit_ok(&self.store, self.tenant, new).await
    }

    /// Attaches the upload at `path` (n × d) under `claim`, which must succeed; the dataset.
    pub(super) async fn attached(
        &self,
        claim: &super::UploadClaim,
        path: &std::path::Path,
        n: u64,
        d: u64,
    ) -> DatasetRecord {
        let attached = self.store.attach_upload(claim, path, n, d).await.expect("attach");
        attached.expect("attached")
    }

    /// Submits `new` for the tenant; the store's answer.
    pub(super) async fn submit(&self, new: NewJob) -> SubmitOutcome {
        self.store.submit_job(self.tenant, new).await.expect("submit")
    }

    /// Deletes the tenant's dataset `id`, which must exist; the dataset as deletion left it.
    pub(super) async fn delete(&self, id: Uuid) -> DatasetRecord {
        let deleted = self.store.delete_dataset(self.tenant, id).await.expect("delete");
        deleted.expect("exists")
    }
}

pub(super) fn private_spec(budget_rho_units: i64, budget_delta_units: i64) -> NewDataset {
    NewDataset {
        name: "census".to_owned(),
        kind: Kind::Records,
        relation: Relation::ReplaceOne,
        row_norm_bound: Some(1.0),
        row_l1_bound: None,
        entry_bound: None,
        public: false,
        budget_rho_units: Some(RhoUnits(budget_rho_units)),
        budget_delta_units: Some(DeltaUnits(budget_delta_units)),
        budget_epsilon_delta: None,
        budget_stated: json!({ "rho": 1.0 }),
    }
}

pub(super) fn public_spec() -> NewDataset {
    NewDataset {
        public: true,
        budget_rho_units: None,
        budget_delta_units: None,
        ..private_spec(1, 0)
    }
}

/// A second replica on the fixture's database and data directory.
pub(super) async fn replica(f: &Fixture, name: &str, lease: Duration) -> Store {
    Store::connect(&f.url, f.dir.path())
        .await
        .expect("second replica")
        .with_replica(name)
        .with_lease(lease)
}

/// Two replicas with leases of `lease`: the fixture's store as `replica-a`, and `replica-b` on
/// the same database.
pub(super) async fn replicas(f: &Fixture, lease: Duration) -> (Store, Store) {
    let a = f.store.clone().with_replica("replica-a").with_lease(lease);
    (a, replica(f, "replica-b", lease).await)
}

/// Creates a private dataset (1 000 ρ units, no δ) and leaves it empty.
pub(super) async fn empty_dataset(store: &Store, tenant: Uuid) -> DatasetRecord {
    store
        .create_dataset(tenant, private_spec(1_000, 0))
        .await
        .expect("create")
}

/// Reads back a dataset that must exist.
pub(super) async fn stored_dataset(store: &Store, tenant: Uuid, id: Uuid) -> DatasetRecord {
    store.get_dataset(tenant, id).await.expect("get").expect("exists")
}

/// Reads back a job that must exist.
pub(super) async fn stored_job(store: &Store, tenant: Uuid, id: Uuid) -> JobRecord {
    store.get_job(tenant, id).await.expect("get").expect("exists")
}

/// A dataset's ledger, which must exist.
pub(super) async fn ledger_entries(store: &Store, tenant: Uuid, dataset: Uuid) -> Vec<LedgerEntry> {
    store
        .ledger(tenant, dataset)
        .await
        .expect("ledger")
        .expect("dataset exists")
}

/// Submits `count` jobs made by `new` at once, each on its own task.
pub(super) fn spawn_submissions(
    f: &Fixture,
    count: usize,
    new: impl Fn() -> NewJob,
) -> Vec<JoinHandle<Result<SubmitOutcome, StoreError>>> {
    (0..count)
        .map(|_| {
            let (store, tenant, new) = (f.store.clone(), f.tenant, new());
            tokio::spawn(async move { store.submit_job(tenant, new).await })
        })
        .collect()
}

/// Creates a dataset from `spec` and marks it ready (100 × 5).
pub(super) async fn ready_dataset(store: &Store, tenant: Uuid, spec: NewDataset) -> DatasetRecord {
    let created = store.create_dataset(tenant, spec).await.expect("create dataset");
    store
        .attach_data(tenant, created.id, 100, 5)
        .await
        .expect("attach")
        .expect("attachable")
}

pub(super) fn job(dataset: Uuid, rho_units: i64, delta_units: i64) -> NewJob {
    NewJob {
        dataset_id: dataset,
        algorithm: "noisy_power".to_owned(),
        params: json!({ "k": 2 }),
        config: json!({ "k": 2, "iterations": 10 }),
        privacy: json!({ "rho": 0.1 }),
        cost: Spending {
            rho_units: RhoUnits(rho_units),
            other_rho_units: RhoUnits::ZERO,
            delta_units: DeltaUnits(delta_units),
        },
        selection: None,
        seed: None,
        idempotency: None,
    }
}

/// Submits and expects admission.
pub(super) async fn submit_ok(store: &Store, tenant: Uuid, new: NewJob) -> JobRecord {
    match store.submit_job(tenant, new).await.expect("submit") {
        SubmitOutcome::Created(job) => job,
        other => panic!("expected Created, got {other:?}"),
    }
}

/// (Σ charges − Σ refunds) of a dataset's ledger, for ρ and δ.
pub(super) async fn ledger_net(store: &Store, tenant: Uuid, dataset: Uuid) -> (i64, i64) {
    ledger_entries(store, tenant, dataset)
        .await
        .iter()
        .fold((0, 0), |(rho, delta), e| match e.entry {
            super::LedgerEntryKind::Charge => (rho + e.rho_units.0, delta + e.delta_units.0),
            super::LedgerEntryKind::Refund => (rho - e.rho_units.0, delta - e.delta_units.0),
        })
}

/// The lease of a job claimed once (every job is claimed at most once).
pub(super) fn held(job: Uuid) -> Lease {
    Lease { job, attempt: 1 }
}
