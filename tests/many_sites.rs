//! The many-sites harness (issue 38): many real site clients against one real service on one
//! machine. Each site is an async task in this process running the client `privpca site` runs
//! (`privpca::site::run_in`), with its own arguments, data file, ledger and HTTP connection; the
//! service is the real binary on SQLite. 64 sites on the complete secure-aggregation graph (its
//! live cap) and 200 on SecAgg+ (issue 38's judged study), 10 % of them dropping out during the
//! study.

#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use privpca::site::args::SiteArgs;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rand_distr::{Distribution, StandardNormal};
use serde_json::{Value, json};

const ADMIN: &str = "many-sites-admin";
const D: usize = 8;
const ROWS_PER_SITE: usize = 40;
/// The study's ρ: small enough that 200 sites' encoding leaves room for the clip's floor.
const RHO: f64 = 0.1;

/// One site's shard: rows with a planted top direction (e_0) clipped to norm 1, as CSV.
fn shard(dir: &Path, site: usize) -> PathBuf {
    let mut rng = ChaCha20Rng::seed_from_u64(site as u64);
    let mut csv = String::new();
    for _ in 0..ROWS_PER_SITE {
        let mut row: Vec<f64> = (0..D)
            .map(|j| {
                let z: f64 = StandardNormal.sample(&mut rng);
                z * if j == 0 { 0.5 } else { 0.1 }
            })
            .collect();
        let norm = row.iter().map(|v| v * v).sum::<f64>().sqrt();
        if norm > 1.0 {
            row.iter_mut().for_each(|v| *v /= norm);
        }
        let line: Vec<String> = row.iter().map(|v| format!("{v:e}")).collect();
        csv.push_str(&line.join(","));
        csv.push('\n');
    }
    let path = dir.join(format!("site-{site}.csv"));
    std::fs::write(&path, csv).unwrap();
    path
}

fn site_args(base: &str, token: &str, data: PathBuf, ledger: PathBuf, stop_after: Option<u32>) -> SiteArgs {
    SiteArgs {
        server: base.parse().unwrap(),
        token: token.to_string(),
        data,
        format: None,
        budget_rho: 1.0,
        budget_delta: 0.0,
        ledger,
        ledger_key: None,
        wait_seconds: 20,
        give_up_seconds: 300,
        expect_roster_hash: None,
        allow_minority_threshold: false,
        colluding_sites: 0,
        test_stop_after_round: stop_after,
    }
}

/// The sites run as local tasks of one thread (a site's protocol future is not `Send`): they
/// wait on the network almost all the time, and the service is its own process.
#[tokio::test]
async fn sixty_four_sites_in_one_process_with_a_tenth_dropping_out() {
    tokio::task::LocalSet::new().run_until(many_sites(64, None)).await;
}

/// Issue 38: a live `federated_power` study of 200 sites on SecAgg+, 10 % of them dropping out
/// during the study, succeeds; each site masks with and shares to its graph neighbours only.
#[tokio::test]
async fn two_hundred_sites_on_secagg_plus_with_a_tenth_dropping_out() {
    tokio::task::LocalSet::new()
        .run_until(many_sites(200, Some("sparse")))
        .await;
}

async fn many_sites(sites: usize, secure_aggregation: Option<&str>) {
    let dropouts = sites / 10;
    let dir = tempfile::tempdir().unwrap();
    let env = vec![
        ("PRIVPCA_ADMIN_KEY", ADMIN.to_string()),
        (
            "PRIVPCA_DATABASE_URL",
            format!("sqlite://{}", dir.path().join("privpca.db").display()),
        ),
        ("PRIVPCA_DATA_DIR", dir.path().join("data").display().to_string()),
    ];
    let server = support::start(&env, &dir.path().join("server.log")).await;
    let key = support::tenant(&server.base, ADMIN, "consortium").await;
    let body = json!({
        "name": "many",
        "algorithm": "federated_power",
        "n_features": D,
        "relation": "replace_one",
        "row_norm_bound": 1.0,
        "params": params(secure_aggregation),
        "privacy": {"rho": RHO},
        "sites": (0..sites).map(|i| json!({"name": format!("site-{i}")})).collect::<Vec<_>>(),
        "join_timeout_seconds": 120,
        "round_timeout_seconds": 15,
    });
    let (status, created) = support::post(&format!("{}/v1/studies", server.base), &key, body).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_string();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..sites {
        let token = created["sites"][i]["token"].as_str().unwrap();
        // The last tenth stop answering after round 2 (a crash): dropped in round 3.
        let stop = (i >= sites - dropouts).then_some(2);
        let args = site_args(
            &server.base,
            token,
            shard(dir.path(), i),
            dir.path().join(format!("ledger-{i}.db")),
            stop,
        );
        tasks.push(tokio::task::spawn_local(async move {
            privpca::site::run_in(&args).await
        }));
    }
    let mut outcomes = Vec::new();
    for (i, task) in tasks.into_iter().enumerate() {
        if i >= sites - dropouts {
            // A stopped site never returns; the study goes on without it.
            task.abort();
            continue;
        }
        outcomes.push(
            tokio::time::timeout(Duration::from_secs(600), task)
                .await
                .unwrap()
                .unwrap(),
        );
    }
    let elapsed = started.elapsed();
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    let (_, view) = support::get(&format!("{}/v1/studies/{id}", server.base), &key).await;
    assert_eq!(view["status"], "succeeded", "{view}");
    let (_, result) = support::get(&format!("{}/v1/studies/{id}/result", server.base), &key).await;
    assert_eq!(
        result["survivors"].as_array().map(Vec::len),
        Some(sites - dropouts),
        "{result}"
    );
    // 8 clip steps, then 3 power rounds (the study clips at its defaults); the dropouts fell
    // silent in round 3.
    assert!(view["config"]["clip"].is_object(), "{view}");
    let rounds = result["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 11);
    assert_eq!(
        rounds[2]["dropped"].as_array().map(Vec::len),
        Some(dropouts),
        "{result}"
    );
    let first: Vec<f64> = result["basis"][0]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert!(first[0].abs() > 0.9, "the planted direction e_0: {first:?}");
    let charged: Vec<&Value> = view["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["charged"])
        .collect();
    assert!(charged.iter().all(|c| c["rho"].as_f64() == Some(RHO)), "{view}");
    eprintln!(
        "{sites} sites ({dropouts} dropping out after round 2, {}), 11 rounds: {:.1} s",
        secure_aggregation.unwrap_or("complete"),
        elapsed.as_secs_f64()
    );
}

fn params(secure_aggregation: Option<&str>) -> Value {
    let mut params = json!({"k": 2, "iterations": 3, "max_site_samples": 1000});
    if let Some(kind) = secure_aggregation {
        params["secure_aggregation"] = json!(kind);
    }
    params
}
