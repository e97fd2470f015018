//! Prometheus metrics: jobs by state, job durations per algorithm, budget and rate-limit
//! refusals. Served to operators only, on their own listener (`http/operator.rs`,
//! `--metrics-bind`); even so, labels carry only public, data-independent names: algorithm
//! names, job states, refusal reasons and limited actions — never a dataset, tenant or job id.
//!
//! A job's run time grows with its dataset's row count n, which is private on `add_remove`
//! datasets (docs/design/privacy.md §3). Such jobs are counted in `jobs_finished` and
//! `job_durations_withheld` but never observed into the duration histogram, whose sum would
//! give their run time by difference between two scrapes.

use std::sync::Mutex;

use prometheus_client::encoding::{EncodeLabelSet, text::encode};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatusLabel {
    pub status: String,
}

/// A finished job: the algorithm that ran and its final state.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JobLabels {
    pub algorithm: String,
    pub status: String,
}

/// A refused charge: the algorithm asked for and which budget was short.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabels {
    pub algorithm: String,
    pub reason: String,
}

/// Why a charge was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalReason {
    /// The dataset's remaining ρ is below the job's.
    Rho,
    /// The dataset's remaining δ is below the job's.
    Delta,
    /// A study costs more than a site's declared budget.
    SiteBudget,
}

impl RefusalReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rho => "rho",
            Self::Delta => "delta",
            Self::SiteBudget => "site_budget",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ActionLabel {
    pub action: String,
}

/// Job durations from 1 ms to about 35 min, doubling.
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 22))
}

pub struct Metrics {
    registry: Mutex<Registry>,
    jobs: Family<StatusLabel, Gauge>,
    finished: Family<StatusLabel, Counter>,
    duration: Family<JobLabels, Histogram, fn() -> Histogram>,
    untimed: Family<JobLabels, Counter>,
    refusals: Family<RefusalLabels, Counter>,
    rate_limited: Family<ActionLabel, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("privpca");
        let jobs = Family::<StatusLabel, Gauge>::default();
        let finished = Family::<StatusLabel, Counter>::default();
        let duration =
            Family::<JobLabels, Histogram, fn() -> Histogram>::new_with_constructor(duration_histogram);
        let untimed = Family::<JobLabels, Counter>::default();
        let refusals = Family::<RefusalLabels, Counter>::default();
        let rate_limited = Family::<ActionLabel, Counter>::default();
        registry.register("jobs", "Jobs by state (from the database)", jobs.clone());
        registry.register(
            "jobs_finished",
            "Jobs this process finished, by final state",
            finished.clone(),
        );
        registry.register(
            "job_duration_seconds",
            "Run time of jobs this process finished, by algorithm and final state (jobs on datasets whose row count is private are left out)",
            duration.clone(),
        );
        registry.register(
            "job_durations_withheld",
            "Jobs this process finished whose run time is not recorded because it would reveal a private row count (add_remove datasets), by algorithm and final state",
            untimed.clone(),
        );
        registry.register(
            "budget_refusals",
            "Job submissions and studies refused for lack of budget, by algorithm and the budget that was short (rho, delta, site_budget)",
            refusals.clone(),
        );
        registry.register(
            "rate_limit_refusals",
            "Requests refused by a tenant's rate limit, by action (submission, upload)",
            rate_limited.clone(),
        );
        Self {
            registry: Mutex::new(registry),
            jobs,
            finished,
            duration,
            untimed,
            refusals,
            rate_limited,
        }
    }

    pub fn budget_refusal(&self, algorithm: &str, reason: RefusalReason) {
        self.refusals
            .get_or_create(&RefusalLabels {
                algorithm: algorithm.to_string(),
                reason: reason.as_str().to_string(),
            })
            .inc();
    }

    pub fn rate_limited(&self, action: &str) {
        self.rate_limited
            .get_or_create(&ActionLabel {
                action: action.to_string(),
            })
            .inc();
    }

    /// Counts a finished job; `seconds` is its run time, or `None` where the run time must not
    /// be recorded (its dataset's row count is private): then it is counted without a duration.
    pub fn job_finished(&self, algorithm: &str, status: &str, seconds: Option<f64>) {
        self.finished
            .get_or_create(&StatusLabel {
                status: status.to_string(),
            })
            .inc();
        let labels = JobLabels {
            algorithm: algorithm.to_string(),
            status: status.to_string(),
        };
        match seconds {
            Some(seconds) => self.duration.get_or_create(&labels).observe(seconds),
            None => {
                self.untimed.get_or_create(&labels).inc();
            }
        }
    }

    /// Prometheus text exposition, with the per-state job gauge set from `counts`.
    pub fn render(&self, counts: &[(String, i64)]) -> String {
        for status in ["queued", "running", "succeeded", "failed", "cancelled"] {
            let n = counts.iter().find(|(s, _)| s == status).map_or(0, |(_, n)| *n);
            self.jobs
                .get_or_create(&StatusLabel {
                    status: status.to_string(),
                })
                .set(n);
        }
        let mut out = String::new();
        if let Ok(registry) = self.registry.lock() {
            let _ = encode(&mut out, &registry);
        }
        out
    }
}
