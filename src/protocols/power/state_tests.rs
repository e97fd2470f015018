use super::*;
use crate::algorithms::sensitivity::SensitivityMode;

fn config(multiplier: f64, iterations: u32) -> FederatedPowerConfig {
    FederatedPowerConfig {
        k: 2,
        p: 2,
        iterations,
        sensitivity: SensitivityMode::Auto,
        multiplier,
        sites: 3,
        threshold: 2,
        fraction_bits: 32,
        max_site_samples: 1000,
        dropouts: Vec::new(),
        secagg_plus: None,
    }
}

/// What an honest coordinator states: the noise's cost, rounded up to ledger units.
fn stated(config: &FederatedPowerConfig) -> f64 {
    RhoUnits::checked_charge(cost_of(config.iterations, config.multiplier))
        .unwrap()
        .to_real()
}

#[test]
fn an_honest_study_passes_for_many_multipliers() {
    for (multiplier, iterations) in [(0.37, 1), (3.0, 10), (12.5, 7), (123.456, 40), (1e4, 3)] {
        let config = config(multiplier, iterations);
        assert_eq!(
            check_noise_covers_cost(&config, stated(&config)),
            Ok(()),
            "m {multiplier}"
        );
    }
}

#[test]
fn a_study_asking_for_less_noise_than_it_charges_is_refused() {
    let honest = config(3.0, 10);
    let charged = stated(&honest);
    // The same stated cost with 5 % less noise (or 10 % more rounds): under-noised.
    for cheat in [config(2.85, 10), config(3.0, 11)] {
        let err = check_noise_covers_cost(&cheat, charged).unwrap_err();
        assert!(err.contains("more than the ρ"), "{err}");
    }
    // Stating a smaller cost than the noise provides is refused the same way.
    assert!(check_noise_covers_cost(&honest, charged * 0.99).is_err());
}

#[test]
fn invalid_multipliers_are_refused() {
    for multiplier in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(
            check_noise_covers_cost(&config(multiplier, 5), 1.0).is_err(),
            "{multiplier}"
        );
    }
    assert!(check_noise_covers_cost(&config(3.0, 0), 1.0).is_err());
}
