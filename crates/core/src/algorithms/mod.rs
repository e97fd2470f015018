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
pub(crate) mod calibration;
pub mod cape_agn;
pub mod cape_center;
pub mod cape_clip;
pub mod cape_noise;
pub mod cape_pca;
pub mod catalog;
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
pub mod filtered_power;
pub mod gossip;
pub mod k_dp_pca;
#[cfg(test)]
mod mapped_input_tests;
pub mod noisy_power;
mod operator;
mod options;
pub mod parameters;
pub mod power_clip;
pub mod power_noise;
pub mod registry;
pub mod sensitivity;
pub mod spectrum;
pub mod storage;
pub mod study_center;
pub mod study_clip;
pub mod tensor_power;
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub mod testing;

use serde::{Serialize, de::DeserializeOwned};

pub use env::{Cancelled, RunEnv};
pub use registry::{DynAlgorithm, Prepared, find, find_runnable, registry, study_algorithms};

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

impl DataInput<'_> {
    /// The d×d matrix A the decompositions work on: the Gram matrix XᵀX of records, or the
    /// matrix of a matrix dataset; [`RunError::mismatched_data`] unless the input has the
    /// dataset's kind and dimension d.
    pub fn symmetric_matrix(self, ctx: &DataContext) -> Result<Matrix, RunError> {
        let d = ctx.d;
        match (self, ctx.kind()) {
            (DataInput::Records { xt }, Kind::Records) if xt.nrows() == d => Ok(crate::linalg::gram_t(xt)),
            (DataInput::Matrix { a }, Kind::Matrix) if a.nrows() == d && a.ncols() == d => Ok(a.clone()),
            _ => Err(RunError::mismatched_data()),
        }
    }
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

impl Output {
    /// The first `k` columns of `vectors` (signs fixed by [`crate::linalg::fix_signs`]) with the
    /// first `k` of `values` as eigenvalue estimates: the top-k of an eigendecomposition or SVD
    /// sorted by decreasing value.
    pub fn leading(vectors: &Matrix, values: &[f64], k: usize) -> Output {
        let mut basis = vectors.columns(0, k).into_owned();
        crate::linalg::fix_signs(&mut basis);
        Output {
            basis,
            eigenvalues: Some(values.iter().take(k).copied().collect()),
        }
    }

    /// The top-k eigenpairs of the symmetric matrix `a` (sorted by decreasing eigenvalue;
    /// nalgebra's own order is unsorted).
    pub fn top_eigenpairs(a: &Matrix, k: usize) -> Result<Output, RunError> {
        let eig = crate::linalg::try_sym_eig(a)
            .map_err(|_| RunError::Failed("the eigendecomposition did not converge".into()))?;
        Ok(Output::leading(&eig.vectors, eig.values.as_slice(), k))
    }
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

impl RunError {
    /// The stored configuration does not fit the dataset it is run on.
    pub fn unfit() -> Self {
        RunError::Failed("the stored configuration does not fit the dataset".into())
    }

    /// The data handed to the run is not of the dataset's kind or dimension.
    pub fn mismatched_data() -> Self {
        RunError::Failed("the data does not match the dataset's kind or dimension".into())
    }
}

/// Checks a stored configuration before a run: [`RunError::unfit`] unless `fits`.
pub(crate) fn ensure_fits(fits: bool) -> Result<(), RunError> {
    if fits { Ok(()) } else { Err(RunError::unfit()) }
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

impl NoiseScale {
    /// A Gaussian release of standard deviation `sd` on a query of fixed L2 `sensitivity`: the
    /// multiplier is sd/sensitivity.
    pub fn gaussian(
        release: &str,
        sd: f64,
        sensitivity: f64,
        count: usize,
        description: impl Into<String>,
    ) -> Self {
        NoiseScale {
            release: release.into(),
            distribution: "gaussian".into(),
            multiplier: sd / sensitivity,
            sensitivity: Some(sensitivity),
            count,
            description: description.into(),
        }
    }
}

/// What `GET /v1/algorithms` shows about an algorithm, and what it can do: its entry in the
/// [`catalog`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlgorithmInfo {
    pub name: &'static str,
    pub summary: &'static str,
    /// The paper (and algorithm/equation numbers) it implements.
    pub source: &'static str,
    pub kinds: &'static [Kind],
    pub relations: &'static [Relation],
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
    /// A job on records that does not mention `clip` gets `"auto"` (issue 21 §1). False for
    /// `exact` (no noise) and `cape_agn`, whose output (mixture components and weights) is a
    /// model of the raw rows' distribution that clipping would change, not only denoise.
    #[serde(skip)]
    pub clip_by_default: bool,
    /// Given the records' statistics (XᵀX, Xᵀ1, n) it reads nothing else of them: a clipped job
    /// whose clipped statistics follow from kept blocks then hands it records that are never
    /// filled (zero pages) instead of a clipped copy of all n records
    /// ([`clipping::ClippedRecords`]). Checked by a test that runs each such algorithm on zero
    /// records carrying real statistics and on the real records, and compares.
    #[serde(skip)]
    pub stats_suffice: bool,
}

/// The protocol an algorithm runs by in a multi-site study.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StudyKind {
    /// Power iterations, each round summed by secure aggregation (`federated_power`).
    Power,
    /// CAPE: one or two stages of secure aggregation with correlated noise (`cape_pca`,
    /// `cape_agn`).
    Cape,
    /// Gossip between agents holding blocks of features, relayed by the coordinator
    /// (`gossip_power`).
    Gossip,
}

/// One private PCA algorithm.
pub trait Algorithm: Send + Sync + 'static {
    /// What the client sends (unknown fields are rejected by `#[serde(deny_unknown_fields)]`).
    /// Its JSON Schema, derived from the same type, is what `GET /v1/algorithms` and the OpenAPI
    /// document publish (see [`parameters`]).
    type Params: DeserializeOwned + schemars::JsonSchema;
    /// Every parameter fixed, noise calibrated. Stored with the job and re-read by the runner.
    type Config: Serialize + DeserializeOwned + Send + Sync;

    /// Its entry in the [`catalog`].
    const INFO: &'static AlgorithmInfo;

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

    /// Run a configuration on the data. Every noise draw goes through `run.env`.
    fn run(&self, config: &Self::Config, run: Run<'_, '_>) -> Result<Output, RunError>;
}

/// What one run works on: the data, its public context, and the environment every noise draw,
/// progress report and cancellation check goes through.
pub struct Run<'a, 'e> {
    pub input: DataInput<'a>,
    pub ctx: &'a DataContext,
    pub env: &'a mut RunEnv<'e>,
}
