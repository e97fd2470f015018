//! The SQLite and PostgreSQL migrations are kept by hand, one set per backend
//! (`migrations/sqlite/`, `migrations/postgres/`), and the store sends both the same queries;
//! so they must describe one schema. This test applies each set to an empty database and
//! compares them table by table and column by column: the type (normalised: SQLite's INTEGER,
//! REAL, TEXT, BLOB against PostgreSQL's BIGINT, DOUBLE PRECISION, TEXT, BYTEA), whether NULL
//! is allowed, the default, and whether the database generates the value; then the indexes
//! and triggers by name and table. It fails naming the first disagreement. CHECK constraints
//! are not compared (their text differs between the dialects).
//!
//! The comparison needs PostgreSQL, so it is ignored by a plain `cargo test`; run it with
//! `eval "$(scripts/postgres.sh)"; cargo test --test schema -- --ignored` (CI does).

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;

use sqlx::migrate::Migrator;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{Connection, PgConnection, Row, SqliteConnection};

static SQLITE: Migrator = sqlx::migrate!("migrations/sqlite");
static POSTGRES: Migrator = sqlx::migrate!("migrations/postgres");

/// Triggers only PostgreSQL has: SQLite has no TRUNCATE to refuse.
const POSTGRES_ONLY_TRIGGERS: [&str; 2] = ["ledger_no_truncate", "ledger_leaves_no_truncate"];

/// One column, as both backends can state it.
#[derive(Debug, PartialEq)]
struct Column {
    /// `integer`, `real`, `text` or `blob` (else the backend's own name).
    kind: String,
    nullable: bool,
    /// The default without casts (`0`), if any.
    default: Option<String>,
    /// The database assigns the value (SQLite's INTEGER PRIMARY KEY, PostgreSQL's identity).
    generated: bool,
}

/// A migrated database as compared: table → column → [`Column`], and the indexes and triggers
/// (name → table) created by name.
#[derive(Debug, Default)]
struct Schema {
    tables: BTreeMap<String, BTreeMap<String, Column>>,
    indexes: BTreeMap<String, String>,
    triggers: BTreeMap<String, String>,
}

#[tokio::test]
#[ignore = "needs PostgreSQL: set PRIVPCA_TEST_POSTGRES_URL (CI runs it)"]
async fn sqlite_and_postgres_migrations_agree() {
    let base = std::env::var("PRIVPCA_TEST_POSTGRES_URL")
        .expect("PRIVPCA_TEST_POSTGRES_URL names the PostgreSQL server (scripts/postgres.sh)");
    let sqlite = sqlite_schema().await;
    let mut postgres = postgres_schema(&base).await;
    for trigger in POSTGRES_ONLY_TRIGGERS {
        assert!(
            postgres.triggers.remove(trigger).is_some(),
            "the PostgreSQL-only trigger {trigger} is gone: update POSTGRES_ONLY_TRIGGERS"
        );
    }
    if let Some(disagreement) = first_disagreement(&sqlite, &postgres) {
        panic!("the SQLite and PostgreSQL migrations disagree: {disagreement}");
    }
}

/// The SQLite side reads as the migrations state it, and a changed column is named: the
/// comparison is exercised even where PostgreSQL is not available.
#[tokio::test]
async fn the_comparison_reads_sqlite_and_names_a_difference() {
    let sqlite = sqlite_schema().await;
    let seq = &sqlite.tables["jobs"]["seq"];
    assert_eq!(
        (seq.kind.as_str(), seq.nullable, seq.generated),
        ("integer", false, true)
    );
    let spent = &sqlite.tables["datasets"]["spent_rho_units"];
    assert_eq!(spent.default.as_deref(), Some("0"));
    assert!(sqlite.tables["datasets"]["deleted_at"].nullable);
    assert_eq!(sqlite.indexes["jobs_lease"], "jobs");
    assert_eq!(sqlite.triggers["ledger_no_update"], "ledger");
    assert_eq!(first_disagreement(&sqlite, &sqlite), None);

    let mut changed = sqlite_schema().await;
    changed
        .tables
        .get_mut("ledger")
        .unwrap()
        .get_mut("rule")
        .unwrap()
        .nullable = false;
    let named = first_disagreement(&sqlite, &changed).unwrap();
    assert!(named.starts_with("column ledger.rule"), "{named}");
    let mut missing = sqlite_schema().await;
    missing.tables.remove("tenants");
    assert_eq!(
        first_disagreement(&missing, &sqlite).as_deref(),
        Some("table tenants only on PostgreSQL")
    );
}

/// The first difference, in table, column, index, trigger order; `None` when they agree.
fn first_disagreement(sqlite: &Schema, postgres: &Schema) -> Option<String> {
    let tables: BTreeSet<&String> = sqlite.tables.keys().chain(postgres.tables.keys()).collect();
    for table in tables {
        let (Some(ours), Some(theirs)) = (sqlite.tables.get(table), postgres.tables.get(table)) else {
            return Some(format!(
                "table {table} only on {}",
                side(sqlite.tables.contains_key(table))
            ));
        };
        let columns: BTreeSet<&String> = ours.keys().chain(theirs.keys()).collect();
        for column in columns {
            match (ours.get(column), theirs.get(column)) {
                (Some(a), Some(b)) if a == b => {}
                (Some(a), Some(b)) => {
                    return Some(format!("column {table}.{column}: SQLite {a:?}, PostgreSQL {b:?}"));
                }
                (a, _) => return Some(format!("column {table}.{column} only on {}", side(a.is_some()))),
            }
        }
    }
    named_difference("index", &sqlite.indexes, &postgres.indexes)
        .or_else(|| named_difference("trigger", &sqlite.triggers, &postgres.triggers))
}

fn side(on_sqlite: bool) -> &'static str {
    if on_sqlite { "SQLite" } else { "PostgreSQL" }
}

/// The first object (`what`: index, trigger) missing on one side or on another table.
fn named_difference(
    what: &str,
    sqlite: &BTreeMap<String, String>,
    postgres: &BTreeMap<String, String>,
) -> Option<String> {
    let names: BTreeSet<&String> = sqlite.keys().chain(postgres.keys()).collect();
    names
        .into_iter()
        .find_map(|name| match (sqlite.get(name), postgres.get(name)) {
            (Some(a), Some(b)) if a == b => None,
            (Some(a), Some(b)) => Some(format!("{what} {name}: on {a} in SQLite, on {b} in PostgreSQL")),
            (a, _) => Some(format!("{what} {name} only on {}", side(a.is_some()))),
        })
}

/// The SQLite migrations applied to an in-memory database (foreign keys off, as the store
/// migrates: 0005 rebuilds a referenced table).
async fn sqlite_schema() -> Schema {
    let options = SqliteConnectOptions::from_str("sqlite::memory:")
        .unwrap()
        .foreign_keys(false);
    let mut conn = SqliteConnection::connect_with(&options).await.unwrap();
    SQLITE.run(&mut conn).await.unwrap();
    let mut schema = Schema::default();
    let objects = sqlx::query(
        "SELECT type, name, tbl_name FROM sqlite_master
         WHERE name NOT LIKE 'sqlite_%' AND tbl_name <> '_sqlx_migrations' AND sql IS NOT NULL",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    for object in objects {
        let (kind, name, table): (String, String, String) = (object.get(0), object.get(1), object.get(2));
        match kind.as_str() {
            "table" => {
                let columns = sqlite_columns(&mut conn, &name).await;
                schema.tables.insert(name, columns);
            }
            "index" => drop(schema.indexes.insert(name, table)),
            "trigger" => drop(schema.triggers.insert(name, table)),
            _ => {}
        }
    }
    schema
}

async fn sqlite_columns(conn: &mut SqliteConnection, table: &str) -> BTreeMap<String, Column> {
    let rows = sqlx::query(r#"SELECT name, type, "notnull", dflt_value, pk FROM pragma_table_info(?)"#)
        .bind(table)
        .fetch_all(&mut *conn)
        .await
        .unwrap();
    let key_columns = rows.iter().filter(|r| r.get::<i64, _>("pk") > 0).count();
    rows.iter()
        .map(|row| {
            let declared: String = row.get("type");
            // A lone INTEGER PRIMARY KEY is the rowid: never NULL, assigned by SQLite.
            let rowid =
                key_columns == 1 && row.get::<i64, _>("pk") > 0 && declared.eq_ignore_ascii_case("integer");
            let kind = match declared.to_ascii_uppercase().as_str() {
                "INTEGER" => "integer".to_string(),
                "REAL" => "real".to_string(),
                "TEXT" => "text".to_string(),
                "BLOB" => "blob".to_string(),
                other => format!("sqlite {other}"),
            };
            let column = Column {
                kind,
                nullable: row.get::<i64, _>("notnull") == 0 && !rowid,
                default: row.get::<Option<String>, _>("dflt_value"),
                generated: rowid,
            };
            (row.get("name"), column)
        })
        .collect()
}

/// The PostgreSQL migrations applied to a fresh database on the server at `base`.
async fn postgres_schema(base: &str) -> Schema {
    let url = privpca::store::testing::fresh_postgres_database(base).await;
    let mut conn = PgConnection::connect(&url).await.unwrap();
    POSTGRES.run(&mut conn).await.unwrap();
    let mut schema = Schema::default();
    let columns = sqlx::query(
        "SELECT table_name::text, column_name::text, data_type::text, is_nullable = 'YES',
                column_default::text, is_identity = 'YES'
         FROM information_schema.columns
         WHERE table_schema = current_schema() AND table_name <> '_sqlx_migrations'",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    for row in columns {
        let kind = match row.get::<String, _>(2).as_str() {
            "bigint" | "integer" | "smallint" => "integer".to_string(),
            "double precision" | "real" => "real".to_string(),
            "text" => "text".to_string(),
            "bytea" => "blob".to_string(),
            other => format!("postgres {other}"),
        };
        let column = Column {
            kind,
            nullable: row.get(3),
            // `'x'::text` → `'x'`: the cast is PostgreSQL's spelling, not a difference.
            default: row
                .get::<Option<String>, _>(4)
                .map(|d| d.split("::").next().unwrap_or_default().to_string()),
            generated: row.get(5),
        };
        schema
            .tables
            .entry(row.get(0))
            .or_default()
            .insert(row.get(1), column);
    }
    // Indexes created by name: not those backing a PRIMARY KEY or UNIQUE constraint (SQLite's
    // are its unnamed `sqlite_autoindex_*`).
    schema.indexes = name_table_pairs(
        &mut conn,
        "SELECT indexname::text, tablename::text FROM pg_indexes
         WHERE schemaname = current_schema() AND tablename <> '_sqlx_migrations'
           AND indexname NOT IN (SELECT conname FROM pg_constraint)",
    )
    .await;
    schema.triggers = name_table_pairs(
        &mut conn,
        "SELECT t.tgname::text, c.relname::text FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
         WHERE NOT t.tgisinternal",
    )
    .await;
    schema
}

async fn name_table_pairs(conn: &mut PgConnection, query: &str) -> BTreeMap<String, String> {
    sqlx::query(query)
        .fetch_all(conn)
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}
