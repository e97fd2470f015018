//! Service configuration: one struct from flags with environment fallbacks (clap `env`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

/// Default per-tenant rates: far above what a person or a script polling jobs needs, low enough
/// that one tenant's loop cannot flood the queue or the disk for the others.
pub const DEFAULT_JOB_RATE_PER_MINUTE: u32 = 120;
pub const DEFAULT_JOB_BURST: u32 = 60;
pub const DEFAULT_UPLOAD_RATE_PER_MINUTE: u32 = 30;
pub const DEFAULT_UPLOAD_BURST: u32 = 10;

/// Everything `privpca serve` needs. Every flag has a `PRIVPCA_*` environment fallback so the
/// service can be configured in a container without a command line.
#[derive(Debug, Clone, Args)]
pub struct Config {
    /// Address to listen on.
    #[arg(long, env = "PRIVPCA_BIND", default_value = "127.0.0.1:8080")]
    pub bind: SocketAddr,

    /// Address of the operator listener that serves Prometheus metrics at `/metrics` (off when
    /// unset). The metrics cover every tenant and carry run times, so bind it to loopback
    /// (`127.0.0.1:9464`) or a network only the monitoring system reaches; the API port never
    /// serves them.
    #[arg(long, env = "PRIVPCA_METRICS_BIND")]
    pub metrics_bind: Option<SocketAddr>,

    /// Database URL: `sqlite://path/to/file.db` (the file is created) or
    /// `postgres://user:password@host:port/database` (the database must exist; several
    /// replicas may share it). Migrated at start.
    #[arg(
        long,
        env = "PRIVPCA_DATABASE_URL",
        default_value = "sqlite://privpca-data/privpca.db"
    )]
    pub database_url: String,

    /// Directory for uploaded data (stored as binary f64, memory-mapped by jobs in place).
    #[arg(long, env = "PRIVPCA_DATA_DIR", default_value = "privpca-data")]
    pub data_dir: PathBuf,

    /// Object storage for datasets, statistics and sparse files: `s3://bucket` or
    /// `s3://bucket/prefix`, with the endpoint, region and credentials in the usual `AWS_*`
    /// variables (`AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`). Unset: everything lives in the data directory. Set: the data
    /// directory is this replica's local cache of the store, and replicas share no filesystem.
    #[arg(long, env = "PRIVPCA_STORAGE_URL")]
    pub storage_url: Option<String>,

    /// The most bytes this replica keeps cached from the object store (least recently used
    /// copies are removed first). A dataset a job reads is cached whole, so set this above the
    /// largest dataset.
    #[arg(long, env = "PRIVPCA_CACHE_BYTES", default_value_t = crate::objects::cache::DEFAULT_CACHE_BYTES)]
    pub cache_bytes: u64,

    /// Admin key that may create tenants. When unset, a random key is generated at start and
    /// handed over once (never logged). Required with a `postgres://` database, where several
    /// replicas must share one key.
    #[arg(long, env = "PRIVPCA_ADMIN_KEY", hide_env_values = true)]
    pub admin_key: Option<String>,

    /// Jobs that run at the same time (each uses the shared linear-algebra thread pool).
    #[arg(long, env = "PRIVPCA_WORKERS", default_value_t = 2)]
    pub workers: usize,

    /// Threads of the shared linear-algebra pool (0 = one per core).
    #[arg(long, env = "PRIVPCA_THREADS", default_value_t = 0)]
    pub threads: usize,

    /// Largest accepted upload, in bytes.
    #[arg(long, env = "PRIVPCA_MAX_UPLOAD_BYTES", default_value_t = 2 * 1024 * 1024 * 1024)]
    pub max_upload_bytes: u64,

    /// Largest number of rows in an upload.
    #[arg(long, env = "PRIVPCA_MAX_ROWS", default_value_t = 10_000_000)]
    pub max_rows: u64,

    /// Largest number of columns d (records) or side m (matrix).
    #[arg(long, env = "PRIVPCA_MAX_D", default_value_t = 10_000)]
    pub max_d: usize,

    /// Largest number of stored entries (both triangles) of a sparse matrix upload (Matrix
    /// Market); the sparse counterpart of the dense limit `max_d`, which does not apply to it.
    #[arg(long, env = "PRIVPCA_MAX_NNZ", default_value_t = 50_000_000)]
    pub max_nnz: u64,

    /// Largest accepted JSON request body, in bytes (uploads have their own limit).
    #[arg(long, env = "PRIVPCA_MAX_BODY_BYTES", default_value_t = 1024 * 1024)]
    pub max_body_bytes: usize,

    /// Most jobs waiting in the queue; further submissions get 503 with Retry-After.
    #[arg(long, env = "PRIVPCA_MAX_QUEUE", default_value_t = 1000)]
    pub max_queue: i64,

    /// Time limit of one request other than uploads, in seconds.
    #[arg(long, env = "PRIVPCA_REQUEST_TIMEOUT_SECS", default_value_t = 30)]
    pub request_timeout_secs: u64,

    /// Time limit of one upload, in seconds.
    #[arg(long, env = "PRIVPCA_UPLOAD_TIMEOUT_SECS", default_value_t = 3600)]
    pub upload_timeout_secs: u64,

    /// Time limit of one job's computation, in seconds; a job over it fails (charge kept).
    #[arg(long, env = "PRIVPCA_JOB_TIMEOUT_SECS", default_value_t = 3600)]
    pub job_timeout_secs: u64,

    /// On shutdown, how long running jobs may take to finish before they are stopped.
    #[arg(long, env = "PRIVPCA_SHUTDOWN_GRACE_SECS", default_value_t = 20)]
    pub shutdown_grace_secs: u64,

    /// This replica's name, recorded on the jobs it runs and the studies it coordinates. Must
    /// be distinct per running process and stable across its restarts (default: the host
    /// name, which differs per container).
    #[arg(long, env = "PRIVPCA_REPLICA_ID")]
    pub replica_id: Option<String>,

    /// How long a replica holds a running job without a heartbeat, in seconds; a job whose
    /// replica stopped answering for this long is failed by another replica (charge kept).
    #[arg(long, env = "PRIVPCA_JOB_LEASE_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub job_lease_secs: u64,

    /// How long a replica may keep an API key's tenant after reading it, in milliseconds
    /// (0 = read the database on every request). A key revoked or rotated away on another
    /// replica is accepted here at most this long after the change commits; on the replica
    /// that made the change, not at all.
    #[arg(long, env = "PRIVPCA_API_KEY_CACHE_MS", default_value_t = 1000,
        value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub api_key_cache_ms: u64,

    /// Job submissions and study creations one tenant may make per minute, sustained
    /// (a token bucket per tenant); 0 = unlimited. Over it: 429 with Retry-After.
    #[arg(long, env = "PRIVPCA_JOB_RATE_PER_MINUTE", default_value_t = DEFAULT_JOB_RATE_PER_MINUTE)]
    pub job_rate_per_minute: u32,

    /// Job submissions and study creations one tenant may make at once, above the sustained rate.
    #[arg(long, env = "PRIVPCA_JOB_BURST", default_value_t = DEFAULT_JOB_BURST,
        value_parser = clap::value_parser!(u32).range(1..))]
    pub job_burst: u32,

    /// Uploads one tenant may start per minute, sustained; 0 = unlimited.
    #[arg(long, env = "PRIVPCA_UPLOAD_RATE_PER_MINUTE", default_value_t = DEFAULT_UPLOAD_RATE_PER_MINUTE)]
    pub upload_rate_per_minute: u32,

    /// Uploads one tenant may start at once, above the sustained rate.
    #[arg(long, env = "PRIVPCA_UPLOAD_BURST", default_value_t = DEFAULT_UPLOAD_BURST,
        value_parser = clap::value_parser!(u32).range(1..))]
    pub upload_burst: u32,

    /// The file holding the service's ledger signing key (a C2SP signer key string, readable by
    /// its owner only). Default: `<data dir>/ledger-signing-key`, created at first start.
    #[arg(long, env = "PRIVPCA_LEDGER_KEY_FILE")]
    pub ledger_key_file: Option<PathBuf>,

    /// The service origin that names this deployment's transparency logs (a schema-less URL
    /// such as `privpca.example.org`; each dataset's log is `<origin>/datasets/<id>`). Used
    /// only when the signing key is created (its name is `<origin>/key-1`); afterwards the
    /// key's name says it.
    #[arg(long, env = "PRIVPCA_LEDGER_ORIGIN", default_value = "privpca.local")]
    pub ledger_origin: String,

    /// Log format: `text` or `json`.
    #[arg(long, env = "PRIVPCA_LOG_FORMAT", default_value = "text")]
    pub log_format: String,
}

impl Config {
    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs(self.request_timeout_secs)
    }
    pub fn upload_timeout(&self) -> Duration {
        Duration::from_secs(self.upload_timeout_secs)
    }
    pub fn job_timeout(&self) -> Duration {
        Duration::from_secs(self.job_timeout_secs)
    }
    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_secs(self.shutdown_grace_secs)
    }
    pub fn job_lease(&self) -> Duration {
        Duration::from_secs(self.job_lease_secs)
    }
    pub fn api_key_cache(&self) -> Duration {
        Duration::from_millis(self.api_key_cache_ms)
    }

    /// A configuration for tests: database and data under `dir`, small limits, a known admin key.
    pub fn for_tests(dir: &std::path::Path) -> Self {
        Self {
            bind: "127.0.0.1:0".parse().expect("literal address"),
            metrics_bind: None,
            database_url: format!("sqlite://{}", dir.join("privpca.db").display()),
            data_dir: dir.join("data"),
            storage_url: None,
            cache_bytes: crate::objects::cache::DEFAULT_CACHE_BYTES,
            admin_key: Some("test-admin-key".into()),
            workers: 2,
            threads: 0,
            max_upload_bytes: 64 * 1024 * 1024,
            max_rows: 1_000_000,
            max_d: 2_000,
            max_nnz: 1_000_000,
            max_body_bytes: 1024 * 1024,
            max_queue: 1000,
            request_timeout_secs: 30,
            upload_timeout_secs: 300,
            job_timeout_secs: 300,
            shutdown_grace_secs: 5,
            replica_id: None,
            job_lease_secs: 30,
            api_key_cache_ms: 1000,
            // Unlimited: tests submit in bursts; the limiter has its own tests.
            job_rate_per_minute: 0,
            job_burst: DEFAULT_JOB_BURST,
            upload_rate_per_minute: 0,
            upload_burst: DEFAULT_UPLOAD_BURST,
            ledger_key_file: None,
            ledger_origin: "privpca.test".into(),
            log_format: "text".into(),
        }
    }
}
