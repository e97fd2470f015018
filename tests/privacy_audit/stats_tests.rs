//! The Beta quantile and Clopper–Pearson bounds against closed forms, exact binomial sums and
//! published intervals.

use super::stats::*;

fn close(got: f64, want: f64, tol: f64) {
    assert!((got - want).abs() <= tol, "got {got}, want {want}");
}

#[test]
fn ln_gamma_matches_factorials_and_half_integers() {
    close(ln_gamma(1.0), 0.0, 1e-14);
    close(ln_gamma(5.0), 24f64.ln(), 1e-13);
    close(ln_gamma(0.5), std::f64::consts::PI.sqrt().ln(), 1e-13);
    close(ln_gamma(101.0), 363.739_375_555_563_5, 1e-9);
    close(ln_gamma(0.1), 2.252_712_651_734_206, 1e-12);
}

#[test]
fn incomplete_beta_matches_closed_forms() {
    // I_x(1, 1) = x; I_x(a, 1) = x^a; I_x(1, b) = 1 − (1 − x)^b; symmetry.
    close(incomplete_beta(1.0, 1.0, 0.3), 0.3, 1e-14);
    close(incomplete_beta(3.5, 1.0, 0.7), 0.7f64.powf(3.5), 1e-13);
    close(incomplete_beta(1.0, 20.0, 0.05), 1.0 - 0.95f64.powi(20), 1e-13);
    close(
        incomplete_beta(2.5, 7.0, 0.4),
        1.0 - incomplete_beta(7.0, 2.5, 0.6),
        1e-13,
    );
    // Binomial tail: I_p(k, n − k + 1) = P[Bin(n, p) ≥ k]; n = 10, p = 0.3, k = 4:
    // 1 − P[≤ 3] = 0.350_389_28 (exact binomial sum).
    close(incomplete_beta(4.0, 7.0, 0.3), 0.350_389_28, 1e-8);
    // Beta(0.5, 0.5) is the arcsine law: I_x = (2/π)·asin(√x).
    close(
        incomplete_beta(0.5, 0.5, 0.2),
        2.0 / std::f64::consts::PI * 0.2f64.sqrt().asin(),
        1e-12,
    );
}

#[test]
fn clopper_pearson_matches_published_intervals() {
    // 95 % two-sided intervals (α/2 = 0.025 per side), as R's binom.test gives them; checked
    // against a bisection on exact binomial sums.
    close(cp_upper(0, 10, 0.025), 1.0 - 0.025f64.powf(0.1), 1e-12); // 0.308 5
    close(cp_lower(10, 10, 0.025), 0.025f64.powf(0.1), 1e-12); // 0.691 5
    close(cp_lower(5, 10, 0.025), 0.187_086_3, 1e-6);
    close(cp_upper(5, 10, 0.025), 0.812_913_7, 1e-6);
    close(cp_lower(1, 10, 0.025), 0.002_528_579, 1e-8);
    close(cp_upper(1, 10, 0.025), 0.445_016_2, 1e-6);
    close(cp_lower(50, 1000, 0.025), 0.037_335_40, 1e-7);
    close(cp_upper(50, 1000, 0.025), 0.065_390_49, 1e-7);
    assert_eq!(cp_lower(0, 10, 0.01), 0.0);
    assert_eq!(cp_upper(10, 10, 0.01), 1.0);
}

#[test]
fn quantile_inverts_the_distribution_function() {
    for (a, b) in [(0.7, 3.0), (12.0, 988.0), (400.0, 3.0)] {
        for p in [1e-6, 0.01, 0.5, 0.99] {
            let x = beta_quantile(p, a, b);
            close(incomplete_beta(a, b, x), p, 1e-10 + 1e-8 * p);
        }
    }
}
