use super::*;

/// Issue 22: a minority threshold is refused unless the operator allows it.
#[test]
fn a_minority_threshold_needs_the_operators_consent() {
    for (t, s) in [(2, 4), (1, 2), (3, 6), (2, 64)] {
        let refused = check_threshold(t, s, false).expect_err("t ≤ S/2");
        assert_eq!(refused.code(), 2);
        assert!(
            refused.to_string().contains("--allow-minority-threshold"),
            "{refused}"
        );
        assert!(check_threshold(t, s, true).is_ok());
    }
    for (t, s) in [(2, 3), (3, 4), (2, 2), (43, 64)] {
        assert!(check_threshold(t, s, false).is_ok(), "t = {t}, S = {s}");
    }
}
