//! The OpenAPI document, generated from the handlers' annotations. Committed at
//! `openapi/openapi.json` (regenerate with `privpca openapi > openapi/openapi.json`); a test
//! fails when the committed copy drifts.
//!
//! The document is a contract for generated clients (openapi-python-client, schemathesis):
//! the annotations give each operation its id, tag, request schema with limits and success
//! responses; [`contract`] then applies the rules that hold for every route, so that none can
//! forget them: error responses are `application/problem+json` problem documents, the answers
//! of the framework and middleware (malformed JSON, missing key, timeouts, oversize bodies,
//! wrong media type, database busy) are listed where they can occur, and the cross-field rules
//! JSON Schema can state (a records dataset needs a row bound, a private one a budget; each
//! algorithm's `params`) are attached to the request schemas.

use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

use serde_json::{Map, Value, json};

use super::routes::Groups;
use super::{datasets, error, params, privacy_input};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "privpca",
        description = "Private PCA as a service: principal components under differential privacy, with a zCDP \
                       budget ledger per dataset. Errors are RFC 9457 problem documents.",
        license(name = "Apache-2.0")
    ),
    components(schemas(error::ProblemDocument, privacy_input::BudgetInput, privacy_input::PrivacyInput,
        privacy_input::PrivacyAmount, datasets::UploadFormat)),
    modifiers(&Security),
    tags(
        (name = "tenants", description = "Tenants and API keys (admin)"),
        (name = "datasets", description = "Datasets, uploads, budgets and ledgers"),
        (name = "jobs", description = "Private PCA jobs"),
        (name = "studies", description = "Multi-site studies: the data stays at the sites, which run `privpca site`"),
        (name = "sites", description = "The site protocol (site tokens only; used by `privpca site`)"),
        (name = "algorithms", description = "What can run"),
        (name = "privacy", description = "Data-free planning"),
        (name = "meta", description = "Health and readiness"),
    )
)]
pub struct ApiDoc;

struct Security;

impl Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme("api_key", SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)));
        components.add_security_scheme(
            "site_token",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
        components.add_security_scheme(
            "admin_key",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

/// The document served at `/openapi.json` and committed: the routes' operations
/// (`routes.rs`) in [`ApiDoc`], with the [`contract`] rules applied.
pub fn document_value() -> Value {
    finish(Groups::new().merge().into_openapi())
}

/// The finished document from the routes' operations (`paths`): [`ApiDoc`]'s information,
/// tags and shared schemas joined to them, then the [`contract`] rules applied.
pub fn finish(paths: utoipa::openapi::OpenApi) -> Value {
    let mut doc = serde_json::to_value(ApiDoc::openapi().merge_from(paths)).unwrap_or_default();
    contract(&mut doc);
    doc
}

/// The document as committed: pretty JSON with a trailing newline.
pub fn document() -> String {
    let mut text = serde_json::to_string_pretty(&document_value()).unwrap_or_default();
    text.push('\n');
    text
}

/// Operations that spend or store per tenant and are rate limited (429 with a problem document).
const RATE_LIMITED: [&str; 3] = ["submit_job", "create_study", "upload_dataset_data"];
/// Operations that touch neither the database nor a timeout-bound body.
const STATELESS: [&str; 2] = ["get_health", "list_algorithms"];

/// A problem-document response.
fn problem(description: &str) -> Value {
    json!({
        "description": description,
        "content": { "application/problem+json": { "schema": { "$ref": "#/components/schemas/ProblemDocument" } } }
    })
}

fn status_description(status: u16) -> &'static str {
    match status {
        400 => "Malformed request (the body is not well-formed JSON)",
        401 => "Missing or unknown key",
        403 => "The key may not do this",
        404 => "No such resource (or not this tenant's)",
        406 => "No acceptable representation",
        408 => "The request took longer than the configured limit",
        409 => "Conflict with the resource's state (or over budget)",
        413 => "The body is larger than the configured limit",
        415 => "Unsupported Content-Type",
        422 => "A value is out of range or inconsistent (the problem's `field` names it)",
        429 => "Too many requests from this tenant; retry after `Retry-After` seconds",
        503 => "Busy or unavailable (database busy, queue full); retry after `Retry-After` seconds",
        _ => "Error",
    }
}

/// Applies the rules every operation follows (see the module docs).
pub fn contract(doc: &mut Value) {
    if let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) {
        for (path, item) in paths.iter_mut() {
            let operations = item
                .as_object_mut()
                .into_iter()
                .flat_map(|item| item.values_mut());
            for op in operations.filter_map(Value::as_object_mut) {
                document_errors(path, op);
            }
        }
    }
    document_binary_bodies(doc);
    if let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        attach_schema_rules(schemas);
    }
}

/// The upload's body and the results' `.npy` representation: bytes, which the annotations
/// cannot state.
fn document_binary_bodies(doc: &mut Value) {
    if let Some(op) = doc.pointer_mut("/paths/~1v1~1datasets~1{id}~1data/put") {
        op["requestBody"] = json!({
            "description": "The data file. Generated clients send it as application/octet-stream: a `.npy` file is recognised by its magic string and Matrix Market by its `%%MatrixMarket` banner; CSV and JSON are named with `?format=`. `text/csv`, `application/json` (an array of rows), `application/x-npy` and `application/x-matrix-market` (a sparse symmetric matrix, coordinate format, for matrix datasets; stored sparse) are accepted too.",
            "required": true,
            "content": {
                // Only octet-stream: the SDK generator refuses other content types here, and
                // the description names the rest.
                "application/octet-stream": { "schema": { "type": "string", "format": "binary" } }
            }
        });
    }
    for result in [
        "/paths/~1v1~1jobs~1{id}~1result/get",
        "/paths/~1v1~1studies~1{id}~1result/get",
    ] {
        if let Some(content) = doc.pointer_mut(&format!("{result}/responses/200/content")) {
            content["application/x-npy"] = json!({ "schema": { "type": "string", "format": "binary" } });
        }
    }
}

/// Each algorithm's parameter schema as a component, and the cross-field rules of the request
/// schemas.
fn attach_schema_rules(schemas: &mut Map<String, Value>) {
    for (name, schema) in params::all_parameter_schemas() {
        schemas.insert(params::component_name(name), schema);
    }
    if let Some(create) = schemas.get_mut("CreateDataset") {
        create["allOf"] = dataset_rules();
    }
    let job_params = params_by_algorithm(&params::job_algorithms());
    if let Some(plan) = schemas.get_mut("PlanRequest") {
        plan["allOf"] = plan_rules(&job_params);
    }
    if let Some(submit) = schemas.get_mut("SubmitJob") {
        submit["allOf"] = job_params;
    }
    if let Some(study) = schemas.get_mut("CreateStudy") {
        study["allOf"] = params_by_algorithm(&crate::algorithms::study_algorithms());
    }
}

/// A records dataset needs a row bound (a matrix none), a private one a budget.
fn dataset_rules() -> Value {
    json!([
        {
            "if": { "properties": { "kind": { "const": "records" } } },
            "then": {
                "required": ["row_norm_bound"],
                "properties": {
                    "row_norm_bound": { "type": "number" },
                    "entry_bound": { "type": "null" },
                    "relation": { "enum": ["replace_one", "add_remove", null] }
                }
            },
            "else": {
                "properties": {
                    "row_norm_bound": { "type": "null" },
                    "row_l1_bound": { "type": "null" },
                    "relation": { "enum": ["entry", null] }
                }
            }
        },
        {
            "if": { "required": ["public"], "properties": { "public": { "const": true } } },
            "then": { "properties": { "budget": { "type": "null" } } },
            "else": { "required": ["budget"], "properties": { "budget": { "type": "object" } } }
        }
    ])
}

/// A plan follows a submission's `params` rules, and without a dataset states its privacy.
fn plan_rules(job_params: &Value) -> Value {
    // schemathesis (4.32) gives up on the plan's rules (one more than a submission's) when
    // every algorithm's params also carry both share dependencies; the plan's copies keep
    // the `center_share` one and describe the other in words. The server refuses
    // `eigenvalue_share` without `with_eigenvalues: true` with 422 naming the field.
    let mut rules = job_params.as_array().cloned().unwrap_or_default();
    for rule in &mut rules {
        if let Some(Value::Object(dependent)) = rule.pointer_mut("/then/properties/params/dependentSchemas") {
            dependent.remove("eigenvalue_share");
        }
    }
    rules.push(json!({
        "if": { "properties": { "dataset_id": { "type": "null" } } },
        "then": { "required": ["privacy"], "properties": { "privacy": { "type": "object" } } }
    }));
    // The rules that involve the stated shape stay in words: without a dataset or `data`, no
    // algorithm can be priced; a target needs a scenario; a scenario needs `data` or a
    // dataset. Naming `data` in a conditional, or one more rule, and schemathesis (4.32)
    // generates nothing for the plan. The server refuses a request that breaks one with 422
    // naming the field.
    Value::Array(rules)
}

/// `allOf` rules: when `algorithm` is one of `names`, `params` follows that algorithm's schema
/// (inlined: test generators do not follow references inside conditionals).
fn params_by_algorithm(names: &[&str]) -> Value {
    let schemas = params::all_parameter_schemas();
    Value::Array(
        names
            .iter()
            .filter_map(|name| schemas.iter().find(|(n, _)| n == name))
            .map(|(name, schema)| {
                let needs_params = schema["required"].as_array().is_some_and(|r| !r.is_empty());
                let required: Vec<&str> = if needs_params { vec!["params"] } else { vec![] };
                // Spelled out, not a `$ref` to the component: schemathesis (4.32) cannot
                // canonicalize a dozen such references under `if`/`then` and would generate
                // no submissions at all.
                json!({
                    "if": { "required": ["algorithm"], "properties": { "algorithm": { "const": name } } },
                    "then": { "required": required, "properties": { "params": schema } }
                })
            })
            .collect(),
    )
}

/// Lists every error an operation can answer, each as a problem document.
fn document_errors(path: &str, op: &mut Map<String, Value>) {
    let statuses = error_statuses(path, op);
    let Some(responses) = op.entry("responses").or_insert_with(|| json!({})).as_object_mut() else {
        return;
    };
    for status in statuses {
        responses.entry(status.to_string()).or_insert(Value::Null);
    }
    for (status, response) in responses.iter_mut() {
        let Ok(code) = status.parse::<u16>() else { continue };
        if code >= 400 {
            *response = problem(status_description(code));
            if code == 429 || code == 503 {
                response["headers"] = json!({ "Retry-After": {
                    "description": "Seconds to wait before retrying",
                    "schema": { "type": "integer", "minimum": 0 }
                }});
            }
        }
    }
}

/// The error statuses an operation can answer besides those its annotation lists: each rule
/// names what in the operation makes the statuses possible.
fn error_statuses(path: &str, op: &Map<String, Value>) -> Vec<u16> {
    let id = op.get("operationId").and_then(Value::as_str).unwrap_or_default();
    let params = op
        .get("parameters")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let security = op.get("security");
    let json_body = op
        .get("requestBody")
        .and_then(|b| b.pointer("/content/application~1json"))
        .is_some();
    let rules: [(bool, &[u16]); 8] = [
        (json_body, &[400, 413, 415, 422]),
        (id == "upload_dataset_data", &[413, 415, 422]),
        (
            security.and_then(Value::as_array).is_some_and(|s| !s.is_empty()),
            &[401],
        ),
        (
            security.is_some_and(|s| s.to_string().contains("admin_key")),
            &[403],
        ),
        (
            params.iter().any(|p| p["in"] == "path") || path.contains('{'),
            &[404],
        ),
        (
            params.iter().any(|p| p["in"] == "query" || p["in"] == "header"),
            &[422],
        ),
        (RATE_LIMITED.contains(&id), &[429]),
        (!STATELESS.contains(&id), &[408, 503]),
    ];
    rules
        .into_iter()
        .filter(|(applies, _)| *applies)
        .flat_map(|(_, statuses)| statuses.iter().copied())
        .collect()
}
