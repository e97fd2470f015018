//! The published schemas of algorithm names and parameters. One schema serves both
//! `GET /v1/algorithms` and the OpenAPI document: [`DynAlgorithm::parameters`](crate::algorithms::DynAlgorithm::parameters), derived from the
//! type the algorithm's `params` are deserialized into plus the generic options the registry
//! takes (see [`crate::algorithms::parameters`]); the document carries it as the component
//! `<algorithm>_params` and selects it from `algorithm` (see `openapi::contract`).

use serde_json::Value;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};

use crate::algorithms;
use privpca_core::names::enum_schema;

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
    enum_schema(
        "An algorithm that runs across sites.",
        &algorithms::study_algorithms(),
    )
}

/// The component name of an algorithm's parameter schema.
pub fn component_name(algorithm: &str) -> String {
    format!("{algorithm}_params")
}

/// `(name, params schema)` of every registered algorithm.
pub fn all_parameter_schemas() -> Vec<(&'static str, Value)> {
    algorithms::registry()
        .iter()
        .map(|a| {
            let info = a.info();
            (info.name, a.parameters())
        })
        .collect()
}
