//! `federated_power` on both sides of the wire: what a site computes each round
//! ([`SiteComputation`]) and what the coordinator does with the unmasked sums ([`PowerState`]).
//! The maths is in [`crate::algorithms::federated_power`]; this module adds the fixed-point
//! encoding and the study's public description.

use rand::RngCore;
use serde::Serialize;

use crate::algorithms::centering::recentre;
use crate::algorithms::clipping::clipped_neighbours;
use crate::algorithms::federated_power::{FederatedPowerConfig, RoundKind, site_contribution};
use crate::algorithms::power_noise::{cost_of, initial_iterate};
use crate::algorithms::study_center::check_center;
pub use crate::algorithms::study_clip::{ClipProgress, ClipReport};
use crate::algorithms::{Cancelled, Output, RunEnv, RunError};
use crate::dataset::{Neighbours, Relation};
use crate::federation::fixed_point::FixedPoint;
use crate::federation::messages::SiteStudyView;
use crate::federation::rounds::RoundRecord;
use crate::linalg::{Matrix, Vector, fix_signs, gram_t_times, thin_qr_q, try_thin_svd};
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
/// rounds that is the Gaussian mechanism's ρ = L/(2m²) ([`cost_of`]). The
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
        // The configuration's S sizes the wrap bound and, under SecAgg+, the corrupt sites the
        // graph assumes (⌈γ·S⌉ of the S invited): it must be the S the study invited.
        if config.sites != view.n_sites {
            return Err(format!(
                "the study's configuration names {} sites, its description {}: inconsistent",
                config.sites, view.n_sites
            ));
        }
        let terms = (
            view.n_features,
            config.sites,
            config.threshold,
            config.max_site_samples,
        );
        let (d, sites, threshold, n_max) = terms;
        let clip_cost = match &config.clip {
            Some(clip) => clip.check(&neighbours, d, sites, threshold, n_max)?,
            None => Cost::ZERO,
        };
        let center_cost = match &config.center {
            Some(center) => center.check(&neighbours, d, sites, threshold, n_max)?,
            None => Cost::ZERO,
        };
        check_noise_covers(&config, center_cost.then(clip_cost), view.cost_rho)?;
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

    /// The iterate's shape in `round`: (0, 0) for the centre's round (it needs no input),
    /// (1, 2) for a clip step ([c, q]), (d, p) for a power round.
    pub fn shape_of(&self, round: u32) -> (usize, usize) {
        match self.config.round_kind(round) {
            RoundKind::Center => (0, 0),
            RoundKind::ClipStep => (1, 2),
            RoundKind::Power => (self.d, self.config.p),
        }
    }

    /// Values in `round`'s contribution: the centre's d (or d + 1), 1 for a clip step, d·p.
    pub fn round_len(&self, round: u32) -> usize {
        match self.config.round_kind(round) {
            RoundKind::Center => self.config.center.as_ref().map_or(0, |c| c.len(self.d)),
            RoundKind::ClipStep => 1,
            RoundKind::Power => self.d * self.config.p,
        }
    }

    /// What `round` computes.
    pub fn kind_of(&self, round: u32) -> RoundKind {
        self.config.round_kind(round)
    }

    /// Whether `round` is a step of the study's clip.
    pub fn is_clip_round(&self, round: u32) -> bool {
        self.kind_of(round) == RoundKind::ClipStep
    }

    /// Checks the centre a round came with ([`check_center`]): none in a study without one or in
    /// the centre's own round, the study's vector where it is given, d finite numbers after a
    /// private mean's round (any such μ̂ is a fixed row map; see [`crate::algorithms::study_center`]).
    pub fn check_round_center(&self, round: u32, center: Option<&[f64]>) -> Result<(), String> {
        let expected = self
            .config
            .center
            .as_ref()
            .filter(|_| self.kind_of(round) != RoundKind::Center);
        match (expected, center) {
            (None, None) => Ok(()),
            (None, Some(_)) => Err(format!("round {round} came with a centre; it should carry none")),
            (Some(_), None) => Err(format!("round {round} came without the study's centre")),
            (Some(study), Some(mu)) => match study.given() {
                Some(given) if given != mu => Err(format!(
                    "round {round} came with another centre than the study's given one"
                )),
                _ => check_center(mu, self.d),
            },
        }
    }

    /// The centre's round: this site's noisy, encoded sum of its rows `xt` (d×n, each of norm
    /// ≤ β) and, under `add_remove`, its count
    /// ([`crate::algorithms::study_center::StudyCenter::site_release`]).
    pub fn center_release(&self, xt: &Matrix, rng: &mut dyn RngCore) -> Result<Vec<u64>, String> {
        let center = self.config.center.as_ref().ok_or("this study has no centre")?;
        let beta = match self.neighbours {
            Neighbours::ReplaceOne { beta, .. } | Neighbours::AddRemove { beta, .. } => beta,
            Neighbours::Entry { .. } => return Err("a centre needs records".into()),
        };
        if xt.nrows() != self.d && xt.ncols() > 0 {
            return Err("the rows have the wrong dimension".into());
        }
        if xt.column_iter().any(|x| !(x.norm() <= beta)) {
            return Err("the site's rows are not clipped to the study's β".into());
        }
        let mut progress = |_: u32, _: u32| -> Result<(), Cancelled> { Ok(()) };
        let mut env = RunEnv::new(rng, &mut progress);
        let empty;
        let xt = if xt.ncols() == 0 {
            empty = Matrix::zeros(self.d, 0);
            &empty
        } else {
            xt
        };
        center.site_release(xt, beta, self.config.max_site_samples, &mut env)
    }

    /// The site's rows mapped by the released centre: clip(x − μ̂) to β and α for every row
    /// ([`recentre`]).
    pub fn centred_rows(&self, xt: &Matrix, mu: &[f64]) -> Matrix {
        let (beta, alpha) = match self.neighbours {
            Neighbours::ReplaceOne { beta, alpha } | Neighbours::AddRemove { beta, alpha } => (beta, alpha),
            Neighbours::Entry { u } => (u, f64::INFINITY),
        };
        recentre(xt, &Vector::from_column_slice(mu), beta, alpha)
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
    /// The centre μ̂ the rows were mapped by (a DP release, or the given centre), once known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub center: Option<Vec<f64>>,
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
            center: None,
        }
    }

    /// The report with the study's clip and centre.
    pub fn with_row_map(mut self, clip: Option<ClipReport>, center: Option<&[f64]>) -> FederationReport {
        self.clip = clip;
        self.center = center.map(<[f64]>::to_vec);
        self
    }
}

/// What the open round's task carries.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundInput {
    /// The shape of `values`: (0, 0) in the centre's round, (1, 2) in a clip step, (d, p).
    pub rows: usize,
    pub cols: usize,
    /// Nothing, [c, q], or X (column-major).
    pub values: Vec<f64>,
    /// The clip norm of a power round in a study with a clip.
    pub clip_norm: Option<f64>,
    /// The centre μ̂ of every round after the centre's, in a study with one.
    pub center: Option<Vec<f64>>,
}

/// The coordinator's numerics: the public iterate, updated from each unmasked sum, after the
/// study's centre and clip steps if it has them.
pub struct PowerState {
    config: FederatedPowerConfig,
    d: usize,
    x: Matrix,
    last: Option<Matrix>,
    clip: Option<ClipProgress>,
    /// μ̂: given from the start, or released by the centre's round.
    center: Option<Vec<f64>>,
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
        let center = config
            .center
            .as_ref()
            .and_then(|c| c.given())
            .map(<[f64]>::to_vec);
        Ok(PowerState {
            config,
            d,
            x,
            last: None,
            clip,
            center,
        })
    }

    /// The state again from a kept iterate (public), last release (the last unmasked,
    /// noisy sum: a DP release), clip progress and centre, as [`PowerState::iterate`],
    /// [`PowerState::last_release`], [`PowerState::clip_progress`] and [`PowerState::center`]
    /// gave them.
    pub fn restore(
        config: FederatedPowerConfig,
        d: usize,
        x: Matrix,
        last: Option<Matrix>,
        (clip, center): (Option<ClipProgress>, Option<Vec<f64>>),
    ) -> Result<PowerState, RunError> {
        FixedPoint::new(config.fraction_bits).map_err(|e| RunError::Failed(e.to_string()))?;
        let shape_ok = |m: &Matrix| m.shape() == (d, config.p);
        if !shape_ok(&x) || !last.as_ref().is_none_or(shape_ok) {
            return Err(RunError::Failed("the kept iterate has the wrong shape".into()));
        }
        if config.clip.is_some() != clip.is_some() || clip.as_ref().is_some_and(|c| !c.valid()) {
            return Err(RunError::Failed("the kept clip does not match the study".into()));
        }
        let center_ok = match (&config.center, &center) {
            (None, None) => true,
            (Some(study), Some(mu)) => {
                check_center(mu, d).is_ok() && study.given().is_none_or(|given| given == mu.as_slice())
            }
            (Some(study), None) => study.is_private(),
            (None, Some(_)) => false,
        };
        if !center_ok {
            return Err(RunError::Failed(
                "the kept centre does not match the study".into(),
            ));
        }
        Ok(PowerState {
            config,
            d,
            x,
            last,
            clip,
            center,
        })
    }

    /// The clip's search so far, if the study has one.
    pub fn clip_progress(&self) -> Option<&ClipProgress> {
        self.clip.as_ref()
    }

    /// The centre μ̂, once known (given, or released by the centre's round).
    pub fn center(&self) -> Option<&[f64]> {
        self.center.as_deref()
    }

    /// The clip as the report shows it.
    pub fn clip_report(&self) -> Option<ClipReport> {
        let upper = self.config.clip.as_ref()?.search.upper;
        Some(self.clip.as_ref()?.report(upper))
    }

    /// Whether the open round is the private centre's.
    pub fn in_center(&self) -> bool {
        self.config.center_rounds() > 0 && self.center.is_none()
    }

    /// Whether the open round is a step of the clip.
    pub fn in_clip(&self) -> bool {
        !self.in_center() && self.clip.as_ref().is_some_and(ClipProgress::searching)
    }

    /// The released clip norm, once the search is over (`None` without a clip).
    pub fn clip_norm(&self) -> Option<f64> {
        self.clip.as_ref().and_then(ClipProgress::clip_norm)
    }

    /// What the open round's task carries ([`RoundInput`]).
    pub fn task(&self) -> RoundInput {
        let center = self.center.clone();
        match &self.clip {
            _ if self.in_center() => RoundInput {
                rows: 0,
                cols: 0,
                values: Vec::new(),
                clip_norm: None,
                center: None,
            },
            Some(clip) if self.in_clip() => RoundInput {
                rows: 1,
                cols: 2,
                values: clip.step().to_vec(),
                clip_norm: None,
                center,
            },
            _ => RoundInput {
                rows: self.d,
                cols: self.config.p,
                values: self.x.as_slice().to_vec(),
                clip_norm: self.clip_norm(),
                center,
            },
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

    /// The centre's round: μ̂ from the noisy sum, over `survivors_n` (the round's survivors'
    /// pooled public n, under `replace_one`). A clip step: the noisy S(c) moves the bracket. A
    /// power round: Y_l = decode(sum); X_l = Q(Y_l) (Alg. 2 lines 7–8).
    pub fn absorb(&mut self, sum: &[u64], survivors_n: Option<u64>) -> Result<(), RunError> {
        if self.in_center() {
            let center = self
                .config
                .center
                .as_ref()
                .ok_or_else(|| RunError::Failed("no centre".into()))?;
            let mu = center
                .decode(sum, self.d, survivors_n)
                .map_err(RunError::Failed)?;
            self.center = Some(mu);
            return Ok(());
        }
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
