//! t-of-n Shamir sharing of 32-byte secrets, as secure aggregation uses it
//! (docs/design/federation.md, "Shares"; Bonawitz et al. 2017 §4): a site shares its round
//! masking secrets and self-mask seeds, share x = the recipient's site index (complete graph)
//! or its position in the dealer's neighbourhood (SecAgg+).
//!
//! The field is the smallest that holds every x of the sharing ([`Field::for_count`]):
//! - GF(2⁸) (module `gf256` below) for up to 255 shares, 33-byte shares: the format live
//!   studies (at most 64 sites on the complete graph, x ≤ k ≤ 254 under SecAgg+) relay and
//!   store, unchanged. The field, polynomial, coefficient
//!   draws and share format are those of the crate `blahaj`, which dealt these shares before, so
//!   the same seed deals the same bytes (tested against `blahaj`, now a dev-dependency);
//! - GF(2¹⁶) (module `gf65536`) for 256 to 65 535 shares, 34-byte shares: the complete graph
//!   beyond 255 sites.
//!
//! Both fields deal and recover with the constant-time arithmetic of module `packed`. GF(2⁸)
//! coefficients come from a `chacha20` 0.10 ChaCha20 generator (the generator `blahaj` was fed)
//! seeded with 32 bytes from the caller's RNG, GF(2¹⁶) coefficients from a `rand_chacha`
//! ChaCha20 seeded the same way.

use rand::RngCore;
use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

use super::crypto::Seed;

/// The field a sharing lives in; every share of one sharing is in the same field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// GF(2⁸), x ∈ 1..=255, 33-byte shares (x, then y).
    Gf256,
    /// GF(2¹⁶), x ∈ 1..=65 535, 34-byte shares (x big-endian, then y).
    Gf65536,
}

impl Field {
    /// The smallest field with `count` distinct non-zero x-coordinates (none for 0 or more
    /// than 65 535).
    pub fn for_count(count: u32) -> Option<Field> {
        match count {
            1..=255 => Some(Field::Gf256),
            256..=65_535 => Some(Field::Gf65536),
            _ => None,
        }
    }

    /// Bytes of an encoded share: x (1 or 2 bytes) then the 32 bytes of y.
    pub const fn share_len(self) -> usize {
        match self {
            Field::Gf256 => 33,
            Field::Gf65536 => 34,
        }
    }

    /// The largest x of the field.
    const fn max_x(self) -> u16 {
        match self {
            Field::Gf256 => 255,
            Field::Gf65536 => u16::MAX,
        }
    }
}

/// A share of a 32-byte secret: the polynomials evaluated at x (x ≠ 0, x in the field).
/// Zeroized on drop.
#[derive(Clone, PartialEq, Eq, Zeroize, ZeroizeOnDrop)]
pub struct Share {
    #[zeroize(skip)]
    field: Field,
    x: u16,
    y: [u8; 32],
}

impl std::fmt::Debug for Share {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Share")
            .field("field", &self.field)
            .field("x", &self.x)
            .finish_non_exhaustive()
    }
}

/// A sharing request or a set of shares that cannot work. Never carries share bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShamirError {
    #[error("a share is 33 bytes (GF(2^8)) or 34 bytes (GF(2^16)), got {got}")]
    Length { got: usize },
    #[error("a share cannot have x = 0 (that point is the secret)")]
    ZeroX,
    #[error("threshold {threshold} must be at least 2 and at most the share count {count} (at most 65535)")]
    Threshold { threshold: u32, count: u32 },
    #[error("{distinct} distinct shares cannot recover a {threshold}-of-n secret")]
    TooFewShares { distinct: usize, threshold: u16 },
    #[error("two different shares have the same x = {x}")]
    Conflicting { x: u16 },
    #[error("the shares are not all in one field (GF(2^8) and GF(2^16) shares mixed)")]
    MixedFields,
}

impl Share {
    /// The field of the sharing this share belongs to.
    pub fn field(&self) -> Field {
        self.field
    }

    /// The x-coordinate (≥ 1).
    pub fn x(&self) -> u16 {
        self.x
    }

    /// x ‖ y: 33 bytes in GF(2⁸), 34 (x big-endian) in GF(2¹⁶).
    pub fn to_bytes(&self) -> Zeroizing<Vec<u8>> {
        let mut out = Zeroizing::new(Vec::with_capacity(self.field.share_len()));
        match self.field {
            // x ≤ 255 in GF(2⁸): every constructor checks it.
            Field::Gf256 => out.push(self.x.to_be_bytes()[1]),
            Field::Gf65536 => out.extend_from_slice(&self.x.to_be_bytes()),
        }
        out.extend_from_slice(&self.y);
        out
    }

    /// A share from its bytes, the field from the length (33: GF(2⁸), 34: GF(2¹⁶)); x = 0 is
    /// refused.
    pub fn from_bytes(bytes: &[u8]) -> Result<Share, ShamirError> {
        let (field, x) = match bytes.len() {
            33 => (Field::Gf256, u16::from(bytes[0])),
            34 => (Field::Gf65536, u16::from_be_bytes([bytes[0], bytes[1]])),
            got => return Err(ShamirError::Length { got }),
        };
        if x == 0 {
            return Err(ShamirError::ZeroX);
        }
        let mut y = [0u8; 32];
        y.copy_from_slice(&bytes[bytes.len() - 32..]);
        Ok(Share { field, x, y })
    }
}

/// Splits `secret` into `count` shares, x = 1..=count in order, any `threshold` of which recover
/// it (2 ≤ threshold ≤ count ≤ 65 535), in the field [`Field::for_count`] gives.
pub fn split(
    secret: &Seed,
    threshold: u16,
    count: u16,
    rng: &mut dyn RngCore,
) -> Result<Vec<Share>, ShamirError> {
    let field = Field::for_count(u32::from(count));
    let field = field.filter(|_| threshold >= 2 && threshold <= count);
    let Some(field) = field else {
        return Err(ShamirError::Threshold {
            threshold: u32::from(threshold),
            count: u32::from(count),
        });
    };
    let mut seed = Zeroizing::new([0u8; 32]);
    rng.fill_bytes(seed.as_mut());
    let shares = match field {
        Field::Gf256 => gf256::split(secret, threshold, count, &seed),
        Field::Gf65536 => gf65536::split(secret, threshold, count, &seed),
    };
    let shares = (1..=count)
        .zip(shares)
        .map(|(x, y)| Share { field, x, y: *y })
        .collect();
    Ok(shares)
}

/// Recovers a secret from at least `threshold` shares with distinct x, all of one field (the
/// first `threshold` distinct ones are used; a repeated identical share is ignored, two
/// different shares with the same x are an error).
pub fn combine(shares: &[Share], threshold: u16) -> Result<Seed, ShamirError> {
    if threshold < 2 {
        return Err(ShamirError::Threshold {
            threshold: u32::from(threshold),
            count: u32::try_from(shares.len()).unwrap_or(u32::MAX),
        });
    }
    let field = shares.first().map_or(Field::Gf256, |s| s.field);
    let mut chosen: Vec<&Share> = Vec::with_capacity(usize::from(threshold));
    for share in shares {
        if share.x == 0 {
            return Err(ShamirError::ZeroX);
        }
        if share.field != field || share.x > field.max_x() {
            return Err(ShamirError::MixedFields);
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
    let points: Vec<(u16, &[u8; 32])> = chosen.iter().map(|s| (s.x, &s.y)).collect();
    Ok(*match field {
        Field::Gf256 => gf256::interpolate_at_zero(&points),
        Field::Gf65536 => gf65536::interpolate_at_zero(&points),
    })
}

/// The arithmetic both fields share: 32 bytes packed into four words, multiplication of those
/// lanes by a public element (shift-and-add, given the field's multiplication by X), and the
/// log/exp tables of the public arithmetic (Lagrange coefficients at 0, interpolation).
///
/// Secret-dependent values (coefficients, y) are only multiplied by public values (x, Lagrange
/// coefficients) with shifts, masks and XOR whose control flow depends on the public factor
/// alone: no table is indexed by a secret. The log/exp tables serve only public arithmetic
/// (the Lagrange coefficients from the x-coordinates).
mod packed {
    use zeroize::{Zeroize, Zeroizing};

    /// 32 bytes as four little-endian words: 16 GF(2¹⁶) elements, four per word (element j in
    /// bits 16j..16j+16), or 32 GF(2⁸) elements, one per byte.
    pub(super) type Block = [u64; 4];

    /// `b` · `c` element-wise in the lanes `times_x` works on (GF(2¹⁶)'s or GF(2⁸)'s), for a
    /// public `c`: shift-and-add whose branches follow the bits of `c` only.
    pub(super) fn mul_public_by(b: &Block, c: u16, times_x: fn(u64) -> u64) -> Block {
        let mut r: Block = [0; 4];
        for bit in (0..16 - c.leading_zeros()).rev() {
            for w in &mut r {
                *w = times_x(*w);
            }
            if (c >> bit) & 1 == 1 {
                for (w, v) in r.iter_mut().zip(b) {
                    *w ^= v;
                }
            }
        }
        r
    }

    /// The polynomial with coefficients `coefficients` (constant term first, one block of
    /// lanes per degree) at the public `x`, in every lane, by Horner's rule:
    /// ((c_{t−1}·x + c_{t−2})·x + …)·x + c_0. The secret coefficients are only multiplied by
    /// `x` ([`mul_public_by`]) and added.
    pub(super) fn evaluate(coefficients: &[Block], x: u16, times_x: fn(u64) -> u64) -> Zeroizing<[u8; 32]> {
        let Some((last, lower)) = coefficients.split_last() else {
            return Zeroizing::new([0; 32]);
        };
        let mut acc = *last;
        for c in lower.iter().rev() {
            let mut product = mul_public_by(&acc, x, times_x);
            for ((a, p), c) in acc.iter_mut().zip(&product).zip(c) {
                *a = p ^ c;
            }
            product.zeroize();
        }
        let out = to_bytes(&acc);
        acc.zeroize();
        out
    }

    pub(super) fn to_block(bytes: &[u8; 32]) -> Block {
        std::array::from_fn(|w| {
            let mut word = [0u8; 8];
            word.copy_from_slice(&bytes[8 * w..8 * w + 8]);
            u64::from_le_bytes(word)
        })
    }

    pub(super) fn to_bytes(block: &Block) -> Zeroizing<[u8; 32]> {
        let mut out = Zeroizing::new([0u8; 32]);
        for (chunk, w) in out.chunks_exact_mut(8).zip(block) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        out
    }

    /// exp[i] = Xⁱ (i ∈ 0..2·order, so a sum of two logs needs no reduction) and log[Xⁱ] = i, for
    /// GF(2¹⁶) (order 65 535) and GF(2⁸) (order 255).
    pub(super) struct Tables {
        pub(super) exp: Vec<u16>,
        pub(super) log: Vec<u16>,
    }

    impl Tables {
        /// The tables of the field of `order` + 1 elements whose lane-0 multiplication by X is
        /// `times_x` (X must generate the unit group: the tests check it).
        pub(super) fn of(order: u64, times_x: fn(u64) -> u64) -> Tables {
            let mut exp = vec![0u16; 2 * order as usize];
            let mut log = vec![0u16; order as usize + 1];
            let mut value: u64 = 1;
            for (i, slot) in exp.iter_mut().enumerate() {
                *slot = value as u16;
                if (i as u64) < order {
                    log[value as usize] = i as u16;
                }
                value = times_x(value) & order;
            }
            Tables { exp, log }
        }

        /// The Lagrange coefficients at 0 of distinct non-zero `xs`:
        /// λ_i = Π_{j≠i} x_j / (x_i + x_j) (characteristic 2: − is +). Public arithmetic.
        pub(super) fn lagrange_at_zero(&self, xs: &[u16]) -> Vec<u16> {
            let order = self.log.len() as u64 - 1;
            let log = |v: u16| u64::from(self.log[usize::from(v)]);
            let all: u64 = xs.iter().map(|&x| log(x)).sum();
            xs.iter()
                .map(|&xi| {
                    let numerator = (all - log(xi)) % order;
                    let denominator = xs
                        .iter()
                        .filter(|&&xj| xj != xi)
                        .map(|&xj| log(xi ^ xj))
                        .sum::<u64>()
                        % order;
                    self.exp[((numerator + order - denominator) % order) as usize]
                })
                .collect()
        }

        /// The secret f(0) from points (x, f(x)) with distinct non-zero x, as many as the
        /// threshold, in the lanes `times_x` works on: Σ λ_i·y_i, the secret y only ever
        /// multiplied by the public λ ([`mul_public_by`]).
        pub(super) fn interpolate_at_zero(
            &self,
            points: &[(u16, &[u8; 32])],
            times_x: fn(u64) -> u64,
        ) -> Zeroizing<[u8; 32]> {
            let xs: Vec<u16> = points.iter().map(|(x, _)| *x).collect();
            let mut sum: Block = [0; 4];
            for ((_, y), lambda) in points.iter().zip(self.lagrange_at_zero(&xs)) {
                let mut y = to_block(y);
                let mut term = mul_public_by(&y, lambda, times_x);
                for (s, v) in sum.iter_mut().zip(&term) {
                    *s ^= v;
                }
                y.zeroize();
                term.zeroize();
            }
            let out = to_bytes(&sum);
            sum.zeroize();
            out
        }
    }
}

/// Shamir sharing over GF(2¹⁶) = GF(2)[X]/(X¹⁶ + X¹² + X³ + X + 1) (a primitive polynomial; the
/// tests check that X generates all 65 535 non-zero elements). A 32-byte secret is 16 field
/// elements (little-endian byte pairs), shared independently with independent uniform
/// coefficients, packed four to a `u64` so one operation works on four (module `packed`, which
/// keeps secrets out of table indices and branches).
mod gf65536 {
    use std::sync::LazyLock;

    use rand::{RngCore, SeedableRng};
    use rand_chacha::ChaCha20Rng;
    use zeroize::Zeroizing;

    use super::packed::{Block, Tables, evaluate, to_block};

    /// X¹⁶ ≡ X¹² + X³ + X + 1.
    pub(super) const REDUCTION: u64 = 0x100B;
    /// The order of the multiplicative group.
    const ORDER: u64 = 65_535;
    const LANE_LOW_BITS: u64 = 0x0001_0001_0001_0001;
    const LANE_SHIFTED: u64 = 0xFFFE_FFFE_FFFE_FFFE;

    /// Every element of the four lanes of `w` times X.
    pub(super) fn times_x(w: u64) -> u64 {
        let carry = (w >> 15) & LANE_LOW_BITS;
        ((w << 1) & LANE_SHIFTED) ^ (carry * REDUCTION)
    }

    /// `b` · `c` element-wise, for a public `c`: the branches follow the bits of `c` only
    /// (the tests' view of the arithmetic; dealing and recovery go through `evaluate`).
    #[cfg(test)]
    pub(super) fn mul_public(b: &Block, c: u16) -> Block {
        super::packed::mul_public_by(b, c, times_x)
    }

    pub(super) static TABLES: LazyLock<Tables> = LazyLock::new(|| Tables::of(ORDER, times_x));

    /// The 32-byte share values at x = 1..=`count` of a random polynomial of degree
    /// `threshold` − 1 per element with constant term `secret`, the other coefficients drawn
    /// from ChaCha20 seeded with `seed`.
    pub(super) fn split(
        secret: &[u8; 32],
        threshold: u16,
        count: u16,
        seed: &[u8; 32],
    ) -> Vec<Zeroizing<[u8; 32]>> {
        let mut rng = ChaCha20Rng::from_seed(*seed);
        let mut coefficients: Zeroizing<Vec<Block>> =
            Zeroizing::new(Vec::with_capacity(usize::from(threshold)));
        coefficients.push(to_block(secret));
        for _ in 1..threshold {
            coefficients.push(std::array::from_fn(|_| rng.next_u64()));
        }
        (1..=count).map(|x| evaluate(&coefficients, x, times_x)).collect()
    }

    /// The secret f(0) from points (x, f(x)) with distinct non-zero x, as many as the threshold.
    pub(super) fn interpolate_at_zero(points: &[(u16, &[u8; 32])]) -> Zeroizing<[u8; 32]> {
        TABLES.interpolate_at_zero(points, times_x)
    }
}

/// GF(2⁸) = GF(2)[X]/(X⁸ + X⁴ + X³ + X² + 1), the field and polynomial (0x11D) of the crate
/// `blahaj`, which dealt these shares until issue 36, with its draws of the coefficients, so a
/// seed deals the bytes `blahaj` dealt (a site that restarts compares the boxes it deals again
/// with those in its ledger bit for bit). Unlike `blahaj`, which multiplies through log/exp
/// tables indexed by secret bytes, dealing and recovery multiply secret bytes only by public
/// values with shifts and masks (module `packed`). Recovery computes the Lagrange coefficients
/// at 0 once per sharing from the public x (O(t²)) and each of the 32 bytes as a dot product
/// (O(t)), instead of `blahaj`'s interpolation of every byte (32·O(t²)): the SecAgg+
/// coordinator recovers one secret per survivor from t = O(log S) shares each
/// (docs/performance-secagg-plus.md).
mod gf256 {
    use std::sync::LazyLock;

    use chacha20_rng::ChaCha20Rng;
    use chacha20_rng::rand_core::{Rng as _, SeedableRng as _};
    use zeroize::Zeroizing;

    use super::packed::{Block, Tables, evaluate, to_block};

    /// X⁸ ≡ X⁴ + X³ + X² + 1.
    pub(super) const REDUCTION: u64 = 0x1D;
    const LANE_LOW_BITS: u64 = 0x0101_0101_0101_0101;

    /// Every element of the eight byte lanes of `w` times X.
    pub(super) fn times_x(w: u64) -> u64 {
        let carry = (w >> 7) & LANE_LOW_BITS;
        ((w << 1) & !LANE_LOW_BITS) ^ (carry * REDUCTION)
    }

    pub(super) static TABLES: LazyLock<Tables> = LazyLock::new(|| Tables::of(255, times_x));

    /// The 32-byte share values at x = 1..=`count` (≤ 255) of a random polynomial of degree
    /// `threshold` − 1 per byte with constant term `secret`, the other coefficients drawn from
    /// ChaCha20 (`chacha20` 0.10) seeded with `seed` in `blahaj` 0.7's order: byte by byte, and
    /// for each byte its coefficients from degree `threshold` − 1 down to 1, each the low byte
    /// of one 32-bit output (`rand` 0.10's uniform sampling of a full `u8` range).
    pub(super) fn split(
        secret: &[u8; 32],
        threshold: u16,
        count: u16,
        seed: &[u8; 32],
    ) -> Vec<Zeroizing<[u8; 32]>> {
        let mut rng = ChaCha20Rng::from_seed(*seed);
        let degree = usize::from(threshold).saturating_sub(1);
        // by_degree[d][j]: the coefficient of degree d of byte j; the draws do not depend on
        // the secret.
        let mut by_degree = Zeroizing::new(vec![[0u8; 32]; degree + 1]);
        by_degree[0] = *secret;
        for j in 0..32 {
            for d in (1..=degree).rev() {
                by_degree[d][j] = rng.next_u32() as u8;
            }
        }
        let coefficients: Zeroizing<Vec<Block>> = Zeroizing::new(by_degree.iter().map(to_block).collect());
        (1..=count).map(|x| evaluate(&coefficients, x, times_x)).collect()
    }

    /// The secret f(0) from points (x, f(x)) with distinct non-zero x, as many as the threshold.
    pub(super) fn interpolate_at_zero(points: &[(u16, &[u8; 32])]) -> Zeroizing<[u8; 32]> {
        TABLES.interpolate_at_zero(points, times_x)
    }
}

#[cfg(test)]
#[path = "shamir_tests.rs"]
mod tests;
