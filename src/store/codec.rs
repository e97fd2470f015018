//! How values are written to and read from SQLite columns: ids as hyphenated UUID text,
//! timestamps as fixed-width RFC 3339 text in UTC (microseconds, `Z`), JSON as text, seeds as
//! the i64 with the same bits, bases as little-endian f64 bytes.

use chrono::{DateTime, SecondsFormat, Utc};
use uuid::Uuid;

use super::StoreError;
use crate::dataset::{Kind, Relation};

/// The current time at the precision that is stored, so a record built in memory equals the
/// same record read back.
pub(crate) fn now() -> DateTime<Utc> {
    let t = Utc::now();
    DateTime::from_timestamp_micros(t.timestamp_micros()).unwrap_or(t)
}

pub(crate) fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

pub(crate) fn parse_ts(s: &str) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| StoreError::Corrupt(format!("timestamp {s:?}: {e}")))
}

pub(crate) fn parse_opt_ts(s: Option<String>) -> Result<Option<DateTime<Utc>>, StoreError> {
    s.as_deref().map(parse_ts).transpose()
}

pub(crate) fn id(u: Uuid) -> String {
    u.hyphenated().to_string()
}

pub(crate) fn parse_id(s: &str) -> Result<Uuid, StoreError> {
    Uuid::parse_str(s).map_err(|e| StoreError::Corrupt(format!("id {s:?}: {e}")))
}

pub(crate) fn parse_json(s: &str) -> Result<serde_json::Value, StoreError> {
    serde_json::from_str(s).map_err(|e| StoreError::Corrupt(format!("JSON column: {e}")))
}

/// Seeds are u64; SQLite integers are i64. The bits are kept, so every seed round-trips.
pub(crate) fn seed_to_db(seed: Option<u64>) -> Option<i64> {
    seed.map(|s| i64::from_ne_bytes(s.to_ne_bytes()))
}

pub(crate) fn seed_from_db(seed: Option<i64>) -> Option<u64> {
    seed.map(|s| u64::from_ne_bytes(s.to_ne_bytes()))
}

pub(crate) fn parse_kind(s: &str) -> Result<Kind, StoreError> {
    match s {
        "records" => Ok(Kind::Records),
        "matrix" => Ok(Kind::Matrix),
        _ => Err(StoreError::Corrupt(format!("dataset kind {s:?}"))),
    }
}

pub(crate) fn parse_relation(s: &str) -> Result<Relation, StoreError> {
    match s {
        "replace_one" => Ok(Relation::ReplaceOne),
        "add_remove" => Ok(Relation::AddRemove),
        "entry" => Ok(Relation::Entry),
        _ => Err(StoreError::Corrupt(format!("neighbouring relation {s:?}"))),
    }
}

/// A column-major basis as little-endian f64 bytes.
pub(crate) fn basis_to_bytes(basis: &[f64]) -> Vec<u8> {
    basis.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub(crate) fn basis_from_bytes(bytes: &[u8]) -> Result<Vec<f64>, StoreError> {
    let chunks = bytes.chunks_exact(8);
    if !chunks.remainder().is_empty() {
        return Err(StoreError::Corrupt(format!(
            "result blob of {} bytes",
            bytes.len()
        )));
    }
    Ok(chunks
        .map(|c| {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            f64::from_le_bytes(b)
        })
        .collect())
}

#[cfg(test)]
#[path = "codec_tests.rs"]
mod tests;
