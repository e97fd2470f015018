//! The list of algorithms the service offers, and the object-safe view of [`Algorithm`] the
//! rest of the service uses (configurations travel as JSON between submission and run).

use serde_json::{Map, Value, json};

use super::analyze_gauss::AnalyzeGauss;
use super::clipping::{self, ClipConfig};
use super::exact::Exact;
use super::noisy_power::NoisyPower;
use super::options::{Options, clip_by_default};
use super::{
    Algorithm, AlgorithmInfo, ConfigError, DataInput, NoiseScale, Output, Run, RunError, parameters,
};
use crate::dataset::DataContext;
use crate::privacy::target::{calibrations, within};
use crate::privacy::{Cost, Delta, Epsilon, PrivacyTarget};

/// A job ready to be charged and queued.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The full configuration, defaults filled in and noise calibrated: the algorithm's own
    /// configuration object, plus the keys `center`, `with_eigenvalues` and `eigenvalues` when
    /// the generic options are used.
    pub config: Value,
    /// What the ledger charges: the options' costs composed with the algorithm's cost formula.
    pub cost: Cost,
    pub noise: Vec<NoiseScale>,
}

/// Object-safe face of an [`Algorithm`].
pub trait DynAlgorithm: Send + Sync {
    /// Its entry in the [`super::catalog`].
    fn info(&self) -> &'static AlgorithmInfo;

    /// The JSON Schema of the `params` a job may send: the algorithm's own parameters and the
    /// generic options that apply to it (see [`super::parameters`]).
    fn parameters(&self) -> Value;

    /// Check the dataset fits, parse and validate `params`, calibrate to `target`, and price.
    fn prepare(
        &self,
        params: Value,
        ctx: &DataContext,
        target: &PrivacyTarget,
    ) -> Result<Prepared, ConfigError>;

    /// Run a configuration produced by [`DynAlgorithm::prepare`].
    fn run_prepared(&self, config: &Value, run: Run<'_, '_>) -> Result<Output, RunError>;
}

/// `params` with the default clip turned off (`"clip": "none"`), when the job did not mention
/// `clip` and the default applies; `None` otherwise.
fn without_default_clip(
    info: &AlgorithmInfo,
    own: &Map<String, Value>,
    params: &Value,
    ctx: &DataContext,
) -> Option<Value> {
    let Value::Object(map) = params else {
        return None;
    };
    if map.contains_key("clip") || !clip_by_default(info, own, ctx) {
        return None;
    }
    let mut map = map.clone();
    map.insert("clip".into(), json!("none"));
    Some(Value::Object(map))
}

/// The `k` of an algorithm configuration, for display of the eigenvalue release.
fn config_k(config: &Value) -> Option<usize> {
    config.get("k").and_then(Value::as_u64).map(|k| k as usize)
}

impl<A: Algorithm> DynAlgorithm for A {
    fn info(&self) -> &'static AlgorithmInfo {
        A::INFO
    }

    fn parameters(&self) -> Value {
        parameters::published(A::INFO, parameters::schema_of::<A::Params>())
    }

    fn prepare(
        &self,
        params: Value,
        ctx: &DataContext,
        target: &PrivacyTarget,
    ) -> Result<Prepared, ConfigError> {
        let info = A::INFO;
        if info.public_only && !ctx.public {
            return Err(ConfigError::PublicOnly(format!(
                "algorithm `{}` computes non-private results and runs only on datasets marked public",
                info.name
            )));
        }
        if !info.kinds.contains(&ctx.kind()) || !info.relations.contains(&ctx.relation()) {
            return Err(ConfigError::Unsupported(
                format!(
                    "algorithm `{}` does not support {} datasets with relation `{}` (it supports kinds {:?} with relations {:?})",
                    info.name,
                    ctx.kind().as_str(),
                    ctx.relation().as_str(),
                    info.kinds.iter().map(|k| k.as_str()).collect::<Vec<_>>(),
                    info.relations.iter().map(|r| r.as_str()).collect::<Vec<_>>(),
                ) + &info
                    .scope_reason
                    .map(|why| format!(": {why}"))
                    .unwrap_or_default(),
            ));
        }
        let params = if params.is_null() {
            Value::Object(Default::default())
        } else {
            params
        };
        let first = prepare_target(self, info, params.clone(), ctx, target);
        // The default clip takes a share of ρ from the algorithm; where that share makes it
        // refuse (e.g. k_dp_pca needs a minimum budget for its n), the job runs unclipped, as
        // it did before the default.
        if first.is_err()
            && let Some(unclipped) =
                without_default_clip(info, &parameters::schema_of::<A::Params>(), &params, ctx)
        {
            return prepare_target(self, info, unclipped, ctx, target);
        }
        first
    }

    fn run_prepared(&self, config: &Value, run: Run<'_, '_>) -> Result<Output, RunError> {
        let Run { input, ctx, env } = run;
        let (own, options) = Options::load(&parameters::schema_of::<A::Params>(), config)?;
        let config: A::Config = serde_json::from_value(own)
            .map_err(|e| RunError::Failed(format!("stored configuration is unreadable: {e}")))?;
        let centred;
        let input = match (&options.center, input) {
            (None, input) => input,
            (Some(center), DataInput::Records { xt }) => {
                centred = center.apply(xt, ctx, env)?;
                DataInput::Records {
                    xt: (&centred).into(),
                }
            }
            (Some(_), DataInput::Matrix { .. } | DataInput::Sparse { .. }) => {
                return Err(RunError::Failed(
                    "centering applies to records datasets only".into(),
                ));
            }
        };
        let clipped;
        let clipped_ctx;
        let reconfigured;
        let (input, ctx, config) = match (&options.clip, input) {
            (None, input) => (input, ctx, &config),
            (Some(clip), DataInput::Records { xt }) => {
                let c = clip.search(xt, env)?;
                env.record_release("clip_norm", c);
                let tail = clip.tail_bound(ctx.n, c);
                clipped = clipping::ClippedRecords::new(xt, c, A::INFO.stats_suffice, tail);
                clipped_ctx = clipping::clipped_context(ctx, c);
                reconfigured = reconfigure_at_clip(self, clip, &config, ctx, &clipped_ctx)?;
                (
                    DataInput::Records {
                        xt: clipped.records(),
                    },
                    &clipped_ctx,
                    &reconfigured,
                )
            }
            (Some(_), DataInput::Matrix { .. } | DataInput::Sparse { .. }) => {
                return Err(RunError::Failed(
                    "clipping applies to records datasets only".into(),
                ));
            }
        };
        let mut output = self.run(config, Run { input, ctx, env })?;
        match options.with_eigenvalues {
            Some(false) => output.eigenvalues = None,
            Some(true) => {
                if let Some(e) = &options.eigenvalues {
                    // After clipping, `ctx` holds the released bound c: the quotients are
                    // calibrated to it, at the ρ_e charged.
                    let e = match options.clip {
                        Some(_) => e.at_bounds(ctx),
                        None => e.clone(),
                    };
                    output.eigenvalues = Some(e.release(input, &output.basis, env)?);
                }
            }
            None => {}
        }
        Ok(output)
    }
}

/// The (ε, δ) of a target stated that way, checked; `None` for a ρ target.
fn stated_epsilon_delta(target: &PrivacyTarget) -> Result<Option<(Epsilon, Delta)>, ConfigError> {
    let Some(epsilon) = target.epsilon else {
        return Ok(None);
    };
    let epsilon =
        Epsilon::new(epsilon).map_err(|e| ConfigError::invalid("privacy.epsilon", e.to_string()))?;
    let delta = target
        .delta
        .ok_or_else(|| ConfigError::invalid("privacy.delta", "epsilon needs delta"))
        .and_then(|d| Delta::new(d).map_err(|e| ConfigError::invalid("privacy.delta", e.to_string())))?;
    Ok(Some((epsilon, delta)))
}

/// Options, configuration, cost and noise of `algorithm` at a ρ target.
/// [`DynAlgorithm::prepare`] at one target: a ρ target as it is, an (ε, δ) target by
/// `privacy::target::calibrations`.
fn prepare_target<A: Algorithm>(
    algorithm: &A,
    info: &AlgorithmInfo,
    params: Value,
    ctx: &DataContext,
    target: &PrivacyTarget,
) -> Result<Prepared, ConfigError> {
    let Some((epsilon, delta)) = stated_epsilon_delta(target)? else {
        return prepare_at(algorithm, info, params, ctx, target);
    };

    // An (ε, δ) target is a promise about the whole job (docs/design/privacy.md §2.4): try
    // the ρ targets of `privacy::target::calibrations` in order and keep the first
    // configuration whose cost is (ε, δ)-DP by the rule that fits it.
    let mut last = None;
    for attempt in calibrations(epsilon, delta) {
        match prepare_at(algorithm, info, params.clone(), ctx, &attempt) {
            Ok(prepared) if within(&prepared.cost, epsilon.get(), delta.get()) => return Ok(prepared),
            Ok(_) => {}
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        ConfigError::invalid(
            "privacy",
            format!(
                "algorithm `{}` cannot be calibrated to (ε, δ) = ({}, {:e})",
                info.name,
                epsilon.get(),
                delta.get()
            ),
        )
    }))
}

fn prepare_at<A: Algorithm>(
    algorithm: &A,
    info: &AlgorithmInfo,
    mut params: Value,
    ctx: &DataContext,
    target: &PrivacyTarget,
) -> Result<Prepared, ConfigError> {
    let own = parameters::schema_of::<A::Params>();
    let (options, algorithm_target) = Options::take(info, &own, &mut params, ctx, target)?;
    let parsed: A::Params = parameters::parse_params(params)?;
    let config = algorithm.configure(parsed, ctx, &algorithm_target)?;
    let cost = options.cost().then(algorithm.cost(&config, ctx));
    let mut noise = algorithm.noise_scales(&config, ctx);
    let mut config = serde_json::to_value(&config)
        .map_err(|e| ConfigError::invalid("params", format!("configuration not serialisable: {e}")))?;
    noise.extend(options.noise(ctx.d, config_k(&config)));
    options.store(&mut config)?;
    Ok(Prepared { config, cost, noise })
}

/// Configures `algorithm` again at the released clip bound (β = c), from the parameters and the
/// share of the target stored at submission, and checks that it costs no more than the
/// configuration the ledger charged (costs are functions of the parameters and ρ only; a
/// mismatch is a bug and fails the run, the charge standing).
fn reconfigure_at_clip<A: Algorithm>(
    algorithm: &A,
    clip: &ClipConfig,
    charged: &A::Config,
    ctx: &DataContext,
    clipped: &DataContext,
) -> Result<A::Config, RunError> {
    let params: A::Params = serde_json::from_value(clip.algorithm_params.clone())
        .map_err(|e| RunError::Failed(format!("stored parameters are unreadable: {e}")))?;
    let config = algorithm
        .configure(params, clipped, &clip.algorithm_target)
        .map_err(|e| {
            RunError::Failed(format!(
                "the algorithm cannot run at the released clip bound: {e}"
            ))
        })?;
    let before = algorithm.cost(charged, ctx);
    let after = algorithm.cost(&config, clipped);
    // Compared as the ledger records them (units, rounded up): the new configuration may cost
    // no more than what was actually charged, with no float slack on top.
    use crate::privacy::units::{DELTA_UNIT, RHO_UNIT, charge_units};
    let within_rho = |a: f64, b: f64| charge_units(a, RHO_UNIT) <= charge_units(b, RHO_UNIT);
    let within_delta = |a: f64, b: f64| charge_units(a, DELTA_UNIT) <= charge_units(b, DELTA_UNIT);
    let kinds_match = after.other_rho == 0.0 || before.other_rho > 0.0;
    if !(within_rho(after.rho, before.rho) && within_delta(after.delta, before.delta) && kinds_match) {
        return Err(RunError::Failed(
            "internal error: the configuration at the clip bound would cost more than was charged".into(),
        ));
    }
    Ok(config)
}

/// Every algorithm the service offers, in the order `GET /v1/algorithms` lists them.
pub fn registry() -> &'static [&'static dyn DynAlgorithm] {
    &[
        &NoisyPower,
        &AnalyzeGauss,
        &super::coherent_power::CoherentPower,
        &super::eigen_sampling::EigenSampling,
        &super::k_dp_pca::KDpPca,
        &super::dp_oja::DpOja,
        &super::federated_power::FederatedPower,
        &super::cape_pca::CapePca,
        &super::gossip::power::GossipPower,
        &super::cape_agn::CapeAgn,
        &Exact,
    ]
}

/// The algorithms that run across sites as studies, in catalog order.
pub fn study_algorithms() -> Vec<&'static str> {
    registry()
        .iter()
        .map(|a| a.info())
        .filter(|info| info.study.is_some())
        .map(|info| info.name)
        .collect()
}

/// The algorithm called `name`.
pub fn find(name: &str) -> Option<&'static dyn DynAlgorithm> {
    registry().iter().copied().find(|a| a.info().name == name)
}

/// What a queued job may run: an algorithm of [`registry()`], or a release the service submits
/// itself and does not offer as a PCA ([`super::spectrum`], the forecast's paid spectrum).
pub fn find_runnable(name: &str) -> Option<&'static dyn DynAlgorithm> {
    find(name).or_else(|| (name == super::spectrum::NAME).then_some(&super::spectrum::Spectrum as _))
}

#[cfg(test)]
#[path = "registry_target_tests.rs"]
mod target_tests;
