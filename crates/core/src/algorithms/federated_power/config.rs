//! `federated_power`'s terms: the parameters, the calibration, the cost and what a site
//! computes each round. The derivation is on the module page ([`super`]); the round state both
//! sides keep is [`super::state`], the in-process run of a job [`super::simulate`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::algorithms::calibration::{check_calibrated, check_opening, choose_iterations, choose_p};
use crate::algorithms::centering::CenterRequest;
use crate::algorithms::power_clip::{ClipAsk, PowerClip};
use crate::algorithms::power_noise::calibrate;
use crate::algorithms::sensitivity::{SensitivityMode, change_l1_bound, hardt_price, rank_one, row_norm};
use crate::algorithms::study_center::StudyCenter;
use crate::algorithms::{ConfigError, RunEnv, RunError};
use crate::dataset::{DataContext, Kind, Neighbours};
use crate::federation::fixed_point::{self, FixedPoint, NOISE_TAIL_SDS, encoding_is_exact};
use crate::federation::secagg::graph::choose_parameters;
use crate::linalg::Matrix;

use crate::privacy::PrivacyTarget;

/// Default number of rounds, as `noisy_power`.
pub const DEFAULT_ITERATIONS: u32 = crate::algorithms::noisy_power::DEFAULT_ITERATIONS;
/// Most rounds of a federated run: every round is a network round trip, and every site shares
/// L masking secrets with every other site at setup.
pub const MAX_ITERATIONS: u32 = 200;
/// Most sites of one federation on the complete graph (every site shares 2·L secrets with
/// every other: S² boxes), and of a simulated one (jobs).
pub const MAX_SITES: u32 = 64;
/// Most sites of a live SecAgg+ study (`secure_aggregation: "sparse"`): each site shares with
/// its k ≤ 254 graph neighbours only (docs/design/federation.md, "Live SecAgg+").
pub const MAX_SPARSE_SITES: u32 = 1000;
/// Default number of simulated sites.
pub const DEFAULT_SITES: u32 = 3;
/// Default largest number of records one site may hold (the no-wrap bound assumes it).
pub const DEFAULT_MAX_SITE_SAMPLES: u64 = 10_000_000;
/// Largest fraction-bit count the default picks when the noise allows it (2^-40 ≈ 1e-12), for
/// integer headroom; the default goes above it only as far as exactness
/// ([`FederatedPowerConfig::min_fraction_bits`]) needs.
pub const MAX_DEFAULT_FRACTION_BITS: u32 = 40;
/// Largest ‖XᵀX − I‖_F a site accepts in the iterate it is sent.
///
/// Why this value: an honest coordinator's iterate is the Q of a Householder QR in f64, whose
/// orthogonality error is a small multiple of 2^-53·√(d·p) (below 1e-11 even at d = 10⁵), and it
/// travels as exact f64 bits; 1e-9 leaves two orders of magnitude for that. What the tolerance
/// admits is harmless: ‖X‖₂² ≤ 1 + ‖XᵀX − I‖_F, and the site multiplies the one bound that
/// assumes orthonormal columns (`rank_one`, ‖xxᵀX‖_F ≤ β²‖X‖₂) by √(1 + ‖XᵀX − I‖_F) itself
/// ([`received_sensitivity`]), so the noise covers the iterate it actually multiplies; the
/// other bounds hold for any X. Beyond the tolerance the coordinator is broken or lying (2·Q
/// would quadruple the loss of a `rank_one` study), and the site refuses.
pub const ORTHONORMAL_TOLERANCE: f64 = 1e-9;
/// Audit label of a site's per-round noise.
pub const RELEASE: &str = "site_power_iteration";

/// The default threshold ⌈2S/3⌉, at least 2 (docs/design/algorithms.md, `federated_power`).
pub fn default_threshold(sites: u32) -> u32 {
    (2 * sites).div_ceil(3).max(2)
}

/// A simulated dropout: `site` (1-based) sends nothing from round `round` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Dropout {
    /// The site, 1-based.
    pub site: u32,
    /// The first round it does not send, 1-based.
    pub round: u32,
}

/// What the client sends (for a job; a study takes `sites` and `threshold` at its top level
/// and refuses them here).
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FederatedPowerParams {
    /// Target rank: number of principal components returned (1 ≤ k ≤ d).
    #[schemars(range(min = 1))]
    pub k: usize,
    /// Iteration rank (k ≤ p ≤ d). Default: min(d, 2k).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub p: Option<usize>,
    /// Rounds L (1–200).
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_ITERATIONS), extend("default" = DEFAULT_ITERATIONS))]
    pub iterations: Option<u32>,
    /// Sensitivity bound per round, as noisy_power (the sites compute it from the public
    /// iterate).
    #[serde(default)]
    pub sensitivity: SensitivityMode,
    /// Jobs only (simulate mode): number of simulated sites S, 2–64. Each record goes to the
    /// shard named by a keyed hash of its contents (a fresh random key per job), so one record's
    /// change touches its own shard only; shards may be empty.
    #[serde(default)]
    #[schemars(range(min = 2, max = MAX_SITES), extend("default" = DEFAULT_SITES))]
    pub sites: Option<u32>,
    /// Jobs only: survivors needed per round t, 2 ≤ t ≤ S. Default: ⌈2S/3⌉.
    #[serde(default)]
    #[schemars(range(min = 2))]
    pub threshold: Option<u32>,
    /// Jobs only: [{"site": i, "round": r}]: simulated site i sends nothing from round r on.
    #[serde(default)]
    pub dropouts: Vec<Dropout>,
    /// The secure aggregation the sites run (simulated in a job, live in a study). `complete`
    /// (Bonawitz et al. 2017): every site masks with, and shares its secrets to, every other
    /// site, quadratic in S (at most 64 sites). `sparse` (SecAgg+, Bell et al. 2020): each site
    /// masks with and shares to its k neighbours on a public random graph, k and the
    /// per-neighbourhood threshold chosen from S, `corruption_rate` and `dropout_rate`; privacy
    /// then holds with probability ≥ 1 − 2^-40 against a random γ·S corrupt sites
    /// (docs/design/federation.md, "SecAgg+"). A study on `sparse` takes up to 1 000 sites, its
    /// graph's seed fixed by the sites' commit-then-reveal ("Live SecAgg+").
    #[serde(default)]
    pub secure_aggregation: SecureAggregation,
    /// `sparse` only (refused with `complete`, where it would mean nothing): the
    /// fraction γ of sites assumed corrupt (colluding with the coordinator), γ ≥ 0 and
    /// γ + 2δ ≤ 0.9; in a study, of the sites invited (a smaller roster is assumed to hold all
    /// of them). Default with `sparse`: 0.1. No default is published, because the field may not
    /// be sent with the default `complete`.
    #[serde(default)]
    #[schemars(range(min = 0.0, max = 0.9))]
    pub corruption_rate: Option<f64>,
    /// `sparse` only (refused with `complete`): the fraction δ of sites that may drop out, δ ≥ 0
    /// and γ + 2δ ≤ 0.9; a job's `dropouts` may name at most ⌈δS⌉ sites. Default with `sparse`:
    /// 0.1.
    #[serde(default)]
    #[schemars(range(min = 0.0, max = 0.45))]
    pub dropout_rate: Option<f64>,
    /// Fixed-point fraction bits f (values scaled by 2^f), 0–52. The encoding must never remove
    /// noise: the step 2^-f must be no coarser than the grid each site's noise is released on,
    /// 2^(⌊log₂ σ_min⌋−30) for the smallest per-site noise sd σ_min = m·Δ_min/√t the study can
    /// produce, so that encoding is exact; and the sum must not wrap,
    /// S·(n_max·β² + 40σ_max)·2^f < 2^62. Anything else is refused (422 naming this field).
    /// Default: the largest f that cannot wrap, at most 40 or the smallest exact f if that is
    /// larger.
    #[serde(default)]
    pub fraction_bits: Option<u32>,
    /// Records per site the encoding is sized for, 1–2⁴⁰: each entry of a site's A_s·X is
    /// clamped to ±max_site_samples·β² before noise (exact when the site holds at most this
    /// many records; a site never refuses because it holds more), and the no-wrap bound
    /// assumes it. Default: n when the dataset's record count is public (no site can hold
    /// more), else 10⁷.
    #[serde(default)]
    #[schemars(range(min = 1, max = 1_099_511_627_776u64))]
    pub max_site_samples: Option<u64>,
}

/// Every parameter fixed and the noise calibrated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FederatedPowerConfig {
    pub k: usize,
    pub p: usize,
    pub iterations: u32,
    pub sensitivity: SensitivityMode,
    /// The central noise multiplier m: the released sum has noise sd ≥ m·Δ(X_{l−1}).
    pub multiplier: f64,
    pub sites: u32,
    pub threshold: u32,
    pub fraction_bits: u32,
    pub max_site_samples: u64,
    #[serde(default)]
    pub dropouts: Vec<Dropout>,
    /// SecAgg+ (`None`: the complete graph).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secagg_plus: Option<SecAggPlus>,
    /// A live study's private clip, run as the first rounds ([`crate::algorithms::power_clip`]); `None`:
    /// calibrated to the declared β (jobs clip centrally, before the run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clip: Option<PowerClip>,
    /// Why `clip: "auto"` ran no clip (shown with the study's configuration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clip_declined: Option<String>,
    /// A live study's centre ([`crate::algorithms::study_center`]): a private mean released by the first
    /// round, before the clip's, or a given public centre; `None`: rows as they are (jobs
    /// centre centrally, before the run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub center: Option<StudyCenter>,
}

/// What one secure-sum round of a study computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoundKind {
    /// The private centre's sum ([`crate::algorithms::study_center`]).
    Center,
    /// A step of the private clip's search ([`crate::algorithms::power_clip`]).
    ClipStep,
    /// A power round.
    Power,
}

/// Which secure aggregation a simulated federation runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SecureAggregation {
    /// Every pair of sites (Bonawitz et al. 2017).
    #[default]
    Complete,
    /// Graph neighbours only (SecAgg+, Bell et al. 2020).
    Sparse,
}

/// Default stated corruption rate γ for `sparse`.
pub const DEFAULT_CORRUPTION_RATE: f64 = 0.1;
/// Default stated dropout rate δ for `sparse`.
pub const DEFAULT_DROPOUT_RATE: f64 = 0.1;

/// A SecAgg+ configuration: the stated rates and the k and t they give for the job's S.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecAggPlus {
    pub corruption_rate: f64,
    pub dropout_rate: f64,
    /// Neighbours per site.
    pub degree: u32,
    /// Neighbours' shares needed to recover a secret.
    pub threshold: u32,
}

impl SecAggPlus {
    /// The most sites of a roster of `roster` that may be out by any round of a live study,
    /// ⌈δ·roster⌉: the graph's k and t are chosen for that many, and against a coordinator that
    /// picks the dropped sites after seeing the graph the bound is what keeps it from cutting
    /// the honest survivors apart (docs/design/federation.md, "Live SecAgg+").
    pub fn max_out(&self, roster: usize) -> usize {
        (self.dropout_rate * roster as f64 - 1e-12).ceil().max(0.0) as usize
    }

    /// The corrupt sites the study assumes among its `invited` sites, ⌈γ·invited⌉, all of them
    /// in any roster that joins ([`SecAggPlus::corruption_rate_for`]). A site's consistency
    /// checks count them as colluders: the one-transcript argument needs every colluder
    /// counted (docs/design/federation.md, "Live SecAgg+").
    pub fn corrupt_sites(&self, invited: u32) -> u32 {
        (self.corruption_rate * f64::from(invited) - 1e-12)
            .ceil()
            .max(0.0) as u32
    }

    /// The fewest honest sites whose releases a round's sum can hold, on a roster of `roster`
    /// of the `invited`: the roster less ⌈δ·roster⌉ sites out ([`SecAggPlus::max_out`]) and
    /// less every assumed corrupt site. The coordinator and the corrupt sites see that sum with
    /// the corrupt releases taken out, so its noise is h·σ²/t for h honest survivors: a site's
    /// loss is ρ·t/h, at most its charge only when h ≥ t.
    pub fn least_honest_survivors(&self, invited: u32, roster: u32) -> u32 {
        roster
            .saturating_sub(self.max_out(roster as usize) as u32)
            .saturating_sub(self.corrupt_sites(invited))
    }

    /// The corruption rate a live roster of `roster` sites is assumed to have when `invited`
    /// were invited: the stated γ is of the invited sites, and a coordinator that turned honest
    /// joins away must not thin the corrupt fraction's bound, so all ⌈γ·invited⌉ corrupt sites
    /// are assumed to be in the roster (γ·invited/roster, never below γ).
    pub fn corruption_rate_for(&self, invited: u32, roster: u32) -> f64 {
        if roster == 0 || roster >= invited {
            return self.corruption_rate;
        }
        self.corruption_rate * f64::from(invited) / f64::from(roster)
    }
}

/// Resolves `secure_aggregation` and its rates for `sites` sites and `dropouts` scripted
/// dropouts (422 naming the field at fault).
pub fn choose_secagg(
    params: &FederatedPowerParams,
    sites: u32,
    dropouts: usize,
) -> Result<Option<SecAggPlus>, ConfigError> {
    if params.secure_aggregation == SecureAggregation::Complete {
        return match (params.corruption_rate, params.dropout_rate) {
            (None, None) => Ok(None),
            (Some(_), _) => Err(ConfigError::invalid(
                "params.corruption_rate",
                "applies to secure_aggregation = sparse only",
            )),
            (_, Some(_)) => Err(ConfigError::invalid(
                "params.dropout_rate",
                "applies to secure_aggregation = sparse only",
            )),
        };
    }
    let corruption_rate = params.corruption_rate.unwrap_or(DEFAULT_CORRUPTION_RATE);
    let dropout_rate = params.dropout_rate.unwrap_or(DEFAULT_DROPOUT_RATE);
    if !(0.0..=0.9).contains(&corruption_rate) {
        return Err(ConfigError::invalid(
            "params.corruption_rate",
            "must lie in [0, 0.9]",
        ));
    }
    if !(dropout_rate >= 0.0 && corruption_rate + 2.0 * dropout_rate <= 0.9) {
        return Err(ConfigError::invalid(
            "params.dropout_rate",
            format!("must be ≥ 0 with corruption_rate + 2·dropout_rate ≤ 0.9 (got {dropout_rate})"),
        ));
    }
    let (degree, threshold) = choose_parameters(sites, corruption_rate, dropout_rate).map_err(|_| {
        ConfigError::invalid(
            "params.secure_aggregation",
            format!(
                "no neighbourhood meets SecAgg+'s bounds for {sites} sites at corruption_rate {corruption_rate} and dropout_rate {dropout_rate}: use complete, more sites or lower rates"
            ),
        )
    })?;
    let allowed = (dropout_rate * f64::from(sites) - 1e-12).ceil().max(0.0) as usize;
    if dropouts > allowed {
        return Err(ConfigError::invalid(
            "params.dropouts",
            format!("names {dropouts} sites; dropout_rate {dropout_rate} of {sites} allows {allowed}"),
        ));
    }
    Ok(Some(SecAggPlus {
        corruption_rate,
        dropout_rate,
        degree,
        threshold,
    }))
}

/// The largest Δ(X) the mode can produce for any iterate with orthonormal columns: the
/// rank-one bound for `auto` and `rank_one` (auto is a minimum that includes it), eq. 12's bound
/// for `row_norm` (max row norm ≤ 1), √p times it for `hardt_price` (max entry ≤ 1).
pub fn max_sensitivity(mode: SensitivityMode, neighbours: &Neighbours, p: usize) -> f64 {
    let l1 = change_l1_bound(neighbours);
    match mode {
        SensitivityMode::Auto | SensitivityMode::RankOne => rank_one(neighbours).unwrap_or(l1),
        SensitivityMode::RowNorm => l1,
        SensitivityMode::HardtPrice => l1 * (p as f64).sqrt(),
    }
}

/// The smallest Δ(X) the mode can produce for an iterate the site accepts (‖XᵀX − I‖_F ≤
/// [`ORTHONORMAL_TOLERANCE`]): tr(XᵀX) ≥ p − √p·tol, so some row has squared norm at least
/// (p − √p·tol)/d and some entry at least that over p; `row_norm` and `hardt_price` are then at
/// least bound·√((p − √p·tol)/d), `rank_one` is fixed, and `auto` is the least of those.
pub fn min_sensitivity(mode: SensitivityMode, neighbours: &Neighbours, d: usize, p: usize) -> f64 {
    let p_f = p as f64;
    let mass = (p_f - p_f.sqrt() * ORTHONORMAL_TOLERANCE).max(0.0);
    let spread = change_l1_bound(neighbours) * (mass / d.max(1) as f64).sqrt();
    match mode {
        SensitivityMode::RowNorm | SensitivityMode::HardtPrice => spread,
        SensitivityMode::RankOne => rank_one(neighbours).unwrap_or(spread),
        SensitivityMode::Auto => rank_one(neighbours).map_or(spread, |r| r.min(spread)),
    }
}

/// Why a site refuses the iterate it was sent. Messages name only public facts.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum IterateError {
    #[error("the iterate is {rows}×{cols}; the study's is {d}×{p}")]
    Shape {
        rows: usize,
        cols: usize,
        d: usize,
        p: usize,
    },
    #[error("the iterate has an entry that is not a finite number")]
    NonFinite,
    #[error(
        "the iterate's columns are not orthonormal: ‖XᵀX − I‖_F = {0:.3e} exceeds {ORTHONORMAL_TOLERANCE:e}; \
         this site's noise would not cover its release"
    )]
    NotOrthonormal(f64),
}

/// ‖XᵀX − I‖_F.
pub fn orthonormality_error(x: &Matrix) -> f64 {
    let gram = x.transpose() * x;
    let mut sum = 0.0;
    for j in 0..gram.ncols() {
        for i in 0..gram.nrows() {
            let target = if i == j { 1.0 } else { 0.0 };
            sum += (gram[(i, j)] - target).powi(2);
        }
    }
    sum.sqrt()
}

/// Checks the iterate a site received (shape d×p, finite, ‖XᵀX − I‖_F ≤
/// [`ORTHONORMAL_TOLERANCE`]) and returns the sensitivity Δ of A_s·X for *that* iterate.
///
/// `row_norm` (Nicolas et al. Thm 3.1: ‖CX‖_F ≤ sqrt(Σ_i ‖C_i:‖₁²)·max_j ‖X_j:‖₂) and
/// `hardt_price` (≥ it) hold for any X. `rank_one` (‖xxᵀX‖_F = ‖x‖₂‖Xᵀx‖₂ ≤ β²‖X‖₂) assumes
/// ‖X‖₂ ≤ 1; it is multiplied here by √(1 + ‖XᵀX − I‖_F) ≥ ‖X‖₂ (the spectral norm of
/// XᵀX − I is at most its Frobenius norm), so every mode's Δ bounds the change of this site's
/// A_s·X for the matrix it actually multiplies, orthonormal or not.
pub fn received_sensitivity(
    x: &Matrix,
    config: &FederatedPowerConfig,
    neighbours: &Neighbours,
    d: usize,
) -> Result<f64, IterateError> {
    if (x.nrows(), x.ncols()) != (d, config.p) {
        return Err(IterateError::Shape {
            rows: x.nrows(),
            cols: x.ncols(),
            d,
            p: config.p,
        });
    }
    if !x.iter().all(|v| v.is_finite()) {
        return Err(IterateError::NonFinite);
    }
    let error = orthonormality_error(x);
    if !(error <= ORTHONORMAL_TOLERANCE) {
        return Err(IterateError::NotOrthonormal(error));
    }
    let spectral = (1.0 + error).sqrt();
    let rank_one = rank_one(neighbours).map(|r| r * spectral);
    let delta = match config.sensitivity {
        SensitivityMode::RowNorm => row_norm(neighbours, x),
        SensitivityMode::HardtPrice => hardt_price(neighbours, x),
        SensitivityMode::RankOne => rank_one.unwrap_or(f64::NAN),
        SensitivityMode::Auto => {
            let bound = row_norm(neighbours, x).min(hardt_price(neighbours, x));
            rank_one.map_or(bound, |r| bound.min(r))
        }
    };
    Ok(delta)
}

impl FederatedPowerConfig {
    /// Rounds of the private centre before the clip's (1 for a private mean, else 0).
    pub fn center_rounds(&self) -> u32 {
        self.center.as_ref().map_or(0, StudyCenter::rounds)
    }

    /// Rounds of the private clip before the power rounds (0 without one).
    pub fn clip_rounds(&self) -> u32 {
        self.clip.as_ref().map_or(0, PowerClip::rounds)
    }

    /// Every secure-sum round: the centre's, the clip's, then the L power rounds.
    pub fn total_rounds(&self) -> u32 {
        self.center_rounds() + self.clip_rounds() + self.iterations
    }

    /// What round `round` (1-based) of the study computes.
    pub fn round_kind(&self, round: u32) -> RoundKind {
        let (center, clip) = (self.center_rounds(), self.clip_rounds());
        if round <= center {
            RoundKind::Center
        } else if round <= center + clip {
            RoundKind::ClipStep
        } else {
            RoundKind::Power
        }
    }

    /// The lengths of the rounds before the power rounds, in order: the centre's (d or d + 1
    /// values), then one per step of the clip.
    pub fn lead_lengths(&self, d: usize) -> Vec<usize> {
        let center = self.center.iter().filter(|c| c.is_private()).map(|c| c.len(d));
        center.chain((0..self.clip_rounds()).map(|_| 1)).collect()
    }

    /// The fraction bits of a power round calibrated to rows clipped at `c` (`None`: the
    /// declared β): f + ⌈2·log₂(β/c)⌉. Every bound of a round scales as c² (the signal n_max·c²
    /// and, for the default L1 bound, the noise), so the scaled encoding keeps the noise's grid
    /// and the no-wrap margin of the round at β; [`FederatedPowerConfig::clip_encodable`]
    /// checks both for every c the search can release. Both sides compute it from the public c.
    pub fn fraction_bits_at(&self, c: Option<f64>) -> u32 {
        match (&self.clip, c) {
            (Some(clip), Some(c)) if c < clip.search.upper => {
                let k = (2.0 * (clip.search.upper / c).log2() - 1e-9).ceil();
                self.fraction_bits + if k.is_finite() && k > 0.0 { k as u32 } else { 0 }
            }
            _ => self.fraction_bits,
        }
    }

    /// The fraction bits of a round calibrated to `neighbours` (the declared bounds, or those
    /// of rows clipped at the round's c).
    pub fn round_fraction_bits(&self, neighbours: &Neighbours) -> u32 {
        let beta = match *neighbours {
            Neighbours::ReplaceOne { beta, .. } | Neighbours::AddRemove { beta, .. } => beta,
            Neighbours::Entry { u } => u,
        };
        self.fraction_bits_at(self.clip.as_ref().map(|_| beta))
    }

    /// Whether the power rounds' encoding is exact and cannot wrap at every c the clip's search
    /// can release (β·2^(−8 + 8j/256), j = 1..=256), with `fraction_bits` = f at β.
    pub fn clip_encodable(&self, neighbours: &Neighbours, d: usize) -> bool {
        let Some(clip) = &self.clip else {
            return true;
        };
        (1..=256u32).all(|j| {
            let c = clip.search.upper * ((f64::from(j) - 256.0) / 32.0).exp2();
            let at = crate::algorithms::clipping::clipped_neighbours(neighbours, d, c);
            let f = self.fraction_bits_at(Some(c));
            f <= fixed_point::MAX_FRACTION_BITS
                && fixed_point::fits(self.total_bound(&at), f)
                && self.min_fraction_bits(&at, d).is_some_and(|min| f >= min)
        })
    }

    /// Per-site noise sd for iterate sensitivity Δ: m·Δ/√t.
    pub fn site_sd(&self, delta: f64) -> f64 {
        self.multiplier * delta / f64::from(self.threshold).sqrt()
    }

    /// The clamp on every entry of a site's A_s·X: n_max·β²·(1 + tol). Each record adds
    /// x_i·(xᵀX_j) with |x_i| ≤ β and |xᵀX_j| ≤ β‖X_j‖₂ ≤ β·√(1 + tol), so a site holding at
    /// most n_max records is never clamped.
    pub fn signal_bound(&self, neighbours: &Neighbours) -> f64 {
        let beta = match *neighbours {
            Neighbours::ReplaceOne { beta, .. } | Neighbours::AddRemove { beta, .. } => beta,
            Neighbours::Entry { u } => u,
        };
        self.max_site_samples as f64 * beta * beta * (1.0 + ORTHONORMAL_TOLERANCE)
    }

    /// A bound on every entry of one site's release: the [`signal_bound`](Self::signal_bound)
    /// plus [`NOISE_TAIL_SDS`] noise sds (with room for the grid rounding and the tolerance).
    pub fn entry_bound(&self, neighbours: &Neighbours) -> f64 {
        let sd_max = self.site_sd(max_sensitivity(self.sensitivity, neighbours, self.p))
            * (1.0 + ORTHONORMAL_TOLERANCE);
        self.signal_bound(neighbours) + (NOISE_TAIL_SDS + 1.0) * sd_max
    }

    /// A bound on every entry of the sum over all sites.
    pub fn total_bound(&self, neighbours: &Neighbours) -> f64 {
        f64::from(self.sites) * self.entry_bound(neighbours)
    }

    /// The smallest f for which encoding is exact in every round
    /// ([`encoding_is_exact`] at the smallest site sd m·Δ_min/√t, see [`min_sensitivity`]),
    /// `None` when even 52 bits are too few. The sd is lowered by 10⁻¹² so that floating-point
    /// rounding in a round's own sd cannot land it below a power of two this one is above.
    pub fn min_fraction_bits(&self, neighbours: &Neighbours, d: usize) -> Option<u32> {
        let sd_min = self.site_sd(min_sensitivity(self.sensitivity, neighbours, d, self.p)) * (1.0 - 1e-12);
        (0..=fixed_point::MAX_FRACTION_BITS).find(|&f| encoding_is_exact(f, sd_min))
    }
}

/// The fraction bits: `asked` if the encoding is exact for every round's noise and the sum
/// cannot wrap; by default the largest f that cannot wrap, up to max(40, the smallest exact f).
/// Refusals name `params.fraction_bits` and quote public parameters only.
fn choose_fraction_bits(
    config: &FederatedPowerConfig,
    asked: Option<u32>,
    ctx: &DataContext,
) -> Result<u32, ConfigError> {
    let total = config.total_bound(&ctx.neighbours);
    let max_fit = fixed_point::max_fraction_bits(total, fixed_point::MAX_FRACTION_BITS);
    let Some(min_exact) = config.min_fraction_bits(&ctx.neighbours, ctx.d) else {
        return Err(ConfigError::invalid(
            "params.fraction_bits",
            "the per-site noise is too small for any fixed-point encoding of 52 bits or fewer to keep it; \
             lower rho or raise the sites' threshold",
        ));
    };
    let range = || match max_fit {
        Some(max) if max >= min_exact => format!("; {min_exact} ≤ f ≤ {max} fit"),
        _ => String::new(),
    };
    let wrap_help = "lower max_site_samples or rho, or use fewer sites";
    match asked {
        Some(f) if f < min_exact => Err(ConfigError::invalid(
            "params.fraction_bits",
            format!(
                "{f} fraction bits would round away part of the sites' noise: the step 2^-f must be \
                 at most the grid of the smallest per-site noise, so f ≥ {min_exact}{}",
                range()
            ),
        )),
        Some(f) if !(f <= fixed_point::MAX_FRACTION_BITS && fixed_point::fits(total, f)) => {
            Err(ConfigError::invalid(
                "params.fraction_bits",
                format!(
                    "{f} fraction bits could wrap: S·(n_max·β² + {NOISE_TAIL_SDS}·σ_site) = {total:.4e} must stay below 2^(62−f){}",
                    match max_fit {
                        Some(m) => format!("; at most {m} bits fit"),
                        None => String::new(),
                    }
                ),
            ))
        }
        Some(f) => Ok(f),
        None => match fixed_point::max_fraction_bits(total, MAX_DEFAULT_FRACTION_BITS.max(min_exact)) {
            Some(f) if f >= min_exact => Ok(f),
            _ => Err(ConfigError::invalid(
                "params.fraction_bits",
                format!(
                    "no fixed-point encoding both keeps the sites' noise (f ≥ {min_exact}) and cannot wrap \
                     (sum bound {total:.4e}{}); {wrap_help}",
                    match max_fit {
                        Some(m) => format!(", f ≤ {m}"),
                        None => String::new(),
                    }
                ),
            )),
        },
    }
}

/// The fraction bits f at β of a study with a clip: `asked`, or the largest f from the default
/// [`choose_fraction_bits`] down for which every c the search can release encodes exactly and
/// without wrapping ([`FederatedPowerConfig::clip_encodable`]).
fn choose_clip_fraction_bits(
    config: &FederatedPowerConfig,
    asked: Option<u32>,
    ctx: &DataContext,
) -> Result<u32, ConfigError> {
    let at_beta = choose_fraction_bits(config, asked, ctx)?;
    let lowest = if asked.is_some() { at_beta } else { 0 };
    (lowest..=at_beta)
        .rev()
        .find(|&f| {
            let trial = FederatedPowerConfig {
                fraction_bits: f,
                ..config.clone()
            };
            trial
                .min_fraction_bits(&ctx.neighbours, ctx.d)
                .is_some_and(|min| f >= min)
                && trial.clip_encodable(&ctx.neighbours, ctx.d)
        })
        .ok_or_else(|| {
            ConfigError::invalid(
                "params.fraction_bits",
                "no fixed-point encoding keeps the sites' noise exact at every clip norm the clip can \
                 release without wrapping; lower max_site_samples, or use clip: none",
            )
        })
}

/// 2 ≤ `sites` ≤ the cap of the secure aggregation: [`MAX_SITES`] on the complete graph,
/// [`MAX_SPARSE_SITES`] under SecAgg+ (jobs check their own cap first).
fn check_site_count(aggregation: SecureAggregation, sites: u32) -> Result<(), ConfigError> {
    let max_sites = match aggregation {
        SecureAggregation::Complete => MAX_SITES,
        SecureAggregation::Sparse => MAX_SPARSE_SITES,
    };
    if (2..=max_sites).contains(&sites) {
        return Ok(());
    }
    let more = if max_sites == MAX_SITES {
        format!("; secure_aggregation: sparse (SecAgg+) takes up to {MAX_SPARSE_SITES} in a study")
    } else {
        String::new()
    };
    Err(ConfigError::invalid(
        "sites",
        format!("a federation needs 2 to {max_sites} sites (got {sites}){more}"),
    ))
}

/// Validates and calibrates for `sites` sites with threshold `threshold` (shared by jobs and
/// studies). `params.sites`/`threshold`/`dropouts` are ignored here; the caller has resolved them.
pub fn configure_for(
    params: &FederatedPowerParams,
    ctx: &DataContext,
    target: &PrivacyTarget,
    sites: u32,
    threshold: u32,
) -> Result<FederatedPowerConfig, ConfigError> {
    if ctx.kind() != Kind::Records {
        return Err(ConfigError::Unsupported(
            "federated_power runs on records held at sites".into(),
        ));
    }
    let rho = check_opening(ctx, target, params.k)?;
    let d = ctx.d;
    let k = params.k;
    let p = choose_p(params.p, k, d)?;
    let iterations = choose_iterations(
        params.iterations,
        DEFAULT_ITERATIONS,
        MAX_ITERATIONS,
        " for a federated run",
    )?;
    check_site_count(params.secure_aggregation, sites)?;
    if !(threshold >= 2 && threshold <= sites) {
        return Err(ConfigError::invalid(
            "threshold",
            format!("must satisfy 2 ≤ t ≤ S = {sites} (got {threshold})"),
        ));
    }
    if !params.sensitivity.applies_to(&ctx.neighbours) {
        return Err(ConfigError::invalid(
            "params.sensitivity",
            "does not apply to this relation",
        ));
    }
    // A public n bounds every shard, and sizes the encoding far tighter than 10⁷ would: at a
    // large ρ the sites' noise is small, and an exact encoding (step ≤ the noise's grid) then
    // needs the fraction bits the looser bound would take for headroom.
    let max_site_samples = params.max_site_samples.unwrap_or_else(|| {
        ctx.n.map_or(DEFAULT_MAX_SITE_SAMPLES, |n| {
            (n as u64).clamp(1, DEFAULT_MAX_SITE_SAMPLES)
        })
    });
    if !(1..=1 << 40).contains(&max_site_samples) {
        return Err(ConfigError::invalid(
            "params.max_site_samples",
            "must lie in 1..=2^40",
        ));
    }
    let multiplier = calibrate(iterations, rho);
    check_calibrated(multiplier.is_finite())?;
    let mut config = FederatedPowerConfig {
        k,
        p,
        iterations,
        sensitivity: params.sensitivity,
        multiplier,
        sites,
        threshold,
        fraction_bits: 0,
        max_site_samples,
        dropouts: Vec::new(),
        secagg_plus: None,
        clip: None,
        clip_declined: None,
        center: None,
    };
    config.fraction_bits = choose_fraction_bits(&config, params.fraction_bits, ctx)?;
    Ok(config)
}

/// A live study's configuration. With `center`, the centre takes its share of the target's ρ
/// first ([`StudyCenter::configure`]); with `clip`, the search takes its share next
/// ([`PowerClip::configure`]); the power rounds get the rest (nudged down so the sum stays
/// within ρ), with an encoding exact down to the clip's floor. Both shares are of the whole ρ,
/// as a central job's options are. `clip: "auto"` falls back to no clip where no encoding fits
/// both (a study whose noise is already tiny).
pub fn configure_study(
    params: &FederatedPowerParams,
    ctx: &DataContext,
    target: &PrivacyTarget,
    (sites, threshold): (u32, u32),
    clip: Option<ClipAsk>,
    center: Option<CenterRequest>,
) -> Result<FederatedPowerConfig, ConfigError> {
    let rho = check_opening(ctx, target, params.k)?;
    // n_max as `configure_for` resolves it (the centre's and the clip's encodings need it first).
    let max_site_samples = params.max_site_samples.unwrap_or_else(|| {
        ctx.n.map_or(DEFAULT_MAX_SITE_SAMPLES, |n| {
            (n as u64).clamp(1, DEFAULT_MAX_SITE_SAMPLES)
        })
    });
    let center = center
        .map(|request| StudyCenter::configure(request, ctx, rho, sites, threshold, max_site_samples))
        .transpose()?;
    let center_rho = center.as_ref().map_or(0.0, |c| c.cost().rho);
    let after_center = PrivacyTarget {
        public_default: false,
        rho: remainder(rho, center_rho, "params.center_share")?,
        delta: target.delta,
        epsilon: None,
    };
    let after_center = if center_rho > 0.0 { &after_center } else { target };
    let mut config = match clip {
        None => configure_for(params, ctx, after_center, sites, threshold)?,
        Some(ask) => configure_clipped(
            params,
            ctx,
            (rho, after_center),
            (sites, threshold),
            ask,
            max_site_samples,
        )?,
    };
    config.center = center;
    Ok(config)
}

/// `total` − `spent`, nudged down until the two add up to at most `total`; refused (naming
/// `field`) when nothing is left.
fn remainder(total: f64, spent: f64, field: &str) -> Result<f64, ConfigError> {
    let mut rest = total - spent;
    while spent + rest > total {
        rest = rest.next_down();
    }
    if !(rest > 0.0) {
        return Err(ConfigError::invalid(
            field,
            "must leave part of ρ to the power rounds",
        ));
    }
    Ok(rest)
}

/// [`configure_study`]'s clip: the search on its share of the study's whole ρ (`rho`), the
/// power rounds on what is left of `available`.
fn configure_clipped(
    params: &FederatedPowerParams,
    ctx: &DataContext,
    (rho, available): (f64, &PrivacyTarget),
    (sites, threshold): (u32, u32),
    ask: ClipAsk,
    max_site_samples: u64,
) -> Result<FederatedPowerConfig, ConfigError> {
    let clipped = PowerClip::configure(
        ask,
        rho,
        &ctx.neighbours,
        ctx.d,
        sites,
        threshold,
        max_site_samples,
    )
    .and_then(|clip| {
        let power_target = PrivacyTarget {
            public_default: false,
            rho: remainder(available.rho, clip.cost().rho, "params.clip.share")?,
            delta: available.delta,
            epsilon: None,
        };
        let mut config = configure_for(params, ctx, &power_target, sites, threshold)?;
        config.clip = Some(clip);
        config.fraction_bits = choose_clip_fraction_bits(&config, params.fraction_bits, ctx)?;
        Ok(config)
    });
    match (clipped, ask) {
        (Ok(config), _) => Ok(config),
        (Err(ConfigError::Invalid { field, message }), ClipAsk::Auto)
            if field == "params.fraction_bits" || field == "params.clip" =>
        {
            let mut config = configure_for(params, ctx, available, sites, threshold)?;
            config.clip_declined = Some(format!(
                "clip \"auto\" ran no clip: {message} (a smaller max_site_samples makes room)"
            ));
            Ok(config)
        }
        (Err(e), _) => Err(e),
    }
}

/// One site's round (Nicolas et al. Alg. 2 line 6), encoded for secure aggregation: checks the
/// iterate `x` and takes Δ from it ([`received_sensitivity`]), computes `product(x)` = A_s·x,
/// clamps every entry to ±[`FederatedPowerConfig::signal_bound`], adds noise of sd m·Δ/√t
/// through `env` under [`RELEASE`], and encodes on 2^-f after checking that the encoding is
/// exact for this round's noise ([`encoding_is_exact`]). Nothing is drawn or computed from the
/// data before the iterate has passed its checks.
///
/// Clamping. For a record added or removed at this site, A_s·X changes by at most Δ in
/// Frobenius norm; clamping each entry to an interval is 1-Lipschitz per coordinate
/// (|clamp(a) − clamp(b)| ≤ |a − b|), so the clamped contribution changes by at most Δ too, and
/// the other sites' contributions do not change (a record lives at one site): the survivor sum
/// keeps sensitivity Δ. The clamp is a public constant, so neither the outcome nor any error
/// depends on how many records the site holds; when n_s ≤ n_max it changes nothing.
pub fn site_contribution(
    x: &Matrix,
    config: &FederatedPowerConfig,
    neighbours: &Neighbours,
    env: &mut RunEnv<'_>,
    product: impl FnOnce(&Matrix) -> Matrix,
) -> Result<Vec<u64>, RunError> {
    let d = x.nrows();
    let delta =
        received_sensitivity(x, config, neighbours, d).map_err(|e| RunError::Failed(e.to_string()))?;
    let sd = config.site_sd(delta);
    if !(sd > 0.0 && sd.is_finite()) {
        return Err(RunError::Failed(
            "noise scale is not a finite positive number".into(),
        ));
    }
    let bits = config.round_fraction_bits(neighbours);
    if !encoding_is_exact(bits, sd) {
        return Err(RunError::Failed(format!(
            "the round's {bits} fraction bits would round away part of this round's noise (sd {sd:.4e}); \
             refusing to send"
        )));
    }
    if !fixed_point::fits(config.total_bound(neighbours), bits) {
        return Err(RunError::Failed(format!(
            "the round's sum could wrap at {bits} fraction bits; refusing to send"
        )));
    }
    let fixed = FixedPoint::new(bits).map_err(|e| RunError::Failed(e.to_string()))?;
    let mut y = product(x);
    if y.shape() != (d, config.p) {
        return Err(RunError::Failed(
            "the site's product does not match the iterate".into(),
        ));
    }
    let clamp = config.signal_bound(neighbours);
    // NaN cannot arise from finite clipped records and a finite iterate; if it did, the
    // encoding below refuses it.
    y.iter_mut().for_each(|v| *v = v.clamp(-clamp, clamp));
    let released = env.gaussian_release(RELEASE, y, delta, sd)?;
    fixed
        .encode_all(released.as_slice(), config.entry_bound(neighbours))
        .map_err(|e| {
            RunError::Failed(format!(
                "this round's values do not fit the study's encoding: {e}"
            ))
        })
}

/// The public context of a study (no data): n is never known to the coordinator as a whole.
pub fn study_context(d: usize, neighbours: Neighbours) -> DataContext {
    DataContext {
        d,
        n: None,
        neighbours,
        public: false,
        sparse: false,
    }
}
