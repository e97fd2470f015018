//! Correlation-assisted private estimation, CAPE (Imtiaz & Sarwate, Alg. 1; docs/design/cape.md):
//! the noise calibration, the correlated noise terms and the aggregation, shared by `cape_pca`
//! and `cape_agn` in both modes (a job simulating the sites, or a live study). Pure code.
//!
//! Every statistic is handled in *sum form*: site s releases a vector a_s (the packed upper
//! triangle of X_sᵀX_s, or of a third-moment tensor) whose change under one record of that site
//! has L2 norm ≤ Δ, the same Δ for every site (no 1/N_s). Site s sends
//!
//!   â_s = a_s + E_s + F_s + G_s                                   (Alg. 1 step 8)
//!
//! - E_s = Σ_{j≠s} z_sj with z_sj = −z_js iid N(0, v) per entry, expanded from a seed only
//!   sites s and j know (X25519 agreement; no noise generator, no third party), so Σ_s E_s = 0;
//! - F_s iid N(0, τ_f²), expanded from a seed the aggregator sends to site s only;
//! - G_s iid N(0, g), the site's own noise.
//!
//! All three are drawn as discrete Gaussians on one grid shared by every party, and the message
//! is h·(round(a_s/h) + E_s + F_s + G_s) ([`CapeLattice`]; `docs/design/noise.md`).
//!
//! The aggregator releases Σ_s (â_s − F_s) = Σ_s a_s + Σ_s G_s (Alg. 1 step 10 in sum form;
//! dividing by the public N is the paper's weighted average with μ_s = N_s/N, §III-A).
//!
//! **Calibration (our decision, docs/design/cape.md).** The paper sizes the terms so that each
//! message *alone* is private (τ_e² + τ_g² ≥ τ_s², eq. 2). The honest-but-curious aggregator
//! sees *all* messages, and they are correlated through the z_sj. Per entry, after removing the
//! known F_s, the noise vector (E_s + G_s)_s has covariance Σ = (Sv + g)·I − v·11ᵀ, and a
//! record of site s shifts coordinate s only. The Gaussian mechanism with correlated noise has
//! zCDP ρ = ½·Δ²·[Σ⁻¹]_ss, and by Sherman–Morrison
//!
//!   [Σ⁻¹]_ss = (g + v) / (g·(S·v + g)),   so   ρ_joint = (Δ²/2)·(g + v)/(g·(S·v + g)).
//!
//! With the paper's v = g = τ_c²/S this is 2S/(S+1) times the pooled ρ (up to twice the budget).
//! We fix v = κ·τ_c² (κ = `pair_ratio`, default 1) with τ_c² = Δ²/(2ρ) the pooled variance,
//! and solve ρ_joint = ρ for g: g² + (S·v − τ_c²)·g − τ_c²·v = 0. The released sum then has
//! noise variance S·g: 1.24·τ_c² for S = 3, κ = 1 (sd 1.11×), tending to τ_c² as κ grows (a
//! larger κ makes dropouts costlier, below), and ρ_joint = ρ exactly: the charge covers everything the aggregator sees, the
//! release included (post-processing). F_s has τ_f² = τ_c² − g, so that a coalition of the other
//! sites, who know E_s, still faces τ_c² (eq. 2's second constraint).
//!
//! **Dropouts** (the paper's §IV remark). A site that sends nothing leaves the survivors' pair
//! terms with it uncancelled: the sum carries extra noise of variance |U|·|D|·v. Nothing else is
//! done: each survivor's message has the distribution it always had, so the guarantee holds, and
//! the report says the noise fell back above the pooled level.

use std::collections::BTreeMap;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};

use crate::algorithms::{RunEnv, RunError};
use crate::linalg::Matrix;
use crate::privacy::lattice::{self, GaussianLattice, LatticeError};

/// A 32-byte pair or aggregator seed (the same array as a key-exchange seed in
/// `federation::crypto`; the numerical core names it here so it imports nothing from
/// `federation`).
pub type Seed = [u8; 32];

/// Default κ: the variance of each pair term z_sj as a multiple of the pooled variance τ_c².
pub const DEFAULT_PAIR_RATIO: f64 = 1.0;
/// Audit label of a site's own noise G_s.
pub const OWN_NOISE: &str = "cape_own_noise";

/// The calibrated noise of one CAPE release among `sites` sites (sum form, per entry).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapeNoise {
    pub sites: u32,
    /// The L2 sensitivity Δ of one site's statistic.
    pub sensitivity: f64,
    /// τ_c = Δ/sqrt(2ρ): the pooled (central) noise sd at the same ρ.
    pub pooled_sd: f64,
    /// sd of each pair term z_sj, sqrt(κ)·τ_c.
    pub pair_sd: f64,
    /// sd of the aggregator's term F_s.
    pub aggregator_sd: f64,
    /// sd of the site's own term G_s.
    pub own_sd: f64,
}

/// ρ_joint = (Δ²/2)·(g + v)/(g·(S·v + g)) (module docs), with v = pair_sd², g = own_sd².
pub fn joint_rho(sensitivity: f64, sites: u32, pair_sd: f64, own_sd: f64) -> f64 {
    let s = f64::from(sites);
    // Work in units of Δ² so that nothing overflows: v/Δ², g/Δ².
    let v = (pair_sd / sensitivity).powi(2);
    let g = (own_sd / sensitivity).powi(2);
    0.5 * (g + v) / (g * (s * v + g))
}

impl CapeNoise {
    /// Calibrates for zCDP `rho` against the aggregator's joint view, `sites` ≥ 2 sites,
    /// sensitivity Δ and pair ratio κ > 0. `None` when the numbers do not fit in floating point.
    pub fn calibrate(sensitivity: f64, rho: f64, sites: u32, pair_ratio: f64) -> Option<CapeNoise> {
        let ok = |x: f64| x.is_finite() && x > 0.0;
        if !(ok(sensitivity) && ok(rho) && ok(pair_ratio) && sites >= 2) {
            return None;
        }
        let s = f64::from(sites);
        // In units of Δ²: T = τ_c²/Δ² = 1/(2ρ), v = κT; g > 0 solves g² + (S·v − T)g − T·v = 0.
        let t = 1.0 / (2.0 * rho);
        let v = pair_ratio * t;
        let b = s * v - t;
        let root = (b * b + 4.0 * t * v).sqrt();
        // The positive root, written without cancellation for either sign of b.
        let mut g = if b > 0.0 {
            2.0 * t * v / (b + root)
        } else {
            (root - b) / 2.0
        };
        let pair_sd = v.sqrt() * sensitivity;
        // Round up until the cost formula, evaluated as charged, does not exceed ρ.
        let mut guard = 0;
        while joint_rho(sensitivity, sites, pair_sd, g.sqrt() * sensitivity) > rho {
            g *= 1.0 + 4.0 * f64::EPSILON;
            guard += 1;
            if guard > 1000 {
                return None;
            }
        }
        let mut noise = CapeNoise {
            sites,
            sensitivity,
            pooled_sd: t.sqrt() * sensitivity,
            pair_sd,
            aggregator_sd: (t - g).max(0.0).sqrt() * sensitivity,
            own_sd: g.sqrt() * sensitivity,
        };
        // Round F's sd up until F + G reaches τ_c² as evaluated (eq. 2's second constraint),
        // so that a site's check of it needs no slack either.
        let mut guard = 0;
        while !noise.coalition_covered() {
            noise.aggregator_sd = (noise.aggregator_sd * (1.0 + 4.0 * f64::EPSILON)).max(f64::MIN_POSITIVE);
            guard += 1;
            if guard > 1000 {
                return None;
            }
        }
        [noise.pooled_sd, noise.pair_sd, noise.own_sd]
            .iter()
            .all(|x| ok(*x))
            .then_some(noise)
    }

    /// Whether F_s + G_s has at least the pooled variance τ_c², evaluated in floating point
    /// exactly as a site evaluates it (a coalition of the other sites knows E_s; eq. 2).
    pub fn coalition_covered(&self) -> bool {
        self.aggregator_sd.powi(2) + self.own_sd.powi(2) >= self.pooled_sd.powi(2)
    }

    /// The zCDP cost this configuration charges every site: ρ_joint (module docs).
    pub fn cost(&self) -> f64 {
        joint_rho(self.sensitivity, self.sites, self.pair_sd, self.own_sd)
    }

    /// Noise sd per entry of the aggregate when `survivors` sites sent and `dropped` did not:
    /// sqrt(|U|·g + |U|·|D|·v).
    pub fn achieved_sd(&self, survivors: usize, dropped: usize) -> f64 {
        let u = survivors as f64;
        let d = dropped as f64;
        (u * self.own_sd.powi(2) + u * d * self.pair_sd.powi(2)).sqrt()
    }

    /// What the result says about the noise actually achieved.
    pub fn report(&self, survivors: Vec<u32>, dropped: Vec<u32>) -> CapeReport {
        let achieved = self.achieved_sd(survivors.len(), dropped.len());
        let conventional = (survivors.len() as f64).sqrt() * self.pooled_sd;
        let fallback = !dropped.is_empty();
        let note = if fallback {
            format!(
                "{} site(s) sent nothing: their pair terms did not cancel, so the aggregate carries noise sd {achieved:.4e} (pooled {:.4e}, conventional {conventional:.4e}); every site's guarantee is unchanged",
                dropped.len(),
                self.pooled_sd
            )
        } else {
            format!(
                "all {} sites sent: the correlated terms cancelled and the aggregate carries noise sd {achieved:.4e}, {:.3}× the pooled sd {:.4e} (conventional: {conventional:.4e})",
                survivors.len(),
                achieved / self.pooled_sd,
                self.pooled_sd
            )
        };
        CapeReport {
            sites: self.sites,
            survivors,
            dropped,
            noise_sd: achieved,
            pooled_noise_sd: self.pooled_sd,
            conventional_noise_sd: conventional,
            ratio_to_pooled: achieved / self.pooled_sd,
            fallback,
            note,
        }
    }
}

/// The public facts one stage of a live CAPE study is calibrated from. A site builds them
/// itself (its own Δ from the study's bounds, relation, d and model; the ρ its ledger is charged;
/// the roster it was given; κ from the study's terms) and the coordinator builds the same
/// ones, so both derive the same [`CapeNoise`] bit for bit ([`StageTerms::noise`]). A site sends
/// only what its own derivation gives; the coordinator's copy is compared with it
/// ([`check_offer`]) and only decides whether the site takes part (docs/design/cape.md, "What a
/// site checks").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StageTerms {
    /// Δ of this stage's statistic.
    pub sensitivity: f64,
    /// The stage's share of the ρ every site is charged for the whole study (the ledger's
    /// amount): ρ/stages for `cape_pca` (1) and `cape_agn` (2), exact since stages is a power of
    /// two; with a clip, [`super::cape_clip::CapeClip::shares`].
    pub share: f64,
    /// The roster's size S′.
    pub sites: u32,
    /// κ, the study's pair ratio.
    pub pair_ratio: f64,
}

impl StageTerms {
    /// This stage's share of the charge.
    pub fn share(&self) -> f64 {
        self.share
    }

    /// The stage's noise: [`CapeNoise::calibrate`] at the share, whose cost as evaluated is ≤
    /// the share (rounded up, never down). `None` when the terms do not calibrate.
    pub fn noise(&self) -> Option<CapeNoise> {
        if !(self.share > 0.0 && self.share.is_finite()) {
            return None;
        }
        CapeNoise::calibrate(self.sensitivity, self.share, self.sites, self.pair_ratio)
    }
}

/// Relative tolerance on each sd of the coordinator's offer against a site's own derivation.
/// An honest coordinator evaluates the same function of the same public numbers with +, −, ×,
/// ÷ and √ only (all correctly rounded in IEEE 754), so its values are equal bit for bit; a
/// coordinator built differently (fused multiply–add, another evaluation order) could differ by
/// a few ulps (~10⁻¹⁵). 10⁻⁹ leaves a million-fold room for that and is still far below any
/// change that matters: the site never uses the offered values (its own are at least as
/// noisy as charged), so the tolerance guards the protocol, not the guarantee. What is drawn
/// (grid and integer variances) must agree exactly, or the aggregator's F and the pair terms
/// would not cancel.
pub const OFFER_TOLERANCE: f64 = 1e-9;

/// A site's check before it sends (`src/protocols/cape/site.rs`): `own` is its derivation from
/// [`StageTerms`], `offered` the coordinator's, `share` the stage's share of the charge and
/// `len` the length of the lattice release (the D-dimensional tensor in `cape_agn` stage 2).
///
/// - `own` costs at most `share` against the joint view (no slack: ρ_joint evaluated as
///   charged, module docs) and F + G ≥ τ_c²;
/// - `offered` is for the same roster size, each of its sds and Δ is within
///   [`OFFER_TOLERANCE`] of `own`'s, and both build the same lattice (grid, widening, integer
///   variances).
///
/// The messages quote only public numbers.
pub fn check_offer(offered: &CapeNoise, own: &CapeNoise, share: f64, len: usize) -> Result<(), String> {
    let cost = own.cost();
    if !(cost <= share) {
        return Err(format!(
            "this site's own calibration would cost ρ = {cost:e}, more than the stage's share ρ = {share:e}"
        ));
    }
    if !own.coalition_covered() {
        return Err("this site's own aggregator and own noise together are below the pooled level".into());
    }
    if offered.sites != own.sites {
        return Err(format!(
            "the noise is calibrated for {} sites but the roster has {}",
            offered.sites, own.sites
        ));
    }
    let fields = [
        ("sensitivity", offered.sensitivity, own.sensitivity),
        ("pooled_sd", offered.pooled_sd, own.pooled_sd),
        ("pair_sd", offered.pair_sd, own.pair_sd),
        ("aggregator_sd", offered.aggregator_sd, own.aggregator_sd),
        ("own_sd", offered.own_sd, own.own_sd),
    ];
    for (name, theirs, mine) in fields {
        let close = (theirs - mine).abs() <= OFFER_TOLERANCE * mine.abs();
        if !close {
            return Err(format!(
                "the coordinator's {name} = {theirs:e} differs from this site's derivation {mine:e} from the study's public terms"
            ));
        }
    }
    let mine = CapeLattice::new(own, len).map_err(|e| e.to_string())?;
    let theirs = CapeLattice::new(offered, len).map_err(|e| format!("the coordinator's noise: {e}"))?;
    if mine != theirs {
        return Err("the coordinator's noise puts the release on another lattice (grid or integer variances) than this site's derivation".into());
    }
    Ok(())
}

/// The noise report of a CAPE run, returned with the result (public: it depends only on the
/// calibration and on which sites sent). Units: per entry of the summed statistic Σ_s a_s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapeReport {
    pub sites: u32,
    pub survivors: Vec<u32>,
    pub dropped: Vec<u32>,
    /// Noise sd per entry of the aggregate actually achieved.
    pub noise_sd: f64,
    /// The pooled-data (central) noise sd at the same ρ.
    pub pooled_noise_sd: f64,
    /// The conventional scheme's sd (each survivor adds its own N(0, τ_c²)).
    pub conventional_noise_sd: f64,
    pub ratio_to_pooled: f64,
    /// True when a dropout left pair terms uncancelled.
    pub fallback: bool,
    pub note: String,
}

/// The grid every CAPE message lives on, and the three noise terms as discrete Gaussians on it
/// (`docs/design/noise.md`, "CAPE"). Everything is a function of the public [`CapeNoise`] and
/// the statistic's length, so every site and the aggregator build the same lattice.
///
/// - The grid h is that of the pooled sd τ_c (a power of two 2³⁰ below it,
///   [`lattice::grid_for`]); the pair and own sds are within a factor √S or so of τ_c, so each
///   term still has σ/h ≳ 2²⁵ and its discrete Gaussian is as fine-grained as needed.
/// - Rounding the statistic to the grid moves it by at most √len·h/2 per site, so a neighbour
///   pair differs by at most Δ + √len·h on the grid. All three sds are widened by the same
///   factor 1 + √len·h/Δ; ρ_joint depends only on the ratios sd/Δ, so the widened noise at
///   sensitivity Δ + √len·h costs exactly the calibrated ρ_joint.
/// - Each term is an integer vector: pair terms cancel exactly in integers, and the message
///   h·(round(a/h) + E + F + G) carries nothing below the grid.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CapeLattice {
    grid: f64,
    pair: GaussianLattice,
    aggregator: Option<GaussianLattice>,
    own: GaussianLattice,
}

impl CapeLattice {
    pub fn new(noise: &CapeNoise, len: usize) -> Result<Self, LatticeError> {
        let positive = |sd: f64| sd > 0.0 && sd.is_finite();
        let grid = lattice::grid_for(noise.pooled_sd)?;
        let valid = noise.sensitivity > 0.0 && noise.sensitivity.is_finite();
        if !valid {
            return Err(LatticeError::Sensitivity(noise.sensitivity));
        }
        let widen = 1.0 + (len.max(1) as f64).sqrt() * grid / noise.sensitivity;
        let aggregator = if positive(noise.aggregator_sd) {
            Some(GaussianLattice::on_grid(noise.aggregator_sd * widen, grid)?)
        } else {
            None
        };
        Ok(Self {
            grid,
            pair: GaussianLattice::on_grid(noise.pair_sd * widen, grid)?,
            aggregator,
            own: GaussianLattice::on_grid(noise.own_sd * widen, grid)?,
        })
    }

    pub fn grid(&self) -> f64 {
        self.grid
    }

    /// The sd of the pair term actually drawn (≥ the calibrated `pair_sd`).
    pub fn pair_sd(&self) -> f64 {
        self.pair.sd()
    }

    /// The sd of the site's own term actually drawn (≥ the calibrated `own_sd`).
    pub fn own_sd(&self) -> f64 {
        self.own.sd()
    }

    /// The aggregator's term F_s (as values h·F) expanded from its seed.
    pub fn aggregator_term(&self, seed: &Seed, len: usize) -> Vec<f64> {
        match &self.aggregator {
            Some(lattice) => expand(seed, len, lattice)
                .into_iter()
                .map(|z| z as f64 * self.grid)
                .collect(),
            None => vec![0.0; len],
        }
    }
}

/// `len` integer draws from `lattice`'s discrete Gaussian, driven by ChaCha20 keyed by `seed`.
/// The sampler uses integer arithmetic only, so two sites, or a site and the aggregator, expand
/// the same seed to exactly the same integers on every machine.
pub fn expand(seed: &Seed, len: usize, lattice: &GaussianLattice) -> Vec<i128> {
    let mut prg = ChaCha20Rng::from_seed(*seed);
    (0..len).map(|_| lattice.sample(&mut prg)).collect()
}

/// E_s = Σ_{j≠s} z_sj with z_sj = +PRG(seed_sj) when s < j and −PRG(seed_sj) when s > j, so
/// z_sj = −z_js and Σ_s E_s = 0 exactly (integers). `pair_seeds` holds (j, seed_sj) for every
/// other site j.
pub fn zero_sum_noise(me: u32, pair_seeds: &[(u32, Seed)], len: usize, lattice: &CapeLattice) -> Vec<i128> {
    let mut e = vec![0i128; len];
    for (j, seed) in pair_seeds {
        let sign = if me < *j { 1 } else { -1 };
        for (acc, z) in e.iter_mut().zip(expand(seed, len, &lattice.pair)) {
            *acc += sign * z;
        }
    }
    e
}

/// Site s's message â_s = a_s + E_s + F_s + G_s (Alg. 1 step 8), on the grid:
/// h·(round(a_s/h) + E + F + G). G_s is drawn through `env` under [`OWN_NOISE`].
pub fn site_release(
    statistic: &[f64],
    me: u32,
    pair_seeds: &[(u32, Seed)],
    aggregator_seed: &Seed,
    noise: &CapeNoise,
    env: &mut RunEnv<'_>,
) -> Result<Vec<f64>, RunError> {
    let len = statistic.len();
    let lattice =
        CapeLattice::new(noise, len).map_err(|e| RunError::Failed(format!("CAPE noise calibration: {e}")))?;
    let h = lattice.grid;
    let e = zero_sum_noise(me, pair_seeds, len, &lattice);
    let f = match &lattice.aggregator {
        Some(agg) => expand(aggregator_seed, len, agg),
        None => vec![0; len],
    };
    let g = env.lattice_gaussian_noise(OWN_NOISE, &lattice.own, len);
    Ok(statistic
        .iter()
        .zip(e)
        .zip(f)
        .zip(g)
        .map(|(((a, e), f), g)| lattice::release_value(lattice::to_grid(*a, h), e + f + g, h))
        .collect())
}

/// The aggregator's sum Σ_{s∈U} (â_s − F_s) over the messages that arrived (Alg. 1 step 10).
pub fn aggregate(
    releases: &BTreeMap<u32, Vec<f64>>,
    aggregator_seeds: &BTreeMap<u32, Seed>,
    len: usize,
    noise: &CapeNoise,
) -> Result<Vec<f64>, String> {
    let lattice = CapeLattice::new(noise, len).map_err(|e| e.to_string())?;
    let mut sum = vec![0.0; len];
    for (site, release) in releases {
        if release.len() != len {
            return Err(format!(
                "site {site}'s release has {} entries, not {len}",
                release.len()
            ));
        }
        let seed = aggregator_seeds
            .get(site)
            .ok_or_else(|| format!("no aggregator seed for site {site}"))?;
        let f = lattice.aggregator_term(seed, len);
        for ((acc, a), f) in sum.iter_mut().zip(release).zip(f) {
            *acc += a - f;
        }
    }
    if sum.iter().all(|v| v.is_finite()) {
        Ok(sum)
    } else {
        Err("numerical overflow in the aggregate".into())
    }
}

/// A fresh 32-byte seed from `rng`.
pub fn fresh_seed(rng: &mut dyn RngCore) -> Seed {
    let mut seed = [0u8; 32];
    rng.fill_bytes(&mut seed);
    seed
}

/// The upper triangle of a symmetric d×d matrix, diagonal included, column by column (the
/// order of [`crate::privacy::noise::gaussian_symmetric_release`]); d(d+1)/2 entries.
pub fn pack_upper(a: &Matrix) -> Vec<f64> {
    let d = a.nrows();
    let mut out = Vec::with_capacity(d * (d + 1) / 2);
    for j in 0..d {
        for i in 0..=j {
            out.push(a[(i, j)]);
        }
    }
    out
}

/// The symmetric d×d matrix whose upper triangle is `packed` ([`pack_upper`]'s order).
pub fn unpack_symmetric(packed: &[f64], d: usize) -> Result<Matrix, String> {
    if packed.len() != d * (d + 1) / 2 {
        return Err(format!(
            "a packed symmetric {d}×{d} matrix has {} entries, not {}",
            d * (d + 1) / 2,
            packed.len()
        ));
    }
    let mut a = Matrix::zeros(d, d);
    let mut next = packed.iter();
    for j in 0..d {
        for i in 0..=j {
            let v = *next.next().unwrap_or(&0.0);
            a[(i, j)] = v;
            a[(j, i)] = v;
        }
    }
    Ok(a)
}

#[cfg(test)]
#[path = "cape_noise_tests.rs"]
pub(crate) mod tests;
