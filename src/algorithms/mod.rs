//! The private PCA algorithms. One file per algorithm, all behind the [`Algorithm`] trait:
//! pure functions of (data, validated configuration, injected randomness). Nothing here knows
//! about HTTP, JSON transport or the database.
//!
//! The life of a job: the client's unchecked `Params` plus the job's [`PrivacyTarget`] are
//! turned by [`Algorithm::configure`] into a `Config` that fixes every parameter, including the
//! calibrated noise. [`Algorithm::cost`] is the spec's cost formula applied to that `Config`
//! (pure, data-independent); the ledger charges exactly that. [`Algorithm::run`] then executes
//! the `Config` on the data.

pub mod analyze_gauss;
pub mod auto;
pub mod bingham;
pub mod cape_agn;
pub mod cape_pca;
pub mod centering;
pub mod clipping;
pub mod coherent_power;
#[cfg(test)]
mod defaults_tests;
pub mod dp_oja;
pub mod eigen_sampling;
pub mod eigenvalues;
pub mod env;
pub mod exact;
pub mod federated_power;
pub mod gossip_graph;
pub mod gossip_power;
pub mod k_dp_pca;
#[cfg(test)]
mod mapped_input_tests;
pub mod noisy_power;
pub mod parameters;
pub mod registry;
pub mod sensitivity;
pub mod storage;
pub mod tensor_power;
#[cfg(test)]
pub(crate) mod testing;

use serde::{Serialize, de::DeserializeOwned};

pub use env::{Cancelled, RunEnv};
pub use registry::{DynAlgorithm, Prepared, find, registry, study_algorithms};

use crate::dataset::{DataContext, Kind, Relation};
use crate::linalg::{CsrView, Matrix, Records};
use crate::privacy::{Cost, PrivacyTarget};

/// The data an algorithm runs on.
#[derive(Debug, Clone, Copy)]
pub enum DataInput<'a> {
    /// Records held transposed: `xt` = Xᵀ is d×n, one record per column, already clipped to the
    /// dataset's bounds. Borrowed, possibly from a memory-mapped file larger than memory: read
    /// it in passes through the streaming kernels ([`crate::linalg::stream`]); an algorithm that
    /// copies it whole needs the memory for the copy.
    Records { xt: Records<'a> },
    /// A symmetric m×m matrix.
    Matrix { a: &'a Matrix },
    /// A sparse symmetric m×m matrix (CSR, both triangles, typically memory-mapped), read only
    /// through the products A·X ([`CsrView::times`]); never densified. Only the algorithms
    /// whose [`AlgorithmInfo::sparse`] is set receive it.
    Sparse { a: CsrView<'a> },
}

/// What a successful run returns (docs/design/privacy.md §3: only DP outputs and their post-processing).
#[derive(Debug, Clone)]
pub struct Output {
    /// d×k, orthonormal columns, ordered by decreasing (noisy) importance, signs fixed by
    /// [`crate::linalg::fix_signs`].
    pub basis: Matrix,
    /// Private eigenvalue estimates, when the algorithm released them (post-processing only).
    pub eigenvalues: Option<Vec<f64>>,
}

/// A configuration could not be built from the client's parameters.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// A parameter is missing, malformed or out of range.
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    /// The algorithm does not support this dataset's kind or relation.
    #[error("{0}")]
    Unsupported(String),
    /// The algorithm is only allowed on `public: true` datasets.
    #[error("{0}")]
    PublicOnly(String),
}

impl ConfigError {
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// A run stopped without a basis.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RunError {
    #[error("cancelled")]
    Cancelled,
    /// A clean, documented failure (e.g. a coherence bound exceeded). The message must not
    /// reveal anything about the data beyond what the algorithm's DP releases already do.
    #[error("{0}")]
    Failed(String),
}

impl From<Cancelled> for RunError {
    fn from(_: Cancelled) -> Self {
        RunError::Cancelled
    }
}

/// One calibrated noise scale, for `POST /v1/privacy/plan` and the job record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NoiseScale {
    /// Which release (e.g. "power_iteration").
    pub release: String,
    /// "gaussian" or "laplace".
    pub distribution: String,
    /// The noise multiplier s: noise std (Gaussian) or scale (Laplace) = s × sensitivity. When the
    /// sensitivity is recomputed from each public iterate (`sensitivity` is `None`), s multiplies that.
    pub multiplier: f64,
    /// The L2 (or L1 for Laplace) sensitivity bound, when it is fixed in advance; `None` when it
    /// is recomputed from each public iterate (e.g. `row_norm` sensitivity).
    pub sensitivity: Option<f64>,
    /// How many times this release happens.
    pub count: usize,
    /// Plain-words description.
    pub description: String,
}

/// What `GET /v1/algorithms` shows about an algorithm.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlgorithmInfo {
    pub name: &'static str,
    pub summary: &'static str,
    /// The paper (and algorithm/equation numbers) it implements.
    pub source: &'static str,
    pub kinds: Vec<Kind>,
    pub relations: Vec<Relation>,
    /// One line: what is guaranteed and how it is charged.
    pub privacy: &'static str,
    /// Refused (403) on datasets that are not `public: true`.
    pub public_only: bool,
    /// Why `kinds` and `relations` leave some datasets out, when they do; quoted when such a
    /// dataset is refused.
    pub scope_reason: Option<&'static str>,
    /// Its `Output` already carries eigenvalue estimates that are post-processing of its DP
    /// releases (checked against reality by a unit test that runs every algorithm), so
    /// `with_eigenvalues` costs nothing extra.
    #[serde(skip)]
    pub releases_eigenvalues: bool,
    /// How it runs across sites as a study, when it does.
    #[serde(skip)]
    pub study: Option<StudyKind>,
    /// It runs on sparse matrix datasets ([`DataInput::Sparse`]) through sparse products; the
    /// service refuses the others on such datasets before pricing (422), because they need
    /// the dense matrix.
    pub sparse: bool,
    /// How much noisier than `analyze_gauss` it is at the same ρ and bound, as a factor on the
    /// noise-to-signal scale √d/(n·√ρ) that `clip: "auto"` reads
    /// ([`clipping::auto_choice`]); 1 for the Gram-matrix and power methods.
    #[serde(skip)]
    pub clip_noise_factor: f64,
}

impl AlgorithmInfo {
    /// The common case: every kind and relation, private, not a study, and its `Output` carries
    /// eigenvalue estimates; the setters below change what differs.
    pub fn new(
        name: &'static str,
        summary: &'static str,
        source: &'static str,
        privacy: &'static str,
    ) -> Self {
        AlgorithmInfo {
            name,
            summary,
            source,
            kinds: vec![Kind::Records, Kind::Matrix],
            relations: vec![Relation::ReplaceOne, Relation::AddRemove, Relation::Entry],
            privacy,
            public_only: false,
            scope_reason: None,
            releases_eigenvalues: true,
            study: None,
            sparse: false,
            clip_noise_factor: 1.0,
        }
    }

    /// It is `factor` times noisier than `analyze_gauss` for `clip: "auto"`'s rule.
    pub fn clip_noise(mut self, factor: f64) -> Self {
        self.clip_noise_factor = factor;
        self
    }

    /// It also runs on sparse matrix datasets.
    pub fn sparse(mut self) -> Self {
        self.sparse = true;
        self
    }

    /// Narrow the supported datasets to `kinds` and `relations`, and say why.
    pub fn scope(mut self, kinds: &[Kind], relations: &[Relation], reason: &'static str) -> Self {
        self.kinds = kinds.to_vec();
        self.relations = relations.to_vec();
        self.scope_reason = Some(reason);
        self
    }

    /// Refused on datasets that are not `public: true`.
    pub fn public_only(mut self) -> Self {
        self.public_only = true;
        self
    }

    /// Its `Output` carries no eigenvalue estimates of its own.
    pub fn without_eigenvalues(mut self) -> Self {
        self.releases_eigenvalues = false;
        self
    }

    /// It also runs across sites as a study.
    pub fn study(mut self, kind: StudyKind) -> Self {
        self.study = Some(kind);
        self
    }
}

/// The protocol an algorithm runs by in a multi-site study.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StudyKind {
    /// Power iterations, each round summed by secure aggregation (`federated_power`).
    Power,
    /// CAPE: one or two stages of secure aggregation with correlated noise (`cape_pca`,
    /// `cape_agn`).
    Cape,
}

/// One private PCA algorithm.
pub trait Algorithm: Send + Sync + 'static {
    /// What the client sends (unknown fields are rejected by `#[serde(deny_unknown_fields)]`).
    /// Its JSON Schema, derived from the same type, is what `GET /v1/algorithms` and the OpenAPI
    /// document publish (see [`parameters`]).
    type Params: DeserializeOwned + schemars::JsonSchema;
    /// Every parameter fixed, noise calibrated. Stored with the job and re-read by the runner.
    type Config: Serialize + DeserializeOwned + Send + Sync;

    fn info(&self) -> AlgorithmInfo;

    /// Validate `params` against the dataset's public context and calibrate the noise so that
    /// the cost does not exceed `target`.
    fn configure(
        &self,
        params: Self::Params,
        ctx: &DataContext,
        target: &PrivacyTarget,
    ) -> Result<Self::Config, ConfigError>;

    /// The spec's cost formula on a configuration. Pure and data-independent.
    fn cost(&self, config: &Self::Config, ctx: &DataContext) -> Cost;

    /// The noise scales this configuration uses (for planning and display).
    fn noise_scales(&self, config: &Self::Config, ctx: &DataContext) -> Vec<NoiseScale>;

    /// Run on the data. Every noise draw goes through `env`.
    fn run(
        &self,
        input: DataInput<'_>,
        config: &Self::Config,
        ctx: &DataContext,
        env: &mut RunEnv<'_>,
    ) -> Result<Output, RunError>;
}
