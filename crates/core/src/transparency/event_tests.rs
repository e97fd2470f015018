//! Tests of ledger events as leaves: the canonical bytes of a known event, RFC 8785 number
//! formatting, exact units, reading a leaf back, and the checks of each kind.

use serde_json::json;

use super::*;

fn service() -> ServiceBuild {
    ServiceBuild {
        version: "0.2.0".to_string(),
        commit: "7976eef".to_string(),
    }
}

fn amounts(rho_units: i64, delta_units: i64) -> Amounts {
    Amounts {
        rho_units: Units(rho_units),
        other_rho_units: Some(Units(0)),
        delta_units: Units(delta_units),
        rho: rho_units as f64 / 1e12,
        delta: delta_units as f64 / 1e18,
    }
}

pub(crate) fn sample_charge() -> LedgerEvent {
    let mut event = LedgerEvent::new(EventKind::Charge, service());
    event.dataset = Some("0b7c6d2e-1f0a-4c3b-9a8d-5e6f7a8b9c0d".to_string());
    event.job = Some("4f1e2d3c-b5a6-4978-8a9b-0c1d2e3f4a5b".to_string());
    event.algorithm = Some("noisy_power".to_string());
    event.config = Some(json!({"k": 2, "p": 4, "iterations": 10, "multiplier": 7.0710678118654755}));
    event.bounds = Some(PublicBounds {
        relation: "replace_one".to_string(),
        d: Some(20),
        n: Some(1000),
        row_norm_bound: Some(1.0),
        row_l1_bound: None,
        entry_bound: None,
    });
    event.sensitivity = Some(json!(0.002));
    event.noise_scale = Some(json!({"multiplier": 7.0710678118654755}));
    event.rule = Some("zcdp".to_string());
    event.amount = Some(amounts(100_000_000_000, 0));
    event.achieved = Some(EpsilonDelta {
        epsilon: 1.5,
        delta: 1e-6,
    });
    event.spent_after = Some(amounts(300_000_000_000, 0));
    event
}

#[test]
fn a_charge_has_these_exact_canonical_bytes() {
    let leaf = leaf_bytes(&sample_charge()).expect("leaf");
    let expected = concat!(
        r#"{"achieved":{"delta":0.000001,"epsilon":1.5},"algorithm":"noisy_power","#,
        r#""amount":{"delta":0,"delta_units":"0","other_rho_units":"0","rho":0.1,"rho_units":"100000000000"},"#,
        r#""bounds":{"d":20,"n":1000,"relation":"replace_one","row_norm_bound":1},"#,
        r#""config":{"iterations":10,"k":2,"multiplier":7.0710678118654755,"p":4},"#,
        r#""dataset":"0b7c6d2e-1f0a-4c3b-9a8d-5e6f7a8b9c0d","format":"privpca/ledger-event/1","#,
        r#""job":"4f1e2d3c-b5a6-4978-8a9b-0c1d2e3f4a5b","kind":"charge","#,
        r#""noise_scale":{"multiplier":7.0710678118654755},"rule":"zcdp","sensitivity":0.002,"#,
        r#""service":{"commit":"7976eef","version":"0.2.0"},"#,
        r#""spent_after":{"delta":0,"delta_units":"0","other_rho_units":"0","rho":0.3,"rho_units":"300000000000"}}"#,
    );
    assert_eq!(String::from_utf8(leaf).expect("utf-8"), expected);
}

#[test]
fn numbers_are_written_as_rfc_8785_writes_them() {
    // The example of RFC 8785 §3.2.2.3 (ECMAScript's Number.prototype.toString).
    let numbers: Value =
        serde_json::from_str("[333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001]")
            .expect("json");
    let mut event = sample_charge();
    event.config = Some(json!({ "numbers": numbers, "tiny": 1e-7, "big": 1e21, "minus_zero": -0.0 }));
    let leaf = String::from_utf8(leaf_bytes(&event).expect("leaf")).expect("utf-8");
    assert!(
        leaf.contains(r#""config":{"big":1e+21,"minus_zero":0,"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"tiny":1e-7}"#),
        "{leaf}"
    );
}

#[test]
fn units_beyond_two_to_the_53_stay_exact() {
    let mut event = sample_charge();
    event.spent_after = Some(amounts(1_000_000_000_000_000_001, 999_999_999_999_999_999));
    let leaf = leaf_bytes(&event).expect("leaf");
    let text = String::from_utf8(leaf.clone()).expect("utf-8");
    assert!(text.contains(r#""rho_units":"1000000000000000001""#), "{text}");
    assert!(text.contains(r#""delta_units":"999999999999999999""#), "{text}");
    let back = LedgerEvent::from_leaf(&leaf).expect("reads back");
    assert_eq!(
        back.spent_after.map(|a| a.rho_units),
        Some(Units(1_000_000_000_000_000_001))
    );
}

#[test]
fn leaves_read_back_to_their_events() {
    let mut events = vec![sample_charge()];
    let mut budget = LedgerEvent::new(EventKind::BudgetSet, service());
    budget.dataset = sample_charge().dataset;
    budget.amount = Some(amounts(1_000_000_000_000, 1_000_000));
    budget.stated_budget = Some(EpsilonDelta {
        epsilon: 3.0,
        delta: 1e-12,
    });
    events.push(budget);
    let mut refund = LedgerEvent::new(EventKind::Refund, service());
    refund.dataset = sample_charge().dataset;
    refund.job = sample_charge().job;
    refund.amount = Some(amounts(100_000_000_000, 0));
    refund.reason = Some("the dataset was deleted before this job started".to_string());
    events.push(refund);
    let mut deletion = LedgerEvent::new(EventKind::Deletion, service());
    deletion.dataset = sample_charge().dataset;
    events.push(deletion);
    let mut study = LedgerEvent::new(EventKind::Charge, service());
    study.study = Some("9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a".to_string());
    study.site = Some(3);
    study.algorithm = Some("federated_power".to_string());
    study.amount = Some(amounts(50_000_000_000, 0));
    events.push(study);
    for event in events {
        let leaf = leaf_bytes(&event).expect("leaf");
        assert_eq!(LedgerEvent::from_leaf(&leaf), Ok(event));
    }
}

#[test]
fn a_leaf_not_in_canonical_form_is_refused() {
    let leaf = leaf_bytes(&sample_charge()).expect("leaf");
    let value: Value = serde_json::from_slice(&leaf).expect("json");
    let pretty = serde_json::to_vec_pretty(&value).expect("pretty");
    assert_eq!(LedgerEvent::from_leaf(&pretty), Err(EventError::NotCanonical));
    let mut spaced = leaf.clone();
    spaced.insert(1, b' ');
    assert_eq!(LedgerEvent::from_leaf(&spaced), Err(EventError::NotCanonical));
    let text = String::from_utf8(leaf).expect("utf-8");
    let unsorted = text.replacen(r#"{"achieved""#, r#"{"zzz":1,"achieved""#, 1);
    assert!(matches!(
        LedgerEvent::from_leaf(unsorted.as_bytes()),
        Err(EventError::Parse(_))
    ));
    let padded_units = text.replace(r#""rho_units":"100000000000""#, r#""rho_units":"0100000000000""#);
    assert!(matches!(
        LedgerEvent::from_leaf(padded_units.as_bytes()),
        Err(EventError::Parse(_))
    ));
    let other_format = text.replace("privpca/ledger-event/1", "privpca/ledger-event/2");
    assert!(matches!(
        LedgerEvent::from_leaf(other_format.as_bytes()),
        Err(EventError::Format(_))
    ));
    assert!(matches!(
        LedgerEvent::from_leaf(b"not json"),
        Err(EventError::Parse(_))
    ));
}

#[test]
fn each_kind_needs_its_facts() {
    let mut both = sample_charge();
    both.study = Some("s".to_string());
    assert_eq!(leaf_bytes(&both), Err(EventError::Subject));
    let mut neither = sample_charge();
    neither.dataset = None;
    assert_eq!(leaf_bytes(&neither), Err(EventError::Subject));
    let mut no_amount = sample_charge();
    no_amount.amount = None;
    assert!(matches!(leaf_bytes(&no_amount), Err(EventError::Missing { .. })));
    let mut no_job = sample_charge();
    no_job.job = None;
    assert!(matches!(leaf_bytes(&no_job), Err(EventError::Missing { .. })));
    let mut refund = sample_charge();
    refund.kind = EventKind::Refund;
    refund.job = None;
    assert!(matches!(leaf_bytes(&refund), Err(EventError::Missing { .. })));
    let mut deletion = sample_charge();
    deletion.kind = EventKind::Deletion;
    assert!(matches!(
        leaf_bytes(&deletion),
        Err(EventError::Unexpected { .. })
    ));
    let mut budget = sample_charge();
    budget.kind = EventKind::BudgetSet;
    assert!(matches!(leaf_bytes(&budget), Err(EventError::Unexpected { .. })));
    let mut site = sample_charge();
    site.site = Some(1);
    assert!(matches!(leaf_bytes(&site), Err(EventError::Unexpected { .. })));
}

#[test]
fn numbers_that_canonical_json_would_change_are_refused() {
    let mut nan = sample_charge();
    nan.achieved = Some(EpsilonDelta {
        epsilon: f64::NAN,
        delta: 0.0,
    });
    assert_eq!(leaf_bytes(&nan), Err(EventError::NotFinite("achieved")));
    let mut infinite = sample_charge();
    infinite.bounds.as_mut().expect("bounds").row_norm_bound = Some(f64::INFINITY);
    assert_eq!(leaf_bytes(&infinite), Err(EventError::NotFinite("bounds")));
    let mut big = sample_charge();
    big.config = Some(json!({"nested": [1, {"seedlike": 9_007_199_254_740_993_u64}]}));
    assert_eq!(leaf_bytes(&big), Err(EventError::InexactNumber("config")));
    let mut edge = sample_charge();
    edge.config = Some(json!([9_007_199_254_740_992_u64, -9_007_199_254_740_992_i64]));
    assert!(leaf_bytes(&edge).is_ok());
    let mut negative = sample_charge();
    negative.amount = Some(amounts(-1, 0));
    assert!(leaf_bytes(&negative).is_err());
    let mut format = sample_charge();
    format.format = "other".to_string();
    assert_eq!(leaf_bytes(&format), Err(EventError::Format("other".to_string())));
}

#[test]
fn unit_strings_are_canonical_decimals() {
    for good in ["0", "7", "9223372036854775807"] {
        assert!(parse_units(good).is_ok(), "{good}");
    }
    for bad in ["", "01", "-1", "+1", "1.0", "1e3", " 1", "9223372036854775808"] {
        assert!(parse_units(bad).is_err(), "{bad}");
    }
}
