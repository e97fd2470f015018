//! The forecast's part of `POST /v1/privacy/plan` (issue 41, docs/design/forecast.md): the
//! stated shape, the scenario (stated, or a private spectrum paid for or reused), the target,
//! and the views of what the forecast found.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::app::error::AppError;
use crate::app::forecast::{JobForecast, Needed};
use crate::app::plan::ForecastAsk;
use crate::app::spectrum::{ProxyUse, ScenarioSource, SpectrumUse};
use crate::dataset::{Kind, Relation};
use crate::forecast::Outcome;
use crate::forecast::scenario::{Decay, decay_eigenvalues};
use crate::store::JobStatus;

/// What the request asks to forecast, from its `scenario` and `target`.
pub fn ask(
    scenario: Option<ScenarioInput>,
    target: Option<TargetInput>,
) -> Result<Option<ForecastAsk>, AppError> {
    let target = target.map(|t| t.captured_energy);
    let Some(scenario) = scenario else {
        return match target {
            Some(_) => Err(AppError::validation(
                "target",
                "a target is reached under a scenario: give scenario too",
            )),
            None => Ok(None),
        };
    };
    let eigenvalues = match (scenario.eigenvalues, scenario.decay) {
        (None, Some(decay)) => Some(
            decay_eigenvalues(decay.model.into(), decay.top, decay.rate, decay.count)
                .map_err(|e| AppError::validation(format!("scenario.{}", e.field), e.message))?,
        ),
        (Some(_), Some(_)) => {
            return Err(AppError::validation(
                "scenario",
                "give eigenvalues or decay, not both",
            ));
        }
        (stated, None) => stated,
    };
    let proxied = scenario.proxy_dataset.is_some();
    let source = match (eigenvalues, scenario.private_spectrum, scenario.spectrum_job) {
        (Some(eigenvalues), None, None) if !proxied => ScenarioSource::Stated {
            eigenvalues,
            noise_floor: scenario.noise_floor.unwrap_or(0.0),
        },
        (None, Some(paid), None) if scenario.noise_floor.is_none() && !proxied => {
            ScenarioSource::PrivateSpectrum { share: paid.share }
        }
        (None, None, Some(job)) if scenario.noise_floor.is_none() && !proxied => {
            ScenarioSource::SpectrumJob(job)
        }
        (None, None, None) if proxied && scenario.noise_floor.is_none() => {
            ScenarioSource::Proxy(scenario.proxy_dataset.expect("matched"))
        }
        (None, None, None) if !proxied => {
            return Err(AppError::validation(
                "scenario",
                "give eigenvalues or decay (a stated scenario), proxy_dataset, private_spectrum (paid) or spectrum_job",
            ));
        }
        _ => {
            return Err(AppError::validation(
                "scenario",
                "give exactly one of eigenvalues or decay (with noise_floor), proxy_dataset, private_spectrum or spectrum_job",
            ));
        }
    };
    Ok(Some(ForecastAsk { source, target }))
}

/// The public facts of a records dataset that does not exist yet.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanDataInput {
    /// `records` (forecasts are made for records datasets).
    pub kind: Kind,
    /// n, the number of records (1 to 10¹²).
    #[schema(minimum = 1)]
    pub n_samples: u64,
    /// d, the number of features (1 to 1000 for a forecast, 500 with a target).
    #[schema(minimum = 1)]
    pub n_features: u64,
    /// β, the bound the records' L2 norms are clipped to at upload.
    #[schema(exclusive_minimum = 0.0)]
    pub row_norm_bound: f64,
    /// `replace_one` (default; n public) or `add_remove`.
    pub relation: Option<Relation>,
}

/// A spectrum scenario: records x ~ N(0, U·diag(λ)·Uᵀ) with the listed eigenvalues followed by
/// the noise floor up to d, U a uniformly random rotation, clipped to β as uploads clip. Give
/// exactly one of `eigenvalues` (stated: free), `private_spectrum` (paid: a share of the job's
/// ρ spent on the dataset's noisy eigenvalues, charged on its ledger) or `spectrum_job` (the
/// release of an earlier paid spectrum: free).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScenarioInput {
    /// The top eigenvalues λ₁, λ₂, … of the records' covariance (1 to min(d, 100), each ≥ 0).
    pub eigenvalues: Option<Vec<f64>>,
    /// Instead of `eigenvalues`: the top eigenvalues from a decay model.
    pub decay: Option<DecayInput>,
    /// With `eigenvalues` or `decay`: the eigenvalue of every other direction (default 0).
    #[schema(minimum = 0.0)]
    pub noise_floor: Option<f64>,
    /// On a dataset (`dataset_id`, n public): spend a share of the job's ρ on its private
    /// spectrum and forecast from that. **Paid**: charged on the dataset's ledger as a job.
    pub private_spectrum: Option<PrivateSpectrumInput>,
    /// On a dataset: forecast from the spectrum an earlier `private_spectrum` paid for (its
    /// job id, as the answer's `spectrum.job_id` gave it). Free.
    pub spectrum_job: Option<Uuid>,
    /// A public records dataset of yours with the same d, used as a proxy: the forecast runs on
    /// its exact spectrum (read by a free job; best when its row_norm_bound is the same). Free.
    pub proxy_dataset: Option<Uuid>,
}

/// Top eigenvalues that decay: λ_i = top·rate^(i−1) (`geometric`) or top·i^(−rate)
/// (`power_law`), for i = 1..count; the noise floor follows them.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecayInput {
    pub model: DecayModel,
    /// λ₁, the largest eigenvalue (> 0).
    #[schema(exclusive_minimum = 0.0)]
    pub top: f64,
    /// `geometric`: the ratio λ_{i+1}/λ_i, in (0, 1]. `power_law`: the exponent, in (0, 20].
    #[schema(exclusive_minimum = 0.0)]
    pub rate: f64,
    /// How many eigenvalues follow the model (1 to min(d, 100)).
    #[schema(minimum = 1, maximum = 100)]
    pub count: usize,
}

/// How the stated eigenvalues decay.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DecayModel {
    Geometric,
    PowerLaw,
}

impl From<DecayModel> for Decay {
    fn from(m: DecayModel) -> Self {
        match m {
            DecayModel::Geometric => Decay::Geometric,
            DecayModel::PowerLaw => Decay::PowerLaw,
        }
    }
}

/// The share of the job's ρ to spend on the private spectrum.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PrivateSpectrumInput {
    /// In (0, 1]; 0.05 spends 5 % of the job's ρ (the rest of the budget is the job's to use).
    #[schema(exclusive_minimum = 0.0, maximum = 1.0)]
    pub share: f64,
}

/// What the job should reach.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TargetInput {
    /// Captured energy tr(QᵀCQ)/Σ_{i≤k} λ_i(C) to reach, in (0, 1).
    #[schema(exclusive_minimum = 0.0, exclusive_maximum = 1.0)]
    pub captured_energy: f64,
}

/// What a job would capture under the scenario: simulated, free of charge.
#[derive(Debug, Serialize, ToSchema)]
pub struct ForecastView {
    /// The algorithm that would run (what `auto` would pick).
    pub algorithm: String,
    /// Mean captured energy tr(QᵀCQ)/Σ_{i≤k} λ_i(C) over the simulated runs, C = XᵀX/n of the
    /// clipped records; 0 for a job that would be refused or fail.
    pub captured_energy: f64,
    /// Where one job's captured energy falls with probability about 0.9 under the scenario.
    pub interval: [f64; 2],
    /// Why the job would capture nothing (refused or failing), when it would.
    pub reason: Option<String>,
    /// Simulated runs behind the mean.
    pub repetitions: usize,
    /// Records drawn from the scenario (fewer than n: a run scaled to n, docs/design/forecast.md).
    pub simulated_records: usize,
    /// True when the request charged nothing (a stated scenario, or a spectrum paid earlier);
    /// false when it paid for a private spectrum (see `spectrum`).
    pub free: bool,
}

/// The least privacy that reaches the target under the scenario.
#[derive(Debug, Serialize, ToSchema)]
pub struct NeededView {
    /// The least ρ over the algorithms tried; null when none reaches the target at ρ ≤ 10⁶.
    pub rho: Option<f64>,
    /// ρ as ε at `delta` (CKS 2020: a job stated at this (ε, δ) gets at least ρ).
    pub epsilon: Option<f64>,
    pub delta: f64,
    /// The algorithm that needs the least.
    pub algorithm: Option<String>,
    /// Each algorithm tried: the requested one, or `auto`'s candidates.
    pub by_algorithm: Vec<NeededByAlgorithm>,
}

/// One algorithm's least ρ.
#[derive(Debug, Serialize, ToSchema)]
pub struct NeededByAlgorithm {
    pub algorithm: String,
    pub rho: Option<f64>,
    pub epsilon: Option<f64>,
}

impl From<JobForecast> for ForecastView {
    fn from(f: JobForecast) -> Self {
        let (captured_energy, interval, reason, repetitions) = match f.outcome {
            Outcome::Ran(run) => (run.captured_energy, run.interval, None, run.repetitions.len()),
            Outcome::Nothing(why) => (0.0, [0.0, 0.0], Some(why), 0),
        };
        Self {
            algorithm: f.algorithm,
            captured_energy,
            interval,
            reason,
            repetitions,
            simulated_records: f.simulated_records,
            free: true,
        }
    }
}

impl From<Needed> for NeededView {
    fn from(n: Needed) -> Self {
        let by_algorithm = n
            .by_algorithm
            .iter()
            .map(|(name, rho)| NeededByAlgorithm {
                algorithm: name.to_string(),
                rho: *rho,
                epsilon: rho.map(|r| n.epsilon(r)),
            })
            .collect();
        Self {
            rho: n.best.map(|(_, r)| r),
            epsilon: n.best.map(|(_, r)| n.epsilon(r)),
            delta: n.delta,
            algorithm: n.best.map(|(name, _)| name.to_string()),
            by_algorithm,
        }
    }
}

/// The private spectrum a forecast used: **paid** for by a job on the dataset's ledger.
#[derive(Debug, Serialize, ToSchema)]
pub struct SpectrumView {
    /// The spectrum job (algorithm `spectrum`): on the ledger, in the dataset's log, with a
    /// receipt, like any job.
    pub job_id: Uuid,
    pub status: JobStatus,
    /// Always true: the spectrum is a DP release charged on the dataset's budget.
    pub paid: bool,
    /// Charged by this request (false: an earlier spectrum job reused, nothing charged now).
    pub charged_now: bool,
    /// ρ the spectrum job was charged.
    pub rho: f64,
    /// The released estimates of the eigenvalues of C = XᵀX/n, entry i the i-th largest (not
    /// re-sorted); null until the job has succeeded.
    pub eigenvalues: Option<Vec<f64>>,
    /// The sd of each estimate's noise.
    pub noise_sd: f64,
    /// The scenario the estimates state (what the forecast ran on); null until released.
    pub scenario: Option<StatedScenario>,
    /// In plain words: what was paid, and what to do if the job is not done yet.
    pub note: String,
}

/// The public dataset a forecast used as its proxy.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProxyView {
    pub dataset_id: Uuid,
    /// The free `spectrum` job that read its exact spectrum (no noise, no charge).
    pub job_id: Uuid,
    /// The scenario its spectrum states (what the forecast ran on).
    pub scenario: StatedScenario,
}

impl From<ProxyUse> for ProxyView {
    fn from(p: ProxyUse) -> Self {
        Self {
            dataset_id: p.dataset_id,
            job_id: p.job_id,
            scenario: StatedScenario {
                eigenvalues: p.scenario.eigenvalues().to_vec(),
                noise_floor: p.scenario.noise_floor(),
            },
        }
    }
}

/// A scenario as the forecast ran it.
#[derive(Debug, Serialize, ToSchema)]
pub struct StatedScenario {
    pub eigenvalues: Vec<f64>,
    pub noise_floor: f64,
}

impl From<SpectrumUse> for SpectrumView {
    fn from(s: SpectrumUse) -> Self {
        let paid = if s.charged_now {
            format!(
                "Paid: this request spent ρ = {:e} of the dataset's budget on its private spectrum (job {}).",
                s.rho, s.job.id
            )
        } else {
            format!(
                "Reused: the private spectrum of job {} was paid for earlier (ρ = {:e}); nothing was charged now.",
                s.job.id, s.rho
            )
        };
        let note = match (&s.scenario, s.job.status) {
            (Some(Ok(_)), _) => paid,
            (Some(Err(why)), _) => format!("{paid} {why}."),
            (None, JobStatus::Queued | JobStatus::Running) => format!(
                "{paid} It has not finished yet: ask again with scenario.spectrum_job = \"{}\" (free).",
                s.job.id
            ),
            (None, _) => format!(
                "{paid} The job released nothing (status {}).",
                s.job.status.as_str()
            ),
        };
        Self {
            job_id: s.job.id,
            status: s.job.status,
            paid: true,
            charged_now: s.charged_now,
            rho: s.rho,
            eigenvalues: s.eigenvalues,
            noise_sd: s.noise_sd,
            scenario: s.scenario.and_then(Result::ok).map(|sc| StatedScenario {
                eigenvalues: sc.eigenvalues().to_vec(),
                noise_floor: sc.noise_floor(),
            }),
            note,
        }
    }
}
