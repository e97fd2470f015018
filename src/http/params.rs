//! The published schemas of algorithm names and parameters. One mechanism serves both
//! `GET /v1/algorithms` and the OpenAPI document: [`parameter_schema`] turns an algorithm's
//! [`AlgorithmInfo::params`] (its own parameters plus the generic options the registry adds)
//! into a JSON Schema; the document carries it as the component `<algorithm>_params` and
//! selects it from `algorithm` (see `openapi::contract`).

use serde_json::{Map, Value, json};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};

use super::names::enum_schema;
use super::studies::STUDY_ALGORITHMS;
use crate::algorithms::{self, AlgorithmInfo};

/// Names a job may ask for: every registered algorithm, and `auto`.
pub fn job_algorithms() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = algorithms::registry().iter().map(|a| a.info().name).collect();
    names.push(algorithms::auto::AUTO);
    names
}

pub fn job_algorithm_schema() -> RefOr<Schema> {
    enum_schema(
        "An algorithm of `GET /v1/algorithms`, or `auto` (the service picks one from public facts).",
        &job_algorithms(),
    )
}

/// [`job_algorithm_schema`] or `null`.
pub fn optional_job_algorithm_schema() -> RefOr<Schema> {
    OneOfBuilder::new()
        .item(job_algorithm_schema())
        .item(ObjectBuilder::new().schema_type(Type::Null))
        .into()
}

pub fn study_algorithm_schema() -> RefOr<Schema> {
    enum_schema("An algorithm that runs across sites.", &STUDY_ALGORITHMS)
}

/// The component name of an algorithm's parameter schema.
pub fn component_name(algorithm: &str) -> String {
    format!("{algorithm}_params")
}

/// JSON Schema of an algorithm's `params`, with defaults and ranges.
pub fn parameter_schema(info: &AlgorithmInfo) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for p in &info.params {
        let mut prop = Map::new();
        prop.insert("type".into(), p.json_type.into());
        if p.json_type == "array" {
            prop.insert("items".into(), json!({}));
        }
        // A default derived from the data's shape ("min(d, 2k)") is not a value of the
        // parameter's type: it goes into the description, where people read it.
        match &p.default {
            Some(default) if fits_type(default, p.json_type) => {
                prop.insert("description".into(), p.description.into());
                prop.insert("default".into(), default.clone());
            }
            Some(Value::String(rule)) => {
                prop.insert(
                    "description".into(),
                    format!("{} Default: {rule}.", p.description).into(),
                );
            }
            _ => {
                prop.insert("description".into(), p.description.into());
            }
        }
        if let Some(min) = p.minimum {
            prop.insert("minimum".into(), min.into());
        }
        if let Some(allowed) = &p.allowed {
            prop.insert("enum".into(), allowed.clone().into());
        }
        if p.required {
            required.push(p.name);
        }
        properties.insert(p.name.into(), Value::Object(prop));
    }
    json!({ "type": "object", "properties": properties, "required": required, "additionalProperties": false })
}

/// Whether `value` is a value of the JSON Schema type `json_type`.
fn fits_type(value: &Value, json_type: &str) -> bool {
    match json_type {
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => false,
    }
}

/// `(name, params schema)` of every registered algorithm.
pub fn all_parameter_schemas() -> Vec<(&'static str, Value)> {
    algorithms::registry()
        .iter()
        .map(|a| {
            let info = a.info();
            (info.name, parameter_schema(&info))
        })
        .collect()
}
