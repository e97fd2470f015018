//! The (ε, δ) promise of a job: calibration targets, the rule that checks a cost, and the
//! statement a cost achieves.

use super::*;
use crate::privacy::gaussian_curve::delta_upper;

fn targets(epsilon: f64, delta: f64) -> [PrivacyTarget; 3] {
    calibrations(Epsilon::new(epsilon).unwrap(), Delta::new(delta).unwrap())
}

#[test]
fn the_three_calibrations_at_one_and_1e_5() {
    let [gaussian, zcdp, approximate] = targets(1.0, 1e-5);
    assert_eq!((gaussian.rho * 1e4) as i64, 359); // 0.0359: the exact curve at δ
    assert_eq!((zcdp.rho * 1e4) as i64, 305); // 0.0305…: CKS at δ
    assert_eq!((approximate.rho * 1e4) as i64, 283); // 0.0283…: CKS at δ/2
    assert_eq!(
        (gaussian.delta, zcdp.delta, approximate.delta),
        (None, None, Some(5e-6))
    );
    assert!([gaussian, zcdp, approximate].iter().all(|t| t.epsilon.is_none()));
}

#[test]
fn each_calibration_is_within_the_target_for_its_kind_of_cost() {
    for epsilon in [0.01, 0.1, 0.5, 1.0, 2.0, 8.0, 50.0] {
        for delta in [1e-12, 1e-9, 1e-6, 1e-5, 1e-3, 0.1] {
            let [gaussian, zcdp, approximate] = targets(epsilon, delta);
            // A Gaussian-only job spending all of the first target.
            assert!(within(&Cost::gaussian_zcdp(gaussian.rho), epsilon, delta));
            assert!(delta_upper(epsilon, (2.0 * gaussian.rho).sqrt()) <= delta);
            // Beyond it, one unit of ρ more than the certified maximum is not within.
            let over = max_gaussian_rho(epsilon, delta) * (1.0 + 1e-6);
            assert!(!within(&Cost::gaussian_zcdp(over), epsilon, delta));
            // A zCDP job (Laplace, exponential mechanism) at the second.
            assert!(within(&Cost::zcdp(zcdp.rho), epsilon, delta));
            assert!(!within(&Cost::zcdp(gaussian.rho), epsilon, delta));
            // An approximate job at the third, spending all of its δ.
            let spent = Cost::approximate((2.0 * approximate.rho).sqrt(), approximate.delta.unwrap());
            assert!(spent.rho <= approximate.rho * (1.0 + 1e-15));
            assert!(within(
                &Cost::zcdp(approximate.rho).then(Cost::approximate(0.0, approximate.delta.unwrap())),
                epsilon,
                delta
            ));
            // The old k_dp_pca charge (ε²/2, δ/2) is not within (ε, δ) at the usual δ's.
            if delta <= 1e-3 {
                assert!(!within(&Cost::approximate(epsilon, delta / 2.0), epsilon, delta));
            }
        }
    }
}

#[test]
fn achieved_reports_the_whole_statement() {
    let [gaussian, _, approximate] = targets(1.0, 1e-5);
    let g = achieved(&Cost::gaussian_zcdp(gaussian.rho), 1e-5);
    assert!(g.epsilon <= 1.0 && g.epsilon > 0.999, "{g:?}");
    assert_eq!(g.delta, 1e-5);
    let k = Cost::zcdp(approximate.rho).then(Cost::approximate(0.0, 5e-6));
    let a = achieved(&k, 1e-5);
    assert!(a.epsilon <= 1.0 && a.epsilon > 0.999, "{a:?}");
    assert_eq!(a.delta, 1e-5);
    // The old charge of k_dp_pca at (1, 1e-5): about (4.7, 1e-5 + 1e-5).
    let old = achieved(&Cost::approximate(1.0, 1e-5), 1e-5);
    assert!(old.epsilon > 4.0 && old.delta == 2e-5, "{old:?}");
    assert_eq!(achieved(&Cost::ZERO, 1e-5).epsilon, 0.0);
}
