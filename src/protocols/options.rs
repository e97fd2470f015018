//! The options every study protocol takes the same way as a central job: `clip` and `center`
//! (with `center_share`), removed from a study's parameters before the protocol's own are
//! parsed ([`crate::algorithms::parameters::parse_params`]).

use serde_json::Value;

use super::PlanError;
use crate::algorithms::ConfigError;
use crate::algorithms::centering::{self, CenterParam, CenterRequest};
use crate::algorithms::clipping::{self, ClipMode, ClipParam, ClipRequest};
use crate::algorithms::power_clip::ClipAsk;
use crate::dataset::DataContext;

/// Removes `clip` from a study's parameters: `"auto"` (the default, as for a central job on
/// records), `"none"`, or `{"quantile": q, "share": f}`.
pub(crate) fn take_clip(params: &mut Value, ctx: &DataContext) -> Result<Option<ClipAsk>, PlanError> {
    let raw = match params {
        Value::Object(map) => map.remove("clip"),
        _ => None,
    };
    let param: ClipParam = match raw {
        None => ClipParam::Named(ClipMode::Auto),
        Some(v) => serde_json::from_value(v).map_err(|e| {
            ConfigError::invalid(
                "params.clip",
                format!("must be \"auto\", \"none\" or {{\"quantile\", \"share\"}}: {e}"),
            )
        })?,
    };
    Ok(clipping::request(Some(param), ctx)?.map(|request| match request {
        ClipRequest::Auto => ClipAsk::Auto,
        ClipRequest::Quantile { quantile, share } => ClipAsk::Quantile { quantile, share },
    }))
}

/// Removes `center` and `center_share` from a study's parameters: `"none"` (the default, as
/// for a central job), `"private"` with its share, or a public centre of d numbers
/// ([`centering::request`]).
pub(crate) fn take_center(params: &mut Value, ctx: &DataContext) -> Result<Option<CenterRequest>, PlanError> {
    let (center, share) = match params {
        Value::Object(map) => (map.remove("center"), map.remove("center_share")),
        _ => (None, None),
    };
    let center: Option<CenterParam> = center
        .map(|v| {
            serde_json::from_value(v).map_err(|e| {
                ConfigError::invalid(
                    "params.center",
                    format!("must be \"none\", \"private\" or an array of d numbers: {e}"),
                )
            })
        })
        .transpose()?;
    let share = share
        .map(|v| {
            v.as_f64()
                .ok_or_else(|| ConfigError::invalid("params.center_share", "must be a number"))
        })
        .transpose()?;
    Ok(centering::request(center, share, ctx)?)
}
