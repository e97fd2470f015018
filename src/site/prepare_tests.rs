use super::*;

/// Issue 22: a minority threshold is refused unless the operator allows it.
#[test]
fn a_minority_threshold_needs_the_operators_consent() {
    for (t, s) in [(2, 4), (1, 2), (3, 6), (2, 64)] {
        let refused = check_threshold(t, s, 0, false).expect_err("t ≤ S/2");
        assert_eq!(refused.code(), 2);
        assert!(
            refused.to_string().contains("--allow-minority-threshold"),
            "{refused}"
        );
        assert!(check_threshold(t, s, 0, true).is_ok());
    }
    for (t, s) in [(2, 3), (3, 4), (2, 2), (43, 64)] {
        assert!(check_threshold(t, s, 0, false).is_ok(), "t = {t}, S = {s}");
    }
}

/// With c colluding sites: t > c always, and 2t − c > S unless the operator allows less; the
/// default threshold ⌈2S/3⌉ meets the rule for c = 0 at every S.
#[test]
fn the_threshold_rule_counts_colluding_sites() {
    // S = 10, c = 2: t ≥ 7.
    assert!(check_threshold(7, 10, 2, false).is_ok());
    assert_eq!(check_threshold(6, 10, 2, false).unwrap_err().code(), 2);
    assert!(check_threshold(6, 10, 2, true).is_ok());
    // t ≤ c is refused even with the operator's consent.
    assert!(check_threshold(2, 10, 2, true).is_err());
    assert!(check_threshold(3, 3, 3, true).is_err());
    for s in 2..=64u32 {
        let default_t = (2 * s).div_ceil(3);
        assert!(check_threshold(default_t, s, 0, false).is_ok(), "S = {s}");
    }
}
