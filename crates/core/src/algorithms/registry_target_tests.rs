//! Every algorithm of the registry keeps a job's (ε, δ) target (docs/design/privacy.md §2.4):
//! over a grid of targets, the configured cost is (ε, δ)-DP by the conversion rules the doc
//! states — the exact Gaussian curve for Gaussian-only costs, CKS 2020 at δ minus the
//! approximate δ otherwise — checked here independently of `privacy::target::within`.

use serde_json::json;

use super::registry;
use crate::algorithms::testing::ro;
use crate::dataset::{DataContext, Neighbours};
use crate::privacy::gaussian_curve::{delta_upper, max_gaussian_rho};
use crate::privacy::{Cost, Delta, Epsilon, PrivacyTarget, rho_to_epsilon};

fn records(d: usize, n: usize) -> DataContext {
    DataContext {
        d,
        n: Some(n),
        neighbours: ro(1.0, (d as f64).sqrt()),
        public: false,
        sparse: false,
    }
}

fn matrix(m: usize) -> DataContext {
    DataContext {
        d: m,
        n: Some(m),
        neighbours: Neighbours::Entry { u: 1.0 },
        public: false,
        sparse: false,
    }
}

/// The doc's rule, written out again.
fn keeps(cost: &Cost, epsilon: f64, delta: f64) -> bool {
    if cost.delta == 0.0 && cost.other_rho == 0.0 {
        delta_upper(epsilon, (2.0 * cost.rho).sqrt()) <= delta
    } else {
        delta - cost.delta > 0.0
            && rho_to_epsilon(cost.rho, Delta::new(delta - cost.delta).unwrap()) <= epsilon
    }
}

fn params(name: &str) -> serde_json::Value {
    match name {
        "cape_agn" => json!({ "k": 2, "model": "mog", "sigma2": 0.0 }),
        _ => json!({ "k": 2 }),
    }
}

#[test]
fn every_algorithm_keeps_an_epsilon_delta_target() {
    let grid = [
        (0.1, 1e-6),
        (0.5, 1e-5),
        (1.0, 1e-5),
        (1.0, 1e-8),
        (2.0, 1e-3),
        (8.0, 1e-6),
    ];
    let contexts = [records(8, 20_000_000), matrix(40)];
    for algorithm in registry() {
        let info = algorithm.info();
        if info.public_only {
            continue;
        }
        let mut priced = 0;
        for ctx in &contexts {
            if !info.kinds.contains(&ctx.kind()) {
                continue;
            }
            for (epsilon, delta) in grid {
                let target = PrivacyTarget {
                    public_default: false,
                    // The HTTP layer fills in the CKS ρ; the registry must not rely on it.
                    rho: 1e6,
                    delta: Some(delta),
                    epsilon: Some(epsilon),
                };
                let prepared = match algorithm.prepare(params(info.name), ctx, &target) {
                    Ok(p) => p,
                    Err(e) => {
                        // Only k_dp_pca may refuse (too few records for PrivRange at small ε).
                        assert_eq!(
                            info.name, "k_dp_pca",
                            "{} at ({epsilon}, {delta}): {e}",
                            info.name
                        );
                        continue;
                    }
                };
                let cost = prepared.cost;
                assert!(
                    keeps(&cost, epsilon, delta),
                    "{} at ({epsilon}, {delta}) costs {cost:?}",
                    info.name
                );
                // A Gaussian-only job uses (almost) all of the exact curve's room.
                if cost.is_gaussian_only() {
                    assert!(
                        cost.rho >= 0.99 * max_gaussian_rho(epsilon, delta),
                        "{} {cost:?}",
                        info.name
                    );
                }
                priced += 1;
            }
        }
        assert!(priced >= 3, "{} was priced at {priced} targets only", info.name);
    }
}

#[test]
fn options_stay_inside_the_target_too() {
    let ctx = records(8, 1_000_000);
    let target = PrivacyTarget::from_epsilon_delta(Epsilon::new(1.0).unwrap(), Delta::new(1e-5).unwrap());
    for name in ["noisy_power", "coherent_power", "k_dp_pca"] {
        let algorithm = super::find(name).unwrap();
        let params = json!({ "k": 1, "center": "private", "with_eigenvalues": true, "clip": "auto" });
        let prepared = algorithm
            .prepare(params, &ctx, &target)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(keeps(&prepared.cost, 1.0, 1e-5), "{name}: {:?}", prepared.cost);
    }
}

#[test]
fn k_dp_pca_at_one_and_1e_5_costs_no_more_than_a_gaussian_release() {
    // The case: it was charged (0.5, 1e-5), about (4.7, 2e-5)-DP.
    let ctx = records(4, 3_000);
    let target = PrivacyTarget::from_epsilon_delta(Epsilon::new(1.0).unwrap(), Delta::new(1e-5).unwrap());
    let algorithm = super::find("k_dp_pca").unwrap();
    let prepared = algorithm
        .prepare(json!({ "k": 1, "batch_size": 3000 }), &ctx, &target)
        .unwrap();
    let cost = prepared.cost;
    assert!(cost.rho <= 0.0359 && cost.delta <= 1e-5, "{cost:?}");
    assert!(cost.rho > 0.028 && cost.delta > 4.9e-6, "{cost:?}");
    assert!(keeps(&cost, 1.0, 1e-5));
}
