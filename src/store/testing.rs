//! Test support: a fresh database per test, on SQLite always and on PostgreSQL when
//! `PRIVPCA_TEST_POSTGRES_URL` names a server whose user may create databases
//! (`scripts/postgres.sh` starts one). Used by the store's tests and the API tests.

use std::path::Path;

use sqlx::{Connection, Executor};

/// The variable naming the PostgreSQL server the tests use, when set.
pub const POSTGRES_URL_VAR: &str = "PRIVPCA_TEST_POSTGRES_URL";

/// The URL of a fresh, empty database for one test: a new database on the PostgreSQL server
/// named by [`POSTGRES_URL_VAR`] if it is set, else a SQLite file in `dir`.
///
/// # Panics
/// If the PostgreSQL server is named but cannot create the database (a test set-up failure).
pub async fn fresh_database_url(dir: &Path) -> String {
    match std::env::var(POSTGRES_URL_VAR) {
        Ok(base) if !base.is_empty() => fresh_postgres_database(&base).await,
        _ => format!("sqlite://{}", dir.join("privpca.db").display()),
    }
}

/// Creates `privpca_test_<random>` on the server at `base` and returns its URL.
///
/// # Panics
/// If the server cannot be reached or refuses to create the database.
pub async fn fresh_postgres_database(base: &str) -> String {
    let name = format!("privpca_test_{}", uuid::Uuid::new_v4().simple());
    let mut admin = sqlx::PgConnection::connect(base)
        .await
        .unwrap_or_else(|e| panic!("connecting to {POSTGRES_URL_VAR}: {e}"));
    admin
        .execute(format!("CREATE DATABASE {name}").as_str())
        .await
        .unwrap_or_else(|e| panic!("creating the test database: {e}"));
    let _ = admin.close().await;
    let (path, query) = match base.split_once('?') {
        Some((path, query)) => (path, format!("?{query}")),
        None => (base, String::new()),
    };
    let server = path.rsplit_once('/').map_or(path, |(server, _)| server);
    format!("{server}/{name}{query}")
}

/// A store on the database at `url` under the replica name `replica`, with a 30 s lease.
///
/// # Panics
/// If the database cannot be opened.
pub async fn replica_store(url: &str, dir: &Path, replica: &str) -> super::Store {
    super::Store::connect(url, dir)
        .await
        .expect("connect")
        .with_replica(replica)
        .with_lease(std::time::Duration::from_secs(30))
}

/// A new tenant's enrolling `federated_power` study (d 3, 3 rounds, t 2, ρ cost 10 units) with
/// `sites` invited sites (indices 1..=sites), coordinated by `store`'s replica; its id.
///
/// # Panics
/// If the store refuses it.
pub async fn small_study(store: &super::Store, sites: usize) -> uuid::Uuid {
    use crate::privacy::units::{DeltaUnits, RhoUnits};
    let (tenant, _) = store.create_tenant("alice").await.expect("tenant");
    let new = super::NewStudy {
        name: "durable".into(),
        algorithm: "federated_power".into(),
        n_features: 3,
        relation: crate::dataset::Relation::ReplaceOne,
        row_norm_bound: 1.0,
        row_l1_bound: None,
        params: serde_json::json!({}),
        config: serde_json::json!({}),
        privacy: serde_json::json!({}),
        cost_rho_units: RhoUnits(10),
        cost_delta_units: DeltaUnits(0),
        threshold: 2,
        join_deadline: chrono::Utc::now() + chrono::Duration::seconds(60),
        round_timeout_ms: 1_000,
        rounds: 3,
        sites: (1..=sites)
            .map(|i| super::NewStudySite {
                name: format!("site-{i}"),
                budget_rho_units: None,
            })
            .collect(),
    };
    let (record, _, _) = store.create_study(tenant.id, new).await.expect("create");
    record.id
}
