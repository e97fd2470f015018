//! JSON uploads: an array of rows, each an array of numbers, `[[1, 2], [3, 4.5]]`. Parsed
//! streaming with serde_json: each row reaches the sink as soon as it is complete, so memory
//! is O(d).
//!
//! Every visitor here answers type mismatches itself ("expected a number, found a string"):
//! serde's default messages quote the offending value, which must not be echoed.

use std::fmt;
use std::io::{self, BufReader, Read, Write};

use serde::de::{self, DeserializeSeed, Deserializer as _, SeqAccess, Visitor};

use super::IngestError;
use super::sink::RowSink;

/// Read buffer: serde_json reads its input byte by byte.
const BUFFER: usize = 1 << 16;

/// Parses JSON from `input` into `sink`.
pub(super) fn parse<W: Write>(input: &mut impl Read, sink: &mut RowSink<W>) -> Result<(), IngestError> {
    let max_fields = sink.limits().max_d.saturating_add(1);
    let mut de = serde_json::Deserializer::from_reader(BufReader::with_capacity(BUFFER, input));
    let mut state = State {
        sink,
        row: Vec::new(),
        max_fields,
        at: None,
        failure: None,
    };
    let parsed = (&mut de)
        .deserialize_any(Rows(&mut state))
        .and_then(|()| de.end());
    match parsed {
        Ok(()) => Ok(()),
        Err(e) => Err(state.failure.take().unwrap_or_else(|| refused(e, state.at))),
    }
}

/// The parser's state shared by the visitors.
struct State<'s, W: Write> {
    sink: &'s mut RowSink<W>,
    row: Vec<f64>,
    /// Values kept per row: one more than the column limit, to detect wide rows.
    max_fields: usize,
    /// The (row, column) being parsed, 1-based, for error messages.
    at: Option<(u64, u64)>,
    /// The sink's refusal, which the serde error only stands in for.
    failure: Option<IngestError>,
}

impl<W: Write> State<'_, W> {
    /// Hands the completed row (of `count` values) to the sink.
    fn accept(&mut self, count: usize) -> Result<(), IngestError> {
        self.sink.check_width(count)?;
        if count != self.row.len() {
            let max = self.sink.limits().max_d as u64;
            return Err(IngestError::TooManyColumns { d: count as u64, max });
        }
        self.sink.push(&mut self.row)
    }
}

/// A serde_json error as an [`IngestError`], with the row and column when inside a row.
fn refused(e: serde_json::Error, at: Option<(u64, u64)>) -> IngestError {
    if e.is_io() {
        // The body failed; BodyReader::explain puts the real cause in place of this one.
        return IngestError::Read(io::Error::from(e));
    }
    let line = e.line() as u64;
    let text = e.to_string();
    let text = text.rfind(" at line ").map_or(text.as_str(), |i| &text[..i]);
    let text = if e.is_eof() {
        "the input ends early (truncated upload?)"
    } else {
        text
    };
    let message = match at {
        Some((row, 0)) => format!("row {row}: {text}"),
        Some((row, col)) => format!("row {row}, column {col}: {text}"),
        None => text.to_owned(),
    };
    IngestError::Malformed { line, message }
}

/// Implements the visitor methods for unexpected JSON types, naming the type only.
macro_rules! reject {
    ($what:literal: $($method:ident($($arg:ty)?) => $found:literal),* $(,)?) => {
        $(fn $method<E: de::Error>(self $(, _: $arg)?) -> Result<Self::Value, E> {
            Err(E::custom(concat!("expected ", $what, ", found ", $found)))
        })*
    };
}

/// The top level: an array of rows.
struct Rows<'a, 's, W: Write>(&'a mut State<'s, W>);

impl<'de, W: Write> Visitor<'de> for Rows<'_, '_, W> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of rows")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let state = self.0;
        loop {
            state.at = Some((state.sink.next_row(), 0));
            state.row.clear();
            let Some(count) = seq.next_element_seed(RowSeed(&mut *state))? else {
                break;
            };
            state.at = Some((state.sink.next_row(), 0));
            if let Err(e) = state.accept(count) {
                state.failure = Some(e);
                return Err(de::Error::custom("row refused"));
            }
        }
        state.at = None;
        Ok(())
    }

    fn visit_map<A: de::MapAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(de::Error::custom(
            "expected an array of rows (arrays of numbers), found an object",
        ))
    }

    reject!("an array of rows (arrays of numbers)":
        visit_bool(bool) => "a boolean", visit_i64(i64) => "a number", visit_u64(u64) => "a number",
        visit_f64(f64) => "a number", visit_str(&str) => "a string", visit_unit() => "null");
}

/// One row: an array of numbers. Yields how many values it had.
struct RowSeed<'a, 's, W: Write>(&'a mut State<'s, W>);

impl<'de, W: Write> DeserializeSeed<'de> for RowSeed<'_, '_, W> {
    type Value = usize;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<usize, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, W: Write> Visitor<'de> for RowSeed<'_, '_, W> {
    type Value = usize;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a row (an array of numbers)")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<usize, A::Error> {
        let state = self.0;
        let row = state.sink.next_row();
        let mut count = 0usize;
        loop {
            state.at = Some((row, count as u64 + 1));
            let Some(v) = seq.next_element_seed(Number)? else {
                break;
            };
            if state.row.len() < state.max_fields {
                state.row.push(v);
            }
            count += 1;
        }
        Ok(count)
    }

    fn visit_map<A: de::MapAccess<'de>>(self, _: A) -> Result<usize, A::Error> {
        Err(de::Error::custom(
            "expected a row (an array of numbers), found an object",
        ))
    }

    reject!("a row (an array of numbers)":
        visit_bool(bool) => "a boolean", visit_i64(i64) => "a number", visit_u64(u64) => "a number",
        visit_f64(f64) => "a number", visit_str(&str) => "a string", visit_unit() => "null");
}

/// One value: a JSON number as f64.
struct Number;

impl<'de> DeserializeSeed<'de> for Number {
    type Value = f64;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<f64, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Number {
    type Value = f64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number")
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
        Ok(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
        Ok(v as f64)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
        Ok(v as f64)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<f64, A::Error> {
        Err(de::Error::custom("expected a number, found an array"))
    }

    fn visit_map<A: de::MapAccess<'de>>(self, _: A) -> Result<f64, A::Error> {
        Err(de::Error::custom("expected a number, found an object"))
    }

    reject!("a number": visit_bool(bool) => "a boolean", visit_str(&str) => "a string", visit_unit() => "null");
}
