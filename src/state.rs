//! Shared application state handed to every handler and to the job runner.

use std::sync::Arc;

use crate::app::ledger_key::LedgerKey;
use crate::app::log_cache::LogCache;
use crate::config::Config;
use crate::job_control::JobControl;
use crate::metrics::Metrics;
use crate::objects::ObjectStorage;
use crate::rate_limits::RateLimits;
use crate::stats_builds::StatsBuilds;
use crate::store::Store;
use crate::studies::StudyHub;

#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub config: Arc<Config>,
    /// The admin key in effect (configured or generated at start).
    pub admin_key: Arc<String>,
    pub jobs: Arc<JobControl>,
    pub metrics: Arc<Metrics>,
    /// Per-tenant token buckets for submissions and uploads.
    pub rate_limits: Arc<RateLimits>,
    /// Live studies coordinated by this process.
    pub studies: StudyHub,
    /// Records datasets whose statistics a task of this process is building or keeping.
    pub stats_builds: Arc<StatsBuilds>,
    /// The key that signs the ledger's transparency logs, and the service origin it names.
    pub ledger_key: Arc<LedgerKey>,
    /// The last checked and signed tree of each transparency log, for receipts.
    pub log_cache: Arc<LogCache>,
    /// The object store datasets live in, with this replica's cache of it
    /// (`PRIVPCA_STORAGE_URL`); `None`: the data directory holds them.
    pub objects: Option<Arc<ObjectStorage>>,
}

impl AppState {
    pub fn new(store: Store, config: Config, admin_key: String, ledger_key: LedgerKey) -> Self {
        Self {
            store: store.clone(),
            rate_limits: Arc::new(RateLimits::from_config(&config)),
            config: Arc::new(config),
            admin_key: Arc::new(admin_key),
            jobs: Arc::new(JobControl::default()),
            metrics: Arc::new(Metrics::new()),
            studies: StudyHub::new(store.clone()),
            stats_builds: Arc::new(StatsBuilds::default()),
            ledger_key: Arc::new(ledger_key),
            log_cache: Arc::default(),
            objects: None,
        }
    }

    /// The same state reading and writing datasets through `objects`.
    pub fn with_objects(mut self, objects: Option<ObjectStorage>) -> Self {
        self.objects = objects.map(Arc::new);
        self
    }
}
