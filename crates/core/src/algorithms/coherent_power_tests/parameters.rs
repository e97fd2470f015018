//! Parameters and description: defaults, refusals naming their field, the listing.

use super::*;

#[test]
fn defaults_are_filled_in() {
    let (d, rho) = (16, 0.9);
    let c = ctx(d, None, EN);
    let prepared = CoherentPower
        .prepare(json!({"k": 2, "coherence_bound": 4}), &c, &target(rho))
        .expect("valid");
    assert_eq!(prepared.config["iterations"], DEFAULT_ITERATIONS);
    assert_eq!(prepared.config["eigenvalue_share"], DEFAULT_EIGENVALUE_SHARE);
    assert_eq!(prepared.config["coherence_search"], false);
    assert_eq!(prepared.config["coherence_candidates"], json!([4.0]));
    assert!((prepared.cost.rho - rho).abs() <= 1e-9 * rho);
    // One Gaussian scale per candidate, then the Laplace one.
    let noise = &prepared.noise;
    assert_eq!(noise.len(), 2);
    let multiplier = prepared.config["multiplier"].as_f64().expect("number");
    let epsilon = prepared.config["eigenvalue_epsilon"].as_f64().expect("number");
    assert_eq!(
        (noise[0].release.as_str(), noise[0].distribution.as_str()),
        (RELEASE, "gaussian")
    );
    assert_eq!(noise[0].count, 2 * DEFAULT_ITERATIONS as usize);
    assert_eq!(noise[0].multiplier, multiplier);
    // u·sqrt(C/d) = 1.5·sqrt(4/16) = 0.75.
    assert!((noise[0].sensitivity.expect("fixed") - 0.75).abs() < 1e-15);
    assert_eq!(
        (noise[1].release.as_str(), noise[1].distribution.as_str()),
        (EIGENVALUE_RELEASE, "laplace")
    );
    assert_eq!((noise[1].count, noise[1].sensitivity), (2, Some(1.5)));
    assert!((noise[1].multiplier - 1.0 / epsilon).abs() < 1e-12 / epsilon);

    // The search without a bound runs up to d.
    let prepared = CoherentPower
        .prepare(json!({"k": 1, "coherence_search": true}), &c, &target(rho))
        .expect("valid");
    assert_eq!(
        prepared.config["coherence_candidates"],
        json!([1.0, 2.0, 4.0, 8.0, 16.0])
    );
    assert_eq!(prepared.noise.len(), 6);
    assert!((prepared.cost.rho - rho).abs() <= 1e-9 * rho);
}

#[test]
fn invalid_parameters_name_their_field() {
    let c = ctx(6, None, AR);
    let cases = [
        (json!({"k": 0, "coherence_bound": 2}), "params.k"),
        (json!({"k": 7, "coherence_bound": 2}), "params.k"),
        (json!({"k": "two", "coherence_bound": 2}), "params.k"),
        (json!({"k": 2, "coherence_bound": 0.5}), "params.coherence_bound"),
        (json!({"k": 2, "coherence_bound": 7}), "params.coherence_bound"),
        (json!({"k": 2, "coherence_bound": -1}), "params.coherence_bound"),
        (json!({"k": 2, "coherence_bound": "4"}), "params.coherence_bound"),
        (
            json!({"k": 2, "coherence_bound": 0, "coherence_search": true}),
            "params.coherence_bound",
        ),
        (
            json!({"k": 2, "coherence_bound": 2, "iterations": 0}),
            "params.iterations",
        ),
        (
            json!({"k": 2, "coherence_bound": 2, "iterations": 1001}),
            "params.iterations",
        ),
        (
            json!({"k": 2, "coherence_bound": 2, "iterations": 2.5}),
            "params.iterations",
        ),
        (
            json!({"k": 2, "coherence_bound": 2, "eigenvalue_share": 0}),
            "params.eigenvalue_share",
        ),
        (
            json!({"k": 2, "coherence_bound": 2, "eigenvalue_share": 1}),
            "params.eigenvalue_share",
        ),
        (
            json!({"k": 2, "coherence_bound": 2, "eigenvalue_share": -0.1}),
            "params.eigenvalue_share",
        ),
        (
            json!({"k": 2, "coherence_bound": 2, "eigenvalue_share": 1.5}),
            "params.eigenvalue_share",
        ),
        (
            json!({"k": 2, "coherence_bound": 2, "coherence_search": "yes"}),
            "params.coherence_search",
        ),
    ];
    assert_invalid_fields(&CoherentPower, &c, &target(1.0), cases);
    // Missing k and unknown fields are errors on the parameter object, naming the field.
    let unknown = json!({"k": 2, "coherence_bound": 2, "p": 3});
    assert_k_required_and_unknown_refused(&CoherentPower, &c, unknown, "p");
    // NaN cannot come through JSON, but configure rejects it too (positive-form checks).
    let nan_bound = CoherentPower.configure(params(2, 3, Some(f64::NAN), false), &c, &target(1.0));
    assert_eq!(
        invalid_field(&nan_bound.expect_err("NaN C")),
        "params.coherence_bound"
    );
    let nan_share = CoherentPowerParams {
        eigenvalue_share: Some(f64::NAN),
        ..params(2, 3, Some(2.0), false)
    };
    let e = CoherentPower
        .configure(nan_share, &c, &target(1.0))
        .expect_err("NaN share");
    assert_eq!(invalid_field(&e), "params.eigenvalue_share");
    // The budget and the bounds are validated too.
    for rho in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let e = rejected(&CoherentPower, json!({"k": 2, "coherence_bound": 2}), &c, rho);
        assert_eq!(invalid_field(&e), "rho");
    }
    let bad = ctx(6, None, Neighbours::Entry { u: f64::NAN });
    let e = rejected(&CoherentPower, json!({"k": 2, "coherence_bound": 2}), &bad, 1.0);
    assert_eq!(invalid_field(&e), "bounds.entry_bound");
    let bad = ctx(6, None, ro(1.0, 0.0));
    let e = rejected(&CoherentPower, json!({"k": 2, "coherence_bound": 2}), &bad, 1.0);
    assert_eq!(invalid_field(&e), "bounds.row_l1_bound");
}

/// coherent_power supports every kind and relation (the eq.-12 bound u_eff exists for all
/// three), so `prepare` never answers `Unsupported`; the listing describes every parameter.
#[test]
fn info_is_complete_and_every_kind_is_supported() {
    let info = CoherentPower::INFO;
    assert_eq!(info.name, "coherent_power");
    assert!(!info.public_only);
    assert!(find("coherent_power").is_some(), "registered");
    assert!(!info.summary.is_empty() && info.source.contains("Fig. 2") && info.source.contains("Remark 4.5"));
    assert!(info.privacy.contains("ρ"));
    for neighbours in [AR, RO, EN] {
        assert!(info.kinds.contains(&neighbours.kind()) && info.relations.contains(&neighbours.relation()));
        let prepared = CoherentPower.prepare(
            json!({"k": 1, "coherence_bound": 3}),
            &ctx(4, None, neighbours),
            &target(1.0),
        );
        assert!(prepared.is_ok(), "{neighbours:?}: {prepared:?}");
    }
    let schema = crate::algorithms::parameters::schema_of::<CoherentPowerParams>();
    assert_eq!(
        crate::algorithms::parameters::property_names(&schema),
        [
            "coherence_bound",
            "coherence_search",
            "eigenvalue_share",
            "iterations",
            "k"
        ]
    );
    // Every listed name is a real parameter: an object using all of them parses.
    let all = json!({"k": 1, "iterations": 3, "coherence_bound": 2, "coherence_search": true, "eigenvalue_share": 0.2});
    assert!(
        CoherentPower
            .prepare(all, &ctx(4, None, EN), &target(1.0))
            .is_ok()
    );
}
