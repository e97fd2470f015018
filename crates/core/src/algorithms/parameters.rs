//! The published schema of every algorithm's `params`, derived from the types the server
//! deserializes, so that what `GET /v1/algorithms` and the OpenAPI document promise and what a
//! job submission accepts cannot drift apart.
//!
//! - An algorithm's own parameters are its [`Algorithm::Params`](super::Algorithm::Params)
//!   type: `#[derive(Deserialize, JsonSchema)]` with `deny_unknown_fields`. Field doc comments
//!   are the published descriptions; ranges and constant defaults are `#[schemars(...)]`
//!   attributes beside the field; a default that depends on the data (`min(d, 2k)`) is stated
//!   in the description.
//! - The generic options every algorithm takes ([`GenericParams`]: `center`, `center_share`,
//!   `clip`, `with_eigenvalues`, `eigenvalue_share`) are one more such type, deserialized by
//!   the registry before the algorithm sees the rest (see `registry::Options::take`).
//!
//! The schema is JSON Schema 2020-12 (what OpenAPI 3.1 uses) with every subschema inlined, so it
//! stands alone in `GET /v1/algorithms` and as an OpenAPI component. Range checks that JSON
//! Schema cannot state (`k ≤ d`, `p ≤ d`, a centre of d entries) stay in `configure` and are
//! answered with 422 naming the field.

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::centering::CenterParam;
use super::clipping::ClipParam;
use super::{AlgorithmInfo, ConfigError};
use crate::dataset::Kind;

/// The generic job options, handled once for every algorithm in [`super::registry()`] unless
/// the algorithm declares a parameter of the same name itself.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct GenericParams {
    /// Records only. "none" (default): no centring; "private": a private mean by the Gaussian
    /// mechanism on the clipped sum, charged center_share of the job's ρ, after which the rows
    /// are re-centred and re-clipped; an array of d numbers: a public centre, free.
    #[serde(default)]
    #[schemars(extend("default" = "none"))]
    pub center: Option<CenterParam>,
    /// Share of the job's ρ spent on the private mean, in (0, 1); only with center = "private".
    #[serde(default)]
    #[schemars(extend("default" = super::centering::DEFAULT_CENTER_SHARE, "exclusiveMinimum" = 0, "exclusiveMaximum" = 1))]
    pub center_share: Option<f64>,
    /// Records only, adaptive clipping. "auto" (the default, except where an algorithm's
    /// schema says "none"): a quantile q chosen from public facts (1 − q grows with
    /// √(k·d)/(n·√ρ), at most the median; the median when n is private) at 0.1 of the job's ρ,
    /// or no clipping where the declared bound already leaves little noise (docs/utility.md,
    /// "The clip rule"); "none": no clipping; {"quantile": q, "share": f}: spend f of the job's
    /// ρ on a DP q-quantile c of the row norms (noisy binary search, Gaussian), clip rows at
    /// c ≤ β and calibrate the algorithm to c. c is returned with the result as
    /// released.clip_norm.
    #[serde(default)]
    #[schemars(extend("default" = "auto"))]
    pub clip: Option<ClipParam>,
    /// true: return private eigenvalue estimates (free when the algorithm releases them,
    /// otherwise noisy Rayleigh quotients charged eigenvalue_share of the job's ρ); false:
    /// return none; absent: return them only when they are free.
    #[serde(default)]
    pub with_eigenvalues: Option<bool>,
    /// Share of the job's ρ spent on the eigenvalue estimates, in (0, 1); only with
    /// with_eigenvalues = true, on an algorithm that does not release eigenvalues itself.
    #[serde(default)]
    #[schemars(extend("default" = super::eigenvalues::DEFAULT_EIGENVALUE_SHARE, "exclusiveMinimum" = 0, "exclusiveMaximum" = 1))]
    pub eigenvalue_share: Option<f64>,
}

/// Options that apply to records datasets only.
const RECORDS_ONLY: [&str; 3] = ["center", "center_share", "clip"];

/// The JSON Schema of a parameter type: inlined, without `$schema`, `title` and the type's own
/// doc comment, and without the `"default": null` of optional fields (their real default is
/// stated in the description or as a `default` of the field's type).
pub fn schema_of<T: JsonSchema>() -> Map<String, Value> {
    let generator = SchemaSettings::draft2020_12()
        .with(|s| s.inline_subschemas = true)
        .into_generator();
    let schema: Schema = generator.into_root_schema_for::<T>();
    let mut object = match schema.to_value() {
        Value::Object(map) => map,
        // `true`/`false` schemas only come from types that accept anything or nothing.
        other => Map::from_iter([("not_an_object".to_string(), other)]),
    };
    for key in ["$schema", "title", "description"] {
        object.remove(key);
    }
    for value in object.values_mut() {
        unwrap_descriptions(value);
        plain_enums(value);
    }
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        for property in properties.values_mut() {
            if let Value::Object(p) = property
                && p.get("default") == Some(&Value::Null)
            {
                p.remove("default");
            }
        }
    }
    object
}

/// Doc comments wrap at 100 columns; a published description is one paragraph per line.
fn unwrap_descriptions(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                match v {
                    Value::String(text) if key == "description" => {
                        *text = text
                            .split("\n\n")
                            .map(|paragraph| paragraph.split('\n').collect::<Vec<_>>().join(" "))
                            .collect::<Vec<_>>()
                            .join("\n\n");
                    }
                    _ => unwrap_descriptions(v),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(unwrap_descriptions),
        _ => {}
    }
}

/// schemars states a unit enum whose variants have doc comments as a `oneOf` of documented
/// `const`s; generated clients make a proper enum of `enum`, so that is what is published, with
/// the variants' descriptions appended to the schema's own ("name: meaning; …").
fn plain_enums(value: &mut Value) {
    match value {
        Value::Object(map) => {
            let names: Option<Vec<(Value, Option<String>)>> = map
                .get("oneOf")
                .and_then(Value::as_array)
                .map(|variants| {
                    variants
                        .iter()
                        .map(|v| match v.get("const") {
                            Some(c @ Value::String(_))
                                if v.as_object().is_some_and(|o| {
                                    o.keys()
                                        .all(|k| ["const", "type", "description"].contains(&k.as_str()))
                                }) =>
                            {
                                Some((c.clone(), v["description"].as_str().map(str::to_string)))
                            }
                            _ => None,
                        })
                        .collect()
                })
                .and_then(|v: Vec<Option<_>>| v.into_iter().collect());
            if let Some(names) = names {
                map.remove("oneOf");
                let meanings: Vec<String> = names
                    .iter()
                    .filter_map(|(name, meaning)| Some(format!("{}: {}", name.as_str()?, meaning.as_ref()?)))
                    .collect();
                map.insert("type".into(), "string".into());
                map.insert("enum".into(), names.into_iter().map(|(name, _)| name).collect());
                if !meanings.is_empty() {
                    let own = map.get("description").and_then(Value::as_str).unwrap_or_default();
                    let joined = meanings.join("; ");
                    let text = if own.is_empty() {
                        joined
                    } else {
                        format!("{own} ({joined})")
                    };
                    map.insert("description".into(), text.into());
                }
            } else {
                map.values_mut().for_each(plain_enums);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(plain_enums),
        _ => {}
    }
}

/// The property names of a schema of [`schema_of`].
pub fn property_names(schema: &Map<String, Value>) -> Vec<String> {
    match schema.get("properties") {
        Some(Value::Object(p)) => p.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// Whether the algorithm's own parameters (schema of [`schema_of`]) include `name`; the generic
/// option of that name then does not apply.
pub fn declares(own: &Map<String, Value>, name: &str) -> bool {
    matches!(own.get("properties"), Some(Value::Object(p)) if p.contains_key(name))
}

/// Which generic options an algorithm takes: not declared by itself, records-only ones only
/// when it runs on records, and `eigenvalue_share` only when its eigenvalues are not free.
pub fn generic_applies(info: &AlgorithmInfo, own: &Map<String, Value>, name: &str) -> bool {
    if declares(own, name) {
        return false;
    }
    if RECORDS_ONLY.contains(&name) && !info.kinds.contains(&Kind::Records) {
        return false;
    }
    // The share of the private mean comes with the generic `center` only.
    if name == "center_share" && !generic_applies(info, own, "center") {
        return false;
    }
    !(name == "eigenvalue_share" && info.releases_eigenvalues)
}

/// The full published schema of an algorithm's `params`: its own parameters plus the generic
/// options that apply to it, closed (`additionalProperties: false`, as both are deserialized
/// with unknown fields refused).
pub fn published(info: &AlgorithmInfo, mut own: Map<String, Value>) -> Value {
    let generic = schema_of::<GenericParams>();
    let mut added = Map::new();
    if let Some(Value::Object(generic_properties)) = generic.get("properties") {
        for (name, schema) in generic_properties {
            if generic_applies(info, &own, name) {
                let mut schema = schema.clone();
                if name == "clip"
                    && !info.clip_by_default
                    && let Value::Object(fields) = &mut schema
                {
                    fields.insert("default".into(), "none".into());
                }
                added.insert(name.clone(), schema);
            }
        }
    }
    // A share is spent only by its option: sending it without the option switched on is
    // refused, and the schema says so.
    let mut dependent = Map::new();
    for (share, option, value) in [
        ("center_share", "center", Value::from("private")),
        ("eigenvalue_share", "with_eigenvalues", Value::Bool(true)),
    ] {
        if added.contains_key(share) {
            dependent.insert(
                share.into(),
                json!({ "required": [option], "properties": { option: { "const": value } } }),
            );
        }
    }
    if let Value::Object(properties) = own
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()))
    {
        properties.extend(added);
    }
    if !dependent.is_empty() {
        own.insert("dependentSchemas".into(), Value::Object(dependent));
    }
    own.entry("required").or_insert_with(|| Value::Array(Vec::new()));
    own.insert("additionalProperties".into(), Value::Bool(false));
    own.insert(
        "description".into(),
        format!("Parameters of `{}`.", info.name).into(),
    );
    Value::Object(own)
}

/// Removes the generic options the algorithm does not declare itself from a job's `params` and
/// deserializes them. A value of the wrong type is refused naming the field.
pub fn take_generic(
    own: &Map<String, Value>,
    params: &mut Map<String, Value>,
) -> Result<GenericParams, ConfigError> {
    let mut taken = Map::new();
    for name in property_names(&schema_of::<GenericParams>()) {
        // Taken even where it does not apply (a records-only option on a matrix, an
        // eigenvalue share where eigenvalues are free), so that the option's own check says
        // why it is refused.
        if !declares(own, &name)
            && let Some(value) = params.remove(&name)
        {
            taken.insert(name, value);
        }
    }
    serde_path_to_error::deserialize(Value::Object(taken)).map_err(|e| {
        let field = e.path().to_string();
        let expected = match field.split('.').next().unwrap_or_default() {
            "center" => "must be \"none\", \"private\" or an array of d finite numbers",
            "clip" => "must be \"auto\", \"none\" or {\"quantile\": q, \"share\": f} with q and f in (0, 1)",
            "with_eigenvalues" => "must be a boolean",
            _ => "must be a number strictly between 0 and 1",
        };
        ConfigError::invalid(format!("params.{field}"), expected)
    })
}

/// Reads a job's or study's `params` into `T`; an error names the field by its path
/// (`params.k`, or `params` for the whole object).
pub fn parse_params<T: serde::de::DeserializeOwned>(params: Value) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize(params).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            "params".to_string()
        } else {
            format!("params.{path}")
        };
        ConfigError::invalid(field, e.into_inner().to_string())
    })
}

#[cfg(test)]
#[path = "parameters_tests.rs"]
mod tests;
