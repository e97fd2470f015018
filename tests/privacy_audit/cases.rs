//! The points audited: for every algorithm in the registry and every relation it takes, the
//! default parameters, then each parameter a tenant can set at each extreme of its published
//! range, one at a time (every other parameter at its default). Extremes come from the published
//! JSON Schema (`DynAlgorithm::parameters`): minimum and maximum of ranges (just inside for an
//! exclusive bound), for an integer without a maximum the largest its format holds, every enum
//! value, both booleans; a share's companion option (`dependentSchemas`) is switched on with
//! it. Parameters whose schema is structural (centre, clip, dropouts, shares, graphs, learning
//! rates) get hand-picked extremes below. What `prepare` refuses is recorded and skipped.

use serde_json::{Map, Value, json};

use privpca::algorithms::DynAlgorithm;
use privpca::dataset::{Kind, Neighbours, Relation};

/// Features and records of the audit datasets: tiny, so trials are cheap; n = 64 lets every
/// simulated protocol reach its largest site count.
pub const D: usize = 3;
pub const N: usize = 64;
/// The audit's ρ: small, so the charged ε is small and a violation is visible in a few thousand
/// trials.
pub const RHO: f64 = 0.05;
/// The δ a job may spend (k_dp_pca's histograms), below the audit δ.
pub const JOB_DELTA: f64 = 1e-6;

/// One audited point.
#[derive(Clone)]
pub struct Point {
    pub algorithm: &'static dyn DynAlgorithm,
    pub neighbours: Neighbours,
    pub d: usize,
    pub n: usize,
    pub params: Value,
    /// What differs from the defaults ("defaults" for the base point).
    pub label: String,
}

/// The relations an algorithm takes, with the audit's public bounds: β = 1 and α = √d (every
/// row of norm ≤ β satisfies it), u = 1; `cape_agn`'s word-count model needs documents of 3
/// words (β = α = 3).
pub fn relations(algorithm: &dyn DynAlgorithm, d: usize) -> Vec<Neighbours> {
    let info = algorithm.info();
    let (beta, alpha) = if info.name == "cape_agn" {
        (3.0, 3.0)
    } else {
        (1.0, (d as f64).sqrt())
    };
    let mut out = Vec::new();
    if info.kinds.contains(&Kind::Records) {
        if info.relations.contains(&Relation::ReplaceOne) {
            out.push(Neighbours::ReplaceOne { beta, alpha });
        }
        if info.relations.contains(&Relation::AddRemove) {
            out.push(Neighbours::AddRemove { beta, alpha });
        }
    }
    if info.kinds.contains(&Kind::Matrix) && info.relations.contains(&Relation::Entry) {
        out.push(Neighbours::Entry { u: 1.0 });
    }
    out
}

/// The required parameters' values of the base point.
fn base(name: &str) -> Value {
    match name {
        "cape_agn" => json!({"k": 1, "model": "stm"}),
        _ => json!({"k": 1}),
    }
}

/// Hand-picked extremes of the structural parameters (None: derive from the schema).
fn structural(algorithm: &str, name: &str, d: usize) -> Option<Vec<Value>> {
    let sites_default = 3;
    Some(match name {
        "k" => vec![json!(1), json!(d), json!(u64::MAX)],
        "p" => vec![json!(1), json!(d), json!(u64::MAX)],
        "center" => vec![json!("private"), json!(vec![0.5; d]), json!(vec![-1e6; d])],
        "clip" => vec![
            json!("auto"),
            json!({"quantile": 1e-6, "share": 1e-6}),
            json!({"quantile": 1.0 - 1e-6, "share": 1.0 - 1e-6}),
        ],
        "dropouts" if algorithm == "federated_power" => vec![
            json!([{"site": 1, "round": 1}]),
            json!([{"site": sites_default, "round": 1}]),
        ],
        "dropouts" => vec![json!([1]), json!([sites_default])],
        "site_shares" => vec![json!([1e-6, 1.0, 1.0]), json!([1.0, 1.0, 1e6])],
        "partition" => vec![json!([[2], [0], [1]]), json!([[0, 1], [2]])],
        "graph" => vec![
            json!("ring"),
            json!("path"),
            json!("star"),
            json!("complete"),
            json!({"erdos_renyi": {"p": 1e-9, "seed": 0}}),
            json!({"erdos_renyi": {"p": 1.0, "seed": u64::MAX}}),
            json!({"matrix": vec![vec![1.0 / d as f64; d]; d]}),
        ],
        "learning_rate" => vec![
            json!({"offset": 0.0, "slope": 1e-12}),
            json!({"offset": 1e12, "slope": 0.0}),
            json!({"offset": 1e-12, "slope": 0.0}),
        ],
        "fraction_bits" => vec![json!(0), json!(52), json!(u32::MAX)],
        "consensus_clip" => vec![json!(1e-12), json!(1e12), json!(0.0)],
        "sigma2" => vec![json!(0.0), json!(1e6)],
        _ => return None,
    })
}

/// Parameters that need another one set with them (beyond `dependentSchemas`).
fn companions(name: &str, value: &Value) -> Vec<(&'static str, Value)> {
    match (name, value.as_str()) {
        ("model", Some("mog")) => vec![("sigma2", json!(0.1))],
        ("sigma2", _) => vec![("model", json!("mog"))],
        _ => Vec::new(),
    }
}

/// The largest value an integer format holds.
fn format_max(schema: &Map<String, Value>) -> Value {
    match schema.get("format").and_then(Value::as_str) {
        Some("uint32") => json!(u32::MAX),
        Some("int32") => json!(i32::MAX),
        Some("int64") => json!(i64::MAX),
        _ => json!(u64::MAX),
    }
}

/// The type names of a property ("integer", "number", …; "null" dropped).
fn types(schema: &Map<String, Value>) -> Vec<String> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}

/// Extremes of one property from its schema.
fn from_schema(schema: &Map<String, Value>) -> Vec<Value> {
    if let Some(Value::Array(values)) = schema.get("enum") {
        return values.iter().filter(|v| !v.is_null()).cloned().collect();
    }
    let t = types(schema);
    let num = |k: &str| schema.get(k).and_then(Value::as_f64);
    if t.iter().any(|t| t == "boolean") {
        return vec![json!(true), json!(false)];
    }
    if t.iter().any(|t| t == "integer") {
        let lo = schema.get("minimum").cloned().unwrap_or(json!(0));
        let hi = schema
            .get("maximum")
            .cloned()
            .unwrap_or_else(|| format_max(schema));
        return vec![lo, hi];
    }
    if t.iter().any(|t| t == "number") {
        let lo = match (num("minimum"), num("exclusiveMinimum")) {
            (Some(m), _) => m,
            (None, Some(m)) => m + (m.abs() * 1e-6).max(1e-6),
            (None, None) => -1e6,
        };
        let hi = match (num("maximum"), num("exclusiveMaximum")) {
            (Some(m), _) => m,
            (None, Some(m)) => m - (m.abs() * 1e-6).max(1e-6),
            (None, None) => 1e6,
        };
        return vec![json!(lo), json!(hi)];
    }
    Vec::new()
}

/// Every point of one algorithm under one relation: the defaults, then one parameter at a time.
pub fn points_of(
    algorithm: &'static dyn DynAlgorithm,
    neighbours: Neighbours,
    d: usize,
    n: usize,
) -> Vec<Point> {
    let info = algorithm.info();
    let schema = algorithm.parameters();
    let base = base(info.name);
    let point = |params: Value, label: String| Point {
        algorithm,
        neighbours,
        d,
        n,
        params,
        label,
    };
    let mut out = vec![point(base.clone(), "defaults".into())];
    let empty = Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let dependent = schema
        .get("dependentSchemas")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    for (name, property) in properties {
        let property = property.as_object().unwrap_or(&empty);
        let values = structural(info.name, name, d).unwrap_or_else(|| from_schema(property));
        for value in values {
            let mut params = base.clone();
            params[name.as_str()] = value.clone();
            let mut label = format!("{name}={value}");
            if let Some(dep) = dependent.get(name) {
                for (option, constraint) in dep["properties"].as_object().unwrap_or(&empty) {
                    params[option.as_str()] = constraint["const"].clone();
                    label.push_str(&format!(", {option}={}", constraint["const"]));
                }
            }
            for (option, v) in companions(name, &value) {
                label.push_str(&format!(", {option}={v}"));
                params[option] = v;
            }
            out.push(point(params, label));
        }
    }
    out
}

/// Every point of every algorithm in the registry.
pub fn all_points() -> Vec<Point> {
    let mut out = Vec::new();
    for &algorithm in privpca::algorithms::registry() {
        for neighbours in relations(algorithm, D) {
            out.extend(points_of(algorithm, neighbours, D, N));
        }
    }
    out
}

/// Extremes whose runs take tens of times as long as the defaults' in a debug build (most
/// sites, most iterations, most gossip rounds). Matched on the point's label.
const SLOW: [&str; 5] = [
    "sites=64",
    "iterations=200",
    "iterations=1000",
    "gossip_rounds=10000",
    "power_iterations=1000",
];

/// Whether `point` is one of the [`SLOW`] extremes.
pub fn slow(point: &Point) -> bool {
    SLOW.iter()
        .any(|s| point.label == *s || point.label.starts_with(&format!("{s},")))
}

/// The trials per side asked for at `point`: the profile's count, a tenth of it at the
/// [`SLOW`] extremes. `audit_job` raises it to the floor at which the point's charge can be
/// shown (`job::trial_floor`). A function of the point alone, never of a clock.
pub fn trials(point: &Point, effort: &super::job::Effort) -> usize {
    if slow(point) {
        effort.trials / 10
    } else {
        effort.trials
    }
}

/// Points the profile does not audit, and why: in the fast profile (fewer than 1 000 trials
/// asked), the 64-site extremes, whose runs take seconds each in a debug build, so that even
/// their floor of trials would take minutes per point. The thorough profile audits them.
pub fn too_slow(point: &Point, effort: &super::job::Effort) -> Option<String> {
    let sites64 = point.label == "sites=64" || point.label.starts_with("sites=64,");
    (sites64 && effort.trials < 1000)
        .then(|| "fast profile: 64-site runs take seconds each; audited in the thorough profile".to_string())
}
