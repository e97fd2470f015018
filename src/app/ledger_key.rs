//! The service's signing key for its transparency logs (docs/design/ledger.md, "The key"): one
//! Ed25519 key, named `<service origin>/key-<k>`, kept as a C2SP signer key string in a file
//! readable by its owner only. The file is `--ledger-key-file` (`PRIVPCA_LEDGER_KEY_FILE`) or
//! `<data dir>/ledger-signing-key`; when it does not exist it is created at start, from the
//! operating system's generator, atomically (a temporary file with mode 0600, then linked into
//! place, so replicas sharing a data directory that start together all end up with the one key
//! that won). A key file that others can read, or that does not parse, stops the service.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use rand::TryRngCore;
use rand::rngs::OsRng;
use zeroize::Zeroizing;

use crate::transparency::LogSigner;

/// The key file's name in the data directory, unless `--ledger-key-file` names another.
pub const KEY_FILE: &str = "ledger-signing-key";

/// The signing key and the service origin its name gives (`<origin>/key-<k>`).
#[derive(Debug)]
pub struct LedgerKey {
    pub signer: LogSigner,
    /// The schema-less URL naming the deployment; each log's origin is `<origin>/<log>`.
    pub origin: String,
}

impl LedgerKey {
    /// The key named `<origin>/key-<k>`.
    pub fn new(signer: LogSigner) -> anyhow::Result<LedgerKey> {
        let origin = origin_of(signer.name()).with_context(|| {
            format!(
                "the ledger key's name {:?} is not <origin>/key-<number>",
                signer.name()
            )
        })?;
        Ok(LedgerKey { origin, signer })
    }

    /// A fresh key for `origin` (first key: `key-1`), from the operating system's generator.
    pub fn generate(origin: &str) -> anyhow::Result<LedgerKey> {
        let mut seed = Zeroizing::new([0u8; 32]);
        OsRng
            .try_fill_bytes(seed.as_mut())
            .context("the operating system's random generator failed")?;
        let signer = LogSigner::from_seed(&format!("{origin}/key-1"), &seed)
            .with_context(|| format!("the ledger origin {origin:?} is not a valid key name"))?;
        LedgerKey::new(signer)
    }

    /// The verifier key string anyone checks receipts with.
    pub fn verifier_key(&self) -> String {
        self.signer.verifier_key()
    }

    /// The origin of the log stored as `log` (`datasets/<id>`).
    pub fn log_origin(&self, log: &str) -> String {
        format!("{}/{log}", self.origin)
    }
}

/// `<origin>` of a key name `<origin>/key-<k>`.
fn origin_of(name: &str) -> Option<String> {
    let (origin, k) = name.rsplit_once("/key-")?;
    let numbered = !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit());
    (numbered && !origin.is_empty()).then(|| origin.to_string())
}

/// Where the key file is: the configured path, else `<data dir>/ledger-signing-key`.
pub fn key_path(configured: Option<&Path>, data_dir: &Path) -> PathBuf {
    configured.map_or_else(|| data_dir.join(KEY_FILE), Path::to_path_buf)
}

/// Reads the key at `path`, creating it for `origin` first if the file does not exist.
pub fn load_or_create(path: &Path, origin: &str) -> anyhow::Result<LedgerKey> {
    if !path.exists() {
        let key = LedgerKey::generate(origin)?;
        create_owner_only(path, &key.signer.signer_key())
            .with_context(|| format!("creating the ledger signing key {}", path.display()))?;
    }
    load(path)
}

/// Reads a key file: owner-only permissions, one signer key string whose name is
/// `<origin>/key-<k>`.
pub fn load(path: &Path) -> anyhow::Result<LedgerKey> {
    check_owner_only(path)?;
    let text = Zeroizing::new(
        std::fs::read_to_string(path)
            .with_context(|| format!("reading the ledger signing key {}", path.display()))?,
    );
    let signer = LogSigner::from_signer_key(text.trim())
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("the ledger signing key {} does not parse", path.display()))?;
    LedgerKey::new(signer)
}

#[cfg(unix)]
fn check_owner_only(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)
        .with_context(|| format!("reading the ledger signing key {}", path.display()))?
        .permissions()
        .mode();
    anyhow::ensure!(
        mode & 0o077 == 0,
        "the ledger signing key {} is readable by others (mode {:o}); make it readable by its owner only (chmod 600)",
        path.display(),
        mode & 0o777
    );
    Ok(())
}

#[cfg(not(unix))]
fn check_owner_only(_path: &Path) -> anyhow::Result<()> {
    Ok(())
}

/// Writes `contents` to a new temporary file with mode 0600 beside `path`, syncs it, and links
/// it to `path`, which fails if `path` exists (another replica created it first: its key
/// stands, this one is dropped).
fn create_owner_only(path: &Path, contents: &str) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tag = [0u8; 8];
    OsRng
        .try_fill_bytes(&mut tag)
        .context("the operating system's random generator failed")?;
    let temp = dir.join(format!(".{KEY_FILE}.{}.tmp", hex::encode(tag)));
    let written = write_new(&temp, contents);
    let linked = written.and_then(|()| std::fs::hard_link(&temp, path));
    let _ = std::fs::remove_file(&temp);
    match linked {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => Ok(other?),
    }
}

fn write_new(path: &Path, contents: &str) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(contents.as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()
}

#[cfg(test)]
#[path = "ledger_key_tests.rs"]
mod tests;
