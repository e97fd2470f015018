//! Per-tenant rate limits on the requests that queue work or write data: job submissions and
//! study creations share one token bucket per tenant, uploads have another (GCRA through the
//! `governor` crate, keyed by tenant id). Over the limit the check says how long until a token
//! is free; the HTTP layer runs it after authentication and before the body is read
//! (`http/rate_limit.rs`) and answers 429 with `Retry-After`.
//!
//! The buckets live in this process's memory: with several replicas each enforces its own
//! share, so the effective limit is the configured one times the number of replicas.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use uuid::Uuid;

use crate::app::error::{AppError, ErrorKind};
use crate::config::Config;

/// What a bucket limits; its name is the `action` label of the refusal counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `POST /v1/jobs` and `POST /v1/studies`.
    Submission,
    /// `PUT /v1/datasets/{id}/data`.
    Upload,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Submission => "submission",
            Self::Upload => "upload",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Self::Submission => "job submissions and study creations",
            Self::Upload => "uploads",
        }
    }
}

/// One action's bucket per tenant; `None` when the action is unlimited.
struct Bucket {
    limiter: DefaultKeyedRateLimiter<Uuid>,
    per_minute: u32,
    burst: NonZeroU32,
}

impl Bucket {
    fn new(per_minute: u32, burst: u32) -> Option<Self> {
        let rate = NonZeroU32::new(per_minute)?;
        let burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
        let quota = Quota::with_period(Duration::from_secs(60) / rate.get())?.allow_burst(burst);
        Some(Self {
            limiter: DefaultKeyedRateLimiter::keyed(quota),
            per_minute,
            burst,
        })
    }
}

/// The configured limits of this process.
pub struct RateLimits {
    submissions: Option<Bucket>,
    uploads: Option<Bucket>,
}

impl RateLimits {
    pub fn from_config(config: &Config) -> Self {
        Self {
            submissions: Bucket::new(config.job_rate_per_minute, config.job_burst),
            uploads: Bucket::new(config.upload_rate_per_minute, config.upload_burst),
        }
    }

    /// Takes one token of `tenant`'s bucket for `action`, or says how long until one is free.
    pub fn check(&self, action: Action, tenant: Uuid) -> Result<(), AppError> {
        let bucket = match action {
            Action::Submission => &self.submissions,
            Action::Upload => &self.uploads,
        };
        let Some(bucket) = bucket else { return Ok(()) };
        let Err(not_until) = bucket.limiter.check_key(&tenant) else {
            return Ok(());
        };
        let wait = not_until.wait_time_from(DefaultClock::default().now());
        // Round up, so a client that waits exactly Retry-After finds a token.
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let seconds = seconds.max(1);
        Err(AppError::new(
            ErrorKind::RateLimited,
            format!(
                "this tenant is over its rate of {}: {} per minute, bursts of {}; retry in {seconds} s",
                action.describe(),
                bucket.per_minute,
                bucket.burst
            ),
        )
        .with("limit_per_minute", bucket.per_minute)
        .with("burst", bucket.burst.get())
        .retry_after(seconds))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(per_minute: u32, burst: u32) -> RateLimits {
        let mut config = Config::for_tests(std::path::Path::new("/nonexistent"));
        config.job_rate_per_minute = per_minute;
        config.job_burst = burst;
        config.upload_rate_per_minute = 0;
        RateLimits::from_config(&config)
    }

    #[test]
    fn a_burst_passes_then_the_next_waits_for_the_rate() {
        let limits = limits(6, 3);
        let tenant = Uuid::new_v4();
        for _ in 0..3 {
            limits.check(Action::Submission, tenant).unwrap();
        }
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
        for _ in 0..100 {
            limits.check(Action::Upload, a).unwrap();
        }
    }

    #[test]
    fn zero_rate_is_unlimited() {
        let limits = limits(0, 1);
        let tenant = Uuid::new_v4();
        for _ in 0..1000 {
            limits.check(Action::Submission, tenant).unwrap();
        }
    }
}
