//! The exact Gaussian curve against references computed with mpmath at 50 digits
//! (python3: `ncdf(-e/mu + mu/2) - exp(e)*ncdf(-e/mu - mu/2)`; the ρ's by 200 bisection steps).

use super::*;
use crate::privacy::testing::assert_tight_above;
use crate::privacy::{Delta, Epsilon, epsilon_delta_to_rho};

#[test]
fn delta_matches_the_reference_and_rounds_up() {
    let cases = [
        (1.0, 0.5, 0.006_829_594_983_114_575_4),
        (1.0, 1.0, 0.126_936_737_506_643_95),
        (3.0, 1.0, 0.001_537_185_369_400_954_8),
        (0.5, 0.1, 6.856_582_455_838_737e-9),
        (10.0, 2.0, 9.940_202_816_118_153e-6),
    ];
    for (eps, mu, reference) in cases {
        assert_tight_above(delta_upper(eps, mu), reference, 1e-9, format!("ε={eps}, μ={mu}"));
    }
}

#[test]
fn max_gaussian_rho_matches_the_reference() {
    // docs/design/privacy.md §2: at (1, 1e-5) Σρ up to 0.0359.
    let cases = [
        (1.0, 1e-5, 0.035_925_702_327_418_217),
        (0.5, 1e-5, 0.010_111_921_498_511_694),
        (2.0, 1e-6, 0.100_502_019_722_612_45),
        (10.0, 1e-5, 2.000_891_340_150_049),
    ];
    for (eps, delta, reference) in cases {
        let got = max_gaussian_rho(eps, delta);
        assert!(got <= reference, "(ε, δ)=({eps}, {delta}): {got} > {reference}");
        assert!(
            got >= reference * (1.0 - 1e-8),
            "(ε, δ)=({eps}, {delta}): {got} ≪ {reference}"
        );
        assert!(delta_upper(eps, mu_of_rho(got)) <= delta);
    }
}

#[test]
fn the_exact_curve_is_tighter_than_cks_for_gaussians() {
    for (eps, delta) in [(0.1, 1e-6), (0.5, 1e-5), (1.0, 1e-5), (2.0, 1e-8), (8.0, 1e-5)] {
        let cks = epsilon_delta_to_rho(Epsilon::new(eps).unwrap(), Delta::new(delta).unwrap());
        let exact = max_gaussian_rho(eps, delta);
        assert!(exact > cks, "(ε, δ)=({eps}, {delta}): exact {exact} ≤ CKS {cks}");
    }
}

#[test]
fn epsilon_for_inverts_the_curve() {
    for (mu, delta) in [(0.268, 1e-5), (1.0, 1e-6), (0.01, 1e-9), (3.0, 1e-3)] {
        let eps = epsilon_for(mu, delta);
        assert!(delta_upper(eps, mu) <= delta);
        assert!(delta_upper(eps * (1.0 - 1e-9), mu) > delta * (1.0 - 1e-6));
    }
    assert_eq!(epsilon_for(0.0, 1e-5), 0.0);
}

#[test]
fn degenerate_inputs_are_conservative() {
    assert_eq!(delta_upper(1.0, 0.0), 0.0);
    assert_eq!(delta_upper(f64::NAN, 1.0), 1.0);
    assert_eq!(delta_upper(1.0, f64::INFINITY), 1.0);
    assert_eq!(delta_upper(-1.0, 1.0), 1.0);
    // A huge ε with a moderate μ: e^ε would overflow, the bound stays finite and tiny.
    assert!(delta_upper(800.0, 1.0) < 1e-300);
    assert_eq!(max_gaussian_rho(0.0, 1e-5), 0.0);
    assert_eq!(max_gaussian_rho(1.0, 0.0), 0.0);
}
