//! t-of-n Shamir sharing of 32-byte secrets over GF(2⁸) (crate `blahaj`), as secure aggregation
//! uses it (docs/design/federation.md, "Shares"; Bonawitz et al. 2017 §4): a site shares its
//! round masking secrets and self-mask seeds, share x = the recipient's site index.
//!
//! `blahaj` draws its polynomial coefficients from a `rand` 0.10 `CryptoRng`; we seed a
//! ChaCha20 generator of that version with 32 bytes from the caller's RNG.

use blahaj::Sharks;
use chacha20_rng::ChaCha20Rng as DealerRng;
use chacha20_rng::rand_core::SeedableRng as _;
use rand::RngCore;
use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

use super::crypto::Seed;

/// Bytes of an encoded share: x then the 32 bytes of y.
pub const SHARE_LEN: usize = 33;

/// A share of a 32-byte secret: the polynomials evaluated at x (x ≠ 0). Zeroized on drop.
#[derive(Clone, PartialEq, Eq, Zeroize, ZeroizeOnDrop)]
pub struct Share {
    pub x: u8,
    pub y: [u8; 32],
}

impl std::fmt::Debug for Share {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Share")
            .field("x", &self.x)
            .finish_non_exhaustive()
    }
}

/// A sharing request or a set of shares that cannot work. Never carries share bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShamirError {
    #[error("a share is {SHARE_LEN} bytes, got {got}")]
    Length { got: usize },
    #[error("a share cannot have x = 0 (that point is the secret)")]
    ZeroX,
    #[error("threshold {threshold} must be at least 2 and at most the share count {count}")]
    Threshold { threshold: u8, count: u8 },
    #[error("{distinct} distinct shares cannot recover a {threshold}-of-n secret")]
    TooFewShares { distinct: usize, threshold: u8 },
    #[error("two different shares have the same x = {x}")]
    Conflicting { x: u8 },
    #[error("the dealer produced share x = {got} where x = {expected} was expected")]
    DealerOrder { expected: u8, got: u8 },
    #[error("share recovery failed: {0}")]
    Recover(String),
}

impl Share {
    /// x ‖ y (33 bytes).
    pub fn to_bytes(&self) -> [u8; SHARE_LEN] {
        let mut out = [0u8; SHARE_LEN];
        out[0] = self.x;
        out[1..].copy_from_slice(&self.y);
        out
    }

    /// A share from its 33 bytes; x = 0 is refused.
    pub fn from_bytes(bytes: &[u8]) -> Result<Share, ShamirError> {
        if bytes.len() != SHARE_LEN {
            return Err(ShamirError::Length { got: bytes.len() });
        }
        if bytes[0] == 0 {
            return Err(ShamirError::ZeroX);
        }
        let mut y = [0u8; 32];
        y.copy_from_slice(&bytes[1..]);
        Ok(Share { x: bytes[0], y })
    }
}

/// Splits `secret` into `count` shares, x = 1..=count in order, any `threshold` of which recover
/// it (2 ≤ threshold ≤ count).
pub fn split(
    secret: &Seed,
    threshold: u8,
    count: u8,
    rng: &mut dyn RngCore,
) -> Result<Vec<Share>, ShamirError> {
    if !(threshold >= 2 && threshold <= count) {
        return Err(ShamirError::Threshold { threshold, count });
    }
    let mut seed = Zeroizing::new([0u8; 32]);
    rng.fill_bytes(seed.as_mut());
    let mut dealer_rng = DealerRng::from_seed(*seed);
    let mut shares = Vec::with_capacity(usize::from(count));
    for (expected, share) in (1..=count).zip(Sharks(threshold).dealer_rng(secret, &mut dealer_rng)) {
        let bytes = Zeroizing::new(Vec::<u8>::from(&share));
        let share = Share::from_bytes(&bytes)?;
        // blahaj evaluates at x = 1, 2, 3, …; check rather than assume.
        if share.x != expected {
            return Err(ShamirError::DealerOrder {
                expected,
                got: share.x,
            });
        }
        shares.push(share);
    }
    Ok(shares)
}

/// Recovers a secret from at least `threshold` shares with distinct x (the first `threshold`
/// distinct ones are used; a repeated identical share is ignored, two different shares with the
/// same x are an error).
pub fn combine(shares: &[Share], threshold: u8) -> Result<Seed, ShamirError> {
    if threshold < 2 {
        return Err(ShamirError::Threshold {
            threshold,
            count: u8::try_from(shares.len()).unwrap_or(u8::MAX),
        });
    }
    let mut chosen: Vec<&Share> = Vec::with_capacity(usize::from(threshold));
    for share in shares {
        if share.x == 0 {
            return Err(ShamirError::ZeroX);
        }
        match chosen.iter().find(|c| c.x == share.x) {
            Some(same) if *same == share => {}
            Some(_) => return Err(ShamirError::Conflicting { x: share.x }),
            None if chosen.len() < usize::from(threshold) => chosen.push(share),
            None => {}
        }
    }
    if chosen.len() < usize::from(threshold) {
        return Err(ShamirError::TooFewShares {
            distinct: chosen.len(),
            threshold,
        });
    }
    let mut points = Vec::with_capacity(chosen.len());
    for share in chosen {
        let bytes = Zeroizing::new(share.to_bytes());
        let point = blahaj::Share::try_from(&bytes[..]).map_err(|e| ShamirError::Recover(e.to_string()))?;
        points.push(point);
    }
    let secret = Zeroizing::new(
        Sharks(threshold)
            .recover(&points)
            .map_err(|e| ShamirError::Recover(e.to_string()))?,
    );
    let mut out = [0u8; 32];
    if secret.len() == out.len() {
        out.copy_from_slice(&secret);
        Ok(out)
    } else {
        Err(ShamirError::Recover(format!(
            "recovered {} bytes, not 32",
            secret.len()
        )))
    }
}

#[cfg(test)]
#[path = "shamir_tests.rs"]
mod tests;
