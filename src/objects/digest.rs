//! SHA-256 checksums of stored objects and cached files.

use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

/// A SHA-256, shown and parsed as 64 lowercase hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sha256Hex([u8; 32]);

impl Sha256Hex {
    /// 64 hex digits (either case), else `None`.
    pub fn parse(text: &str) -> Option<Sha256Hex> {
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(text.trim(), &mut bytes).ok()?;
        Some(Sha256Hex(bytes))
    }
}

impl std::fmt::Display for Sha256Hex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

/// An incremental SHA-256.
#[derive(Debug, Clone, Default)]
pub struct Hasher(Sha256);

impl Hasher {
    pub fn new() -> Hasher {
        Hasher::default()
    }
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
    pub fn finish(self) -> Sha256Hex {
        Sha256Hex(self.0.finalize().into())
    }
}

/// The SHA-256 of a file, read in 1 MiB blocks (call it on a blocking thread).
pub fn sha256_file(path: &Path) -> std::io::Result<Sha256Hex> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let read = file.read(&mut buf)?;
        if read == 0 {
            return Ok(hasher.finish());
        }
        hasher.update(&buf[..read]);
    }
}
