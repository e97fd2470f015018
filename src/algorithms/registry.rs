//! The list of algorithms the service offers, and the object-safe view of [`Algorithm`] the
//! rest of the service uses (configurations travel as JSON between submission and run).

use serde_json::Value;

use super::analyze_gauss::AnalyzeGauss;
use super::exact::Exact;
use super::noisy_power::NoisyPower;
use super::{Algorithm, AlgorithmInfo, ConfigError, DataInput, NoiseScale, Output, RunEnv, RunError};
use crate::dataset::DataContext;
use crate::privacy::{Cost, PrivacyTarget};

/// A job ready to be charged and queued.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The full configuration, defaults filled in and noise calibrated.
    pub config: Value,
    /// What the ledger charges: the algorithm's cost formula on `config`.
    pub cost: Cost,
    pub noise: Vec<NoiseScale>,
}

/// Object-safe face of an [`Algorithm`].
pub trait DynAlgorithm: Send + Sync {
    fn info(&self) -> AlgorithmInfo;

    /// Check the dataset fits, parse and validate `params`, calibrate to `target`, and price.
    fn prepare(
        &self,
        params: Value,
        ctx: &DataContext,
        target: &PrivacyTarget,
    ) -> Result<Prepared, ConfigError>;

    /// Run a configuration produced by [`DynAlgorithm::prepare`].
    fn run_prepared(
        &self,
        config: &Value,
        input: DataInput<'_>,
        ctx: &DataContext,
        env: &mut RunEnv<'_>,
    ) -> Result<Output, RunError>;
}

impl<A: Algorithm> DynAlgorithm for A {
    fn info(&self) -> AlgorithmInfo {
        Algorithm::info(self)
    }

    fn prepare(
        &self,
        params: Value,
        ctx: &DataContext,
        target: &PrivacyTarget,
    ) -> Result<Prepared, ConfigError> {
        let info = Algorithm::info(self);
        if info.public_only && !ctx.public {
            return Err(ConfigError::PublicOnly(format!(
                "algorithm `{}` computes non-private results and runs only on datasets marked public",
                info.name
            )));
        }
        if !info.kinds.contains(&ctx.kind()) || !info.relations.contains(&ctx.relation()) {
            return Err(ConfigError::Unsupported(format!(
                "algorithm `{}` does not support {} datasets with relation `{}` (it supports kinds {:?} with relations {:?})",
                info.name,
                ctx.kind().as_str(),
                ctx.relation().as_str(),
                info.kinds.iter().map(|k| k.as_str()).collect::<Vec<_>>(),
                info.relations.iter().map(|r| r.as_str()).collect::<Vec<_>>(),
            )));
        }
        let params = if params.is_null() {
            Value::Object(Default::default())
        } else {
            params
        };
        let parsed: A::Params = serde_path_to_error::deserialize(params).map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." {
                "params".to_string()
            } else {
                format!("params.{path}")
            };
            ConfigError::invalid(field, e.into_inner().to_string())
        })?;
        let config = self.configure(parsed, ctx, target)?;
        let cost = self.cost(&config, ctx);
        let noise = self.noise_scales(&config, ctx);
        let config = serde_json::to_value(&config)
            .map_err(|e| ConfigError::invalid("params", format!("configuration not serialisable: {e}")))?;
        Ok(Prepared { config, cost, noise })
    }

    fn run_prepared(
        &self,
        config: &Value,
        input: DataInput<'_>,
        ctx: &DataContext,
        env: &mut RunEnv<'_>,
    ) -> Result<Output, RunError> {
        let config: A::Config = serde_json::from_value(config.clone())
            .map_err(|e| RunError::Failed(format!("stored configuration is unreadable: {e}")))?;
        self.run(input, &config, ctx, env)
    }
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
        &Exact,
    ]
}

/// The algorithm called `name`.
pub fn find(name: &str) -> Option<&'static dyn DynAlgorithm> {
    registry().iter().copied().find(|a| a.info().name == name)
}
