//! Base64 payloads of the site protocol (docs/design/federation.md): keys, AEAD boxes, Shamir
//! shares, masked u64 vectors and f64 matrices travel as standard base64 with padding. Numbers
//! are little-endian. Decoding checks lengths exactly, so a truncated or padded payload is an
//! error that says what was expected.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// A payload that does not decode to what the protocol expects.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("invalid base64: {0}")]
    Base64(#[from] base64::DecodeError),
    #[error("expected a 32-byte key, got {got} bytes")]
    KeyLength { got: usize },
    #[error("expected {expected} {kind} values ({expected_bytes} bytes), got {got} bytes")]
    VectorLength {
        kind: &'static str,
        expected: usize,
        expected_bytes: usize,
        got: usize,
    },
    #[error("value {index} is not a finite number")]
    NonFinite { index: usize },
}

/// Standard base64 (with padding) of `bytes`.
pub fn encode(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// The bytes of a standard base64 string (padding required, trailing bits must be zero).
pub fn decode(text: &str) -> Result<Vec<u8>, WireError> {
    Ok(STANDARD.decode(text)?)
}

/// A 32-byte key (X25519 public key) from base64.
pub fn decode_key(text: &str) -> Result<[u8; 32], WireError> {
    let bytes = decode(text)?;
    <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| WireError::KeyLength { got: bytes.len() })
}

/// Base64 of the little-endian bytes of `words`.
pub fn words_to_b64(words: &[u64]) -> String {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    encode(&bytes)
}

/// Exactly `expected_len` little-endian u64 words from base64.
pub fn b64_to_words(text: &str, expected_len: usize) -> Result<Vec<u64>, WireError> {
    let bytes = decode_exact(text, expected_len, "u64")?;
    Ok(bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(le8(c)))
        .collect())
}

/// Base64 of the little-endian bytes of `values`.
pub fn f64s_to_b64(values: &[f64]) -> String {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    encode(&bytes)
}

/// Exactly `expected_len` little-endian f64 values from base64; NaN and ±∞ are refused.
pub fn b64_to_f64s(text: &str, expected_len: usize) -> Result<Vec<f64>, WireError> {
    let bytes = decode_exact(text, expected_len, "f64")?;
    let values: Vec<f64> = bytes
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(le8(c)))
        .collect();
    match values.iter().position(|v| !v.is_finite()) {
        Some(index) => Err(WireError::NonFinite { index }),
        None => Ok(values),
    }
}

/// Decodes `text` and checks it holds exactly `expected_len` 8-byte values.
fn decode_exact(text: &str, expected_len: usize, kind: &'static str) -> Result<Vec<u8>, WireError> {
    let bytes = decode(text)?;
    let expected_bytes = expected_len.saturating_mul(8);
    if bytes.len() == expected_bytes {
        Ok(bytes)
    } else {
        Err(WireError::VectorLength {
            kind,
            expected: expected_len,
            expected_bytes,
            got: bytes.len(),
        })
    }
}

/// The 8 bytes of a chunk from `chunks_exact(8)`.
fn le8(chunk: &[u8]) -> [u8; 8] {
    let mut out = [0u8; 8];
    out.copy_from_slice(chunk);
    out
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
