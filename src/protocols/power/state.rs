//! `federated_power` on both sides of the wire: what a site computes each round
//! ([`SiteComputation`]) and what the coordinator does with the unmasked sums ([`PowerState`]).
//! The maths is in [`crate::algorithms::federated_power`]; this module adds the fixed-point
//! encoding and the study's public description.

use rand::RngCore;
use serde::Serialize;

use crate::algorithms::clipping::clipped_neighbours;
use crate::algorithms::federated_power::{FederatedPowerConfig, site_contribution};
use crate::algorithms::noisy_power::{cost_of, initial_iterate};
pub use crate::algorithms::study_clip::{ClipProgress, ClipReport};
use crate::algorithms::{Cancelled, Output, RunEnv, RunError};
use crate::dataset::{Neighbours, Relation};
use crate::federation::fixed_point::FixedPoint;
use crate::federation::messages::SiteStudyView;
use crate::federation::rounds::RoundRecord;
use crate::linalg::{Matrix, fix_signs, gram_t_times, thin_qr_q, try_thin_svd};
use crate::privacy::Cost;
use crate::privacy::units::RhoUnits;

/// The neighbouring relation of a study from its public fields.
pub fn study_neighbours(relation: Relation, beta: f64, alpha: f64) -> Result<Neighbours, String> {
    match relation {
        Relation::ReplaceOne => Ok(Neighbours::ReplaceOne { beta, alpha }),
        Relation::AddRemove => Ok(Neighbours::AddRemove { beta, alpha }),
        other => Err(format!(
            "relation `{}` is not one a study can have",
            other.as_str()
        )),
    }
}

/// Refuses a study whose noise costs more than the ρ it states (and the site will charge).
///
/// The site draws noise of sd m·Δ/√t per round, so that any t sites' sum carries m·Δ; over L
/// rounds that is the Gaussian mechanism's ρ = L/(2m²) (`noisy_power`'s [`cost_of`]). The
/// multiplier and L come from the coordinator's configuration, the stated cost from the study:
/// a coordinator that asked for less noise than it charges for would have the site spend more
/// privacy than its ledger records. Both sides are compared in ledger units, rounded up as a
/// charge is, so an honest coordinator (which derived the cost from the same formula) passes.
///
/// `before` is the cost of the rounds before the power rounds (the study's clip), added to
/// the power rounds' L/(2m²).
fn check_noise_covers(config: &FederatedPowerConfig, before: Cost, stated_rho: f64) -> Result<(), String> {
    let multiplier = config.multiplier;
    if !(multiplier.is_finite() && multiplier > 0.0) || config.iterations == 0 {
        return Err(format!(
            "the study's noise multiplier m = {multiplier} over {} iterations is not valid",
            config.iterations
        ));
    }
    let needed = before.rho + cost_of(config.iterations, multiplier);
    let needed_units = RhoUnits::checked_charge(needed)
        .map_err(|_| format!("the study's noise costs ρ = {needed:e}, beyond any budget"))?;
    let stated_units = RhoUnits::checked_charge(stated_rho)
        .map_err(|_| format!("the study's stated cost ρ = {stated_rho} is not valid"))?;
    if needed_units > stated_units {
        return Err(format!(
            "the study's noise (multiplier m = {multiplier}, {} iterations{}) costs ρ = {needed:e}, \
             more than the ρ = {stated_rho:e} it states and this site would charge; refusing to take part",
            config.iterations,
            if config.clip.is_some() {
                ", and its clip"
            } else {
                ""
            }
        ));
    }
    Ok(())
}

/// What one site computes each round, from the study's public description.
#[derive(Debug, Clone)]
pub struct SiteComputation {
    config: FederatedPowerConfig,
    neighbours: Neighbours,
    d: usize,
}

impl SiteComputation {
    /// Reads the study description; refuses an algorithm or relation this client cannot run,
    /// a study whose noise costs more than it states, and a fixed-point encoding that could wrap
    /// or could round away part of the noise.
    pub fn from_view(view: &SiteStudyView) -> Result<SiteComputation, String> {
        if view.algorithm != "federated_power" {
            return Err(format!(
                "this client runs federated_power; the study uses `{}`",
                view.algorithm
            ));
        }
        let config: FederatedPowerConfig = serde_json::from_value(view.config.clone())
            .map_err(|e| format!("the study's configuration is unreadable: {e}"))?;
        let neighbours = study_neighbours(view.relation, view.row_norm_bound, view.row_l1_bound)?;
        if config.fraction_bits != view.fraction_bits || config.max_site_samples != view.max_site_samples {
            return Err("the study's fixed-point parameters are inconsistent".into());
        }
        if config.threshold != view.threshold {
            return Err("the study's threshold is inconsistent".into());
        }
        let clip_cost = match &config.clip {
            Some(clip) => clip.check(
                &neighbours,
                view.n_features,
                config.sites,
                config.threshold,
                config.max_site_samples,
            )?,
            None => Cost::ZERO,
        };
        check_noise_covers(&config, clip_cost, view.cost_rho)?;
        FixedPoint::new(config.fraction_bits).map_err(|e| e.to_string())?;
        if !crate::federation::fixed_point::fits(config.total_bound(&neighbours), config.fraction_bits) {
            return Err("the study's fixed-point encoding could wrap; refusing to take part".into());
        }
        // Every round is checked again before it is encoded; this refuses a study that could
        // never pass that check before anything is sent.
        let exact = config.min_fraction_bits(&neighbours, view.n_features);
        if exact.is_none_or(|min| config.fraction_bits < min) {
            return Err(format!(
                "the study's {} fraction bits would round away part of this site's noise; refusing to take part",
                config.fraction_bits
            ));
        }
        if !config.clip_encodable(&neighbours, view.n_features) {
            return Err(
                "the study's encoding could wrap or round away noise at a clip norm its clip can release; \
                 refusing to take part"
                    .into(),
            );
        }
        Ok(SiteComputation {
            config,
            neighbours,
            d: view.n_features,
        })
    }

    /// The iterate's shape in `round`: (1, 2) for a clip step ([c, q]), (d, p) otherwise.
    pub fn shape_of(&self, round: u32) -> (usize, usize) {
        if self.is_clip_round(round) {
            (1, 2)
        } else {
            (self.d, self.config.p)
        }
    }

    /// Whether `round` is a step of the study's clip.
    pub fn is_clip_round(&self, round: u32) -> bool {
        round <= self.config.clip_rounds()
    }

    pub fn config(&self) -> &FederatedPowerConfig {
        &self.config
    }

    /// Checks the local data fits the study: d features; under `replace_one` (n is public and
    /// reported at join) 1 ≤ n ≤ `max_site_samples`. Under `add_remove` n is private and no
    /// check on it may change what the site does: a site with no records, or with more than
    /// `max_site_samples` (its products are then clamped), takes part like any other.
    pub fn check_data(&self, n: usize, d: usize) -> Result<(), String> {
        if d != self.d {
            return Err(format!(
                "the data has {d} columns; the study has n_features = {}",
                self.d
            ));
        }
        if self.neighbours.relation() == Relation::AddRemove {
            return Ok(());
        }
        if n == 0 {
            return Err("the data has no records".into());
        }
        if n as u64 > self.config.max_site_samples {
            return Err(format!(
                "the data has {n} records; the study allows at most max_site_samples = {} per site",
                self.config.max_site_samples
            ));
        }
        Ok(())
    }

    /// A clip step's release ([`crate::algorithms::power_clip::PowerClip::site_count`]) at the [c, q] the coordinator sent,
    /// after checking both against the study's clip.
    pub fn clip_count(&self, norms: &[f64], step: &[f64], rng: &mut dyn RngCore) -> Result<Vec<u64>, String> {
        let clip = self.config.clip.as_ref().ok_or("this study has no clip")?;
        let &[c, q] = step else {
            return Err("a clip step holds [c, q]".into());
        };
        clip.check_c(c)?;
        clip.check_quantile(q)?;
        let mut progress = |_: u32, _: u32| -> Result<(), Cancelled> { Ok(()) };
        let mut env = RunEnv::new(rng, &mut progress);
        clip.site_count(norms, c, q, self.config.max_site_samples, &mut env)
    }

    /// Checks the clip norm a power round came with: required and in range in a study with a
    /// clip, absent otherwise. Returns the relation's bounds the round is calibrated to.
    pub fn round_bounds(&self, clip_norm: Option<f64>) -> Result<Neighbours, String> {
        match (&self.config.clip, clip_norm) {
            (None, None) => Ok(self.neighbours),
            (Some(clip), Some(c)) => {
                clip.check_c(c)?;
                Ok(clipped_neighbours(&self.neighbours, self.d, c))
            }
            (Some(_), None) => Err("the power round came without the study's clip norm".into()),
            (None, Some(_)) => Err("the power round came with a clip norm; the study has no clip".into()),
        }
    }

    /// This round's release clamp(A_s·X) + N(0, (mΔ(X))²/t), fixed-point encoded (not yet
    /// masked), after the iterate's checks ([`site_contribution`]). In a study with a clip,
    /// `xt` must hold the site's rows clipped at `clip_norm` ([`clip_rows`]): Δ is computed for
    /// rows of norm ≤ c, and the rows are checked against it before anything is drawn.
    pub fn contribution(
        &self,
        xt: &Matrix,
        iterate: &Matrix,
        clip_norm: Option<f64>,
        rng: &mut dyn RngCore,
    ) -> Result<Vec<u64>, String> {
        if iterate.nrows() != self.d || iterate.ncols() != self.config.p {
            return Err("the iterate has the wrong shape".into());
        }
        let neighbours = self.round_bounds(clip_norm)?;
        if let Some(c) = clip_norm
            && xt.column_iter().any(|x| !(x.norm() <= c))
        {
            return Err("the site's rows are not clipped at the round's clip norm".into());
        }
        let mut progress = |_: u32, _: u32| -> Result<(), Cancelled> { Ok(()) };
        let mut env = RunEnv::new(rng, &mut progress);
        let d = self.d;
        let product = |x: &Matrix| {
            if xt.ncols() == 0 || xt.nrows() != d {
                Matrix::zeros(d, x.ncols())
            } else {
                gram_t_times(xt, x)
            }
        };
        site_contribution(iterate, &self.config, &neighbours, &mut env, product).map_err(|e| e.to_string())
    }
}

/// The site's rows (d×n, a record per column) clipped at c, as the power rounds of a study
/// with a clip need them.
pub fn clip_rows(xt: &Matrix, c: f64) -> Matrix {
    crate::algorithms::clipping::clip_rows(xt, c)
}

/// Per round: who was summed, and the noise the sum actually carries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoundNoise {
    pub round: u32,
    pub survivors: Vec<u32>,
    pub dropped: Vec<u32>,
    /// Survivors that did not answer the unmask request (counted this round, out afterwards).
    pub silent: Vec<u32>,
    /// The multiplier the released sum achieved: m·sqrt(|U|/t) ≥ m.
    pub achieved_multiplier: f64,
}

/// What a federated run reports besides the basis.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FederationReport {
    /// The central multiplier m the cost pays for.
    pub target_multiplier: f64,
    /// The smallest multiplier any round achieved (≥ target).
    pub achieved_multiplier: f64,
    /// Every secure-sum round, the clip's steps first (their noise relative to the clip's σ
    /// grows by the same √(|U|/t)).
    pub rounds: Vec<RoundNoise>,
    /// The study's private clip, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clip: Option<ClipReport>,
}

impl FederationReport {
    pub fn from_history(config: &FederatedPowerConfig, history: &[RoundRecord]) -> FederationReport {
        let t = f64::from(config.threshold);
        let rounds: Vec<RoundNoise> = history
            .iter()
            .map(|r| RoundNoise {
                round: r.round,
                survivors: r.survivors.clone(),
                dropped: r.dropped.clone(),
                silent: r.silent.clone(),
                achieved_multiplier: config.multiplier * (r.survivors.len() as f64 / t).sqrt(),
            })
            .collect();
        let achieved = rounds
            .iter()
            .map(|r| r.achieved_multiplier)
            .fold(f64::INFINITY, f64::min);
        FederationReport {
            target_multiplier: config.multiplier,
            achieved_multiplier: if achieved.is_finite() {
                achieved
            } else {
                config.multiplier
            },
            rounds,
            clip: None,
        }
    }

    /// The report with the study's clip.
    pub fn with_clip(mut self, clip: Option<ClipReport>) -> FederationReport {
        self.clip = clip;
        self
    }
}

/// The coordinator's numerics: the public iterate, updated from each unmasked sum, after the
/// study's clip steps if it has them.
pub struct PowerState {
    config: FederatedPowerConfig,
    d: usize,
    x: Matrix,
    last: Option<Matrix>,
    clip: Option<ClipProgress>,
}

impl PowerState {
    /// X₀ = Q(Ω) from public randomness (Nicolas et al. Alg. 2 line 3); a clip's search starts
    /// from the whole bracket at the q of `pooled_n` ([`crate::algorithms::power_clip::PowerClip::quantile_for`]).
    pub fn new(
        config: FederatedPowerConfig,
        d: usize,
        pooled_n: Option<u64>,
        rng: &mut dyn RngCore,
    ) -> Result<PowerState, RunError> {
        FixedPoint::new(config.fraction_bits).map_err(|e| RunError::Failed(e.to_string()))?;
        let x = initial_iterate(rng, d, config.p);
        let clip = config
            .clip
            .as_ref()
            .map(|clip| ClipProgress::new(clip.search.upper, clip.quantile_for(pooled_n, config.k)));
        Ok(PowerState {
            config,
            d,
            x,
            last: None,
            clip,
        })
    }

    /// The state again from a kept iterate (public), last release (the last unmasked,
    /// noisy sum: a DP release) and clip progress, as [`PowerState::iterate`],
    /// [`PowerState::last_release`] and [`PowerState::clip_progress`] gave them.
    pub fn restore(
        config: FederatedPowerConfig,
        d: usize,
        x: Matrix,
        last: Option<Matrix>,
        clip: Option<ClipProgress>,
    ) -> Result<PowerState, RunError> {
        FixedPoint::new(config.fraction_bits).map_err(|e| RunError::Failed(e.to_string()))?;
        let shape_ok = |m: &Matrix| m.shape() == (d, config.p);
        if !shape_ok(&x) || !last.as_ref().is_none_or(shape_ok) {
            return Err(RunError::Failed("the kept iterate has the wrong shape".into()));
        }
        if config.clip.is_some() != clip.is_some() || clip.as_ref().is_some_and(|c| !c.valid()) {
            return Err(RunError::Failed("the kept clip does not match the study".into()));
        }
        Ok(PowerState {
            config,
            d,
            x,
            last,
            clip,
        })
    }

    /// The clip's search so far, if the study has one.
    pub fn clip_progress(&self) -> Option<&ClipProgress> {
        self.clip.as_ref()
    }

    /// The clip as the report shows it.
    pub fn clip_report(&self) -> Option<ClipReport> {
        let upper = self.config.clip.as_ref()?.search.upper;
        Some(self.clip.as_ref()?.report(upper))
    }

    /// Whether the open round is a step of the clip.
    pub fn in_clip(&self) -> bool {
        self.clip.as_ref().is_some_and(ClipProgress::searching)
    }

    /// The released clip norm, once the search is over (`None` without a clip).
    pub fn clip_norm(&self) -> Option<f64> {
        self.clip.as_ref().and_then(ClipProgress::clip_norm)
    }

    /// What the open round's task carries: its shape and values ([c, q] in a clip step, X
    /// otherwise), and the clip norm of a power round.
    pub fn task(&self) -> (usize, usize, Vec<f64>, Option<f64>) {
        match &self.clip {
            Some(clip) if self.in_clip() => (1, 2, clip.step().to_vec(), None),
            _ => (
                self.d,
                self.config.p,
                self.x.as_slice().to_vec(),
                self.clip_norm(),
            ),
        }
    }

    /// The iterate the open round works on.
    pub fn iterate(&self) -> &Matrix {
        &self.x
    }

    /// Number of fixed-point words per contribution (d·p).
    pub fn len(&self) -> usize {
        self.d * self.config.p
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A clip step: the noisy S(c) moves the bracket. A power round: Y_l = decode(sum);
    /// X_l = Q(Y_l) (Alg. 2 lines 7–8).
    pub fn absorb(&mut self, sum: &[u64]) -> Result<(), RunError> {
        if self.in_clip() {
            let clip = self
                .config
                .clip
                .as_ref()
                .ok_or_else(|| RunError::Failed("no clip".into()))?;
            let count = clip
                .decode(sum)
                .ok_or_else(|| RunError::Failed("the unmasked clip count is not one value".into()))?;
            if let Some(progress) = self.clip.as_mut() {
                progress.absorb(count);
            }
            return Ok(());
        }
        if sum.len() != self.len() {
            return Err(RunError::Failed("the unmasked sum has the wrong length".into()));
        }
        let fixed = FixedPoint::new(self.config.fraction_bits_at(self.clip_norm()))
            .map_err(|e| RunError::Failed(e.to_string()))?;
        let values = fixed.decode_all(sum);
        let y = Matrix::from_column_slice(self.d, self.config.p, &values);
        if !y.iter().all(|v| v.is_finite()) {
            return Err(RunError::Failed(
                "numerical overflow in the power iteration".into(),
            ));
        }
        self.x = thin_qr_q(&y);
        self.last = Some(y);
        Ok(())
    }

    /// The released last iterate Y_L, once a round has been absorbed.
    pub fn last_release(&self) -> Option<&Matrix> {
        self.last.as_ref()
    }

    /// The top-k left singular vectors of Y_L and their singular values (post-processing).
    pub fn finish(&self) -> Result<Output, RunError> {
        let y = self
            .last
            .as_ref()
            .ok_or_else(|| RunError::Failed("no round was completed".into()))?;
        let svd = try_thin_svd(y).map_err(|_| RunError::Failed("the final SVD did not converge".into()))?;
        let mut basis = svd.u.columns(0, self.config.k).into_owned();
        fix_signs(&mut basis);
        Ok(Output {
            basis,
            eigenvalues: Some(svd.s.iter().take(self.config.k).copied().collect()),
        })
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
