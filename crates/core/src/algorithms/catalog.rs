//! The catalog: every algorithm the service offers, declared in one place with what
//! `GET /v1/algorithms` shows about it (name, summary, source, privacy statement), the datasets it
//! runs on, and its capabilities (eigenvalues released for free, how it runs as a study). Its
//! parameter schema comes from the algorithm's own `Params` type ([`super::parameters`]).
//!
//! Each algorithm points at its entry through [`Algorithm::INFO`](super::Algorithm::INFO); the
//! algorithm files keep only what is their own (parameters, calibration, cost and the run).
//! Entries are in the order of [`super::registry()`].

use super::{AlgorithmInfo, StudyKind};
use crate::dataset::{Kind, Relation};

/// Every kind of dataset.
const EVERY_KIND: &[Kind] = &[Kind::Records, Kind::Matrix];
/// Every neighbouring relation.
const EVERY_RELATION: &[Relation] = &[Relation::ReplaceOne, Relation::AddRemove, Relation::Entry];
/// Records datasets only.
const RECORDS: &[Kind] = &[Kind::Records];
/// The relations of records datasets.
const RECORD_RELATIONS: &[Relation] = &[Relation::ReplaceOne, Relation::AddRemove];
/// `replace_one` only.
const REPLACE_ONE: &[Relation] = &[Relation::ReplaceOne];

/// `noisy_power` (`crates/core/src/algorithms/noisy_power.rs`).
pub const NOISY_POWER: AlgorithmInfo = AlgorithmInfo {
    name: "noisy_power",
    summary: "Private randomized power method: L noisy subspace iterations, then a Rayleigh–Ritz step on the last noisy release.",
    source: "Nicolas et al. 2024, Alg. 1 with Thm 3.1 (sensitivity) and Thm 3.2 (privacy); Hardt & Price 2014; Balcan et al. 2016",
    kinds: EVERY_KIND,
    relations: EVERY_RELATION,
    privacy: "ρ-zCDP with ρ = L/(2s²): each iteration is a Gaussian mechanism with noise sd s·Δ(X_{l−1}).",
    public_only: false,
    scope_reason: None,
    releases_eigenvalues: true,
    study: None,
    sparse: true,
    clip_noise_factor: 1.0,
    clip_by_default: true,
    stats_suffice: true,
};

/// `analyze_gauss` (`crates/core/src/algorithms/analyze_gauss.rs`).
pub const ANALYZE_GAUSS: AlgorithmInfo = AlgorithmInfo {
    name: "analyze_gauss",
    summary: "Input perturbation: add a symmetric Gaussian matrix to A once, return the top-k eigenvectors of the noisy matrix.",
    source: "Dwork, Talwar, Thakurta & Zhang 2014 (Analyze Gauss, DP-Gauss-1); seed 004 App. G",
    kinds: EVERY_KIND,
    relations: EVERY_RELATION,
    privacy: "ρ-zCDP with ρ = Δ²/(2σ²): one Gaussian mechanism on the upper triangle of A, Δ = β² (add_remove), √2·β² (replace_one) or u (matrix).",
    public_only: false,
    scope_reason: None,
    releases_eigenvalues: true,
    study: None,
    sparse: false,
    clip_noise_factor: 1.0,
    clip_by_default: true,
    stats_suffice: true,
};

/// `coherent_power` (`crates/core/src/algorithms/coherent_power.rs`).
pub const COHERENT_POWER: AlgorithmInfo = AlgorithmInfo {
    name: "coherent_power",
    summary: "Private power iteration one vector at a time under a public coherence bound C, rank k by deflation with private singular-value estimates; the job fails cleanly if an iterate breaks the bound.",
    source: "Hardt & Roth 2013, Fig. 2 (PPI, Lemma 3.4), Fig. 3 (rank-k by deflation), Remark 4.5 (search over C)",
    kinds: EVERY_KIND,
    relations: EVERY_RELATION,
    privacy: "ρ-zCDP with ρ = k·(m·T/(2s²) + ε''²/2): per component, m·T Gaussian rounds (the Gaussian part) of sensitivity u·sqrt(C/d) for matrices and min(β², u_eff·sqrt(C/d)) for records (m coherence candidates, 1 without the search), and one Laplace estimate (pure DP) of sensitivity u for matrices, min(β², u_eff) for records.",
    public_only: false,
    scope_reason: None,
    releases_eigenvalues: true,
    study: None,
    sparse: true,
    clip_noise_factor: 1.0,
    clip_by_default: true,
    stats_suffice: true,
};

/// `eigen_sampling` (`crates/core/src/algorithms/eigen_sampling.rs`).
pub const EIGEN_SAMPLING: AlgorithmInfo = AlgorithmInfo {
    name: "eigen_sampling",
    summary: "Iterative eigenvector sampling, the PCA of OpenDP and diffprivlib: Laplace eigenvalues, then each eigenvector by the exponential mechanism (a Bingham distribution, sampled exactly) on the complement of the earlier ones.",
    source: "Amin, Dick, Kulesza, Muñoz Medina & Vassilvitskii 2019, Alg. 1 and 2; Bingham sampler with the angular central Gaussian envelope of Kent, Ganeiber & Mardia 2018",
    kinds: RECORDS,
    relations: RECORD_RELATIONS,
    privacy: "ρ-zCDP with ρ = ε₀²/2 + m·ε_v²/8: Laplace on the top-k eigenvalues (ε₀-DP; L1 sensitivity β² add_remove, 2β² replace_one) with share·ρ, then m = min(k, d − 1) exponential-mechanism draws (score sensitivity β², concentration ε_v/β² add_remove, ε_v/(2β²) replace_one; each ε_v-bounded range, hence ε_v²/8, Cesar & Rogers 2021) sharing the rest evenly.",
    public_only: false,
    scope_reason: Some(
        "records only: the Laplace eigenvalues and the exponential mechanism's score uᵀCu are calibrated to one clipped row's xxᵀ (Amin et al. 2019); the paper and the spec give no matrix calibration.",
    ),
    releases_eigenvalues: true,
    study: None,
    sparse: false,
    clip_noise_factor: 1.0,
    clip_by_default: true,
    stats_suffice: true,
};

/// `clip: "auto"` treats `k_dp_pca` as this many times noisier than `analyze_gauss` at the same ρ
/// (its per-step noise is calibrated to each step's small batch, not to all n records), so it
/// clips on budgets where the Gram-matrix release would not (docs/utility.md "The clip rule").
pub const K_DP_PCA_CLIP_NOISE: f64 = 100.0;
/// The same factor for `dp_oja`.
pub const DP_OJA_CLIP_NOISE: f64 = 20.0;

/// `k_dp_pca` (`crates/core/src/algorithms/k_dp_pca.rs`).
pub const K_DP_PCA: AlgorithmInfo = AlgorithmInfo {
    name: "k_dp_pca",
    summary: "k-DP-PCA: deflation over disjoint parts of the records, each round a private Oja iteration whose noise adapts to the batch's spread (PrivRange, then a truncated PrivMean). Records, replace_one only; needs a δ.",
    source: "Düngler & Sanyal 2025, Alg. 1 (deflation), Alg. 2 (ModifiedDP-PCA), Alg. 6 (PrivRange), Alg. 7 (PrivMean); histograms: Karwa & Vadhan 2018",
    kinds: RECORDS,
    relations: REPLACE_ONE,
    privacy: "δ-approximate ρ-zCDP with the target's ρ and δ (a target stated as (ε, δ) gives δ/2 to the histograms and ρ = the CKS conversion of ε at δ/2, so the job is (ε, δ)-DP): every step is so on its own disjoint batch, its ρ split 1/16 to PrivRange's stability histogram, 1/16 to PrivMean's per-coordinate histograms and 7/8 to PrivMean's Gaussian (charged in ρ directly), δ half to each histogram family.",
    public_only: false,
    scope_reason: Some(
        "records under replace_one only: one shuffle splits the records into disjoint positional batches, each step is DP on its own batch, and the job is DP by parallel composition; adding or removing a record shifts every later batch, and matrix datasets have no per-record terms x xᵀ.",
    ),
    releases_eigenvalues: false,
    study: None,
    sparse: false,
    clip_noise_factor: K_DP_PCA_CLIP_NOISE,
    clip_by_default: true,
    stats_suffice: false,
};

/// `dp_oja` (`crates/core/src/algorithms/dp_oja.rs`).
pub const DP_OJA: AlgorithmInfo = AlgorithmInfo {
    name: "dp_oja",
    summary: "k-DP-Ojas: deflation over disjoint parts of the records, each round one pass of Oja's rule on mini-batch means of clipped per-record gradients plus Gaussian noise, with a learning rate set from a private eigengap estimate. Records, replace_one only.",
    source: "Düngler & Sanyal 2025, Alg. 1 (deflation) with Alg. 3 (DP-Ojas), averaged over mini-batches; learning rate of Theorem 7 with a private eigenvalue estimate",
    kinds: RECORDS,
    relations: REPLACE_ONE,
    privacy: "ρ-zCDP with ρ = ρ_e + 1/(2a²): a Gaussian estimate of the top eigenvalues of XᵀX/n (sensitivity √2·β²/n, ρ_e = estimate_share·ρ; none with a fixed learning_rate), then every update is a Gaussian mechanism (sensitivity 2c/B, sd 2c·a/B) on its own batch, and batches are disjoint across updates and rounds.",
    public_only: false,
    scope_reason: Some(
        "records under replace_one only: each record feeds exactly one update and the job is DP by parallel composition over disjoint updates; adding or removing a record shifts every later update, and matrix datasets have no per-record terms x xᵀ.",
    ),
    releases_eigenvalues: false,
    study: None,
    sparse: false,
    clip_noise_factor: DP_OJA_CLIP_NOISE,
    clip_by_default: true,
    stats_suffice: false,
};

/// `federated_power` (`crates/core/src/algorithms/federated_power/mod.rs`).
pub const FEDERATED_POWER: AlgorithmInfo = AlgorithmInfo {
    name: "federated_power",
    summary: "Federated private power method with secure aggregation. As a job it simulates S sites in process over a records dataset (records assigned to sites by a keyed hash of their contents); as a study (POST /v1/studies) real sites run `privpca site` and their data never leaves them.",
    source: "Nicolas et al. 2024, Alg. 2 (federated), Thm 3.1/3.2; secure aggregation after Bonawitz et al. 2017",
    kinds: RECORDS,
    relations: RECORD_RELATIONS,
    privacy: "ρ-zCDP with ρ = L/(2m²) charged to every site: each site adds N(0, (mΔ)²/t), so any t survivors reach the central noise. The server sees only noisy sums; a coalition of the server with all other sites sees one site's release with noise variance (mΔ)²/t.",
    public_only: false,
    scope_reason: Some("federated_power runs on records (the sites' rows)"),
    releases_eigenvalues: true,
    study: Some(StudyKind::Power),
    sparse: false,
    clip_noise_factor: 1.0,
    clip_by_default: true,
    stats_suffice: false,
};

/// `cape_pca` (`crates/core/src/algorithms/cape_pca.rs`).
pub const CAPE_PCA: AlgorithmInfo = AlgorithmInfo {
    name: "cape_pca",
    summary: "Distributed private PCA with correlated noise (capePCA): each site sends its Gram matrix with zero-sum pairwise noise, aggregator noise and a small own noise, so the aggregate reaches close to the pooled-data noise level. As a job it simulates S sites over a records dataset; as a study (POST /v1/studies) real sites run `privpca site`.",
    source: "Imtiaz & Sarwate, Distributed differentially private algorithms for matrix and tensor factorization: Alg. 1 (CAPE), Alg. 2 (capePCA), §III-A",
    kinds: RECORDS,
    relations: RECORD_RELATIONS,
    privacy: "ρ-zCDP against the aggregator's joint view of every site's message (correlated Gaussian noise, ρ = Δ²/2·(g+v)/(g(Sv+g))), charged to every site; Δ = β² (add_remove) or √2·β² (replace_one). A coalition of the aggregator with all other sites sees one site's Gram matrix with noise variance g only.",
    public_only: false,
    scope_reason: Some("cape_pca runs on records (the sites' rows)"),
    releases_eigenvalues: true,
    study: Some(StudyKind::Cape),
    sparse: false,
    clip_noise_factor: 1.0,
    clip_by_default: true,
    stats_suffice: false,
};

/// `gossip_power` (`crates/core/src/algorithms/gossip/power.rs`).
pub const GOSSIP_POWER: AlgorithmInfo = AlgorithmInfo {
    name: "gossip_power",
    summary: "Decentralized DP power method (simulate mode): features split over m agents who gossip noisy messages over a graph; block power iteration, then a Rayleigh–Ritz step on the shared segments.",
    source: "D-DP-PM (Decentralized Differentially Private Power Method, seed 001), Alg. 1, eq. 11 and Assumption 2; accounting by the Gaussian mechanism (docs/design/algorithms.md), not the paper's Thm 2",
    kinds: RECORDS,
    relations: REPLACE_ONE,
    privacy: "ρ-zCDP with ρ = L·(1/(2s_y²) + 1/(2s_v²)): every message (sensitivity 2βν) and every update (sensitivity 2β·max row norm of the consensus/c) that leaves an agent is a Gaussian mechanism.",
    public_only: false,
    scope_reason: Some(
        "each message has one entry per record, so adding or removing a record changes its length; only replace_one records are supported",
    ),
    releases_eigenvalues: false,
    study: Some(StudyKind::Gossip),
    sparse: false,
    clip_noise_factor: 1.0,
    clip_by_default: true,
    stats_suffice: false,
};

/// `cape_agn` (`crates/core/src/algorithms/cape_agn.rs`).
pub const CAPE_AGN: AlgorithmInfo = AlgorithmInfo {
    name: "cape_agn",
    summary: "Distributed private orthogonal tensor decomposition (capeAGN): S simulated sites release their second and third moments with CAPE correlated noise; the aggregator whitens, runs the tensor power method and returns the mixture components (released.components) and an orthonormal basis of their span. Simulate mode over a records dataset.",
    source: "Imtiaz & Sarwate, Distributed differentially private algorithms for matrix and tensor factorization, Alg. 1 and 3, App. B–C; Anandkumar et al. 2014 Alg. 1",
    kinds: RECORDS,
    relations: RECORD_RELATIONS,
    privacy: "ρ-zCDP charged to every site: two CAPE releases (second moments, third moments) at ρ/2 each, calibrated against the aggregator's joint view of all messages; Δ from the model (Imtiaz & Sarwate App. C in sum form).",
    public_only: false,
    scope_reason: Some("cape_agn's models (STM, MOG) describe records"),
    releases_eigenvalues: false,
    study: Some(StudyKind::Cape),
    sparse: false,
    clip_noise_factor: 1.0,
    clip_by_default: false,
    stats_suffice: false,
};

/// `exact` (`crates/core/src/algorithms/exact.rs`).
pub const EXACT: AlgorithmInfo = AlgorithmInfo {
    name: "exact",
    summary: "Exact (non-private) PCA by symmetric eigendecomposition; ground truth for utility metrics.",
    source: "Symmetric eigendecomposition of the (optionally centred) Gram matrix or of the data matrix",
    kinds: EVERY_KIND,
    relations: EVERY_RELATION,
    privacy: "Not private: allowed only on datasets marked public; charges nothing.",
    public_only: true,
    scope_reason: None,
    releases_eigenvalues: true,
    study: None,
    sparse: true,
    clip_noise_factor: 1.0,
    clip_by_default: false,
    stats_suffice: true,
};
