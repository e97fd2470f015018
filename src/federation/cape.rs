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

use super::crypto::Seed;
use crate::algorithms::RunEnv;
use crate::linalg::Matrix;

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
        let noise = CapeNoise {
            sites,
            sensitivity,
            pooled_sd: t.sqrt() * sensitivity,
            pair_sd,
            aggregator_sd: (t - g).max(0.0).sqrt() * sensitivity,
            own_sd: g.sqrt() * sensitivity,
        };
        [noise.pooled_sd, noise.pair_sd, noise.own_sd]
            .iter()
            .all(|x| ok(*x))
            .then_some(noise)
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

/// `len` iid N(0, sd²) values expanded from `seed`: ChaCha20 → 53-bit uniforms → Box–Muller
/// with `libm` (pure Rust, the same bits on every platform), so two sites, or a site and the
/// aggregator, expand the same seed to exactly the same numbers.
pub fn expand_gaussian(seed: &Seed, len: usize, sd: f64) -> Vec<f64> {
    let mut prg = ChaCha20Rng::from_seed(*seed);
    let mut uniform = move || ((prg.next_u64() >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64);
    let mut out = Vec::with_capacity(len + 1);
    while out.len() < len {
        let u1 = uniform();
        let u2 = uniform();
        let r = libm::sqrt(-2.0 * libm::log(u1));
        let angle = 2.0 * std::f64::consts::PI * u2;
        out.push(sd * r * libm::cos(angle));
        out.push(sd * r * libm::sin(angle));
    }
    out.truncate(len);
    out
}

/// E_s = Σ_{j≠s} z_sj with z_sj = +PRG(seed_sj) when s < j and −PRG(seed_sj) when s > j, so
/// z_sj = −z_js and Σ_s E_s = 0. `pair_seeds` holds (j, seed_sj) for every other site j.
pub fn zero_sum_noise(me: u32, pair_seeds: &[(u32, Seed)], len: usize, pair_sd: f64) -> Vec<f64> {
    let mut e = vec![0.0; len];
    for (j, seed) in pair_seeds {
        let sign = if me < *j { 1.0 } else { -1.0 };
        for (acc, z) in e.iter_mut().zip(expand_gaussian(seed, len, pair_sd)) {
            *acc += sign * z;
        }
    }
    e
}

/// Site s's message â_s = a_s + E_s + F_s + G_s (Alg. 1 step 8). G_s is drawn through `env`
/// under [`OWN_NOISE`].
pub fn site_release(
    statistic: &[f64],
    me: u32,
    pair_seeds: &[(u32, Seed)],
    aggregator_seed: &Seed,
    noise: &CapeNoise,
    env: &mut RunEnv<'_>,
) -> Vec<f64> {
    let len = statistic.len();
    let e = zero_sum_noise(me, pair_seeds, len, noise.pair_sd);
    let f = expand_gaussian(aggregator_seed, len, noise.aggregator_sd);
    let g = env.gaussian_noise(OWN_NOISE, len, 1, noise.own_sd);
    statistic
        .iter()
        .zip(e)
        .zip(f)
        .zip(g.iter())
        .map(|(((a, e), f), g)| a + e + f + g)
        .collect()
}

/// The aggregator's sum Σ_{s∈U} (â_s − F_s) over the messages that arrived (Alg. 1 step 10).
pub fn aggregate(
    releases: &BTreeMap<u32, Vec<f64>>,
    aggregator_seeds: &BTreeMap<u32, Seed>,
    len: usize,
    noise: &CapeNoise,
) -> Result<Vec<f64>, String> {
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
        let f = expand_gaussian(seed, len, noise.aggregator_sd);
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
/// order of [`crate::privacy::noise::gaussian_symmetric`]); d(d+1)/2 entries.
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
#[path = "cape_tests.rs"]
mod tests;
