use serde_json::{Map, Value, json};

use super::*;
use crate::algorithms::testing::{AR, EN, RO, ctx, target};
use crate::algorithms::{ConfigError, DynAlgorithm, registry};
use crate::dataset::{DataContext, Relation};

fn properties(schema: &Value) -> &Map<String, Value> {
    schema["properties"].as_object().expect("an object schema")
}

/// A context the algorithm runs on: records with a public n when it takes records, a matrix
/// otherwise; public when the algorithm insists.
fn context_for(algorithm: &dyn DynAlgorithm) -> DataContext {
    let info = algorithm.info();
    let neighbours = if info.kinds.contains(&Kind::Records) {
        if info.relations.contains(&Relation::ReplaceOne) {
            RO
        } else {
            AR
        }
    } else {
        EN
    };
    let mut c = ctx(8, Some(4000), neighbours);
    c.public = info.public_only;
    c
}

#[test]
fn every_published_schema_is_closed_and_documented() {
    for algorithm in registry() {
        let name = algorithm.info().name;
        let schema = algorithm.parameters();
        assert_eq!(schema["type"], "object", "{name}");
        assert_eq!(schema["additionalProperties"], false, "{name}");
        assert!(
            schema.get("$defs").is_none() && !schema.to_string().contains("$ref"),
            "{name}: inlined"
        );
        let required: Vec<&str> = schema["required"]
            .as_array()
            .expect("required")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(required.contains(&"k"), "{name}: k is required");
        for (property, p) in properties(&schema) {
            let description = p["description"].as_str().unwrap_or_default();
            assert!(!description.is_empty(), "{name}.{property} has no description");
            assert!(!description.contains('\n'), "{name}.{property}: one line");
            let documented = required.contains(&property.as_str())
                || p.get("default").is_some()
                || ["Default", "default", "absent", "required", "only"]
                    .iter()
                    .any(|w| description.contains(w));
            assert!(
                documented,
                "{name}.{property}: say what happens when it is left out"
            );
        }
        assert_eq!(properties(&schema)["k"]["minimum"], json!(1), "{name}");
    }
}

#[test]
fn the_generic_options_are_published_where_they_apply() {
    let names = |algorithm: &str| -> Vec<String> {
        let a = crate::algorithms::find(algorithm).expect("registered");
        properties(&a.parameters()).keys().cloned().collect()
    };
    assert_eq!(
        names("noisy_power"),
        [
            "center",
            "center_share",
            "clip",
            "iterations",
            "k",
            "p",
            "sensitivity",
            "with_eigenvalues"
        ]
    );
    // exact declares its own boolean `center`: the generic one (and its share) are not offered.
    let exact = names("exact");
    assert!(exact.contains(&"center".to_string()) && !exact.contains(&"center_share".to_string()));
    let a = crate::algorithms::find("exact").unwrap();
    assert_eq!(properties(&a.parameters())["center"]["type"], "boolean");
    // noisy_power and analyze_gauss release eigenvalues for free: no share to spend on them;
    // k_dp_pca does not.
    assert!(!names("analyze_gauss").contains(&"eigenvalue_share".to_string()));
    assert!(names("k_dp_pca").contains(&"eigenvalue_share".to_string()));
    // A share is published only with what it depends on.
    let k_dp = crate::algorithms::find("k_dp_pca").unwrap().parameters();
    assert_eq!(
        k_dp["dependentSchemas"]["eigenvalue_share"]["properties"]["with_eigenvalues"]["const"],
        true
    );
    assert_eq!(
        k_dp["dependentSchemas"]["center_share"]["properties"]["center"]["const"],
        "private"
    );
    // dp_oja's own clip is renamed `gradient_clip`; the generic row clip stays available.
    let oja = names("dp_oja");
    assert!(oja.contains(&"gradient_clip".to_string()) && oja.contains(&"clip".to_string()));
    // Documented unit enums are published as plain `enum`s, for generated clients.
    let noisy = crate::algorithms::find("noisy_power").unwrap().parameters();
    let sensitivity = &noisy["properties"]["sensitivity"];
    assert_eq!(
        sensitivity["enum"],
        json!(["auto", "row_norm", "rank_one", "hardt_price"]),
        "{sensitivity}"
    );
    assert!(sensitivity.get("oneOf").is_none() && sensitivity["default"] == "auto");
    // cape_agn's model is required and enumerated.
    let agn = crate::algorithms::find("cape_agn").unwrap().parameters();
    assert!(agn["required"].as_array().unwrap().contains(&json!("model")));
    assert_eq!(agn["properties"]["model"]["enum"], json!(["stm", "mog"]));
}

/// The schema and the deserializer are one type, so a published name is always accepted and
/// anything else refused; this checks the registry's split between generic options and the
/// algorithm's own parameters keeps that true, and that every published default is a value
/// the server takes.
#[test]
fn published_names_and_defaults_are_accepted_and_unknown_names_refused() {
    for algorithm in registry() {
        let name = algorithm.info().name;
        let c = context_for(*algorithm);
        let schema = algorithm.parameters();
        for (property, p) in properties(&schema) {
            let Some(default) = p.get("default") else { continue };
            let mut params = json!({"k": 1});
            params[property] = default.clone();
            // What the property depends on (a share needs its option switched on).
            if let Some(Value::Object(needs)) = schema["dependentSchemas"][property].get("properties") {
                for (other, rule) in needs {
                    params[other] = rule["const"].clone();
                }
            }
            if let Err(ConfigError::Invalid { field, message }) = algorithm.prepare(params, &c, &target(1.0))
            {
                assert_ne!(
                    field,
                    format!("params.{property}"),
                    "{name}: the published default {default} of {property} is refused: {message}"
                );
            }
        }
        let refused = algorithm.prepare(json!({"k": 1, "no_such_parameter": 1}), &c, &target(1.0));
        assert!(
            matches!(&refused, Err(ConfigError::Invalid { message, .. }) if message.contains("no_such_parameter")),
            "{name}: {refused:?}"
        );
    }
}

#[test]
fn generic_options_of_the_wrong_type_are_refused_naming_the_field() {
    let noisy = crate::algorithms::find("noisy_power").unwrap();
    let c = ctx(4, Some(100), RO);
    for (params, field) in [
        (json!({"k": 1, "center": 3}), "params.center"),
        (json!({"k": 1, "center": "sometimes"}), "params.center"),
        (json!({"k": 1, "clip": {"quantile": 0.5}}), "params.clip"),
        (
            json!({"k": 1, "clip": {"quantile": 0.5, "share": 0.1, "steps": 3}}),
            "params.clip",
        ),
        (
            json!({"k": 1, "with_eigenvalues": "yes"}),
            "params.with_eigenvalues",
        ),
        (
            json!({"k": 1, "with_eigenvalues": true, "eigenvalue_share": "half"}),
            "params.eigenvalue_share",
        ),
        (
            json!({"k": 1, "center": "private", "center_share": 1.5}),
            "params.center_share",
        ),
        (
            json!({"k": 1, "clip": {"quantile": 1.0, "share": 0.1}}),
            "params.clip.quantile",
        ),
    ] {
        match noisy.prepare(params.clone(), &c, &target(1.0)) {
            Err(ConfigError::Invalid { field: got, .. }) => assert_eq!(got, field, "{params}"),
            other => panic!("{params}: {other:?}"),
        }
    }
    for ok in [
        json!({"k": 1, "center": "none", "clip": "none", "with_eigenvalues": false}),
        json!({"k": 1, "center": [0.0, 0.0, 0.0, 0.0]}),
        json!({"k": 1, "center": "private", "center_share": 0.2, "clip": "auto"}),
        json!({"k": 1, "clip": {"quantile": 0.9, "share": 0.1}, "with_eigenvalues": true}),
        json!({"k": 1, "center": null, "clip": null, "with_eigenvalues": null}),
    ] {
        let prepared = noisy.prepare(ok.clone(), &c, &target(1.0));
        assert!(prepared.is_ok(), "{ok}: {prepared:?}");
    }
    // noisy_power's eigenvalues are free: a share for them is refused, as the schema says.
    let share = noisy.prepare(
        json!({"k": 1, "with_eigenvalues": true, "eigenvalue_share": 0.1}),
        &c,
        &target(1.0),
    );
    assert!(matches!(share, Err(ConfigError::Invalid { field, .. }) if field == "params.eigenvalue_share"));
}
