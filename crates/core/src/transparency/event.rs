//! The ledger event a leaf records, and its bytes: the leaf is the RFC 8785 (JSON
//! Canonicalization Scheme) serialisation of a [`LedgerEvent`], so that anyone can re-derive it
//! from the event's fields, and its leaf hash is SHA-256(0x00 ‖ leaf) (RFC 6962 §2.1).
//!
//! An event states the public facts of one ledger entry (issue 39): its kind, the dataset or
//! study, the job, the algorithm, the service that wrote it, the resolved configuration, the
//! public bounds and relation, the sensitivity and noise scale, what was charged and what it
//! achieves as (ε, δ), and the spending after it. It never states anything that depends on the
//! data beyond what the job itself shows: no n where n is private (the caller passes the public
//! context's n, which is `None` then), no run time, no seed.
//!
//! **No time.** An event has no timestamp. The order of events is the log's order, which the
//! log proves; a time would add nothing a verifier can check. On a private dataset it would
//! also leak: when a refund or the next charge is written depends on how long earlier jobs ran,
//! and run times grow with the private n (docs/design/privacy.md §3.1 shows no time of such a
//! dataset's jobs).
//!
//! **Amounts: integer units, and reals beside them.** The ledger decides in integer units (ρ in
//! 10⁻¹², δ in 10⁻¹⁸; `crates/core/src/privacy/units.rs`, docs/design/privacy.md §2.7), so an event states
//! them: they are exact, they are what admission compared, and `spent_after` is their sum.
//! RFC 8785 takes I-JSON input (§3.1) and writes every number as an IEEE 754 double
//! (§3.2.2.3), which holds integers exactly only up to 2⁵³, while a ρ of 10⁶ is 10¹⁸ units; so
//! units are decimal strings (`"rho_units": "100000000000"`), as I-JSON (RFC 7493 §2.2)
//! recommends for numbers beyond a double's precision. The readable reals (`"rho": 0.1`) sit
//! beside them, derived from the units by the one conversion of `units.rs` (the units divided
//! by the exact number of units in one, correctly rounded), so they carry no extra freedom;
//! (ε, δ) have no units and are reals only. Numbers inside the JSON values (`config`,
//! `sensitivity`, `noise_scale`) must be exact doubles too: an integer beyond 2⁵³ is refused
//! rather than rounded silently.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// The format of events; an event of another format is refused. A change of fields or of
/// their meaning gets a new format string.
pub const EVENT_FORMAT: &str = "privpca/ledger-event/1";

/// The largest integer every double holds exactly, 2⁵³ (RFC 8785 §3.2.2.3).
const MAX_EXACT_INTEGER: u64 = 1 << 53;

/// What is wrong with an event or a leaf.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    #[error("the event's format is {0:?}, not {EVENT_FORMAT:?}")]
    Format(String),
    #[error("an event names exactly one of a dataset and a study")]
    Subject,
    #[error("a {kind} event needs {field}")]
    Missing { kind: &'static str, field: &'static str },
    #[error("a {kind} event has no {field}")]
    Unexpected { kind: &'static str, field: &'static str },
    #[error("{0} is not finite")]
    NotFinite(&'static str),
    #[error("{0} holds an integer beyond 2^53, which canonical JSON would round")]
    InexactNumber(&'static str),
    #[error("the leaf is not an event: {0}")]
    Parse(String),
    #[error("the leaf is not in canonical form (RFC 8785)")]
    NotCanonical,
    #[error("the event cannot be canonicalised: {0}")]
    Canonical(String),
}

/// Which ledger entry an event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A dataset's budget was set (at creation), or a study's per-site budget.
    BudgetSet,
    /// A job's (or a study site's) cost was admitted and charged.
    Charge,
    /// A queued job was cancelled and its charge returned.
    Refund,
    /// The dataset was deleted; its ledger stays.
    Deletion,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::BudgetSet => "budget_set",
            EventKind::Charge => "charge",
            EventKind::Refund => "refund",
            EventKind::Deletion => "deletion",
        }
    }
}

/// A non-negative count of ledger units, written in JSON as a decimal string (exact beyond
/// 2⁵³; see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Units(pub i64);

impl Serialize for Units {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0.to_string())
    }
}

impl<'de> Deserialize<'de> for Units {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Units, D::Error> {
        let text = String::deserialize(deserializer)?;
        parse_units(&text).map(Units).map_err(serde::de::Error::custom)
    }
}

/// A decimal count of units: digits only, no leading zero, within i64.
fn parse_units(text: &str) -> Result<i64, &'static str> {
    let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    if !digits || (text.len() > 1 && text.starts_with('0')) {
        return Err("units are a decimal string without sign or leading zeros");
    }
    text.parse().map_err(|_| "units beyond the i64 range")
}

/// ρ and δ of a charge, a refund, a budget or a running total: exact units and readable reals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Amounts {
    /// ρ in ledger units (10⁻¹²).
    pub rho_units: Units,
    /// The part of ρ not spent by Gaussian mechanisms, in units, where the entry records it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_rho_units: Option<Units>,
    /// δ in ledger units (10⁻¹⁸).
    pub delta_units: Units,
    /// ρ as a real: `rho_units` read by the ledger's conversion (`RhoUnits::to_real`).
    pub rho: f64,
    /// δ as a real: `delta_units` read by the ledger's conversion (`DeltaUnits::to_real`).
    pub delta: f64,
}

/// An (ε, δ) pair: what a charge achieves, or the budget as its owner stated it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EpsilonDelta {
    pub epsilon: f64,
    pub delta: f64,
}

/// The build of the service that wrote the event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceBuild {
    /// The crate version (`CARGO_PKG_VERSION`).
    pub version: String,
    /// The source commit it was built from.
    pub commit: String,
}

/// The public facts of a dataset that calibrate a release: the neighbouring relation, the
/// shape and the bounds (docs/design/privacy.md §1). `n` only where n is public.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublicBounds {
    /// `replace_one`, `add_remove` or `entry`.
    pub relation: String,
    /// Number of features (records) or the side (matrix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub d: Option<u64>,
    /// Number of records, only where it is public (never under `add_remove` on private data).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_norm_bound: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_l1_bound: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry_bound: Option<f64>,
}

/// One ledger entry as a log leaf. Absent facts are omitted from the JSON, not `null`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerEvent {
    /// [`EVENT_FORMAT`].
    pub format: String,
    pub kind: EventKind,
    /// The dataset (in a dataset's log); exactly one of `dataset` and `study` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<String>,
    /// The study (in a study's log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub study: Option<String>,
    /// The site's index in the study's roster, for a study's per-site entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<u32>,
    /// The sites a study's charge charged, each the event's amount (their indices, ascending).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roster: Option<Vec<u32>>,
    /// The job charged or refunded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<String>,
    pub service: ServiceBuild,
    /// The resolved configuration the runner executes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounds: Option<PublicBounds>,
    /// The sensitivity the noise was calibrated to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sensitivity: Option<Value>,
    /// The noise scale used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise_scale: Option<Value>,
    /// The rule that admitted a charge (`zcdp`, `exact_gaussian`, `cks`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// What was charged or refunded, or the budget set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<Amounts>,
    /// The (ε, δ) this charge achieves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achieved: Option<EpsilonDelta>,
    /// The budget as its owner stated it in (ε, δ), on a `budget_set` event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stated_budget: Option<EpsilonDelta>,
    /// The running totals after this entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spent_after: Option<Amounts>,
    /// Why, in words, where the ledger says it (a refund on deletion, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl LedgerEvent {
    /// An event of `kind` written by `service`, with every optional fact absent.
    pub fn new(kind: EventKind, service: ServiceBuild) -> LedgerEvent {
        LedgerEvent {
            format: EVENT_FORMAT.to_string(),
            kind,
            dataset: None,
            study: None,
            site: None,
            roster: None,
            job: None,
            algorithm: None,
            service,
            config: None,
            bounds: None,
            sensitivity: None,
            noise_scale: None,
            rule: None,
            amount: None,
            achieved: None,
            stated_budget: None,
            spent_after: None,
            reason: None,
        }
    }

    /// Checks what a leaf must hold: the format, one subject, the facts its kind needs, and
    /// numbers that canonical JSON writes exactly.
    pub fn check(&self) -> Result<(), EventError> {
        if self.format != EVENT_FORMAT {
            return Err(EventError::Format(self.format.clone()));
        }
        if self.dataset.is_some() == self.study.is_some() {
            return Err(EventError::Subject);
        }
        self.check_kind()?;
        self.check_numbers()
    }

    /// The facts each kind needs or must not have.
    fn check_kind(&self) -> Result<(), EventError> {
        let kind = self.kind.as_str();
        let missing = |field| Err(EventError::Missing { kind, field });
        let unexpected = |field| Err(EventError::Unexpected { kind, field });
        if self.site.is_some() && self.study.is_none() {
            return unexpected("site outside a study's log");
        }
        if self.roster.is_some() && !(self.kind == EventKind::Charge && self.study.is_some()) {
            return unexpected("roster outside a study's charge");
        }
        match self.kind {
            EventKind::BudgetSet | EventKind::Charge | EventKind::Refund if self.amount.is_none() => {
                missing("an amount")
            }
            EventKind::Refund if self.job.is_none() => missing("a job"),
            EventKind::Charge if self.job.is_none() && self.study.is_none() => missing("a job"),
            EventKind::BudgetSet if self.job.is_some() => unexpected("job"),
            EventKind::Deletion if self.dataset.is_none() => missing("a dataset"),
            EventKind::Deletion if self.amount.is_some() => unexpected("amount"),
            _ => Ok(()),
        }
    }

    /// Every real finite, every unit count non-negative, every JSON integer within 2⁵³.
    fn check_numbers(&self) -> Result<(), EventError> {
        for (what, amounts) in [("amount", &self.amount), ("spent_after", &self.spent_after)] {
            if let Some(a) = amounts {
                check_amounts(what, a)?;
            }
        }
        for (what, pair) in [
            ("achieved", &self.achieved),
            ("stated_budget", &self.stated_budget),
        ] {
            if let Some(p) = pair {
                finite(what, p.epsilon)?;
                finite(what, p.delta)?;
            }
        }
        if let Some(b) = &self.bounds {
            for bound in [b.row_norm_bound, b.row_l1_bound, b.entry_bound]
                .into_iter()
                .flatten()
            {
                finite("bounds", bound)?;
            }
        }
        for (what, value) in [
            ("config", &self.config),
            ("sensitivity", &self.sensitivity),
            ("noise_scale", &self.noise_scale),
        ] {
            if let Some(v) = value {
                exact_numbers(what, v)?;
            }
        }
        Ok(())
    }
}

fn finite(what: &'static str, x: f64) -> Result<(), EventError> {
    if x.is_finite() {
        Ok(())
    } else {
        Err(EventError::NotFinite(what))
    }
}

fn check_amounts(what: &'static str, a: &Amounts) -> Result<(), EventError> {
    let units = [Some(a.rho_units), a.other_rho_units, Some(a.delta_units)];
    if units.into_iter().flatten().any(|u| u.0 < 0) {
        return Err(EventError::Parse(format!("{what} has negative units")));
    }
    finite(what, a.rho)?;
    finite(what, a.delta)
}

/// Refuses integers that a double does not hold exactly (RFC 8785 §3.2.2.3 would round them).
fn exact_numbers(what: &'static str, value: &Value) -> Result<(), EventError> {
    match value {
        Value::Number(n) => {
            let exact = match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => u <= MAX_EXACT_INTEGER,
                (None, Some(i)) => i.unsigned_abs() <= MAX_EXACT_INTEGER,
                // A double already; serde_json holds only finite ones.
                (None, None) => true,
            };
            if exact {
                Ok(())
            } else {
                Err(EventError::InexactNumber(what))
            }
        }
        Value::Array(items) => items.iter().try_for_each(|v| exact_numbers(what, v)),
        Value::Object(map) => map.values().try_for_each(|v| exact_numbers(what, v)),
        Value::Null | Value::Bool(_) | Value::String(_) => Ok(()),
    }
}

/// The leaf of `event`: its RFC 8785 canonical JSON, after [`LedgerEvent::check`].
pub fn leaf_bytes(event: &LedgerEvent) -> Result<Vec<u8>, EventError> {
    event.check()?;
    serde_json_canonicalizer::to_vec(event).map_err(|e| EventError::Canonical(e.to_string()))
}

impl LedgerEvent {
    /// The event a leaf holds. The leaf must be exactly the canonical form of a valid event,
    /// so that a receipt's leaf can be read back and re-derived byte for byte.
    pub fn from_leaf(leaf: &[u8]) -> Result<LedgerEvent, EventError> {
        let event: LedgerEvent =
            serde_json::from_slice(leaf).map_err(|e| EventError::Parse(e.to_string()))?;
        if leaf_bytes(&event)? != leaf {
            return Err(EventError::NotCanonical);
        }
        Ok(event)
    }
}

#[cfg(test)]
#[path = "event_tests.rs"]
mod tests;
