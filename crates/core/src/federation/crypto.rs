//! Cryptographic primitives of secure aggregation (docs/design/federation.md, after Bonawitz et
//! al. 2017, "Practical Secure Aggregation for Privacy-Preserving Machine Learning"):
//! X25519 key pairs and agreement, HKDF-SHA256 derivation of the pairwise and self mask seeds,
//! the ChaCha20 PRG that expands a seed into u64 mask words, and the ChaCha20-Poly1305 boxes
//! that carry Shamir shares between sites through the coordinator.
//!
//! Every derivation binds the study id, and the pair seeds the round and both indices, so masks
//! of different studies, rounds or pairs are independent.

use chacha20poly1305::aead::{Aead, Payload};
use chacha20poly1305::{ChaCha20Poly1305, KeyInit, Nonce};
use hkdf::Hkdf;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use sha2::Sha256;
use uuid::Uuid;
use x25519_dalek::{PublicKey, StaticSecret};
use zeroize::{Zeroize, Zeroizing};

/// A 32-byte PRG seed (or any 32-byte secret handed between the primitives).
pub type Seed = [u8; 32];

/// HKDF salt of every derivation (the protocol version).
const SALT: &[u8] = b"privpca-secagg-v1";
/// ChaCha20-Poly1305 nonce length.
const NONCE_LEN: usize = 12;
/// Poly1305 tag length.
const TAG_LEN: usize = 16;

/// A failure of a primitive. Messages never contain key or share material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CryptoError {
    #[error("key agreement gave an all-zero shared secret (the peer's public key has small order)")]
    NonContributory,
    #[error("key derivation failed")]
    Kdf,
    #[error("sealing a share box failed")]
    Seal,
    #[error("a share box of {got} bytes is shorter than nonce and tag ({min} bytes)")]
    Truncated { got: usize, min: usize },
    #[error("a share box failed authentication (tampered, misaddressed or sealed with another key)")]
    Open,
}

/// An X25519 key pair. The secret is zeroized on drop (`x25519-dalek`'s `zeroize` feature).
pub struct KeyPair {
    secret: StaticSecret,
    public: PublicKey,
}

impl KeyPair {
    /// A fresh key pair from 32 bytes of `rng`.
    pub fn generate(rng: &mut dyn RngCore) -> KeyPair {
        let mut bytes = Zeroizing::new([0u8; 32]);
        rng.fill_bytes(bytes.as_mut());
        KeyPair::from_secret(*bytes)
    }

    /// The key pair of a known secret (e.g. one reconstructed from Shamir shares).
    pub fn from_secret(mut secret: [u8; 32]) -> KeyPair {
        let secret_key = StaticSecret::from(secret);
        secret.zeroize();
        let public = PublicKey::from(&secret_key);
        KeyPair {
            secret: secret_key,
            public,
        }
    }

    /// The secret scalar bytes (the caller should zeroize its copy).
    pub fn secret_bytes(&self) -> [u8; 32] {
        self.secret.to_bytes()
    }

    /// The public key bytes.
    pub fn public(&self) -> [u8; 32] {
        self.public.to_bytes()
    }
}

impl std::fmt::Debug for KeyPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyPair")
            .field("public", &self.public.to_bytes())
            .finish_non_exhaustive()
    }
}

/// X25519 agreement of `secret` with `peer_public`. A non-contributory result (all zero, from a
/// small-order public key) is refused: it would make the derived masks public.
pub fn agree(secret: &[u8; 32], peer_public: &[u8; 32]) -> Result<[u8; 32], CryptoError> {
    let secret = StaticSecret::from(*secret);
    let shared = secret.diffie_hellman(&PublicKey::from(*peer_public));
    if shared.was_contributory() {
        Ok(shared.to_bytes())
    } else {
        Err(CryptoError::NonContributory)
    }
}

/// HKDF-SHA256 of `ikm` with the protocol salt and info = `label` ‖ study ‖ `fields` (u32 BE).
fn derive(ikm: &[u8; 32], label: &[u8], study: Uuid, fields: &[u32]) -> Result<Seed, CryptoError> {
    let mut info = Vec::with_capacity(label.len() + 16 + 4 * fields.len());
    info.extend_from_slice(label);
    info.extend_from_slice(study.as_bytes());
    for field in fields {
        info.extend_from_slice(&field.to_be_bytes());
    }
    let mut okm = [0u8; 32];
    Hkdf::<Sha256>::new(Some(SALT), ikm)
        .expand(&info, &mut okm)
        .map_err(|_| CryptoError::Kdf)?;
    Ok(okm)
}

/// The pair-mask seed k_{ab,r} from the X25519 agreement of a's and b's round-r masking keys.
/// Symmetric in `a` and `b`, so both ends derive the same seed.
pub fn pair_seed(shared: &[u8; 32], study: Uuid, round: u32, a: u32, b: u32) -> Result<Seed, CryptoError> {
    derive(shared, b"pair-mask", study, &[round, a.min(b), a.max(b)])
}

/// The CAPE pair-noise seed of sites `a` and `b` for protocol stage `stage`, from the X25519
/// agreement of their CAPE keys (docs/design/cape.md). Symmetric in `a` and `b`; a distinct
/// label keeps it independent of every secure-aggregation mask.
pub fn cape_pair_seed(
    shared: &[u8; 32],
    study: Uuid,
    stage: u32,
    a: u32,
    b: u32,
) -> Result<Seed, CryptoError> {
    derive(shared, b"cape-pair-noise", study, &[stage, a.min(b), a.max(b)])
}

/// The self-mask PRG seed of `site` in `round`, from its secret seed b_{site,round}.
pub fn self_seed(b: &Seed, study: Uuid, round: u32, site: u32) -> Result<Seed, CryptoError> {
    derive(b, b"self-mask", study, &[round, site])
}

/// Adds (or, with `negate`, subtracts) PRG(`seed`) to `acc`, word by word, modulo 2^64. The PRG
/// is ChaCha20 (`rand_chacha::ChaCha20Rng::from_seed`), one `next_u64` per word, in order.
///
/// The stream is drawn a block of bytes at a time (`fill_bytes`) and read as little-endian
/// words: the same words as `next_u64` gives one by one (rand_chacha's `next_u64` is two
/// consecutive `u32` outputs, low first, and `fill_bytes` writes those outputs as
/// little-endian bytes in order), at about half the cost per word.
pub fn add_prg(acc: &mut [u64], seed: &Seed, negate: bool) {
    const WORDS: usize = 512;
    let mut prg = ChaCha20Rng::from_seed(*seed);
    let mut block = [0u8; WORDS * 8];
    for chunk in acc.chunks_mut(WORDS) {
        let bytes = &mut block[..chunk.len() * 8];
        prg.fill_bytes(bytes);
        for (word, mask) in chunk.iter_mut().zip(bytes.chunks_exact(8)) {
            let mask = u64::from_le_bytes(mask.try_into().expect("8 bytes"));
            *word = if negate {
                word.wrapping_sub(mask)
            } else {
                word.wrapping_add(mask)
            };
        }
    }
}

/// The first `len` words of PRG(`seed`).
pub fn prg_words(seed: &Seed, len: usize) -> Vec<u64> {
    let mut words = vec![0; len];
    add_prg(&mut words, seed, false);
    words
}

/// The AEAD key of the share boxes between `a` and `b` (both directions; the associated data
/// tells the directions apart).
fn box_cipher(shared: &[u8; 32], study: Uuid, a: u32, b: u32) -> Result<ChaCha20Poly1305, CryptoError> {
    let key = Zeroizing::new(derive(shared, b"share-box", study, &[a.min(b), a.max(b)])?);
    Ok(ChaCha20Poly1305::new(&(*key).into()))
}

/// Associated data of a box: study ‖ from ‖ to, so that a box cannot be replayed in the other
/// direction, to another site or into another study.
fn box_aad(study: Uuid, from: u32, to: u32) -> [u8; 24] {
    let mut aad = [0u8; 24];
    aad[..16].copy_from_slice(study.as_bytes());
    aad[16..20].copy_from_slice(&from.to_be_bytes());
    aad[20..].copy_from_slice(&to.to_be_bytes());
    aad
}

/// Seals `plaintext` from site `from` to site `to` under their encryption-key agreement
/// `shared`: returns nonce (12 bytes, from `rng`) ‖ ciphertext ‖ tag.
pub fn seal(
    shared: &[u8; 32],
    study: Uuid,
    from: u32,
    to: u32,
    plaintext: &[u8],
    rng: &mut dyn RngCore,
) -> Result<Vec<u8>, CryptoError> {
    let cipher = box_cipher(shared, study, from, to)?;
    let mut nonce = [0u8; NONCE_LEN];
    rng.fill_bytes(&mut nonce);
    let aad = box_aad(study, from, to);
    let ciphertext = cipher
        .encrypt(
            Nonce::from_slice(&nonce),
            Payload {
                msg: plaintext,
                aad: &aad,
            },
        )
        .map_err(|_| CryptoError::Seal)?;
    let mut sealed = Vec::with_capacity(NONCE_LEN + ciphertext.len());
    sealed.extend_from_slice(&nonce);
    sealed.extend_from_slice(&ciphertext);
    Ok(sealed)
}

/// Opens a box sealed by [`seal`] with the same `shared`, study and direction.
pub fn open(
    shared: &[u8; 32],
    study: Uuid,
    from: u32,
    to: u32,
    sealed: &[u8],
) -> Result<Vec<u8>, CryptoError> {
    if sealed.len() < NONCE_LEN + TAG_LEN {
        return Err(CryptoError::Truncated {
            got: sealed.len(),
            min: NONCE_LEN + TAG_LEN,
        });
    }
    let (nonce, ciphertext) = sealed.split_at(NONCE_LEN);
    let cipher = box_cipher(shared, study, from, to)?;
    let aad = box_aad(study, from, to);
    cipher
        .decrypt(
            Nonce::from_slice(nonce),
            Payload {
                msg: ciphertext,
                aad: &aad,
            },
        )
        .map_err(|_| CryptoError::Open)
}

#[cfg(test)]
#[path = "crypto_tests.rs"]
mod tests;
