use super::*;

fn view() -> SiteStudyView {
    SiteStudyView {
        study_id: uuid::Uuid::from_u128(7),
        study_name: "s".into(),
        algorithm: "federated_power".into(),
        site_name: "a".into(),
        site_index: 1,
        n_sites: 3,
        threshold: 2,
        n_features: 4,
        relation: crate::dataset::Relation::ReplaceOne,
        row_norm_bound: 1.0,
        row_l1_bound: 2.0,
        config: serde_json::json!({"k": 1, "p": 2, "multiplier": 3.5}),
        cost_rho: 0.5,
        cost_delta: 0.0,
        fraction_bits: 36,
        max_site_samples: 1000,
        status: crate::store::StudyStatus::Running,
        site_status: crate::store::SiteStatus::Joined,
    }
}

fn member(index: u32, key: &str) -> Member {
    Member {
        index,
        name: format!("site-{index}"),
        keys: vec![key.into(), format!("{key}-mask")],
    }
}

fn roster() -> Vec<Member> {
    vec![member(1, "k1"), member(2, "k2"), member(3, "k3")]
}

#[test]
fn every_site_computes_the_same_hash_and_any_substitution_changes_it() {
    let base = transcript_hash(&view(), &roster());
    // Another site's view: its own name, index and statuses; members in another order;
    // the configuration's keys in another order.
    let mut other = view();
    other.site_name = "c".into();
    other.site_index = 3;
    other.status = crate::store::StudyStatus::Enrolling;
    other.config = serde_json::json!({"multiplier": 3.5, "p": 2, "k": 1});
    let mut reversed = roster();
    reversed.reverse();
    assert_eq!(transcript_hash(&other, &reversed), base);
    // A substituted key, a renamed or added member, or other terms: another hash.
    let mut swapped = roster();
    swapped[1].keys[0] = "evil".into();
    assert_ne!(transcript_hash(&view(), &swapped), base);
    let mut renamed = roster();
    renamed[2].name = "site-x".into();
    assert_ne!(transcript_hash(&view(), &renamed), base);
    let mut added = roster();
    added.push(member(4, "k4"));
    assert_ne!(transcript_hash(&view(), &added), base);
    let mut terms = view();
    terms.threshold = 3;
    assert_ne!(transcript_hash(&terms, &roster()), base);
    // Length prefixes: moving bytes between fields changes the hash.
    let mut shifted = roster();
    shifted[0].keys = vec!["k1k1-mask".into(), String::new()];
    assert_ne!(transcript_hash(&view(), &shifted), base);
}

#[test]
fn the_guard_fixes_the_first_roster_and_refuses_changes() {
    let me = member(1, "k1");
    let mut guard = RosterGuard::new(None);
    let hash = guard.observe(&view(), &roster(), &me).unwrap().expect("fixed");
    assert_eq!(hash, transcript_hash(&view(), &roster()));
    // The same roster again, or a subset (dropouts): accepted, nothing new to print.
    assert_eq!(guard.observe(&view(), &roster(), &me), Ok(None));
    assert_eq!(guard.observe(&view(), &roster()[..2], &me), Ok(None));
    assert!(guard.check_indices(&[1, 3], "round 2's roster").is_ok());
    // A member with another key, or one that was never there: refused.
    let mut swapped = roster();
    swapped[2].keys[1] = "evil".into();
    let err = guard.observe(&view(), &swapped, &me).unwrap_err();
    assert!(err.contains("key substitution"), "{err}");
    let mut added = roster();
    added.push(member(4, "k4"));
    assert!(guard.observe(&view(), &added, &me).is_err());
    assert!(guard.check_indices(&[1, 4], "round 2's roster").is_err());
}

#[test]
fn the_first_roster_must_list_this_site_as_it_is_and_match_the_expected_hash() {
    let me = member(1, "k1");
    let mut swapped_me = roster();
    swapped_me[0].keys[0] = "not mine".into();
    assert!(RosterGuard::new(None).observe(&view(), &swapped_me, &me).is_err());
    let mut twice = roster();
    twice.push(member(2, "k2"));
    assert!(RosterGuard::new(None).observe(&view(), &twice, &me).is_err());
    let mut too_many = roster();
    too_many.push(member(4, "k4"));
    let err = RosterGuard::new(None)
        .observe(&view(), &too_many, &me)
        .unwrap_err();
    assert!(err.contains("invited 3"), "{err}");

    let right = transcript_hash(&view(), &roster());
    let text = hex::encode(right);
    assert_eq!(parse_expected(&text), Ok(right));
    assert!(parse_expected("abc").is_err() && parse_expected(&text[..62]).is_err());
    let mut expecting = RosterGuard::new(Some(right));
    assert!(expecting.observe(&view(), &roster(), &me).is_ok());
    let mut other = roster();
    other[1].keys[0] = "evil".into();
    let err = RosterGuard::new(Some(right))
        .observe(&view(), &other, &me)
        .unwrap_err();
    assert!(err.contains("not the expected"), "{err}");
    let line = describe(&right, &roster());
    assert!(line.contains(&text) && line.contains("3 members"), "{line}");
}
