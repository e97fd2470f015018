use super::*;

fn limits(per_minute: u32, burst: u32) -> RateLimits {
    let mut config = Config::for_tests(std::path::Path::new("/nonexistent"));
    config.job_rate_per_minute = per_minute;
    config.job_burst = burst;
    config.upload_rate_per_minute = 0;
    RateLimits::from_config(&config)
}

/// `times` checks of `action` by `tenant` in a row all pass.
fn assert_admits(limits: &RateLimits, action: Action, tenant: Uuid, times: usize) {
    for _ in 0..times {
        limits.check(action, tenant).unwrap();
    }
}

#[test]
fn a_burst_passes_then_the_next_waits_for_the_rate() {
    let limits = limits(6, 3);
    let tenant = Uuid::new_v4();
    assert_admits(&limits, Action::Submission, tenant, 3);
    let refused = limits.check(Action::Submission, tenant).unwrap_err();
    assert_eq!(refused.kind, ErrorKind::RateLimited);
    // 6 per minute: one token every 10 s.
    let retry = refused.retry_after.unwrap();
    assert!((9..=10).contains(&retry), "{retry}");
}

#[test]
fn tenants_and_actions_have_their_own_buckets() {
    let limits = limits(1, 1);
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    limits.check(Action::Submission, a).unwrap();
    assert!(limits.check(Action::Submission, a).is_err());
    limits.check(Action::Submission, b).unwrap();
    // Uploads are unlimited here (rate 0).
    assert_admits(&limits, Action::Upload, a, 100);
}

#[test]
fn zero_rate_is_unlimited() {
    let limits = limits(0, 1);
    let tenant = Uuid::new_v4();
    assert_admits(&limits, Action::Submission, tenant, 1000);
}
