//! A test instance of the service and request helpers.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use privpca::config::Config;
use privpca::state::AppState;
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::poll;

pub const ADMIN: &str = "test-admin-key";

pub struct TestApp {
    pub state: AppState,
    pub router: Router,
    pub dir: TempDir,
    shutdown: CancellationToken,
    runner: Option<tokio::task::JoinHandle<()>>,
}

pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub bytes: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.bytes)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.bytes)))
    }

    pub fn content_type(&self) -> String {
        self.headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    }

    /// Asserts the status (showing the body when it differs) and returns the reply.
    #[track_caller]
    pub fn expect(&self, status: StatusCode) -> &Reply {
        assert_eq!(
            self.status,
            status,
            "body: {}",
            String::from_utf8_lossy(&self.bytes)
        );
        self
    }

    /// Asserts a problem document with this status and returns it.
    #[track_caller]
    pub fn problem(&self, status: u16) -> Value {
        assert_eq!(
            self.status.as_u16(),
            status,
            "body: {}",
            String::from_utf8_lossy(&self.bytes)
        );
        assert_eq!(self.content_type(), "application/problem+json");
        let doc = self.json();
        assert!(doc["type"].as_str().unwrap().starts_with("urn:privpca:problem:"));
        assert_eq!(doc["status"], status);
        assert!(!doc["detail"].as_str().unwrap().is_empty());
        doc
    }
}

impl TestApp {
    /// The service with its job runner.
    pub async fn start() -> Self {
        Self::build(true, |_| {}).await
    }

    /// The service without a runner: jobs stay queued.
    pub async fn without_runner() -> Self {
        Self::build(false, |_| {}).await
    }

    pub async fn build(runner: bool, adjust: impl FnOnce(&mut Config)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::for_tests(dir.path());
        // PostgreSQL when PRIVPCA_TEST_POSTGRES_URL is set, each test in its own database.
        config.database_url = privpca::store::testing::fresh_database_url(dir.path()).await;
        adjust(&mut config);
        Self::open(dir, config, runner).await
    }

    pub async fn open(dir: TempDir, config: Config, runner: bool) -> Self {
        let state = privpca::serve::prepare(config).await.unwrap();
        let router = privpca::app(state.clone());
        let shutdown = CancellationToken::new();
        let runner = runner.then(|| tokio::spawn(privpca::runner::run(state.clone(), shutdown.clone())));
        Self {
            state,
            router,
            dir,
            shutdown,
            runner,
        }
    }

    /// Stop the runner and close the store, keeping the directory (for restart tests).
    pub async fn stop(mut self) -> TempDir {
        self.shutdown.cancel();
        if let Some(runner) = self.runner.take() {
            runner.await.unwrap();
        }
        self.state.store.close().await;
        self.dir
    }

    pub async fn send(&self, request: Request<Body>) -> Reply {
        reply(self.router.clone(), request).await
    }

    /// `GET uri` on the operator listener's router (`--metrics-bind`), not on the API's.
    pub async fn operator(&self, uri: &str) -> Reply {
        let request = Request::builder().uri(uri).body(Body::empty()).unwrap();
        reply(privpca::operator_app(self.state.clone()), request).await
    }

    /// The Prometheus text the operator listener serves.
    pub async fn metrics_text(&self) -> String {
        let reply = self.operator("/metrics").await;
        assert_eq!(reply.status, StatusCode::OK);
        String::from_utf8(reply.bytes).unwrap()
    }

    pub async fn call(&self, method: Method, uri: &str, key: Option<&str>, body: Option<Value>) -> Reply {
        let mut builder = Request::builder().method(method).uri(uri);
        if let Some(key) = key {
            builder = builder.header(header::AUTHORIZATION, format!("Bearer {key}"));
        }
        let body = match body {
            Some(json) => {
                builder = builder.header(header::CONTENT_TYPE, "application/json");
                Body::from(json.to_string())
            }
            None => Body::empty(),
        };
        self.send(builder.body(body).unwrap()).await
    }

    /// `method uri` without a key or a body.
    pub async fn anonymous(&self, method: Method, uri: &str) -> Reply {
        self.call(method, uri, None, None).await
    }

    /// The JSON array `GET uri` answers with.
    pub async fn list(&self, uri: &str, key: &str) -> Vec<Value> {
        let reply = self.get(uri, key).await.expect(StatusCode::OK).json();
        reply.as_array().expect("a JSON array").clone()
    }

    pub async fn get(&self, uri: &str, key: &str) -> Reply {
        self.call(Method::GET, uri, Some(key), None).await
    }

    pub async fn post(&self, uri: &str, key: &str, body: Value) -> Reply {
        self.call(Method::POST, uri, Some(key), Some(body)).await
    }

    /// `method uri` with `key`, these `headers` and `body` as they are (for requests that
    /// `call` would not make: other media types, broken bodies, extra headers).
    pub async fn raw<const N: usize>(
        &self,
        method: Method,
        uri: &str,
        key: &str,
        headers: [(&str, &str); N],
        body: impl Into<Body>,
    ) -> Reply {
        let mut builder = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::AUTHORIZATION, format!("Bearer {key}"));
        for (name, value) in headers {
            builder = builder.header(name, value);
        }
        self.send(builder.body(body.into()).unwrap()).await
    }

    pub async fn upload(&self, key: &str, dataset: &str, content_type: &str, bytes: Vec<u8>) -> Reply {
        self.upload_with_query(key, dataset, "", content_type, bytes)
            .await
    }

    /// `PUT /v1/datasets/{dataset}/data{query}` (`query` empty or starting with `?`).
    pub async fn upload_with_query(
        &self,
        key: &str,
        dataset: &str,
        query: &str,
        content_type: &str,
        bytes: Vec<u8>,
    ) -> Reply {
        let uri = format!("/v1/datasets/{dataset}/data{query}");
        self.raw(Method::PUT, &uri, key, [("content-type", content_type)], bytes)
            .await
    }

    /// Uploads `csv` as `text/csv`.
    pub async fn upload_csv(&self, key: &str, dataset: &str, csv: &str) -> Reply {
        self.upload(key, dataset, "text/csv", csv.as_bytes().to_vec())
            .await
    }

    /// Starts an upload whose body is sent chunk by chunk through the returned sender; the
    /// body ends when the sender is dropped. The task answers with the reply.
    pub fn streaming_upload(
        &self,
        key: &str,
        dataset: &str,
        content_type: &str,
    ) -> (tokio::sync::mpsc::Sender<Vec<u8>>, tokio::task::JoinHandle<Reply>) {
        let (chunks, received) = tokio::sync::mpsc::channel::<Vec<u8>>(4);
        let body = futures_util::stream::unfold(received, |mut received| async move {
            received
                .recv()
                .await
                .map(|chunk| (Ok::<_, std::io::Error>(chunk), received))
        });
        let request = Request::builder()
            .method(Method::PUT)
            .uri(format!("/v1/datasets/{dataset}/data"))
            .header(header::AUTHORIZATION, format!("Bearer {key}"))
            .header(header::CONTENT_TYPE, content_type)
            .body(Body::from_stream(body))
            .unwrap();
        let router = self.router.clone();
        let reply = tokio::spawn(reply(router, request));
        (chunks, reply)
    }

    /// A `text/csv` [`TestApp::streaming_upload`] whose first chunk, `first`, is sent.
    pub async fn streaming_csv(
        &self,
        key: &str,
        dataset: &str,
        first: &[u8],
    ) -> (tokio::sync::mpsc::Sender<Vec<u8>>, tokio::task::JoinHandle<Reply>) {
        let (chunks, reply) = self.streaming_upload(key, dataset, "text/csv");
        chunks.send(first.to_vec()).await.unwrap();
        (chunks, reply)
    }

    /// Closes the live study's current phase as its deadline would: a test of what a timeout
    /// does calls this at a known protocol point instead of waiting for a short real timeout.
    pub async fn expire_phase(&self, study: &str) {
        let id = study.parse().unwrap();
        assert!(
            self.state.studies.expire_phase(id).await,
            "study {study} is not live"
        );
    }

    /// Polls a dataset until its status is `status` (panics after 10 s).
    pub async fn wait_for_dataset(&self, key: &str, dataset: &str, status: &str) -> Value {
        for _ in 0..2000 {
            let view = self.get(&format!("/v1/datasets/{dataset}"), key).await.json();
            if view["status"] == status {
                return view;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("dataset {dataset} did not become {status}");
    }

    /// A new tenant's API key.
    pub async fn tenant(&self, name: &str) -> String {
        let reply = self.post("/v1/tenants", ADMIN, json!({ "name": name })).await;
        assert_eq!(reply.status, StatusCode::CREATED);
        reply.json()["api_key"].as_str().unwrap().to_string()
    }

    /// Creates a dataset and returns its id.
    pub async fn dataset(&self, key: &str, body: Value) -> String {
        let reply = self.post("/v1/datasets", key, body).await;
        reply.expect(StatusCode::CREATED);
        reply.json()["id"].as_str().unwrap().to_string()
    }

    /// A dataset created from `spec` with `csv` uploaded; its id.
    pub async fn with_csv(&self, key: &str, spec: Value, csv: &str) -> String {
        let id = self.dataset(key, spec).await;
        self.upload_csv(key, &id, csv).await.expect(StatusCode::OK);
        id
    }

    /// A records dataset (β = 1) with `csv` uploaded; returns its id.
    pub async fn records(&self, key: &str, budget: Value, csv: &str) -> String {
        let spec = json!({ "name": "r", "kind": "records", "row_norm_bound": 1.0, "budget": budget });
        self.with_csv(key, spec, csv).await
    }

    /// The service with its runner, a tenant `t`, and a records dataset (β = 1) with `budget`
    /// and `csv` uploaded: `(app, key, dataset id)`.
    pub async fn with_records(budget: Value, csv: &str) -> (Self, String, String) {
        Self::start().await.tenant_with_records(budget, csv).await
    }

    /// As [`TestApp::with_records`], without a runner: jobs stay queued.
    pub async fn queued_with_records(budget: Value, csv: &str) -> (Self, String, String) {
        Self::without_runner()
            .await
            .tenant_with_records(budget, csv)
            .await
    }

    async fn tenant_with_records(self, budget: Value, csv: &str) -> (Self, String, String) {
        let key = self.tenant("t").await;
        let ds = self.records(&key, budget, csv).await;
        (self, key, ds)
    }

    /// The service with its runner and a new tenant `name`: `(app, key)`.
    pub async fn start_with_tenant(name: &str) -> (Self, String) {
        Self::start().await.with_tenant(name).await
    }

    /// As [`TestApp::start_with_tenant`], without a runner: jobs stay queued.
    pub async fn queued_with_tenant(name: &str) -> (Self, String) {
        Self::without_runner().await.with_tenant(name).await
    }

    async fn with_tenant(self, name: &str) -> (Self, String) {
        let key = self.tenant(name).await;
        (self, key)
    }

    /// Two records datasets (ρ budget 1) with `csv` uploaded: a replace_one one, whose record
    /// count is public, and an add_remove one, whose record count is private; their ids.
    pub async fn shown_and_hidden(&self, key: &str, csv: &str) -> (String, String) {
        let shown = self.records(key, json!({ "rho": 1 }), csv).await;
        let spec = json!({ "name": "h", "kind": "records", "relation": "add_remove", "row_norm_bound": 1.0,
                           "budget": { "rho": 1 } });
        let hidden = self.with_csv(key, spec, csv).await;
        (shown, hidden)
    }

    /// A public records dataset with `csv` uploaded.
    pub async fn public_records(&self, key: &str, csv: &str) -> String {
        let spec = json!({ "name": "p", "kind": "records", "row_norm_bound": 10.0, "public": true });
        self.with_csv(key, spec, csv).await
    }

    /// A private 2 × 2 matrix dataset (ρ budget 1) with its data; its id.
    pub async fn matrix(&self, key: &str) -> String {
        let spec = json!({ "name": "m", "kind": "matrix", "budget": { "rho": 1 } });
        self.with_csv(key, spec, "2,1\n1,2\n").await
    }

    /// Submits a job that must be refused: a 422 problem naming `field`; the problem document.
    pub async fn refused(&self, key: &str, body: Value, field: &str) -> Value {
        let doc = self.post("/v1/jobs", key, body.clone()).await.problem(422);
        assert_eq!(doc["field"], field, "{body}: {doc}");
        doc
    }

    /// `POST /v1/privacy/plan`; the reply.
    pub async fn plan(&self, key: &str, body: Value) -> Reply {
        self.post("/v1/privacy/plan", key, body).await
    }

    /// Submits a job (`POST /v1/jobs`); the reply.
    pub async fn submit(&self, key: &str, body: Value) -> Reply {
        self.post("/v1/jobs", key, body).await
    }

    /// The budget of a dataset as its view shows it (`total`, `spent`, `remaining`).
    pub async fn budget(&self, key: &str, dataset: &str) -> Value {
        let view = self.get(&format!("/v1/datasets/{dataset}"), key).await.json();
        view["budget"].clone()
    }

    /// The ρ a dataset has spent.
    pub async fn spent_rho(&self, key: &str, dataset: &str) -> f64 {
        self.budget(key, dataset).await["spent"]["rho"].as_f64().unwrap()
    }

    /// Submits `algorithm` with `params` under ρ 0.5 on a new [`TestApp::matrix`]: it must be
    /// refused with a 422 naming `field`. The problem document.
    pub async fn refused_on_a_matrix(&self, key: &str, algorithm: &str, params: Value, field: &str) -> Value {
        let matrix = self.matrix(key).await;
        let body = job(&matrix, algorithm, params, json!({ "rho": 0.5 }));
        self.refused(key, body, field).await
    }

    /// Runs a job that must succeed; its final view.
    pub async fn succeeded(&self, key: &str, body: Value) -> Value {
        let done = self.run(key, body).await;
        assert_eq!(done["status"], "succeeded", "{done}");
        done
    }

    /// The result of a finished job (its view as `run` returns it).
    pub async fn result(&self, key: &str, done: &Value) -> Value {
        let id = done["id"].as_str().unwrap();
        self.get(&format!("/v1/jobs/{id}/result"), key)
            .await
            .expect(StatusCode::OK)
            .json()
    }

    /// Submits a job, expects 202, and waits for it to end.
    pub async fn run(&self, key: &str, body: Value) -> Value {
        let reply = self.post("/v1/jobs", key, body).await;
        reply.expect(StatusCode::ACCEPTED);
        self.wait(key, reply.json()["id"].as_str().unwrap()).await
    }

    /// Polls a job until it is in a terminal state.
    pub async fn wait(&self, key: &str, job: &str) -> Value {
        self.poll_job(key, job, &["succeeded", "failed", "cancelled"])
            .await
    }

    /// Polls a job until its status is `status` (panics if it ends otherwise).
    pub async fn wait_for_job(&self, key: &str, job: &str, status: &str) -> Value {
        let view = self
            .poll_job(key, job, &[status, "succeeded", "failed", "cancelled"])
            .await;
        assert_eq!(view["status"], status, "{view}");
        view
    }

    /// Polls a job until its status is one of `until` (panics after 60 s).
    async fn poll_job(&self, key: &str, job: &str, until: &[&str]) -> Value {
        poll::until(Duration::from_secs(60), Duration::from_millis(5), || async {
            let view = self.get(&format!("/v1/jobs/{job}"), key).await.json();
            if until.iter().any(|s| view["status"] == *s) {
                Ok(view)
            } else {
                Err(format!("job {job} never reached {until:?}: {view}"))
            }
        })
        .await
    }
}

/// A tenant's records dataset on a test service, where most job tests start; its job helpers
/// take only what differs from test to test: the algorithm, its parameters and the target.
pub struct Records {
    pub app: TestApp,
    pub key: String,
    pub ds: String,
}

impl Records {
    /// [`TestApp::with_records`]: the service with its runner.
    pub async fn start(budget: Value, csv: &str) -> Self {
        let (app, key, ds) = TestApp::with_records(budget, csv).await;
        Self { app, key, ds }
    }

    /// [`TestApp::queued_with_records`]: without a runner, jobs stay queued.
    pub async fn queued(budget: Value, csv: &str) -> Self {
        let (app, key, ds) = TestApp::queued_with_records(budget, csv).await;
        Self { app, key, ds }
    }

    /// The submission body of `algorithm` on this dataset.
    pub fn job(&self, algorithm: &str, params: Value, privacy: Value) -> Value {
        job(&self.ds, algorithm, params, privacy)
    }

    /// Submits `algorithm` on this dataset; the reply.
    pub async fn submit(&self, algorithm: &str, params: Value, privacy: Value) -> Reply {
        self.app
            .submit(&self.key, self.job(algorithm, params, privacy))
            .await
    }

    /// Runs `algorithm` on this dataset; it must succeed. Its final view.
    pub async fn succeeded(&self, algorithm: &str, params: Value, privacy: Value) -> Value {
        self.app
            .succeeded(&self.key, self.job(algorithm, params, privacy))
            .await
    }

    /// Runs `algorithm` on this dataset; it must succeed. Its result.
    pub async fn result_of(&self, algorithm: &str, params: Value, privacy: Value) -> Value {
        let done = self.succeeded(algorithm, params, privacy).await;
        self.result(&done).await
    }

    /// Submits `algorithm` on this dataset; it must be refused with a 422 naming `field`.
    /// The problem document.
    pub async fn refused(&self, algorithm: &str, params: Value, privacy: Value, field: &str) -> Value {
        self.app
            .refused(&self.key, self.job(algorithm, params, privacy), field)
            .await
    }

    /// The result of a finished job.
    pub async fn result(&self, done: &Value) -> Value {
        self.app.result(&self.key, done).await
    }

    /// The dataset's budget (see [`TestApp::budget`]).
    pub async fn budget(&self) -> Value {
        self.app.budget(&self.key, &self.ds).await
    }
}

/// A job submission body.
pub fn job(dataset: &str, algorithm: &str, params: Value, privacy: Value) -> Value {
    json!({ "dataset_id": dataset, "algorithm": algorithm, "params": params, "privacy": privacy })
}

/// Rows of a seeded random matrix with a clear top direction, as CSV.
pub fn csv_rows(n: usize, d: usize, seed: u64) -> String {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 11) as f64 / (1u64 << 53) as f64) - 0.5
    };
    let mut out = String::new();
    for _ in 0..n {
        let scale = next() * 4.0;
        let row: Vec<String> = (0..d)
            .map(|j| format!("{:.6}", if j == 0 { scale } else { 0.2 * next() }))
            .collect();
        out.push_str(&row.join(","));
        out.push('\n');
    }
    out
}

/// One request through `router`, its whole answer read.
async fn reply(router: Router, request: Request<Body>) -> Reply {
    let response = router.oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes().to_vec();
    Reply {
        status,
        headers,
        bytes,
    }
}

/// The largest |uᵢ·uⱼ − δᵢⱼ| over the columns of `basis`: 0 for an orthonormal basis.
pub fn orthonormality_error(basis: &[Vec<f64>]) -> f64 {
    let mut worst: f64 = 0.0;
    for (i, a) in basis.iter().enumerate() {
        for (j, b) in basis.iter().enumerate() {
            let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
            worst = worst.max((dot - if i == j { 1.0 } else { 0.0 }).abs());
        }
    }
    worst
}

/// tr(QᵀCQ)/Σ_{i≤k} λ_i(C) of a result's basis (k its columns) on the covariance `c`.
pub fn captured_energy(result: &Value, c: &privpca::linalg::Matrix) -> f64 {
    let columns: Vec<Vec<f64>> = result["basis"]
        .as_array()
        .unwrap()
        .iter()
        .map(|col| {
            col.as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect()
        })
        .collect();
    let k = columns.len();
    let q = privpca::linalg::Matrix::from_fn(c.nrows(), k, |i, j| columns[j][i]);
    let mut eig: Vec<f64> = c.clone().symmetric_eigen().eigenvalues.iter().copied().collect();
    eig.sort_by(|a, b| b.total_cmp(a));
    (q.transpose() * c * &q).trace() / eig[..k].iter().sum::<f64>()
}
