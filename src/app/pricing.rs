//! Pricing a job, shared by submission and planning: which algorithm runs (`auto` picks one
//! from public facts), the target it is calibrated to (the client's, or the public default),
//! its cost checked against that target, and the charge in ledger units
//! ([`Spending::of_cost`], the one conversion from a cost to units).

use serde_json::{Value, json};

use super::error::AppError;
use super::targets::PrivacyInput;
use crate::algorithms::{self, DynAlgorithm, Prepared};
use crate::context::data_context;
use crate::privacy::admission::Spending;
use crate::privacy::target::within;
use crate::privacy::{Cost, PrivacyTarget};
use crate::store::DatasetRecord;

/// The target of a job on a public dataset that states none: ρ = 1e6 (the ledger's largest
/// amount), δ = 1e-5 for approximate parts. Public data need no protection (docs/design/privacy.md §3);
/// this runs every algorithm at its practically noise-free limit, which is what comparing
/// algorithms on open data needs, and `exact` ignores it.
pub const PUBLIC_DEFAULT_PRIVACY: PrivacyInput = PrivacyInput {
    rho: Some(crate::privacy::units::MAX_RHO),
    epsilon: None,
    delta: Some(1e-5),
};

/// Everything needed to charge and queue a job.
pub struct Priced {
    /// The configuration that runs, its cost and noise.
    pub prepared: Prepared,
    /// What the ledger charges, in units.
    pub charge: Spending,
    /// The privacy the job runs at, as stored with it.
    pub privacy: PrivacyInput,
}

/// A job priced under the algorithm that will run, and how it was chosen when the client
/// asked for `auto`.
pub struct Resolved {
    pub name: &'static str,
    pub priced: Priced,
    pub selection: Option<Value>,
}

/// The algorithm called `name` (not `auto`), or a validation error listing the known names.
pub fn find_algorithm(name: &str) -> Result<&'static dyn DynAlgorithm, AppError> {
    algorithms::find(name).ok_or_else(|| {
        let known: Vec<&str> = algorithms::registry().iter().map(|a| a.info().name).collect();
        AppError::validation(
            "algorithm",
            format!("unknown algorithm `{name}`; known: auto, {}", known.join(", ")),
        )
    })
}

/// Prices `name` on `dataset`; for `auto`, the first candidate of
/// [`algorithms::auto::candidates`] that accepts the parameters (public facts only), or a
/// validation error naming why each was not eligible.
pub fn resolve(
    name: &str,
    dataset: &DatasetRecord,
    params: &Value,
    privacy: Option<&PrivacyInput>,
) -> Result<Resolved, AppError> {
    if name == algorithms::auto::AUTO {
        return resolve_auto(dataset, params, privacy);
    }
    let algorithm = find_algorithm(name)?;
    Ok(Resolved {
        name: algorithm.info().name,
        priced: price(algorithm, dataset, params.clone(), privacy)?,
        selection: None,
    })
}

fn resolve_auto(
    dataset: &DatasetRecord,
    params: &Value,
    privacy: Option<&PrivacyInput>,
) -> Result<Resolved, AppError> {
    // A malformed target is the client's privacy field, not something a candidate refused.
    if let Some(privacy) = privacy {
        privacy.parse("privacy")?;
    }
    let ctx = data_context(dataset).ok_or_else(|| AppError::conflict("the dataset has no data yet"))?;
    let mut refusals = Vec::new();
    for (candidate, because) in algorithms::auto::candidates(&ctx) {
        let algorithm = find_algorithm(candidate)?;
        match price(algorithm, dataset, params.clone(), privacy) {
            Ok(priced) => {
                return Ok(Resolved {
                    name: algorithm.info().name,
                    priced,
                    selection: Some(json!({
                        "requested": algorithms::auto::AUTO,
                        "chose": candidate,
                        "because": because,
                    })),
                });
            }
            Err(e) => refusals.push(format!("{candidate}: {}", e.detail)),
        }
    }
    Err(AppError::validation(
        "algorithm",
        format!(
            "auto: no algorithm is eligible for this job ({})",
            refusals.join("; ")
        ),
    ))
}

/// The privacy a job states, or the public default; a private dataset needs one.
pub fn job_privacy(
    dataset: &DatasetRecord,
    privacy: Option<&PrivacyInput>,
) -> Result<PrivacyInput, AppError> {
    match privacy {
        Some(p) => Ok(p.clone()),
        None if dataset.public => Ok(PUBLIC_DEFAULT_PRIVACY),
        None => Err(AppError::validation(
            "privacy",
            "a job on a private dataset needs a privacy target: {\"rho\": …} or {\"epsilon\": …, \"delta\": …}",
        )),
    }
}

/// Calibrates `algorithm` to the job's target on `dataset` and prices it.
pub fn price(
    algorithm: &dyn DynAlgorithm,
    dataset: &DatasetRecord,
    params: Value,
    privacy: Option<&PrivacyInput>,
) -> Result<Priced, AppError> {
    let stated = privacy.is_some();
    let privacy = job_privacy(dataset, privacy)?;
    let mut target = privacy.parse("privacy")?;
    // No privacy at all: a public dataset and no target stated (see `PrivacyTarget::public_default`).
    target.public_default = !stated && dataset.public;
    let ctx = data_context(dataset).ok_or_else(|| AppError::conflict("the dataset has no data yet"))?;
    let name = algorithm.info().name;
    algorithms::storage::check_storage(algorithm.info(), dataset.nnz.is_some())?;
    let prepared = algorithm.prepare(params, &ctx, &target)?;
    let cost = prepared
        .cost
        .check()
        .map_err(|e| AppError::internal(format!("algorithm {name} produced an invalid cost: {e}")))?;
    check_within_target(name, &cost, &target)?;
    Ok(Priced {
        charge: Spending::of_cost(&cost),
        prepared,
        privacy,
    })
}

/// Calibration is each algorithm's contract; a cost above the target is a bug, never charged
/// silently. An (ε, δ) target must hold for the whole job (docs/design/privacy.md §2.4); a ρ
/// target holds with a relative slack of 1e-9 for floating point.
fn check_within_target(name: &str, cost: &Cost, target: &PrivacyTarget) -> Result<(), AppError> {
    let allowed_delta = target.delta.unwrap_or(0.0);
    let fits = match (target.epsilon, target.delta) {
        (Some(epsilon), Some(delta)) => within(cost, epsilon, delta),
        _ => cost.rho <= target.rho * (1.0 + 1e-9) && cost.delta <= allowed_delta * (1.0 + 1e-9),
    };
    if fits {
        return Ok(());
    }
    if target.epsilon.is_none() && cost.delta > allowed_delta {
        return Err(AppError::validation(
            "privacy.delta",
            format!(
                "this algorithm spends δ = {:e}; give at least that as privacy.delta",
                cost.delta
            ),
        ));
    }
    Err(AppError::internal(format!(
        "algorithm {name} calibrated to cost {cost:?} above target {target:?}"
    )))
}
