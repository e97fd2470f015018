//! Statistical checks of noise scale, shared by the mechanism tests. Public (not `cfg(test)`)
//! so that integration tests and experiments can use them; nothing in the service calls them.
//!
//! Each check is a two-sided z-test with a threshold of 5 standard errors (a false alarm rate
//! near 6e-7), so seeded tests are stable while a scale that is wrong by 10 % is caught with a
//! few thousand draws.

/// z threshold shared by all checks.
pub const Z_THRESHOLD: f64 = 5.0;

/// Checks that `values` look like iid N(0, expected_sd²): the mean is 0 and Σx²/σ² is within
/// [`Z_THRESHOLD`] standard errors of n (χ²_n, normal approximation).
pub fn check_gaussian_scale(values: &[f64], expected_sd: f64) -> Result<(), String> {
    let n = values.len() as f64;
    if values.len() < 100 {
        return Err(format!("need at least 100 draws, got {}", values.len()));
    }
    if !(expected_sd > 0.0) {
        return Err(format!("expected sd must be > 0, got {expected_sd}"));
    }
    let mean = values.iter().sum::<f64>() / n;
    let z_mean = mean * n.sqrt() / expected_sd;
    let chi2 = values.iter().map(|v| (v / expected_sd).powi(2)).sum::<f64>();
    let z_var = (chi2 - n) / (2.0 * n).sqrt();
    let empirical = (chi2 / n).sqrt() * expected_sd;
    if z_mean.abs() > Z_THRESHOLD {
        return Err(format!("mean {mean:.4e} is not 0 (z = {z_mean:.2})"));
    }
    if z_var.abs() > Z_THRESHOLD {
        return Err(format!(
            "empirical sd {empirical:.6e} does not match expected {expected_sd:.6e} (z = {z_var:.2}, n = {n})"
        ));
    }
    Ok(())
}

/// Checks that `values` look like iid Laplace(0, expected_b): the mean is 0 and Σ|x|/b is
/// within [`Z_THRESHOLD`] standard errors of n (|x|/b ~ Exp(1): mean 1, variance 1).
pub fn check_laplace_scale(values: &[f64], expected_b: f64) -> Result<(), String> {
    let n = values.len() as f64;
    if values.len() < 100 {
        return Err(format!("need at least 100 draws, got {}", values.len()));
    }
    if !(expected_b > 0.0) {
        return Err(format!("expected scale must be > 0, got {expected_b}"));
    }
    let mean = values.iter().sum::<f64>() / n;
    let z_mean = mean * n.sqrt() / (expected_b * 2.0_f64.sqrt());
    let abs_sum = values.iter().map(|v| v.abs() / expected_b).sum::<f64>();
    let z_scale = (abs_sum - n) / n.sqrt();
    if z_mean.abs() > Z_THRESHOLD {
        return Err(format!("mean {mean:.4e} is not 0 (z = {z_mean:.2})"));
    }
    if z_scale.abs() > Z_THRESHOLD {
        return Err(format!(
            "empirical scale {:.6e} does not match expected {expected_b:.6e} (z = {z_scale:.2}, n = {n})",
            abs_sum / n * expected_b
        ));
    }
    Ok(())
}
