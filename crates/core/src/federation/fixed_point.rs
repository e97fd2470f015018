//! Fixed-point encoding of a site's update over Z_{2^64} (docs/design/federation.md, "Masking
//! round r" and "No wrap"): v ↦ round(v·2^f) as a two's-complement u64. Secure aggregation adds
//! encodings modulo 2^64 (Bonawitz et al. 2017 work over Z_R), which decodes to the true sum as
//! long as |sum|·2^f < 2^63; the study keeps a margin and requires S·bound·2^f < 2^62 ([`fits`]).
//!
//! Errors never quote the value that was refused: it is private data.

/// Largest number of fraction bits: an f64 has a 53-bit significand.
pub const MAX_FRACTION_BITS: u32 = 52;
/// Exponent of the no-wrap limit: totals stay below 2^62.
const LIMIT_EXPONENT: i32 = 62;

/// A value or parameter the encoding refuses.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FixedPointError {
    #[error("fraction bits must be in 0..={MAX_FRACTION_BITS}, got {0}")]
    FractionBits(u32),
    #[error(
        "the bound {bound} is not a finite non-negative number below 2^62 once scaled by 2^{fraction_bits}"
    )]
    Bound { bound: f64, fraction_bits: u32 },
    #[error("a value is not a finite number")]
    NonFinite,
    #[error("a value exceeds the bound {bound} in absolute value")]
    OutOfBound { bound: f64 },
    #[error("entry {index}: {source}")]
    Entry {
        index: usize,
        #[source]
        source: Box<FixedPointError>,
    },
}

/// The encoding with scale 2^`fraction_bits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedPoint {
    fraction_bits: u32,
}

/// 2^e for |e| ≤ 1000 (exact: a power of two).
fn pow2(e: i32) -> f64 {
    2f64.powi(e.clamp(-1000, 1000))
}

impl FixedPoint {
    /// The encoding with `fraction_bits` ∈ 0..=52.
    pub fn new(fraction_bits: u32) -> Result<FixedPoint, FixedPointError> {
        if fraction_bits <= MAX_FRACTION_BITS {
            Ok(FixedPoint { fraction_bits })
        } else {
            Err(FixedPointError::FractionBits(fraction_bits))
        }
    }

    pub fn fraction_bits(&self) -> u32 {
        self.fraction_bits
    }

    /// 2^f.
    fn scale(&self) -> f64 {
        pow2(self.fraction_bits as i32)
    }

    /// round(v·2^f) in two's complement. Refuses a non-finite `v`, |v| > `bound`, and a bound
    /// that does not itself fit (`bound`·2^f ≥ 2^62).
    pub fn encode(&self, v: f64, bound: f64) -> Result<u64, FixedPointError> {
        if !fits(bound, self.fraction_bits) {
            return Err(FixedPointError::Bound {
                bound,
                fraction_bits: self.fraction_bits,
            });
        }
        if !v.is_finite() {
            return Err(FixedPointError::NonFinite);
        }
        if !(v.abs() <= bound) {
            return Err(FixedPointError::OutOfBound { bound });
        }
        // |v·2^f| ≤ bound·2^f < 2^62: the cast is exact after rounding.
        let scaled = (v * self.scale()).round() as i64;
        Ok(scaled as u64)
    }

    /// The value of a (possibly summed) word: (w as i64)/2^f.
    pub fn decode(&self, w: u64) -> f64 {
        (w as i64) as f64 / self.scale()
    }

    /// [`FixedPoint::encode`] of every value; the error names the first entry refused.
    pub fn encode_all(&self, values: &[f64], bound: f64) -> Result<Vec<u64>, FixedPointError> {
        values
            .iter()
            .enumerate()
            .map(|(index, &v)| {
                self.encode(v, bound).map_err(|source| FixedPointError::Entry {
                    index,
                    source: Box::new(source),
                })
            })
            .collect()
    }

    /// [`FixedPoint::decode`] of every word.
    pub fn decode_all(&self, words: &[u64]) -> Vec<f64> {
        words.iter().map(|&w| self.decode(w)).collect()
    }
}

/// Whether a total of magnitude at most `total_bound` encodes without wrapping with margin:
/// `total_bound` is finite, ≥ 0 and `total_bound`·2^f < 2^62. Computed as a comparison with
/// 2^(62−f), which cannot overflow.
pub fn fits(total_bound: f64, fraction_bits: u32) -> bool {
    if !(total_bound >= 0.0 && total_bound.is_finite()) {
        return false;
    }
    let exponent = i64::from(LIMIT_EXPONENT) - i64::from(fraction_bits);
    let limit = pow2(exponent.clamp(-1000, 1000) as i32);
    total_bound == 0.0 || total_bound < limit
}

/// The largest f ≤ min(`cap`, 52) with [`fits`]`(total_bound, f)`, if any (then
/// [`FixedPoint::new`] accepts it).
pub fn max_fraction_bits(total_bound: f64, cap: u32) -> Option<u32> {
    (0..=cap.min(MAX_FRACTION_BITS))
        .rev()
        .find(|&f| fits(total_bound, f))
}

/// Noise draws are range-checked at this many standard deviations (a Gaussian beyond 40σ has
/// probability below 1e-340, i.e. never in f64).
pub const NOISE_TAIL_SDS: f64 = 40.0;

/// Whether encoding a release whose noise has sd `sd` with `fraction_bits` is exact: the noise
/// is released on the grid h = 2^(⌊log₂ sd⌋ − 30) ([`crate::privacy::lattice::grid_for`]), every released value is an
/// integer multiple of h, and when 2^-f ≤ h (both powers of two) every such multiple is an
/// integer multiple of 2^-f, so round(v·2^f) = v·2^f and the encoding removes nothing.
pub fn encoding_is_exact(fraction_bits: u32, sd: f64) -> bool {
    let step = 2f64.powi(-(fraction_bits.min(1074) as i32));
    crate::privacy::lattice::grid_for(sd).is_ok_and(|h| step <= h)
}

#[cfg(test)]
#[path = "fixed_point_tests.rs"]
mod tests;
