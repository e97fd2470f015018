//! The utility forecast (issue 41, docs/design/forecast.md): what a job would capture, from
//! public facts and a spectrum scenario, before any data exists. It runs the real algorithm,
//! configured as a job would be, on synthetic records drawn from the scenario, a few seeded
//! repetitions, and reports the captured energy tr(QᵀCQ) / Σ_{i≤k} λ_i(C), C = XᵀX/n of the
//! synthetic (clipped) records. It reads no private data and charges nothing.
//!
//! **Work on the sufficient statistic.** The records are drawn once per forecast with their
//! statistics (XᵀX, Xᵀ1) kept, so an algorithm that reads only those
//! ([`AlgorithmInfo::stats_suffice`]) and the clip's tail correction never make a pass over
//! them; each repetition costs the algorithm's work on a d×d matrix.
//!
//! **More records than it draws.** Past [`MAX_DRAWN_VALUES`] values, the forecast draws
//! m < n records and runs the job at n' = m with ρ' = ρ·(n/m)². For the mechanisms that read
//! only the statistics and add Gaussian noise to sums, the run at (m, ρ') is the run at (n, ρ)
//! scaled by m/n: the signal (XᵀX, Xᵀ1, the counts of the clip's search) shrinks by m/n and
//! every noise scale Δ/√(2ρ) by the same m/n, so the outputs have the same distribution up to
//! the sampling error of m records; the `clip: "auto"` tail √d/(n·√ρ) is the same number at
//! both (docs/design/forecast.md works it through). Other algorithms (their noise or step sizes
//! depend on n otherwise) are forecast only when all n records fit.

pub mod scenario;

pub use scenario::{Scenario, ScenarioError};

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde_json::Value;

use crate::algorithms::{Cancelled, DataInput, DynAlgorithm, Run, RunEnv};
use crate::dataset::DataContext;
use crate::linalg::subspace::captured_energy;
use crate::linalg::{Matrix, RecordStats, Records, try_sym_eigenvalues};
use crate::privacy::PrivacyTarget;
use crate::privacy::units::MAX_RHO;

#[cfg(doc)]
use crate::algorithms::AlgorithmInfo;

/// The most values (records × features) a forecast draws: 80 MB of f64.
pub const MAX_DRAWN_VALUES: usize = 10_000_000;
/// The fewest records a forecast draws when n is larger (the sampling error of C then stays
/// near 1/√m relative).
pub const MIN_DRAWN_RECORDS: usize = 2_000;
/// Repetitions of a forecast (each a run with its own noise) at d ≤ 50; fewer above
/// ([`repetitions`]).
pub const REPETITIONS: usize = 48;

/// Repetitions of a forecast at `d` features: [`REPETITIONS`] up to d = 50, then fewer
/// (48·50/d, at least 5: 24 at d = 100, 5 from d = 480), since each run's d×d noise and
/// eigendecomposition grow as d² and d³. The mean's own error is the runs' spread over √R.
pub fn repetitions(d: usize) -> usize {
    (REPETITIONS * 50 / d.max(1)).clamp(5, REPETITIONS)
}
/// One-sided normal quantile of the interval's 90 % coverage.
const Z_90: f64 = 1.645;
/// Half-width the interval always has: what the scenario cannot say about real data of that
/// spectrum (the draw of its rotation and records), measured in docs/design/forecast.md.
pub const MODEL_ERROR: f64 = 0.02;

/// How many independent sets of records a forecast draws when they are small (at most
/// [`MAX_DRAWN_VALUES`] values in all): the repetitions are spread over them, so the forecast
/// averages over the records' own variation too, not over one draw's.
pub const DRAWS: usize = 4;

/// Synthetic records of a scenario at a job's public shape, with what the forecast measures
/// against: [`DRAWS`] independent draws when they fit in [`MAX_DRAWN_VALUES`] together, else one.
pub struct Synthetic {
    draws: Vec<Draw>,
    /// The n the job would run on.
    n: usize,
}

/// One set of drawn records.
struct Draw {
    xt: Matrix,
    stats: RecordStats,
    /// C = XᵀX/m of the drawn records.
    covariance: Matrix,
    /// λ(C), largest first.
    spectrum: Vec<f64>,
}

impl Draw {
    fn new(scenario: &Scenario, d: usize, m: usize, beta: f64, seed: u64) -> Self {
        let xt = scenario.draw(d, m, beta, seed);
        let stats = RecordStats::of((&xt).into());
        let covariance = &stats.gram / m as f64;
        let mut spectrum: Vec<f64> = try_sym_eigenvalues(&covariance)
            .map(|v| v.iter().copied().collect())
            .unwrap_or_default();
        spectrum.sort_by(|a, b| b.total_cmp(a));
        Self {
            xt,
            stats,
            covariance,
            spectrum,
        }
    }

    /// The captured energy of `basis` on these records.
    fn captured(&self, basis: &Matrix) -> f64 {
        if basis.ncols() == 0 || basis.nrows() != self.covariance.nrows() {
            return 0.0;
        }
        let best: f64 = self.spectrum.iter().take(basis.ncols()).sum();
        let captured = basis.dot(&crate::linalg::matmul(&self.covariance, basis));
        if best > 0.0 {
            (captured / best).clamp(0.0, 1.0)
        } else {
            captured_energy(basis, &self.covariance)
        }
    }
}

impl Synthetic {
    /// Draws min(n, max([`MIN_DRAWN_RECORDS`], [`MAX_DRAWN_VALUES`]/d)) records of `d`
    /// features from `scenario`, clipped to `beta`: [`DRAWS`] times, with their own rotations,
    /// when that many fit in [`MAX_DRAWN_VALUES`].
    pub fn draw(scenario: &Scenario, n: usize, d: usize, beta: f64, seed: u64) -> Self {
        Self::draw_at_most(scenario, n, d, beta, seed, MAX_DRAWN_VALUES)
    }

    /// [`Synthetic::draw`] with another cap on the values drawn (tests compare the scaled run
    /// with the complete one).
    pub fn draw_at_most(
        scenario: &Scenario,
        n: usize,
        d: usize,
        beta: f64,
        seed: u64,
        values: usize,
    ) -> Self {
        let m = n.min((values / d.max(1)).max(MIN_DRAWN_RECORDS));
        let count = if m.saturating_mul(d).saturating_mul(DRAWS) <= values {
            DRAWS
        } else {
            1
        };
        let draws = (0..count as u64)
            .map(|i| {
                Draw::new(
                    scenario,
                    d,
                    m,
                    beta,
                    seed.wrapping_add(i.wrapping_mul(0x9e37_79b9)),
                )
            })
            .collect();
        Self { draws, n }
    }

    /// Features per record.
    pub fn d(&self) -> usize {
        self.draws[0].xt.nrows()
    }

    /// Records in each draw.
    pub fn drawn(&self) -> usize {
        self.draws[0].xt.ncols()
    }

    /// Whether all n records were drawn.
    pub fn complete(&self) -> bool {
        self.drawn() == self.n
    }
}

/// A forecast: the mean captured energy of the repetitions and an interval for one job's.
#[derive(Debug, Clone, PartialEq)]
pub struct Forecast {
    pub captured_energy: f64,
    /// Where one job's captured energy falls with probability about 0.9 under the scenario:
    /// the repetitions' mean ± 1.645·sd·√(1 + 1/R), widened by [`MODEL_ERROR`], within [0, 1].
    pub interval: [f64; 2],
    /// Each repetition's captured energy.
    pub repetitions: Vec<f64>,
}

impl Forecast {
    fn of(values: Vec<f64>) -> Self {
        let r = values.len() as f64;
        let mean = values.iter().sum::<f64>() / r;
        let var = if values.len() > 1 {
            values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (r - 1.0)
        } else {
            0.0
        };
        let half = Z_90 * var.sqrt() * (1.0 + 1.0 / r).sqrt() + MODEL_ERROR;
        Self {
            captured_energy: mean,
            interval: [(mean - half).max(0.0), (mean + half).min(1.0)],
            repetitions: values,
        }
    }
}

/// What a forecast found.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The job would run; what it would capture.
    Ran(Forecast),
    /// The job would be refused, or would fail: it captures nothing (why, in public terms).
    Nothing(String),
}

impl Outcome {
    /// The mean captured energy (0 for a job that captures nothing).
    pub fn captured_energy(&self) -> f64 {
        match self {
            Outcome::Ran(f) => f.captured_energy,
            Outcome::Nothing(_) => 0.0,
        }
    }
}

/// The forecast cannot be made (not: the job would capture nothing).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ForecastError {
    /// The algorithm reads more than the statistics, or spends δ, and n·d is above what the
    /// forecast draws.
    #[error(
        "algorithm `{algorithm}` is forecast on all n records (it reads more than XᵀX or spends δ), and n·d = {values} is above {MAX_DRAWN_VALUES}"
    )]
    TooLarge { algorithm: &'static str, values: u128 },
}

/// Forecasts `algorithm` with `params` under `target` on records of the public shape `ctx`
/// (n public or not: `synthetic` holds the n the job would see) drawn in `synthetic`, with
/// `repetitions` runs seeded from `seed`.
pub fn forecast(
    algorithm: &dyn DynAlgorithm,
    params: &Value,
    ctx: &DataContext,
    target: &PrivacyTarget,
    synthetic: &Synthetic,
    repetitions: usize,
    seed: u64,
) -> Result<Outcome, ForecastError> {
    let prepared = match algorithm.prepare(params.clone(), ctx, target) {
        Ok(prepared) => prepared,
        Err(e) => return Ok(Outcome::Nothing(format!("the job would be refused: {e}"))),
    };
    let info = algorithm.info();
    let (config, run_ctx) = if synthetic.complete() {
        (prepared.config, *ctx)
    } else {
        if !(info.stats_suffice && prepared.cost.delta == 0.0) {
            return Err(ForecastError::TooLarge {
                algorithm: info.name,
                values: synthetic.n as u128 * ctx.d as u128,
            });
        }
        let m = synthetic.drawn();
        let factor = synthetic.n as f64 / m as f64;
        // Capped at the ledger's largest amount, which no calibration is checked past. Where
        // the cap bites the scaled run's noise is at most √d·10⁻³/m of its signal (m ≥ 2 000),
        // as negligible as the true run's.
        let rho = (prepared.cost.rho * factor * factor).min(MAX_RHO);
        let scaled_target = PrivacyTarget {
            public_default: false,
            rho,
            delta: target.delta,
            epsilon: None,
        };
        let scaled_ctx = DataContext {
            n: ctx.n.map(|_| m),
            ..*ctx
        };
        match algorithm.prepare(params.clone(), &scaled_ctx, &scaled_target) {
            Ok(scaled) => (scaled.config, scaled_ctx),
            Err(e) => {
                return Ok(Outcome::Nothing(format!(
                    "the job would be refused at the scaled budget: {e}"
                )));
            }
        }
    };
    let mut values = Vec::with_capacity(repetitions);
    for rep in 0..repetitions.max(1) {
        let draw = &synthetic.draws[rep % synthetic.draws.len()];
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        rng.set_stream(rep as u64);
        let mut progress = |_: u32, _: u32| -> Result<(), Cancelled> { Ok(()) };
        let mut env = RunEnv::new(&mut rng, &mut progress);
        let input = DataInput::Records {
            xt: Records::from(&draw.xt).with_stats(&draw.stats),
        };
        let run = Run {
            input,
            ctx: &run_ctx,
            env: &mut env,
        };
        match algorithm.run_prepared(&config, run) {
            Ok(output) => values.push(draw.captured(&output.basis)),
            Err(e) => return Ok(Outcome::Nothing(format!("the job would fail: {e}"))),
        }
    }
    Ok(Outcome::Ran(Forecast::of(values)))
}

/// The smallest ρ in `low..=high` at which `captured(ρ)` reaches `target`, or `None` when
/// even `high` does not. From `start`, steps of 10× up or down bracket it, then bisection on
/// log ρ narrows the bracket to a relative width of 5 %, and the upper end is returned: about
/// nine evaluations where bisecting the whole range would take fourteen. `captured` is
/// increasing in ρ in expectation, and the forecast's common seeds keep it close to monotone.
pub fn smallest_rho(
    target: f64,
    start: f64,
    (low, high): (f64, f64),
    mut captured: impl FnMut(f64) -> f64,
) -> Option<f64> {
    let mut at = start.clamp(low, high);
    let (mut lo, mut hi);
    if captured(at) >= target {
        hi = at;
        loop {
            if at <= low {
                return Some(low);
            }
            at = (at / 10.0).max(low);
            if captured(at) < target {
                lo = at;
                break;
            }
            hi = at;
        }
    } else {
        lo = at;
        loop {
            if at >= high {
                return None;
            }
            at = (at * 10.0).min(high);
            if captured(at) >= target {
                hi = at;
                break;
            }
            lo = at;
        }
    }
    while hi / lo > 1.05 {
        let mid = (lo * hi).sqrt();
        if captured(mid) >= target {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

#[cfg(test)]
mod tests;
