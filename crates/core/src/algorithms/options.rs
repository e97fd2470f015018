//! The generic job options every algorithm takes unless it declares a parameter of the same
//! name: `center` and `center_share` ([`super::centering`]), `clip` ([`super::clipping`]),
//! `with_eigenvalues` and `eigenvalue_share` ([`super::eigenvalues`]); their calibration, the
//! keys they add to a stored configuration, and the ρ split among them.
//!
//! **The ρ split** (what `POST /v1/privacy/plan` and a job's `cost` show, summed): the options
//! are charged first, each on its share of the job's ρ, composed in order centring →
//! eigenvalues → clip (zCDP composes by addition, Bun & Steinke 2016, Lemma 2.3), and the
//! algorithm gets what is left,
//!
//!   ρ_algorithm = ρ − ρ_center − ρ_eigenvalues − ρ_clip,
//!
//! nudged down until the composed total is ≤ ρ in floating point too ([`split_rest`]). Each
//! option's ρ is recomputed from its stored noise ([`Options::cost`]), so the split is what the
//! noise costs, not what was asked for. A split that leaves the algorithm nothing is refused on
//! the share that caused it.

use serde_json::{Map, Value, json};

use super::centering::CenterConfig;
use super::clipping::{self, ClipConfig, ClipRequest};
use super::eigenvalues::{self, EigenvalueConfig};
use super::{AlgorithmInfo, ConfigError, NoiseScale, RunError, parameters};
use crate::dataset::{DataContext, Kind};
use crate::privacy::{Cost, PrivacyTarget};

// Generic job options (`center`, `center_share`, `clip`, `with_eigenvalues`,
// `eigenvalue_share`: [`super::parameters::GenericParams`]) are handled here for every
// algorithm (see [`super::centering`], [`super::clipping`] and [`super::eigenvalues`]), unless
// the algorithm declares a parameter of the same name itself.
/// Top-level keys added to the stored configuration when an option is used.
const CONFIG_CENTER: &str = "center";
const CONFIG_EIGENVALUES: &str = "eigenvalues";
const CONFIG_WITH_EIGENVALUES: &str = "with_eigenvalues";
const CONFIG_CLIP: &str = "clip";
/// Recorded when `clip: "auto"` chose not to clip.
const CONFIG_CLIP_AUTO: &str = "clip_auto";

/// The generic options of one job, validated and calibrated.
#[derive(Debug, Default)]
pub(crate) struct Options {
    pub(crate) center: Option<CenterConfig>,
    pub(crate) with_eigenvalues: Option<bool>,
    pub(crate) eigenvalues: Option<EigenvalueConfig>,
    pub(crate) clip: Option<ClipConfig>,
    /// `clip: "auto"` decided not to clip (recorded with the job).
    pub(crate) clip_auto_declined: bool,
}

impl Options {
    /// Removes the generic parameters the algorithm does not declare from `params` and splits
    /// the target: the options' costs first, the algorithm gets the rest.
    pub(crate) fn take(
        info: &AlgorithmInfo,
        own: &Map<String, Value>,
        params: &mut Value,
        ctx: &DataContext,
        target: &PrivacyTarget,
    ) -> Result<(Options, PrivacyTarget), ConfigError> {
        let Value::Object(map) = params else {
            return Ok((Options::default(), *target));
        };
        let mut options = Options::default();
        let generic = parameters::take_generic(own, map)?;
        let center = super::centering::request(generic.center, generic.center_share, ctx)?;
        let with = generic.with_eigenvalues;
        check_eigenvalue_share(info, with, generic.eigenvalue_share)?;
        let eigen_share = generic.eigenvalue_share;
        options.with_eigenvalues = with;
        let defaulted = generic.clip.is_none() && clip_by_default(info, own, ctx);
        let k = map.get("k").and_then(Value::as_u64).map_or(1, |k| k as usize);
        let clip = match choose_clip(info, generic.clip, defaulted, ctx, target.rho, k)? {
            ClipChoice::Clip(choice) => Some(choice),
            ClipChoice::Declined => {
                options.clip_auto_declined = !defaulted;
                None
            }
            ClipChoice::None => None,
        };
        let needs_charge = with == Some(true) && !info.releases_eigenvalues;
        if center.is_none() && !needs_charge && clip.is_none() {
            return Ok((options, *target));
        }
        let rho = target.rho;
        if !(rho > 0.0 && rho.is_finite()) {
            return Err(ConfigError::invalid("rho", "must be a finite number > 0"));
        }
        if let Some(request) = center {
            options.center = Some(super::centering::configure(request, ctx, rho)?);
        }
        if needs_charge {
            let share = eigen_share.unwrap_or(eigenvalues::DEFAULT_EIGENVALUE_SHARE);
            options.eigenvalues = Some(eigenvalues::configure(share, ctx, rho));
        }
        if let Some(((quantile, share), auto)) = clip {
            // The algorithm's target is filled in below, once every option's cost is known.
            let placeholder = PrivacyTarget {
                public_default: false,
                rho,
                delta: target.delta,
                epsilon: None,
            };
            options.clip = Some(clipping::configure(
                quantile,
                share,
                auto,
                ctx,
                rho,
                Value::Object(map.clone()),
                placeholder,
            )?);
        }
        let rest = split_rest(&options, target)?;
        if let Some(clip) = options.clip.as_mut() {
            clip.algorithm_target = rest;
        }
        Ok((options, rest))
    }

    /// The options' own cost (composed before the algorithm's).
    pub(crate) fn cost(&self) -> Cost {
        let center = self.center.as_ref().map_or(Cost::ZERO, CenterConfig::cost);
        let eigen = self
            .eigenvalues
            .as_ref()
            .map_or(Cost::ZERO, EigenvalueConfig::cost);
        let clip = self.clip.as_ref().map_or(Cost::ZERO, ClipConfig::cost);
        center.then(eigen).then(clip)
    }

    pub(crate) fn noise(&self, d: usize, k: Option<usize>) -> Vec<NoiseScale> {
        let mut noise = self.center.as_ref().map_or(Vec::new(), |c| c.noise_scales(d));
        if let Some(e) = &self.eigenvalues {
            noise.push(e.noise_scale(k.unwrap_or(0)));
        }
        if let Some(c) = &self.clip {
            noise.push(c.noise_scale());
        }
        noise
    }

    /// Adds the options to the algorithm's configuration object.
    pub(crate) fn store(&self, config: &mut Value) -> Result<(), ConfigError> {
        if self.center.is_none()
            && self.with_eigenvalues.is_none()
            && self.clip.is_none()
            && !self.clip_auto_declined
        {
            return Ok(());
        }
        let Value::Object(map) = config else {
            return Err(ConfigError::invalid("params", "configuration is not an object"));
        };
        let mut put = |key: &str, value: Value| {
            if map.insert(key.to_string(), value).is_some() {
                Err(ConfigError::invalid(
                    "params",
                    format!("configuration key `{key}` is used by the algorithm"),
                ))
            } else {
                Ok(())
            }
        };
        let ser = |e: serde_json::Error| {
            ConfigError::invalid("params", format!("configuration not serialisable: {e}"))
        };
        if let Some(c) = &self.center {
            put(CONFIG_CENTER, serde_json::to_value(c).map_err(ser)?)?;
        }
        if let Some(w) = self.with_eigenvalues {
            put(CONFIG_WITH_EIGENVALUES, Value::Bool(w))?;
        }
        if let Some(e) = &self.eigenvalues {
            put(CONFIG_EIGENVALUES, serde_json::to_value(e).map_err(ser)?)?;
        }
        if let Some(c) = &self.clip {
            put(CONFIG_CLIP, serde_json::to_value(c).map_err(ser)?)?;
        }
        if self.clip_auto_declined {
            put(
                CONFIG_CLIP_AUTO,
                json!(
                    "not clipped: the public n, d and ρ say the declared bound already leaves little noise"
                ),
            )?;
        }
        Ok(())
    }

    /// Splits a stored configuration into the algorithm's own object and the options.
    pub(crate) fn load(
        own_params: &Map<String, Value>,
        config: &Value,
    ) -> Result<(Value, Options), RunError> {
        let bad = |e: serde_json::Error| RunError::Failed(format!("stored configuration is unreadable: {e}"));
        let mut own = config.clone();
        let mut options = Options::default();
        if let Value::Object(map) = &mut own {
            if !parameters::declares(own_params, "center")
                && let Some(c) = map.remove(CONFIG_CENTER)
            {
                options.center = Some(serde_json::from_value(c).map_err(bad)?);
            }
            if !parameters::declares(own_params, "with_eigenvalues")
                && let Some(w) = map.remove(CONFIG_WITH_EIGENVALUES)
            {
                options.with_eigenvalues = Some(serde_json::from_value(w).map_err(bad)?);
            }
            if let Some(e) = map.remove(CONFIG_EIGENVALUES) {
                options.eigenvalues = Some(serde_json::from_value(e).map_err(bad)?);
            }
            if !parameters::declares(own_params, "clip")
                && let Some(c) = map.remove(CONFIG_CLIP)
            {
                options.clip = Some(serde_json::from_value(c).map_err(bad)?);
            }
            if map.remove(CONFIG_CLIP_AUTO).is_some() {
                options.clip_auto_declined = true;
            }
        }
        Ok((own, options))
    }
}

/// Whether a job that does not mention `clip` gets `"auto"`: records datasets, algorithms whose
/// catalog entry says so ([`AlgorithmInfo::clip_by_default`]) and that do not declare a `clip`
/// of their own.
pub(crate) fn clip_by_default(info: &AlgorithmInfo, own: &Map<String, Value>, ctx: &DataContext) -> bool {
    ctx.kind() == Kind::Records && info.clip_by_default && !parameters::declares(own, "clip")
}

/// `eigenvalue_share` in (0, 1), and only with `with_eigenvalues = true` on an algorithm that
/// does not release eigenvalues itself.
fn check_eigenvalue_share(
    info: &AlgorithmInfo,
    with: Option<bool>,
    share: Option<f64>,
) -> Result<(), ConfigError> {
    let Some(share) = share else {
        return Ok(());
    };
    if !(share > 0.0 && share < 1.0) {
        return Err(ConfigError::invalid(
            "params.eigenvalue_share",
            "must be a number strictly between 0 and 1",
        ));
    }
    if with != Some(true) || info.releases_eigenvalues {
        return Err(ConfigError::invalid(
            "params.eigenvalue_share",
            "applies only with with_eigenvalues = true on an algorithm that does not release eigenvalues itself",
        ));
    }
    Ok(())
}

/// What the `clip` option comes to.
enum ClipChoice {
    /// Clip at the quantile q with the share of ρ; whether `"auto"` chose them.
    Clip(((f64, f64), bool)),
    /// `"auto"` chose not to clip.
    Declined,
    /// No clip asked for.
    None,
}

/// The clip a job gets: `clip` as asked, or `"auto"` by default (`defaulted`) on records
/// datasets for every algorithm that adds noise (docs/utility.md "The clip rule").
fn choose_clip(
    info: &AlgorithmInfo,
    asked: Option<clipping::ClipParam>,
    defaulted: bool,
    ctx: &DataContext,
    rho: f64,
    k: usize,
) -> Result<ClipChoice, ConfigError> {
    let request = if defaulted {
        Some(ClipRequest::Auto)
    } else {
        clipping::request(asked, ctx)?
    };
    Ok(match request {
        Some(ClipRequest::Auto) => match clipping::auto_choice(ctx, rho, k, info.clip_noise_factor) {
            Some(choice) => ClipChoice::Clip((choice, true)),
            None => ClipChoice::Declined,
        },
        Some(ClipRequest::Quantile { quantile, share }) => ClipChoice::Clip(((quantile, share), false)),
        None => ClipChoice::None,
    })
}

/// The algorithm's target after the options' costs (module doc, "The ρ split"): refused on the
/// share that leaves it nothing, and nudged down so that the composed total never exceeds the
/// target's ρ in floating point.
fn split_rest(options: &Options, target: &PrivacyTarget) -> Result<PrivacyTarget, ConfigError> {
    let rho = target.rho;
    let extras = options.cost();
    let mut rest = rho - extras.rho;
    if !(rest > 0.0) {
        let field = if options.center.is_some() {
            "params.center_share"
        } else if options.eigenvalues.is_some() {
            "params.eigenvalue_share"
        } else {
            "params.clip.share"
        };
        return Err(ConfigError::invalid(
            field,
            "center_share, eigenvalue_share and the clip share together must leave part of the budget to the algorithm",
        ));
    }
    while extras.rho + rest > rho {
        rest = rest.next_down();
    }
    Ok(PrivacyTarget {
        public_default: false,
        rho: rest,
        delta: target.delta,
        // Targets reach here as ρ (an (ε, δ) target is calibrated in `prepare`).
        epsilon: None,
    })
}
