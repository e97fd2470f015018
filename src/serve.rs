//! Starting and stopping the service.

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::state::AppState;
use crate::store::Store;

/// Open the store, fail jobs a crash left running, and build the state.
pub async fn prepare(config: Config) -> anyhow::Result<AppState> {
    crate::linalg::init_threads(config.threads);
    let store = Store::connect(&config.database_url, &config.data_dir)
        .await
        .with_context(|| format!("opening the database {}", config.database_url))?;
    let interrupted = store.fail_interrupted_jobs().await.context("failing interrupted jobs")?;
    if interrupted > 0 {
        tracing::warn!(interrupted, "jobs left running by an earlier stop were failed (their charges are kept)");
    }
    let admin_key = match &config.admin_key {
        Some(key) if !key.trim().is_empty() => key.trim().to_string(),
        _ => {
            let key = format!("ppa_{}", hex::encode(rand::random::<[u8; 32]>()));
            tracing::warn!(admin_key = %key, "no admin key configured; generated one for this run");
            key
        }
    };
    Ok(AppState::new(store, config, admin_key))
}

/// Serve until SIGINT/SIGTERM, then stop accepting requests, let running jobs finish within
/// the grace period and close the database.
pub async fn serve(config: Config) -> anyhow::Result<()> {
    let bind = config.bind;
    let state = prepare(config).await?;
    let listener = tokio::net::TcpListener::bind(bind).await.with_context(|| format!("binding {bind}"))?;
    tracing::info!(address = %listener.local_addr()?, "privpca listening");
    let shutdown = CancellationToken::new();
    let runner = tokio::spawn(crate::runner::run(state.clone(), shutdown.clone()));
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
    runner.await.context("job runner")?;
    state.store.close().await;
    Ok(())
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
