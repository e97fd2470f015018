//! C2SP signed notes with Ed25519 keys, and the tlog-checkpoint note text.
//!
//! A signed note (C2SP signed-note, "Format") is a text ending in a newline, a blank line, and
//! signature lines `— <key name> <base64(key ID ‖ signature)>`, each ending in a newline. The
//! key ID is SHA-256(key name ‖ 0x0A ‖ 0x01 ‖ 32-byte Ed25519 public key)\[:4\], big-endian
//! (signed-note, "Ed25519 signatures"); the signature is Ed25519 (RFC 8032 §5.1.6) over the text,
//! final newline included. Keys travel as the strings of golang.org/x/mod/sumdb/note:
//! `<name>+<8 hex key ID>+<base64(0x01 ‖ public key)>` to verify, and
//! `PRIVATE+KEY+<name>+<8 hex key ID>+<base64(0x01 ‖ 32-byte seed)>` to sign.
//!
//! A checkpoint (C2SP tlog-checkpoint, "Note text") is a note whose text is the origin line,
//! the tree size in decimal, the base64 RFC 6962 root hash, and optional extension lines.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use super::merkle::Hash;

/// The signature type byte of Ed25519 (C2SP signed-note, "Signature types").
pub const ED25519: u8 = 0x01;
/// What begins a signature line: em dash (U+2014), space.
const SIGNATURE_PREFIX: &str = "\u{2014} ";
/// The most signature lines read from one note (signed-note asks verifiers to accept 16).
const MAX_SIGNATURES: usize = 100;

/// What is wrong with a key, a note or a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoteError {
    #[error("invalid key name {0:?}: it must be non-empty, without spaces or '+'")]
    KeyName(String),
    #[error("malformed verifier key: {0}")]
    VerifierKey(&'static str),
    #[error("malformed signer key: {0}")]
    SignerKey(&'static str),
    #[error("the key ID {stated:08x} does not match the key, whose ID is {computed:08x}")]
    KeyId { stated: u32, computed: u32 },
    #[error("malformed note: {0}")]
    Malformed(&'static str),
    #[error("the note carries no signature by the key {name}+{id:08x}")]
    NotSigned { name: String, id: u32 },
    #[error("the signature by the key {name}+{id:08x} does not verify")]
    BadSignature { name: String, id: u32 },
    #[error("malformed checkpoint: {0}")]
    Checkpoint(&'static str),
}

/// Whether `name` may name a key: non-empty, no Unicode space, no '+' (signed-note, "Format").
fn check_name(name: &str) -> Result<(), NoteError> {
    if name.is_empty() || name.contains(|c: char| c.is_whitespace() || c == '+') {
        return Err(NoteError::KeyName(name.to_string()));
    }
    Ok(())
}

/// The key ID: SHA-256(name ‖ 0x0A ‖ 0x01 ‖ public key)\[:4\], big-endian (signed-note,
/// "Ed25519 signatures").
pub fn key_id(name: &str, public_key: &[u8; 32]) -> u32 {
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update(b"\n");
    h.update([ED25519]);
    h.update(public_key);
    let digest = h.finalize();
    u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]])
}

/// Splits `<name>+<8 hex>+<base64>` at its first two '+' (base64 may hold more), and decodes
/// the ID and the key bytes, which must be 0x01 followed by 32 bytes.
fn split_key(key: &str) -> Result<(&str, u32, [u8; 32]), &'static str> {
    let (name, rest) = key.split_once('+').ok_or("expected <name>+<key ID>+<key>")?;
    let (id, data) = rest.split_once('+').ok_or("expected <name>+<key ID>+<key>")?;
    if id.len() != 8 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("the key ID is not 8 hex digits");
    }
    let id = u32::from_str_radix(id, 16).map_err(|_| "the key ID is not 8 hex digits")?;
    let bytes = BASE64
        .decode(data)
        .map_err(|_| "the key is not standard base64")?;
    match bytes.split_first() {
        Some((&ED25519, key)) => {
            let key: [u8; 32] = key.try_into().map_err(|_| "an Ed25519 key has 32 bytes")?;
            Ok((name, id, key))
        }
        Some(_) => Err("not an Ed25519 key (type byte 0x01)"),
        None => Err("the key is empty"),
    }
}

/// The key that checks a log's signatures: a name, its key ID and an Ed25519 public key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogVerifier {
    name: String,
    id: u32,
    key: VerifyingKey,
}

impl LogVerifier {
    /// From the public key and the name it signs under.
    pub fn new(name: &str, key: VerifyingKey) -> Result<LogVerifier, NoteError> {
        check_name(name)?;
        Ok(LogVerifier {
            name: name.to_string(),
            id: key_id(name, key.as_bytes()),
            key,
        })
    }

    /// Parses `<name>+<8 hex key ID>+<base64(0x01 ‖ public key)>`, checking the ID.
    pub fn from_verifier_key(vkey: &str) -> Result<LogVerifier, NoteError> {
        let (name, stated, key) = split_key(vkey).map_err(NoteError::VerifierKey)?;
        check_name(name)?;
        let key =
            VerifyingKey::from_bytes(&key).map_err(|_| NoteError::VerifierKey("not an Ed25519 point"))?;
        let verifier = LogVerifier::new(name, key)?;
        if verifier.id != stated {
            return Err(NoteError::KeyId {
                stated,
                computed: verifier.id,
            });
        }
        Ok(verifier)
    }

    /// The verifier key string, `<name>+<8 hex key ID>+<base64(0x01 ‖ public key)>`.
    pub fn verifier_key(&self) -> String {
        let mut bytes = vec![ED25519];
        bytes.extend_from_slice(self.key.as_bytes());
        format!("{}+{:08x}+{}", self.name, self.id, BASE64.encode(bytes))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn key_id(&self) -> u32 {
        self.id
    }

    pub fn public_key(&self) -> &VerifyingKey {
        &self.key
    }

    /// The text of `signed` if this key signed it. Signature lines of other keys (another name
    /// or another ID) are ignored, as signed-note requires; a line of this key that does not
    /// verify rejects the note, and so does a note without one.
    pub fn open<'a>(&self, signed: &'a str) -> Result<&'a str, NoteError> {
        let (text, lines) = split_note(signed)?;
        let mut verified = false;
        for line in lines {
            let (name, id, signature) = parse_signature_line(line)?;
            if name != self.name || id != self.id {
                continue;
            }
            let good = Signature::from_slice(&signature)
                .is_ok_and(|sig| self.key.verify_strict(text.as_bytes(), &sig).is_ok());
            if !good {
                return Err(NoteError::BadSignature {
                    name: self.name.clone(),
                    id: self.id,
                });
            }
            verified = true;
        }
        if verified {
            Ok(text)
        } else {
            Err(NoteError::NotSigned {
                name: self.name.clone(),
                id: self.id,
            })
        }
    }
}

/// Splits a signed note into its text (final newline included) and its signature lines
/// (without their newlines), after checking the signed-note format: no ASCII control character
/// but newline, the text separated from the signatures by the last blank line, and at least
/// one signature line, each ending in a newline.
fn split_note(signed: &str) -> Result<(&str, Vec<&str>), NoteError> {
    if signed.chars().any(|c| c < ' ' && c != '\n') {
        return Err(NoteError::Malformed("it contains a control character"));
    }
    let split = signed
        .rfind("\n\n")
        .ok_or(NoteError::Malformed("no blank line before the signatures"))?;
    let (text, signatures) = (&signed[..=split], &signed[split + 2..]);
    let Some(signatures) = signatures.strip_suffix('\n') else {
        return Err(NoteError::Malformed(
            "no signature line, or one without its newline",
        ));
    };
    let lines: Vec<&str> = signatures.split('\n').collect();
    if lines.len() > MAX_SIGNATURES {
        return Err(NoteError::Malformed("too many signatures"));
    }
    Ok((text, lines))
}

/// `— <name> <base64(key ID ‖ signature)>` → (name, key ID, signature).
fn parse_signature_line(line: &str) -> Result<(&str, u32, Vec<u8>), NoteError> {
    let body = line.strip_prefix(SIGNATURE_PREFIX).ok_or(NoteError::Malformed(
        "a signature line does not begin with an em dash",
    ))?;
    let (name, encoded) = body
        .split_once(' ')
        .ok_or(NoteError::Malformed("a signature line has no signature"))?;
    check_name(name).map_err(|_| NoteError::Malformed("a signature line's key name is invalid"))?;
    let bytes = BASE64
        .decode(encoded)
        .map_err(|_| NoteError::Malformed("a signature is not standard base64"))?;
    match bytes.split_first_chunk::<4>() {
        Some((id, signature)) if !signature.is_empty() => {
            Ok((name, u32::from_be_bytes(*id), signature.to_vec()))
        }
        _ => Err(NoteError::Malformed("a signature is shorter than 5 bytes")),
    }
}

/// The log's signing key: a name and an Ed25519 key. Debug output shows the name and key ID,
/// never the key.
pub struct LogSigner {
    name: String,
    id: u32,
    key: SigningKey,
}

impl std::fmt::Debug for LogSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LogSigner({}+{:08x})", self.name, self.id)
    }
}

impl LogSigner {
    /// The key whose RFC 8032 §5.1.5 secret is `seed`, signing under `name`.
    pub fn from_seed(name: &str, seed: &[u8; 32]) -> Result<LogSigner, NoteError> {
        check_name(name)?;
        let key = SigningKey::from_bytes(seed);
        Ok(LogSigner {
            name: name.to_string(),
            id: key_id(name, key.verifying_key().as_bytes()),
            key,
        })
    }

    /// A new key, its seed drawn from `rng` (the service passes the OS's).
    pub fn generate<R: rand::CryptoRng + ?Sized>(name: &str, rng: &mut R) -> Result<LogSigner, NoteError> {
        let mut seed = Zeroizing::new([0u8; 32]);
        rng.fill_bytes(seed.as_mut());
        LogSigner::from_seed(name, &seed)
    }

    /// Parses `PRIVATE+KEY+<name>+<8 hex key ID>+<base64(0x01 ‖ seed)>`, checking the ID
    /// against the public key the seed gives.
    pub fn from_signer_key(skey: &str) -> Result<LogSigner, NoteError> {
        let rest = skey
            .strip_prefix("PRIVATE+KEY+")
            .ok_or(NoteError::SignerKey("it does not begin with PRIVATE+KEY+"))?;
        let (name, stated, seed) = split_key(rest).map_err(NoteError::SignerKey)?;
        let seed = Zeroizing::new(seed);
        let signer = LogSigner::from_seed(name, &seed)?;
        if signer.id != stated {
            return Err(NoteError::KeyId {
                stated,
                computed: signer.id,
            });
        }
        Ok(signer)
    }

    /// The signer key string to store (secret: whoever holds it signs as the log).
    pub fn signer_key(&self) -> Zeroizing<String> {
        let mut bytes = Zeroizing::new(vec![ED25519]);
        bytes.extend_from_slice(self.key.as_bytes());
        Zeroizing::new(format!(
            "PRIVATE+KEY+{}+{:08x}+{}",
            self.name,
            self.id,
            BASE64.encode(bytes.as_slice())
        ))
    }

    /// The matching verifier.
    pub fn verifier(&self) -> LogVerifier {
        LogVerifier {
            name: self.name.clone(),
            id: self.id,
            key: self.key.verifying_key(),
        }
    }

    /// The verifier key string to publish.
    pub fn verifier_key(&self) -> String {
        self.verifier().verifier_key()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn key_id(&self) -> u32 {
        self.id
    }

    /// The signed note of `text`: the text, a blank line, and this key's signature line. The
    /// text must end with a newline and hold no control character but newline.
    pub fn sign(&self, text: &str) -> Result<String, NoteError> {
        if !text.ends_with('\n') {
            return Err(NoteError::Malformed("the text does not end with a newline"));
        }
        if text.chars().any(|c| c < ' ' && c != '\n') {
            return Err(NoteError::Malformed("it contains a control character"));
        }
        let mut bytes = self.id.to_be_bytes().to_vec();
        bytes.extend_from_slice(&self.key.sign(text.as_bytes()).to_bytes());
        Ok(format!(
            "{text}\n{SIGNATURE_PREFIX}{} {}\n",
            self.name,
            BASE64.encode(bytes)
        ))
    }
}

/// A log's signed tree head (C2SP tlog-checkpoint): which log, how many leaves, and the RFC 6962
/// root hash at that size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The log's identity (first line).
    pub origin: String,
    /// The tree size (second line, decimal).
    pub size: u64,
    /// MTH(D\[size\]) (third line, base64).
    pub root: Hash,
    /// Optional further lines, each non-empty (tlog-checkpoint does not recommend them; this
    /// service writes none).
    pub extensions: Vec<String>,
}

impl Checkpoint {
    /// A checkpoint without extension lines. The origin must be a valid key-name-like string
    /// (non-empty, no spaces, no '+'), as tlog-checkpoint recommends for origins.
    pub fn new(origin: &str, size: u64, root: Hash) -> Result<Checkpoint, NoteError> {
        check_name(origin)
            .map_err(|_| NoteError::Checkpoint("the origin must be non-empty, without spaces or '+'"))?;
        Ok(Checkpoint {
            origin: origin.to_string(),
            size,
            root,
            extensions: Vec::new(),
        })
    }

    /// The note text: `<origin>\n<size>\n<base64 root>\n`, then each extension line.
    pub fn to_text(&self) -> String {
        let mut text = format!("{}\n{}\n{}\n", self.origin, self.size, BASE64.encode(self.root));
        for line in &self.extensions {
            text.push_str(line);
            text.push('\n');
        }
        text
    }

    /// Parses a checkpoint's note text (tlog-checkpoint, "Note text"): at least three
    /// non-empty lines, each ending in a newline; the size in decimal without leading zeros;
    /// the root as the base64 of 32 bytes.
    pub fn parse(text: &str) -> Result<Checkpoint, NoteError> {
        let body = text
            .strip_suffix('\n')
            .ok_or(NoteError::Checkpoint("the text does not end with a newline"))?;
        let mut lines = body.split('\n');
        let (Some(origin), Some(size), Some(root)) = (lines.next(), lines.next(), lines.next()) else {
            return Err(NoteError::Checkpoint("fewer than three lines"));
        };
        if origin.is_empty() {
            return Err(NoteError::Checkpoint("the origin line is empty"));
        }
        let extensions: Vec<String> = lines.map(str::to_string).collect();
        if extensions.iter().any(String::is_empty) {
            return Err(NoteError::Checkpoint("an extension line is empty"));
        }
        Ok(Checkpoint {
            origin: origin.to_string(),
            size: parse_size(size)?,
            root: parse_root(root)?,
            extensions,
        })
    }

    /// The signed checkpoint note. Refuses a checkpoint whose text would not parse back to it
    /// (an origin or extension line with a newline, say).
    pub fn sign(&self, signer: &LogSigner) -> Result<String, NoteError> {
        let text = self.to_text();
        if Checkpoint::parse(&text).as_ref() != Ok(self) {
            return Err(NoteError::Checkpoint("its lines do not read back as written"));
        }
        signer.sign(&text)
    }

    /// The checkpoint of a signed note, if `verifier`'s key signed it.
    pub fn open(signed: &str, verifier: &LogVerifier) -> Result<Checkpoint, NoteError> {
        Checkpoint::parse(verifier.open(signed)?)
    }
}

/// The tree size line: ASCII decimal, no leading zeros unless it is `0`, within u64.
fn parse_size(line: &str) -> Result<u64, NoteError> {
    let digits = !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit());
    if !digits || (line.len() > 1 && line.starts_with('0')) {
        return Err(NoteError::Checkpoint(
            "the tree size is not a decimal number without leading zeros",
        ));
    }
    line.parse()
        .map_err(|_| NoteError::Checkpoint("the tree size is too large"))
}

/// The root hash line: standard base64 (RFC 4648 §4, padded) of 32 bytes.
fn parse_root(line: &str) -> Result<Hash, NoteError> {
    let bytes = BASE64
        .decode(line)
        .map_err(|_| NoteError::Checkpoint("the root hash is not standard base64"))?;
    bytes
        .try_into()
        .map_err(|_| NoteError::Checkpoint("the root hash is not 32 bytes"))
}

#[cfg(test)]
#[path = "note_tests.rs"]
mod tests;
