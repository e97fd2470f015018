//! Statistical checks of noise scale, shared by the mechanism tests. Public (not `cfg(test)`)
//! so that integration tests and experiments can use them; nothing in the service calls them.
//!
//! Each check is a two-sided z-test with a threshold of 5 standard errors (a false alarm rate
//! near 6e-7), so seeded tests are stable while a scale that is wrong by 10 % is caught with a
//! few thousand draws.
//!
//! Every acceptance condition is written in positive form (`ok = z <= threshold`, then
//! `if !ok`), so a NaN anywhere (in the draws or the expected scale) fails the check instead of
//! slipping through.

/// z threshold shared by all checks.
pub const Z_THRESHOLD: f64 = 5.0;

/// Smallest sample the checks accept: below it the normal approximations are too rough.
pub const MIN_DRAWS: usize = 100;

/// Rejects samples that are too small or contain a non-finite value, and an expected scale
/// (named `what` in the message) that is not finite and > 0; returns n and the sample mean.
fn sample_mean(values: &[f64], expected: f64, what: &str) -> Result<(f64, f64), String> {
    if values.len() < MIN_DRAWS {
        return Err(format!("need at least {MIN_DRAWS} draws, got {}", values.len()));
    }
    if let Some(i) = values.iter().position(|v| !v.is_finite()) {
        return Err(format!("draw {i} is not finite ({})", values[i]));
    }
    let valid = expected > 0.0 && expected.is_finite();
    if !valid {
        return Err(format!("expected {what} must be finite and > 0, got {expected}"));
    }
    let n = values.len() as f64;
    Ok((n, values.iter().sum::<f64>() / n))
}

/// Accepts when the mean's z-score `z_mean` and the scale's `z_scale` are both within
/// [`Z_THRESHOLD`]; a failure says which (`mismatch` describes a scale that is off).
fn within_threshold(
    mean: f64,
    z_mean: f64,
    z_scale: f64,
    mismatch: impl FnOnce() -> String,
) -> Result<(), String> {
    let mean_ok = z_mean.abs() <= Z_THRESHOLD;
    if !mean_ok {
        return Err(format!("mean {mean:.4e} is not 0 (z = {z_mean:.2})"));
    }
    let scale_ok = z_scale.abs() <= Z_THRESHOLD;
    if !scale_ok {
        return Err(mismatch());
    }
    Ok(())
}

/// Checks that `values` look like iid N(0, expected_sd²): the mean is 0 and Σx²/σ² is within
/// [`Z_THRESHOLD`] standard errors of n (χ²_n, normal approximation).
pub fn check_gaussian_scale(values: &[f64], expected_sd: f64) -> Result<(), String> {
    let (n, mean) = sample_mean(values, expected_sd, "sd")?;
    let z_mean = mean * n.sqrt() / expected_sd;
    let chi2 = values.iter().map(|v| (v / expected_sd).powi(2)).sum::<f64>();
    let z_var = (chi2 - n) / (2.0 * n).sqrt();
    within_threshold(mean, z_mean, z_var, || {
        let empirical = (chi2 / n).sqrt() * expected_sd;
        format!(
            "empirical sd {empirical:.6e} does not match expected {expected_sd:.6e} (z = {z_var:.2}, n = {n})"
        )
    })
}

/// Checks that `values` look like iid Laplace(0, expected_b): the mean is 0 and Σ|x|/b is
/// within [`Z_THRESHOLD`] standard errors of n (|x|/b ~ Exp(1): mean 1, variance 1).
pub fn check_laplace_scale(values: &[f64], expected_b: f64) -> Result<(), String> {
    let (n, mean) = sample_mean(values, expected_b, "scale")?;
    let z_mean = mean * n.sqrt() / (expected_b * 2.0_f64.sqrt());
    let abs_sum = values.iter().map(|v| v.abs() / expected_b).sum::<f64>();
    let z_scale = (abs_sum - n) / n.sqrt();
    within_threshold(mean, z_mean, z_scale, || {
        format!(
            "empirical scale {:.6e} does not match expected {expected_b:.6e} (z = {z_scale:.2}, n = {n})",
            abs_sum / n * expected_b
        )
    })
}

/// Asserts that `got` bounds `reference` from above, tightly: reference ≤ got ≤
/// reference·(1 + `slack`). `case` names the inputs in the message.
#[track_caller]
pub fn assert_tight_above(got: f64, reference: f64, slack: f64, case: impl std::fmt::Display) {
    assert!(got >= reference, "{case}: {got} < {reference}");
    assert!(got <= reference * (1.0 + slack), "{case}: {got} ≫ {reference}");
}

#[cfg(test)]
#[path = "testing_tests.rs"]
mod tests;

/// A query value as a release on grid `grid` holds it: round(q/h)·h (unchanged when `grid` is 0,
/// for draws that are not on a grid). Replays of a run use it to rebuild the released values
/// from the exact query and the audited noise.
pub fn on_grid(q: f64, grid: f64) -> f64 {
    if grid > 0.0 { (q / grid).round() * grid } else { q }
}

/// Whether an audited scale is the calibrated one widened by the grid's sensitivity rounding
/// only: recorded ∈ [calibrated, calibrated·(1 + 10⁻⁶)] (the widening is √m·h/Δ with
/// h ≤ 2⁻³⁰·σ, below 10⁻⁶ for the tests' sizes).
pub fn is_widened(recorded: f64, calibrated: f64) -> bool {
    recorded >= calibrated && recorded <= calibrated * (1.0 + 1e-6)
}

/// The relative excess of an audited scale over the calibrated one, or ∞ when it is below it
/// (under-noised). Tests bound it by 10⁻⁶ (see [`is_widened`]).
pub fn scale_excess(recorded: f64, calibrated: f64) -> f64 {
    if recorded >= calibrated {
        recorded / calibrated - 1.0
    } else {
        f64::INFINITY
    }
}
