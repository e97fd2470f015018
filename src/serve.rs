//! Starting and stopping the service.

use std::net::SocketAddr;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::state::AppState;
use crate::store::{Backend, Store};

/// Open the store, fail the jobs and studies this replica's previous run left unfinished, and
/// build the state. Jobs other replicas left are failed by the reaper once their lease runs
/// out (src/job_control.rs), never here.
pub async fn prepare(config: Config) -> anyhow::Result<AppState> {
    crate::linalg::init_threads(config.threads);
    let backend = Backend::from_url(&config.database_url).context("PRIVPCA_DATABASE_URL")?;
    let has_admin_key = config.admin_key.as_deref().is_some_and(|k| !k.trim().is_empty());
    anyhow::ensure!(
        backend == Backend::Sqlite || has_admin_key,
        "a postgres:// database is shared by replicas, which must all accept the same admin key: \
         set PRIVPCA_ADMIN_KEY (a generated key would differ per replica)"
    );
    create_parent_dirs(&config).await?;
    let store = Store::connect(&config.database_url, &config.data_dir)
        .await
        .with_context(|| format!("opening the database {}", redact(&config.database_url)))?
        .with_lease(config.job_lease())
        .with_key_cache_ttl(config.api_key_cache());
    let store = match &config.replica_id {
        Some(name) => store.with_replica(name),
        None => store,
    };
    tracing::info!(replica = store.replica(), backend = ?backend, "database opened");
    // Detached: it ends when the pool closes (or with the runtime).
    drop(store.spawn_checkpointer());
    let interrupted = store
        .fail_interrupted_jobs()
        .await
        .context("failing interrupted jobs")?;
    if interrupted > 0 {
        tracing::warn!(
            interrupted,
            "jobs left running by this replica's earlier stop were failed (their charges are kept)"
        );
    }
    let studies = store
        .fail_interrupted_studies()
        .await
        .context("failing interrupted studies")?;
    if studies > 0 {
        tracing::warn!(
            studies,
            "studies this replica left unfinished at an earlier stop were failed (charges made stand)"
        );
    }
    let stale = store
        .remove_interrupted_uploads()
        .await
        .context("removing the temporary files of interrupted uploads")?;
    if stale > 0 {
        tracing::warn!(
            stale,
            "removed temporary files of uploads an earlier stop interrupted"
        );
    }
    let admin_key = match &config.admin_key {
        Some(key) if !key.trim().is_empty() => key.trim().to_string(),
        _ => {
            let key = format!("ppa_{}", hex::encode(rand::random::<[u8; 32]>()));
            hand_over_generated_key(&key, &config.data_dir).await?;
            key
        }
    };
    let ledger_key = ledger_key(&config)?;
    let objects = object_storage(&config)?;
    Ok(AppState::new(store, config, admin_key, ledger_key).with_objects(objects))
}

/// The object store of `PRIVPCA_STORAGE_URL`, if set, with this replica's cache in the data
/// directory (what an earlier run cached there is counted, and checked before use).
fn object_storage(config: &Config) -> anyhow::Result<Option<crate::objects::ObjectStorage>> {
    let Some(url) = config.storage_url.as_deref().filter(|u| !u.trim().is_empty()) else {
        return Ok(None);
    };
    let cache = crate::objects::Cache::open(&config.data_dir.join("datasets"), config.cache_bytes)
        .context("opening the object cache in the data directory")?;
    let objects =
        crate::objects::ObjectStorage::from_url(url.trim(), cache).context("PRIVPCA_STORAGE_URL")?;
    tracing::info!(
        store = objects.url(),
        cache_bytes = config.cache_bytes,
        cached_bytes = objects.cache().bytes(),
        "datasets live in the object store; the data directory is this replica's cache"
    );
    Ok(Some(objects))
}

/// Loads the ledger's signing key (creating it on first start) and prints its verifier key,
/// which is public, on one line of standard error and in the log.
fn ledger_key(config: &Config) -> anyhow::Result<crate::app::ledger_key::LedgerKey> {
    use crate::app::ledger_key::{key_path, load_or_create};
    let path = key_path(config.ledger_key_file.as_deref(), &config.data_dir);
    let key = load_or_create(&path, &config.ledger_origin)?;
    let verifier_key = key.verifier_key();
    eprintln!("ledger verifier key: {verifier_key}");
    tracing::info!(verifier_key = %verifier_key, file = %path.display(), "ledger signing key loaded");
    Ok(key)
}

/// Name of the file a generated admin key is written to when stderr is not a terminal.
pub const GENERATED_KEY_FILE: &str = "generated-admin-key";

/// Gives a generated admin key to the operator without putting it in the structured log (which
/// may be shipped elsewhere): printed once to the terminal when stderr is one; otherwise written
/// to `<data dir>/generated-admin-key`, readable by the owner only, and the log says where.
async fn hand_over_generated_key(key: &str, data_dir: &std::path::Path) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    if std::io::stderr().is_terminal() {
        eprintln!(
            "privpca: no admin key configured; generated one for this run (shown once, never logged): {key}"
        );
        tracing::warn!("no admin key configured; generated one for this run and printed it to the terminal");
        return Ok(());
    }
    let path = data_dir.join(GENERATED_KEY_FILE);
    write_owner_only(&path, key).with_context(|| format!("writing {}", path.display()))?;
    tracing::warn!(
        file = %path.display(),
        "no admin key configured; generated one for this run and wrote it to this file (readable by its owner only)"
    );
    Ok(())
}

fn write_owner_only(path: &std::path::Path, key: &str) -> std::io::Result<()> {
    use std::io::Write;
    let _ = std::fs::remove_file(path);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(key.as_bytes())?;
    file.write_all(b"\n")
}

/// A database URL without its password, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

/// SQLite creates the database file but not its directory; create it, and the data directory.
async fn create_parent_dirs(config: &Config) -> anyhow::Result<()> {
    tokio::fs::create_dir_all(&config.data_dir)
        .await
        .with_context(|| format!("creating {}", config.data_dir.display()))?;
    let path = config
        .database_url
        .strip_prefix("sqlite://")
        .or_else(|| config.database_url.strip_prefix("sqlite:"))
        .map(|rest| rest.split('?').next().unwrap_or(rest));
    if let Some(path) = path.filter(|p| !p.is_empty() && !p.starts_with(':'))
        && let Some(parent) = std::path::Path::new(path)
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
    {
        tokio::fs::create_dir_all(parent)
            .await
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    Ok(())
}

/// Serve until SIGINT/SIGTERM, then stop accepting requests, let running jobs finish within
/// the grace period and close the database.
pub async fn serve(config: Config) -> anyhow::Result<()> {
    let bind = config.bind;
    let state = prepare(config).await?;
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .with_context(|| format!("binding {bind}"))?;
    tracing::info!(address = %listener.local_addr()?, "privpca listening");
    let shutdown = CancellationToken::new();
    let operator = match state.config.metrics_bind {
        Some(address) => Some(serve_metrics(address, state.clone(), shutdown.clone()).await?.1),
        None => None,
    };
    let runner = tokio::spawn(crate::runner::run(state.clone(), shutdown.clone()));
    let sweep = tokio::spawn(forget_deleted_statistics(state.clone(), shutdown.clone()));
    let app = crate::app(state.clone());
    let signal = shutdown.clone();
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            wait_for_signal().await;
            tracing::info!("shutting down");
            signal.cancel();
        })
        .await
        .context("serving HTTP")?;
    shutdown.cancel();
    if let Some(operator) = operator {
        let _ = operator.await;
    }
    runner.await.context("job runner")?;
    let _ = sweep.await;
    state.store.close().await;
    Ok(())
}

/// How often a replica drops the kept statistics of datasets deleted elsewhere.
const STATS_SWEEP: std::time::Duration = std::time::Duration::from_secs(10);

/// Every [`STATS_SWEEP`], drops from this replica's memory the statistics and norms it keeps
/// (`crate::stats_builds`) of datasets whose data file is gone: deleted, perhaps through
/// another replica, which forgets its own at once but cannot reach this one's memory. So
/// nothing of a deleted dataset stays in any replica's memory longer than that.
async fn forget_deleted_statistics(state: AppState, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(STATS_SWEEP);
    let mut ticks: u64 = 0;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        if let Some(objects) = &state.objects {
            // The first tick is at start.
            if ticks.is_multiple_of(STORE_SWEEP_EVERY) {
                remove_deleted_datasets_objects(&state, objects).await;
            }
            ticks += 1;
            forget_deleted_objects(&state, objects).await;
            continue;
        }
        let (builds, store) = (state.stats_builds.clone(), state.store.clone());
        let _ = tokio::task::spawn_blocking(move || {
            builds.forget_where(|id| !store.data_path(id).exists());
        })
        .await;
    }
}

/// Every how many [`STATS_SWEEP`]s a replica looks through the object store for the objects
/// of deleted datasets (and at its start): 10 minutes.
const STORE_SWEEP_EVERY: u64 = 60;

/// Removes from the object store the objects of every dataset this database holds as deleted
/// that still has a folder there (folders of datasets it does not know are left alone): a delete whose removal failed (the store was
/// down) and whose replica stopped before its retries succeeded. A deleted dataset is never
/// uploaded again, so nothing in its folder can be in use.
async fn remove_deleted_datasets_objects(state: &AppState, objects: &crate::objects::ObjectStorage) {
    let folders = match objects.dataset_folders().await {
        Ok(folders) => folders,
        Err(e) => {
            tracing::debug!(error = %e, "could not list the object store's dataset folders; the next sweep retries");
            return;
        }
    };
    for id in folders {
        if let Ok(true) = state.store.dataset_deleted(id).await {
            match objects.remove_dataset(id).await {
                Ok(removed) => {
                    tracing::info!(dataset = %id, removed, "removed the objects a deleted dataset left in the store")
                }
                Err(e) => {
                    tracing::warn!(dataset = %id, error = %e, "could not remove a deleted dataset's objects; the next sweep retries")
                }
            }
        }
    }
}

/// With datasets in the object store, where a missing local file means only "not cached": the
/// datasets this replica caches or keeps statistics of are looked up, and what it holds of
/// those deleted (through any replica) is dropped, files and memory.
async fn forget_deleted_objects(state: &AppState, objects: &crate::objects::ObjectStorage) {
    let mut held = objects.cache().datasets();
    held.extend(state.stats_builds.datasets());
    held.sort_unstable();
    held.dedup();
    for id in held {
        if let Ok(true) = state.store.dataset_gone(id).await {
            objects.forget_dataset(id);
            state.stats_builds.forget(id);
        }
    }
}

/// Binds the operator listener (`--metrics-bind`) and serves the metrics on it until
/// `shutdown`; returns the bound address (port 0 picks one) and the server's task. A listener
/// outside loopback is allowed (a container's internal network) but logged: whoever reaches it
/// sees every tenant's activity.
pub async fn serve_metrics(
    address: SocketAddr,
    state: AppState,
    shutdown: CancellationToken,
) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| format!("binding the metrics listener {address}"))?;
    let bound = listener.local_addr()?;
    if bound.ip().is_loopback() {
        tracing::info!(address = %bound, "metrics listening (operators only)");
    } else {
        tracing::warn!(
            address = %bound,
            "metrics listening outside loopback: keep this address away from tenants (they would see every tenant's jobs and refusals)"
        );
    }
    let app = crate::operator_app(state);
    let task = tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "the metrics listener stopped");
        }
    });
    Ok((bound, task))
}

async fn wait_for_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = terminate => {}
    }
}

/// `GET /healthz` over plain HTTP/1.0 with a short timeout; Ok when the status is 200.
pub fn healthcheck(addr: &str) -> anyhow::Result<()> {
    use std::io::{Read, Write};
    use std::net::ToSocketAddrs;
    let target = addr
        .to_socket_addrs()?
        .next()
        .context("address did not resolve")?;
    let timeout = std::time::Duration::from_secs(3);
    let mut stream = std::net::TcpStream::connect_timeout(&target, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.write_all(format!("GET /healthz HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply)?;
    let status = reply.lines().next().unwrap_or("");
    anyhow::ensure!(
        status.split_whitespace().nth(1) == Some("200"),
        "status line `{status}`"
    );
    Ok(())
}
