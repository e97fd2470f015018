//! Prometheus metrics: jobs by state, job durations, budget refusals.

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

pub struct Metrics {
    registry: Mutex<Registry>,
    jobs: Family<StatusLabel, Gauge>,
    finished: Family<StatusLabel, Counter>,
    duration: Histogram,
    refusals: Counter,
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
        let duration = Histogram::new(exponential_buckets(0.001, 2.0, 22));
        let refusals = Counter::default();
        registry.register("jobs", "Jobs by state (from the database)", jobs.clone());
        registry.register(
            "jobs_finished",
            "Jobs this process finished, by final state",
            finished.clone(),
        );
        registry.register(
            "job_duration_seconds",
            "Run time of jobs this process finished",
            duration.clone(),
        );
        registry.register(
            "budget_refusals",
            "Job submissions refused for lack of budget",
            refusals.clone(),
        );
        Self {
            registry: Mutex::new(registry),
            jobs,
            finished,
            duration,
            refusals,
        }
    }

    pub fn budget_refusal(&self) {
        self.refusals.inc();
    }

    pub fn job_finished(&self, status: &str, seconds: f64) {
        self.finished
            .get_or_create(&StatusLabel {
                status: status.to_string(),
            })
            .inc();
        self.duration.observe(seconds);
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
