//! The coordinator's side of a CAPE study (docs/design/cape.md, "Live protocol"): `cape_pca`
//! in one stage, `cape_agn` in two (Imtiaz & Sarwate Alg. 3: second moments, then the
//! W-projected third moments). Each stage is calibrated for the roster's actual size, draws a
//! fresh aggregator seed per site, collects one release per site until its deadline, and sums.

use std::collections::BTreeMap;
use std::time::Instant;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};

use crate::algorithms::cape_agn::{self, CapeAgnConfig, CapeAgnParams, Whitening};
use crate::algorithms::cape_center::CapeCenter;
use crate::algorithms::cape_clip::{CapeClip, count_sensitivity, gram_sensitivity_at};
use crate::algorithms::cape_noise::{self as cape, CapeNoise, CapeReport, StageTerms};
use crate::algorithms::cape_pca::{self, CapePcaConfig, CapePcaParams};
use crate::algorithms::study_clip::ClipProgress;
use crate::algorithms::tensor_power::{self, PowerSettings};
use crate::algorithms::{ConfigError, Output};
use crate::dataset::Neighbours;
use crate::federation::crypto::Seed;
use crate::federation::messages::{CapePeer, SiteSignature, SiteTask};
use crate::federation::transcript;
use crate::federation::wire;
use crate::protocols::Protocol;
use crate::protocols::{PlanError, StudyPlan, StudyTerms, parse_params, take_center, take_clip};
use crate::studies::study::{Effect, LiveError, Study, report_value};

/// Which CAPE algorithm a study runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CapeKind {
    /// `cape_pca`: one stage, the packed Gram matrix; the top-k eigenvectors.
    Pca { k: usize },
    /// `cape_agn`: stage 1 the packed second moment, stage 2 the W-projected third moment.
    Agn(Box<CapeAgnConfig>),
}

/// What a CAPE study needs to calibrate once its roster is fixed (public: it is kept in the
/// study's snapshot, `src/protocols/cape/durable.rs`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapePlan {
    pub kind: CapeKind,
    pub pair_ratio: f64,
    /// Δ of one site's statistic in each stage.
    pub stages: Vec<f64>,
    /// The ρ every site is charged, as the ledger holds it (the amount a site's view states);
    /// each stage is calibrated to an equal share of it, or with a centre or a clip to
    /// [`stage_share`].
    pub rho: f64,
    /// `cape_pca`'s private clip: 8 count stages before the Gram stage (`stages` holds their
    /// Δ, then the Gram stage's Δ at β).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clip: Option<CapeClip>,
    /// `cape_pca`'s private centre: one stage before the clip's ([`CapeCenter`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub center: Option<PlanCenter>,
}

/// A private centre's share of the charge, and the study's bounds its sum is decoded with.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PlanCenter {
    pub share: f64,
    pub neighbours: Neighbours,
}

impl CapePlan {
    /// The share of the charge stage `stage` is calibrated to (as a site computes it).
    pub fn stage_share(&self, stage: u32) -> Option<f64> {
        let center = self.center.map(|c| c.share);
        stage_share(self.rho, self.stages.len(), (center, self.clip.as_ref()), stage)
    }

    /// Stages before the clip's: 1 with a private centre, else 0.
    pub fn center_stages(&self) -> u32 {
        u32::from(self.center.is_some())
    }

    /// Whether `stage` is the Gram stage of a `cape_pca` study with a clip (calibrated at the
    /// released c).
    fn is_clipped_gram(&self, stage: u32) -> bool {
        self.clip
            .as_ref()
            .is_some_and(|clip| stage > self.center_stages() + clip.steps())
    }

    /// The stage's noise for a roster of `sites`, from the same public terms a site derives it
    /// from ([`StageTerms`]): the site compares, and refuses on any difference. The Gram stage
    /// of a study with a clip is calibrated at the released `clip_norm`.
    pub fn stage_noise(&self, stage: u32, sites: u32, clip_norm: Option<f64>) -> Option<CapeNoise> {
        let base = *self.stages.get((stage as usize).checked_sub(1)?)?;
        let sensitivity = match (&self.clip, clip_norm) {
            (Some(clip), Some(c)) if self.is_clipped_gram(stage) => gram_sensitivity_at(base, clip.upper, c),
            (Some(_), None) if self.is_clipped_gram(stage) => return None,
            _ => base,
        };
        StageTerms {
            sensitivity,
            share: self.stage_share(stage)?,
            sites,
            pair_ratio: self.pair_ratio,
        }
        .noise()
    }
}

/// Stage `stage`'s share of the `charged` ρ in a study of `stages` stages: an equal share, or
/// with a private centre (its share f_c of ρ, stage 1) or a clip (its steps next,
/// [`CapeClip::shares_after`]) the centre's f_c·ρ, a step's, or the Gram stage's rest, nudged
/// down until every share together is at most ρ as evaluated. Shared by the coordinator and
/// the site.
pub fn stage_share(
    charged: f64,
    stages: usize,
    (center, clip): (Option<f64>, Option<&CapeClip>),
    stage: u32,
) -> Option<f64> {
    let spent = center.map_or(0.0, |f| charged * f);
    let after = stage.checked_sub(u32::from(center.is_some()))?;
    if after == 0 {
        return Some(spent);
    }
    match clip {
        Some(clip) => {
            let (step, rest) = clip.shares_after(charged, spent);
            Some(if after <= clip.steps() { step } else { rest })
        }
        None if center.is_some() => {
            let mut rest = charged - spent;
            while spent + rest > charged {
                rest = rest.next_down();
            }
            Some(rest)
        }
        None => Some(charged / f64::from(u32::try_from(stages).ok().filter(|s| (1..=2).contains(s))?)),
    }
}

/// Every stage's share of the `charged` ρ ([`stage_share`]): each positive, and all of them
/// summed in stage order at most `charged`. A site checks this before its first release: a
/// configuration whose centre and clip shares together reach ρ leaves the Gram stage a share
/// of at most 0, which that stage refuses, but only after the centre and clip stages were
/// released at shares summing past ρ.
pub fn check_stage_shares(
    charged: f64,
    stages: usize,
    shares: (Option<f64>, Option<&CapeClip>),
) -> Result<(), String> {
    let mut total = 0.0;
    for stage in 1..=u32::try_from(stages).map_err(|_| "too many stages".to_string())? {
        let share = stage_share(charged, stages, shares, stage)
            .filter(|share| share.is_finite() && *share > 0.0)
            .ok_or_else(|| format!("stage {stage} of {stages} gets no positive share of the study's ρ"))?;
        total += share;
    }
    if total > charged {
        return Err(format!(
            "the stages' shares add up to ρ = {total}, more than the {charged} this site is charged"
        ));
    }
    Ok(())
}

/// What the configuration shows: the Gram stage's noise at β for the invited sites, with the
/// share of ρ the centre's and the clip's stages leave it.
fn gram_noise(plan: &CapePlan, config: &CapePcaConfig, sites: u32) -> Result<CapeNoise, PlanError> {
    let gram_share = plan
        .stage_share(plan.stages.len() as u32)
        .filter(|share| *share > 0.0)
        .ok_or_else(|| {
            ConfigError::invalid(
                "params.center_share",
                "the centre's and the clip's shares must leave part of ρ to the Gram stage",
            )
        })?;
    let noise = CapeNoise::calibrate(config.noise.sensitivity, gram_share, sites, config.pair_ratio);
    Ok(noise.ok_or_else(|| {
        ConfigError::invalid(
            "rho",
            "is too small or too large to calibrate noise in floating point",
        )
    })?)
}

/// A `cape_pca` study's stages' sensitivities, in order: the private centre's (when asked),
/// the clip's count stages, then the Gram stage's (`gram`).
fn stage_sensitivities(
    private_center: bool,
    clip: Option<&CapeClip>,
    neighbours: &Neighbours,
    gram: f64,
) -> Result<Vec<f64>, PlanError> {
    let mut stages = Vec::new();
    if private_center {
        stages
            .push(CapeCenter::sensitivity(neighbours).map_err(|e| ConfigError::invalid("params.center", e))?);
    }
    if let Some(clip) = clip {
        let count = count_sensitivity(neighbours, clip.quantile);
        stages.extend(vec![count; clip.steps() as usize]);
    }
    stages.push(gram);
    Ok(stages)
}

/// Plans a `cape_pca` study: one stage, Δ of the packed Gram matrix; with `center: "private"`
/// the centre's stage first, and with `clip` (`"auto"` by default, as a central job on records)
/// the search's 8 count stages before the Gram stage.
pub(crate) fn plan_pca(
    mut params: serde_json::Value,
    terms: &StudyTerms<'_>,
) -> Result<StudyPlan, PlanError> {
    let ask = take_clip(&mut params, terms.context)?;
    let center = take_center(&mut params, terms.context)?.map(CapeCenter::from_request);
    let parsed: CapePcaParams = parse_params(params)?;
    let mut config = cape_pca::configure_for(
        parsed.k,
        parsed.pair_ratio,
        terms.context,
        terms.target,
        terms.sites,
        "sites",
    )?;
    let neighbours = terms.context.neighbours;
    let private = center.as_ref().and_then(CapeCenter::share);
    config.center = center;
    if ask.is_none() && private.is_none() {
        let rho = config.noise.cost();
        let plan = CapePlan {
            kind: CapeKind::Pca { k: config.k },
            pair_ratio: config.pair_ratio,
            stages: vec![config.noise.sensitivity],
            rho,
            clip: None,
            center: None,
        };
        return Ok(StudyPlan {
            config: serde_json::to_value(&config)?,
            protocol: Protocol::Cape(plan),
            rounds: 1,
            rho,
        });
    }
    let rho = terms.target.rho;
    let clip = ask
        .map(|ask| CapeClip::configure(ask, rho, &neighbours, terms.context.d))
        .transpose()?;
    let stages = stage_sensitivities(
        private.is_some(),
        clip.as_ref(),
        &neighbours,
        config.noise.sensitivity,
    )?;
    let plan = CapePlan {
        kind: CapeKind::Pca { k: config.k },
        pair_ratio: config.pair_ratio,
        stages,
        rho,
        clip: clip.clone(),
        center: private.map(|share| PlanCenter { share, neighbours }),
    };
    config.noise = gram_noise(&plan, &config, terms.sites)?;
    config.clip = clip;
    Ok(StudyPlan {
        config: serde_json::to_value(&config)?,
        rounds: plan.stages.len() as u32,
        protocol: Protocol::Cape(plan),
        rho,
    })
}

/// Plans a `cape_agn` study: two stages (second, then whitened third moments). The number of
/// sites is the study's, so a complaint about it names the study's `sites`.
pub(crate) fn plan_agn(
    mut params: serde_json::Value,
    terms: &StudyTerms<'_>,
) -> Result<StudyPlan, PlanError> {
    // Like a central cape_agn job, a study does not clip by default; it does not clip at all.
    if let Some(clip) = params.as_object_mut().and_then(|p| p.remove("clip"))
        && clip != serde_json::json!("none")
    {
        return Err(ConfigError::invalid(
            "params.clip",
            "cape_agn studies do not clip: use \"none\" or leave it out",
        )
        .into());
    }
    // Like a central cape_agn job, a study takes `center: "none"` only: its parameters carry
    // `center`, and `configure` refuses any other value (the moment models are about raw moments).
    let mut parsed: CapeAgnParams = parse_params(params)?;
    parsed.sites = Some(terms.sites);
    let pair_ratio = parsed.pair_ratio.unwrap_or(cape::DEFAULT_PAIR_RATIO);
    let config = cape_agn::configure(parsed, terms.context, terms.target).map_err(|e| match e {
        ConfigError::Invalid { field, message } if field == "params.sites" => ConfigError::Invalid {
            field: "sites".into(),
            message,
        },
        other => other,
    })?;
    let rho = config.stage1.cost() + config.stage2.cost();
    let plan = CapePlan {
        center: None,
        kind: CapeKind::Agn(Box::new(config.clone())),
        pair_ratio,
        stages: vec![config.stage1.sensitivity, config.stage2.sensitivity],
        rho,
        clip: None,
    };
    Ok(StudyPlan {
        config: serde_json::to_value(&config)?,
        protocol: Protocol::Cape(plan),
        rounds: 2,
        rho,
    })
}

/// A CAPE study after its roster is fixed.
pub struct CapeRunning {
    pub(crate) plan: CapePlan,
    pub(crate) stage: u32,
    pub(crate) noise: CapeNoise,
    pub(crate) roster: Vec<u32>,
    pub(crate) peers: Vec<CapePeer>,
    /// The open stage's aggregator seeds (replaced when a stage opens).
    pub(crate) aggregator_seeds: BTreeMap<u32, Seed>,
    /// The open stage's releases (cleared when a stage opens).
    pub(crate) releases: BTreeMap<u32, Vec<f64>>,
    pub(crate) len: usize,
    /// Stage 2 of `cape_agn`: the whitening W (D×K), base64 for the tasks.
    pub(crate) input: Option<(String, usize, usize)>,
    pub(crate) whitening: Option<Whitening>,
    pub(crate) reports: Vec<CapeReport>,
    /// The open stage's confirmations of its transcript (the consistency round; sites check
    /// them, docs/design/federation.md "The consistency round").
    pub(crate) confirmations: BTreeMap<u32, String>,
    /// The open stage's consistency round is over: releases are collected.
    pub(crate) confirmed: bool,
    /// `cape_pca` with a clip: the search so far (its steps follow the centre's stage).
    pub(crate) clip: Option<ClipProgress>,
    /// `cape_pca` with a private centre: μ̂, once the centre's stage is summed.
    pub(crate) center: Option<Vec<f64>>,
}

impl CapeRunning {
    /// `site`'s task, or `None` when it has nothing to do in this stage.
    pub(crate) fn task(&self, site: u32) -> Option<SiteTask> {
        if !self.roster.contains(&site) || self.releases.contains_key(&site) {
            return None;
        }
        if !self.confirmed && self.confirmations.contains_key(&site) {
            return None;
        }
        let confirmations = if self.confirmed {
            SiteSignature::relay(&self.confirmations, None)
        } else {
            Vec::new()
        };
        let (input, input_rows, input_cols) = match &self.input {
            Some((b64, rows, cols)) => (Some(b64.clone()), *rows, *cols),
            None => (None, 0, 0),
        };
        Some(SiteTask::CapeRelease {
            stage: self.stage,
            stages: self.plan.stages.len() as u32,
            peers: self.peers.iter().filter(|p| p.index != site).cloned().collect(),
            aggregator_seed: wire::encode(&self.aggregator_seeds[&site]),
            noise: self.noise,
            len: self.len,
            input,
            input_rows,
            input_cols,
            confirm: !self.confirmed,
            confirmations,
        })
    }

    fn fresh_seeds(&mut self) {
        let mut rng = ChaCha20Rng::from_os_rng();
        self.aggregator_seeds = self
            .roster
            .iter()
            .map(|&s| (s, cape::fresh_seed(&mut rng)))
            .collect();
        self.releases.clear();
        self.confirmations.clear();
        self.confirmed = false;
    }

    /// Whether the open stage is the private centre's.
    pub(crate) fn in_center(&self) -> bool {
        self.plan.center.is_some() && self.center.is_none()
    }

    /// The open stage's public input, from the state: `cape_agn`'s W in its stage 2; nothing in
    /// the centre's own stage; otherwise a clip step's [c, q] or the Gram stage's [c] (with a
    /// clip), followed by μ̂ (with a private centre), as one row; nothing when both are absent.
    pub(crate) fn input_now(&self) -> Option<(String, usize, usize)> {
        if let Some(w) = &self.whitening {
            return Some((wire::f64s_to_b64(w.w.as_slice()), w.w.nrows(), w.w.ncols()));
        }
        if self.in_center() {
            return None;
        }
        let mut values = match &self.clip {
            Some(progress) => match progress.clip_norm() {
                None => progress.step().to_vec(),
                Some(c) => vec![c],
            },
            None => Vec::new(),
        };
        values.extend(self.center.iter().flatten());
        (!values.is_empty()).then(|| (wire::f64s_to_b64(&values), 1, values.len()))
    }

    /// Opens stage `stage` + 1 of `cape_pca` with `len` values, calibrated at `clip_norm`.
    fn open_next(&mut self, len: usize, clip_norm: Option<f64>) -> Result<(), String> {
        let stage = self.stage + 1;
        self.noise = self
            .plan
            .stage_noise(stage, self.roster.len() as u32, clip_norm)
            .ok_or_else(|| format!("stage {stage}'s noise could not be calibrated"))?;
        self.len = len;
        self.stage = stage;
        self.input = self.input_now();
        self.fresh_seeds();
        Ok(())
    }

    /// The centre's stage is summed: μ̂ from the noisy sum over the survivors (their pooled n
    /// `survivors_n` under `replace_one`), and the next stage opens: the clip's first step, or
    /// the Gram stage; every later input carries μ̂.
    fn next_after_center(&mut self, sum: &[f64], d: usize, survivors_n: Option<u64>) -> Result<(), String> {
        let center = self.plan.center.ok_or("no centre")?;
        self.center = Some(CapeCenter::decode(sum, d, &center.neighbours, survivors_n)?);
        let searching = self.clip.as_ref().is_some_and(ClipProgress::searching);
        self.open_next(if searching { 1 } else { d * (d + 1) / 2 }, None)
    }

    /// A step of the clip is summed: its noisy count moves the bracket, and the next stage
    /// opens: the next step ([c, q], one value), or after the last step the Gram stage on rows
    /// clipped at the released c ([c]), calibrated at Δ(c); μ̂ follows in both inputs where the
    /// study has a private centre.
    fn next_clip_stage(&mut self, sum: &[f64], d: usize) -> Result<(), String> {
        let progress = self.clip.as_mut().ok_or("no clip")?;
        let [count] = sum else {
            return Err("a clip step's sum is not one value".into());
        };
        progress.absorb(*count);
        let clip_norm = progress.clip_norm();
        self.open_next(if clip_norm.is_some() { d * (d + 1) / 2 } else { 1 }, clip_norm)
    }

    /// `cape_pca`'s report: the Gram stage's noise, and the clip if the study had one.
    /// `cape_agn` after stage 1: the whitening W from the noisy second moment `sum`, and stage 2
    /// opened with it as the sites' public input (Imtiaz & Sarwate Alg. 3, docs/design/cape.md).
    fn open_agn_second_stage(&mut self, sum: &[f64], d: usize, config: &CapeAgnConfig) -> Result<(), String> {
        let m2 = cape::unpack_symmetric(sum, d)?;
        let floor = cape_agn::noise_floor(d, self.reports[0].noise_sd);
        let whitening = cape_agn::whiten(&m2, config.k, floor).map_err(|e| e.to_string())?;
        let Some(noise) = self
            .plan
            .stage_noise(self.stage + 1, self.roster.len() as u32, None)
        else {
            return Err("the stage-2 noise could not be calibrated".to_string());
        };
        self.input = Some((
            wire::f64s_to_b64(whitening.w.as_slice()),
            whitening.w.nrows(),
            whitening.w.ncols(),
        ));
        self.len = tensor_power::packed_len(config.k);
        self.whitening = Some(whitening);
        self.noise = noise;
        self.stage += 1;
        self.fresh_seeds();
        Ok(())
    }

    /// `cape_agn` after stage 2: the tensor power method on the noisy whitened third moment
    /// `sum`, unwhitened into the model's components (Alg. 3), and the report.
    fn finish_agn(
        &self,
        sum: &[f64],
        d: usize,
        config: &CapeAgnConfig,
    ) -> Result<(Output, serde_json::Value), String> {
        let whitening = self.whitening.as_ref().ok_or("no whitening from stage 1")?;
        let settings = PowerSettings {
            starts: config.starts,
            iterations: config.power_iterations,
        };
        let mut rng = ChaCha20Rng::from_os_rng();
        let pairs = tensor_power::tensor_power(sum, config.k, config.k, settings, &mut rng)?;
        let components = cape_agn::unwhiten(whitening, &pairs, config.model);
        let basis = cape_agn::components_basis(&components, d);
        let report = serde_json::json!({
            "stage1": self.reports.first(),
            "stage2": self.reports.get(1),
            "components": {
                "vectors": components.vectors,
                "weights": components.weights,
                "clamped_eigenvalues": whitening.clamped,
            },
        });
        let output = Output {
            basis,
            eigenvalues: None,
        };
        Ok((output, report))
    }

    fn pca_report(&self) -> serde_json::Value {
        let mut report = report_value(self.reports.last());
        let first = self.plan.center_stages() as usize;
        let Some(object) = report.as_object_mut() else {
            return report;
        };
        if let (Some(progress), Some(clip)) = (&self.clip, &self.plan.clip) {
            object.insert("clip".into(), report_value(progress.report(clip.upper)));
            let steps = self.reports.get(first..self.reports.len().saturating_sub(1));
            object.insert("clip_stages".into(), report_value(steps));
        }
        if let Some(mu) = &self.center {
            object.insert("center".into(), report_value(mu));
            object.insert("center_stage".into(), report_value(self.reports.first()));
        }
        report
    }

    /// The sum of this stage's releases minus the aggregator terms (projected by W in stage 2
    /// of `cape_agn`: F₃^s(W, W, W), Alg. 3 step 13, the same code as the simulation).
    fn stage_sum(&self) -> Result<Vec<f64>, String> {
        match (&self.plan.kind, &self.whitening) {
            (CapeKind::Agn(_), Some(whitening)) => {
                cape_agn::stage2_sum(&self.releases, &self.aggregator_seeds, &self.noise, &whitening.w)
            }
            _ => cape::aggregate(&self.releases, &self.aggregator_seeds, self.len, &self.noise),
        }
    }
}

impl CapeRunning {
    /// The roster is fixed: calibrate stage 1 for its size, draw the aggregator seeds, charge,
    /// and ask every site for its release (None: the study failed).
    pub(crate) fn open(
        live: &mut Study,
        plan: CapePlan,
        roster: Vec<u32>,
        effects: &mut Vec<Effect>,
    ) -> Option<Box<CapeRunning>> {
        // The records the roster reported at join (public under replace_one): the clip's q.
        let pooled_n = roster
            .iter()
            .map(|s| live.joined.get(s).and_then(|j| j.n_samples))
            .sum::<Option<u64>>();
        let clip = match (&plan.clip, &plan.kind) {
            (Some(clip), CapeKind::Pca { k }) => {
                Some(ClipProgress::new(clip.upper, clip.quantile_for(pooled_n, *k)))
            }
            _ => None,
        };
        let Some(noise) = plan.stage_noise(1, roster.len() as u32, None) else {
            live.fail(
                "the noise could not be calibrated for this roster; nothing was charged".into(),
                None,
                effects,
            );
            return None;
        };
        let peers = roster
            .iter()
            .map(|&i| CapePeer {
                index: i,
                name: live.names.get(&i).cloned().unwrap_or_default(),
                noise_public_keys: live.joined[&i].mask_public_keys.clone(),
                signing_public_key: live.joined[&i].signing_public_key.clone().unwrap_or_default(),
            })
            .collect();
        effects.push(Effect::Charge {
            roster: roster.clone(),
            dropped: Vec::new(),
        });
        let len = match (&plan.center, &clip) {
            (Some(center), _) => CapeCenter::len(&center.neighbours, live.d),
            (None, Some(_)) => 1,
            (None, None) => live.d * (live.d + 1) / 2,
        };
        let mut running = CapeRunning {
            plan,
            stage: 1,
            noise,
            roster,
            peers,
            aggregator_seeds: BTreeMap::new(),
            releases: BTreeMap::new(),
            len,
            input: None,
            whitening: None,
            reports: Vec::new(),
            confirmations: BTreeMap::new(),
            confirmed: false,
            clip,
            center: None,
        };
        running.input = running.input_now();
        running.fresh_seeds();
        Some(Box::new(running))
    }

    /// A CAPE site's release for `stage`.
    pub(crate) fn release(
        &mut self,
        live: &Study,
        site: u32,
        stage: u32,
        values: &str,
    ) -> Result<(), LiveError> {
        let cape = self;
        if stage < cape.stage && cape.roster.contains(&site) {
            return Err(LiveError::AlreadyReceived(format!(
                "stage {stage} is over; this site's release for it already arrived or came too late"
            )));
        }
        if stage != cape.stage {
            return Err(LiveError::Conflict(format!(
                "stage {stage} is not open (stage {} is)",
                cape.stage
            )));
        }
        if !cape.roster.contains(&site) || live.out.contains_key(&site) {
            return Err(LiveError::Conflict("this site is not in the roster".into()));
        }
        if cape.releases.contains_key(&site) {
            return Err(LiveError::AlreadyReceived(
                "this site's release already arrived".into(),
            ));
        }
        if !cape.confirmed {
            return Err(LiveError::Conflict(format!(
                "stage {stage}'s consistency round is still open: confirm the stage first"
            )));
        }
        let values = wire::b64_to_f64s(values, cape.len).map_err(|e| LiveError::Invalid(e.to_string()))?;
        if !values.iter().all(|v| v.is_finite()) {
            return Err(LiveError::Invalid("every value must be a finite number".into()));
        }
        cape.releases.insert(site, values);
        Ok(())
    }

    /// A CAPE site's confirmation of `stage`'s transcript (the consistency round).
    pub(crate) fn confirm(
        &mut self,
        live: &Study,
        site: u32,
        stage: u32,
        signature: &str,
    ) -> Result<(), LiveError> {
        let cape = self;
        let member = cape.roster.contains(&site);
        if (stage < cape.stage && member) || (stage == cape.stage && cape.confirmations.contains_key(&site)) {
            return Err(LiveError::AlreadyReceived(format!(
                "this site's confirmation of stage {stage} already arrived"
            )));
        }
        if stage != cape.stage {
            return Err(LiveError::Conflict(format!(
                "stage {stage} is not open (stage {} is)",
                cape.stage
            )));
        }
        if !member || live.out.contains_key(&site) {
            return Err(LiveError::Conflict("this site is not in the roster".into()));
        }
        if cape.confirmed {
            return Err(LiveError::Conflict(format!(
                "stage {stage}'s consistency round is over"
            )));
        }
        transcript::check_shape(signature).map_err(|e| LiveError::Invalid(e.to_string()))?;
        cape.confirmations.insert(site, signature.to_owned());
        Ok(())
    }

    /// The stage's consistency round closes when every site still in confirmed, or at the
    /// deadline with at least the study's threshold (each site checks its own quorum before it
    /// releases); fewer fail the study (charges stand).
    fn advance_confirm(
        &mut self,
        live: &mut Study,
        now: Instant,
        expected: &[u32],
        effects: &mut Vec<Effect>,
    ) -> bool {
        let cape = self;
        let all = expected.iter().all(|s| cape.confirmations.contains_key(s));
        if !(all || now >= live.deadline) {
            return false;
        }
        let (stage, have) = (cape.stage, cape.confirmations.len());
        if (have as u32) < live.threshold.max(2) {
            let report = report_value(&cape.reports);
            live.fail(
                format!(
                    "only {have} sites confirmed stage {stage}'s transcript; {} are needed; the study stops (charges stand)",
                    live.threshold.max(2)
                ),
                Some(report),
                effects,
            );
            return true;
        }
        cape.confirmed = true;
        live.next_phase(now);
        true
    }

    /// Closes the open stage when every site still in has sent, or at the deadline; silent
    /// sites are dropouts (their pair terms stay in the sum, reported). After the last stage,
    /// the result; with no release at all, the study fails (charges stand).
    pub(crate) fn advance(&mut self, live: &mut Study, now: Instant, effects: &mut Vec<Effect>) -> bool {
        let d = live.d;
        let expected: Vec<u32> = self
            .roster
            .iter()
            .copied()
            .filter(|s| !live.out.contains_key(s))
            .collect();
        if !self.confirmed {
            return self.advance_confirm(live, now, &expected, effects);
        }
        let cape = self;
        let all = expected.iter().all(|s| cape.releases.contains_key(s));
        if !(all || now >= live.deadline) {
            return false;
        }
        let stage = cape.stage;
        let survivors: Vec<u32> = cape.releases.keys().copied().collect();
        let dropped: Vec<u32> = cape
            .roster
            .iter()
            .copied()
            .filter(|s| !cape.releases.contains_key(s))
            .collect();
        let newly_out: Vec<u32> = dropped
            .iter()
            .copied()
            .filter(|s| !live.out.contains_key(s))
            .collect();
        cape.reports.push(cape.noise.report(survivors.clone(), dropped));
        let last = stage as usize == cape.plan.stages.len();
        let sum = if survivors.is_empty() {
            Err(format!(
                "no site sent its stage-{stage} release before the deadline; the study stops (charges stand)"
            ))
        } else {
            cape.stage_sum()
        };
        let searching = cape.clip.as_ref().is_some_and(ClipProgress::searching);
        let centring = cape.in_center();
        // The survivors' pooled public n (replace_one): what a private centre divides by.
        let survivors_n = survivors
            .iter()
            .map(|s| live.joined.get(s).and_then(|j| j.n_samples))
            .sum::<Option<u64>>();
        let outcome = sum.and_then(|sum| match (&cape.plan.kind, last) {
            _ if centring => cape.next_after_center(&sum, d, survivors_n).map(|()| None),
            _ if searching => cape.next_clip_stage(&sum, d).map(|()| None),
            (CapeKind::Pca { k }, _) => crate::algorithms::cape_pca::finish(&sum, d, *k)
                .map(|output| Some((output, cape.pca_report())))
                .map_err(|e| e.to_string()),
            (CapeKind::Agn(config), false) => {
                let config = config.clone();
                cape.open_agn_second_stage(&sum, d, &config).map(|()| None)
            }
            (CapeKind::Agn(config), true) => cape.finish_agn(&sum, d, config).map(Some),
        });
        let failure_report = match cape.reports.as_slice() {
            [only] => report_value(only),
            several => report_value(several),
        };
        live.mark_out(
            &newly_out,
            stage,
            "this site sent nothing before the deadline",
            effects,
        );
        effects.push(Effect::Progress { done: stage });
        match outcome {
            Ok(Some((output, report))) => live.succeed(output, report, effects),
            Ok(None) => live.next_phase(now),
            Err(e) => live.fail(e, Some(failure_report), effects),
        }
        true
    }
}
