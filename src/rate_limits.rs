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
#[path = "rate_limits_tests.rs"]
mod tests;
