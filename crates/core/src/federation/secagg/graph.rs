//! SecAgg+ (Bell et al. 2020, "Secure Single-Server Aggregation with (Poly)Logarithmic
//! Overhead", CCS 2020): the public neighbourhood graph and the choice of its degree k and
//! per-neighbourhood Shamir threshold t (docs/design/federation.md, "SecAgg+").
//!
//! The graph is the Harary graph H(S, k) over the roster in a permuted order: site at position
//! p is the neighbour of the k sites at positions p ± 1..k/2 (mod S). The permutation is a
//! Fisher–Yates shuffle driven by ChaCha20 seeded with SHA-256 of a domain tag, the public seed,
//! k and the sorted roster, so every site recomputes the same graph ([`Neighbourhoods::derive`]).
//! k and t are a pure function of S and the stated corruption and dropout rates
//! ([`choose_parameters`]); a site refuses a graph whose k or t differ ([`GraphSpec::check`]).
//!
//! Shamir x-coordinates are positions within the dealer's neighbourhood (1..=k, at most 254),
//! not site indices, so site indices are not bounded by GF(2⁸).

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use sha2::{Digest, Sha256};

use super::SecAggError;

/// Statistical security parameter σ: a corrupt coalition learns more than the survivors' sum
/// with probability below 2^-σ (Bell et al. Thm 3.6; the same σ = 40 as the authors'
/// parameter finder).
pub const SECURITY_BITS: f64 = 40.0;
/// Correctness parameter η: the sum fails to reconstruct with probability below 2^-η.
pub const CORRECTNESS_BITS: f64 = 20.0;
/// Largest neighbourhood: shares are at x = 1..=k in GF(2⁸).
pub const MAX_DEGREE: u32 = 254;
/// Largest site index a SecAgg+ roster may use (the bench runs S = 1000).
pub const MAX_SPARSE_SITE_INDEX: u32 = 1 << 20;

/// The public description of a SecAgg+ graph: what the coordinator announces and every site
/// recomputes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GraphSpec {
    /// Public seed of the permutation.
    pub seed: [u8; 32],
    /// Stated fraction γ of corrupt sites (colluding with the coordinator).
    pub corruption_rate: f64,
    /// Stated fraction δ of sites that drop out.
    pub dropout_rate: f64,
    /// Neighbours per site k.
    pub degree: u32,
    /// Shares needed to recover a site's secret t.
    pub threshold: u32,
}

impl GraphSpec {
    /// The spec for `sites` sites with the parameters [`choose_parameters`] gives.
    pub fn new(
        seed: [u8; 32],
        sites: u32,
        corruption_rate: f64,
        dropout_rate: f64,
    ) -> Result<GraphSpec, SecAggError> {
        let (degree, threshold) = choose_parameters(sites, corruption_rate, dropout_rate)?;
        Ok(GraphSpec {
            seed,
            corruption_rate,
            dropout_rate,
            degree,
            threshold,
        })
    }

    /// Refuses a spec whose k or t are not the ones derived from `sites` and its rates.
    pub fn check(&self, sites: u32) -> Result<(), SecAggError> {
        let derived = choose_parameters(sites, self.corruption_rate, self.dropout_rate)?;
        if derived == (self.degree, self.threshold) {
            Ok(())
        } else {
            Err(SecAggError::GraphMismatch {
                expected: derived,
                got: (self.degree, self.threshold),
            })
        }
    }
}

/// The neighbourhoods of a roster under a [`GraphSpec`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbourhoods {
    degree: u32,
    threshold: u8,
    /// Sites in ring order.
    ring: Vec<u32>,
    /// Ring position of each site.
    position: BTreeMap<u32, usize>,
}

impl Neighbourhoods {
    /// The graph of `roster` (distinct site indices) under `spec`, after checking the spec's
    /// parameters ([`GraphSpec::check`]).
    pub fn derive(roster: &[u32], spec: &GraphSpec) -> Result<Neighbourhoods, SecAggError> {
        let sites = u32::try_from(roster.len()).unwrap_or(u32::MAX);
        spec.check(sites)?;
        let mut ring = roster.to_vec();
        ring.sort_unstable();
        let mut hash = Sha256::new();
        hash.update(b"privpca secagg+ graph v1");
        hash.update(spec.seed);
        hash.update(spec.degree.to_le_bytes());
        for site in &ring {
            hash.update(site.to_le_bytes());
        }
        let mut rng = ChaCha20Rng::from_seed(hash.finalize().into());
        for i in (1..ring.len()).rev() {
            let j = rng.random_range(0..=i);
            ring.swap(i, j);
        }
        let position = ring.iter().enumerate().map(|(p, &s)| (s, p)).collect();
        let threshold = u8::try_from(spec.threshold).map_err(|_| SecAggError::GraphMismatch {
            expected: (spec.degree, MAX_DEGREE),
            got: (spec.degree, spec.threshold),
        })?;
        Ok(Neighbourhoods {
            degree: spec.degree,
            threshold,
            ring,
            position,
        })
    }

    pub fn degree(&self) -> u32 {
        self.degree
    }

    /// The per-neighbourhood Shamir threshold t.
    pub fn threshold(&self) -> u8 {
        self.threshold
    }

    /// Whether every other site is a neighbour (k = S − 1).
    fn complete(&self) -> bool {
        self.degree as usize + 1 >= self.ring.len()
    }

    /// The x-coordinate of `holder`'s share of `dealer`'s secrets (1..=k), or `None` if they
    /// are not neighbours (or either is unknown). Forward offsets j = 1..=k/2 take x = j,
    /// backward offsets take x = k/2 + j; with k = S − 1 every forward offset j takes x = j.
    pub fn share_x(&self, dealer: u32, holder: u32) -> Option<u8> {
        let (&p, &q) = (self.position.get(&dealer)?, self.position.get(&holder)?);
        let s = self.ring.len();
        let forward = (q + s - p) % s;
        if forward == 0 {
            return None;
        }
        let half = self.degree as usize / 2;
        let x = if self.complete() || forward <= half {
            forward
        } else if s - forward <= half {
            half + (s - forward)
        } else {
            return None;
        };
        u8::try_from(x).ok()
    }

    /// The neighbours of `site`, in order of their x-coordinate (empty for an unknown site).
    pub fn neighbours(&self, site: u32) -> Vec<u32> {
        let Some(&p) = self.position.get(&site) else {
            return Vec::new();
        };
        let s = self.ring.len();
        let half = self.degree as usize / 2;
        if self.complete() {
            (1..s).map(|j| self.ring[(p + j) % s]).collect()
        } else {
            let forward = (1..=half).map(|j| self.ring[(p + j) % s]);
            let backward = (1..=half).map(|j| self.ring[(p + s - j) % s]);
            forward.chain(backward).collect()
        }
    }

    pub fn are_neighbours(&self, a: u32, b: u32) -> bool {
        self.share_x(a, b).is_some()
    }
}

/// ln n! for n = 0..=max, so that binomial coefficients cost O(1).
struct LnFactorials(Vec<f64>);

impl LnFactorials {
    fn up_to(max: u64) -> LnFactorials {
        let mut table = Vec::with_capacity(max as usize + 1);
        let mut acc = 0.0;
        table.push(0.0);
        for i in 1..=max {
            acc += (i as f64).ln();
            table.push(acc);
        }
        LnFactorials(table)
    }

    /// ln C(n, k) (−∞ when k > n).
    fn choose(&self, n: u64, k: u64) -> f64 {
        if k > n {
            return f64::NEG_INFINITY;
        }
        self.0[n as usize] - self.0[k as usize] - self.0[(n - k) as usize]
    }

    /// P[X = j] for j = 0..=draws, X hypergeometric: `draws` from `population` of which
    /// `marked` are marked.
    fn hypergeometric(&self, population: u64, marked: u64, draws: u64) -> Vec<f64> {
        let total = self.choose(population, draws);
        (0..=draws)
            .map(|j| {
                if j > marked || draws - j > population - marked {
                    0.0
                } else {
                    (self.choose(marked, j) + self.choose(population - marked, draws - j) - total).exp()
                }
            })
            .collect()
    }
}

/// ln of a union bound on the probability that H(S, k) under a uniform permutation is
/// disconnected once `bad` sites (corrupt or dropped) are removed: that needs two disjoint runs
/// of k/2 consecutive bad positions, i.e. k specific positions all bad; there are at most
/// S·(S − k − 1)/2 such pairs of runs, each all bad with probability C(bad, k)/C(S, k) (Bell et
/// al. §3.4's Harary analysis, as their parameter finder computes it).
fn ln_disconnected(ln: &LnFactorials, sites: u64, degree: u64, bad: u64) -> f64 {
    if degree > bad || degree + 1 >= sites {
        return f64::NEG_INFINITY;
    }
    let pairs = (sites as f64).ln() + ((sites - degree - 1) as f64).ln() - 2f64.ln();
    pairs + ln.choose(bad, degree) - ln.choose(sites, degree)
}

/// The neighbourhood size k and threshold t for `sites` sites, a corrupt fraction
/// `corruption_rate` (γ) and a dropout fraction `dropout_rate` (δ): the smallest even k
/// (or S − 1, every other site) such that, with σ split between two events and a union bound
/// over the S sites,
///
/// 1. the honest surviving sites stay connected (probability of failure < 2^-(σ+1)),
/// 2. no site has t or more corrupt neighbours, and no two disjoint groups of honest neighbours
///    can each bring a lying coordinator t shares (2t − k exceeds the corrupt neighbours) with
///    failure < 2^-(σ+1)/S per site,
/// 3. every site keeps at least t surviving neighbours (failure < 2^-η/S per site).
///
/// Rates must satisfy 0 ≤ γ, 0 ≤ δ and γ + 2δ ≤ 0.9 (Bell et al.'s semi-malicious regime).
pub fn choose_parameters(
    sites: u32,
    corruption_rate: f64,
    dropout_rate: f64,
) -> Result<(u32, u32), SecAggError> {
    let rates_ok =
        corruption_rate >= 0.0 && dropout_rate >= 0.0 && corruption_rate + 2.0 * dropout_rate <= 0.9;
    if !rates_ok {
        return Err(SecAggError::Rates(format!(
            "corruption rate {corruption_rate} and dropout rate {dropout_rate} must be ≥ 0 with γ + 2δ ≤ 0.9"
        )));
    }
    if sites < 3 {
        return Err(SecAggError::NoGraph { sites });
    }
    let s = u64::from(sites);
    // Counts round up, against the user (Bell et al.'s finder floors γS; at S = 10 and γ = 0.05
    // that would assume no corrupt site at all); the epsilon keeps 0.1·10 = 1.0000000000000002
    // from becoming 2.
    let corrupt = ((corruption_rate - 1e-12) * s as f64).ceil().max(0.0) as u64;
    let dropped = ((dropout_rate - 1e-12) * s as f64).ceil().max(0.0) as u64;
    let per_site_security = (-(SECURITY_BITS + 1.0)).exp2() / s as f64;
    let per_site_correctness = (-CORRECTNESS_BITS).exp2() / s as f64;
    let ln = LnFactorials::up_to(s);
    let even = (2..s - 1).step_by(2);
    for k in even.chain(std::iter::once(s - 1)) {
        if k > u64::from(MAX_DEGREE) {
            break;
        }
        if ln_disconnected(&ln, s, k, corrupt + dropped) >= (-(SECURITY_BITS + 1.0)) * 2f64.ln() {
            continue;
        }
        // Neighbours are k of the S − 1 other sites; all γS corrupt sites may be among them,
        // and at most ⌈δS⌉ of them drop.
        let corrupt_pmf = ln.hypergeometric(s - 1, corrupt.min(s - 1), k);
        let dropped_pmf = ln.hypergeometric(s - 1, dropped.min(s - 1), k);
        // c1: the least c with P[corrupt neighbours > c] ≤ per-site security (tails summed
        // from the top, so that probabilities near 2^-50 are not lost to cancellation).
        let mut c1 = k;
        let mut tail = 0.0;
        for c in (0..k).rev() {
            tail += corrupt_pmf[c as usize + 1];
            if tail > per_site_security {
                break;
            }
            c1 = c;
        }
        // t > (c1 + k)/2 and t > c1.
        let t = ((c1 + k) / 2 + 1).max(c1 + 1).max(2);
        if t > k {
            continue;
        }
        // Fewer than t survivors = more than k − t dropped neighbours.
        let fail: f64 = dropped_pmf.iter().skip((k - t + 1) as usize).sum();
        if fail <= per_site_correctness {
            return Ok((k as u32, t as u32));
        }
    }
    Err(SecAggError::NoGraph { sites })
}

#[cfg(test)]
#[path = "graph_tests.rs"]
mod tests;
